import urllib.request


def test_total_is_stored():
    assert urllib.request.urlopen("http://db:8080/kv/total").read() == b"58"
