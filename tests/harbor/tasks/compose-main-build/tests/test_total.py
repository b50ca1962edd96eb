import urllib.request
from pathlib import Path


def test_total_is_stored():
    # main's image comes from its own build folder (environment/app), as the compose file says.
    assert Path("/etc/main-build").read_text() == "main, built from environment/app\n"
    assert urllib.request.urlopen("http://db:8080/kv/total").read() == b"58"
