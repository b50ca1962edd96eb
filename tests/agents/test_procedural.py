"""The procedural proposer mode: the planner's assignment moves a family's parameters, the
instance is written without a model, and the candidate takes the bus path a model's would."""

from __future__ import annotations

from pathlib import Path

import nats.errors
import pytest
from replay_server import ReplayServer

from aes_lib import families
from aes_lib.agents.proposer import procedural
from aes_lib.agents.proposer.boundary import Resources, generate
from aes_lib.blobstore.filestore import FileBlobStore
from aes_lib.bundle import pack, unpack
from aes_lib.families import Params
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.flywheel.planner import plan_round
from aes_proto import subjects
from aes_proto.codec import decode
from aes_proto.messages import Assignment, CalibrationResult, CandidateEnv, Lineage, ValidationResult
from aes_proto.records import EnvHistory, PoolEntry, RolloutRecord
from aes_services.validator import ValidatorService

SEED_TASK = Path(__file__).resolve().parents[2] / "seeds" / "csv-sales-rollup"


def _stored(store, root: Path):
    packed = pack(root)
    return packed.sha256, store.put_content("bundles", packed.data, suffix=".tar.gz")


def _parent(store, tmp_path: Path, name: str, difficulty: int, seed: int = 1):
    dest = tmp_path / f"parent-{name}-{difficulty}-{seed}"
    root = families.write_instance(families.get(name), Params(difficulty, seed), dest)
    return _stored(store, root)


def _assignment(env_id, bundle, direction="harder", key="a1", **kw) -> Assignment:
    return Assignment(idempotency_key=key, episode_id=key, direction=direction, parent_bundle=bundle,
                      lineage=Lineage(assignment_id=key, parent_env_id=env_id, mode="procedural"), **kw)


def _instance(store, tmp_path: Path, proposal) -> families.Instance:
    dest = tmp_path / f"child-{proposal.packed.sha256[:12]}"
    if not dest.exists():
        unpack(proposal.packed.data, dest)
    return families.read_instance(dest)


def _resources(store, tmp_path: Path) -> Resources:
    """What the procedural mode reads: the blob store alone (no model, no Docker)."""
    return Resources(client=None, store=store, images=None, state_file=tmp_path / "state")  # type: ignore[arg-type]


def _history(env_id: str, rewards: list[float]) -> EnvHistory:
    return EnvHistory(env_id=env_id, recent=tuple(RolloutRecord(rollout_id=f"{env_id[:6]}-{i}", reward=r)
                                                  for i, r in enumerate(rewards)))


async def test_the_planners_directions_move_the_parameters_and_clamp(tmp_path):
    """Pool entries the solver fails get easier children, ones it passes harder ones, by one
    step, by two where every attempt failed or passed, and never past the family's range."""
    store = FileBlobStore(tmp_path / "blobs")
    f = families.get("echo-words")
    cases = [  # (difficulty, solver's rewards, child difficulty)
        (4, [0.0, 0.1, 0.0], 3), (4, [1.0, 0.9, 1.0], 5), (4, [0.0, 0.0, 0.0], 2), (3, [1.0, 1.0], 5),
        (f.min_difficulty, [0.0, 0.0], f.min_difficulty), (f.max_difficulty, [1.0, 1.0], f.max_difficulty),
    ]
    entries, stats, expect = [], {}, {}
    for seed, (difficulty, rewards, child) in enumerate(cases):
        env_id, ref = _parent(store, tmp_path, f.name, difficulty, seed)
        entries.append(PoolEntry(env_id=env_id, bundle=ref, category=f.name))
        stats[env_id] = _history(env_id, rewards)
        expect[env_id] = child
    plan = plan_round(entries, [], stats, fresh=len(entries), round_=1, mode="procedural")
    assert sorted(a.lineage.parent_env_id for a in plan) == sorted(expect)
    resources = _resources(store, tmp_path)
    for a in plan:
        p = await generate(a, resources)
        assert p.packed is not None, p.failure
        child = _instance(store, tmp_path, p)
        assert child.family == f.name and child.params.difficulty == expect[a.lineage.parent_env_id], a.direction
        assert child.params.seed == procedural.child_seed(a)
        assert p.trajectory.turns == [] and p.trajectory.cost_usd == 0.0 and p.trajectory.model == "procedural"
    assert FlywheelConfig(generation_mode="procedural").generation_mode == "procedural"


async def test_deterministic_per_assignment_and_distinct_across_attempts(tmp_path):
    store = FileBlobStore(tmp_path / "blobs")
    env_id, ref = _parent(store, tmp_path, "reverse-text", 3)
    r = _resources(store, tmp_path)
    first = await generate(_assignment(env_id, ref, key="a1"), r)
    again = await generate(_assignment(env_id, ref, key="a1"), r)  # a redelivery
    other = await generate(_assignment(env_id, ref, key="a2"), r)  # a parallel attempt
    assert first.packed.sha256 == again.packed.sha256 != other.packed.sha256


async def test_a_revision_starts_from_the_rejected_candidate(tmp_path):
    store = FileBlobStore(tmp_path / "blobs")
    env_id, parent = _parent(store, tmp_path, "make-files", 2)
    _, previous = _parent(store, tmp_path, "make-files", 5)
    r = _resources(store, tmp_path)
    # calibrated too hard: the calibrator sends it back as "easier"
    p = await generate(_assignment(env_id, parent, direction="easier", key="a1:rev1", previous_bundle=previous), r)
    assert _instance(store, tmp_path, p).params.difficulty == 4


async def test_no_parent_uses_the_category_or_the_first_family(tmp_path):
    store = FileBlobStore(tmp_path / "blobs")
    r = _resources(store, tmp_path)
    named = await generate(Assignment(idempotency_key="n1", episode_id="n1", direction="new",
                                      lineage=Lineage(assignment_id="n1", category="make-files", mode="procedural")), r)
    assert _instance(store, tmp_path, named).family == "make-files"
    assert _instance(store, tmp_path, named).params.difficulty == families.get("make-files").min_difficulty
    first = await generate(Assignment(idempotency_key="n2", episode_id="n2", direction="new",
                                      lineage=Lineage(assignment_id="n2", mode="procedural")), r)
    assert _instance(store, tmp_path, first).family == families.names()[0]
    bad = await generate(Assignment(idempotency_key="n3", episode_id="n3", direction="new",
                                    lineage=Lineage(assignment_id="n3", category="sudoku", mode="procedural")), r)
    assert bad.packed is None and bad.failure == "not_procedural"
    assert "unknown task family 'sudoku'" in bad.trajectory.error


async def _taken(bus, subject: str, type_):
    sub = await bus.js.pull_subscribe(subject, durable="take-" + subject.replace(".", "-"))
    try:
        msgs = await sub.fetch(1, timeout=5)
    except nats.errors.TimeoutError:
        return None
    await msgs[0].ack()
    return decode(msgs[0].data, type_)


@pytest.mark.docker
async def test_the_proposer_service_publishes_a_procedural_candidate_the_validator_admits(bus, tmp_path, proposer_service):
    env_id, ref = _parent(bus.blobs, tmp_path, "echo-words", 2)
    with ReplayServer([]) as model:  # a model is configured, and must never be asked
        svc = await proposer_service(model.url)
        await svc.handle(_assignment(env_id, ref, direction="harder"), bus)
    assert model.requests == []

    cand = await _taken(bus, subjects.stage(bus.settings.route_stages[0]), CandidateEnv)
    assert cand is not None and cand.route == bus.settings.route_stages and cand.direction == "harder"
    assert cand.lineage.mode == "procedural" and cand.lineage.parent_env_id == env_id
    assert cand.lineage.proposer_model == "procedural" and cand.lineage.cost_usd == 0.0
    assert (cand.prompt_tokens, cand.completion_tokens) == (0, 0)
    assert cand.proposal is None  # no policy wrote it: nothing for the proposer's learner
    task = unpack(bus.blobs.get_bytes(cand.bundle), tmp_path / "candidate")
    assert families.instance_of(task.config.metadata).params.difficulty == 3

    validator = ValidatorService()
    await validator.setup(bus)
    await validator.handle(cand, bus)
    [result] = await bus.history(subjects.RESULT_VALIDATION, ValidationResult)
    assert result.ok and result.env_id == cand.env_id, result.detail
    assert (result.oracle_reward, result.nop_reward) == (1.0, 0.0)


async def test_a_parent_no_family_wrote_is_a_recorded_failure(bus, tmp_path, proposer_service):
    env_id, ref = _stored(bus.blobs, SEED_TASK)
    with ReplayServer([]) as model:
        svc = await proposer_service(model.url)
        await svc.handle(_assignment(env_id, ref), bus)
    assert model.requests == []
    [result] = await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)
    assert result.decision == "rejected" and result.proposer_reward == 0.0 and result.proposal is None
    assert result.verdicts[0].reason == "not_procedural" and "no [metadata.family]" in result.verdicts[0].detail
