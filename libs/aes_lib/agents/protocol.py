"""The agent protocol: how a model's reply becomes actions, and how an action's result goes back.

The loop (``loop.py``) sees only this boundary: ``request`` (what each chat call adds),
``parse`` (a reply to the assistant message re-sent and the calls it asks for) and ``result``
(one call's output to the message that carries it back). Two protocols, chosen per run
(``LoopLimits.protocol``, ``aes_lib.tools.AGENT_PROTOCOLS``):

- ``fenced`` (the default): one shell command in a fenced block per reply, or the done marker;
  the output comes back as a user message.
- ``tools``: native tool calls (the OpenAI ``tools`` interface): ``bash`` runs one shell line,
  ``finish`` ends the episode, and each harness tool of the episode (``aes_lib.tools.ToolSpec``:
  ``aes_tool``, ``ask_human``) is a function of its own; each call's output comes back as a
  ``tool`` message with the call's id. A harness tool's call becomes the command line it stands
  for, so both protocols reach the harness through the same handler.

A bad call (unknown tool, arguments that are not a JSON object of the declared fields) is
answered with a message that says what was wrong and how to call instead; nothing raises.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from aes_lib.agents.parse import DONE_MARKER, parse_action
from aes_lib.tools import AGENT_PROTOCOLS, ToolSpec

TOOL_CHOICES: tuple[str, ...] = ("auto", "required")
"""``auto``: the model may answer in prose (a format error); ``required``: the engine makes every
reply a call (vLLM through guided decoding); a tool's name: every reply calls that tool. Under
guided decoding the engine reports the log-probs of the constrained distribution (a forced token
has log-prob 0), which the trainer's unconstrained model does not reproduce: ``auto`` samples
the policy itself and is the one to train with."""
FINISH = "finish"
SHOWN = 200
"""Characters of a malformed call's arguments quoted back to the model."""


class ProtocolError(ValueError):
    """A protocol name or tool choice nothing implements."""


@dataclass(frozen=True)
class Call:
    """One action a reply asks for: exactly one of ``command``, ``done`` or ``error``."""

    command: str = ""
    done: bool = False
    error: str = ""
    """Why the call is no action (sent back to the model as a format error)."""
    id: str = ""
    """The tool call's id (``tools``), which its result message names."""


@dataclass(frozen=True)
class Reply:
    message: dict[str, Any]
    """The assistant message as it is re-sent in later turns."""
    calls: tuple[Call, ...]
    """In the order the reply made them; at least one."""


class AgentProtocol(Protocol):
    name: str
    instructions: str
    """The system prompt's part that says how to act, and how to end."""

    def request(self) -> dict[str, Any]:
        """What each chat call adds to the request (``tools``, ``tool_choice``)."""

    def parse(self, text: str, tool_calls: list[dict[str, Any]]) -> Reply:
        """A reply (its text and the engine's parsed tool calls) as actions."""

    def result(self, call: Call, output: str) -> dict[str, Any]:
        """The message that carries ``output`` of ``call`` back to the model."""


class FencedProtocol:
    """One shell command in a fenced block per reply (``parse.parse_action``)."""

    name = "fenced"
    instructions = f"""Each reply must contain exactly one shell command in a fenced block, like:

```bash
ls -la
```

You will see the command's exit code and output, then send the next command.
Commands run in bash, non-interactively: do not start editors or prompts.
When the task is complete, reply with {DONE_MARKER}."""

    def request(self) -> dict[str, Any]:
        return {}

    def parse(self, text: str, tool_calls: list[dict[str, Any]]) -> Reply:
        a = parse_action(text)
        return Reply({"role": "assistant", "content": text}, (Call(a.command, a.done, a.error),))

    def result(self, call: Call, output: str) -> dict[str, Any]:
        return {"role": "user", "content": output}


SHELL = ToolSpec(
    name="bash",
    description="Run one shell line in the container (bash, non-interactive) and see its exit code and output.",
    parameters={"type": "object", "properties": {"command": {"type": "string", "description": "the shell line"}},
                "required": ["command"]},
    command=lambda args: args["command"],
)
_FINISH = ToolSpec(FINISH, "End the episode: the task is complete.", {"type": "object", "properties": {}, "required": []},
                   command=lambda args: "")
_JSON_TYPES: dict[str, type | tuple[type, ...]] = {"string": str, "integer": int, "boolean": bool,
                                                   "number": (int, float), "null": type(None)}


class ToolCallProtocol:
    """Native tool calls: ``bash``, ``finish`` and the episode's harness tools."""

    name = "tools"

    def __init__(self, specs: Iterable[ToolSpec] = (), tool_choice: str = "auto") -> None:
        self.specs = {s.name: s for s in (SHELL, *specs)}
        if tool_choice not in (*TOOL_CHOICES, *self.specs, FINISH):
            raise ProtocolError(f"tool choice {tool_choice!r}: expected one of {TOOL_CHOICES} or a tool's name")
        self.tool_choice: str | dict[str, Any] = tool_choice if tool_choice in TOOL_CHOICES else \
            {"type": "function", "function": {"name": tool_choice}}
        self._tools = [s.definition() for s in (*self.specs.values(), _FINISH)]
        names = ", ".join(f"`{n}`" for n in (*self.specs, FINISH))
        self.instructions = f"""Act through the tools ({names}): each call to `bash` runs one shell line.
You will see each call's exit code and output, then make the next call.
Commands run in bash, non-interactively: do not start editors or prompts.
When the task is complete, call `{FINISH}`."""
        self._help = f"Call one of the tools ({names}) with a JSON object of its parameters; call `{FINISH}` when done."

    def request(self) -> dict[str, Any]:
        return {"tools": self._tools, "tool_choice": self.tool_choice}

    def parse(self, text: str, tool_calls: list[dict[str, Any]]) -> Reply:
        if not tool_calls:
            return Reply({"role": "assistant", "content": text},
                         (Call(error=f"No tool call found in your reply.\n{self._help}"),))
        calls: list[Call] = []
        sent: list[dict[str, Any]] = []
        for i, raw in enumerate(tool_calls):
            call, name, arguments = self._call(i, raw)
            calls.append(call)
            sent.append({"id": call.id, "type": "function", "function": {"name": name, "arguments": arguments}})
        return Reply({"role": "assistant", "content": text, "tool_calls": sent}, tuple(calls))

    def result(self, call: Call, output: str) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": call.id, "content": output}

    def _call(self, i: int, raw: object) -> tuple[Call, str, str]:
        """The call, and its name and arguments as re-sent (arguments that are no JSON object are
        re-sent as ``{}``: chat templates parse them, and the error message quotes them)."""
        raw = raw if isinstance(raw, Mapping) else {}
        cid = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else f"call_{i}"
        fn = raw.get("function") if isinstance(raw.get("function"), Mapping) else {}
        name = fn.get("name") if isinstance(fn.get("name"), str) else ""
        text = fn.get("arguments", "")
        if not name:
            return Call(error=f"Tool call {i + 1} names no tool.\n{self._help}", id=cid), "", "{}"
        if name != FINISH and name not in self.specs:
            return Call(error=f"Unknown tool {name[:64]!r}.\n{self._help}", id=cid), name, "{}"
        args: object = dict(text) if isinstance(text, Mapping) else {} if text is None else text
        if isinstance(text, str):
            try:
                args = json.loads(text) if text.strip() else {}
            except json.JSONDecodeError as e:
                return Call(error=f"The arguments of `{name}` are not valid JSON ({e.msg} at character {e.pos}): "
                                  f"{text[:SHOWN]!r}.\n{self._help}", id=cid), name, "{}"
        if name == FINISH:
            return Call(done=True, id=cid), name, "{}"
        spec = self.specs[name]
        problem = _check(args, spec.parameters)
        if problem:
            return Call(error=f"Bad arguments for `{name}`: {problem}.\n{self._help}", id=cid), name, \
                json.dumps(args) if isinstance(args, dict) else "{}"
        assert isinstance(args, dict)
        return Call(command=spec.command(args), id=cid), name, json.dumps(args)


def _types(prop: Mapping[str, Any]) -> list[str]:
    t = prop.get("type", [])
    return [t] if isinstance(t, str) else list(t)


def _check(args: object, schema: Mapping[str, Any]) -> str:
    """What is wrong with ``args`` for ``schema`` (an object of typed fields); empty when nothing."""
    if not isinstance(args, dict):
        return f"expected a JSON object, got {_json_type(args)}"
    props: Mapping[str, Any] = schema.get("properties", {})
    fields = ", ".join(f"{k} ({'/'.join(_types(p))})" for k, p in props.items()) or "none"
    missing = [k for k in schema.get("required", ()) if k not in args]
    if missing:
        return f"missing {', '.join(missing)} (fields: {fields})"
    for k, v in args.items():
        if k not in props:
            return f"unknown field {k[:64]!r} (fields: {fields})"
        types = _types(props[k])
        if types and not any(isinstance(v, _JSON_TYPES[t]) and (t == "boolean" or not isinstance(v, bool))
                             for t in types if t in _JSON_TYPES):
            return f"{k} must be {' or '.join(types)}, got {_json_type(v)}"
        if "enum" in props[k] and v not in props[k]["enum"]:
            return f"{k} must be one of {props[k]['enum']}, got {str(v)[:64]!r}"
    return ""


def _json_type(v: object) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object",
            type(None): "null"}.get(type(v), type(v).__name__)


def make_protocol(name: str, specs: Iterable[ToolSpec] = (), tool_choice: str = "auto") -> AgentProtocol:
    """The protocol ``name`` for an episode whose harness tools are ``specs``."""
    if name == "fenced":
        return FencedProtocol()
    if name == "tools":
        return ToolCallProtocol(specs, tool_choice)
    raise ProtocolError(f"agent protocol {name!r}: expected one of {AGENT_PROTOCOLS}")
