#!/bin/bash
# Walk archives in memory with tarfile/zipfile, recursing into nested archives; only regular .csv members
# with safe relative paths are written, always to /app/extracted/<basename>.
set -euo pipefail
python3 - <<'PY'
import io, json, posixpath, tarfile, zipfile
from pathlib import Path

incoming, dest = Path("/app/incoming"), Path("/app/extracted")
dest.mkdir(parents=True, exist_ok=True)
ARCHIVES = (".tar", ".tar.gz", ".tgz", ".zip")


def safe(name):
    return not name.startswith("/") and ".." not in name.split("/")


def members(data, name):
    """Yield (member name, bytes) for regular-file members of the archive ``data``."""
    if name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for info in zf.infolist():
                is_link = (info.external_attr >> 16) & 0o170000 == 0o120000
                if not info.is_dir() and not is_link:
                    yield info.filename, zf.read(info)
    else:
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            for info in tf:
                if info.isreg():
                    yield info.name, tf.extractfile(info).read()


def walk(data, name, found):
    for member, content in members(data, name):
        if not safe(member):
            continue
        if member.endswith(ARCHIVES):
            walk(content, member, found)
        elif member.endswith(".csv"):
            found[posixpath.basename(member)] = content


corrupt, found = [], {}
for archive in sorted(incoming.iterdir()):
    if not archive.name.endswith(ARCHIVES):
        continue
    batch = {}
    try:
        walk(archive.read_bytes(), archive.name, batch)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError):
        corrupt.append(archive.name)
        continue
    found.update(batch)
for name, content in found.items():
    (dest / name).write_bytes(content)
Path("/app/corrupt.txt").write_text("".join(f"{n}\n" for n in corrupt))
rows = sum(len(c.splitlines()) - 1 for c in found.values())
Path("/app/summary.json").write_text(json.dumps({"files": len(found), "rows": rows}))
PY
