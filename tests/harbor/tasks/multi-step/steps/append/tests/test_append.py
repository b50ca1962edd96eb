from pathlib import Path


def test_both_lines():
    assert Path("/srv/log.txt").read_text() == "one\ntwo\n"
