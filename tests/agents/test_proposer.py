"""The proposer path end to end, driven by recorded conversations on the replay server:
commands run in the proposer's container, a child environment is built and checked
through the sandbox, the task is submitted, published, and admitted by the validator."""

from __future__ import annotations

import dataclasses
import json
import shlex
import shutil
import tarfile
from pathlib import Path

import nats.errors
import pytest
from replay_server import ReplayServer

from aes_lib.bus import kv as kvs
from aes_lib.agents.parse import parse_action
from aes_lib.flywheel.planner import fold
from aes_lib.agents.proposer.tools import ProposerTools
from aes_lib.agents.proposer.workspace import build_workspace
from aes_lib.agents.trajectory import load_trajectory, store_trajectory
from aes_lib.bundle import pack, unpack
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache
from aes_proto import subjects
from aes_proto.codec import decode
from aes_proto.messages import (
    Assignment, CalibrationResult, CandidateEnv, Lineage, RolloutSummary, ValidationResult,
)
from aes_proto.records import HISTORY_BUCKET, EnvHistory, history_key
from aes_proto.trajectory import Trajectory
from aes_services.proposer import ProposerService
from aes_services.validator import ValidatorService

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "tests" / "replay"
PARENT = ROOT / "seeds" / "csv-sales-rollup"


async def _seed_parent(bus) -> tuple[str, object]:
    """The parent environment in the store, with one recorded solver attempt on it."""
    packed = pack(PARENT)
    ref = bus.blobs.put_content("bundles", packed.data, suffix=".tar.gz")
    traj = Trajectory(rollout_id="r1", role="solver", env_id=packed.sha256, model="replay", reward=0.25,
                      verifier_output="FAILED test_rollup.py::test_totals")
    summary = RolloutSummary(idempotency_key="r1", episode_id="ep0", rollout_id="r1", env_id=packed.sha256,
                             role="solver", reward=0.25, failure="FAILED test_totals", model="replay",
                             trajectory=store_trajectory(bus.blobs, traj))
    # as the planner-stats service records every summary
    await kvs.update(await bus.kv(HISTORY_BUCKET), history_key(packed.sha256), EnvHistory, lambda h: fold(h, summary))
    return packed.sha256, ref


def _assignment(env_id: str, bundle, mode: str = "agent") -> Assignment:
    return Assignment(idempotency_key=f"a1:{mode}", episode_id="ep1",
                      lineage=Lineage(assignment_id="a1", parent_env_id=env_id, category="data-processing", mode=mode),
                      direction="harder", parent_bundle=bundle, pass_rate=0.25, common_failure="FAILED test_totals")


async def _service(bus, proposer_url: str, solver_url: str) -> ProposerService:
    settings = dataclasses.replace(bus.settings, model_url=solver_url, model="replay",
                                   proposer_model_url=proposer_url, proposer_model="replay")
    bus.settings = settings  # the Bus is the service Context
    svc = ProposerService()
    await svc.setup(bus)
    return svc


async def _taken(bus, subject: str, type_):
    sub = await bus.js.pull_subscribe(subject, durable="take-" + subject.replace(".", "-"))
    try:
        msgs = await sub.fetch(1, timeout=5)
    except nats.errors.TimeoutError:
        return None
    await msgs[0].ack()
    return decode(msgs[0].data, type_)


async def test_replayed_agentic_episode_submits_a_valid_candidate(bus, tmp_path):
    env_id, bundle = await _seed_parent(bus)
    proposer = ReplayServer.from_file(RECORDINGS / "proposer_episode.json")
    solver = ReplayServer.from_file(RECORDINGS / "solver_gives_up.json")
    with proposer, solver:
        svc = await _service(bus, proposer.url, solver.url)
        await svc.handle(_assignment(env_id, bundle), bus)
    assert not proposer.errors and len(proposer.requests) == 12

    cand = await _taken(bus, subjects.stage(bus.settings.route_stages[0]), CandidateEnv)
    assert cand is not None and cand.route == bus.settings.route_stages
    lineage = cand.lineage
    assert lineage.parent_env_id == env_id and lineage.mode == "agent" and lineage.proposer_model == "replay"
    assert (lineage.assignment_id, lineage.category, lineage.revision) == ("a1", "data-processing", 0)
    assert cand.prompt_tokens > 0 and lineage.cost_usd == 0.0

    # The validator admits the submitted bundle and forwards it to the next stage.
    task_dir = tmp_path / "submitted"
    unpack(bus.blobs.get_bytes(cand.bundle), task_dir)
    assert "longest word" in (task_dir / "instruction.md").read_text()
    validator = ValidatorService()
    await validator.setup(bus)
    await validator.handle(cand, bus)
    [result] = await bus.history(subjects.RESULT_VALIDATION, ValidationResult)
    assert result.ok and result.env_id == cand.env_id, result.detail
    assert (result.oracle_reward, result.nop_reward) == (1.0, 0.0)
    forwarded = await _taken(bus, subjects.stage(bus.settings.route_stages[1]), CandidateEnv)
    assert forwarded.env_id == cand.env_id and forwarded.verdicts[-1].stage == "validate"

    assert cand.proposal.group_id == cand.lineage.assignment_id and cand.proposal.group_size == 1
    traj = load_trajectory(bus.blobs, cand.proposal.trajectory)
    t = traj.turns
    # Commands ran inside the proposer's container, over the workspace the harness prepared.
    assert "past_environments" in t[0].output and "direction: **harder**" in t[0].output
    assert "task/environment" in t[1].output and not t[1].tool
    # Tools ran outside it: the build, the oracle/empty check and the solver in child containers.
    assert t[7].tool and t[7].output.startswith("[exit code 0]\nbuild ok: image aes-env:")
    assert t[8].tool and "valid: True" in t[8].output and "oracle reward: 1.0" in t[8].output
    assert t[9].tool and "solver rewards: [0.0]" in t[9].output
    assert t[11].tool and traj.stop_reason == "submitted"
    # The proposer saw the parent's trajectory index.
    first_request = proposer.requests[1]["messages"][-1]["content"]
    assert "past_environments" in first_request

    # memory/ persisted across rounds: the next workspace has the note.
    ws = build_workspace(tmp_path / "next", _assignment(env_id, bundle), bus.blobs, [], svc.resources.state_file)
    assert "word-stats" in (ws / "memory" / "notes.md").read_text()


class AsToolCalls(ReplayServer):
    """A recording's fenced replies answered as native tool calls: ``aes-tool`` lines through the
    ``aes_tool`` function, other commands through ``bash``, the done marker as ``finish``."""

    def completion(self, body, text, i=0):
        status, out = super().completion(body, "", i)
        action = parse_action(text)
        argv = shlex.split(action.command) if action.command.startswith("aes-tool ") else []
        name, args = ("finish", {}) if action.done else \
            ("aes_tool", {"action": argv[1], "dir": argv[2], "k": int(argv[3]) if len(argv) > 3 else None}) if argv \
            else ("bash", {"command": action.command})
        out["choices"][0]["message"]["tool_calls"] = [
            {"id": f"call-{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]
        return status, out


async def test_a_tool_call_episode_reaches_the_harness_tools_through_their_functions(bus, monkeypatch):
    """The same recorded episode under ``AES_AGENT_PROTOCOL=tools``: the build, check, solver and
    submit are ``aes_tool`` calls, each answered as a ``tool`` message; the candidate is published."""
    monkeypatch.setenv("AES_AGENT_PROTOCOL", "tools")
    env_id, bundle = await _seed_parent(bus)
    proposer = AsToolCalls.from_file(RECORDINGS / "proposer_episode.json")
    solver = AsToolCalls.from_file(RECORDINGS / "solver_gives_up.json")
    with proposer, solver:
        svc = await _service(bus, proposer.url, solver.url)
        await svc.handle(_assignment(env_id, bundle), bus)
    assert not proposer.errors and len(proposer.requests) == 12
    assert [t["function"]["name"] for t in proposer.requests[0]["tools"]] == ["bash", "aes_tool", "finish"]
    assert [t["function"]["name"] for t in solver.requests[0]["tools"]] == ["bash", "finish"]
    assert "Call the `bash` tool" in proposer.requests[0]["messages"][0]["content"]
    cand = await _taken(bus, subjects.stage(bus.settings.route_stages[0]), CandidateEnv)
    assert cand is not None
    traj = load_trajectory(bus.blobs, cand.proposal.trajectory)
    t = traj.turns
    assert t[7].command == "aes-tool build task" and t[7].tool and "build ok: image aes-env:" in t[7].output
    assert t[8].tool and "valid: True" in t[8].output and t[9].tool and "solver rewards: [0.0]" in t[9].output
    assert t[11].tool and traj.stop_reason == "submitted"
    answers = [m for m in proposer.requests[8]["messages"] if m["role"] == "tool"]
    assert answers[-1]["tool_call_id"] == "call-7" and "build ok" in answers[-1]["content"]


async def test_workspace_layout(bus, tmp_path):
    env_id, bundle = await _seed_parent(bus)
    from aes_lib.agents.proposer.workspace import PastEnvironment

    h = await kvs.read(await bus.kv(HISTORY_BUCKET), history_key(env_id), EnvHistory)
    rollouts = list(h.recent)
    ws = build_workspace(tmp_path / "ws", _assignment(env_id, bundle), bus.blobs,
                         [PastEnvironment(env_id, bundle, rollouts)], tmp_path / "state.tar.gz")
    [row] = [json.loads(line) for line in (ws / "past_trajectories" / "index.jsonl").read_text().splitlines()]
    assert row["env_id"] == env_id and row["reward"] == 0.25
    traj = json.loads((ws / "past_trajectories" / row["file"]).read_text())
    assert traj["verifier_output"].startswith("FAILED")
    assert (ws / "past_environments" / env_id / "instruction.md").read_text() == (PARENT / "instruction.md").read_text()
    assert (ws / "templates" / "tests" / "test.sh").read_text().startswith("#!/bin/bash\n# AES managed verifier")
    assert (ws / "instructions.md").is_file() and (ws / "memory").is_dir() and (ws / "tools").is_dir()


async def test_a_revision_workspace_shows_the_failed_checks_evidence_and_the_previous_candidate(bus, tmp_path):
    from aes_proto.messages import Verdict

    from aes_lib.flywheel.revision import check_feedback, revision_assignment

    env_id, bundle = await _seed_parent(bus)
    rejected = CandidateEnv(idempotency_key="c1", episode_id="ep1", env_id=env_id, bundle=bundle, direction="harder",
                            lineage=_assignment(env_id, bundle).lineage, route=("reset", "calibrate"))
    verdict = Verdict(stage="reset", ok=False, reason="oracle_failed_after_reset",
                      detail="the reference solution fails on a fresh rebuild (reward 0)")
    a = revision_assignment(rejected, rejected.direction, check_feedback(verdict, "FAILED test_rollup.py::test_totals"))
    ws = build_workspace(tmp_path / "ws", a, bus.blobs, [], tmp_path / "state.tar.gz")
    text = (ws / "assignment.md").read_text()
    assert "direction: **harder**" in text and "revision 1 of a rejected candidate" in text
    assert "Check failed: reset (oracle_failed_after_reset)" in text and "FAILED test_rollup.py::test_totals" in text
    assert (ws / "past_environments" / "previous" / "instruction.md").read_text() == (PARENT / "instruction.md").read_text()


async def test_state_archive_cannot_escape(tmp_path):
    from aes_lib.agents.proposer.workspace import restore_state

    evil = tmp_path / "state.tar.gz"
    (tmp_path / "payload").write_text("x")
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(tmp_path / "payload", arcname="memory/../../escaped")
    with pytest.raises(tarfile.OutsideDestinationError):
        restore_state(evil, tmp_path / "ws")
    assert not (tmp_path / "escaped").exists()


async def test_episode_without_submission_is_a_recorded_failure(bus):
    env_id, bundle = await _seed_parent(bus)
    with ReplayServer(["```bash\nls\n```", "Nothing good comes to mind. TASK_DONE"]) as proposer:
        svc = await _service(bus, proposer.url, proposer.url)
        await svc.handle(_assignment(env_id, bundle), bus)
    [result] = await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)
    assert result.decision == "rejected" and result.proposer_reward == 0.0 and result.lineage.assignment_id == "a1"
    assert result.verdicts[0].stage == "proposer" and result.verdicts[0].reason == "no_submission"
    assert "done; 2 turns" in result.verdicts[0].detail
    # The episode's trajectory rides on its result: the proposer-samples service makes it a sample.
    assert result.proposal is not None and result.proposal.group_id == "a1"
    assert load_trajectory(bus.blobs, result.proposal.trajectory).turns[0].command == "ls"


async def test_tools_refuse_unknown_tools_and_escapes():
    fetched: list[str] = []

    async def fetch(rel, local):
        fetched.append(rel)
        raise AssertionError("must not fetch")

    tools = ProposerTools(fetch_dir=fetch, images=None, store=None, solver_client=None)
    assert await tools("ls -la") is None
    # A shell line with more than the tool runs in the container (the executable reaches the tools).
    assert await tools("aes-tool build task && curl evil") is None
    r = await tools("aes-tool frobnicate task")
    assert r.exit_code == 2 and "unknown tool" in r.output
    r = await tools("aes-tool check ../../etc")
    assert r.exit_code == 1 and "'/etc' is outside the workspace" in r.output
    assert not fetched and [c.exit_code for c in tools.calls] == [2, 1]
    tools.close()


def _sum_task(root, tests: str) -> None:
    """A small real task at ``root``: sum /app/nums.txt into /app/out/sum.txt, judged by ``tests``."""
    from aes_lib.agents.proposer.files import write_files
    from aes_lib.agents.proposer.workspace import install_verifier

    write_files({
        "instruction.md": "Write the sum of the integers in `/app/nums.txt` to `/app/out/sum.txt`.\n",
        "task.toml": 'schema_version = "1.4"\n\n[task]\nname = "aes-test/sum"\n\n[verifier]\ntimeout_sec = 60.0\n',
        "environment/Dockerfile": "FROM aes-base:latest\nWORKDIR /app\nRUN printf '3\\n4\\n5\\n' > /app/nums.txt\n",
        "solution/solve.sh": "#!/bin/bash\nmkdir -p /app/out\nawk '{s+=$1} END {print s}' /app/nums.txt > /app/out/sum.txt\n",
        "tests/test_sum.py": tests,
    }, root)
    install_verifier(root)


async def test_check_names_the_tests_the_empty_solution_passes_and_the_reference_fails(tmp_path):
    """A real small task: one test checks nothing the solver does (the empty solution passes it),
    one asks for a file the reference never writes; check names both, not just the rewards."""
    tests = ("from pathlib import Path\n\n\ndef test_sum():\n    assert Path('/app/out/sum.txt').read_text() == '12\\n'\n\n\n"
             "def test_input_is_there():\n    assert Path('/app/nums.txt').exists()\n\n\n"
             "def test_mean():\n    assert Path('/app/out/mean.txt').read_text() == '4\\n'\n")
    _sum_task(tmp_path / "task", tests)

    async def fetch(rel, local):
        shutil.copytree(tmp_path / rel, local)

    tools = ProposerTools(fetch_dir=fetch, images=ImageCache(kinds=DomainKinds()), store=None, solver_client=None)
    r = await tools("aes-tool check task")
    tools.close()
    assert r.exit_code == 1 and "empty-solution reward: 0.333333" in r.output, r.output
    lines = r.output.splitlines()
    assert "the empty solution passes test_sum.py::test_input_is_there" in lines
    assert [ln for ln in lines if ln.startswith("the empty solution passes")] == \
        ["the empty solution passes test_sum.py::test_input_is_there"]
    [fails] = [ln for ln in lines if ln.startswith("the reference solution fails")]
    assert fails.startswith("the reference solution fails test_sum.py::test_mean - ")


async def test_check_runs_the_wrong_solutions_admission_runs(tmp_path):
    """A valid task whose tests only check that the sum exists: check says so, as the strength
    gate would, naming the mutant the tests passed; with the value checked it passes."""
    weak = "from pathlib import Path\n\n\ndef test_sum():\n    assert Path('/app/out/sum.txt').exists()\n"
    for name, tests in (("weak", weak), ("strong", weak.replace(".exists()", ".read_text() == '12\\n'"))):
        _sum_task(tmp_path / name, tests)

    async def fetch(rel, local):
        shutil.copytree(tmp_path / rel, local)

    tools = ProposerTools(fetch_dir=fetch, images=ImageCache(kinds=DomainKinds()), store=None, solver_client=None)
    r = await tools("aes-tool check weak")
    assert r.exit_code == 1 and "valid: True (ok)" in r.output, r.output
    assert "verifier strength: weak_tests: " in r.output and "/app/out/sum.txt to exist but not to be right" in r.output
    assert "wrong solution perturb /app/out/sum.txt: its last number 12 -> 13 (offset 0): reward 1" in r.output
    r = await tools("aes-tool check strong")
    tools.close()
    assert r.exit_code == 0 and "verifier strength: ok: 3 of 3 mutants" in r.output, r.output


@pytest.mark.model
async def test_local_model_episode_reaches_the_validator_or_is_recorded(bus, local_model_url, monkeypatch, tmp_path):
    """SmolLM2-135M as proposer: whatever it does, the outcome is on the bus."""
    monkeypatch.setenv("AES_PROPOSER_MAX_TURNS", "2")
    monkeypatch.setenv("AES_PROPOSER_MAX_TOKENS", "128")
    env_id, bundle = await _seed_parent(bus)
    bus.settings = dataclasses.replace(bus.settings, model_url=local_model_url, model="smollm2-135m")
    svc = ProposerService()
    await svc.setup(bus)
    await svc.handle(_assignment(env_id, bundle), bus)
    cand = await _taken(bus, subjects.stage(bus.settings.route_stages[0]), CandidateEnv)
    if cand is not None:
        validator = ValidatorService()
        await validator.setup(bus)
        await validator.handle(cand, bus)
        [result] = await bus.history(subjects.RESULT_VALIDATION, ValidationResult)
        assert result.env_id == cand.env_id
        traj_ref = cand.proposal.trajectory
    else:
        [result] = await bus.history(subjects.RESULT_CALIBRATION, CalibrationResult)
        assert result.decision == "rejected" and result.proposer_reward == 0.0
        assert result.verdicts[0].reason == "no_submission"
        assert result.proposal.group_id == "a1"
        traj_ref = result.proposal.trajectory
    traj = load_trajectory(bus.blobs, traj_ref)
    assert traj.turns and all(len(t.completion_token_ids) == len(t.completion_logprobs) > 0 for t in traj.turns)


async def test_only_memory_and_tools_persist_and_instructions_stay_the_harness_copy(tmp_path):
    from aes_lib.agents.proposer.harness import run_episode
    from aes_lib.blobstore import open_store
    from aes_lib.models import ChatClient

    store = open_store(f"file://{tmp_path}/blobs")
    state = tmp_path / "state.tar.gz"
    a = Assignment(idempotency_key="p", episode_id="ep", lineage=Lineage(assignment_id="p", mode="agent"), direction="new")
    tamper = ("```bash\necho hacked > instructions.md && echo keep > memory/x && echo tool > tools/t.sh"
              " && ln -s /etc/passwd memory/link && mkfifo tools/pipe\n```")
    look = "```bash\nhead -1 instructions.md; cat memory/x tools/t.sh; ls memory tools\n```"
    with ReplayServer([tamper, "TASK_DONE"]) as srv:
        ep1 = await run_episode(a, ChatClient(srv.url, "replay"), None, ImageCache(kinds=DomainKinds()),
                                store, past=[], state_file=state)
    assert ep1.trajectory.turns[0].exit_code == 0 and ep1.packed is None and ep1.failure == "no_submission"
    with ReplayServer([look, "TASK_DONE"]) as srv:
        ep2 = await run_episode(a, ChatClient(srv.url, "replay"), None, ImageCache(kinds=DomainKinds()),
                                store, past=[], state_file=state)
        first_prompt = srv.requests[0]["messages"][1]["content"]
    out = ep2.trajectory.turns[0].output
    assert out.splitlines()[1] == "# Writing a training environment"  # the harness's copy, not "hacked"
    assert "keep\ntool\n" in out and "link" not in out and "pipe" not in out
    assert "hacked" not in first_prompt


async def test_a_proposer_reply_cut_at_the_token_cap_is_told_so(tmp_path):
    """The proposer's loop hears the same: its reply was cut at its episode's cap."""
    from aes_lib.agents.proposer.harness import EpisodeBudget, run_episode
    from aes_lib.blobstore import open_store
    from aes_lib.models import ChatClient

    a = Assignment(idempotency_key="c", episode_id="ep", lineage=Lineage(assignment_id="c", mode="agent"), direction="new")
    with ReplayServer(["=== FILE: instruction.md ===\nWrite a", "TASK_DONE"], cut=frozenset({0})) as srv:
        ep = await run_episode(a, ChatClient(srv.url, "replay"), None, ImageCache(kinds=DomainKinds()),
                               open_store(f"file://{tmp_path}/blobs"), past=[], state_file=tmp_path / "state.tar.gz",
                               budget=EpisodeBudget().with_loop(max_tokens=700))
        told = srv.requests[1]["messages"][-1]["content"]
    assert "Your reply was cut at 700 tokens" in told and "No command found" not in told
    assert ep.trajectory.turns[0].format_error and ep.failure == "no_submission"
