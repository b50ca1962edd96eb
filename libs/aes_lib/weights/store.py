"""The store transport: each version's folder is uploaded to the blob store, and weight sync
fetches it next to each engine (``aes_lib.models.weights``). For engines on other machines
than the trainer; every tool that reads a version from the store (``aes policy export``,
eval) reads these."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from aes_lib.checkpoints import publish_folder
from aes_lib.learner.policy import version_prefix
from aes_lib.weights.transport import VersionMeta, Write, announce
from aes_proto.messages import PolicyVersion

if TYPE_CHECKING:
    from aes_lib.service import Context


class StoreTransport:
    name = "store"

    async def publish(self, ctx: "Context", write: Write, meta: VersionMeta, model=None) -> PolicyVersion:
        with tempfile.TemporaryDirectory(prefix="aes-publish-") as tmp:
            folder = Path(tmp) / "policy"
            await write(folder)
            ref = await asyncio.to_thread(publish_folder, ctx.blobs, version_prefix(meta.prefix, meta.version), folder)
        return await announce(ctx, meta.message(checkpoint=ref))
