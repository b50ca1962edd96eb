"""vLLM serves the policy and follows the learner: a real vLLM server (the CPU build, fp32) on the
tiny model, one for the session (``vllm_server``), driven by our own clients.

Served log-probs are compared with what the trainer scores: fp32 transformers'
``log_softmax(logits / T)`` of the same tokens after the same prompt. Measured here: at most
~2e-5 apart (the tolerance, ``TOL``, is 1e-3), while two versions differ by far more than ``TOL``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import shutil
import signal
import sys
from pathlib import Path

import httpx
import msgspec
import pytest

from aes_lib.blobstore import open_store
from aes_lib.checkpoints import CheckpointFolderError
from aes_lib.config import Settings
from aes_lib.models.client import ChatClient
from aes_lib.models.served_version import HEADER
from aes_lib.models.weights import VLLMEngineClient
from aes_lib.weights.publish import publish_version
from aes_lib.weights.transport import VersionMeta
from aes_proto import subjects
from aes_proto.messages import PolicyVersion, ServingUpdate
from vllm_support import TOL, max_diff, perturbed, publish, reload, reset, trainer_logprobs, until_running

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "flywheel"))
from flywheel_helpers import running, wait_for  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "learner"))
from helpers import RecordingContext  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1200)]

MESSAGES = [{"role": "user", "content": "Name three colours."}]


@pytest.fixture
async def engine(vllm_server, vllm_tiny_model, tmp_path):
    """The shared server back on the tiny model's weights (v0), a blob store, and its weights client."""
    await reset(vllm_server, vllm_tiny_model)
    settings = Settings(home=tmp_path / "home", blob_url=f"file://{tmp_path / 'blobs'}", engine="vllm",
                        model_url=vllm_server)
    return VLLMEngineClient(vllm_server, settings), open_store(settings.blob_location, settings), settings


async def _chat(url: str, **kw):
    async with ChatClient(url, "policy") as client:  # finds out by itself that it talks to vLLM
        return await client.chat(kw.pop("messages", MESSAGES), **kw)


async def test_a_loaded_version_is_served_and_its_log_probs_are_the_trainers(engine, vllm_server, vllm_tiny_model, tmp_path):
    client, store, _ = engine
    v1 = perturbed(vllm_tiny_model, tmp_path / "v1", seed=1)
    assert await client.version() == 0
    before = await _chat(vllm_server, max_tokens=24, temperature=1.0, seed=3)
    assert before.policy_version == 0

    result = await client.load(publish(store, v1, 1))
    assert (result.loaded, result.version, await client.version()) == (True, 1, 1)
    assert not (await client.load(publish(store, v1, 1))).loaded  # not newer: nothing to do

    turn = await _chat(vllm_server, max_tokens=24, temperature=1.0, seed=3)
    assert turn.policy_version == 1
    assert turn.prompt_token_ids and len(turn.completion_token_ids) == len(turn.completion_logprobs) > 0
    served, args = turn.completion_logprobs, (turn.prompt_token_ids, turn.completion_token_ids, 1.0)
    err = max_diff(served, trainer_logprobs(v1, *args))
    off = max_diff(served, trainer_logprobs(vllm_tiny_model, *args))
    print(f"\nfp32, T=1: |served - trainer(v1)| <= {err:.2e}; against the base weights {off:.3f}")
    assert err < TOL < off / 10


async def test_log_probs_are_those_of_the_tempered_distribution(engine, vllm_server, vllm_tiny_model):
    turn = await _chat(vllm_server, max_tokens=24, temperature=0.7, seed=5)
    assert turn.temperature == 0.7
    args = (turn.prompt_token_ids, turn.completion_token_ids)
    err = max_diff(turn.completion_logprobs, trainer_logprobs(vllm_tiny_model, *args, 0.7))
    untempered = max_diff(turn.completion_logprobs, trainer_logprobs(vllm_tiny_model, *args, 1.0))
    print(f"\nfp32, T=0.7: |served - trainer| <= {err:.2e}; against T=1 {untempered:.3f}")
    assert err < TOL < untempered / 10


async def test_a_load_requested_mid_generation_mixes_no_weights(engine, vllm_server, vllm_tiny_model, tmp_path):
    """The load waits for the running completion, which is all the old weights'; the next one
    is all the new weights'."""
    client, store, _ = engine
    v1 = perturbed(vllm_tiny_model, tmp_path / "v1", seed=2, scale=0.1)
    pv = publish(store, v1, 1)
    events: list[str] = []

    async def generate():
        turn = await _chat(vllm_server, max_tokens=400, temperature=1.0, seed=7)
        events.append("completion")
        return turn

    long = asyncio.create_task(generate())
    await until_running(vllm_server)
    assert not long.done()
    await client.load(pv)
    events.append("loaded")
    turn = await long
    assert events == ["completion", "loaded"]  # the load waited for the running completion
    args = (turn.prompt_token_ids, turn.completion_token_ids, 1.0)
    assert len(turn.completion_token_ids) > 100  # long enough to have straddled the load
    assert turn.policy_version == 0
    assert max_diff(turn.completion_logprobs, trainer_logprobs(vllm_tiny_model, *args)) < TOL  # every token v0's
    after = await _chat(vllm_server, max_tokens=24, temperature=1.0, seed=7)
    assert after.policy_version == 1
    assert max_diff(after.completion_logprobs,
                    trainer_logprobs(v1, after.prompt_token_ids, after.completion_token_ids, 1.0)) < TOL


async def test_a_cached_long_prompt_gets_the_new_weights_after_a_load(engine, vllm_server, vllm_tiny_model, tmp_path):
    """Prefix caching keeps a prompt's key/value blocks; after a load they must not be reused."""
    client, store, _ = engine
    messages = [{"role": "user", "content": " ".join(f"item{i}" for i in range(200)) + ". Summarise."}]
    first = await _chat(vllm_server, messages=messages, max_tokens=8, temperature=1.0, seed=1)
    assert len(first.prompt_token_ids) > 4 * 128  # several cache blocks (vLLM's CPU block: 128 tokens at most)
    v1 = perturbed(vllm_tiny_model, tmp_path / "v1", seed=3)

    async def v1_error(version: int | None) -> float:
        turn = await _chat(vllm_server, messages=messages, max_tokens=8, temperature=1.0, seed=1)
        assert turn.prompt_token_ids == first.prompt_token_ids and turn.policy_version == version
        return max_diff(turn.completion_logprobs,
                        trainer_logprobs(v1, turn.prompt_token_ids, turn.completion_token_ids, 1.0))

    # The check can fail: loaded without the cache reset, the prompt's cached v0 blocks are reused.
    await reload(vllm_server, v1, "7", reset_prefix_cache=False)
    stale = await v1_error(7)
    await reset(vllm_server, vllm_tiny_model)
    await _chat(vllm_server, messages=messages, max_tokens=8, temperature=1.0, seed=1)  # v0's blocks cached again
    await client.load(publish(store, v1, 1))
    err = await v1_error(1)
    print(f"\nprompt of {len(first.prompt_token_ids)} tokens after a load: |served - trainer(v1)| <= {err:.2e} "
          f"({stale:.2e} without the cache reset)")
    assert stale > TOL > err


async def test_a_filesystem_version_is_loaded_in_place_and_each_turn_is_one_call(engine, vllm_server, vllm_tiny_model,
                                                                                 tmp_path):
    """The filesystem transport's folder is what vLLM reloads (no fetched copy, no rewrite), and
    the version each completion was sampled by comes on its response: counted at the client,
    one POST per turn after its one look at ``/models``, no ``/weight_info``."""
    client, store, settings = engine
    ctx = RecordingContext(dataclasses.replace(settings, weight_transport="filesystem",
                                               weights_dir=str(tmp_path / "shared")), store)
    v1 = perturbed(vllm_tiny_model, tmp_path / "v1", seed=6)

    async def write(folder: Path) -> None:  # the trainer's export
        shutil.copytree(v1, folder)

    pv = await publish_version(ctx, write, VersionMeta(version=1, prefix="policy", base_model="tiny", run_id="t"))
    assert pv.checkpoint is None and Path(pv.folder).parent == tmp_path / "shared" / "policy"
    written = {p.name: p.stat().st_mtime_ns for p in Path(pv.folder).iterdir()}
    assert (await client.load(pv)).loaded and await client.version() == 1
    assert {p.name: p.stat().st_mtime_ns for p in Path(pv.folder).iterdir()} == written
    assert not (settings.home / "vllm").exists()  # nothing fetched or copied for the engine

    r = httpx.post(f"{vllm_server}/chat/completions", json={"model": "policy", "messages": MESSAGES, "max_tokens": 2})
    assert r.headers[HEADER] == "1" and "policy_version" not in r.json()
    calls: list[str] = []

    async def count(request: httpx.Request) -> None:
        calls.append(f"{request.method} {request.url.path}")

    async with ChatClient(vllm_server, "policy") as chat:
        chat._http = httpx.AsyncClient(timeout=300, event_hooks={"request": [count]})
        turns = [await chat.chat(MESSAGES, max_tokens=16, temperature=1.0, seed=s) for s in (1, 2)]
        window = await chat.context_window()  # vLLM's max_model_len, from the same /models answer
    assert calls == ["GET /v1/models", "POST /v1/chat/completions", "POST /v1/chat/completions"]
    assert window == json.loads((vllm_tiny_model / "config.json").read_text())["max_position_embeddings"]
    assert [t.policy_version for t in turns] == [1, 1]
    assert max_diff(turns[0].completion_logprobs, trainer_logprobs(
        v1, turns[0].prompt_token_ids, turns[0].completion_token_ids, 1.0)) < TOL


async def test_a_bad_checkpoint_is_refused_and_the_engine_keeps_serving(engine, vllm_server, vllm_tiny_model, tmp_path,
                                                                        fresh_nats, bus, caplog):
    """Through weight sync: a manifest whose folder is not loadable never reaches vLLM (a bad
    load path kills its engine core); the next good version loads."""
    from aes_services.serving import WeightSyncService

    client, store, _ = engine
    settings = dataclasses.replace(fresh_nats, engine="vllm", model_url=vllm_server, home=tmp_path / "home")
    blobs = open_store(settings.blob_location, settings)
    files = {"config.json": blobs.put_bytes("bad/config.json", b"{}"),
             "model.safetensors": blobs.put_bytes("bad/model.safetensors", b"\xff" * 64)}
    bad = PolicyVersion(idempotency_key="bad", episode_id="t", version=1, checkpoint=blobs.put_bytes(
        "bad/manifest.json", msgspec.json.encode({"format": "aes-hf-folder/1", "files": files})))
    with pytest.raises(CheckpointFolderError, match="header length"):
        await client.load(bad)
    good = publish(blobs, perturbed(vllm_tiny_model, tmp_path / "v2", seed=4), 2)
    def refused() -> bool:
        return any(r.getMessage() == "weights refused" and r.version == 1 for r in caplog.records)

    with caplog.at_level(logging.ERROR, logger="aes_services.serving"):
        async with running(settings, WeightSyncService()):
            await bus.publish(subjects.POLICY_VERSION, bad)
            while not refused():  # handled (acked, not retried): the test's timeout bounds the wait
                await asyncio.sleep(0.2)
            await bus.publish(subjects.POLICY_VERSION, good)
            served = await wait_for(bus, subjects.SERVING_VERSION, ServingUpdate, lambda m: len(m) >= 1)
    assert [m.version for m in served] == [2] and await client.version() == 2
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.getMessage() != "weights refused"]
    assert (await _chat(vllm_server, max_tokens=4, temperature=1.0)).policy_version == 2


def _server_pids(url: str) -> list[int]:
    """vLLM's API server for ``url`` and its children (engine core, workers)."""
    port = url.rstrip("/").removesuffix("/v1").rsplit(":", 1)[1]
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"vllm.entrypoints.launchers.api_server.entry" in cmd and port.encode() in cmd:
            found.append(int(proc.name))
    for pid in list(found):
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


async def test_an_engine_that_dies_is_restarted_and_caught_up(engine, vllm_server, vllm_tiny_model, tmp_path,
                                                              fresh_nats, bus):
    """Last here (it restarts the shared server): the launcher starts vLLM again on the base
    weights, and weight sync, which watches what engines serve, loads the newest version again."""
    from aes_services.serving import WeightSyncService

    client, _, _ = engine
    settings = dataclasses.replace(fresh_nats, engine="vllm", model_url=vllm_server, home=tmp_path / "home")
    v1 = perturbed(vllm_tiny_model, tmp_path / "v1", seed=5)
    pv = publish(open_store(settings.blob_location, settings), v1, 1)
    sync = WeightSyncService()
    sync.watch_s = 1.0
    async with running(settings, sync):
        await bus.publish(subjects.POLICY_VERSION, pv)
        await wait_for(bus, subjects.SERVING_VERSION, ServingUpdate, lambda m: len(m) >= 1)
        before = _server_pids(vllm_server)
        assert before and await client.version() == 1
        for pid in before:
            os.kill(pid, signal.SIGKILL)
        while True:  # down, then up again (new processes) and back on v1
            await asyncio.sleep(1)
            now = _server_pids(vllm_server)
            try:
                if now and not set(now) & set(before) and await client.version() == 1:
                    break
            except Exception:  # noqa: BLE001  (refused while it restarts)
                continue
    turn = await _chat(vllm_server, max_tokens=16, temperature=1.0, seed=2)
    assert turn.policy_version == 1
    assert max_diff(turn.completion_logprobs,
                    trainer_logprobs(v1, turn.prompt_token_ids, turn.completion_token_ids, 1.0)) < TOL
