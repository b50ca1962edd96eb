"""What a run records about itself: its effective configuration, in a file next to its
report and as a ``RunRecord`` in the bus's ``aes_runs`` bucket."""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import msgspec
from nats.js.errors import NoKeysError

from aes_proto.records import RUNS_BUCKET, RunRecord

from aes_lib import runconfig
from aes_lib.bus import Bus
from aes_lib.bus.kv import read

CONFIG_NAME = "config.toml"
"""The file beside a run's report that holds the configuration it ran with."""


def new_run_id(command: str) -> str:
    return f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


async def record_run(bus: Bus, folder: Path, command: str) -> RunRecord:
    """Record this process's effective configuration for a run of ``command`` whose report
    goes to ``folder``; returns the record (its ``run_id`` names the run)."""
    entries = runconfig.effective()
    record = RunRecord(
        run_id=new_run_id(command), command=command, started_at=time.time(), config=runconfig.as_tables(entries),
        sources={f"{e.section}.{e.key}": e.source for e in entries if e.source != "default"})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CONFIG_NAME).write_text(runconfig.to_toml(
        entries, f"aes {command}, run {record.run_id}: the effective configuration (aes --config reads it back)"))
    await (await bus.kv(RUNS_BUCKET)).put(record.run_id, msgspec.msgpack.encode(record))
    return record


async def runs(bus: Bus) -> list[RunRecord]:
    """Every recorded run, oldest first."""
    kv = await bus.kv(RUNS_BUCKET)
    try:
        keys = await kv.keys()
    except NoKeysError:
        return []
    found = [r for k in keys if (r := await read(kv, k, RunRecord)) is not None]
    return sorted(found, key=lambda r: r.started_at)
