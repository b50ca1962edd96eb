"""Every proposer episode reaches the learner with its reward r_P once its outcome is known.

Four episodes answer one assignment as a group of three parallel attempts: one
admitted (r_P 1), one valid but out of the band (partial), one that submitted
nothing (0), and one whose too-hard candidate was sent back for revision (partial,
not final) and whose revision a gate rejected (0). The results go through the
real proposer-samples service and learner on the bus.
"""

import msgspec
import pytest

from aes_lib.admission import rejection
from aes_lib.agents.proposer.candidate import no_candidate, proposal
from aes_lib.agents.trajectory import store_trajectory
from aes_lib.blobstore import open_store
from aes_lib.learner import LearnerConfig
from aes_proto import subjects
from aes_proto.trajectory import Trajectory, Turn
from aes_proto.messages import (
    Assignment,
    BlobRef,
    CalibrationResult,
    CandidateEnv,
    LearnerStats,
    Lineage,
    ProposalRef,
    TrajectoryRef,
    Verdict,
)
from aes_services.learner import LearnerService
from aes_services.orchestrator import OrchestratorService
from aes_services.proposer_samples import ProposerSampleService

from counting_store import CountingStore, bus_over
from flywheel_helpers import running, wait_for

pytestmark = pytest.mark.timeout(180)


def _assignment(attempt: int, revision: int = 0) -> Assignment:
    aid = f"r1-000-a{attempt}"
    return Assignment(idempotency_key=f"{aid}:rev{revision}", episode_id=aid,
                      lineage=Lineage(assignment_id=aid, round=1, revision=revision), direction="harder",
                      group_id="r1-000", group_size=3)


def _episode(blobs, name: str) -> tuple[BlobRef, Trajectory]:
    turn = Turn(index=0, reply="x", prompt_token_ids=[1, 2, 3], completion_token_ids=[5, 6, 2],
                completion_logprobs=[-1.0, -0.5, -0.2], policy_version=0)
    traj = Trajectory(rollout_id=name, role="proposer", turns=[turn], stop_reason="submitted")
    return store_trajectory(blobs, traj), traj


def _candidate(a: Assignment, episode: tuple[BlobRef, Trajectory], env: str) -> CandidateEnv:
    return CandidateEnv(idempotency_key=f"{a.idempotency_key}:candidate", episode_id=a.episode_id, env_id=env,
                        bundle=BlobRef(key=f"b/{env}", sha256="0" * 64, size=1), lineage=a.lineage,
                        route=("validate", "calibrate"), proposal=proposal(a, *episode))


def _calibrated(c: CandidateEnv, decision: str, reward: float, resubmitted: bool = False) -> CalibrationResult:
    return CalibrationResult(idempotency_key=f"{c.idempotency_key}>calibrate", episode_id=c.episode_id, env_id=c.env_id,
                             lineage=c.lineage, decision=decision, proposer_reward=reward,
                             resubmitted=resubmitted, proposal=c.proposal)


async def test_admitted_out_of_band_and_broken_episodes_become_one_trained_group(fresh_nats, bus, tiny_model):
    a0, a1, a2, a2_rev = _assignment(0), _assignment(1), _assignment(2), _assignment(2, revision=1)
    admitted = _calibrated(_candidate(a0, _episode(bus.blobs, "ep-a0"), "env-a0"), "admitted", 1.0)
    out_of_band = _calibrated(_candidate(a1, _episode(bus.blobs, "ep-a1"), "env-a1"), "too_easy", 0.5)
    sent_back = _calibrated(_candidate(a2, _episode(bus.blobs, "ep-a2"), "env-a2"), "too_hard", 0.25, resubmitted=True)
    revised = _candidate(a2_rev, _episode(bus.blobs, "ep-a2-rev1"), "env-a2r")
    broken = rejection(revised, Verdict(stage="validate", ok=False, reason="oracle_failed"), 0.0)
    lone = Assignment(idempotency_key="r1-003", episode_id="r1-003", lineage=Lineage(assignment_id="r1-003", round=1),
                      direction="easier")
    nothing = no_candidate(lone, "no_submission", "12 turns", episode=proposal(lone, *_episode(bus.blobs, "ep-a3")))
    learner = LearnerService(LearnerConfig(model_path=str(tiny_model), proposer_groups_per_batch=1, lr=1e-3))
    async with running(fresh_nats, ProposerSampleService(), OrchestratorService(learner.config), learner):
        for r in (admitted, out_of_band, sent_back, broken):
            await bus.publish(subjects.RESULT_CALIBRATION, r)
        [stats] = await wait_for(bus, subjects.LEARNER_STATS, LearnerStats, lambda m: m)
        await bus.publish(subjects.RESULT_CALIBRATION, nothing)  # its own group, of one: never complete
        refs = await wait_for(bus, subjects.trajectory("proposer"), TrajectoryRef, lambda m: len(m) == 5)

    by_episode = {r.rollout_id: r for r in refs}
    assert {k: (r.reward, r.final, r.group_id, r.group_size) for k, r in by_episode.items()} == {
        "ep-a0": (1.0, True, "r1-000", 3),
        "ep-a1": (0.5, True, "r1-000", 3),
        "ep-a2": (0.25, False, "r1-000", 3),  # its revision continues the attempt
        "ep-a2-rev1": (0.0, True, "r1-000", 3),
        "ep-a3": (0.0, True, "r1-003", 1),
    }
    assert all(r.role == "proposer" for r in refs)
    # The group completed when each of its three attempts had its final episode scored.
    assert (stats.role, stats.group_ids, stats.tokens) == ("proposer", ("r1-000",), 12)
    assert stats.mean_reward == pytest.approx((1.0 + 0.5 + 0.25 + 0.0) / 4)


async def test_a_sample_is_published_from_the_message_without_reading_the_episode(fresh_nats, tmp_path):
    """The scalars the learner's ref needs travel on the ``ProposalRef``; an older message
    without them still gets its sample, read from the trajectory."""
    store = CountingStore(open_store(fresh_nats.blob_location))
    buses = bus_over(store)
    a, old = _assignment(0), _assignment(1)
    ref, traj = _episode(store, "ep-cut")
    traj.stop_reason = "model_error"
    ref = store_trajectory(store, traj)
    result = _calibrated(_candidate(a, (ref, traj), "env-a0"), "admitted", 1.0)
    old_ref, old_traj = _episode(store, "ep-old")
    legacy = _calibrated(msgspec.structs.replace(
        _candidate(old, (old_ref, old_traj), "env-a1"),
        proposal=ProposalRef(trajectory=old_ref, group_id="r1-000", group_size=3)), "too_easy", 0.5)
    bus = await buses.connect(fresh_nats, name="test")
    try:
        async with running(fresh_nats, ProposerSampleService(), bus_type=buses):
            await bus.publish(subjects.RESULT_CALIBRATION, result)
            [sample] = await wait_for(bus, subjects.trajectory("proposer"), TrajectoryRef, lambda m: m)
            assert store.reads[ref.key] == 0
            await bus.publish(subjects.RESULT_CALIBRATION, legacy)
            refs = await wait_for(bus, subjects.trajectory("proposer"), TrajectoryRef, lambda m: len(m) == 2)
    finally:
        await bus.close()
    assert (sample.rollout_id, sample.policy_version, sample.n_tokens, sample.finished) == ("ep-cut", 0, 3, False)
    by_id = {r.rollout_id: r for r in refs}
    assert (by_id["ep-old"].n_tokens, by_id["ep-old"].finished, store.reads[old_ref.key]) == (3, True, 1)
