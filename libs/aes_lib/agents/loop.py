"""The terminal agent loop shared by the solver and the proposer.

The model sees a system prompt and the task, and acts through the episode's protocol
(``protocol.py``: one fenced shell command per reply, or native tool calls); each command
runs in a container through ``Shell.exec`` (or, for a harness tool, through the tool
handler), and its (truncated) output goes back as the protocol's result message. The loop
ends when the model says it is done, at the turn limit, the time limit, or a model failure.
Junk replies get a format-error message back and count against the turn budget; a reply the
engine cut at the token cap is told so instead (its call was lost to the cap, not to a format mistake).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Protocol

from aes_lib.agents.limits import LoopLimits, cut_notice
from aes_lib.agents.protocol import AgentProtocol, Call, FencedProtocol
from aes_proto.trajectory import Trajectory
from aes_lib.agents.trajectory import turn_from_chat
from aes_lib.models import ChatClient, ModelError
from aes_lib.text import truncate
from aes_lib.tools import ToolHandler


class ExecLike(Protocol):
    exit_code: int
    output: str
    timed_out: bool


class Shell(Protocol):
    """What the loop needs from a sandbox."""

    async def exec(self, cmd: str, timeout: float = ..., user: str | None = ...) -> ExecLike: ...


CHARS_PER_TOKEN = 3.0
"""Characters per token assumed before the first reply says how many tokens a prompt was (a
low guess: most tokenizers give 3.5-4.5 on English and code)."""
SHORTENED = 200
"""Characters of an old observation kept when the history must be cut to fit the context."""
SEED_RANGE = 2**31
"""Sampling seeds stay below this: every engine takes them (vLLM, torch, llama.cpp)."""


def _observation(exit_code: int, output: str, timed_out: bool, limit: int) -> str:
    status = "timed out" if timed_out else f"exit code {exit_code}"
    return f"[{status}]\n{truncate(output, limit)}"


Message = dict[str, Any]
_OBSERVATION_ROLES = ("user", "tool")


def _chars(messages: list[Message]) -> int:
    return sum(len(m.get("content") or "") + len(str(m.get("tool_calls") or "")) for m in messages)


def fit(head: list[Message], exchanges: list[list[Message]], limits: LoopLimits,
        chars_per_token: float = CHARS_PER_TOKEN) -> list[Message]:
    """The exchanges to re-send after ``head`` so the prompt fits ``limits.context_tokens`` with
    a reply's worth to spare: the oldest observations shortened first, then the oldest exchanges
    dropped; the last exchange stays whole."""
    window = [list(ex) for ex in exchanges]
    if not limits.context_tokens:
        return [m for ex in window for m in ex]
    budget = (limits.context_tokens - limits.max_tokens) * chars_per_token - _chars(head)
    size = sum(_chars(ex) for ex in window)
    for ex in window[:-1]:
        for i, obs in enumerate(ex):
            if size <= budget:
                break
            if obs["role"] in _OBSERVATION_ROLES and len(obs["content"]) > SHORTENED:
                short = obs["content"][:SHORTENED] + f"\n[... {len(obs['content']) - SHORTENED} characters not re-sent]"
                size -= len(obs["content"]) - len(short)
                ex[i] = {**obs, "content": short}
    while size > budget and len(window) > 1:
        size -= _chars(window.pop(0))
    return [m for ex in window for m in ex]


@dataclass
class _Outcome:
    """What running one call gave."""

    observation: str
    exit_code: int | None = None
    timed_out: bool = False
    tool: bool = False
    submitted: bool = False


async def _run(call: Call, shell: Shell, tools: ToolHandler | None, limits: LoopLimits) -> _Outcome:
    """A call's command: a harness tool's handler serves it, else the shell runs it."""
    tool = await tools(call.command) if tools else None
    if tool is not None:
        return _Outcome(_observation(tool.exit_code, tool.output, False, limits.max_output_chars), tool.exit_code,
                        tool=True, submitted=tool.submitted)
    r = await shell.exec(call.command, timeout=limits.command_timeout_s)
    return _Outcome(_observation(r.exit_code, r.output, r.timed_out, limits.max_output_chars), r.exit_code,
                    r.timed_out, submitted=getattr(r, "submitted", False))  # a tool inside the command submitted


async def run_loop(
    client: ChatClient,
    shell: Shell,
    traj: Trajectory,
    limits: LoopLimits,
    tools: ToolHandler | None = None,
    protocol: AgentProtocol | None = None,
) -> Trajectory:
    """Drive the conversation in ``traj.messages`` (system + task already there) to an end;
    ``protocol``: how replies become calls (default: fenced commands)."""
    protocol = protocol or FencedProtocol()
    if served := await client.context_window():  # the server's window binds where it is the smaller
        limits = dataclasses.replace(limits, context_tokens=min(limits.context_tokens or served, served))
    head = list(traj.messages)
    exchanges: list[list[Message]] = []
    chars_per_token = CHARS_PER_TOKEN
    start = time.monotonic()
    traj.started_at = traj.started_at or time.time()
    traj.stop_reason = "turn_limit"
    for index in range(limits.max_turns):
        if time.monotonic() - start > limits.time_limit_s:
            traj.stop_reason = "time_limit"
            break
        window = fit(head, exchanges[-limits.history_turns:] if limits.history_turns else exchanges, limits,
                     chars_per_token)
        try:
            seed = None if limits.seed is None else (limits.seed + index) % SEED_RANGE
            chat = await client.chat(head + window, max_tokens=limits.max_tokens, temperature=limits.temperature,
                                     seed=seed, **protocol.request())
        except ModelError as e:
            traj.stop_reason, traj.error = "model_error", str(e)
            break
        if chat.prompt_tokens:  # how this model's tokenizer counts what was sent
            chars_per_token = max(1.0, _chars(head + window) / chat.prompt_tokens)
        turn = turn_from_chat(index, chat)
        traj.turns.append(turn)
        traj.prompt_tokens += chat.prompt_tokens
        traj.completion_tokens += chat.completion_tokens
        traj.cost_usd += chat.cost_usd
        reply = protocol.parse(chat.text, chat.tool_calls)
        traj.messages.append(reply.message)
        exchange = [reply.message]
        commands, observations = [], []
        done = submitted = False
        t0 = time.monotonic()
        for call in reply.calls:  # in order, until one ends the episode
            if call.done:
                done = True
                break
            if call.error:
                turn.format_error = True
                observation = call.error if chat.finish_reason != "length" else cut_notice(
                    limits.max_tokens, "Send a shorter reply: one command, with little or no text around it.")
            else:
                out = await _run(call, shell, tools, limits)
                commands.append(call.command)
                turn.exit_code, turn.timed_out, submitted = out.exit_code, out.timed_out, out.submitted
                turn.tool = turn.tool or out.tool
                observation = out.observation
            observations.append(observation)
            message = protocol.result(call, observation)
            traj.messages.append(message)
            exchange.append(message)
            if submitted:
                break
        turn.command, turn.output = "\n".join(commands), "\n".join(observations)
        turn.exec_seconds = time.monotonic() - t0 if commands else 0.0
        traj.format_errors += turn.format_error
        if done or submitted:
            traj.stop_reason = "done" if done else "submitted"
            break
        exchanges.append(exchange)
    traj.agent_seconds = time.monotonic() - start
    return traj
