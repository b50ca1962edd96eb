"""Checks the CSVs pulled out of /app/incoming, that hostile members were skipped, and the reports."""

import hashlib
import json
from pathlib import Path

import pytest

OUT = Path("/app/extracted")
CSV_SHA256 = {
    "q1.csv": "39e5f240ed154582dd220729a99be7bd01567dbe5b182ce9fe810c504958dd8d",
    "q2.csv": "c55052a999c96c7bda6e0d154e74fd97320c89b5365869a5ca0f1884a2e5bf64",
    "q3.csv": "492d25b1d9ce16c9c10a221287b9b436db6c44fb8644278ba7e3c2be83fe7472",
    "q4.csv": "c8a617d5f2e8834cff94549f5bd6039e3dbe12d8313aa6bf09f9cff5481d6ae6",
    "q5.csv": "64e4815ac1092f0ffbcd57f89e063f889f7c249722c5a8b6e296d06cfe74f396",
    "q6.csv": "ca6397b41469b2dd690fab229d87d4dc58a373d91801fc77264f0c96caf00b61",
}


def digest(name: str) -> str:
    path = OUT / name
    assert path.is_file() and not path.is_symlink(), f"{path} missing"
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", ["q1.csv", "q2.csv", "q5.csv"])
def test_top_level_members_extracted(name):
    assert digest(name) == CSV_SHA256[name]


@pytest.mark.parametrize("name", ["q3.csv", "q4.csv"])
def test_nested_archive_members_extracted(name):
    # q3 sits in a zip inside a tar.gz; q4 in a tar inside that zip.
    assert digest(name) == CSV_SHA256[name]


def test_hostile_archive_safe_members_only():
    assert digest("q6.csv") == CSV_SHA256["q6.csv"]
    assert not Path("/tmp/pwned.csv").exists() and not Path("/etc/evil.csv").exists()
    assert not (OUT / "pwned.csv").exists() and not (OUT / "evil.csv").exists()
    assert not (OUT / "link.csv").exists() and not (OUT / "link.csv").is_symlink()


def test_only_csv_files_in_output():
    assert OUT.is_dir()
    assert sorted(p.name for p in OUT.iterdir()) == sorted(CSV_SHA256)
    assert all(p.is_file() and not p.is_symlink() for p in OUT.iterdir())


def test_corrupt_archives_listed():
    path = Path("/app/corrupt.txt")
    assert path.exists(), "/app/corrupt.txt missing"
    assert path.read_text().split() == ["broken.tgz"]


def test_summary():
    path = Path("/app/summary.json")
    assert path.exists(), "/app/summary.json missing"
    assert json.loads(path.read_text()) == {"files": 6, "rows": 56}
