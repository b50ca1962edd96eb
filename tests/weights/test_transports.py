"""Weight transports (``aes_lib.weights``) with a real model, blob store and torch engine: the
filesystem transport writes one copy that the engine loads in place; the store transport is
today's path; the nccl transport is refused, with its reason, where it cannot work (no GPU
here). And the engine's served version comes with each completion: one HTTP call per turn."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from aes_lib.blobstore import open_store
from aes_lib.config import Settings
from aes_lib.learner.checkpoint import write_hf_folder
from aes_lib.models import ChatClient
from aes_lib.models import torch_serve
from aes_lib.models.served_version import HEADER
from aes_lib.models.weights import TorchEngineClient
from aes_lib.weights.filesystem import FilesystemTransport
from aes_lib.weights.nccl import NcclTransport, master
from aes_lib.weights.store import StoreTransport
from aes_lib.weights.publish import publish_version, weight_transport
from aes_lib.weights.transport import VersionMeta, WeightTransportError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "learner"))
from helpers import RecordingContext  # noqa: E402

pytestmark = pytest.mark.timeout(300)

PROMPT = [{"role": "user", "content": "List the files in /app."}]


def files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def writer(model_folder: Path, seed: int):
    """The trainer's export: ``model_folder``'s weights plus noise, written as a version folder."""
    model = AutoModelForCausalLM.from_pretrained(model_folder, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05 * p.std())

    async def write(folder: Path) -> None:
        write_hf_folder(model.state_dict(), model.config, folder, dtype=torch.float32, tokenizer_from=model_folder)

    return write


@pytest.fixture
def setup(tiny_model, tmp_path, monkeypatch):
    monkeypatch.setenv("AES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AES_BLOB_URL", f"file://{tmp_path / 'blobs'}")
    settings = Settings(home=tmp_path / "home", blob_url=f"file://{tmp_path / 'blobs'}", engine="vllm",
                        weight_transport="filesystem", weights_dir=str(tmp_path / "shared"))
    ctx = RecordingContext(settings, open_store(settings.blob_location, settings))
    server, url = torch_serve.serve(tiny_model)
    yield ctx, url
    server.shutdown()


def meta(version: int, keep: int = 0) -> VersionMeta:
    return VersionMeta(version=version, prefix="checkpoints/policy", base_model="tiny", run_id="t", keep=keep)


async def test_the_filesystem_transport_writes_one_copy_the_engine_loads_in_place(setup, tiny_model, tmp_path):
    ctx, url = setup
    assert json.loads((tiny_model / "config.json").read_text())["tie_word_embeddings"]  # vLLM needs it untied
    pv = await publish_version(ctx, writer(tiny_model, 1), meta(1))
    folder = tmp_path / "shared" / "checkpoints" / "policy" / "v000001"
    assert (pv.folder, pv.checkpoint, pv.version) == (str(folder), None, 1)
    assert ctx.published == [("aes.policy.version", pv)]
    # One copy: the folder the trainer wrote, whole under its name; nothing in the store, nothing beside it.
    assert [p.name for p in (folder.parent).iterdir()] == ["v000001"]
    assert files(tmp_path / "blobs") == []
    # Untied at write time (vLLM's reload misses a tied head), so no engine rewrites it.
    assert not json.loads((folder / "config.json").read_text())["tie_word_embeddings"]
    head, shard = load_file(folder / "lm_head.safetensors"), load_file(folder / "model.safetensors")
    assert torch.equal(head["lm_head.weight"], shard["model.embed_tokens.weight"])
    written = {p: p.stat().st_mtime_ns for p in files(folder)}

    engine = TorchEngineClient(url)
    result = await engine.load(pv)
    assert (result.loaded, result.version, await engine.version()) == (True, 1, 1)
    assert {p: p.stat().st_mtime_ns for p in files(folder)} == written  # read in place, not rewritten
    assert files(tmp_path / "blobs") == [] and not (tmp_path / "home" / "vllm").exists()

    # The newest ``keep`` versions stay (at least 2).
    for v in (2, 3):
        await publish_version(ctx, writer(tiny_model, v), meta(v, keep=1))
    assert sorted(p.name for p in folder.parent.iterdir()) == ["v000002", "v000003"]


async def test_the_store_transport_uploads_the_folder_for_engines_elsewhere(setup, tiny_model, tmp_path):
    ctx, url = setup
    ctx.settings = dataclasses.replace(ctx.settings, weight_transport="store")
    assert isinstance(weight_transport(ctx.settings), StoreTransport)
    pv = await publish_version(ctx, writer(tiny_model, 1), meta(1))
    assert pv.folder == "" and pv.checkpoint is not None and pv.checkpoint.key.endswith("v000001/manifest.json")
    assert not (tmp_path / "shared").exists()
    assert (await TorchEngineClient(url).load(pv)).version == 1


async def test_the_served_version_comes_with_the_completion_in_one_call(setup, tiny_model, monkeypatch):
    """Counted at the server: after the client's one look at ``/models``, each turn is one POST,
    and its label is the version served, also after a load."""
    ctx, url = setup
    seen: list[str] = []
    for method in ("do_GET", "do_POST"):
        original = getattr(torch_serve._Handler, method)

        def counted(self, original=original, method=method):
            seen.append(f"{method[3:]} {self.path}")
            original(self)

        monkeypatch.setattr(torch_serve._Handler, method, counted)
    async with ChatClient(url, "policy") as client:
        turns = [await client.chat(PROMPT, max_tokens=4, seed=i) for i in range(2)]
        pv = await publish_version(ctx, writer(tiny_model, 1), meta(1))
        await TorchEngineClient(url).load(pv)
        seen.append("loaded")
        turns.append(await client.chat(PROMPT, max_tokens=4, seed=9))
    assert [t.policy_version for t in turns] == [0, 0, 1]
    assert seen == ["GET /v1/models", *["POST /v1/chat/completions"] * 2, "POST /v1/aes/policy",
                    "loaded", "POST /v1/chat/completions"]


async def test_the_client_takes_the_version_from_the_header(setup):
    """A response whose body says nothing (vLLM's) is labelled from the header alone."""
    _, url = setup
    import httpx

    r = httpx.post(f"{url}/chat/completions", json={"messages": PROMPT, "max_tokens": 2})
    assert r.headers[HEADER] == "0"

    def strip(data):  # what vLLM's body carries: no version field
        data.pop("policy_version")
        return data

    async def hooked(response):
        await response.aread()
        response._content = json.dumps(strip(response.json())).encode()

    async with ChatClient(url, "policy", vllm_token_ids=False) as client:
        client._http = httpx.AsyncClient(event_hooks={"response": [hooked]})
        turn = await client.chat(PROMPT, max_tokens=2)
    assert turn.policy_version == 0


def test_transports_are_picked_by_config_and_nccl_is_refused_without_a_gpu(tmp_path):
    base = Settings(home=tmp_path, engine="vllm", model_url="http://127.0.0.1:1/v1")
    fs = weight_transport(dataclasses.replace(base, weight_transport="filesystem"))
    assert isinstance(fs, FilesystemTransport) and fs.root == tmp_path / "weights" and fs.untie_head
    assert not weight_transport(dataclasses.replace(base, weight_transport="filesystem", engine="torch")).untie_head
    with pytest.raises(WeightTransportError, match="must be one of"):
        weight_transport(dataclasses.replace(base, weight_transport="nfs"))
    assert not torch.cuda.is_available()  # this machine: the refusal is the behaviour to check
    with pytest.raises(WeightTransportError, match="needs a CUDA GPU"):
        weight_transport(dataclasses.replace(base, weight_transport="nccl", nccl_master="127.0.0.1:29555"))
    assert master("10.0.0.1:29555") == ("10.0.0.1", 29555)
    with pytest.raises(WeightTransportError, match="host:port"):
        master("29555")


async def test_the_nccl_transport_needs_the_trainers_model(tmp_path):
    transport = NcclTransport("http://127.0.0.1:1/v1", "127.0.0.1", 29555, 2)
    with pytest.raises(WeightTransportError, match="needs the model"):
        await transport.publish(None, None, meta(1))  # type: ignore[arg-type]
