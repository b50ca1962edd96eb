"""Harness-side tools the proposer calls as ``aes-tool <name> <dir> [k]``.

They run OUTSIDE the proposer's container: the harness copies the named task
directory out of the container and uses the sandbox layer (child containers) to
build, check, or run the solver on it. The container never sees the Docker socket.
A reply that is one ``aes-tool`` command is served directly; anywhere else in a shell line
``aes-tool`` is an executable in the container that reaches these tools through the harness
(``aes_lib.agents.bridge``).
"""

from __future__ import annotations

import asyncio
import posixpath
import shlex
import shutil
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from aes_lib.agents.bridge import BridgedShell
from aes_lib.agents.loop import LoopLimits
from aes_lib.bundle import BundleError, PackedBundle, Task, pack
from aes_lib.models import ChatClient
from aes_lib.domains.validation import validate_in_domain
from aes_lib.sandbox import BuildFailedError
from aes_lib.sandbox.strength import StrengthSettings, check_strength
from aes_lib.tools import ToolResult, ToolSpec

PREFIX = "aes-tool"
USAGE = (
    "usage: aes-tool build <dir> | aes-tool check <dir> | aes-tool solver <dir> <k> | aes-tool submit <dir>\n"
    "(<dir>: a task directory in the workspace, relative to the current directory)"
)
WORKSPACE = "/workspace"
"""The proposer's workspace in its container: tool directories must lie in it."""
_SHELL_META = set(";&|<>`$(){}\n")

SPEC = ToolSpec(
    name="aes_tool",
    description=f"The harness tools: build, check, run the solver on, or submit a task directory. {USAGE}",
    parameters={"type": "object", "properties": {
        "action": {"type": "string", "enum": ["build", "check", "solver", "submit"]},
        "dir": {"type": "string", "description": "a task directory in the workspace"},
        "k": {"type": ["integer", "null"], "description": "solver attempts (action solver only, else null)"}},
        "required": ["action", "dir", "k"]},
    command=lambda a: shlex.join([PREFIX, a["action"], a["dir"], *([str(a["k"])] if a["k"] is not None else [])]),
)
"""``aes-tool`` as a native tool call: the same command line, served the same way."""

FetchDir = Callable[[str, Path], Awaitable[None]]
"""Copies a workspace-relative directory out of the proposer's container into a local path."""


@dataclass(frozen=True)
class ToolBudget:
    """Limits of the harness tools within one episode."""

    max_solver_k: int = 4
    """Most solver attempts one ``aes-tool solver`` call may ask for."""
    max_solver_calls: int = 2
    """``aes-tool solver`` calls per episode (each costs k full rollouts)."""
    solver_limits: LoopLimits = LoopLimits(max_turns=10, time_limit_s=300.0)
    """Budgets of each solver attempt the tool runs."""

    def prompt(self) -> str:
        """The budgets as the proposer's prompt states them (a model should not learn them by
        having a call refused)."""
        return (f"`aes-tool solver <dir> <k>` takes k from 1 to {self.max_solver_k}, at most {self.max_solver_calls} "
                f"calls per episode; each attempt has {self.solver_limits.max_turns} turns and "
                f"{self.solver_limits.time_limit_s:g} s. build, check and submit have no budget of their own.")


@dataclass
class ToolCall:
    """A record of one tool call, kept with the proposer's trajectory."""

    name: str
    dir: str
    exit_code: int
    summary: str


@dataclass
class Submission:
    task: Task
    packed: PackedBundle
    dir: str


@dataclass
class ProposerTools:
    """``await tools(command)``: a ToolResult for ``aes-tool`` commands, None for others."""

    specs = (SPEC,)
    fetch_dir: FetchDir
    images: object
    """The sandbox's ImageCache."""
    store: object
    solver_client: ChatClient | None
    budget: ToolBudget = field(default_factory=ToolBudget)
    calls: list[ToolCall] = field(default_factory=list)
    submission: Submission | None = None
    _solver_calls: int = 0
    _scratch: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="aes-proposer-tools-")))

    def close(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)

    async def __call__(self, command: str) -> ToolResult | None:
        """A reply that is one ``aes-tool`` command, served here; None for anything else (a shell
        line that uses ``aes-tool`` among other commands runs in the container, through the bridge)."""
        if not command.strip().startswith(PREFIX) or _SHELL_META & set(command.strip()):
            return None
        try:
            argv = shlex.split(command)
        except ValueError as e:
            return self._done("?", "", ToolResult(2, f"cannot parse command: {e}\n{USAGE}"))
        if argv[0] != PREFIX:
            return None
        return await self.call(argv[1:])

    async def call(self, args: list[str], cwd: str = WORKSPACE) -> ToolResult:
        """``aes-tool ARGS`` called in ``cwd``: the tool's result (a usage error for bad arguments)."""
        if len(args) < 2:
            return self._done("?", "", ToolResult(2, USAGE))
        name, rel = args[0], posixpath.normpath(posixpath.join(cwd or WORKSPACE, args[1]))
        handler = {"build": self._build, "check": self._check, "solver": self._solver, "submit": self._submit}.get(name)
        if handler is None:
            return self._done(name, rel, ToolResult(2, f"unknown tool {name!r}\n{USAGE}"))
        try:
            rel = _relative(rel)
            task = await self._load(rel)
            result = await handler(task, rel, args[2:])
        except (BundleError, ToolInputError) as e:
            result = ToolResult(1, f"{type(e).__name__}: {e}")
        return self._done(name, rel, result)

    def shell(self, sandbox, tool_time_s: float) -> BridgedShell:
        """``sandbox`` as the loop's shell, with ``aes-tool`` an executable in it that reaches these tools."""
        return BridgedShell(sandbox, (PREFIX,), lambda argv, cwd: self.call(argv[1:], cwd), tool_time_s,
                            submitted=lambda: self.submission is not None)

    def _done(self, name: str, rel: str, result: ToolResult) -> ToolResult:
        self.calls.append(ToolCall(name, rel, result.exit_code, result.output.splitlines()[0] if result.output else ""))
        return result

    async def _load(self, rel: str) -> Task:
        local = self._scratch / uuid.uuid4().hex
        await self.fetch_dir(rel, local)
        return await asyncio.to_thread(Task.load, local)

    async def _build(self, task: Task, rel: str, rest: list[str]) -> ToolResult:
        try:
            tag = await self.images.build(task)
        except BuildFailedError as e:
            return ToolResult(1, f"build failed: {e}\n{e.log}")
        return ToolResult(0, f"build ok: image {tag}")

    async def _check(self, task: Task, rel: str, rest: list[str]) -> ToolResult:
        report = await validate_in_domain(task.root, self.images)
        lines = [
            f"valid: {report.ok} ({report.reason})",
            f"oracle reward: {report.oracle_reward}",
            f"empty-solution reward: {report.nop_reward}",
        ]
        lines += [f"the empty solution passes {t}" for t in report.nop_passes]
        lines += [f"the reference solution fails {t}" for t in report.oracle_fails]
        if report.detail:
            lines.append(report.detail)
        if not report.ok and report.logs:
            lines.append(report.logs)
        lines += [f"warning: {w}" for w in report.warnings]
        ok = report.ok
        if ok and not report.no_reference:  # admission's next gate: wrong solutions the tests must fail
            strength = await check_strength(task, self.images, max_mutants=StrengthSettings.from_env().max_mutants)
            ok = strength.ok
            lines.append(f"verifier strength: {strength.reason}: {strength.detail}")
            lines += [f"wrong solution {t.what}: reward {t.reward:g}" for t in (*strength.near_misses, *strength.mutants)]
        return ToolResult(0 if ok else 1, "\n".join(lines))

    async def _solver(self, task: Task, rel: str, rest: list[str]) -> ToolResult:
        from aes_lib.agents.solver import SolverModelFault, run_rollouts

        if self.solver_client is None:
            return ToolResult(1, "no solver model is configured for this episode")
        if len(rest) != 1 or not rest[0].isdigit() or not 1 <= int(rest[0]) <= self.budget.max_solver_k:
            return ToolResult(2, f"k must be an integer in 1..{self.budget.max_solver_k}\n{USAGE}")
        if self._solver_calls >= self.budget.max_solver_calls:
            return ToolResult(1, f"solver budget spent ({self.budget.max_solver_calls} calls per episode)")
        k = int(rest[0])
        try:
            done = await run_rollouts(
                [(task, f"draft:{rel}")] * k, self.solver_client, self.images, self.store, self.budget.solver_limits
            )
        except SolverModelFault as e:  # the endpoint's fault measures nothing: the call is not spent
            return ToolResult(1, f"the solver's model endpoint failed, no rewards measured (not counted): {e}")
        self._solver_calls += 1
        rewards = [r.trajectory.reward for r in done]
        lines = [f"solver rewards: {rewards}", f"mean: {sum(rewards) / k:.3f}"]
        for r in done:
            lines.append(f"- reward {r.trajectory.reward}: {r.trajectory.stop_reason}, {len(r.trajectory.turns)} turns")
        return ToolResult(0, "\n".join(lines))

    async def _submit(self, task: Task, rel: str, rest: list[str]) -> ToolResult:
        if self.submission is not None:  # e.g. a second submit later in the same shell line
            return ToolResult(1, f"already submitted {self.submission.dir}: an episode submits once")
        packed = await asyncio.to_thread(pack, task.root)
        self.submission = Submission(task=task, packed=packed, dir=rel)
        return ToolResult(0, f"submitted {rel} as environment {packed.sha256[:16]}", submitted=True)


class ToolInputError(ValueError):
    """A tool argument is not a workspace-relative directory."""


def _relative(rel: str) -> str:
    p = PurePosixPath(rel)
    if p.is_absolute():
        parts = p.parts
        if parts[:2] != ("/", "workspace"):
            raise ToolInputError(f"{rel!r} is outside the workspace")
        p = PurePosixPath(*parts[2:]) if len(parts) > 2 else PurePosixPath(".")
    if ".." in p.parts:
        raise ToolInputError(f"{rel!r} leaves the workspace")
    return str(p)
