"""``aes trajectories export`` after a real training wave: waves, Docker rollouts against the
torch engine, the learner. The Parquet file loads with HF ``datasets`` and pyarrow, holds one
row per training attempt, and each turn's token ids re-tokenize to the row's chat messages."""

import asyncio
import dataclasses
import json

import pyarrow.parquet as pq
import pytest
from transformers import AutoTokenizer

from aes_cli.main import main
from aes_lib.runners.pool_store import BUCKET, PoolStore
from aes_lib.flywheel.training import TrainingConfig
from aes_lib.learner import LearnerConfig
from aes_lib.models.engine import chat_prompt_ids
from aes_lib.models.torch_serve import serve
from aes_lib.models.weights import TorchEngineClient
from aes_ops.exports import SCHEMA
from aes_ops.seeding import seed_pool
from aes_ops.waves import train
from aes_proto import subjects
from aes_proto.messages import TrajectoryRef
from aes_services.learner import LearnerService
from aes_services.orchestrator import OrchestratorService
from aes_services.serving import WeightSyncService
from aes_services.training import TrainingRolloutService, WavePlannerService

from conftest import TASKS, WORD_WAVES
from flywheel_helpers import running

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1200)]


async def test_export_has_one_row_per_training_attempt_that_retokenizes(fresh_nats, bus, word_policy, monkeypatch,
                                                                         tmp_path):
    monkeypatch.setenv("AES_HOME", str(fresh_nats.home))
    monkeypatch.setenv("AES_BLOB_URL", fresh_nats.blob_location)
    server, url = serve(word_policy)
    settings = dataclasses.replace(fresh_nats, model_url=url, engine="torch")
    await seed_pool(bus, PoolStore(await bus.kv(BUCKET)), [TASKS / "word-banana"])
    waves = TrainingConfig(groups_per_wave=1, group_size=4, waves_per_round=1, **WORD_WAVES,
                           temperature=0.5, engine_wait_s=600)
    learner = LearnerService(LearnerConfig(model_path=str(word_policy), groups_per_batch=1, lr=5e-4))
    try:
        async with running(settings, WavePlannerService(), TrainingRolloutService(config=waves), OrchestratorService(learner.config), learner,
                           WeightSyncService()):
            await train(bus, waves, round_=1, prefix="exp", served_version=TorchEngineClient(url).version)
    finally:
        server.shutdown()
    refs = await bus.history(subjects.TRAJECTORIES, TrajectoryRef)
    for var, value in {"AES_NATS_URL": settings.nats_url, "AES_NATS_USER": settings.nats_user,
                       "AES_NATS_PASSWORD": settings.nats_password}.items():
        monkeypatch.setenv(var, value)

    out = tmp_path / "export"
    assert await asyncio.to_thread(main, ["trajectories", "export", str(out)]) == 0  # the CLI runs its own loop
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from datasets import load_dataset

    rows = load_dataset("parquet", data_files=str(out / "trajectories.parquet"), split="train",
                        cache_dir=str(tmp_path / "hf")).to_list()
    assert pq.read_table(out / "trajectories.parquet").schema == SCHEMA
    assert len(refs) == 4 and sorted(r["rollout_id"] for r in rows) == sorted(r.rollout_id for r in refs)
    by_id = {r.rollout_id: r for r in refs}
    tok = AutoTokenizer.from_pretrained(word_policy)
    for row in rows:
        ref = by_id[row["rollout_id"]]
        assert (row["reward"], row["policy_version"], row["group_id"], row["role"]) == \
            (ref.reward, ref.policy_version, ref.group_id, "solver")
        assert row["env_source"] == "seed" and row["env_name"] and isinstance(json.loads(row["metrics"]), dict)
        replies = [i for i, m in enumerate(row["messages"]) if m["role"] == "assistant"]
        assert len(replies) == len(row["turns"]) >= 1
        for turn, at in zip(row["turns"], replies):
            # The prompt is the chat up to this reply; the completion decodes to the reply.
            assert turn["prompt_token_ids"] == chat_prompt_ids(tok, row["messages"][:at])
            assert tok.decode(turn["completion_token_ids"], skip_special_tokens=True) == row["messages"][at]["content"]
            assert len(turn["completion_logprobs"]) == len(turn["completion_token_ids"])

    # Filters, and JSON Lines: the newest version's attempts, then a version nothing was sampled at.
    newest = max(r.policy_version for r in refs)
    for since, expected in ((newest, [r.rollout_id for r in refs if r.policy_version == newest]), (newest + 1, [])):
        assert await asyncio.to_thread(main, ["trajectories", "export", str(out), "--format", "jsonl",
                                              "--since", str(since), "--role", "solver"]) == 0
        lines = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
        assert sorted(x["rollout_id"] for x in lines) == sorted(expected)
        assert all(x["turns"][0]["completion_token_ids"] for x in lines)
    assert await asyncio.to_thread(main, ["trajectories", "export", str(out), "--format", "jsonl", "--role", "proposer"]) == 0
    assert (out / "trajectories.jsonl").read_text() == ""
