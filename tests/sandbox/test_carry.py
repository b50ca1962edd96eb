"""What of the agent's (untrusted) results reaches the verifier's container: the allow-list of
docs/SECURITY.md, rule by rule, on archives shaped like the engine's."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from aes_lib.bundle import Task
from aes_lib.sandbox.verifier import rebuild, result_paths

TASK = Path(__file__).parent / "tasks" / "echo"


def _entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", mode: int = 0o644,
           data: bytes = b"data") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, mode
    data = data if kind == tarfile.REGTYPE else b""
    info.size = len(data)
    return info, data


def _archive(entries: list[tuple[tarfile.TarInfo, bytes]]) -> io.BytesIO:
    """An archive as ``docker cp`` writes it: named from the path's last component."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data))
    raw.seek(0)
    return raw


def _crossed(tmp_path: Path, archives: dict[str, list | None]) -> tuple[dict[str, tarfile.TarInfo], list[str]]:
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "tests" / "expected.txt").write_text("42\n")
    crossing = rebuild([(root, None if e is None else _archive(e)) for root, e in archives.items()],
                       tmp_path / "tests")
    with crossing.archive, tarfile.open(fileobj=crossing.archive) as tar:
        return {m.name: m for m in tar}, crossing.dropped


def _app(*entries) -> dict[str, list]:
    return {"/app": [_entry("app", tarfile.DIRTYPE, mode=0o755), *entries]}


def test_files_folders_and_their_modes_and_owners_cross(tmp_path) -> None:
    owned, data = _entry("app/out.txt", mode=0o640)
    owned.uid, owned.gid = 1000, 1001
    kept, dropped = _crossed(tmp_path, _app(_entry("app/sub", tarfile.DIRTYPE, mode=0o2775), (owned, data),
                                            _entry("app/sub/f")))
    assert {n: (m.type, m.mode) for n, m in kept.items() if n.startswith("app")} == {
        "app": (tarfile.DIRTYPE, 0o755), "app/sub": (tarfile.DIRTYPE, 0o2775), "app/out.txt": (tarfile.REGTYPE, 0o640),
        "app/sub/f": (tarfile.REGTYPE, 0o644)}
    assert (kept["app/out.txt"].uid, kept["app/out.txt"].gid) == (1000, 1001)
    assert dropped == []


def test_the_tests_cross_readable_by_root_alone_beside_an_empty_reward_folder(tmp_path) -> None:
    kept, _ = _crossed(tmp_path, _app())
    assert (kept["tests"].mode, kept["tests"].uid) == (0o700, 0)
    assert "tests/expected.txt" in kept and kept["logs/verifier"].isdir()


@pytest.mark.parametrize("link", ["/tests/expected.txt", "../tests/expected.txt", "/logs/verifier/reward.txt",
                                  "/etc/passwd", "../../../../etc/shadow", "/", "..", "/app/../tests",
                                  "up/expected.txt", "loop", "to-loop/x"])
def test_a_link_that_leaves_the_results_in_the_agents_view_is_dropped(tmp_path, link) -> None:
    kept, dropped = _crossed(tmp_path, _app(
        _entry("app/up", tarfile.SYMTYPE, "/tests"),  # itself dropped; links through it too
        _entry("app/loop", tarfile.SYMTYPE, "loop"), _entry("app/to-loop", tarfile.SYMTYPE, "loop"),
        _entry("app/answer.txt", tarfile.SYMTYPE, link)))
    assert "app/answer.txt" not in kept
    assert any(d.startswith("/app/answer.txt: a link to") for d in dropped), dropped


@pytest.mark.parametrize("link", ["data/x", "/app/data/x", "./data/../data/x", "alias/x", "missing", "data"])
def test_a_link_that_resolves_inside_the_results_crosses(tmp_path, link) -> None:
    kept, dropped = _crossed(tmp_path, _app(
        _entry("app/data", tarfile.DIRTYPE, mode=0o755), _entry("app/data/x"),
        _entry("app/alias", tarfile.SYMTYPE, "data"), _entry("app/answer.txt", tarfile.SYMTYPE, link)))
    assert kept["app/answer.txt"].linkname == link and dropped == []


def test_links_between_result_paths_and_up_through_their_parents(tmp_path) -> None:
    kept, dropped = _crossed(tmp_path, {
        "/app/repo": [_entry("repo", tarfile.DIRTYPE), _entry("repo/a", tarfile.SYMTYPE, "../repo/b"),
                      _entry("repo/b", tarfile.SYMTYPE, "/srv/out/c"), _entry("repo/c", tarfile.SYMTYPE, "../other")],
        "/srv/out": [_entry("out", tarfile.DIRTYPE), _entry("out/c")],
    })
    assert {"app/repo/a", "app/repo/b", "srv/out/c"} <= set(kept)
    assert "app/repo/c" not in kept and [d.split(":")[0] for d in dropped] == ["/app/repo/c"]


def test_nothing_lands_below_a_link_and_names_stay_below_their_result_path(tmp_path) -> None:
    kept, dropped = _crossed(tmp_path, _app(
        _entry("app/s", tarfile.SYMTYPE, "data"), _entry("app/s/evil.pth"), _entry("app/f"), _entry("app/f/g"),
        _entry("app/../usr/bin/python3"), _entry("other/x"), _entry("app/./y")))
    assert {n for n in kept if n.startswith("app")} == {"app", "app/s", "app/f"}
    assert len(dropped) == 5, dropped


def test_hard_links_only_to_files_that_crossed_and_no_devices(tmp_path) -> None:
    kept, dropped = _crossed(tmp_path, _app(
        _entry("app/x"), _entry("app/h", tarfile.LNKTYPE, "app/x"), _entry("app/py", tarfile.LNKTYPE, "usr/bin/python3"),
        _entry("app/dev", tarfile.CHRTYPE), _entry("app/fifo", tarfile.FIFOTYPE)))
    assert kept["app/h"].islnk() and kept["app/h"].linkname == "app/x"
    assert not {"app/py", "app/dev", "app/fifo"} & set(kept) and len(dropped) == 3


def test_setuid_and_setgid_bits_are_cleared_on_files(tmp_path) -> None:
    kept, dropped = _crossed(tmp_path, _app(_entry("app/py", mode=0o6755), _entry("app/d", tarfile.DIRTYPE, mode=0o2775)))
    assert (kept["app/py"].mode, kept["app/d"].mode) == (0o755, 0o2775)
    assert dropped == ["/app/py: setuid/setgid bits cleared"]


@pytest.mark.parametrize("root", [None, [_entry("app", tarfile.SYMTYPE, "/tests")], [_entry("app", tarfile.FIFOTYPE)]])
def test_a_result_path_that_is_absent_a_link_or_special_crosses_empty(tmp_path, root) -> None:
    kept, dropped = _crossed(tmp_path, {"/app": root})
    assert kept["app"].isdir() and not [n for n in kept if n.startswith("app/")]
    assert len(dropped) == 1 and "crosses empty" in dropped[0]


def test_a_result_path_naming_a_file_crosses_as_that_file(tmp_path) -> None:
    """An artifact that names one file (``artifacts = ["report.json"]``) arrives as the file, by
    the same rules as a file in a folder: its bytes and mode, never setuid."""
    kept, dropped = _crossed(tmp_path, {"/out/report.json": [_entry("report.json", mode=0o4755, data=b'{"n": 3}')]})
    report = kept["out/report.json"]
    assert (report.isreg(), report.mode, report.size) == (True, 0o755, len(b'{"n": 3}'))
    assert dropped == ["/out/report.json: setuid/setgid bits cleared"]


def test_result_paths_are_the_workdir_the_artifacts_and_the_kinds(tmp_path) -> None:
    task = Task.load(TASK)
    assert result_paths(task, "/app") == (["/app"], [])
    assert result_paths(task, "/app", ("/srv/web", "/app/sub")) == (["/app", "/srv/web"], [])
    for workdir in (None, "/", "/etc/nginx", "/root"):
        paths, notes = result_paths(task, workdir)
        assert paths == [] and "not a result path" in notes[0]
