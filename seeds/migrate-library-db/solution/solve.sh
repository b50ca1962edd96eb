#!/bin/bash
# Install the migration (one transaction; old tables renamed aside, new ones filled, old ones dropped).
set -euo pipefail
cat > /app/migrate.sh <<'SH'
#!/bin/bash
# migrate.sh DB: migrate a v1 library database to v2 in place, atomically; a v2 database is left alone.
set -euo pipefail
[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: $0 DATABASE" >&2; exit 2; }
exec python3 - "$1" <<'PY'
import datetime, re, sqlite3, sys

V2 = """
CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL, isbn TEXT NOT NULL UNIQUE, copies INTEGER NOT NULL CHECK (copies >= 0));
CREATE TABLE book_authors (book_id INTEGER NOT NULL REFERENCES books(id), author_id INTEGER NOT NULL REFERENCES authors(id), position INTEGER NOT NULL, PRIMARY KEY (book_id, author_id));
CREATE TABLE members (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE, name TEXT NOT NULL);
CREATE TABLE loans (id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL REFERENCES books(id), member_id INTEGER NOT NULL REFERENCES members(id), borrowed_on TEXT NOT NULL, returned_on TEXT);
"""


def iso(text):
    return datetime.datetime.strptime(text, "%d/%m/%Y").date().isoformat() if text else None


db = sqlite3.connect(sys.argv[1], isolation_level=None)
if db.execute("PRAGMA user_version").fetchone()[0] >= 2:
    sys.exit(0)
db.execute("BEGIN IMMEDIATE")
try:
    books = db.execute("SELECT id, title, authors, isbn, copies FROM books ORDER BY id").fetchall()
    loans = db.execute("SELECT id, book_id, member_email, member_name, borrowed, returned FROM loans ORDER BY id").fetchall()
    book_ids = {b[0] for b in books}
    orphans = [loan[0] for loan in loans if loan[1] not in book_ids]
    if orphans:
        raise ValueError(f"loans point to missing books: {orphans}")
    db.execute("ALTER TABLE books RENAME TO v1_books")
    db.execute("ALTER TABLE loans RENAME TO v1_loans")
    for statement in V2.strip().split(";\n"):
        db.execute(statement)
    author_ids = {}
    for book_id, title, authors, isbn, copies in books:
        db.execute("INSERT INTO books VALUES (?, ?, ?, ?)", (book_id, title, re.sub(r"\D", "", isbn), copies))
        for position, name in enumerate((a.strip() for a in authors.split(";") if a.strip()), 1):
            if name not in author_ids:
                author_ids[name] = db.execute("INSERT INTO authors (name) VALUES (?)", (name,)).lastrowid
            db.execute("INSERT INTO book_authors VALUES (?, ?, ?)", (book_id, author_ids[name], position))
    latest = {}  # email -> (borrowed date, loan id, name)
    for loan_id, _, email, name, borrowed, _ in loans:
        key = (iso(borrowed), loan_id, name)
        latest[email.lower()] = max(latest.get(email.lower(), key), key)
    member_ids = {email: db.execute("INSERT INTO members (email, name) VALUES (?, ?)", (email, latest[email][2])).lastrowid
                  for email in sorted(latest)}
    for loan_id, book_id, email, _, borrowed, returned in loans:
        db.execute("INSERT INTO loans VALUES (?, ?, ?, ?, ?)",
                   (loan_id, book_id, member_ids[email.lower()], iso(borrowed), iso(returned)))
    db.execute("DROP TABLE v1_books")
    db.execute("DROP TABLE v1_loans")
    if db.execute("PRAGMA foreign_key_check").fetchall():
        raise ValueError("foreign key check failed")
    db.execute("PRAGMA user_version = 2")
    db.execute("COMMIT")
except Exception as e:
    db.execute("ROLLBACK")
    sys.exit(f"migration failed, database unchanged: {e}")
PY
SH
chmod +x /app/migrate.sh
/app/migrate.sh /app/library.db
