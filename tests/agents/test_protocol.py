"""The agent protocols (``aes_lib.agents.protocol``): hostile model output gets a clear message back,
never an exception; the tool-call protocol runs every call of a reply in a real container."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from replay_server import ReplayServer

from aes_lib.agents.loop import LoopLimits, run_loop
from aes_lib.agents.proposer.tools import SPEC as AES_TOOL
from aes_lib.agents.protocol import FencedProtocol, ProtocolError, ToolCallProtocol, make_protocol
from aes_lib.agents.solver import SYSTEM_PROMPT, SolverAgent, solver_limits, system_prompt
from aes_lib.flywheel.config import FlywheelConfig, FlywheelConfigError
from aes_lib.models import ChatClient
from aes_lib.sandbox.container import Limits, Sandbox
from aes_lib.tools import ToolResult

from aes_domains.ask_human.tool import SPEC as ASK_HUMAN
from aes_ops import exports
from aes_proto.messages import BlobRef, TrajectoryRef
from aes_proto.trajectory import Trajectory, decode_trajectory, encode_trajectory


def call(name: str, arguments: object, cid: str = "c1") -> dict:
    return {"id": cid, "type": "function",
            "function": {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}}


PROTOCOL = ToolCallProtocol([ASK_HUMAN, AES_TOOL])


def test_calls_become_the_command_lines_they_stand_for():
    reply = PROTOCOL.parse("", [call("bash", {"command": "ls -la /tmp"}, "a"),
                                call("ask_human", {"question": "which port's free?"}, "b"),
                                call("aes_tool", {"action": "solver", "dir": "task one", "k": 2}, "c"),
                                call("aes_tool", {"action": "check", "dir": "t", "k": None}, "d"),
                                call("finish", "", "e")])
    assert [(c.id, c.command, c.done, c.error) for c in reply.calls] == [
        ("a", "ls -la /tmp", False, ""), ("b", "ask_human 'which port'\"'\"'s free?'", False, ""),
        ("c", "aes-tool solver 'task one' 2", False, ""), ("d", "aes-tool check t", False, ""), ("e", "", True, "")]
    assert [t["function"]["name"] for t in reply.message["tool_calls"]] == ["bash", "ask_human", "aes_tool",
                                                                            "aes_tool", "finish"]
    assert PROTOCOL.result(reply.calls[0], "out") == {"role": "tool", "tool_call_id": "a", "content": "out"}
    tools = PROTOCOL.request()["tools"]
    assert [t["function"]["name"] for t in tools] == ["bash", "ask_human", "aes_tool", "finish"]
    assert all(t["function"]["strict"] and t["function"]["parameters"]["additionalProperties"] is False
               and set(t["function"]["parameters"]["required"]) == set(t["function"]["parameters"]["properties"])
               for t in tools if t["function"]["name"] != "finish")
    assert PROTOCOL.request()["tool_choice"] == "auto"


@pytest.mark.parametrize(("raw", "says"), [
    (call("bash", '{"command": "ls"'), "The arguments of `bash` are not valid JSON (Expecting ',' delimiter"),
    (call("bash", "ls -la"), "The arguments of `bash` are not valid JSON (Expecting value at character 0): 'ls -la'"),
    (call("rm_everything", {"path": "/"}), "Unknown tool 'rm_everything'"),
    (call("bash", {}), "Bad arguments for `bash`: missing command (fields: command (string))"),
    (call("bash", {"command": 7}), "Bad arguments for `bash`: command must be string, got integer"),
    (call("bash", {"command": "ls", "sudo": True}), "Bad arguments for `bash`: unknown field 'sudo'"),
    (call("bash", ["ls"]), "Bad arguments for `bash`: expected a JSON object, got array"),
    (call("aes_tool", {"action": "deploy", "dir": "t", "k": None}),
     "action must be one of ['build', 'check', 'solver', 'submit']"),
    (call("aes_tool", {"action": "build", "dir": "t"}), "missing k (fields: action (string), dir (string), k (integer/null))"),
    (call("aes_tool", {"action": "solver", "dir": "t", "k": "2"}), "k must be integer or null, got string"),
    (call("aes_tool", {"action": "solver", "dir": "t", "k": True}), "k must be integer or null, got boolean"),
    ({"id": "c1", "type": "function", "function": {"name": "bash", "arguments": 5}},
     "Bad arguments for `bash`: expected a JSON object, got integer"),
    ({"id": "c1", "function": {"arguments": "{}"}}, "Tool call 1 names no tool"),
    ("not a call", "Tool call 1 names no tool"),
    ({"id": "c1", "function": "bash"}, "Tool call 1 names no tool"),
])
def test_a_hostile_call_gets_a_clear_error_and_valid_json_is_resent(raw, says):
    reply = PROTOCOL.parse("", [raw])
    (c,) = reply.calls
    assert says in c.error and "Call one of the tools (`bash`, `ask_human`, `aes_tool`, `finish`)" in c.error
    assert not c.command and not c.done
    # what goes back to the engine parses (chat templates load the arguments as JSON)
    assert isinstance(json.loads(reply.message["tool_calls"][0]["function"]["arguments"]), dict)
    assert PROTOCOL.result(c, c.error)["tool_call_id"] == (raw.get("id") if isinstance(raw, dict) else "call_0")


def test_a_reply_without_a_call_is_a_format_error_and_ids_are_made_when_missing():
    (c,) = PROTOCOL.parse("I think I'm done.", []).calls
    assert c.error.startswith("No tool call found in your reply.")
    reply = PROTOCOL.parse("", [{"function": {"name": "bash", "arguments": {"command": "pwd"}}},
                                {"id": "", "function": {"name": "bash", "arguments": '{"command": "id"}'}}])
    assert [c.id for c in reply.calls] == ["call_0", "call_1"]
    assert [t["id"] for t in reply.message["tool_calls"]] == ["call_0", "call_1"]
    assert [c.command for c in reply.calls] == ["pwd", "id"]


def test_the_solver_prompt_states_every_configured_limit():
    """Each limit that can cut an attempt is in the system prompt, from the settings in force:
    a solver should not learn them by running into them."""
    def prompt(config: FlywheelConfig) -> str:
        limits = solver_limits(config, time_limit_s=250.0, command_timeout_s=45.0, max_output_chars=1200)
        return SolverAgent(ChatClient("http://127.0.0.1:9", "m"), limits, rollout_id="r").system

    text = prompt(FlywheelConfig(solver_max_turns=7, solver_max_tokens=333, solver_history_turns=4,
                                 solver_context_tokens=5000))
    for stated in ("7 replies", "250 s in all", "at most 333 tokens", "time out after 45 s",
                   "at most 1200 characters of output", "the last 4 exchanges", "a 5000-token context"):
        assert stated in text, stated
    text = prompt(FlywheelConfig(solver_max_turns=12, solver_max_tokens=4096, solver_history_turns=0,
                                 solver_context_tokens=0))
    assert "12 replies" in text and "at most 4096 tokens" in text and "the whole conversation" in text
    assert "-token context" not in text


def test_the_fenced_protocol_is_todays_format_and_names_are_checked():
    fenced = FencedProtocol()
    assert fenced.request() == {}
    (c,) = fenced.parse("```bash\nls\n```", []).calls
    assert c.command == "ls" and fenced.result(c, "x") == {"role": "user", "content": "x"}
    assert "exactly one shell command in a fenced block" in SYSTEM_PROMPT
    assert "call `finish`" in system_prompt(make_protocol("tools"), LoopLimits())
    with pytest.raises(ProtocolError, match="agent protocol 'json': expected one of"):
        make_protocol("json")
    with pytest.raises(ProtocolError, match="tool choice 'none'"):
        make_protocol("tools", tool_choice="none")
    with pytest.raises(FlywheelConfigError, match="AES_AGENT_PROTOCOL: expected one of"):
        FlywheelConfig(agent_protocol="xml")


class ToolCalling(ReplayServer):
    """A scripted model that acts through tool calls: several in one reply, a malformed one, a
    harness tool, then ``finish``."""

    SCRIPT = [
        [call("bash", {"command": "echo one > /tmp/a"}, "t1"), call("bash", {"command": "cat /tmp/a; exit 4"}, "t2")],
        [call("bash", '{"command": "rm -rf /tmp/a"', "t3"), call("ask_human", {"question": "the port?"}, "t4")],
        [call("finish", "{}", "t5"), call("bash", {"command": "echo never > /tmp/b"}, "t6")],
    ]

    def _answer(self, body):
        with self._lock:
            self.requests.append(body)
            turn = len(self.requests) - 1
        status, out = self.completion(body, "")
        out["choices"][0]["message"]["tool_calls"] = self.SCRIPT[turn]
        return status, out


@pytest.mark.docker
async def test_the_loop_runs_each_call_in_order_and_answers_each_by_its_id(test_label, tmp_path):
    asked: list[str] = []

    async def harness(command: str) -> ToolResult | None:
        if not command.startswith("ask_human"):
            return None
        asked.append(command)
        return ToolResult(0, "port 8080")

    traj = Trajectory(rollout_id="r", role="solver", messages=[{"role": "user", "content": "go"}])
    limits = LoopLimits(max_turns=6, protocol="tools")
    async with Sandbox.start("aes-base:latest", Limits(), labels=test_label) as sb:
        with ToolCalling([]) as srv:
            async with ChatClient(srv.url, "replay") as client:
                await run_loop(client, sb, traj, limits, harness, ToolCallProtocol([ASK_HUMAN]))
        assert await sb.get_file("/tmp/a") == b"one\n"  # the malformed rm never ran
        assert await sb.get_file("/tmp/b") is None  # nor anything after finish
    assert traj.stop_reason == "done" and len(traj.turns) == 3 and traj.format_errors == 1
    assert asked == ["ask_human 'the port?'"]
    sent = srv.requests[1]["messages"]
    assert [m["role"] for m in sent[-3:]] == ["assistant", "tool", "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in sent[-2:]] == [("t1", "[exit code 0]\n"),
                                                                      ("t2", "[exit code 4]\none\n")]
    assert srv.requests[0]["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in srv.requests[0]["tools"]] == ["bash", "ask_human", "finish"]
    second = srv.requests[2]["messages"][-2:]
    assert second[0]["tool_call_id"] == "t3" and "not valid JSON" in second[0]["content"]
    assert second[1] == {"role": "tool", "tool_call_id": "t4", "content": "[exit code 0]\nport 8080"}
    assert traj.turns[0].command == "echo one > /tmp/a\ncat /tmp/a; exit 4" and traj.turns[0].exit_code == 4
    assert traj.turns[1].format_error and traj.turns[1].tool
    # the trajectory, tool calls and all, is stored, read back and exported
    assert decode_trajectory(encode_trajectory(traj)).messages == traj.messages
    ref = TrajectoryRef(idempotency_key="k", episode_id="w", rollout_id="r", env_id="e", role="solver", group_id="g",
                        reward=0.0, trajectory=BlobRef(key="k", sha256="0" * 64, size=1))
    path = exports.write([exports.row(ref, traj, None)], tmp_path, "parquet")
    (exported,) = pq.read_table(path).to_pylist()
    assert exported["messages"][1]["tool_calls"] == [
        {"id": "t1", "name": "bash", "arguments": '{"command": "echo one > /tmp/a"}'},
        {"id": "t2", "name": "bash", "arguments": '{"command": "cat /tmp/a; exit 4"}'}]
    assert exported["messages"][2]["tool_call_id"] == "t1" and exported["messages"][0]["tool_calls"] == []


def test_the_proposer_is_told_how_to_act_under_the_runs_protocol():
    from aes_lib.agents.loop import LoopLimits
    from aes_lib.agents.proposer.config import ProposerConfig
    from aes_lib.agents.proposer.harness import system_prompt as proposer_prompt

    fenced = ProposerConfig().budget(solver=LoopLimits())
    tools = ProposerConfig().budget(solver=LoopLimits(protocol="tools"))
    assert (fenced.loop.protocol, tools.loop.protocol) == ("fenced", "tools")
    assert "```bash\ncat assignment.md\n```" in proposer_prompt(fenced) and "TASK_DONE" in proposer_prompt(fenced)
    text = proposer_prompt(tools)
    assert "Call the `bash` tool" in text and "`aes_tool` tool" in text and "Call `finish` to give up" in text
    assert "```" not in text and "TASK_DONE" not in text
