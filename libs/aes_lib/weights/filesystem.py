"""The filesystem transport: the one copy of a version is the folder the trainer writes.

The trainer writes the version's HF folder under ``<root>/<prefix>/`` (``AES_WEIGHTS_DIR``:
the same path for trainer and engines, one machine or a shared mount) into a hidden
sibling, gives a tied output head its own tensor there when the engine is vLLM (its reload
misses a tied head, ``aes_lib.models.untie``: done once, at write time, as a kernel copy of
the embedding's bytes), checks the
safetensors headers and renames it into place, so a folder under its final name is always
whole. The announcement names the folder (``PolicyVersion.folder``); the engines load it in
place. Nothing goes through the blob store and nothing is hashed: the rename is the commit.
The newest ``keep`` versions stay (at least 2: an engine may still be loading the previous
one when the next lands).
"""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from aes_lib.checkpoints import check_folder
from aes_lib.models.untie import untie
from aes_lib.weights.transport import VersionMeta, Write, announce
from aes_proto.messages import PolicyVersion

if TYPE_CHECKING:
    from aes_lib.service import Context

MIN_KEEP = 2


@dataclass
class FilesystemTransport:
    root: Path
    untie_head: bool = False
    """Write a tied output head as a tensor of its own (the engine is vLLM)."""
    name: str = "filesystem"

    def folder(self, meta: VersionMeta) -> Path:
        return self.root / meta.prefix / f"v{meta.version:06d}"

    async def publish(self, ctx: "Context", write: Write, meta: VersionMeta, model=None) -> PolicyVersion:
        dest = self.folder(meta)
        tmp = dest.with_name(f".{dest.name}.partial")
        await asyncio.to_thread(shutil.rmtree, tmp, True)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        await write(tmp)
        await asyncio.to_thread(self._commit, tmp, dest)
        await asyncio.to_thread(self._prune, dest.parent, meta.keep)
        return await announce(ctx, meta.message(folder=str(dest)))

    def _commit(self, tmp: Path, dest: Path) -> None:
        if self.untie_head:
            untie(tmp)
        check_folder(tmp)  # headers against sizes: a bad folder never gets a version's name
        if dest.exists():  # a version written again after a crash (as the store overwrites its keys)
            old = dest.with_name(f".{dest.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            dest.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        tmp.rename(dest)

    @staticmethod
    def _prune(parent: Path, keep: int) -> None:
        if not keep:
            return
        versions = sorted(p for p in parent.glob("v*") if p.is_dir())
        for old in versions[: -max(keep, MIN_KEEP)]:
            shutil.rmtree(old, ignore_errors=True)
