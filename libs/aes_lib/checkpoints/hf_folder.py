"""An HF-format model folder (config.json, tokenizer files, ``*.safetensors``, possibly sharded
with an index) stored file by file under a key prefix, plus a manifest that names each file's
blob and digest. ``PolicyVersion.checkpoint`` points at the manifest, so one small message pins
the whole folder; readers fetch it into a local folder that vLLM, the torch engine and
``transformers.from_pretrained`` load as it is.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import msgspec

from aes_lib.blobstore import BlobStore
from aes_proto.messages import BlobRef

FORMAT = "aes-hf-folder/1"
MANIFEST = "manifest.json"
_MAX_HEADER = 100 << 20
"""safetensors caps its JSON header at 100 MB; a larger length field means a corrupt file."""


class CheckpointFolderError(ValueError):
    """A folder or manifest that is not a loadable checkpoint (named file, reason)."""


class _Manifest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    format: str
    files: dict[str, BlobRef]


def check_folder(folder: Path) -> None:
    """Refuse a folder an engine would choke on (vLLM's worker dies on a bad load path):
    it needs config.json and at least one safetensors file whose header parses and whose
    tensors fit the file; a sharded index must name only files that are present."""
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise CheckpointFolderError(f"{folder}: no config.json")
    try:
        json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise CheckpointFolderError(f"{folder}/config.json: not JSON: {e}") from None
    shards = sorted(folder.glob("*.safetensors"))
    if not shards:
        raise CheckpointFolderError(f"{folder}: no *.safetensors file")
    for shard in shards:
        _check_safetensors(shard)
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            named = set(json.loads(index.read_text())["weight_map"].values())
        except (OSError, ValueError, KeyError, AttributeError) as e:
            raise CheckpointFolderError(f"{index}: not a safetensors index: {e}") from None
        missing = sorted(n for n in named if not (folder / n).is_file())
        if missing:
            raise CheckpointFolderError(f"{index} names missing shards: {missing}")


def _check_safetensors(path: Path) -> None:
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise CheckpointFolderError(f"{path.name}: truncated ({size} bytes)")
        (n,) = struct.unpack("<Q", head)
        if n > min(_MAX_HEADER, size - 8):
            raise CheckpointFolderError(f"{path.name}: header length {n} exceeds the file")
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            raise CheckpointFolderError(f"{path.name}: header is not JSON: {e}") from None
    end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
    if 8 + n + end > size:
        raise CheckpointFolderError(f"{path.name}: tensors end at byte {8 + n + end}, file has {size}")


def publish_folder(store: BlobStore, prefix: str, folder: Path) -> BlobRef:
    """Upload every file of ``folder`` under ``prefix/`` and then the manifest (written last, so a
    manifest only ever names files already stored). Checked first: a bad folder is never published."""
    folder = Path(folder)
    check_folder(folder)
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        files[rel] = store.put_file(f"{prefix}/{rel}", path)
    body = msgspec.json.encode(_Manifest(format=FORMAT, files=files))
    return store.put_bytes(f"{prefix}/{MANIFEST}", body)


def fetch_folder(store: BlobStore, ref: BlobRef, dest: Path) -> Path:
    """The folder that ``ref`` (a manifest) names, at ``dest``: each file fetched with its digest
    checked, into a sibling temporary folder renamed into place once complete and checked.
    A ``dest`` already holding this manifest is reused."""
    dest = Path(dest)
    raw = store.get_bytes(ref)
    if (dest / MANIFEST).is_file() and (dest / MANIFEST).read_bytes() == raw:
        return dest
    try:
        manifest = msgspec.json.decode(raw, type=_Manifest)
    except msgspec.DecodeError as e:
        raise CheckpointFolderError(f"{ref.key}: not a checkpoint manifest: {e}") from None
    if manifest.format != FORMAT:
        raise CheckpointFolderError(f"{ref.key}: format {manifest.format!r}, expected {FORMAT!r}")
    tmp = dest.with_name(f"{dest.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    for rel, blob in manifest.files.items():
        target = (tmp / rel).resolve()
        if rel.startswith("/") or ".." in Path(rel).parts or not target.is_relative_to(tmp.resolve()):
            raise CheckpointFolderError(f"{ref.key}: file name {rel!r} leaves the folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        store.get_file(blob, target)
    check_folder(tmp)
    (tmp / MANIFEST).write_bytes(raw)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def delete_folder(store: BlobStore, ref: BlobRef) -> None:
    """Delete the folder whose manifest is ``ref``: its files, then the manifest (so a manifest
    never names a missing file while it exists). A folder already gone is fine."""
    if not store.exists(ref.key):
        return
    manifest = msgspec.json.decode(store.get_bytes(ref), type=_Manifest)
    for blob in manifest.files.values():
        store.delete(blob.key)
    store.delete(ref.key)
