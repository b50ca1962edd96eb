"""``aes policy export``: a published version comes out as a folder transformers loads."""

import asyncio

import torch
from transformers import AutoModelForCausalLM

from aes_cli.errors import Exit
from aes_cli.main import main
from aes_lib.bus import Bus
from aes_lib.learner import publish_model
from aes_lib.learner.policy import version_prefix
from aes_proto import subjects
from aes_proto.messages import PolicyVersion

from .helpers import tiny_qwen2


async def test_export_writes_a_folder_transformers_loads(fresh_nats, tmp_path, monkeypatch, capsys):
    for key, value in {"AES_HOME": str(fresh_nats.home), "AES_BLOB_URL": fresh_nats.blob_location,
                       "AES_NATS_URL": fresh_nats.nats_url, "AES_NATS_USER": fresh_nats.nats_user,
                       "AES_NATS_PASSWORD": fresh_nats.nats_password}.items():
        monkeypatch.setenv(key, value)
    model = tiny_qwen2(seed=4)  # tied embeddings: the folder stores them once
    async with await Bus.connect(fresh_nats, name="test") as bus:
        ref = publish_model(bus.blobs, version_prefix("checkpoints/policy", 3), model, dtype=torch.bfloat16)
        await bus.publish(subjects.POLICY_VERSION, PolicyVersion(
            idempotency_key="t:policy:3", episode_id="t", version=3, checkpoint=ref, step=3, base_model="tiny"))

    assert await asyncio.to_thread(main, ["policy", "export", "3", str(tmp_path / "out")]) == 0
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    assert loaded.dtype == torch.bfloat16 and type(loaded).__name__ == "Qwen2ForCausalLM"
    for name, t in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], t.to(torch.bfloat16)), name

    assert await asyncio.to_thread(main, ["policy", "export", "4", str(tmp_path / "other")]) == Exit.USAGE
    assert "version 4 is not published (published: [3])" in capsys.readouterr().err.replace(
        f" on {subjects.POLICY_VERSION}", "")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    assert await asyncio.to_thread(main, ["policy", "export", "3", str(tmp_path / "busy")]) == Exit.USAGE
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"
