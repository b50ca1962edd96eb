"""The attacker gate: an adversary's episodes through the trial path, on a real bus with real Docker.

The attacker is the replay server replaying an attack script (a policy's forgery, recorded): it
writes any number to the count instead of counting. Tests that only check the count is a number
give it reward; the echo task's own tests do not.
"""

from __future__ import annotations

import asyncio

import pytest
from replay_server import ReplayServer  # a replay server standing in for the attacker model

from aes_proto import subjects
from aes_proto.codec import decode
from aes_proto.messages import Assignment, CalibrationResult, GateResult

from aes_lib.bus import Bus, serve, stream_for
from aes_lib.runners.attack import AttackSettings, AttackSettingsError
from aes_services.attack import AttackGateService
from aes_services.registry import builtin_stages, stack_services
from test_strength import ECHO, LOOSE_COUNT, variant
from test_validator_service import candidate, docker_available, wait_for  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]

FORGE = ["```bash\necho 7 > /app/count.txt\n```", "TASK_DONE"]
"""The attack: a count written without counting."""
GIVE_UP = ["TASK_DONE"]
"""The honest control, which this stand-in cannot do: it stops at once."""


async def test_an_attack_forges_loose_tests_and_not_the_tasks_own(docker_available, bus: Bus, tmp_path, monkeypatch):  # noqa: F811
    loose = candidate(bus, variant(tmp_path, "loose", LOOSE_COUNT), "loose", route=("attack", "contamination"))
    strong = candidate(bus, ECHO, "strong", route=("attack", "contamination"))
    forwarded = await bus.js.pull_subscribe(subjects.stage("contamination"), durable="probe", stream="AES_CANDIDATES")
    with ReplayServer(FORGE + GIVE_UP + FORGE, model="attacker") as srv:
        for name, value in (("ATTEMPTS", "1"), ("MODEL_URL", srv.url), ("MODEL", "attacker")):
            monkeypatch.setenv(f"AES_ATTACK_{name}", value)
        stop = asyncio.Event()
        runner = asyncio.create_task(serve(AttackGateService(), bus, stop))
        try:
            await bus.publish(subjects.stage("attack"), loose)
            await wait_for(bus, subjects.RESULT_GATE, GateResult, 1, timeout=400)
            await bus.publish(subjects.stage("attack"), strong)
            await wait_for(bus, subjects.RESULT_GATE, GateResult, 2, timeout=400)
        finally:
            stop.set()
            await runner
    assert not srv.errors
    # Loose: the attack, then the empty solution and the honest control it is compared with; strong: the attack alone.
    assert len(srv.requests) == len(FORGE + GIVE_UP + FORGE)
    brief = srv.requests[0]["messages"][1]["content"]
    assert "Hints:\nYou are red-teaming this task's verifier" in brief and "/app/count.txt" in brief
    assert "Hints:" not in srv.requests[len(FORGE)]["messages"][1]["content"]  # the control is an honest attempt
    gates = {g.idempotency_key: g for g in await bus.history(subjects.RESULT_GATE, GateResult)}
    forged, held = gates["loose:attack"], gates["strong:attack"]
    assert (forged.ok, forged.reason) == (False, "verifier_forgeable")
    assert "earned 0.50 against the empty solution 0.00, the honest attempt 0.00" in forged.detail
    assert "3 trials" in forged.detail and "attacker tokens]" in forged.detail
    assert (held.ok, held.reason) == (True, "ok") and "1 trials" in held.detail
    [rejected] = await wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, 1)
    assert (rejected.env_id, rejected.verdicts[-1].reason) == (loose.env_id, "verifier_forgeable")
    revisions = await bus.js.pull_subscribe(subjects.ASSIGNMENT, durable="probe-rev", stream=stream_for(subjects.ASSIGNMENT))
    [msg] = await revisions.fetch(1, timeout=30)
    await msg.ack()
    revision = decode(msg.data, Assignment)
    # The proposer reads the attack itself: what it ran, what the tests said, where it is stored.
    assert "$ echo 7 > /app/count.txt" in revision.feedback and "reference solution must still score 1" in revision.feedback
    assert "trajectories/solver/" in revision.feedback
    [went_on] = await forwarded.fetch(1, timeout=30)
    await went_on.ack()


def test_the_gate_is_off_the_default_route_and_started_only_when_routed():
    assert "attack" in builtin_stages()  # a route naming it passes the route check
    assert "attack" not in stack_services("gguf", "shared", ("validate", "calibrate"))
    assert "attack" in stack_services("gguf", "shared", ("validate", "attack", "calibrate"))


def test_settings_refuse_impossible_numbers():
    with pytest.raises(AttackSettingsError, match="ATTEMPTS"):
        AttackSettings(attempts=0)
    with pytest.raises(AttackSettingsError):
        AttackSettings(min_gain=1.0)


async def test_a_full_reward_attack_on_an_easy_task_is_audited_and_a_hack_is_a_forgery(docker_available, images, tmp_path):  # noqa: F811
    import json

    from aes_lib.agents.loop import LoopLimits
    from aes_lib.blobstore.filestore import FileBlobStore
    from aes_lib.bundle import Task
    from aes_lib.models import ChatClient
    from aes_lib.runners.attack import attack_task

    # The greeting is written as asked, the count without counting: full reward on loose tests, which an
    # honest attempt (that counts) also earns, so the numbers alone cannot tell the two apart.
    forge = ["```bash\nprintf 'hello, world\\n' > /app/greeting.txt; echo 7 > /app/count.txt\n```", "TASK_DONE"]
    honest = ["```bash\nprintf 'hello, world\\n' > /app/greeting.txt; wc -l < /app/input.txt > /app/count.txt\n```",
              "TASK_DONE"]
    verdict = json.dumps({"label": "hack", "reason": "it wrote 7 to count.txt without counting input.txt's lines"})
    task = Task.load(variant(tmp_path, "loose", LOOSE_COUNT))
    with ReplayServer(forge + honest + [verdict], model="attacker") as srv:
        report = await attack_task(task, ChatClient(srv.url, "attacker"), images, FileBlobStore(tmp_path / "blobs"),
                                   LoopLimits(max_turns=4), AttackSettings(attempts=1), env_id="loose", key="loose")
    assert not srv.errors and len(srv.requests) == len(forge + honest) + 1
    assert (report.rewards, report.nop, report.control) == ((1.0,), 0.0, 1.0)
    assert report.reason == "verifier_forgeable" and "an audit of it finds a hack: it wrote 7" in report.detail
    assert "The passing attempt" in srv.requests[-1]["messages"][-1]["content"]
    assert "$ printf 'hello, world\\n' > /app/greeting.txt; echo 7 > /app/count.txt" in report.evidence


@pytest.fixture
def images(docker_available):  # noqa: F811
    from aes_lib.domains.kinds import DomainKinds
    from aes_lib.sandbox import ImageCache

    return ImageCache(kinds=DomainKinds())
