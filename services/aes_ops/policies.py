"""Published policy versions as folders other tools load (``aes policy export``)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from aes_proto import subjects
from aes_proto.messages import PolicyVersion

from aes_lib.bus import Bus
from aes_lib.checkpoints import check_folder, fetch_folder
from aes_lib.config import Settings
from aes_ops.connect import with_bus


class UnpublishedVersionError(LookupError):
    """The version asked for was never announced on ``aes.policy.version``."""


async def export_version(settings: Settings, version: int, policy: str, dest: Path) -> Path:
    """Fetch ``policy``'s announced ``version`` (digests checked) into ``dest``: an HF-format
    folder ``AutoModelForCausalLM.from_pretrained`` loads; the folder."""

    async def go(bus: Bus) -> Path:
        published = [p for p in await bus.history(subjects.POLICY_VERSION, PolicyVersion) if p.policy == policy]
        found = [p for p in published if p.version == version]
        if not found:
            have = sorted({p.version for p in published})
            raise UnpublishedVersionError(f"{policy} policy version {version} is not published on "
                                          f"{subjects.POLICY_VERSION} (published: {have or 'none'})")
        pv = found[-1]
        if pv.folder:  # the filesystem transport's one copy: exported as a copy of its own
            check_folder(Path(pv.folder))
            return await asyncio.to_thread(shutil.copytree, pv.folder, dest, dirs_exist_ok=True)
        return await asyncio.to_thread(fetch_folder, bus.blobs, pv.checkpoint, dest)

    return await with_bus("aes-policy", go, settings)
