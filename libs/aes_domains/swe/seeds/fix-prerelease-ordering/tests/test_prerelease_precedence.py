"""Hidden tests of vercmp: SemVer 2.0.0 precedence with pre-releases, release ordering as
before. The repository's code runs in a child process as `nobody` (never in this root
pytest process)."""

import json
import random
import subprocess

import pytest

REPO = "/app/repo"
# Ascending precedence: the spec's own example, then releases and pre-releases around it.
CHAIN = ["0.9.9", "1.0.0-0.3.7", "1.0.0-0.20", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
         "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1-2", "1.0.1-10", "1.0.1", "1.10.0"]


def call(expr: str):
    """The JSON value of ``expr`` evaluated with vercmp's names imported, as nobody."""
    code = (f"import json, sys; sys.path.insert(0, {REPO!r})\n"
            "from vercmp import *\n"
            f"print(json.dumps({expr}))")
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        "python3", "-I", "-B", "-c", code], capture_output=True, text=True, timeout=60, cwd="/")
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_sort_follows_the_spec_chain():
    shuffled = CHAIN[:]
    random.Random(3).shuffle(shuffled)
    assert call(f"sort_versions({shuffled})") == CHAIN


@pytest.mark.parametrize("low, high", [
    ("1.0.0-rc.1", "1.0.0"), ("1.0.0-beta.2", "1.0.0-beta.11"), ("1.0.0-alpha.9", "1.0.0-alpha.10"),
    ("1.2.3-0.3.7", "1.2.3-0.20"), ("1.0.0-2", "1.0.0-10"), ("2.0.0-rc.1+build.9", "2.0.0+build.1"),
])
def test_pair_precedence(low, high):
    got = call(f"[compare({low!r}, {high!r}), compare({high!r}, {low!r}),"
               f" Version.parse({low!r}) < Version.parse({high!r}), Version.parse({high!r}) > Version.parse({low!r}),"
               f" Version.parse({low!r}) == Version.parse({high!r})]")
    assert got == [-1, 1, True, True, False]


def test_latest_prefers_the_release():
    got = call("[latest(['1.9.0', '2.0.0', '2.0.0-rc.1'], include_prerelease=True),"
               " latest(['1.0.0-alpha.2', '1.0.0-alpha.10'], include_prerelease=True),"
               " latest(['1.2.0', '1.3.0-beta.1', '1.1.9']), latest(['3.0.0-beta.2'], include_prerelease=True)]")
    assert got == ["2.0.0", "1.0.0-alpha.10", "1.2.0", "3.0.0-beta.2"]


def test_build_metadata_is_ignored_with_prereleases():
    got = call("[compare('1.0.0-rc.1+a', '1.0.0-rc.1+b'), Version.parse('1.0.0-rc.1+a') == Version.parse('1.0.0-rc.1'),"
               " len({Version.parse('1.0.0-rc.1+a'), Version.parse('1.0.0-rc.1+b')}),"
               " compare('1.0.0-rc.1+zzz', '1.0.0+aaa')]")
    assert got == [0, True, 1, -1]


def test_max_and_min_of_mixed_versions():
    got = call("[str(max(map(Version.parse, ['1.0.0-beta.11', '1.0.0-beta.2', '0.9.0']))),"
               " str(min(map(Version.parse, ['1.0.0', '1.0.0-rc.1', '1.0.1'])))]")
    assert got == ["1.0.0-beta.11", "1.0.0-rc.1"]
