"""The parametric proposer mode: the proposer's model chooses a family instance's difficulty in
one call, strictly parsed; the call is recorded as a sample the proposer's learner can train on.

The models are real: the pools experiment's bootstrapped policy (taught the prompt) and the random
tiny model on the torch engine; the replay server scripts an out-of-range answer for the bus path."""

from __future__ import annotations

from pathlib import Path

import pytest
from replay_server import ReplayServer

from aes_lib import families
from aes_lib.agents.proposer import parametric, parametric_prompt, procedural
from aes_lib.agents.proposer.baselines import BaselineLimits
from aes_lib.agents.proposer.boundary import Resources, generate
from aes_lib.blobstore.filestore import FileBlobStore
from aes_lib.bundle import pack, unpack
from aes_lib.families import Params
from aes_lib.models import ChatClient
from aes_lib.models.torch_serve import serve
from aes_proto import subjects
from aes_proto.messages import Assignment, CalibrationResult, Lineage

pytestmark = pytest.mark.timeout(600)

ECHO = families.get("echo-words")


@pytest.fixture
def engine_env(tmp_path, monkeypatch):
    monkeypatch.setenv("AES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AES_BLOB_URL", f"file://{tmp_path / 'blobs'}")


def _served(model: Path):
    server, url = serve(model)
    return server, ChatClient(url, "policy")


def _parent(store, tmp_path: Path, difficulty: int = 3):
    root = families.write_instance(ECHO, Params(difficulty, 1), tmp_path / f"parent-{difficulty}")
    packed = pack(root)
    return packed.sha256, store.put_content("bundles", packed.data, suffix=".tar.gz")


def _assignment(env_id, bundle, key: str, **kw) -> Assignment:
    return Assignment(idempotency_key=key, episode_id=key, direction="harder", parent_bundle=bundle, pass_rate=0.75,
                      lineage=Lineage(assignment_id=key, parent_env_id=env_id, mode="parametric"), **kw)


def _resources(client, store, tmp_path: Path) -> Resources:
    """What the parametric mode reads: the model and the blob store (no Docker)."""
    return Resources(client=client, store=store, images=None, state_file=tmp_path / "state")  # type: ignore[arg-type]


def _sampled(turn) -> None:
    """The turn is a policy sample: its tokens with one log-prob each, and the weights' version."""
    assert turn.prompt_token_ids and len(turn.completion_token_ids) == len(turn.completion_logprobs) > 0
    assert all(lp <= 0.0 for lp in turn.completion_logprobs) and turn.policy_version == 0


def test_the_answer_is_one_line_naming_a_difficulty_in_the_familys_range():
    assert parametric_prompt.parse("difficulty: 3", ECHO) == 3
    assert parametric_prompt.parse("  difficulty:  8\n", ECHO) == 8  # spaces around: still the one line
    for text in ("Difficulty: 3", "difficulty: 3 please", "difficulty: three", "3", "difficulty: 3\ndifficulty: 4", ""):
        with pytest.raises(parametric_prompt.ParametricAnswerError) as e:
            parametric_prompt.parse(text, ECHO)
        assert e.value.failure == "no_difficulty", text
    for text in ("difficulty: 0", f"difficulty: {ECHO.max_difficulty + 1}"):
        with pytest.raises(parametric_prompt.ParametricAnswerError, match="outside echo-words's") as e:
            parametric_prompt.parse(text, ECHO)
        assert e.value.failure == "difficulty_out_of_range"
    [system, user] = parametric_prompt.messages(ECHO, 3, "harder", 0.75)
    assert system["content"] == parametric_prompt.SYSTEM_PROMPT and "difficulty: N" in system["content"]
    for part in (ECHO.name, ECHO.summary, f"{ECHO.min_difficulty} to {ECHO.max_difficulty}", "Parent difficulty: 3",
                 "Parent pass rate: 0.75", "Direction: harder"):
        assert part in user["content"]
    assert "Parent pass rate: unknown" in parametric_prompt.messages(ECHO, 1, "new", None)[1]["content"]


async def test_the_bootstrapped_policy_chooses_the_instance_it_names(experiment_policy, engine_env, tmp_path):
    """Each answer that parses is the written instance's difficulty, with the assignment's seed;
    a redelivered assignment samples (seeded by its key) and writes the same bundle."""
    store = FileBlobStore(tmp_path / "blobs")
    env_id, ref = _parent(store, tmp_path)
    server, client = _served(experiment_policy)
    try:
        r = _resources(client, store, tmp_path)
        proposals = [(a, await generate(a, r)) for a in (_assignment(env_id, ref, f"r1-000-a{k}") for k in range(6))]
        again = await generate(_assignment(env_id, ref, "r1-000-a0"), r)
    finally:
        server.shutdown()
    written = [(a, p) for a, p in proposals if p.packed is not None]
    assert written, [p.trajectory.turns[0].reply for _, p in proposals]
    for a, p in proposals:
        [turn] = p.trajectory.turns
        _sampled(turn)
        assert p.trajectory.model == "policy" and p.trajectory.messages[0]["content"] == parametric_prompt.SYSTEM_PROMPT
        assert "Parent difficulty: 3" in p.trajectory.instruction and "Direction: harder" in p.trajectory.instruction
        if p.packed is None:
            assert p.failure in ("no_difficulty", "difficulty_out_of_range") and turn.format_error
            continue
        unpack(p.packed.data, dest := tmp_path / "child" / a.idempotency_key)
        child = families.read_instance(dest)
        assert child.family == ECHO.name and child.params.difficulty == parametric_prompt.parse(turn.reply, ECHO)
        assert child.params.seed == procedural.child_seed(a) and p.trajectory.stop_reason == "submitted"
    first = proposals[0][1]
    assert again.trajectory.turns[0].reply == first.trajectory.turns[0].reply
    assert (again.packed and again.packed.sha256) == (first.packed and first.packed.sha256)


async def test_a_reply_that_is_no_difficulty_fails_and_keeps_its_sampled_turn(tiny_model, engine_env, tmp_path):
    """The random tiny model answers noise: a failed proposal whose turn is still the policy's
    sample (with r_P 0 it is what teaches the format)."""
    store = FileBlobStore(tmp_path / "blobs")
    env_id, ref = _parent(store, tmp_path)
    server, client = _served(tiny_model)
    try:
        p = await parametric.generate(_assignment(env_id, ref, "g1"), client, store, BaselineLimits(temperature=1.0))
    finally:
        server.shutdown()
    assert p.packed is None and p.failure == "no_difficulty" == p.trajectory.stop_reason
    [turn] = p.trajectory.turns
    _sampled(turn)
    assert turn.temperature == 1.0 and len(turn.completion_token_ids) <= parametric_prompt.MAX_TOKENS
    assert turn.format_error and p.trajectory.format_errors == 1 and "not 'difficulty: N'" in p.trajectory.error
    assert p.trajectory.completion_tokens == len(turn.completion_token_ids)


async def test_an_out_of_range_answer_is_a_proposer_sample_with_reward_0(bus, tmp_path, proposer_service):
    """Unlike a procedural failure, the episode travels with the result: proposer-samples turns it
    into the learner's ``role="proposer"`` sample with r_P 0."""
    env_id, ref = _parent(bus.blobs, tmp_path)
    a = _assignment(env_id, ref, "r1-000-a1", group_id="r1-000", group_size=2)
    with ReplayServer([f"difficulty: {ECHO.max_difficulty + 4}"]) as model:
        svc = await proposer_service(model.url)
        await svc.handle(a, bus)
    [request] = model.requests
    assert request["max_tokens"] == parametric_prompt.MAX_TOKENS and request["seed"] == procedural.child_seed(a)
    [result] = await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)
    assert result.decision == "rejected" and result.proposer_reward == 0.0
    [verdict] = result.verdicts
    assert verdict.reason == "difficulty_out_of_range" and "outside echo-words's" in verdict.detail
    assert result.proposal is not None and result.proposal.finished
    assert (result.proposal.group_id, result.proposal.group_size) == ("r1-000", 2)
