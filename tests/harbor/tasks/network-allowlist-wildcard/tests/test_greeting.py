from pathlib import Path


def test_greeting():
    assert Path("/srv/greeting").read_text() == "hello, harbor\n"
