"""One proposer episode: workspace in, candidate task (or a recorded failure) out.

The proposer model drives a terminal loop whose commands run in its own
container (no network, no Docker socket) holding the workspace at /workspace.
``aes-tool`` commands are run by the harness outside that container (see
``tools.py``). The episode ends at ``aes-tool submit``, the done marker, or the
turn/time budget. memory/ and tools/ are copied back out and persisted.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

from aes_lib.agents.loop import LoopLimits, run_loop
from aes_lib.agents.parse import DONE_MARKER
from aes_lib.agents.protocol import FINISH, make_protocol
from aes_lib.agents.bridge import BridgedShell
from aes_lib.agents.proposer.proposal import Proposal
from aes_lib.agents.proposer.tools import WORKSPACE, ProposerTools, ToolBudget, ToolInputError
from aes_lib.agents.proposer.workspace import (
    PERSISTENT,
    PastEnvironment,
    StateTooLargeError,
    build_workspace,
    save_state,
)
from aes_lib.agents.trajectory import store_trajectory
from aes_lib.models import ChatClient
from aes_lib.sandbox.container import Limits, Sandbox
from aes_proto.messages import Assignment
from aes_proto.trajectory import Trajectory


_SYSTEM_PROMPT = """You design tasks (training environments) for a terminal agent. You work in a Linux
container; your workspace is {workspace} (the current directory). {act}
The harness tools are the command `aes-tool`, alone or anywhere in a shell line: `aes-tool build <dir>`,
`aes-tool check <dir>`, `aes-tool solver <dir> <k>`, `aes-tool submit <dir>`.{native}
Budgets: {budgets}
Submitting ends the episode. {give_up}"""
_FENCED = """Each reply must contain exactly one
shell command in a fenced block:

```bash
cat assignment.md
```

You will see its exit code and output."""
_TOOLS = """Call the `bash` tool with one shell line per call
(`cat assignment.md`); you will see its exit code and output."""


def system_prompt(budget: "EpisodeBudget") -> str:
    """The proposer's system prompt under its protocol, with every budget of its episode: a model
    should not learn them by running into them."""
    tools = budget.loop.protocol == "tools"
    return _SYSTEM_PROMPT.format(
        workspace=WORKSPACE, act=_TOOLS if tools else _FENCED,
        native=" The `aes_tool` tool calls the same tools." if tools else "",
        budgets=f"{budget.loop.prompt()} {budget.tools.prompt()}",
        give_up=f"Call `{FINISH}` to give up without submitting." if tools else
        f"Reply {DONE_MARKER} to give up without submitting.")


@dataclass(frozen=True)
class EpisodeBudget:
    """Budgets and container of one proposer episode."""

    loop: LoopLimits = LoopLimits(max_turns=40, time_limit_s=1800.0, command_timeout_s=120.0,
                                  max_output_chars=2500, max_tokens=1024, history_turns=3, context_tokens=8192)
    """Turns, wall time, per-command timeout, output size and re-sent history of the proposer's
    loop (sized so the local model's 8192-token context holds instructions + 3 exchanges)."""
    tools: ToolBudget = field(default_factory=ToolBudget)
    """Limits of the harness tools."""
    image: str = "aes-base:latest"
    """Image of the proposer's own container (python3, git, pytest; no network)."""
    cpus: float = 1.0
    """CPU quota of the proposer's container."""
    memory_mb: int = 1024
    """Memory limit of the proposer's container."""

    def with_loop(self, **changes: object) -> "EpisodeBudget":
        """This budget with some of the loop's limits changed (``max_turns=...``)."""
        return replace(self, loop=replace(self.loop, **changes))


def first_message(workspace: Path) -> str:
    return (
        (workspace / "instructions.md").read_text()
        + "\n\n"
        + (workspace / "assignment.md").read_text()
        + "\nStart by looking at your workspace."
    )


async def run_episode(
    assignment: Assignment,
    client: ChatClient,
    solver_client: ChatClient | None,
    images,
    store,
    *,
    past: list[PastEnvironment],
    state_file: Path,
    budget: EpisodeBudget = EpisodeBudget(),
    docker_client=None,
) -> Proposal:
    traj = Trajectory(rollout_id=uuid.uuid4().hex, role="proposer", env_id=assignment.lineage.parent_env_id or "",
                      model=client.model)
    with tempfile.TemporaryDirectory(prefix="aes-proposer-") as tmp:
        ws = await asyncio.to_thread(build_workspace, Path(tmp) / "ws", assignment, store, past, state_file)
        traj.instruction = first_message(ws)
        traj.messages = [{"role": "system", "content": system_prompt(budget)},
                         {"role": "user", "content": traj.instruction}]
        limits = Limits(cpus=budget.cpus, memory_mb=budget.memory_mb, network=False)
        labels = {"aes.role": "proposer", "aes.episode": assignment.episode_id}
        async with Sandbox.start(budget.image, limits, client=docker_client, labels=labels, workdir=WORKSPACE) as sb:
            await sb.put_dir(ws, WORKSPACE)

            async def fetch_dir(rel: str, local: Path) -> None:
                if not await sb.get_dir(f"{WORKSPACE}/{rel}", local):
                    raise ToolInputError(f"no directory {rel!r} in the workspace")

            tools = ProposerTools(fetch_dir=fetch_dir, images=images, store=store,
                                  solver_client=solver_client, budget=budget.tools)
            shell = tools.shell(sb, tool_time_s=budget.loop.time_limit_s)
            try:
                await shell.install()
                protocol = make_protocol(budget.loop.protocol, tools.specs, budget.loop.tool_choice)
                await run_loop(client, shell, traj, budget.loop, tools, protocol)
            finally:
                tools.close()
            back = Path(tmp) / "back"
            for name in PERSISTENT:
                await sb.get_dir(f"{WORKSPACE}/{name}", back / name)
        try:
            await asyncio.to_thread(save_state, state_file, back)
        except StateTooLargeError as e:  # keep the episode's outcome; lose only the notes
            traj.error = str(e)
    ref = await asyncio.to_thread(store_trajectory, store, traj)
    packed = tools.submission.packed if tools.submission else None
    return Proposal(traj, ref, packed, failure="" if packed else "no_submission")
