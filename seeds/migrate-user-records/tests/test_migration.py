"""Compares /app/data/v2 with the expected migration of the shipped v1 records (expected_v2.json)."""

import json
from pathlib import Path

import pytest

OUT = Path("/app/data/v2")
EXPECTED = json.loads((Path(__file__).parent / "expected_v2.json").read_text())


@pytest.fixture(scope="module")
def migrated():
    users = OUT / "users"
    assert users.is_dir(), "/app/data/v2/users does not exist"
    return {p.name: json.loads(p.read_text()) for p in users.glob("*.json")}


def field(migrated, *keys):
    return {name: [rec.get(k) for k in keys] for name, rec in migrated.items()}


def expected_field(*keys):
    return {name: [rec[k] for k in keys] for name, rec in EXPECTED.items()}


def test_one_file_per_valid_user(migrated):
    assert set(migrated) == set(EXPECTED)


def test_exact_key_set_and_version(migrated):
    assert migrated
    for rec in migrated.values():
        assert set(rec) == set(next(iter(EXPECTED.values())))
        assert rec["schema_version"] == 2


def test_ids_names_and_email(migrated):
    keys = ("id", "first_name", "last_name", "email")
    assert field(migrated, *keys) == expected_field(*keys)


def test_dates_iso(migrated):
    assert field(migrated, "signed_up") == expected_field("signed_up")


def test_phone_null_when_missing(migrated):
    assert field(migrated, "phone") == expected_field("phone")


def test_address_split(migrated):
    assert field(migrated, "address") == expected_field("address")


def test_roles_sorted_distinct(migrated):
    assert field(migrated, "roles") == expected_field("roles")


def test_active_boolean(migrated):
    assert field(migrated, "active") == expected_field("active")


def test_rejected_list():
    path = OUT / "rejected.txt"
    assert path.exists(), "rejected.txt missing"
    assert path.read_text().split() == ["u901.json", "u902.json"]


def test_index_of_active_users():
    path = OUT / "index.json"
    assert path.exists(), "index.json missing"
    assert json.loads(path.read_text()) == sorted(r["id"] for r in EXPECTED.values() if r["active"])
