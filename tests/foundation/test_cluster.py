"""A three-server JetStream cluster (``aes up --nats-cluster 3``) loses its stream leader
mid-run: a service keeps consuming and every input gets exactly one effect."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import nats.errors
import pytest

from aes_proto import subjects
from aes_proto.messages import GateResult

from aes_ops import stack
from aes_lib.bus import Bus, stream_for
from aes_lib.config import Settings

from .helpers import assignment, eventually, start_worker

pytestmark = pytest.mark.slow

N = 60
"""Inputs per run: half are published, the leader dies once a quarter have their effect,
then the rest are published."""


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    for k in [k for k in os.environ if k.startswith("AES_")]:
        monkeypatch.delenv(k)
    home = tmp_path / "home"
    yield stack.up(Settings(home=home), services={}, model=False, nats_cluster=3)
    stack.down(home)


async def publish(bus: Bus, i: int) -> None:
    """Publish input ``i``, retrying while the cluster elects a new leader; a retry of a
    publish that did land is dropped by JetStream's dedupe (same ``Nats-Msg-Id``)."""
    for _ in range(100):
        try:
            await bus.publish(subjects.ASSIGNMENT, assignment(i))
            return
        except nats.errors.Error:
            await asyncio.sleep(0.2)
    raise AssertionError(f"could not publish input {i}")


@pytest.mark.parametrize("run", range(3))
async def test_stream_leader_killed_midway(cluster: Settings, tmp_path: Path, run: int) -> None:
    state = stack.StackState.load(cluster.home)
    assert state is not None and len(state.nats) == 3 and cluster.stream_replicas == 3
    worker = start_worker(cluster, "effect", tmp_path / "worker.log", AES_STREAM_REPLICAS="3")
    bus = await Bus.connect(cluster, name="test")
    try:
        results: list[GateResult] = []

        async def effects(n: int) -> bool:
            try:
                results[:] = await bus.history(subjects.RESULT_GATE, GateResult)
            except nats.errors.Error:  # the cluster is between leaders
                return False
            return len(results) >= n

        for i in range(N // 2):
            await publish(bus, i)
        await eventually(lambda: effects(N // 4), "the first effects")
        # The harder case: the server leading the stream the service consumes from.
        info = await bus.js.stream_info(stream_for(subjects.ASSIGNMENT))
        leader = info.cluster.leader
        assert info.config.num_replicas == 3 and leader is not None
        os.kill(state.nats[int(leader.removeprefix("n"))], signal.SIGKILL)
        for i in range(N // 2, N):
            await publish(bus, i)
        await eventually(lambda: effects(N), "an effect for every input", timeout=120)
        await asyncio.sleep(3)  # a redelivery would land within ack_wait (2 s): let it show
        await effects(N)
        assert Counter(r.idempotency_key for r in results) == {f"a-{i}:gate": 1 for i in range(N)}

        async def drained() -> bool:
            c = await bus.js.consumer_info(stream_for(subjects.ASSIGNMENT), "worker")
            return c.num_pending == 0 and c.num_ack_pending == 0

        await eventually(drained, "the consumer to finish")
        new_leader = (await bus.js.stream_info(stream_for(subjects.ASSIGNMENT))).cluster.leader
        assert new_leader not in (None, leader)
    finally:
        worker.terminate()
        assert worker.wait(30) == 0, (tmp_path / "worker.log").read_text()[-3000:]
        await bus.close()


async def test_up_registers_the_index_through_a_cluster_without_quorum_for_a_while(cluster: Settings) -> None:
    """``up``'s write once failed with "no response from stream" on a loaded machine (a stream
    between leaders). With two of three servers stopped for longer than a request's timeout,
    the registration retries until they are back, instead of failing the whole ``up``."""
    state = stack.StackState.load(cluster.home)
    assert state is not None
    one = dataclasses.replace(cluster, nats_url=cluster.nats_url.split(",")[0])  # the server left running
    for pid in state.nats[1:]:
        os.kill(pid, signal.SIGSTOP)
    try:
        done = asyncio.get_running_loop().run_in_executor(None, stack._register_default_index, one)
        await asyncio.sleep(8)  # past the 5 s JetStream request timeout: the first try has failed
        assert not done.done()
    finally:
        for pid in state.nats[1:]:
            os.kill(pid, signal.SIGCONT)
    assert await done == "keeping the registered index"  # up registered it; the retry did not replace it
