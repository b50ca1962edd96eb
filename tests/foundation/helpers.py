"""Small helpers shared by the foundation tests."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from aes_proto.messages import Assignment, Lineage

from aes_lib.config import Settings

WORKER = Path(__file__).with_name("worker.py")
WAIT = 60.0
"""Upper bound on any wait for the bus; tests finish as soon as the condition holds."""


def assignment(i: int | str, **kw: object) -> Assignment:
    """An assignment ``as-<i>``; keyword arguments naming a ``Lineage`` field go into its lineage."""
    lineage = {k: kw.pop(k) for k in list(kw) if k in Lineage.__struct_fields__}
    lineage.setdefault("assignment_id", f"as-{i}")
    return Assignment(idempotency_key=f"a-{i}", episode_id=f"ep-{i}", lineage=Lineage(**lineage),  # type: ignore[arg-type]
                      direction="new", **kw)  # type: ignore[arg-type]


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = WAIT) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def env_for(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AES_")}
    env.update(
        AES_HOME=str(settings.home),
        AES_NATS_URL=settings.nats_url,
        AES_NATS_USER=settings.nats_user,
        AES_NATS_PASSWORD=settings.nats_password,
        AES_BLOB_URL=settings.blob_url,
        **extra,
    )
    return env


def start_worker(settings: Settings, mode: str, log: Path, **extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WORKER), mode],
        env=env_for(settings, **extra),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
