"""Service processes run on uvloop (bench/results/bus_bench.md), asyncio's loop where it is absent."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from aes_proto import subjects
from aes_proto.messages import GateResult

from aes_lib.bus import Bus
from aes_lib.bus.runner import new_event_loop
from aes_lib.config import Settings

from .helpers import assignment, env_for, eventually

HERE = Path(__file__).parent


def test_uvloop_when_installed_else_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvloop

    loop = new_event_loop()
    assert isinstance(loop, uvloop.Loop)
    loop.close()
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what an interpreter without uvloop sees
    loop = new_event_loop()
    assert isinstance(loop, asyncio.BaseEventLoop) and not isinstance(loop, uvloop.Loop)
    loop.close()


async def test_a_service_process_handles_messages_on_uvloop(fresh_nats: Settings, tmp_path: Path) -> None:
    env = env_for(fresh_nats, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    log = tmp_path / "probe.log"
    proc = subprocess.Popen([sys.executable, "-m", "aes_cli.main", "service", "stack_probe:Probe"],
                            env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        async with await Bus.connect(fresh_nats) as bus:
            await bus.publish(subjects.ASSIGNMENT, assignment("loop"))
            results: list[GateResult] = []

            async def handled() -> bool:
                results[:] = await bus.history(subjects.RESULT_GATE, GateResult)
                return bool(results)

            await eventually(handled, "the probe's result")
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [r.detail for r in results] == ["loop uvloop"], log.read_text()
