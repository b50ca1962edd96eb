"""The torch engine: an OpenAI-compatible server whose log-probs are the trainer's, and
which follows new weights.

What the learner needs from the engine: per-token ids and log-probs of the
distribution actually sampled (temperature included), the version of the weights
behind each completion, and a reload that makes the served distribution the
trainer's updated one.
"""

import asyncio
import time

import httpx
import pytest
import torch
from transformers import AutoModelForCausalLM

from aes_lib.blobstore import open_store
from aes_lib.learner import DppoTrainer, LearnerConfig, TokenizedTurn, pack_turns, publish_model
from aes_lib.models import ChatClient
from aes_lib.models.torch_serve import serve
from aes_lib.models.weights import TorchEngineClient
from aes_proto.messages import PolicyVersion

pytestmark = pytest.mark.timeout(300)

PROMPT = [{"role": "user", "content": "List the files in /app with one shell command."}]


def trainer_logprobs(model, turn) -> torch.Tensor:
    trainer = DppoTrainer(model, LearnerConfig())
    with torch.no_grad():
        logp = trainer._token_logprobs(pack_turns([turn], 0.0))[0]
    return logp


def tokenized(chat) -> TokenizedTurn:
    return TokenizedTurn(tuple(chat.prompt_token_ids), tuple(chat.completion_token_ids),
                         tuple(chat.completion_logprobs), chat.temperature)


@pytest.fixture
def engine(tiny_model, tmp_path, monkeypatch):
    monkeypatch.setenv("AES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AES_BLOB_URL", f"file://{tmp_path / 'blobs'}")
    server, url = serve(tiny_model)
    yield url
    server.shutdown()


async def test_served_logprobs_are_the_trainers_and_follow_a_reload(engine, tiny_model, tmp_path):
    client = ChatClient(engine, "smollm2-135m")
    before = await client.chat(PROMPT, max_tokens=24, temperature=0.7, seed=3)
    assert before.policy_version == 0 and before.temperature == 0.7
    assert len(before.completion_token_ids) == len(before.completion_logprobs) > 0 and before.prompt_token_ids
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    served = torch.tensor(before.completion_logprobs)
    # Scored at the sampling temperature, the trainer reproduces the sampler's log-probs...
    assert torch.allclose(trainer_logprobs(model, tokenized(before)), served, atol=1e-4)
    # ...and at temperature 1 it would not: that was the anchor bug.
    t = tokenized(before)
    untempered = TokenizedTurn(t.prompt_ids, t.completion_ids, t.sampler_logprobs, 1.0)
    assert (trainer_logprobs(model, untempered) - served).abs().max() > 1e-2

    # The learner's next version: perturbed weights, published to the shared store as an HF-format folder.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    store = open_store(f"file://{tmp_path / 'blobs'}")
    ref = publish_model(store, "checkpoints/policy/v000001", model, tokenizer_from=tiny_model)
    pv = PolicyVersion(idempotency_key="v1", episode_id="learner", version=1, checkpoint=ref)
    weights = TorchEngineClient(engine)
    loaded = await weights.load(pv)
    assert (loaded.version, loaded.loaded) == (1, True) and await weights.version() == 1
    assert not (await weights.load(pv)).loaded  # not newer: nothing to do

    after = await client.chat(PROMPT, max_tokens=24, temperature=0.7, seed=3)
    assert after.policy_version == 1
    assert torch.allclose(trainer_logprobs(model, tokenized(after)), torch.tensor(after.completion_logprobs), atol=1e-4)
    # The same completion is now scored differently by the engine's weights.
    rescored = trainer_logprobs(model, tokenized(before))
    assert (rescored - served).abs().max() > 1e-3


async def test_concurrent_requests_are_decoded_together_and_stay_exact(engine, tiny_model):
    client = ChatClient(engine, "smollm2-135m")
    chats = await asyncio.gather(*(client.chat(PROMPT, max_tokens=16, temperature=1.0, seed=s) for s in range(4)))
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    for c in chats:  # left padding in a shared batch must not change any row's distribution
        assert torch.allclose(trainer_logprobs(model, tokenized(c)), torch.tensor(c.completion_logprobs), atol=1e-4)


async def test_bad_requests_get_a_clear_400(engine):
    async with httpx.AsyncClient() as http:
        r = await http.post(f"{engine}/chat/completions", json={"messages": "hi"})
        assert r.status_code == 400 and "messages must be" in r.json()["error"]["message"]
        r = await http.post(f"{engine}/chat/completions", content=b"{not json")
        assert r.status_code == 400 and "not JSON" in r.json()["error"]["message"]
        r = await http.post(f"{engine}/aes/policy", json={"version": 2})
        assert r.status_code == 400 and "checkpoint" in r.json()["error"]["message"]
        r = await http.post(f"{engine}/aes/policy", json={"version": 2, "checkpoint": {
            "key": "checkpoints/missing.safetensors", "sha256": "0" * 64, "size": 1}})
        assert r.status_code == 500  # the store has no such blob: the engine keeps its weights
        assert (await http.get(f"{engine}/aes/policy")).json()["version"] == 0


def test_requests_arriving_mid_decode_join_the_batch_and_stay_exact(tiny_model):
    from aes_lib.models.engine import GenRequest, TorchEngine

    engine = TorchEngine.from_folder(tiny_model)
    prompts = [tuple(engine.chat_prompt_ids([{"role": "user", "content": "x" * n}])) for n in (3, 40, 90)]
    first = engine.submit(GenRequest(prompts[0], max_tokens=400, temperature=1.0, seed=0))
    while engine.peak_batch == 0:  # the first request is decoding
        time.sleep(0.001)
    later = [engine.submit(GenRequest(p, max_tokens=20, temperature=0.8, seed=i)) for i, p in enumerate(prompts[1:])]
    results = [first.result(), *(f.result() for f in later)]
    engine.close()
    assert engine.peak_batch == 3  # the later two joined the running one
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    for prompt, r, temp in zip(prompts, results, (1.0, 0.8, 0.8)):
        served = TokenizedTurn(prompt, tuple(r.token_ids), tuple(r.logprobs), temp)
        assert torch.allclose(trainer_logprobs(model, served), torch.tensor(r.logprobs), atol=1e-4)
