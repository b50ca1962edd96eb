"""The store transport: each version's folder is uploaded to the blob store, and weight sync
fetches it next to each engine (``aes_lib.models.weights``). For engines on other machines
than the trainer; every tool that reads a version from the store (``aes policy export``,
eval) reads these."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from aes_lib.learner.policy import publish_policy
from aes_lib.weights.transport import VersionMeta, Write
from aes_proto.messages import PolicyVersion

if TYPE_CHECKING:
    from aes_lib.service import Context


class StoreTransport:
    name = "store"

    async def publish(self, ctx: "Context", write: Write, meta: VersionMeta, model=None) -> PolicyVersion:
        with tempfile.TemporaryDirectory(prefix="aes-publish-") as tmp:
            folder = Path(tmp) / "policy"
            await write(folder)
            return await publish_policy(ctx, folder, version=meta.version, step=meta.version, prefix=meta.prefix,
                                        base_model=meta.base_model, run_id=meta.run_id, policy=meta.policy,
                                        solver_updates=meta.solver_updates, trained_role=meta.trained_role)
