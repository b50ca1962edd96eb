"""The verifier's own container: a fresh one from the task image, with the agent's changed
files carried in and the image's toolchain left as it was built.

Why not the agent's container: the agent had root there, so it could replace python3 or
pytest, put a fake ``pytest`` earlier on PATH, drop a ``.pth`` or ``sitecustomize`` into
site-packages, edit shell startup files or ``/etc/ld.so.preload``, or leave a process
rewriting the reward; a verifier run there reports what the agent chose.

Why not a trusted runtime copied into that container: the tests need the image's own
python and packages, and those are dynamic binaries that read the container's
``/etc/ld.so.preload``, loader cache and libraries before any flag (``-I``, ``env -i``)
takes effect. Only a filesystem the agent never touched runs them safely.

So the verifier runs in a second container, started from the image with the agent's and
surveyed while the agent works (``survey``: what it holds, where its toolchain lives). The
agent never reaches it: nothing is shared, and the agent's container is removed before the
tests start. After the agent's turn (``snapshot``), its processes are killed and every path
whose ctime is newer than its container's start (every write, chmod, chown, rename or link
sets it, and nothing sets it back) is archived, after the list of all its paths (deletions
are what the image has and the list lacks). The agent's own ``find`` and ``tar`` make that
archive, so nothing in it is trusted: ``restore`` rebuilds it keeping only regular files,
directories, symlinks and hard links to kept files, outside the protected paths, never
below a symlink (carried or the image's), so each entry lands at its own path and nowhere
else; deletions run first, with the image's ``rm``. Protected: the system's executables and
libraries, what the loader, Python, shells, pip, uv and pytest read without being asked
(``PROTECTED``), every PATH directory and every directory of the image's Python (prefix,
``sys.path``, site-packages). The agent's changes there are dropped and the verifier uses
the image's: a task whose result must live there (a tool installed in /usr/local/bin, a
package in site-packages) cannot be verified and fails validation, the safe direction.

Left to the task: a test that imports or runs the agent's code (its module, a script,
``git`` with the agent's hooks) runs it as root in the verifier's container, where it can
write the reward; and ``python -m pytest`` started from an agent-written directory imports
the agent's modules first (the managed template ``cd``s to /tests).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import io
import os
import re
import shlex
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from fnmatch import fnmatchcase
from glob import escape
from pathlib import Path
from typing import IO

from aes_lib.sandbox.container import KILL_ALL, Sandbox, SandboxError, SandboxVerdict, add_dir, dir_entry

PROTECTED = (
    # Executables, libraries, interpreters and their packages.
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
    # Read without being asked by the loader (glibc, musl), Python, OpenSSL; `alternatives` links.
    "/etc/ld.so.preload", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ld-musl-*",
    "/etc/python*", "/etc/ssl/openssl.cnf", "/etc/alternatives",
    # Shell startup files, pip and uv configuration.
    "/etc/profile", "/etc/profile.d", "/etc/bash.bashrc", "/etc/environment", "/etc/pip.conf", "/etc/xdg/pip",
    "/etc/uv",
    # pytest's and uv's configuration above /tests; pytest's temporary folders.
    "/pytest.ini", "/pyproject.toml", "/tox.ini", "/setup.cfg", "/conftest.py", "/uv.toml", "/tmp/pytest-of-*",
    # The verifier's input and output.
    "/tests", "/logs",
    # Docker's mounts, not the image's files.
    "/proc", "/sys", "/dev", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf",
)
"""Paths (globs per component) that keep the image's content in the verifier's container."""
HOME_PROTECTED = (".bashrc", ".bash_profile", ".bash_login", ".profile", ".local", ".config/pip", ".config/uv", ".pip")
"""The same below the verifier's home (``.local`` holds Python's user site-packages)."""
MAX_CHANGES_BYTES = 1 << 30
"""Most bytes of changes taken from the agent's container."""

_SCRATCH = "/logs/.aes-carry"  # in the agent's container
_SPOOL = 32 << 20  # archives larger than this go to a temporary file
_MAGIC = re.compile(r"[*?[]")
_KEPT = {tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE}
# Every directory the image's Python imports from, as given and resolved, each as a `t`
# record (Python 2 too: an image's `python` may be one).
_PY_PROBE = (
    "import os, site, sys; ds = [sys.prefix, sys.exec_prefix, getattr(sys, 'base_prefix', sys.prefix)] + sys.path"
    " + list(getattr(site, 'getsitepackages', list)()) + [getattr(site, 'getusersitepackages', str)()]; "
    "sys.stdout.write(''.join('t' + d + '\\0t' + os.path.realpath(d) + '\\0' for d in ds if os.path.isabs(d)))"
)
# NUL-terminated records, tagged by their first character: h (HOME), t (a toolchain
# directory), x (a verifier path the image already has), else find's kind of an image path.
_SURVEY = r"""
printf 'h%s\0' "$HOME"
set -f; IFS=:
for p in $PATH; do printf 't%s\0' "$p" "$(readlink -f -- "$p")"; done
unset IFS
for py in python3 python; do
  if command -v "$py" >/dev/null 2>&1; then "$py" -c {probe} || exit 1; fi
done
for p in /tests /logs/verifier; do if [ -e "$p" ] || [ -L "$p" ]; then printf 'x%s\0' "$p"; fi; done
find / -xdev -mindepth 1 \( {prune} \) -prune -o -printf '%y%p\0'
"""
# One tar on stdout: first the list of every path, then each path changed since {since}.
_SNAPSHOT = r"""
d={scratch}; rm -rf "$d" && mkdir -p "$d" || exit 1
find / -xdev -mindepth 1 \( {prune} \) -prune -o -fprint0 "$d/paths" -newerct @{since} -fprint0 "$d/changed" || exit 1
tar --null --no-recursion --format=pax -cf - -C "$d" paths -C / -T "$d/changed" 2>/dev/null; [ $? -le 1 ]
"""


class Protected:
    """Paths, as globs per component, and everything below them."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(dict.fromkeys(patterns))
        split = [tuple(_parts(p)) for p in self.patterns]
        self._literal = {s for s in split if not any(map(_MAGIC.search, s))}
        self._globs = [s for s in split if s not in self._literal]
        self._above = {s[:i] for s in self._literal for i in range(len(s))}

    def covers(self, path: str) -> bool:
        """``path`` is protected or below a protected path."""
        parts = tuple(_parts(path))
        return (any(parts[:i] in self._literal for i in range(1, len(parts) + 1))
                or any(len(g) <= len(parts) and all(map(fnmatchcase, parts, g)) for g in self._globs))

    def above(self, path: str) -> bool:
        """``path`` is an ancestor of a protected path, so it must stay a directory."""
        parts = tuple(_parts(path))
        return parts in self._above or any(len(g) > len(parts) and all(map(fnmatchcase, parts, g)) for g in self._globs)


def protect(home: str, toolchain: Iterable[str]) -> Protected:
    """``PROTECTED``, ``HOME_PROTECTED`` below ``home``, and the ``toolchain`` directories."""
    in_home = (f"{escape(home)}/{name}" for name in HOME_PROTECTED)
    return Protected([*PROTECTED, *in_home, *map(escape, sorted(toolchain))])


@dataclasses.dataclass(frozen=True)
class Pristine:
    """The verifier's container as the image made it."""

    protected: Protected
    kinds: dict[str, str]
    """Every path not protected -> its kind (find's ``%y``: d, f, l, ...)."""
    home: str
    """Root's HOME in the image (Docker would look it up in the agent's /etc/passwd)."""
    stale: tuple[str, ...]
    """/tests and /logs/verifier if the image has them (removed before the tests)."""


_surveys: dict[tuple[str, tuple[tuple[str, str], ...]], Pristine] = {}


async def survey(fresh: Sandbox, env: dict[str, str]) -> Pristine:
    """What ``fresh``, started from the image with ``env`` and not yet touched, protects and
    holds; cached by image and environment."""
    key = (fresh.container.attrs["Image"], tuple(sorted(env.items())))
    if key not in _surveys:
        out = io.BytesIO()
        script = _SURVEY.format(probe=shlex.quote(_PY_PROBE), prune=_prune(PROTECTED))
        r = await fresh.exec(script, timeout=120, user=0, stdout=out.write)
        if r.exit_code != 0:
            raise SandboxError(f"cannot survey the verifier's container (needs GNU find): {r.output[-500:]}")
        tagged: dict[str, list[str]] = {}
        for record in _fields(out.getvalue()):
            tagged.setdefault(record[:1], []).append(record[1:])
        home = tagged.pop("h", [""])[0] or "/root"
        protected = protect(home, (d for d in tagged.pop("t", []) if d.startswith("/")))
        stale = tuple(tagged.pop("x", []))
        kinds = {p: k for k, paths in tagged.items() for p in paths if not protected.covers(p)}
        if len(_surveys) >= 16:
            _surveys.pop(next(iter(_surveys)))
        _surveys[key] = Pristine(protected, kinds, home, stale)
    return _surveys[key]


async def snapshot(agent: Sandbox) -> IO[bytes]:
    """The agent's changes as its container's ``find`` and ``tar`` report them (untrusted): a
    tar of the list of every path, then of each changed entry. Kills the agent's processes first."""
    since = _epoch((await agent.inspect())["State"]["StartedAt"])
    script = KILL_ALL + _SNAPSHOT.format(scratch=_SCRATCH, prune=_prune(PROTECTED), since=since)
    snap = tempfile.SpooledTemporaryFile(_SPOOL)
    try:
        r = await agent.exec(script, timeout=300, user=0, stdout=_Capped(snap.write, MAX_CHANGES_BYTES))
        if r.exit_code != 0:
            raise SandboxVerdict(f"cannot list the agent's changes (needs GNU find and tar): {r.output[-500:]}")
    except BaseException:
        snap.close()
        raise
    snap.seek(0)
    return snap


async def restore(fresh: Sandbox, pristine: Pristine, snap: IO[bytes], tests_dir: Path) -> None:
    """Bring the agent's changes (a ``snapshot``) and the task's tests into ``fresh``, with an
    empty /logs/verifier."""
    with tempfile.SpooledTemporaryFile(_SPOOL) as archive:
        try:
            deleted = await asyncio.to_thread(rebuild, pristine, snap, tests_dir, archive)
        except (tarfile.TarError, EOFError, ValueError) as e:  # the agent's bytes: its failure, not ours
            raise SandboxVerdict(f"the agent's change archive is unreadable: {e}") from e
        archive.seek(0)
        for cmd in _batches("rm -rf --", [*pristine.stale, *deleted]):
            r = await fresh.exec(cmd, timeout=120, user=0)
            if r.exit_code != 0:
                raise SandboxError(f"cannot delete in the verifier's container: {r.output[-500:]}")
        await fresh.put_archive(archive)


def rebuild(pristine: Pristine, snap: IO[bytes], tests_dir: Path, out: IO[bytes]) -> list[str]:
    """Write to ``out`` the archive to extract at / of the fresh container (the agent's changed
    entries that are safe to carry, /tests, /logs/verifier); return the paths to delete first."""
    with tarfile.open(fileobj=snap, mode="r|") as changes, \
            tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        listing = changes.next()
        data = changes.extractfile(listing) if listing is not None else None
        if data is None:
            raise SandboxVerdict("the agent's change list is missing")
        present = set(_fields(data.read()))
        _carry(pristine, changes, tar)
        add_dir(tar, tests_dir, "tests")
        tar.addfile(dir_entry("logs/verifier"))
    return _deletions(pristine, present)


def _carry(pristine: Pristine, changes: tarfile.TarFile, tar: tarfile.TarFile) -> None:
    kept: dict[str, bytes] = {}  # path -> type of each entry written
    below: set[str] = set()  # proper ancestors of the entries written
    for m in iter(changes.next, None):  # not `for m in changes`: that starts again from the list
        path, kind = "/" + m.name, tarfile.REGTYPE if m.isreg() else m.type
        if m.type not in _KEPT or any(p in ("", ".", "..") for p in m.name.split("/")) or path in kept:
            continue  # only canonical names, once each
        if pristine.protected.covers(path):
            continue
        if kind != tarfile.DIRTYPE and (pristine.protected.above(path) or path in below):
            continue  # would replace a directory that holds protected or written entries
        ancestors = list(_ancestors(path))
        # When this entry is extracted, each ancestor must be a directory: one written before,
        # or the image's (a missing one is created as a directory).
        if any(kept[a] != tarfile.DIRTYPE if a in kept else pristine.kinds.get(a, "d") != "d" for a in ancestors):
            continue
        if kind == tarfile.LNKTYPE and kept.get("/" + m.linkname) != tarfile.REGTYPE:
            continue
        info = tarfile.TarInfo(m.name)  # a fresh header: no extended attributes or device numbers
        info.type, info.mode, info.uid, info.gid, info.mtime = kind, m.mode, m.uid, m.gid, m.mtime
        if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
            info.linkname = m.linkname
        if kind == tarfile.REGTYPE:
            info.size = m.size
        tar.addfile(info, changes.extractfile(m) if kind == tarfile.REGTYPE else None)
        kept[path] = kind
        below.update(ancestors)


def _deletions(pristine: Pristine, present: set[str]) -> list[str]:
    """The image's paths the agent removed, topmost only, never an ancestor of a protected one."""
    gone = {p for p in pristine.kinds if p not in present and not pristine.protected.above(p)}
    return sorted(p for p in gone if not any(a in gone for a in _ancestors(p)))


class _Capped:
    """Passes bytes on to ``write``, refusing more than ``limit`` in all."""

    def __init__(self, write: Callable[[bytes], object], limit: int) -> None:
        self.write, self.limit, self.left = write, limit, limit

    def __call__(self, data: bytes) -> None:
        self.left -= len(data)
        if self.left < 0:
            raise SandboxVerdict(f"the agent's changes exceed {self.limit} bytes")
        self.write(data)


def _fields(data: bytes) -> list[str]:
    """NUL-terminated fields as paths (undecodable bytes kept as surrogates)."""
    return [os.fsdecode(f) for f in data.split(b"\0")[:-1]]


def _parts(path: str) -> list[str]:
    path = path.strip("/")
    return path.split("/") if path else []


def _ancestors(path: str) -> Iterable[str]:
    parts = _parts(path)
    return ("/" + "/".join(parts[:i]) for i in range(1, len(parts)))


def _prune(patterns: Iterable[str]) -> str:
    return " -o ".join(f"-path {shlex.quote(p)}" for p in patterns)


def _epoch(iso: str) -> str:
    """Docker's UTC time with nanoseconds -> ``seconds.fraction`` (for find's ``@``)."""
    whole, _, frac = iso.rstrip("Z").partition(".")
    seconds = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.timezone.utc).timestamp()
    return f"{int(seconds)}.{frac or '0'}"


def _batches(command: str, paths: list[str], limit: int = 64 << 10) -> list[str]:
    """``command`` over ``paths`` in as few lines as keep each under ``limit`` characters."""
    lines: list[str] = []
    for q in map(shlex.quote, paths):
        if not lines or len(lines[-1]) + len(q) >= limit:
            lines.append(command)
        lines[-1] += " " + q
    return lines
