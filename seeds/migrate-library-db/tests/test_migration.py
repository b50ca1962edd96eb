"""Runs /app/migrate.sh on fresh v1 databases and compares the result with the rules applied in Python."""

import datetime
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
TABLES = {
    "authors": ["id", "name"],
    "books": ["id", "title", "isbn", "copies"],
    "book_authors": ["book_id", "author_id", "position"],
    "members": ["id", "email", "name"],
    "loans": ["id", "book_id", "member_id", "borrowed_on", "returned_on"],
}


def fresh_db(tmp_path_factory, dump: str) -> Path:
    path = tmp_path_factory.mktemp("db") / "library.db"
    conn = sqlite3.connect(path)
    conn.executescript((FIXTURES / dump).read_text())
    conn.close()
    return path


def migrate(path: Path) -> subprocess.CompletedProcess:
    assert Path("/app/migrate.sh").exists(), "/app/migrate.sh missing"
    return subprocess.run(["/app/migrate.sh", str(path)], capture_output=True, text=True, timeout=120)


def dump(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [*conn.iterdump(), f"user_version={conn.execute('PRAGMA user_version').fetchone()[0]}"]
    finally:
        conn.close()


def iso(text: str):
    return datetime.datetime.strptime(text, "%d/%m/%Y").date().isoformat() if text else None


def expected(dump_name: str) -> dict:
    """The v2 content the rules in the instruction give, keyed by natural keys (not surrogate ids)."""
    v1 = sqlite3.connect(":memory:")
    v1.executescript((FIXTURES / dump_name).read_text())
    books = {i: (t, re.sub(r"\D", "", isbn), c) for i, t, _, isbn, c in v1.execute("SELECT * FROM books")}
    credits = {i: [a.strip() for a in authors.split(";") if a.strip()]
               for i, authors in v1.execute("SELECT id, authors FROM books")}
    latest = {}
    for loan_id, email, name, borrowed in v1.execute("SELECT id, member_email, member_name, borrowed FROM loans"):
        key = (iso(borrowed), loan_id, name)
        latest[email.lower()] = max(latest.get(email.lower(), key), key)
    loans = {i: (b, e.lower(), iso(bo), iso(r)) for i, b, e, _, bo, r in v1.execute("SELECT * FROM loans")}
    return {"books": books, "credits": credits, "members": {e: k[2] for e, k in latest.items()}, "loans": loans}


def actual(path: Path) -> dict:
    db = sqlite3.connect(path)
    credits = {}
    for book_id, name in db.execute("SELECT ba.book_id, a.name FROM book_authors ba JOIN authors a "
                                    "ON a.id = ba.author_id ORDER BY ba.book_id, ba.position"):
        credits.setdefault(book_id, []).append(name)
    return {
        "books": {i: (t, isbn, c) for i, t, isbn, c in db.execute("SELECT id, title, isbn, copies FROM books")},
        "credits": credits,
        "members": dict(db.execute("SELECT email, name FROM members")),
        "loans": {i: (b, e, bo, r) for i, b, e, bo, r in db.execute(
            "SELECT l.id, l.book_id, m.email, l.borrowed_on, l.returned_on FROM loans l JOIN members m ON m.id = l.member_id")},
    }


@pytest.fixture(scope="module", params=["library.sql", "variant.sql"])
def migrated(request, tmp_path_factory):
    path = fresh_db(tmp_path_factory, request.param)
    result = migrate(path)
    assert result.returncode == 0, result.stderr
    return path, expected(request.param)


def test_schema_and_version(migrated):
    path, _ = migrated
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == set(TABLES)
    for table, columns in TABLES.items():
        assert [r[1] for r in db.execute(f"PRAGMA table_info({table})")] == columns


def test_foreign_keys_declared_and_hold(migrated):
    db = sqlite3.connect(migrated[0])
    refs = {(t, r[2]) for t in ("loans", "book_authors") for r in db.execute(f"PRAGMA foreign_key_list({t})")}
    assert refs == {("loans", "books"), ("loans", "members"), ("book_authors", "books"), ("book_authors", "authors")}
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_books_and_isbns(migrated):
    path, want = migrated
    assert actual(path)["books"] == want["books"]


def test_authors_deduplicated_in_credit_order(migrated):
    path, want = migrated
    assert actual(path)["credits"] == want["credits"]
    names = [r[0] for r in sqlite3.connect(path).execute("SELECT name FROM authors")]
    assert sorted(names) == sorted({n for credit in want["credits"].values() for n in credit})


def test_members_one_per_email_named_by_latest_loan(migrated):
    path, want = migrated
    assert actual(path)["members"] == want["members"]


def test_loans_with_iso_dates_and_null_returns(migrated):
    path, want = migrated
    assert actual(path)["loans"] == want["loans"]


def test_rerun_is_a_no_op(tmp_path_factory):
    path = fresh_db(tmp_path_factory, "variant.sql")
    assert migrate(path).returncode == 0
    before = dump(path)
    result = migrate(path)
    assert result.returncode == 0, result.stderr
    assert dump(path) == before


def test_failed_migration_leaves_database_unchanged(tmp_path_factory):
    path = fresh_db(tmp_path_factory, "orphan.sql")  # loan 150 points to a missing book
    before = dump(path)
    assert migrate(path).returncode != 0
    assert dump(path) == before


def test_app_database_migrated():
    db = sqlite3.connect("/app/library.db")
    assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    assert db.execute("SELECT COUNT(*) FROM loans WHERE returned_on IS NULL OR returned_on LIKE '____-__-__'").fetchone()[0] == 200
