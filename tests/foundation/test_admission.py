"""The routing slip: forward pops the stage and appends its verdict; reject ends the trip."""

from __future__ import annotations

import pytest

from aes_proto import decode, subjects
from aes_proto.messages import BlobRef, CalibrationResult, CandidateEnv, Lineage, Verdict

from aes_lib.admission import RouteError, forward, reject
from aes_lib.bus import Bus

CANDIDATE = CandidateEnv(
    idempotency_key="cand-1",
    episode_id="ep-1",
    env_id="env-1",
    bundle=BlobRef(key="bundles/sha256/x.tar.gz", sha256="x" * 64, size=10),
    lineage=Lineage(assignment_id="as-1", revision=1, category="git", mode="feedback", cost_usd=0.0125),
    route=("validate", "contamination", "calibrate"),
)
PASS = Verdict(stage="validate", ok=True, reason="ok")


async def _take(bus: Bus, subject: str) -> list[CandidateEnv]:
    sub = await bus.js.pull_subscribe(subject, stream="AES_CANDIDATES")
    msgs = await sub.fetch(10, timeout=1)
    await sub.unsubscribe()
    return [decode(m.data, CandidateEnv) for m in msgs]


async def test_forward_publishes_to_the_next_stage(bus: Bus) -> None:
    sent = await forward(bus, CANDIDATE, PASS)
    await forward(bus, CANDIDATE, PASS)  # a redelivered candidate republishes the same key
    (got,) = await _take(bus, subjects.stage("contamination"))
    assert got == sent
    assert got.route == ("contamination", "calibrate") and got.verdicts == (PASS,)
    assert got.env_id == CANDIDATE.env_id and got.lineage.revision == 1 and got.episode_id == "ep-1"


async def test_reject_publishes_a_final_rejected_result(bus: Bus) -> None:
    fail = Verdict(stage="validate", ok=False, reason="oracle_failed", detail="reward 0.0")
    await reject(bus, CANDIDATE, fail, proposer_reward=0.0)
    (result,) = await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)
    assert result.decision == "rejected" and result.proposer_reward == 0.0
    assert result.verdicts == (fail,) and result.env_id == "env-1" and result.lineage.assignment_id == "as-1"
    assert result.bundle == CANDIDATE.bundle and result.lineage == CANDIDATE.lineage
    # Cost per valid environment counts what rejected candidates cost too.
    assert result.lineage.mode == "feedback" and result.lineage.cost_usd == 0.0125


async def test_reject_with_a_revision_sends_the_candidate_back(bus: Bus) -> None:
    from aes_proto.messages import Assignment

    from aes_lib.flywheel.revision import revision_assignment

    fail = Verdict(stage="validate", ok=False, reason="build_failed", detail="exit 3")
    revision = revision_assignment(CANDIDATE, "new", "the build log")
    await reject(bus, CANDIDATE, fail, revision=revision)
    (result,) = await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)
    assert result.decision == "rejected" and result.resubmitted
    sub = await bus.js.pull_subscribe(subjects.ASSIGNMENT, stream="AES_ASSIGNMENTS")
    (msg,) = await sub.fetch(1, timeout=1)
    await sub.unsubscribe()
    assert decode(msg.data, Assignment) == revision


async def test_a_stage_not_at_the_head_cannot_route(bus: Bus) -> None:
    wrong = Verdict(stage="review", ok=True, reason="ok")
    with pytest.raises(RouteError, match="review"):
        await forward(bus, CANDIDATE, wrong)
    with pytest.raises(RouteError):
        await reject(bus, CANDIDATE, Verdict(stage="review", ok=False, reason="x"))


async def test_the_last_stage_must_decide_not_forward(bus: Bus) -> None:
    import msgspec

    last = msgspec.structs.replace(CANDIDATE, route=("calibrate",))
    with pytest.raises(RouteError, match="last"):
        await forward(bus, last, Verdict(stage="calibrate", ok=True, reason="ok"))


def test_proposer_reward_out_of_range() -> None:
    from aes_lib.admission import rejection

    with pytest.raises(ValueError, match="proposer_reward"):
        rejection(CANDIDATE, Verdict(stage="validate", ok=False, reason="x"), proposer_reward=2.0)
