from pathlib import Path


def test_motd():
    assert Path("/srv/motd").read_text() == "maintenance at 02:00 UTC\n"
