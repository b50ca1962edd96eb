from pathlib import Path


def test_greeting():
    assert Path("/app/greeting.txt").read_text() == "hello, world\n"


def test_count():
    assert Path("/app/count.txt").read_text().strip() == "3"
