"""The solver: a terminal agent on a task, scored by the task's verifier.

``SolverAgent`` implements the sandbox's ``Agent`` protocol, so ``run_trial`` runs
it in the task container and then the verifier. ``rollout`` does one attempt and
stores the trajectory; ``run_rollouts`` runs many with bounded concurrency;
``publish_rollout`` announces one on the bus from its ``RolloutOutcome`` alone (the
stored trajectory is written once here and read only by whoever needs its body).
"""

from __future__ import annotations

import asyncio
import shlex
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from aes_lib.agents.bridge import BridgedShell
from aes_lib.agents.loop import LoopLimits, run_loop
from aes_lib.agents.protocol import make_protocol
from aes_lib.agents.solver_prompt import SYSTEM_PROMPT, solver_messages, system_prompt  # noqa: F401  (SYSTEM_PROMPT: importers read it here)
from aes_lib.agents.trajectory import store_trajectory
from aes_lib.domains import ToolSession, domain_of
from aes_lib.faults import TransientError
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.models import ChatClient
from aes_lib.sandbox.screen import forgery_signs
from aes_lib.sandbox.trial import AgentOutcome, agent_timeout, run_trial
from aes_lib.tools import ToolResult
from aes_proto import subjects
from aes_proto.messages import BlobRef, RolloutSummary, TrajectoryRef
from aes_proto.records import RolloutOutcome
from aes_proto.trajectory import Trajectory

TOOL_TIME_S = 120.0
"""Seconds a command that calls a domain's tool (e.g. ``ask_human``, a judge model's reply) gets
on top of its own timeout."""
END_STATES = "end-states"
"""Blob store prefix of the attempts' end states (content-addressed: identical ones are stored once)."""
SHAPED_REWARD = "shaped_reward"
"""The metric holding the domain's shaped reward, which the learner trains on when present."""


def solver_limits(config: FlywheelConfig | None = None, **changes: object) -> LoopLimits:
    """The solver's limits outside training (calibration, pool reviews, the proposer's solver tool,
    ``aes solve``): the settings and the model profile in force, with ``changes``."""
    c = config or FlywheelConfig.from_env()
    return LoopLimits(**{"max_turns": c.solver_max_turns, "max_tokens": c.solver_max_tokens,  # type: ignore[arg-type]
                         "history_turns": c.solver_history_turns, "context_tokens": c.solver_context_tokens,
                         "protocol": c.agent_protocol, **changes})


class SolverAgent:
    """One attempt's agent; keeps its trajectory for the caller."""

    def __init__(
        self, client: ChatClient, limits: LoopLimits, rollout_id: str, env_id: str = "", hints: str | None = None,
        *, domain_prompt: str = "", tools: ToolSession | None = None,
    ) -> None:
        self.client = client
        self.hints = hints
        self.protocol = make_protocol(limits.protocol, tools.specs if tools else (), limits.tool_choice)
        self.system = "\n\n".join(p for p in (system_prompt(self.protocol, limits), domain_prompt,
                                                tools.prompt if tools else "") if p)
        self.tools = tools
        self.limits = limits
        self.trajectory = Trajectory(rollout_id=rollout_id, role="solver", env_id=env_id, model=client.model)

    async def run(self, sandbox, instruction: str) -> AgentOutcome:
        traj = self.trajectory
        traj.instruction = instruction
        traj.messages = solver_messages(self.system, instruction, self.hints)
        shell = sandbox
        if self.tools and self.tools.specs:  # each tool is also an executable, usable anywhere in a shell line
            shell = BridgedShell(sandbox, tuple(spec.name for spec in self.tools.specs), self._serve, TOOL_TIME_S)
            await shell.install()
        await run_loop(self.client, shell, traj, self.limits, tools=self.tools, protocol=self.protocol)
        if self.tools:
            traj.metrics = self.tools.metrics()
        return AgentOutcome(
            exit_code=0 if traj.stop_reason == "done" else 1,
            timed_out=traj.stop_reason == "time_limit",
            output=traj.stop_reason if not traj.error else f"{traj.stop_reason}: {traj.error}",
        )

    async def _serve(self, argv: list[str], cwd: str) -> ToolResult:
        """A tool's executable called inside a command: the same handler as a whole-reply call."""
        assert self.tools is not None
        return await self.tools(shlex.join(argv)) or ToolResult(127, f"not a harness tool: {argv[0]}")


class SolverModelFault(TransientError):
    """The model endpoint failed mid-attempt (after the client's retries): the attempt measured the
    endpoint, not the policy, so it is retried or dropped, never scored (a 0 here would mark tasks
    too hard and train the policy away from what it did)."""


@dataclass(frozen=True)
class Rollout:
    """A finished attempt: the trajectory and where it is stored."""

    trajectory: Trajectory
    ref: BlobRef
    end_state: BlobRef | None = None
    """The agent's stored result paths, for ``aes regrade`` (None: the trial kept none)."""

    @property
    def outcome(self) -> RolloutOutcome:
        """What the services cache and publish: the trajectory's summary and where it is stored."""
        t = self.trajectory
        return RolloutOutcome(
            reward=t.reward, trajectory=self.ref, failure=failure_signature(t), n_turns=len(t.turns),
            seconds=t.agent_seconds + t.verifier_seconds, rollout_id=t.rollout_id, env_id=t.env_id, model=t.model,
            stop_reason=t.stop_reason, policy_version=t.policy_version, n_tokens=t.n_tokens,
            prompt_tokens=t.prompt_tokens, completion_tokens=t.completion_tokens, metrics=dict(t.metrics),
            end_state=self.end_state, screened=t.screened,
        )


async def rollout(
    task,
    client: ChatClient,
    images,
    store,
    limits: LoopLimits,
    *,
    env_id: str = "",
    rollout_id: str | None = None,
    hints: str | None = None,
) -> Rollout:
    """One attempt on ``task`` (an ``aes_lib.bundle.Task``): agent loop, verifier, stored
    trajectory. ``hints`` extend the instruction (the calibrator's diagnostic attempt)."""
    domain = domain_of(task)
    limits = limits.within(agent_timeout(task))
    agent = SolverAgent(client, limits, rollout_id=rollout_id or uuid.uuid4().hex, env_id=env_id, hints=hints,
                        domain_prompt=domain.solver_prompt, tools=domain.tools(task, client) if domain.tools else None)
    started = time.monotonic()
    trial = await run_trial(task, agent, images)
    traj = agent.trajectory
    if traj.stop_reason == "model_error":
        raise SolverModelFault(f"model error during attempt {traj.rollout_id}: {traj.error}")
    traj.reward = float(trial.reward)
    if domain.shaped and (shaped := domain.shaped(traj.reward, traj.metrics)) is not None:
        traj.metrics[SHAPED_REWARD] = shaped
    traj.verifier_output = trial.verifier.output
    traj.verifier_seconds = max(0.0, time.monotonic() - started - traj.agent_seconds)
    if trial.agent.timed_out and traj.stop_reason != "done":
        traj.stop_reason = "time_limit"  # the trial cut the agent's turn at the task's timeout
    if trial.error and not traj.error:
        traj.error = trial.error
    traj.screened = "\n".join(forgery_signs(trial))
    ref = await asyncio.to_thread(store_trajectory, store, traj)
    state = await asyncio.to_thread(store.put_content, END_STATES, trial.end_state, ".tar.gz") if trial.end_state else None
    return Rollout(traj, ref, state)


async def run_rollouts(
    tasks: Sequence[tuple[object, str]],
    client: ChatClient,
    images,
    store,
    limits: LoopLimits,
    concurrency: int = 4,
) -> list[Rollout]:
    """``(task, env_id)`` pairs, each attempted once, at most ``concurrency`` at a time; a fault
    in one cancels the rest (none is left running) and is raised."""
    gate = asyncio.Semaphore(concurrency)

    async def one(task, env_id: str) -> Rollout:
        async with gate:
            return await rollout(task, client, images, store, limits, env_id=env_id)

    try:
        async with asyncio.TaskGroup() as group:
            running = [group.create_task(one(t, e)) for t, e in tasks]
    except* Exception as faults:
        raise faults.exceptions[0] from None
    return [r.result() for r in running]


def failure_signature(traj: Trajectory) -> str:
    """Short reason the attempt did not score 1.0, for the planner."""
    if traj.reward >= 1.0:
        return ""
    if traj.error:
        return traj.error.splitlines()[0][:200]
    for line in traj.verifier_output.splitlines():
        if line.startswith(("FAILED", "ERROR")):
            return line[:200]
    return traj.stop_reason


async def publish_rollout(
    ctx, out: RolloutOutcome, *, episode_id: str, group_id: str, purpose: str = "training", group_size: int = 0
) -> None:
    """RolloutSummary for the planner, status and (folded into the environment's history)
    the proposer's workspace; for a training attempt, a TrajectoryRef for the learner (the
    other purposes -- calibration, review, diagnostics with hints -- are no on-policy groups
    of a known size, so they are not trained on). ``out`` may come from a cache: keys derive
    from the rollout id, so publishing again after a crash publishes nothing new."""
    await ctx.publish(
        subjects.ROLLOUT_SUMMARY,
        RolloutSummary(
            idempotency_key=f"{out.rollout_id}:summary",
            episode_id=episode_id,
            rollout_id=out.rollout_id,
            env_id=out.env_id,
            role="solver",
            reward=out.reward,
            n_turns=out.n_turns,
            seconds=out.seconds,
            prompt_tokens=out.prompt_tokens,
            completion_tokens=out.completion_tokens,
            failure=out.failure,
            trajectory=out.trajectory,
            policy_version=out.policy_version,
            purpose=purpose,
            model=out.model,
            metrics=out.metrics,
            end_state=out.end_state,
            screened=out.screened,
        ),
    )
    if purpose != "training":
        return
    await ctx.publish(
        subjects.trajectory("solver"),
        TrajectoryRef(
            idempotency_key=f"{out.rollout_id}:trajectory",
            episode_id=episode_id,
            rollout_id=out.rollout_id,
            env_id=out.env_id,
            role="solver",
            group_id=group_id,
            reward=out.metrics.get(SHAPED_REWARD, out.reward),
            trajectory=out.trajectory,
            policy_version=out.policy_version,
            n_tokens=out.n_tokens,
            finished=out.stop_reason in ("done", "turn_limit", "time_limit"),
            group_size=group_size,
            screened=out.screened,
        ),
    )
