"""Prompt and Prompt + Env Feedback baselines on recorded replies: files parsed,
the managed verifier installed, validation logs fed back for a revision."""

from __future__ import annotations

import pytest
from replay_server import ReplayServer

from aes_lib.agents.proposer.baselines import BaselineLimits, generate
from aes_lib.agents.proposer.files import format_files
from aes_lib.agents.trajectory import load_trajectory
from aes_lib.blobstore import open_store
from aes_lib.bundle import unpack
from aes_lib.models import ChatClient
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache, VERIFIER_TEMPLATE, validate_task
from aes_proto.messages import Assignment, Lineage

pytestmark = pytest.mark.docker

GOOD = {
    "instruction.md": "Write `/app/out/sum.txt` containing the sum of the integers in `/app/nums.txt` (one per line).\n",
    "task.toml": 'schema_version = "1.4"\n\n[task]\nname = "aes-test/sum"\n\n[verifier]\ntimeout_sec = 60.0\n',
    "environment/Dockerfile": "FROM aes-base:latest\nWORKDIR /app\nRUN printf '3\\n4\\n5\\n' > /app/nums.txt\n",
    "solution/solve.sh": "#!/bin/bash\nmkdir -p /app/out\nawk '{s+=$1} END {print s}' /app/nums.txt > /app/out/sum.txt\n",
    "tests/test_sum.py": "from pathlib import Path\n\n\ndef test_sum():\n    assert Path('/app/out/sum.txt').read_text().strip() == '12'\n",
}
BROKEN = {**GOOD, "solution/solve.sh": "#!/bin/bash\nmkdir -p /app/out\necho 11 > /app/out/sum.txt\n"}

A = Assignment(idempotency_key="b1", episode_id="ep", lineage=Lineage(assignment_id="b1", category="text", mode="prompt"),
               direction="new")


def _store(tmp_path):
    return open_store(f"file://{tmp_path}/blobs")


async def test_prompt_mode_one_call_nothing_executed(tmp_path):
    store = _store(tmp_path)
    with ReplayServer([format_files(BROKEN)]) as srv:
        gen = await generate(A, ChatClient(srv.url, "replay"), store, mode="prompt")
    assert len(srv.requests) == 1 and gen.report is None and gen.packed is not None and not gen.failure
    task_dir = tmp_path / "task"
    unpack(gen.packed.data, task_dir)
    assert (task_dir / "tests" / "test.sh").read_text() == (VERIFIER_TEMPLATE / "test.sh").read_text()
    assert "=== FILE: instruction.md ===" in srv.requests[0]["messages"][1]["content"]  # the format example
    assert load_trajectory(store, gen.trajectory_ref).stop_reason == "submitted"
    # nothing was run: the broken solution is only found by validating afterwards
    report = await validate_task(task_dir, ImageCache(kinds=DomainKinds()))
    assert report.reason == "oracle_failed"


async def test_feedback_mode_revises_after_validation_logs(tmp_path):
    with ReplayServer(["no files here", format_files(BROKEN), format_files(GOOD)]) as srv:
        gen = await generate(A, ChatClient(srv.url, "replay"), _store(tmp_path), mode="feedback",
                             images=ImageCache(kinds=DomainKinds()), limits=BaselineLimits(max_revisions=2))
    assert len(srv.requests) == 3
    assert "could not be used: format_error" in srv.requests[1]["messages"][-1]["content"]
    feedback = srv.requests[2]["messages"][-1]["content"]
    assert feedback.startswith("Validation failed: oracle_failed") and "reward" in feedback
    assert gen.report.ok and gen.packed is not None and gen.trajectory.format_errors == 1


async def test_feedback_mode_says_a_reply_was_cut_at_its_token_cap(tmp_path):
    with ReplayServer(["=== FILE: instruction.md ===\nWrite the"] * 2, cut=frozenset({0, 1})) as srv:
        gen = await generate(A, ChatClient(srv.url, "replay"), _store(tmp_path), mode="feedback",
                             images=ImageCache(kinds=DomainKinds()), limits=BaselineLimits(max_revisions=1, max_tokens=900))
    told = srv.requests[1]["messages"][-1]["content"]
    assert "Your reply was cut at 900 tokens" in told and "Keep every file short" in told
    assert gen.failure == "format_error" and gen.trajectory.format_errors == 2


async def test_feedback_mode_gives_up_after_revisions(tmp_path):
    with ReplayServer([format_files(BROKEN)] * 2) as srv:
        gen = await generate(A, ChatClient(srv.url, "replay"), _store(tmp_path), mode="feedback",
                             images=ImageCache(kinds=DomainKinds()), limits=BaselineLimits(max_revisions=1))
    assert len(srv.requests) == 2 and not srv.errors
    assert gen.report.reason == "oracle_failed"


def test_the_one_shot_request_describes_only_what_that_mode_has():
    """Prompt and Prompt + Env Feedback have no workspace, no templates/ folder and no tools:
    their request must not send the model looking for them (the agentic guide's sections on
    them stay out), and it shows the parent and the previous candidate inline."""
    from aes_lib.agents.proposer.baselines import first_prompt
    from aes_proto.messages import Assignment, Lineage

    a = Assignment(idempotency_key="a", episode_id="e", direction="harder",
                   lineage=Lineage(assignment_id="a", parent_env_id="abc123", revision=1))
    text = first_prompt(a, None)
    for absent in ("templates/", "past_environments", "assignment.md", "aes-tool", "memory/", "workspace"):
        assert absent not in text, absent
    assert "parent environment: abc123 (shown below)" in text and "rejected candidate (shown below)" in text
    assert "## The template (a trivial task, in the reply format" in text and "=== FILE: task.toml ===" in text


def test_each_request_states_its_budgets():
    """Feedback mode says its files are checked and may be revised; the agentic system prompt
    states the episode's and the tools' budgets (a model should not learn them by refusal)."""
    from aes_lib.agents.proposer.baselines import first_prompt
    from aes_lib.agents.proposer.harness import EpisodeBudget, system_prompt
    from aes_proto.messages import Assignment, Lineage

    a = Assignment(idempotency_key="a", episode_id="e", direction="new", lineage=Lineage(assignment_id="a"))
    assert "up to 2 times" in first_prompt(a, None, revisions=2) and "checked" not in first_prompt(a, None)
    text = system_prompt(EpisodeBudget().with_loop(max_turns=7, history_turns=0))
    assert "7 replies" in text and "the whole conversation is re-sent" in text and "at most 2 calls" in text


def test_a_one_shot_request_aims_at_the_pass_band_only_when_it_sees_the_solvers_results():
    """A ``new`` assignment has no pass rate to aim from: the one-shot request does not tell it to
    aim at half; one with the parent's pass rate and commonest failure does, and shows both."""
    from aes_lib.agents.proposer.baselines import first_prompt
    from aes_proto.messages import Assignment, Lineage

    blind = first_prompt(Assignment(idempotency_key="a", episode_id="e", direction="new",
                                    lineage=Lineage(assignment_id="a")), None)
    assert "about half of the time" not in blind and "You see no results of the current solver" in blind
    seen = first_prompt(Assignment(idempotency_key="a", episode_id="e", direction="harder", pass_rate=0.8,
                                   common_failure="FAILED test_edge", lineage=Lineage(assignment_id="a")), None)
    assert "about half of the time" in seen and "You see no results" not in seen
    assert "solver pass rate on the parent: 0.80" in seen and "commonest failure: FAILED test_edge" in seen


def test_the_guide_says_how_to_be_hard_and_that_a_failure_path_test_needs_the_success_path():
    """Both the agentic guide and the one-shot request carry the advice."""
    from aes_lib.agents.proposer.baselines import first_prompt
    from aes_lib.agents.proposer.workspace import INSTRUCTIONS
    from aes_proto.messages import Assignment, Lineage

    a = Assignment(idempotency_key="a", episode_id="e", direction="new", lineage=Lineage(assignment_id="a"))
    for text in (INSTRUCTIONS.read_text(), first_prompt(a, None)):
        assert "A hard task for a weaker solver" in text and "larger inputs" in text and "real tools" in text
        assert "must also check that valid input succeeds" in text and "every requirement\n  still stated" in text
