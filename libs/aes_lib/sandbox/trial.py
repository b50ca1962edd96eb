"""One trial, run the way Harbor runs it: the agent's turn, then the verifier.

The agent sees the instruction and its container only: /solution is copied in by
the oracle agent alone, and the tests never enter the agent's container. The
verifier runs in a second container from the same image, untouched by the agent:
only the agent's result paths cross into it, as data (``aes_lib.sandbox.verifier``),
the agent's container is removed, and tests/test.sh runs as uid 0 with the image's own
toolchain, an empty /logs/verifier and the task's tests/ as /tests. The reward is read
from outside, through the engine, and only from files the root test runner wrote
(``read_rewards``). docs/SECURITY.md states the boundary and what proves each rule.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import io
import json
import math
import shlex
import tarfile
import time
from collections.abc import Awaitable
from typing import Protocol, TypeVar

from aes_lib import telemetry
from aes_lib.bundle import Task
from aes_lib.bundle.compose import MAIN
from aes_lib.sandbox import artifacts, end_state, root_env, verifier
from aes_lib.faults import TransientError
from aes_lib.sandbox.container import (KILL_ALL, DaemonError, ExecResult, LimitCaps, Limits, Sandbox, SandboxError,
                                       SandboxVerdict)
from aes_lib.sandbox.images import ImageCache
from aes_lib.sandbox.services import task_services

DEFAULT_AGENT_TIMEOUT = 600.0
"""Agent seconds for a task whose [agent].timeout_sec is unset."""
VERIFIER_DIR = "/logs/verifier"
STARTUP_TIMEOUT = 120.0
"""Seconds a domain's startup command may take to bring the task's services up."""
T = TypeVar("T")


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
    """The reference solution: copies solution/ to /solution and runs solve.sh (or another
    ``script`` there: a near miss, ``aes_lib.sandbox.strength``)."""

    task: Task
    timeout: float | None = None
    """Seconds for solve.sh; None: the task's agent timeout."""
    script: str = "solve.sh"

    async def run(self, sandbox: Sandbox, instruction: str) -> AgentOutcome:
        cfg = self.task.config
        await sandbox.put_dir(self.task.solution_dir, "/solution")
        r = await sandbox.exec(
            f"bash /solution/{shlex.quote(self.script)}",
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
    witnessed: tuple[str, ...] = ()
    """Names of the files in the agent's witness folder after the tests (``Agent.witness``,
    the tamper probe's: which of its hooks could read /tests)."""
    dropped: tuple[str, ...] = ()
    """``path: why`` of what of the agent's did not cross into the verifier's container, and of
    reward files not read (not written by the root test runner): the trust boundary's evidence."""
    end_state: bytes | None = dataclasses.field(default=None, repr=False)
    """The agent's result paths as the engine read them (``aes_lib.sandbox.end_state``), for
    ``regrade``; None where a trial cannot be re-graded from them alone (multi-step, a separate
    verifier, services beside the task)."""

    @property
    def timed_out(self) -> bool:
        return self.agent.timed_out or self.verifier.timed_out

    def log(self) -> str:
        return (
            f"== agent (exit {self.agent.exit_code}, timed_out={self.agent.timed_out})\n{self.agent.output}\n"
            f"== verifier (exit {self.verifier.exit_code}, timed_out={self.verifier.timed_out})\n"
            f"{self.verifier.output}\n== reward {self.reward} {self.error}\n"
            + (f"== not carried or not read\n" + "\n".join(self.dropped[:50]) + "\n" if self.dropped else "")
        )


def agent_timeout(task: Task) -> float:
    return task.config.agent.timeout_sec or DEFAULT_AGENT_TIMEOUT


class TrialFault(TransientError):
    """The trial failed for the infrastructure (Docker, the image, the verifier's container), not
    for the agent or the task: no reward. Callers retry it (a transient fault) or drop the attempt."""


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
    """Build (or reuse) the image, start the agent's sandbox and the verifier's, run the
    agent then the verifier; one ``trial`` span (in the episode's trace) with its reward.
    ``caps``: the sandboxes' limits (default: those ``images`` builds with)."""
    with telemetry.tracer().start_as_current_span(
            "trial", attributes={"aes.task": task.name, "aes.agent": type(agent).__name__}) as span:
        result = await _trial(task, agent, images, image=image, caps=caps, labels=labels)
        span.set_attributes({"aes.reward": result.reward, "aes.error": result.error})
        return result


async def _trial(task: Task, agent: Agent, images: ImageCache, *, image: str | None, caps: LimitCaps | None,
                 labels: dict[str, str] | None) -> TrialResult:
    t0 = time.monotonic()
    startup, kind_paths = images.kinds.startup(task), images.kinds.results(task)
    image = image or await images.build(task)
    env = task.config.environment
    separate = task.config.verifier.separate
    v_image, bundled_tests = await images.verifier_image(task, image) if separate else (image, False)
    v_env = (task.config.verifier.environment or env) if separate else env
    caps = caps or images.caps
    limits = Limits.for_task(env, caps)
    main_env = _main_env(task)
    start = functools.partial(Sandbox.start, client=images.client, labels=labels)
    try:
        async with contextlib.AsyncExitStack() as stack:
            # A compose task's services, on a network of this trial's own; a separate verifier
            # is not on it (only the artifacts reach it).
            net = await stack.enter_async_context(task_services(task, images, limits, labels))
            fresh_env = v_env.env if separate else main_env
            if task.config.steps:  # separate verifiers are `unsupported` with steps
                return await _steps(task, agent, functools.partial(
                    start, image, limits, env=main_env, workdir=env.workdir, network=net), startup, kind_paths, t0)
            sb, fresh = await _all(
                stack.enter_async_context(start(image, limits, env=main_env, workdir=env.workdir,
                                                network=net, alias=MAIN)),
                stack.enter_async_context(start(v_image, Limits.for_task(v_env, caps), workdir=v_env.workdir,
                                                env=fresh_env, network=None if separate else net)),
            )
            if separate:
                outcome, verified, dropped, state = await _agent_then_separate_verifier(
                    sb, fresh, task, agent, startup, bundled_tests)
            else:
                outcome, verified, dropped, state = await _agent_then_verifier(
                    sb, fresh, task, agent, startup, kind_paths, keep=net is None)
    except SandboxVerdict as e:  # e.g. the agent stopped its own container, a service failed
        return TrialResult(reward=0.0, metrics={}, agent=AgentOutcome(output=str(e)),
                           verifier=ExecResult(exit_code=None, output=""), error=f"sandbox failed: {e}",
                           seconds=time.monotonic() - t0)
    except SandboxError as e:  # Docker, not the attempt: never a reward
        raise TrialFault(f"sandbox failed: {e}") from e
    return _scored(outcome, verified, dropped, state, t0)


def _main_env(task: Task) -> dict[str, str]:
    """Variables compose gives main, under task.toml's own."""
    return {**(task.compose.main_environment if task.compose else {}), **task.config.environment.env}


def _scored(outcome: AgentOutcome, verified: "_Verified", dropped: list[str], state: bytes | None,
            t0: float) -> TrialResult:
    try:
        reward, metrics = parse_reward(verified.rewards.get("reward.json"), verified.rewards.get("reward.txt"))
        error = ""
    except RewardError as e:
        reward, metrics, error = 0.0, {}, str(e)
    return TrialResult(reward=reward, metrics=metrics, agent=outcome, verifier=verified.result, error=error,
                       seconds=time.monotonic() - t0, witnessed=verified.witnessed,
                       dropped=tuple(dropped + verified.unread), end_state=state)


@dataclasses.dataclass(frozen=True)
class _Verified:
    """What test.sh left: its result, the reward files read, those not read, the witness's files."""

    result: ExecResult
    rewards: dict[str, bytes]
    unread: list[str]
    witnessed: tuple[str, ...] = ()


Outcome = tuple[AgentOutcome, _Verified, list[str], bytes | None]
"""The agent's outcome, what test.sh left, what of the agent's did not cross, its end state."""


async def _agent_then_verifier(sb: Sandbox, fresh: Sandbox, task: Task, agent: Agent, startup: str | None,
                               kind_paths: tuple[str, ...], *, keep: bool) -> Outcome:
    await _start_services(sb, startup)
    outcome = await _agents(sb, _agent_turn(sb, task, agent))
    await _agents(sb, _collect(sb, task))
    crossing, state = await _cross(sb, task, kind_paths, stop=True, keep=keep)
    with crossing.archive:
        # The agent's container is gone before the tests start: none of its processes reach them.
        await _all(sb.close(), verifier.restore(fresh, crossing))
    return outcome, await _verify(fresh, task, agent, crossing.roots), crossing.dropped, state


async def _cross(sb: Sandbox, task: Task, kind_paths: tuple[str, ...], *, stop: bool,
                 keep: bool = False) -> tuple[verifier.Crossing, bytes | None]:
    """The agent's results (``kind_paths``: its kind's besides the task's), read by the engine once
    its processes are gone (``stop``: the engine kills the container; else, between steps, the
    sweep kills all but its init), and (``keep``) their end state as read."""
    roots, notes = verifier.result_paths(task, sb.container.attrs["Config"].get("WorkingDir"), kind_paths)
    if stop:
        await sb.stop()
    else:
        await _agents(sb, sb.kill_all())
    archives = await verifier.collect(sb, roots)
    state = await asyncio.to_thread(end_state.pack, archives, owners=sb.archive_owners) if keep else None
    crossing = await asyncio.to_thread(verifier.rebuild, archives, task.tests_dir, owners=sb.archive_owners)
    crossing.dropped[:0] = notes
    return crossing, state


async def regrade(task: Task, state: bytes, images: ImageCache, *, image: str | None = None,
                  caps: LimitCaps | None = None, labels: dict[str, str] | None = None) -> TrialResult:
    """The reward the verifier in force gives the agent's stored end state (``TrialResult.end_state``),
    without the agent: the result paths cross the current trust boundary into a fresh container,
    then the tests run, as in a trial. A fault (Docker, the image) raises ``TrialFault``."""
    t0 = time.monotonic()
    archives, owners = end_state.unpack(state)
    image = image or await images.build(task)
    env = task.config.environment
    start = Sandbox.start(image, Limits.for_task(env, caps or images.caps), env=_main_env(task), workdir=env.workdir,
                          client=images.client, labels=labels)
    try:
        crossing = await asyncio.to_thread(verifier.rebuild, archives, task.tests_dir, owners=owners)
        async with start as fresh:
            with crossing.archive:
                await verifier.restore(fresh, crossing)
            verified = await _verify(fresh, task, NopAgent(), crossing.roots)
    except SandboxVerdict as e:  # results the boundary refuses whole: the attempt's, as in the trial
        return TrialResult(reward=0.0, metrics={}, agent=AgentOutcome(output=str(e)), error=f"sandbox failed: {e}",
                           verifier=ExecResult(exit_code=None, output=""), seconds=time.monotonic() - t0)
    except SandboxError as e:
        raise TrialFault(f"sandbox failed: {e}") from e
    finally:
        for _, f in archives:
            if f is not None:
                f.close()
    return _scored(AgentOutcome(output="re-graded from the stored end state"), verified, crossing.dropped, state, t0)


async def _agent_then_separate_verifier(sb: Sandbox, fresh: Sandbox, task: Task, agent: Agent, startup: str | None,
                                        bundled_tests: bool) -> Outcome:
    await _start_services(sb, startup)
    outcome = await _agents(sb, _agent_turn(sb, task, agent))
    await _agents(sb, _collect(sb, task))
    await sb.stop()
    # Artifacts never land on the verifier's toolchain, tests or reward files.
    carried = await artifacts.collect(sb, artifacts.artifact_paths(task))
    await _all(sb.close(), artifacts.place(fresh, carried, None if bundled_tests else task.tests_dir))
    return outcome, await _verify(fresh, task, agent, []), [], None


def _following(agent: Agent, view: Task, last: bool) -> Agent:
    """An agent that follows the task's reference (the oracle, the probes) follows the step's; a
    probe (or a near miss) runs only on the last step, after the earlier steps' references as they
    are (a probe's breakage carried into a later step would break that step's reference, not the tests)."""
    if not (dataclasses.is_dataclass(agent) and isinstance(getattr(agent, "task", None), Task)):
        return agent
    if last or (isinstance(agent, OracleAgent) and agent.script == OracleAgent.script):
        return dataclasses.replace(agent, task=view)
    return OracleAgent(view, getattr(agent, "timeout", None))


async def _steps(task: Task, agent: Agent, start, startup: str | None, kind_paths: tuple[str, ...],
                 t0: float) -> TrialResult:
    """A multi-step task as Harbor runs it: the steps in order in one agent container, each
    with its instruction (``agent`` sees them in turn) then its tests, on the agent's files so
    far carried into a fresh container, as for one step; a step below its ``min_reward`` ends
    the trial. The reward is Harbor's: the per-key mean over the steps run (``mean``, the
    default) or the last step's (``final``). Unlike Harbor, a step whose verifier wrote no
    reward counts 0 rather than dropping out of the mean, and the agent's processes do not
    outlive a step (the snapshot ends them)."""
    outcomes, results, per_step, errors, codes, dropped = [], [], [], [], [], []
    async with start(alias=MAIN) as sb:
        for i, step in enumerate(task.config.steps or ()):
            view = task.for_step(i)
            actor = _following(agent, view, last=i == len(task.config.steps or ()) - 1)

            async with start() as fresh:
                await _start_services(sb, startup)
                outcome = await _agents(sb, _agent_turn(sb, view, actor))
                await _agents(sb, _collect(sb, view))
                crossing, _ = await _cross(sb, view, kind_paths, stop=False)
                with crossing.archive:
                    await verifier.restore(fresh, crossing)
                verified = await _verify(fresh, view, actor, crossing.roots)
            dropped += [f"step {step.name}: {d}" for d in crossing.dropped + verified.unread]
            result = verified.result
            try:
                reward, metrics = parse_reward(verified.rewards.get("reward.json"), verified.rewards.get("reward.txt"))
            except RewardError as e:
                reward, metrics = 0.0, {"reward": 0.0}
                errors.append(f"step {step.name}: {e}")
            outcomes.append(f"== step {step.name}\n{outcome.output}")
            codes.append(outcome.exit_code)
            results.append(result)
            per_step.append((reward, metrics))
            if outcome.timed_out or not _meets(metrics | {"reward": reward}, step.min_reward):
                break
    if task.config.multi_step_reward_strategy == "final":
        reward, metrics = per_step[-1]
    else:
        keys = {k for _, m in per_step for k in m}
        metrics = {k: sum(m.get(k, 0.0) for _, m in per_step) / len(per_step) for k in keys}
        reward = sum(r for r, _ in per_step) / len(per_step)
    last = results[-1]
    return TrialResult(
        reward=reward, metrics=metrics, seconds=time.monotonic() - t0, error="; ".join(errors), dropped=tuple(dropped),
        witnessed=verified.witnessed,
        # The first step's status that is not 0 (None: unknown or killed), else 0.
        agent=AgentOutcome(exit_code=next((c for c in codes if c != 0), 0), timed_out=outcome.timed_out,
                           output="\n".join(outcomes)),
        verifier=ExecResult(exit_code=last.exit_code, timed_out=any(r.timed_out for r in results),
                            output="\n".join(f"== step {n}\n{r.output}" for n, r in
                                             zip((s.name for s in task.config.steps or ()), results))))


def _meets(rewards: dict[str, float], minimum: float | dict[str, float] | None) -> bool:
    """Harbor's ``min_reward``: a number gates ``reward``, a table each key it names (missing: fails)."""
    if minimum is None:
        return True
    thresholds = {"reward": minimum} if isinstance(minimum, (int, float)) else minimum
    return all(rewards.get(k, float("-inf")) >= v for k, v in thresholds.items())


VERIFIER_ENV = {
    # No shell start-up file runs before test.sh or the shells it starts.
    "BASH_ENV": "", "ENV": "",
    # git runs no hook and no fsmonitor command from a repository the agent wrote, and works on
    # a repository whatever its owner (the managed verifier's tests run as nobody).
    "GIT_CONFIG_COUNT": "3",
    "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": "/dev/null",
    "GIT_CONFIG_KEY_1": "core.fsmonitor", "GIT_CONFIG_VALUE_1": "false",
    "GIT_CONFIG_KEY_2": "safe.directory", "GIT_CONFIG_VALUE_2": "*",
    # Python reads no user site-packages.
    "PYTHONNOUSERSITE": "1",
}
"""Variables every test.sh runs with, over the task's own: they close the ways the agent's
files run code on their own (``docs/ARCHITECTURE.md``, "The verdict boundary")."""


def _verify_script(unset: list[str]) -> str:
    """test.sh, after unsetting the variables root must not run with (``root_env``), then, when it
    has exited, every other process in the container is killed: the reward files are read as
    test.sh left them, with nothing left running to rewrite them."""
    drop = f"unset {' '.join(unset)}\n" if unset else ""
    return f"{drop}bash /tests/test.sh\nstatus=$?\n{KILL_ALL}\nexit $status\n"


REWARD_FILES = ("reward.json", "reward.txt")


async def _verify(fresh: Sandbox, task: Task, agent: Agent, roots: list[str]) -> _Verified:
    """test.sh as uid 0 (a number: no name is looked up) with root's environment (``root_env``), then the reward files it left and,
    for an agent with a ``witness`` folder (the tamper probe), what is in it in each result path."""
    cfg = task.config.verifier
    env, unset = root_env.environment(fresh.container.attrs["Config"].get("Env") or [], cfg.env, roots, VERIFIER_ENV)
    result = await fresh.exec(_verify_script(unset), timeout=cfg.timeout_sec, user=0, env=env)
    rewards, unread = await read_rewards(fresh)
    witness = getattr(agent, "witness", None)  # only probes have one
    seen = [name for root in roots if witness for name in await fresh.get_files(f"{root}/{witness}")]
    return _Verified(result, rewards, unread, tuple(seen))


async def read_rewards(fresh: Sandbox) -> tuple[dict[str, bytes], list[str]]:
    """The reward files in /logs/verifier that the root test runner wrote, read through the engine
    (no process in the container is asked), and why any other was not read: a reward file must
    be a regular file owned by uid 0, so one planted by a program the tests ran as another user,
    or a link to elsewhere, never counts."""
    buf = io.BytesIO()
    if not await fresh.get_archive(VERIFIER_DIR + "/.", buf, 16 << 20):
        return {}, []
    buf.seek(0)
    rewards, unread = {}, []
    with tarfile.open(fileobj=buf) as tar:
        for m in tar:
            name = m.name.removeprefix("./")
            if name not in REWARD_FILES:
                continue
            if not m.isreg():
                unread.append(f"{VERIFIER_DIR}/{name}: not a regular file, not read")
            elif (uid := m.uid if fresh.archive_owners else await _owner(fresh, f"{VERIFIER_DIR}/{name}")) != 0:
                unread.append(f"{VERIFIER_DIR}/{name}: written by uid {uid}, not the root test runner, not read")
            else:
                rewards[name] = tar.extractfile(m).read()
    return rewards, unread


async def _owner(fresh: Sandbox, path: str) -> int:
    """The owner of ``path`` where the engine's archive has none (Podman), from the image's stat:
    test.sh has ended and every other process was killed, so nothing of the agent's runs or
    ever ran as root here; the files the agent's programs wrote show their own uid."""
    r = await fresh.exec(f"stat -c %u -- {path}", timeout=60, user=0, workdir="/")
    if r.exit_code != 0 or not r.output.strip().isdigit():
        raise SandboxError(f"cannot read the owner of {path} (the engine's archive has none): {r.output[-300:]}")
    return int(r.output.strip())


async def start_services(sb: Sandbox, startup: str | None) -> ExecResult | None:
    """Run the task's startup command (``TaskKinds.startup``: its domain's) as root (it brings
    the task's services up); None when there is none."""
    return await sb.exec(startup, timeout=STARTUP_TIMEOUT, user=0) if startup else None


async def _start_services(sb: Sandbox, startup: str | None) -> None:
    """Bring the task's services up; when they do not come up, neither the agent nor the
    verifier runs (the tests would only grade an environment that never started)."""
    r = await start_services(sb, startup)
    if r is not None and r.exit_code != 0:
        how = f"ran past {STARTUP_TIMEOUT:g}s" if r.timed_out else f"exited {r.exit_code}"
        raise SandboxVerdict(f"the domain's startup ({startup}) {how}:\n{r.output[-2000:]}")


async def _collect(sb: Sandbox, task: Task) -> None:
    """Harbor's ``[[verifier.collect]]`` hooks, in the agent's container after its turn: best
    effort, as in Harbor (a failing hook is no verdict; the tests see what it left)."""
    for hook in task.config.verifier.collect:
        await sb.exec(hook.command, timeout=hook.timeout_sec, user=hook.user)


async def _agent_turn(sb: Sandbox, task: Task, agent: Agent) -> AgentOutcome:
    budget = agent_timeout(task)
    try:
        # The agent's own commands have timeouts; this bounds the agent's whole turn.
        return await asyncio.wait_for(agent.run(sb, task.instruction), budget + 30)
    except asyncio.TimeoutError:
        return AgentOutcome(timed_out=True, output=f"agent exceeded {budget:.0f}s")


async def _agents(sb: Sandbox, work: Awaitable[T]) -> T:
    """``work`` on the agent's container ``sb``: the agent controls it (it may have stopped it), so
    a failure there is the attempt's, except an engine error while the container still runs: that
    one is the infrastructure's (under load a runtime times out), never a reward of 0."""
    try:
        return await work
    except SandboxVerdict:
        raise
    except DaemonError as e:
        if await sb.running():
            raise
        raise SandboxVerdict(str(e)) from e
    except SandboxError as e:
        raise SandboxVerdict(str(e)) from e


async def _all(*aws: Awaitable[T]) -> list[T]:
    """Await every one of ``aws``, then raise the first failure (none is left running)."""
    results = await asyncio.gather(*aws, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results  # type: ignore[return-value]
