"""A corpus of hostile and malformed bundles, each rejected with its own error.

Every case is a tar.gz built from a table below (a valid task plus one defect) and
unpacked into ``tmp_path/work/dest``; the test then checks that nothing outside
the destination changed.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import os
import tarfile
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from aes_lib.bundle import parse_task_toml
from aes_lib.bundle import (
    ArchiveTooLargeError,
    BundleError,
    BundleLimits,
    CorruptArchiveError,
    DecompressionBombError,
    EmptyInstructionError,
    FileTooLargeError,
    InstructionEncodingError,
    InvalidFieldError,
    LinkEscapeError,
    MissingFileError,
    SpecialFileError,
    TomlSyntaxError,
    UnsafePathError,
    unpack,
)

OUTSIDE = f"/tmp/aes-hostile-{uuid.uuid4().hex}"
"""An absolute path that attacks try to create; it must never appear."""

TOML = """schema_version = "1.4"
[task]
name = "tests/hostile"
[agent]
timeout_sec = 30
[verifier]
timeout_sec = 30
[environment]
memory_mb = 256
"""

VALID: dict[str, bytes] = {
    "instruction.md": b"Write hello to /app/out.txt.\n",
    "task.toml": TOML.encode(),
    "environment/Dockerfile": b"FROM aes-base:latest\n",
    "solution/solve.sh": b"#!/bin/bash\necho hello > /app/out.txt\n",
    "tests/test.sh": b"#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
}


@dataclasses.dataclass
class Entry:
    name: str
    data: bytes = b""
    type: bytes = tarfile.REGTYPE
    linkname: str = ""
    size: int | None = None
    """Header size when it should differ from len(data)."""


def make_tar(entries: list[Entry]) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for e in entries:
            info = tarfile.TarInfo(e.name)
            info.type, info.linkname, info.mode = e.type, e.linkname, 0o644
            if e.type == tarfile.REGTYPE:
                info.size = len(e.data) if e.size is None else e.size
                tar.addfile(info, io.BytesIO(e.data))
            else:
                tar.addfile(info)
    return buf.getvalue()


def task_with(*extra: Entry, drop: tuple[str, ...] = (), replace: dict[str, bytes] | None = None) -> Callable[[], bytes]:
    """A valid task, with files removed or replaced, followed by ``extra`` entries."""

    def build() -> bytes:
        files = {**VALID, **(replace or {})}
        entries = [Entry(n, d) for n, d in files.items() if n not in drop]
        return make_tar(entries + list(extra))

    return build


def toml_with(text: str) -> Callable[[], bytes]:
    return task_with(replace={"task.toml": text.encode()})


def raw_gzip(data: bytes) -> Callable[[], bytes]:
    return lambda: gzip.compress(data, mtime=0)


def header_only(name: str, size: int) -> bytes:
    """A member header that claims ``size`` bytes, followed by none."""
    info = tarfile.TarInfo(name)
    info.size = size
    return gzip.compress(info.tobuf(format=tarfile.PAX_FORMAT), mtime=0)


def bomb() -> bytes:
    """One 64 MiB file of zeros: ~64 KB compressed."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        info = tarfile.TarInfo("environment/zeros")
        info.size = 64 << 20

        class Zeros(io.RawIOBase):
            def readable(self):
                return True

            def readinto(self, b):
                b[:] = bytes(len(b))
                return len(b)

        tar.addfile(info, io.BufferedReader(Zeros()))
    return buf.getvalue()


SMALL = BundleLimits(max_file_bytes=1024, max_total_bytes=1 << 20, max_archive_bytes=4096, max_entries=20)

# (case id, archive builder, expected error, limits)
CASES: list[tuple[str, Callable[[], bytes], type[BundleError], BundleLimits]] = [
    # --- paths
    ("traversal", task_with(Entry("../evil", b"x")), UnsafePathError, BundleLimits()),
    ("nested-traversal", task_with(Entry("tests/../../evil", b"x")), UnsafePathError, BundleLimits()),
    ("absolute-path", task_with(Entry(OUTSIDE, b"x")), UnsafePathError, BundleLimits()),
    ("backslash-name", task_with(Entry("..\\evil", b"x")), UnsafePathError, BundleLimits()),
    ("duplicate-member", task_with(Entry("instruction.md", b"again")), UnsafePathError, BundleLimits()),
    ("file-as-parent", task_with(Entry("solution/solve.sh/x", b"x")), UnsafePathError, BundleLimits()),
    # --- links
    ("symlink-absolute", task_with(Entry("tests/passwd", type=tarfile.SYMTYPE, linkname="/etc/passwd")), LinkEscapeError, BundleLimits()),
    ("symlink-escape", task_with(Entry("tests/up", type=tarfile.SYMTYPE, linkname="../../..")), LinkEscapeError, BundleLimits()),
    ("symlink-to-outside", task_with(Entry("out", type=tarfile.SYMTYPE, linkname="../" * 8 + OUTSIDE.lstrip("/"))), LinkEscapeError, BundleLimits()),
    ("write-through-symlink", task_with(Entry("env2", type=tarfile.SYMTYPE, linkname="environment"), Entry("env2/x", b"x")), LinkEscapeError, BundleLimits()),
    ("symlink-chain-escape", task_with(
        Entry("x", type=tarfile.SYMTYPE, linkname="environment/.."),
        Entry("up", type=tarfile.SYMTYPE, linkname="x/.."),
    ), LinkEscapeError, BundleLimits()),
    ("hardlink-absolute", task_with(Entry("tests/passwd", type=tarfile.LNKTYPE, linkname="/etc/passwd")), LinkEscapeError, BundleLimits()),
    ("hardlink-traversal", task_with(Entry("tests/passwd", type=tarfile.LNKTYPE, linkname="../../etc/passwd")), LinkEscapeError, BundleLimits()),
    ("hardlink-dangling", task_with(Entry("tests/copy", type=tarfile.LNKTYPE, linkname="nothing/here")), LinkEscapeError, BundleLimits()),
    # --- special files
    ("char-device", task_with(Entry("environment/null", type=tarfile.CHRTYPE)), SpecialFileError, BundleLimits()),
    ("block-device", task_with(Entry("environment/sda", type=tarfile.BLKTYPE)), SpecialFileError, BundleLimits()),
    ("fifo", task_with(Entry("environment/pipe", type=tarfile.FIFOTYPE)), SpecialFileError, BundleLimits()),
    ("instruction-symlink-to-host", task_with(Entry("instruction.md", type=tarfile.SYMTYPE, linkname="/etc/passwd"),
                                              drop=("instruction.md",)), LinkEscapeError, BundleLimits()),
    # --- sizes
    ("huge-file", task_with(Entry("environment/big", b"a" * 2048)), FileTooLargeError, SMALL),
    ("huge-file-header", lambda: header_only("environment/big", 1 << 40), FileTooLargeError, BundleLimits()),
    ("archive-too-large", task_with(Entry("environment/noise", os.urandom(1000))), ArchiveTooLargeError,
     dataclasses.replace(SMALL, max_archive_bytes=1024)),
    ("total-too-large", task_with(*[Entry(f"environment/f{i}", b"b" * 1000) for i in range(20)]), ArchiveTooLargeError,
     dataclasses.replace(SMALL, max_total_bytes=16384, max_entries=100)),
    ("too-many-entries", task_with(*[Entry(f"environment/e{i}", b"") for i in range(30)]), ArchiveTooLargeError,
     dataclasses.replace(SMALL, max_archive_bytes=1 << 20)),
    ("gzip-bomb", bomb, DecompressionBombError, BundleLimits(max_total_bytes=1 << 30, max_file_bytes=1 << 30)),
    ("gzip-bomb-total", bomb, ArchiveTooLargeError, BundleLimits(max_total_bytes=8 << 20, max_ratio=1e6)),
    # --- not an archive
    ("not-gzip", lambda: b"this is not a gzip file" * 10, CorruptArchiveError, BundleLimits()),
    ("gzip-not-tar", raw_gzip(b"\x01" * 4096), CorruptArchiveError, BundleLimits()),
    ("truncated", lambda: task_with()()[:60], CorruptArchiveError, BundleLimits()),
    # --- missing files
    ("missing-instruction", task_with(drop=("instruction.md",)), MissingFileError, BundleLimits()),
    ("missing-task-toml", task_with(drop=("task.toml",)), MissingFileError, BundleLimits()),
    ("missing-test-sh", task_with(drop=("tests/test.sh",)), MissingFileError, BundleLimits()),
    ("missing-dockerfile", task_with(drop=("environment/Dockerfile",)), MissingFileError, BundleLimits()),
    # --- instruction
    ("instruction-latin1", task_with(replace={"instruction.md": "Café crème\n".encode("latin-1")}), InstructionEncodingError, BundleLimits()),
    ("instruction-binary", task_with(replace={"instruction.md": b"\x7fELF\x00\x00\x01"}), InstructionEncodingError, BundleLimits()),
    ("instruction-empty", task_with(replace={"instruction.md": b" \n\t\n"}), EmptyInstructionError, BundleLimits()),
    # --- task.toml
    ("toml-syntax", toml_with("[agent\ntimeout_sec = 30"), TomlSyntaxError, BundleLimits()),
    ("toml-not-utf8", task_with(replace={"task.toml": b"[task]\nname = \"\xff\xfe\"\n"}), TomlSyntaxError, BundleLimits()),
    ("wrong-type", toml_with(TOML.replace("memory_mb = 256", "memory_mb = \"lots\"")), InvalidFieldError, BundleLimits()),
    ("bool-as-int", toml_with(TOML.replace("memory_mb = 256", "memory_mb = true")), InvalidFieldError, BundleLimits()),
    ("negative-timeout", toml_with(TOML.replace("[agent]\ntimeout_sec = 30", "[agent]\ntimeout_sec = -5")), InvalidFieldError, BundleLimits()),
    ("zero-verifier-timeout", toml_with(TOML.replace("[verifier]\ntimeout_sec = 30", "[verifier]\ntimeout_sec = 0")), InvalidFieldError, BundleLimits()),
    ("zero-cpus", toml_with(TOML + "cpus = 0\n"), InvalidFieldError, BundleLimits()),
    ("negative-gpus", toml_with(TOML + "gpus = -1\n"), InvalidFieldError, BundleLimits()),
    ("relative-workdir", toml_with(TOML + "workdir = \"app\"\n"), InvalidFieldError, BundleLimits()),
    ("bad-env-name", toml_with(TOML + "env = { \"A B\" = \"x\" }\n"), InvalidFieldError, BundleLimits()),
    ("bad-task-name", toml_with(TOML.replace("tests/hostile", "no-org")), InvalidFieldError, BundleLimits()),
    ("bad-verifier-mode", toml_with(TOML.replace("[verifier]\n", "[verifier]\nenvironment_mode = \"sidecar\"\n")), InvalidFieldError, BundleLimits()),
    ("bad-network-mode", toml_with(TOML + "network_mode = \"everything\"\n"), InvalidFieldError, BundleLimits()),
    ("wrong-type-harbor-field", toml_with(TOML + "gpu_types = \"H100\"\n"), InvalidFieldError, BundleLimits()),
    ("artifact-traversal", toml_with('artifacts = ["/app/../../etc"]\n' + TOML), InvalidFieldError, BundleLimits()),
]


def snapshot(root: Path, skip: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == skip or skip in Path(dirpath).parents:
            continue
        for name in dirnames + filenames:
            st = os.lstat(Path(dirpath, name))
            out[str(Path(dirpath, name).relative_to(root))] = (st.st_mode, st.st_size)
    return out


def test_corpus_is_large_and_specific() -> None:
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)
    assert len({c[2] for c in CASES}) >= 12  # one error type per kind of problem


@pytest.mark.parametrize(("case", "build", "error", "limits"), CASES, ids=[c[0] for c in CASES])
def test_hostile_bundle_rejected(tmp_path: Path, case: str, build, error: type[BundleError], limits: BundleLimits) -> None:
    dest = tmp_path / "work" / "dest"
    dest.mkdir(parents=True)
    (tmp_path / "sibling.txt").write_text("untouched")
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(build())
    before = snapshot(tmp_path, dest)
    passwd = os.stat("/etc/passwd")

    with pytest.raises(error) as info:
        unpack(archive, dest, limits)

    assert type(info.value) is error, f"{case}: got {type(info.value).__name__}: {info.value}"
    assert snapshot(tmp_path, dest) == before
    assert not os.path.lexists(OUTSIDE)
    assert os.stat("/etc/passwd").st_mtime == passwd.st_mtime
    assert (tmp_path / "sibling.txt").read_text() == "untouched"


def test_valid_bundle_unpacks(tmp_path: Path) -> None:
    task = unpack(task_with()(), tmp_path / "dest")
    assert task.name == "tests/hostile"
    assert task.config.agent.timeout_sec == 30
    assert (tmp_path / "dest" / "solution" / "solve.sh").read_bytes() == VALID["solution/solve.sh"]


def test_inner_symlink_and_hardlink_are_kept(tmp_path: Path) -> None:
    build = task_with(
        Entry("tests/data.txt", b"payload"),
        Entry("tests/alias.txt", type=tarfile.SYMTYPE, linkname="data.txt"),
        Entry("tests/copy.txt", type=tarfile.LNKTYPE, linkname="tests/data.txt"),
    )
    task = unpack(build(), tmp_path / "dest")
    assert (task.tests_dir / "alias.txt").is_symlink()
    assert (task.tests_dir / "alias.txt").read_bytes() == b"payload"
    assert (task.tests_dir / "copy.txt").read_bytes() == b"payload"
    assert not (task.tests_dir / "copy.txt").is_symlink()


def test_unpack_refuses_a_non_empty_destination(tmp_path: Path) -> None:
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "keep").write_text("mine")
    with pytest.raises(ValueError, match="must be empty"):
        unpack(task_with()(), tmp_path / "dest")
    assert (tmp_path / "dest" / "keep").read_text() == "mine"


# Fields Harbor 0.26 does not model load, kept and listed as warnings; fields it models load
# (those this sandbox does not run give a validation verdict, not a bundle error).
EXTRA_CASES = [
    ("unknown-section", TOML + "[extras]\nx = 1\n", ["extras"]),
    ("unknown-field", TOML.replace("[agent]\n", "[agent]\nmodel = \"gpt\"\n"), ["agent.model"]),
    ("unknown-top-level", "hack = true\n" + TOML, ["hack"]),
    ("harbor-only-field", TOML + "network_mode = \"public\"\n", []),
    ("separate-verifier", TOML.replace("[verifier]\n", "[verifier]\nenvironment_mode = \"separate\"\n"), []),
    ("internal-name", '"__aes_extras__" = { x = 1 }\n' + TOML, ["__aes_extras__"]),
]


@pytest.mark.parametrize(("case", "text", "extras"), EXTRA_CASES, ids=[c[0] for c in EXTRA_CASES])
def test_extra_fields_load_with_warnings(tmp_path: Path, case: str, text: str, extras: list[str]) -> None:
    task = unpack(toml_with(text)(), tmp_path / "dest")
    assert list(task.config.extras) == extras
    for path in extras:
        assert any(w.startswith(f"task.toml: {path} is not a Harbor 0.26 field") for w in task.warnings)


def test_harbor_features_not_run_here_are_named() -> None:
    with pytest.raises(MissingFileError, match="missing steps/one/instruction.md"):  # as in Harbor
        unpack_text(TOML + '\n[[steps]]\nname = "one"\n')
    assert parse_task_toml(TOML + '\n[[steps]]\nname = "one"\n').unsupported() == []  # run in order
    public = unpack_text(TOML + "network_mode = \"public\"\n")
    assert public.config.environment.allow_internet is True and public.config.unsupported() == []


def test_schema_version_harbor_accepts_is_a_warning(tmp_path: Path) -> None:
    task = unpack(toml_with(TOML.replace('"1.4"', '"9"'))(), tmp_path / "dest")
    assert task.config.schema_version == "9"
    assert "task.toml: schema_version '9' is not 1.x; read as 1.x" in task.warnings


def test_a_bundle_without_a_reference_solution_loads_and_says_so(tmp_path: Path) -> None:
    # Harbor runs such tasks (only its oracle agent needs solution/); admission decides.
    task = unpack(task_with(drop=("solution/solve.sh",))(), tmp_path / "dest")
    assert task.has_solution is False and task.unsupported == []
    assert unpack(task_with()(), tmp_path / "other").has_solution is True


def unpack_text(text: str):
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return unpack(toml_with(text)(), Path(tmp) / "dest")


@pytest.mark.parametrize(("case", "build", "error", "limits"), CASES, ids=[c[0] for c in CASES])
def test_hostile_bundle_rejected_by_the_unpack_cache_and_not_kept(tmp_path: Path, case: str, build,
                                                                  error: type[BundleError], limits: BundleLimits) -> None:
    import hashlib

    from aes_lib.bundle.cache import UnpackCache

    cache = UnpackCache(tmp_path / "cache")
    data = build()
    digest = hashlib.sha256(data).hexdigest()
    with pytest.raises(error) as info:
        cache.put(digest, data, limits)
    assert type(info.value) is error, f"{case}: got {type(info.value).__name__}: {info.value}"
    assert not os.path.lexists(OUTSIDE)
    # Nothing of it stays: the next stage gets the same error, never a tree.
    assert not [p for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")]
    assert cache.lease(digest, limits) is None
