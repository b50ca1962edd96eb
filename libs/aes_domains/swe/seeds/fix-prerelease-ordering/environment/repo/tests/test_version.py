import pytest

from vercmp import InvalidVersion, Version, compare, latest, sort_versions


def test_parse_fields():
    v = Version.parse("1.4.0-rc.2+build.7")
    assert (v.major, v.minor, v.patch, v.prerelease, v.build) == (1, 4, 0, ("rc", 2), "build.7")
    assert str(v) == "1.4.0-rc.2+build.7"
    assert v.is_prerelease and not Version.parse("1.4.0").is_prerelease


@pytest.mark.parametrize("text", ["1.2", "01.2.3", "1.2.3-", "1.2.3-01", "v1.2.3", "1.2.3+", ""])
def test_parse_rejects(text):
    with pytest.raises(InvalidVersion):
        Version.parse(text)


@pytest.mark.parametrize("a, b, expected", [
    ("1.0.0", "1.0.0", 0), ("1.10.0", "1.9.3", 1), ("0.9.9", "1.0.0", -1),
    ("2.1.1", "2.1.0", 1), ("1.0.0+build.1", "1.0.0+build.2", 0),
])
def test_compare_releases(a, b, expected):
    assert compare(a, b) == expected
    assert compare(b, a) == -expected


def test_sort_releases():
    assert sort_versions(["1.10.0", "1.2.0", "0.9.0", "1.2.1"]) == ["0.9.0", "1.2.0", "1.2.1", "1.10.0"]


def test_latest_skips_prereleases_by_default():
    assert latest(["1.2.0", "1.3.0-beta.1", "1.1.9"]) == "1.2.0"
    assert latest(["1.3.0-beta.1"]) is None
    assert latest([]) is None


def test_equal_versions_hash_alike():
    assert len({Version.parse("1.0.0+a"), Version.parse("1.0.0+b")}) == 1
