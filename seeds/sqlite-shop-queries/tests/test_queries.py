"""Runs each /app/queries/qN.sql on the shipped data and on a second database with the same schema.

The expected rows come from reference queries run on the same fresh databases, so an answer that was
typed in rather than computed fails on the second database.
"""

import sqlite3
from pathlib import Path

import pytest

HERE = Path(__file__).parent
DUMPS = ["shop.sql", "shop_variant.sql"]


@pytest.fixture(scope="module", params=DUMPS)
def db(request):
    conn = sqlite3.connect(":memory:")
    conn.executescript((HERE / request.param).read_text())
    return conn


def run(conn, path: Path):
    cursor = conn.execute(path.read_text())
    return [d[0] for d in cursor.description], cursor.fetchall()


@pytest.mark.parametrize("name", [f"q{i}.sql" for i in range(1, 6)])
def test_query_matches_reference(db, name):
    answer = Path("/app/queries") / name
    assert answer.exists(), f"{answer} was not written"
    expected_columns, expected_rows = run(db, HERE / "reference" / name)
    assert expected_rows, "reference query returned nothing"
    columns, rows = run(db, answer)
    assert columns == expected_columns
    assert rows == expected_rows
