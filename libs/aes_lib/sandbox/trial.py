"""One trial, run the way Harbor runs it: the agent's turn, then the verifier.

The agent sees the instruction and the container only: /solution is copied in
by the oracle agent alone, /tests only after the agent's turn. Before the
verifier runs, every process the agent left behind is killed (so none can write
a reward later), /logs/verifier is emptied (a planted reward is ignored) and
/tests is replaced by the task's tests/.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import time
from typing import Protocol

from aes_lib.bundle import Task
from aes_lib.sandbox.container import ExecResult, LimitCaps, Limits, Sandbox, SandboxError
from aes_lib.sandbox.images import ImageCache

DEFAULT_AGENT_TIMEOUT = 600.0
"""Agent seconds for a task whose [agent].timeout_sec is unset."""
VERIFIER_DIR = "/logs/verifier"


@dataclasses.dataclass(frozen=True)
class AgentOutcome:
    """How the agent's turn ended (the reward comes from the verifier, not from here)."""

    exit_code: int | None = None
    """Exit status of the agent's last command, if it has one."""
    timed_out: bool = False
    """The turn ran past the task's agent timeout."""
    output: str = ""
    """What the agent wants in the failure logs."""


class Agent(Protocol):
    """Anything that acts in a sandbox given the instruction: a solver, the oracle, nop."""

    async def run(self, sandbox: Sandbox, instruction: str) -> AgentOutcome: ...


@dataclasses.dataclass(frozen=True)
class NopAgent:
    """The empty solution: does nothing."""

    async def run(self, sandbox: Sandbox, instruction: str) -> AgentOutcome:
        return AgentOutcome(exit_code=0)


@dataclasses.dataclass(frozen=True)
class OracleAgent:
    """The reference solution: copies solution/ to /solution and runs solve.sh."""

    task: Task
    timeout: float | None = None
    """Seconds for solve.sh; None: the task's agent timeout."""

    async def run(self, sandbox: Sandbox, instruction: str) -> AgentOutcome:
        cfg = self.task.config
        await sandbox.put_dir(self.task.solution_dir, "/solution")
        r = await sandbox.exec(
            "bash /solution/solve.sh",
            timeout=self.timeout or agent_timeout(self.task),
            user=cfg.agent.user,
            env=cfg.solution.env,
        )
        return AgentOutcome(exit_code=r.exit_code, timed_out=r.timed_out, output=r.output)


@dataclasses.dataclass(frozen=True)
class TrialResult:
    reward: float
    """``reward`` from reward.json (or the mean of its metrics), else reward.txt; 0 when absent."""
    metrics: dict[str, float]
    agent: AgentOutcome
    verifier: ExecResult
    error: str = ""
    """Why no reward could be read (missing or malformed reward file)."""
    seconds: float = 0.0

    @property
    def timed_out(self) -> bool:
        return self.agent.timed_out or self.verifier.timed_out

    def log(self) -> str:
        return (
            f"== agent (exit {self.agent.exit_code}, timed_out={self.agent.timed_out})\n{self.agent.output}\n"
            f"== verifier (exit {self.verifier.exit_code}, timed_out={self.verifier.timed_out})\n"
            f"{self.verifier.output}\n== reward {self.reward} {self.error}\n"
        )


def agent_timeout(task: Task) -> float:
    return task.config.agent.timeout_sec or DEFAULT_AGENT_TIMEOUT


class RewardError(ValueError):
    """A reward file that does not hold a finite number (or named numbers)."""


def parse_reward(json_bytes: bytes | None, txt_bytes: bytes | None) -> tuple[float, dict[str, float]]:
    """Harbor's rule: reward.json first (key ``reward``, else the mean), then reward.txt."""
    if json_bytes is not None:
        try:
            data = json.loads(json_bytes)
        except ValueError as e:
            raise RewardError(f"reward.json is not JSON: {e}") from e
        if not isinstance(data, dict) or not data:
            raise RewardError("reward.json must be a non-empty object of named metrics")
        metrics = {k: _number(v, f"reward.json[{k!r}]") for k, v in data.items()}
        reward = metrics["reward"] if "reward" in metrics else sum(metrics.values()) / len(metrics)
        return reward, metrics
    if txt_bytes is not None:
        text = txt_bytes.decode("utf-8", errors="replace").strip()
        try:
            value = float(text)
        except ValueError as e:
            raise RewardError(f"reward.txt is not a number: {text[:80]!r}") from e
        reward = _number(value, "reward.txt")
        return reward, {"reward": reward}
    raise RewardError("the verifier wrote neither reward.json nor reward.txt")


def _number(v: object, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise RewardError(f"{where} is not a finite number: {v!r}")
    return float(v)


async def run_trial(
    task: Task,
    agent: Agent,
    images: ImageCache,
    *,
    image: str | None = None,
    caps: LimitCaps | None = None,
    labels: dict[str, str] | None = None,
) -> TrialResult:
    """Build (or reuse) the image, start a sandbox, run the agent then the verifier."""
    t0 = time.monotonic()
    image = image or await images.build(task)
    cfg = task.config
    async with Sandbox.start(
        image,
        Limits.for_task(cfg.environment, caps),
        client=images.client,
        labels=labels,
        env=cfg.environment.env,
        workdir=cfg.environment.workdir,
    ) as sb:
        try:
            outcome, verifier, json_bytes, txt_bytes = await _agent_then_verifier(sb, task, agent)
        except SandboxError as e:  # e.g. the agent stopped its own container
            return TrialResult(reward=0.0, metrics={}, agent=AgentOutcome(output=str(e)),
                               verifier=ExecResult(exit_code=None, output=""), error=f"sandbox failed: {e}",
                               seconds=time.monotonic() - t0)
    try:
        reward, metrics = parse_reward(json_bytes, txt_bytes)
        error = ""
    except RewardError as e:
        reward, metrics, error = 0.0, {}, str(e)
    return TrialResult(reward=reward, metrics=metrics, agent=outcome, verifier=verifier, error=error,
                       seconds=time.monotonic() - t0)


async def _agent_then_verifier(
    sb: Sandbox, task: Task, agent: Agent
) -> tuple[AgentOutcome, ExecResult, bytes | None, bytes | None]:
    budget = agent_timeout(task)
    try:
        # The agent's own commands have timeouts; this bounds the agent's whole turn.
        outcome = await asyncio.wait_for(agent.run(sb, task.instruction), budget + 30)
    except asyncio.TimeoutError:
        outcome = AgentOutcome(timed_out=True, output=f"agent exceeded {budget:.0f}s")
    await sb.kill_all()
    verifier = await _verify(sb, task)
    files = await sb.get_files(VERIFIER_DIR)
    return outcome, verifier, files.get("reward.json"), files.get("reward.txt")


async def _verify(sb: Sandbox, task: Task) -> ExecResult:
    await sb.exec(f"rm -rf /tests {VERIFIER_DIR} && mkdir -p {VERIFIER_DIR}", timeout=60, user=0)
    await sb.put_dir(task.tests_dir, "/tests")
    return await sb.exec(
        "bash /tests/test.sh",
        timeout=task.config.verifier.timeout_sec,
        user=0,
        env=task.config.verifier.env,
    )
