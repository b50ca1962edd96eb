"""What of the agent's (untrusted) change archive reaches the verifier's container."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from aes_lib.sandbox.verifier import Pristine, protect, rebuild

PRISTINE = Pristine(
    protect("/root", ["/usr/local/lib/python3.11/dist-packages", "/opt/venv"]),
    {"/app": "d", "/app/old": "f", "/etc": "d", "/etc/passwd": "f", "/var": "d", "/var/run": "l", "/root": "d",
     "/srv": "d", "/srv/gone": "d", "/srv/gone/f": "f", "/tmp": "d"},
    "/root",
    (),
)


def _entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "",
           data: bytes = b"data") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    data = data if kind == tarfile.REGTYPE else b""
    info.size = len(data)
    return info, data


def _carried(tmp_path: Path, entries: list[tuple[tarfile.TarInfo, bytes]],
             present: set[str] | None = None) -> tuple[dict[str, tarfile.TarInfo], list[str]]:
    """Rebuild a snapshot of ``entries`` (listing ``present``, default: every pristine path)."""
    listing = "".join(p + "\0" for p in (PRISTINE.kinds if present is None else present)).encode()
    snap = io.BytesIO()
    with tarfile.open(fileobj=snap, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in [_entry("paths", data=listing), *entries]:
            tar.addfile(info, io.BytesIO(data))
    snap.seek(0)
    (tmp_path / "tests").mkdir(exist_ok=True)
    out = io.BytesIO()
    deleted = rebuild(PRISTINE, snap, tmp_path / "tests", out)
    out.seek(0)
    with tarfile.open(fileobj=out) as tar:
        return {m.name: m for m in tar if not m.name.startswith(("tests", "logs"))}, deleted


def test_changes_are_carried_with_their_kind(tmp_path) -> None:
    kept, deleted = _carried(tmp_path, [
        _entry("app", tarfile.DIRTYPE), _entry("app/x"), _entry("app/l", tarfile.SYMTYPE, "/etc/passwd"),
        _entry("app/h", tarfile.LNKTYPE, "app/x"), _entry("new/deep/file"), _entry("etc", tarfile.DIRTYPE),
    ])
    assert {n: m.type for n, m in kept.items()} == {
        "app": tarfile.DIRTYPE, "app/x": tarfile.REGTYPE, "app/l": tarfile.SYMTYPE, "app/h": tarfile.LNKTYPE,
        "new/deep/file": tarfile.REGTYPE, "etc": tarfile.DIRTYPE,
    }
    assert deleted == []


def test_toolchain_and_verifier_paths_are_not_carried(tmp_path) -> None:
    kept, _ = _carried(tmp_path, [_entry(n) for n in (
        "usr/lib/python3/dist-packages/evil.pth", "usr/local/bin/pytest", "bin/python3", "etc/ld.so.preload",
        "etc/python3.11/sitecustomize.py", "etc/profile.d/evil.sh", "root/.local/lib/usercustomize.py",
        "root/.bashrc", "opt/venv/bin/python", "tests/test.sh", "logs/verifier/reward.txt", "pytest.ini",
        "tmp/pytest-of-root/x",
    )])
    assert kept == {}


def test_nothing_lands_below_a_symlink(tmp_path) -> None:
    kept, _ = _carried(tmp_path, [
        _entry("app/s", tarfile.SYMTYPE, "/usr/lib/python3/dist-packages"), _entry("app/s/evil.pth"),  # carried link
        _entry("var/run/evil.pth"),  # the image's link
        _entry("app/q/f"), _entry("app/q", tarfile.SYMTYPE, "/usr/lib"),  # a link over a folder already written
        _entry("app/../usr/bin/python3"), _entry("./app/y"),
    ])
    assert set(kept) == {"app/s", "app/q/f"}


def test_folders_above_protected_paths_stay_folders(tmp_path) -> None:
    kept, deleted = _carried(tmp_path, [
        _entry("etc", tarfile.SYMTYPE, "/srv/fake-etc"), _entry("root", tarfile.SYMTYPE, "/srv/home"), _entry("tmp"),
    ], present={"/app", "/app/old", "/var", "/var/run"})
    assert kept == {}
    assert "/etc" not in deleted and "/root" not in deleted and "/tmp" not in deleted


def test_hard_links_only_to_carried_files_and_no_devices(tmp_path) -> None:
    kept, _ = _carried(tmp_path, [
        _entry("app/py", tarfile.LNKTYPE, "usr/bin/python3"), _entry("app/dev", tarfile.CHRTYPE),
        _entry("app/fifo", tarfile.FIFOTYPE),
    ])
    assert kept == {}


def test_deletions_are_the_topmost_missing_paths(tmp_path) -> None:
    present = set(PRISTINE.kinds) - {"/app/old", "/srv/gone", "/srv/gone/f"}
    _, deleted = _carried(tmp_path, [], present=present)
    assert deleted == ["/app/old", "/srv/gone"]
