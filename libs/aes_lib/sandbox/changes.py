"""What a probe's reference changed in the result paths, by content against the image's files
(hashes taken before it ran), never by timestamps, which the reference (as any agent) sets.

Shell commands for the agent's container, run as root: ``snap`` records a hash of every regular
file under the result paths; ``changed`` prints (NUL-separated) those new or changed since;
``mutate`` rewrites the image's text data files still as recorded (the input probe) and prints them.
"""

from __future__ import annotations

import shlex

SNAPSHOT = "/tmp/.aes-probe-snapshot"

_SCRIPT = r'''
import hashlib, json, os, sys
CODE = (".py", ".sh", ".pyc", ".so")
SKIP = (".git", "node_modules", "__pycache__")

def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

def files(roots):
    for top in roots:
        for root, dirs, names in os.walk(top):
            for name in names:
                path = os.path.join(root, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    yield path

def data(path):
    """A text data file: not code, not executable, no NUL, UTF-8, at most 8 MiB, outside .git."""
    if any(part in SKIP for part in path.split("/")) or path.endswith(CODE) or os.stat(path).st_mode & 0o111:
        return False
    if os.path.getsize(path) > (8 << 20):
        return False
    with open(path, "rb") as f:
        body = f.read()
    try:
        body.decode()
    except UnicodeDecodeError:
        return False
    return b"\0" not in body and not body.startswith(b"#!")

mode, snap = sys.argv[1], os.environ["SNAP"]
if mode == "snap":
    with open(snap, "w") as f:
        json.dump({p: digest(p) for p in files(sys.argv[2:])}, f)
    sys.exit()
with open(snap) as f:
    before = json.load(f)
if mode == "changed":
    sys.stdout.write("".join(p + "\0" for p in files(sys.argv[2:]) if before.get(p) != digest(p)))
else:
    for path, h in before.items():
        if not os.path.isfile(path) or os.path.islink(path) or digest(path) != h or not data(path):
            continue
        with open(path) as f:
            lines = f.read().splitlines(True)
        kept = lines[: len(lines) // 2] if len(lines) > 1 else lines * 2
        if kept != lines:
            with open(path, "w") as f:
                f.writelines(kept)
            print(path)
'''


def _command(mode: str, roots: list[str]) -> str:
    return f"SNAP={SNAPSHOT} python3 -c {shlex.quote(_SCRIPT)} {mode} {' '.join(map(shlex.quote, roots))}"


def snap(roots: list[str]) -> str:
    return _command("snap", roots)


def changed(roots: list[str]) -> str:
    return _command("changed", roots)


def mutate() -> str:
    return _command("mutate", [])
