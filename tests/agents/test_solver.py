"""The solver loop in a real container, driven by the replay server and by the real local model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from replay_server import ReplayServer

from aes_lib.agents.loop import LoopLimits, run_loop
from aes_lib.agents.solver import SYSTEM_PROMPT, publish_rollout, rollout
from aes_lib.agents.trajectory import load_trajectory
from aes_lib.blobstore import open_store
from aes_lib.bundle import Task
from aes_lib.models import ChatClient
from aes_lib.sandbox.container import Limits, Sandbox
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox.images import ImageCache
from aes_proto import subjects
from aes_proto.messages import RolloutSummary, TrajectoryRef
from aes_proto.trajectory import Trajectory

pytestmark = pytest.mark.docker

SEED = Path(__file__).resolve().parents[2] / "seeds" / "csv-sales-rollup"
LABELS = {"aes.test": "agents"}


def _start_traj() -> Trajectory:
    return Trajectory(
        rollout_id="t", role="solver",
        messages=[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "Task: write /tmp/x"}],
    )


async def test_loop_runs_commands_counts_junk_and_stops_at_done():
    replies = [
        "I am not sure what to do.",                          # junk: format error
        "```bash\necho hi > /tmp/x && cat /tmp/x\n```",      # runs in the container
        "```bash\nexit 3\n```",                               # non-zero exit is reported
        "Finished. TASK_DONE",
        "```bash\necho never\n```",
    ]
    with ReplayServer(replies) as srv:
        client = ChatClient(srv.url, "replay")
        async with Sandbox.start("aes-base:latest", Limits(), labels=LABELS) as sb:
            traj = await run_loop(client, sb, _start_traj(), LoopLimits(max_turns=10))
            assert (await sb.exec("cat /tmp/x", timeout=10)).output == "hi\n"
        await client.aclose()
    assert traj.stop_reason == "done" and len(traj.turns) == 4
    assert traj.format_errors == 1 and traj.turns[0].format_error
    assert "No command found" in srv.requests[1]["messages"][-1]["content"]
    assert traj.turns[1].command == "echo hi > /tmp/x && cat /tmp/x" and traj.turns[1].exit_code == 0
    assert traj.turns[1].output == "[exit code 0]\nhi\n"
    assert traj.turns[2].exit_code == 3
    # the model saw each command's output as the next user message
    assert srv.requests[2]["messages"][-1]["content"] == "[exit code 0]\nhi\n"


async def test_a_reply_cut_at_the_token_cap_is_told_so_not_called_a_format_error():
    """The engine says it stopped at max_tokens: the model hears the cap and what to do, not
    "No command found" (which reads as a mistake of format)."""
    replies = ["First I will look at the files, then write a long plan and", "```bash\necho hi\n```", "TASK_DONE"]
    with ReplayServer(replies, cut=frozenset({0})) as srv:
        client = ChatClient(srv.url, "replay")
        async with Sandbox.start("aes-base:latest", Limits(), labels=LABELS) as sb:
            traj = await run_loop(client, sb, _start_traj(), LoopLimits(max_turns=5, max_tokens=50))
        await client.aclose()
    told = srv.requests[1]["messages"][-1]["content"]
    assert "Your reply was cut at 50 tokens" in told and "one command" in told and "No command found" not in told
    assert traj.turns[0].format_error and traj.turns[1].output == "[exit code 0]\nhi\n" and traj.stop_reason == "done"


async def test_loop_command_timeout_and_turn_limit():
    with ReplayServer(["```bash\nsleep 30\n```", "```bash\ntrue\n```", "```bash\ntrue\n```"]) as srv:
        client = ChatClient(srv.url, "replay")
        async with Sandbox.start("aes-base:latest", Limits(), labels=LABELS) as sb:
            traj = await run_loop(client, sb, _start_traj(), LoopLimits(max_turns=2, command_timeout_s=1))
        await client.aclose()
    assert traj.turns[0].timed_out and traj.turns[0].output.startswith("[timed out]")
    assert traj.stop_reason == "turn_limit" and len(traj.turns) == 2


async def test_loop_stops_on_model_failure():
    with ReplayServer(["x"], fail_first=5, fail_status=400) as srv:
        client = ChatClient(srv.url, "replay")
        async with Sandbox.start("aes-base:latest", Limits(), labels=LABELS) as sb:
            traj = await run_loop(client, sb, _start_traj(), LoopLimits(max_turns=3))
        await client.aclose()
    assert traj.stop_reason == "model_error" and "HTTP 400" in traj.error and not traj.turns


async def test_replayed_rollout_scores_and_publishes(tmp_path, bus):
    """A scripted solver that really solves the seed task: the verifier gives 1.0."""
    task = Task.load(SEED)
    solve = (SEED / "solution" / "solve.sh").read_text()
    replies = [f"```bash\ncat > /tmp/solve.sh <<'AES_EOF'\n{solve}\nAES_EOF\n```", "```bash\nbash /tmp/solve.sh\n```", "TASK_DONE"]
    store = bus.blobs
    with ReplayServer(replies) as srv:
        client = ChatClient(srv.url, "replay")
        r = await rollout(task, client, ImageCache(kinds=DomainKinds()),
                          store, LoopLimits(max_turns=5, time_limit_s=900.0), env_id="seed-csv")
        await client.aclose()
    assert r.trajectory.reward == 1.0 and r.trajectory.stop_reason == "done"
    assert "5 replies and 600 s in all" in srv.requests[0]["messages"][0]["content"]  # the task's timeout binds
    assert "reward" in r.trajectory.verifier_output
    await publish_rollout(bus, r.outcome, episode_id="ep1", group_id="g1", purpose="calibration")
    assert await bus.history(subjects.TRAJECTORIES, TrajectoryRef) == []  # not trained on
    await publish_rollout(bus, r.outcome, episode_id="ep1", group_id="g1", purpose="training", group_size=4)
    [summary] = await bus.history(subjects.ROLLOUT_SUMMARY, RolloutSummary)
    [ref] = await bus.history(subjects.trajectory("solver"), TrajectoryRef)
    assert summary.reward == ref.reward == 1.0 and summary.failure == "" and summary.purpose == "calibration"
    assert (ref.group_id, ref.group_size, ref.final) == ("g1", 4, True)
    assert load_trajectory(store, ref.trajectory).turns[1].command == "bash /tmp/solve.sh"
    # what the environment's history (folded from summaries) shows the proposer
    assert (summary.rollout_id, summary.model, summary.trajectory) == (r.trajectory.rollout_id, "replay", r.ref)


@pytest.mark.model
async def test_local_model_rollout_stores_token_ids_and_logprobs(local_model_url, tmp_path):
    task = Task.load(SEED)
    store = open_store(f"file://{tmp_path}/blobs")
    async with ChatClient(local_model_url, "smollm2-135m") as client:
        r = await rollout(task, client, ImageCache(kinds=DomainKinds()),
                          store, LoopLimits(max_turns=3, max_tokens=96), env_id="seed-csv")
    t = load_trajectory(store, r.ref)
    assert t == r.trajectory
    assert len(t.turns) >= 1 and t.model == "smollm2-135m"
    for turn in t.turns:
        assert len(turn.completion_token_ids) == len(turn.completion_logprobs) == turn.completion_tokens > 0
        assert len(turn.prompt_token_ids) == turn.prompt_tokens > 0
    assert 0.0 <= t.reward <= 1.0 and "reward" in t.verifier_output
    assert t.n_tokens == sum(turn.completion_tokens for turn in t.turns)


async def test_rollouts_run_concurrently_up_to_the_limit(tmp_path):
    from aes_lib.agents.solver import run_rollouts

    task = Task.load(SEED)
    store = open_store(f"file://{tmp_path}/blobs")
    with ReplayServer(["TASK_DONE"] * 4, delay_s=0.5) as srv:
        async with ChatClient(srv.url, "replay") as client:
            done = await run_rollouts([(task, "seed-csv")] * 4, client, ImageCache(kinds=DomainKinds()),
                                      store, LoopLimits(), concurrency=2)
    assert len({r.trajectory.rollout_id for r in done}) == 4 and all(r.trajectory.reward == 0.0 for r in done)
    assert 1 <= srv.peak_in_flight <= 2


async def test_an_endpoint_failure_is_a_fault_not_a_reward(tmp_path):
    """The endpoint refuses every call: the attempt scores nothing and stores nothing, and the
    fault is transient (the service redelivers it), where a 0 would mark the task too hard. The
    proposer's solver tool reports it without spending a call."""
    from aes_lib import faults
    from aes_lib.agents.proposer.tools import ProposerTools
    from aes_lib.agents.solver import SolverModelFault, run_rollouts

    async def fetch(rel, local):
        shutil.copytree(SEED, local, dirs_exist_ok=True)

    task = Task.load(SEED)
    store = open_store(f"file://{tmp_path}/blobs")
    with ReplayServer(["TASK_DONE"], fail_first=100, fail_status=400) as srv:
        async with ChatClient(srv.url, "replay") as client:
            with pytest.raises(SolverModelFault, match="HTTP 400") as caught:
                await rollout(task, client, ImageCache(kinds=DomainKinds()), store, LoopLimits(max_turns=2))
            with pytest.raises(SolverModelFault):  # one failing attempt fails the set, none left running
                await run_rollouts([(task, "seed-csv")] * 2, client, ImageCache(kinds=DomainKinds()), store,
                                   LoopLimits(max_turns=2))
            tools = ProposerTools(fetch_dir=fetch, images=ImageCache(kinds=DomainKinds()), store=store,
                                  solver_client=client)
            answers = [await tools.call(["solver", "task", "1"]) for _ in range(tools.budget.max_solver_calls + 1)]
            tools.close()
    assert faults.classify(caught.value) == "transient"
    assert all(a.exit_code == 1 and "endpoint failed" in a.output and "not counted" in a.output for a in answers)
    assert not list((tmp_path / "blobs").rglob("*.json*"))  # no trajectory stored
