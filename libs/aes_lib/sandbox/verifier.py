"""What of the agent's container crosses into the verifier's: an allow-list (docs/SECURITY.md).

The agent is root in its container and every file it wrote is hostile. The reward may depend
only on the task's pristine tests and on the agent's results read as data, so the tests run in
a second container, fresh from the task image, and only this crosses into it:

- the **result paths** (``result_paths``): the task's working directory and the paths its
  ``artifacts`` name, never a place a trusted process reads on its own
  (``aes_lib.bundle.config.RESERVED_PATHS``: the toolchain, /etc, root's home, /tests, /logs...);
- copied out by the engine (``docker cp``) once the agent's processes are gone: no process of
  ours runs in the agent's filesystem to collect them (``collect``);
- rebuilt as data (``rebuild``): directories, regular files (setuid and setgid bits cleared),
  symlinks that resolve, in the agent's own view, inside the result paths, and hard links to
  regular files kept; owners and modes as numbers. Anything else is dropped and named in the
  trial's evidence.

In the verifier's container, before anything of the agent's is in it, each result path is
removed and then rebuilt whole from what crossed (so the agent's deletions carry), with the
task's tests as /tests and an empty /logs/verifier (``restore``). The rest of the agent's
container (its /etc and account database, toolchain, shell start-up files, home, /tmp,
processes) stays behind, so no trusted process there reads configuration, a library or a user
name the agent wrote: the verifier's container is the image as built, plus the agent's results.
"""

from __future__ import annotations

import dataclasses
import io
import posixpath
import shlex
import tarfile
import tempfile
from pathlib import Path
from typing import IO

from aes_lib.bundle import Task
from aes_lib.bundle.config import reserved_path
from aes_lib.sandbox import root_env
from aes_lib.sandbox.container import Sandbox, SandboxError, SandboxVerdict, dir_entry
from aes_lib.sandbox.root_env import JUDGE_BIN, SHIMMED

MAX_RESULT_BYTES = 1 << 30
"""Most bytes of results taken from the agent's container."""
_SPOOL = 32 << 20  # archives larger than this go to a temporary file
_MAX_HOPS = 40  # symlinks followed while resolving one path (the kernel's limit)


def result_paths(task: Task, image_workdir: str | None = None,
                 extra: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """The paths that cross (topmost only) and notes on what could not: the working directory
    (task.toml's, else the image's) unless it is / or reserved, each artifact (relative ones
    below the working directory; task.toml's check refuses reserved ones) and the ``extra``
    paths of the task's kind (``TaskKinds.results``)."""
    workdir = task.config.environment.workdir or image_workdir or "/"
    notes, paths = [], []
    if workdir == "/" or reserved_path(workdir):
        notes.append(f"the working directory {workdir} is not a result path (the agent's changes there do not "
                     "reach the tests): set [environment] workdir or list the results as artifacts")
    else:
        paths.append(posixpath.normpath(workdir))
    for a in [*task.config.artifacts, *extra]:
        source = a if isinstance(a, str) else a.source
        path = posixpath.normpath(posixpath.join(workdir, source))
        if reserved_path(path):
            notes.append(f"artifact {path} is reserved for the verifier's toolchain: not carried")
        else:
            paths.append(path)
    top = [p for p in dict.fromkeys(paths) if not any(_within(p, q) and p != q for q in paths)]
    return top, notes


@dataclasses.dataclass
class Crossing:
    """What crossed: the archive to extract at / of the verifier's container, and what was dropped."""

    archive: IO[bytes]
    roots: list[str]
    dropped: list[str] = dataclasses.field(default_factory=list)
    """``path: why`` of each entry of the agent's that did not cross."""
    links: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    """``(path, where it leads)`` of each symlink dropped for leaving the result paths: the screen
    reads these, never the evidence lines (a name may hold any text, and a link may leave
    through another link)."""


async def collect(agent: Sandbox, roots: list[str]) -> list[tuple[str, IO[bytes] | None]]:
    """Docker's archive of each result path of ``agent`` (None: absent), read by the engine; the
    agent's processes must be gone (or frozen) first."""
    out: list[tuple[str, IO[bytes] | None]] = []
    budget = MAX_RESULT_BYTES
    try:
        for root in roots:
            spool = tempfile.SpooledTemporaryFile(_SPOOL)
            out.append((root, spool))
            if not await agent.get_archive(root, spool, budget):
                spool.close()
                out[-1] = (root, None)
                continue
            budget -= spool.tell()
            spool.seek(0)
        if any(f is None for _, f in out):
            await agent.inspect()  # an absent path, not a container gone (the engine's fault, never a verdict)
    except BaseException:
        for _, f in out:
            if f is not None:
                f.close()
        raise
    return out


def rebuild(archives: list[tuple[str, IO[bytes] | None]], tests_dir: Path, owners: bool = True) -> Crossing:
    """The archive of what crosses (each result path whole, /tests, an empty /logs/verifier)
    from the engine's archives of the result paths (``collect``). ``owners`` False: the archives
    carry no owner numbers (Podman's), so only root-owned results can cross (``_check_owner``)."""
    out = tempfile.SpooledTemporaryFile(_SPOOL)
    roots = [root for root, _ in archives]
    crossing = Crossing(out, roots)
    try:
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
            members = []
            for root, raw in archives:
                if raw is None:
                    crossing.dropped.append(f"{root}: absent in the agent's container (crosses empty)")
                    tar.addfile(dir_entry(root.lstrip("/")))
                    continue
                members.append((root, raw))
            for root, raw in members:
                with raw:
                    _carry(root, raw, roots, tar, crossing, owners)
            add_tests(tar, tests_dir)
            add_shims(tar, roots)
            tar.addfile(dir_entry("logs/verifier"))
    except (tarfile.TarError, EOFError, ValueError) as e:  # the agent's bytes: its failure, not ours
        out.close()
        raise SandboxVerdict(f"the agent's results are unreadable: {e}") from e
    except BaseException:
        out.close()
        raise
    out.seek(0)
    return crossing


MANAGED_HEADER = b"#!/bin/bash\n# AES managed verifier:"
"""How a copy of the managed template (``VERIFIER_TEMPLATE``) starts, in any of its versions."""
TEMPLATE = Path(__file__).parent / "verifier_template" / "test.sh"


def add_tests(tar: tarfile.TarFile, tests_dir: Path) -> None:
    """The task's tests as /tests, readable by root alone (a test.sh that runs tests under
    another identity grants it, as the managed template does for its tests' group): a program
    of the agent's that the tests run as another user cannot read the expected answers. A copy
    of the managed template, whatever its version, runs as the current one: the harness's file,
    so a task carrying an old copy is judged under today's boundary, never an older one."""
    tar.addfile(dir_entry("tests", 0o700))
    for path in sorted(tests_dir.rglob("*")):
        arcname = f"tests/{path.relative_to(tests_dir)}"
        if arcname == "tests/test.sh" and path.is_file() and not path.is_symlink() and _managed(path):
            path = TEMPLATE
        tar.add(path, arcname=arcname, recursive=False)


def add_shims(tar: tarfile.TarFile, roots: list[str]) -> None:
    """Root's stand-ins for the tools that run what their configuration names (``root_env``)."""
    tar.addfile(dir_entry(JUDGE_BIN.lstrip("/").split("/")[0]))
    tar.addfile(dir_entry(JUDGE_BIN.lstrip("/")))
    for tool in SHIMMED:
        data = root_env.shim(tool, roots).encode()
        info = tarfile.TarInfo(f"{JUDGE_BIN.lstrip('/')}/{tool}")
        info.mode, info.size = 0o755, len(data)
        tar.addfile(info, io.BytesIO(data))


def _managed(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(len(MANAGED_HEADER)) == MANAGED_HEADER


PRISTINE = "/aes/pristine"
"""Where the verifier's container keeps the image's own copy of each result path (root's, read
only): tests judge against these inputs, never against the copy the agent could rewrite."""


async def restore(fresh: Sandbox, crossing: Crossing) -> None:
    """Replace the result paths of ``fresh`` (still as the image made it) by what crossed, the
    image's own copy of each kept read-only under ``PRISTINE``, with the tests as /tests and an
    empty /logs/verifier."""
    keep = "".join(f"if [ -e {q} ] || [ -L {q} ]; then mkdir -p {PRISTINE}{shlex.quote(posixpath.dirname(r))} "
                   f"&& mv -- {q} {PRISTINE}{q}; fi && "
                   for r in crossing.roots for q in [shlex.quote(r)])
    r = await fresh.exec(f"rm -rf -- /tests /logs/verifier {PRISTINE} && mkdir -p {PRISTINE} && {keep}"
                         f"chown -R 0:0 {PRISTINE} && chmod -R a-w,a+rX {PRISTINE}", timeout=120, user=0, workdir="/")
    if r.exit_code != 0:
        raise SandboxError(f"cannot set the result paths aside in the verifier's container: {r.output[-500:]}")
    await fresh.put_archive(crossing.archive)


def _carry(root: str, raw: IO[bytes], roots: list[str], tar: tarfile.TarFile, crossing: Crossing,
           owners: bool = True) -> None:
    """Add to ``tar`` the entries of Docker's archive of ``root`` (named from its last component)
    that may cross; note the others in ``crossing``."""
    parent, dropped = posixpath.dirname(root), crossing.dropped
    view: dict[str, tarfile.TarInfo] = {}  # the agent's view of the result path: path -> entry
    with tarfile.open(fileobj=raw, mode="r:") as src:  # random access: links may name later entries
        entries = []
        for m in src:
            path = posixpath.join(parent, m.name).rstrip("/")
            if posixpath.normpath(path) != path or not _within(path, root):
                dropped.append(f"{m.name}: not a plain name below {root}")
            elif path not in view:
                view[path] = m
                entries.append((path, m))
        if root in view and view[root].isreg():  # an artifact naming one file crosses as that file
            entries = [(root, view[root])]
        elif root not in view or not view[root].isdir():
            dropped.append(f"{root}: not a directory or file in the agent's container (crosses empty)")
            tar.addfile(dir_entry(root.lstrip("/")))
            return
        kept: dict[str, bytes] = {}  # path -> type of each entry written
        for path, m in entries:
            if not owners:
                _check_owner(path, m)
            _add(path, m, src, root, roots, view, kept, tar, crossing)


def _add(path: str, m: tarfile.TarInfo, src: tarfile.TarFile, root: str, roots: list[str],
         view: dict[str, tarfile.TarInfo], kept: dict[str, bytes], tar: tarfile.TarFile, crossing: Crossing) -> None:
    why, leads = _refusal(path, m, root, roots, view, kept)
    if why:
        crossing.dropped.append(f"{path}: {why}")
        if leads is not None:
            crossing.links.append((path, leads))
        return
    info = tarfile.TarInfo(path.lstrip("/"))  # a fresh header: numbers only, no extended attributes
    info.type = tarfile.REGTYPE if m.isreg() else m.type
    info.mode = m.mode & 0o1777 if m.isreg() else m.mode & 0o7777
    info.uid, info.gid, info.mtime = m.uid, m.gid, m.mtime
    if m.isreg() and m.mode & 0o6000:
        crossing.dropped.append(f"{path}: setuid/setgid bits cleared")
    if m.issym():
        info.linkname = m.linkname
    elif m.islnk():
        info.linkname = posixpath.join(posixpath.dirname(root), m.linkname).lstrip("/")
    if m.isreg():
        info.size = m.size
    tar.addfile(info, src.extractfile(m) if m.isreg() else None)
    kept[path] = info.type


def _check_owner(path: str, m: tarfile.TarInfo) -> None:
    """Podman's archives read uid and gid 0 for every entry, naming the real owner only through
    the agent's own account database: an entry whose names are not root had another owner, which
    cannot cross. The engine's shortcoming, so never a verdict (and never crossing as root, which
    could grade an ownership wrongly). A name the agent made "root" gains it nothing: as root in
    its container it could have chowned the file itself."""
    if (m.uname, m.gname) != ("root", "root"):
        raise SandboxError(f"{path}: owned by {m.uname or '?'}:{m.gname or '?'} (not root), and the engine's "
                           "archive (Podman) carries no owner numbers: results with other owners cannot cross")


def _refusal(path: str, m: tarfile.TarInfo, root: str, roots: list[str], view: dict[str, tarfile.TarInfo],
             kept: dict[str, bytes]) -> tuple[str, str | None]:
    """Why entry ``m`` at ``path`` may not cross ("" if it may) and, for a symlink that leaves the
    result paths, where it leads (``_resolve``; else None)."""
    if not (m.isreg() or m.isdir() or m.issym() or m.islnk()):
        return "not a file, directory or link", None
    if path != root and kept.get(posixpath.dirname(path)) != tarfile.DIRTYPE:
        return "below an entry that is not a directory that crossed", None
    if m.issym():
        leads, inside = _resolve(posixpath.dirname(path), m.linkname, roots, view)
        return ("", None) if inside else (f"a link to {m.linkname} that leaves the result paths", leads)
    if m.islnk():
        source = posixpath.join(posixpath.dirname(root), m.linkname)
        if kept.get(source) != tarfile.REGTYPE:
            return f"a hard link to {m.linkname}, not a file that crossed", None
    return "", None


def _resolve(start: str, target: str, roots: list[str], view: dict[str, tarfile.TarInfo]) -> tuple[str, bool]:
    """Where ``target`` (a link's text, in directory ``start``) leads in the agent's view of the
    result paths, and whether it stays inside them at every step (False too when it loops). The
    agent's links are followed up to where it leaves them; the rest is taken as written."""
    hops = 0
    pending = target.split("/")
    at = "/" if target.startswith("/") else start
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        at = posixpath.dirname(at) if part == ".." else posixpath.join(at, part)
        if not any(_within(at, r) for r in roots):
            if any(_within(r, at) for r in roots):
                continue  # an ancestor of a result path, on the way down into it
            return posixpath.normpath(posixpath.join(at, *pending)), False
        entry = view.get(at)
        if entry is not None and entry.issym():
            hops += 1
            if hops > _MAX_HOPS:
                return at, False
            pending = entry.linkname.split("/") + pending
            at = "/" if entry.linkname.startswith("/") else posixpath.dirname(at)
    return at, any(_within(at, r) for r in roots)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")
