"""Model profiles (``aes_lib.profiles``): the limits follow the model. A scripted model whose
memory is only what it is sent (it must recall a file it wrote in its first turn, eight turns
later) finishes its job under the ``capable`` profile and loses the file under ``small``, in a
real container; the history is cut to the context, oldest observations first."""

from __future__ import annotations

import re

import pytest
from replay_server import ReplayServer

from aes_lib.agents.loop import LoopLimits, fit, run_loop
from aes_lib.config import SettingsError
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.models import ChatClient
from aes_lib.sandbox import Limits, Sandbox
from aes_proto.trajectory import Trajectory

FILLER_TURNS = 7


class Recalling(ReplayServer):
    """Stands in for a capable model: writes a note under a name of its choosing, does other
    work, then must name the note again, which it can only read back from its own history."""

    def _answer(self, body):
        with self._lock:  # the turn it is on: counted by the server, not read from the history sent
            self.requests.append(body)
            turn = len(self.requests) - 1
        sent = [m["content"] for m in body["messages"] if m["role"] == "assistant"]
        if turn == 0:
            text = "```bash\necho 4217 > /tmp/note-ka3v.txt\n```"
        elif turn <= FILLER_TURNS:
            text = f"```bash\necho step {turn}\n```"
        elif turn == FILLER_TURNS + 1:
            named = re.findall(r"/tmp/note-\w+\.txt", " ".join(sent))
            text = f"```bash\ncp {named[0]} /tmp/answer.txt\n```" if named else "```bash\necho lost > /tmp/answer.txt\n```"
        else:
            text = "TASK_DONE"
        return self.completion(body, text)


async def _episode(limits: LoopLimits, test_label, max_model_len: int | None = None) -> str:
    traj = Trajectory(rollout_id="r", role="solver", messages=[{"role": "user", "content": "keep a note, then use it"}])
    async with Sandbox.start("aes-base:latest", Limits(), labels=test_label) as sb:
        with Recalling([], max_model_len=max_model_len) as srv:
            async with ChatClient(srv.url, "replay") as client:
                await run_loop(client, sb, traj, limits)
        answer = await sb.get_file("/tmp/answer.txt")
    assert traj.stop_reason == "done", traj.stop_reason
    return (answer or b"").decode().strip()


def _solver_limits() -> LoopLimits:
    c = FlywheelConfig.from_env()
    return LoopLimits(max_turns=12, max_tokens=c.solver_max_tokens, history_turns=c.solver_history_turns,
                      context_tokens=c.solver_context_tokens)


@pytest.mark.docker
async def test_a_model_that_needs_its_early_turns_succeeds_only_under_the_capable_profile(monkeypatch, test_label):
    monkeypatch.setenv("AES_MODEL_PROFILE", "capable")
    assert await _episode(_solver_limits(), test_label) == "4217"
    monkeypatch.setenv("AES_MODEL_PROFILE", "small")
    assert await _episode(_solver_limits(), test_label) == "lost"


@pytest.mark.docker
async def test_the_servers_context_window_binds_under_any_profile(monkeypatch, test_label):
    """The server says its window (vLLM's ``max_model_len``) and it is far below the profile's:
    the history is cut to the server's window, and the early note is lost."""
    monkeypatch.setenv("AES_MODEL_PROFILE", "capable")
    limits = _solver_limits()
    assert await _episode(limits, test_label, max_model_len=limits.max_tokens + 40) == "lost"
    with ReplayServer([]) as srv:  # a server that does not say: the profile's window stands
        async with ChatClient(srv.url, "replay") as client:
            assert await client.context_window() is None


def test_the_profile_sets_defaults_that_any_setting_overrides(monkeypatch):
    monkeypatch.setenv("AES_MODEL_PROFILE", "capable")
    assert (FlywheelConfig.from_env().solver_max_tokens, FlywheelConfig.from_env().solver_history_turns) == (4096, 0)
    monkeypatch.setenv("AES_SOLVER_MAX_TOKENS", "999")
    assert FlywheelConfig.from_env().solver_max_tokens == 999
    monkeypatch.setenv("AES_MODEL_PROFILE", "huge")
    with pytest.raises(SettingsError, match="AES_MODEL_PROFILE: expected one of small, capable, got 'huge'"):
        FlywheelConfig.from_env()


def test_history_is_cut_to_the_context_oldest_observations_first():
    head = [{"role": "system", "content": "s" * 300}]
    exchanges = [[{"role": "assistant", "content": f"cmd {i}"}, {"role": "user", "content": f"{i}" * 1000}]
                 for i in range(10)]
    assert len(fit(head, exchanges, LoopLimits(history_turns=0))) == 20  # no context: nothing cut
    window = fit(head, exchanges, LoopLimits(history_turns=0, context_tokens=1000, max_tokens=100), 3.0)
    kept = [m["content"] for m in window if m["role"] == "assistant"]
    assert 1 < len(kept) < 10 and kept == [f"cmd {i}" for i in range(10 - len(kept), 10)]  # the oldest dropped
    observations = [m["content"] for m in window if m["role"] == "user"]
    assert observations[-1] == "9" * 1000  # the last whole
    assert all(o.endswith("[... 800 characters not re-sent]") for o in observations[:-1])  # shortened
    assert sum(len(m["content"]) for m in head + window) <= (1000 - 100) * 3.0
