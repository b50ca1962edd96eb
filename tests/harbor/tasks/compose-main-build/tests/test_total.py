import urllib.request


def test_total_is_stored():
    assert urllib.request.urlopen("http://db:8080/kv/total").read() == b"58"


def test_main_is_built_from_its_own_folder():
    from pathlib import Path

    assert Path("/etc/main-build").read_text() == "main, built from environment/app\n"
