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
import posixpath
import re
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
    links: tuple[tuple[str, str], ...] = ()
    """``(path, where it leads)`` of each link of the agent's dropped for leaving the result paths
    (``verifier.Crossing.links``)."""
    unread: tuple[str, ...] = ()
    """``path: why`` of each reward file refused as not the root test runner's verdict (also in
    ``dropped``)."""
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
            + ("== not carried or not read\n" + "\n".join(self.dropped[:50]) + "\n" if self.dropped else "")
        )


def agent_timeout(task: Task) -> float:
    return task.config.agent.timeout_sec or DEFAULT_AGENT_TIMEOUT


class TrialFault(TransientError):
    """The trial failed for the infrastructure (Docker, the image, the verifier's container), not
    for the agent or the task: no reward. Callers retry it (a transient fault) or drop the attempt."""


class RewardError(ValueError):
    """A reward refused: no reward file, or one that does not hold a reward (a finite number in
    [0, 1], or named finite metrics)."""


class ConflictingRewards(RewardError):
    """reward.json and reward.txt name different rewards: a sign that one is not the verdict."""


_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""reward.txt's number: ASCII digits, a point and an exponent (``%g`` writes one), nothing else
Python's ``float`` takes (``1_000``, ``inf``, ``nan``, other scripts' digits)."""
AGREE = 1e-6
"""How far reward.json's and reward.txt's rewards may be apart and still be one verdict (``%.6g``)."""


def parse_reward(json_bytes: bytes | None, txt_bytes: bytes | None) -> tuple[float, dict[str, float]]:
    """Harbor's rule: reward.json first (key ``reward``, else the mean of its metrics), then
    reward.txt. A reward is a finite number in [0, 1] (a mean, of metrics each one); any other
    is refused (``RewardError``), never passed on: the learner centres rewards within a group,
    and one inf or 1000 there outweighs the rest. With both files, each must hold a reward and
    the two must agree (``ConflictingRewards``): Harbor's precedence would otherwise let a stray
    reward.json (a report of the agent's that test.sh copied into the logs) outrank the
    reward.txt root wrote."""
    if json_bytes is None:
        if txt_bytes is None:
            raise RewardError("the verifier wrote neither reward.json nor reward.txt")
        reward = _txt_reward(txt_bytes)
        return reward, {"reward": reward}
    if txt_bytes is None:
        return _json_reward(json_bytes)
    try:
        (reward, metrics), txt = _json_reward(json_bytes), _txt_reward(txt_bytes)
    except RewardError as e:
        raise ConflictingRewards(f"test.sh left two verdicts, and one is no reward: {e}") from e
    if abs(reward - txt) > AGREE:
        raise ConflictingRewards(f"test.sh left two verdicts, reward.json's {reward:g} and reward.txt's {txt:g}: "
                                 "which one its last step wrote cannot be told")
    return reward, metrics


def _json_reward(json_bytes: bytes) -> tuple[float, dict[str, float]]:
    try:
        data = json.loads(json_bytes)
    except (ValueError, RecursionError) as e:
        raise RewardError(f"reward.json is not JSON: {str(e)[:200]}") from e
    if not isinstance(data, dict) or not data:
        raise RewardError("reward.json must be a non-empty object of named metrics")
    metrics = {k: _number(v, f"reward.json[{k[:80]!r}]", bounded="reward" not in data or k == "reward")
               for k, v in data.items()}
    return (metrics["reward"] if "reward" in metrics else sum(metrics.values()) / len(metrics)), metrics


def _txt_reward(txt_bytes: bytes) -> float:
    text = txt_bytes.decode("utf-8", errors="replace").strip()
    if not _DECIMAL.fullmatch(text):
        raise RewardError(f"reward.txt is not a plain decimal number: {text[:80]!r}")
    return _number(float(text), "reward.txt", bounded=True)


def _number(v: object, where: str, *, bounded: bool) -> float:
    """``v`` as a finite float (``bounded``: a reward, in [0, 1]), else ``RewardError``."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise RewardError(f"{where} is not a number: {repr(v)[:80]}")
    try:
        x = float(v)
    except OverflowError:  # an int past float's range
        x = math.inf
    if not math.isfinite(x):
        raise RewardError(f"{where} is not a finite number: {repr(v)[:80]}")
    if bounded and not 0.0 <= x <= 1.0:
        raise RewardError(f"{where} is {x:g}, outside [0, 1]: not a reward")
    return x


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
                outcome, verified, crossing, state = await _agent_then_separate_verifier(
                    sb, fresh, task, agent, startup, bundled_tests)
            else:
                outcome, verified, crossing, state = await _agent_then_verifier(
                    sb, fresh, task, agent, startup, kind_paths, keep=net is None)
    except SandboxVerdict as e:  # e.g. the agent stopped its own container, a service failed
        return TrialResult(reward=0.0, metrics={}, agent=AgentOutcome(output=str(e)),
                           verifier=ExecResult(exit_code=None, output=""), error=f"sandbox failed: {e}",
                           seconds=time.monotonic() - t0)
    except SandboxError as e:  # Docker, not the attempt: never a reward
        raise TrialFault(f"sandbox failed: {e}") from e
    return _scored(outcome, verified, crossing, state, t0)


def _main_env(task: Task) -> dict[str, str]:
    """Variables compose gives main, under task.toml's own."""
    return {**(task.compose.main_environment if task.compose else {}), **task.config.environment.env}


def _scored(outcome: AgentOutcome, verified: "_Verified", crossing: verifier.Crossing | None, state: bytes | None,
            t0: float) -> TrialResult:
    reward, metrics, error, unread = _judged(verified)
    dropped, links = (crossing.dropped, crossing.links) if crossing else ([], [])
    return TrialResult(reward=reward, metrics=metrics, agent=outcome, verifier=verified.result, error=error,
                       seconds=time.monotonic() - t0, witnessed=verified.witnessed,
                       dropped=tuple(dropped + unread), links=tuple(links), unread=tuple(unread), end_state=state)


def _judged(verified: "_Verified") -> tuple[float, dict[str, float], str, list[str]]:
    """The reward test.sh's last step wrote, its metrics, why it is refused ("" if it is not) and
    the reward files refused as not the verdict. A test.sh that ran past its timeout never ran its
    last step: what it left (a report of the agent's it copied, say) is no verdict (as in Harbor)."""
    if verified.result.timed_out:
        return 0.0, {}, "test.sh ran past the verifier's timeout: its last step never wrote a reward", verified.unread
    try:
        reward, metrics = parse_reward(verified.rewards.get("reward.json"), verified.rewards.get("reward.txt"))
    except ConflictingRewards as e:
        return 0.0, {}, str(e), verified.unread + [f"{VERIFIER_DIR}: {e}, neither read"]
    except RewardError as e:
        return 0.0, {}, str(e), verified.unread
    return reward, metrics, "", verified.unread


@dataclasses.dataclass(frozen=True)
class _Verified:
    """What test.sh left: its result, the reward files read, those not read, the witness's files."""

    result: ExecResult
    rewards: dict[str, bytes]
    unread: list[str]
    witnessed: tuple[str, ...] = ()


Outcome = tuple[AgentOutcome, _Verified, verifier.Crossing | None, bytes | None]
"""The agent's outcome, what test.sh left, what of the agent's crossed (None: artifacts only), its end state."""


async def _agent_then_verifier(sb: Sandbox, fresh: Sandbox, task: Task, agent: Agent, startup: str | None,
                               kind_paths: tuple[str, ...], *, keep: bool) -> Outcome:
    await _start_services(sb, startup)
    outcome = await _agents(sb, _agent_turn(sb, task, agent))
    await _agents(sb, _collect(sb, task))
    crossing, state = await _cross(sb, task, kind_paths, stop=True, keep=keep)
    with crossing.archive:
        # The agent's container is gone before the tests start: none of its processes reach them.
        await _all(sb.close(), verifier.restore(fresh, crossing))
    return outcome, await _verify(fresh, task, agent, crossing.roots), crossing, state


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
    return _scored(AgentOutcome(output="re-graded from the stored end state"), verified, crossing, state, t0)


async def _agent_then_separate_verifier(sb: Sandbox, fresh: Sandbox, task: Task, agent: Agent, startup: str | None,
                                        bundled_tests: bool) -> Outcome:
    await _start_services(sb, startup)
    outcome = await _agents(sb, _agent_turn(sb, task, agent))
    await _agents(sb, _collect(sb, task))
    await sb.stop()
    # Artifacts never land on the verifier's toolchain, tests or reward files.
    carried = await artifacts.collect(sb, artifacts.artifact_paths(task))
    await _all(sb.close(), artifacts.place(fresh, carried, None if bundled_tests else task.tests_dir))
    return outcome, await _verify(fresh, task, agent, []), None, None


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
    outcomes, results, per_step, errors, codes, dropped, links, unread = [], [], [], [], [], [], [], []
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
            reward, metrics, error, refused = _judged(verified)
            dropped += [f"step {step.name}: {d}" for d in crossing.dropped + refused]
            links += crossing.links
            unread += [f"step {step.name}: {d}" for d in refused]
            result = verified.result
            if error:
                metrics = {"reward": 0.0}
                errors.append(f"step {step.name}: {error}")
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
        links=tuple(links), unread=tuple(unread), witnessed=verified.witnessed,
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


CROSSED = "/aes/crossed-inodes"
"""``device:inode`` of every regular file in the result paths as they crossed, recorded by root
before test.sh (``_verify_script``): a reward file with one of these inodes is the agent's."""


def _verify_script(unset: list[str], roots: list[str]) -> str:
    """The inodes of the result paths' files recorded (``CROSSED``), then test.sh, after
    unsetting the variables root must not run with (``root_env``), then, when it has exited,
    every other process in the container is killed: the reward files are read as test.sh left
    them, with nothing left running to rewrite them. Without the record no reward file can be
    told from the agent's, so test.sh does not run."""
    drop = f"unset {' '.join(unset)}\n" if unset else ""
    # find's own -printf, not stat(1): gVisor (Debian's runsc) answers coreutils' statx with EINVAL.
    found = (f"find {' '.join(shlex.quote(r) for r in roots)} -xdev -type f -printf '%D:%i\\n' "
             f"> {CROSSED}.part 2>/dev/null && " if roots else f": > {CROSSED}.part && ")
    record = (f"mkdir -p {posixpath.dirname(CROSSED)} && rm -f {CROSSED} && {found}mv -f {CROSSED}.part {CROSSED} || "
              "{ echo 'aes: cannot record the inodes of the files in the result paths (find of the image)' >&2; "
              "exit 1; }\n")
    return f"{drop}{record}bash /tests/test.sh\nstatus=$?\n{KILL_ALL}\nexit $status\n"


REWARD_FILES = ("reward.json", "reward.txt")


async def _verify(fresh: Sandbox, task: Task, agent: Agent, roots: list[str]) -> _Verified:
    """test.sh as uid 0 (a number: no name is looked up) with root's environment (``root_env``), then the reward files it left and,
    for an agent with a ``witness`` folder (the tamper probe), what is in it in each result path."""
    cfg = task.config.verifier
    env, unset = root_env.environment(fresh.container.attrs["Config"].get("Env") or [], cfg.env, roots, VERIFIER_ENV)
    result = await fresh.exec(_verify_script(unset, roots), timeout=cfg.timeout_sec, user=0, env=env)
    rewards, unread = await read_rewards(fresh)
    witness = getattr(agent, "witness", None)  # only probes have one
    seen = [name for root in roots if witness for name in await fresh.get_files(f"{root}/{witness}")]
    return _Verified(result, rewards, unread, tuple(seen))


async def read_rewards(fresh: Sandbox) -> tuple[dict[str, bytes], list[str]]:
    """The reward files in /logs/verifier that the root test runner wrote, read through the engine,
    and why any other was not read. A reward file counts only if root created it while test.sh
    ran: a regular file owned by uid 0, with one link and an inode that did not cross with the
    agent's results (``_provenance``). So a file planted by a program the tests ran as another
    user, a link to elsewhere, or a root-owned file of the agent's hard-linked in never counts."""
    buf = io.BytesIO()
    if not await fresh.get_archive(VERIFIER_DIR + "/.", buf, 16 << 20):
        return {}, []
    buf.seek(0)
    rewards, unread = {}, []
    with tarfile.open(fileobj=buf) as tar:
        found = {name: m for m in tar if (name := m.name.removeprefix("./")) in REWARD_FILES}
        regular = [name for name, m in found.items() if m.isreg()]
        seen = await _provenance(fresh, regular) if regular else {}
        for name, m in found.items():
            path = f"{VERIFIER_DIR}/{name}"
            if not m.isreg():
                unread.append(f"{path}: not a regular file, not read")
                continue
            uid, links, inode = seen[name]
            if why := _not_roots(uid, links, inode):
                unread.append(f"{path}: {why}, not read")
            else:
                rewards[name] = tar.extractfile(m).read()
    return rewards, unread


def _not_roots(uid: int, links: int, inode: str) -> str:
    """Why a regular reward file is not one the root test runner created ("" if it is)."""
    if uid != 0:
        return f"written by uid {uid}, not the root test runner"
    if inode == "crossed":
        return "a file of the agent's results (its inode crossed with them), linked in"
    if links != 1:
        return f"a file with {links} links, one made before it (linked in), not the root test runner's"
    if inode != "new":
        return "the result paths' inodes went unrecorded, so who made it cannot be told"
    return ""


_STAT = ('for f in {names}; do p=/logs/verifier/$f; meta=$(find "$p" -maxdepth 0 -printf "%U %n") '
         '&& id=$(find "$p" -maxdepth 0 -printf %D:%i) '
         '|| exit 1; grep -qxF "$id" {crossed}; case $? in 0) w=crossed;; 1) w=new;; *) w=unrecorded;; esac; '
         'echo "$f $meta $w"; done')


async def _provenance(fresh: Sandbox, names: list[str]) -> dict[str, tuple[int, int, str]]:
    """``name -> (owner, links, new | crossed | unrecorded)`` of the reward files ``names``, from
    the image's stat once test.sh has ended and every other process was killed (nothing of the
    agent's runs, or ever ran as root, here). Owner and mode alone tell nothing of who wrote a
    file: the agent is root in its container, its results cross with their owners, and a
    program of its the tests run may hard-link a root-owned result it can read and write into a
    writable /logs/verifier (``fs.protected_hardlinks`` allows that), then unlink the original.
    Its inode is one that crossed, which root recorded before test.sh (``CROSSED``)."""
    r = await fresh.exec(_STAT.format(names=" ".join(names), crossed=CROSSED), timeout=60, user=0, workdir="/")
    seen = {}
    for line in r.output.splitlines():
        name, uid, links, inode = (line.split() + ["", "", "", ""])[:4]
        if name in names and uid.isdigit() and links.isdigit():
            seen[name] = (int(uid), int(links), inode)
    if r.exit_code != 0 or set(seen) != set(names):
        raise SandboxError(f"cannot stat the reward files {names} in the verifier's container: {r.output[-300:]}")
    return seen


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
