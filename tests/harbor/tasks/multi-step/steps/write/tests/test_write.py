from pathlib import Path


def test_first_line():
    assert Path("/srv/log.txt").read_text() == "one\n"
