"""``aes eval``: bad input, the table, and real runs on seed tasks in Docker against a
private torch engine serving a tiny random-init model (base weights and a published version)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from aes_cli.main import main

SEEDS = Path(__file__).resolve().parents[2] / "seeds"
QUICK_SEEDS = ("csv-sales-rollup", "extract-incident-refs")  # images are one COPY on aes-base


# -- no Docker ----------------------------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda tmp: tmp / "missing",
    lambda tmp: (tmp / "file.txt", (tmp / "file.txt").write_text("x"))[0],
    lambda tmp: (tmp / "empty", (tmp / "empty").mkdir())[0],
], ids=["missing", "file", "no-task-folders"])
def test_bad_dataset_exits_2_with_one_line(make, tmp_path, capsys):
    path = make(tmp_path)
    assert main(["eval", str(path), "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and str(path) in err and "Traceback" not in err


def test_render_table_and_summary():
    from aes_cli.commands.eval import render

    report = {
        "tasks": [
            {"name": "a", "path": "/d/a", "rewards": [1.0, 0.5], "mean": 0.75, "error": ""},
            {"name": "b", "path": "/d/b", "rewards": [0.0, 0.0], "mean": 0.0, "error": ""},
            {"name": "c", "path": "/d/c", "rewards": [], "mean": None, "error": "invalid task: MissingFileError: x"},
        ],
        "avg": 0.375, "ci95": [0.0, 1.0], "k": 2, "n_tasks": 2, "policy_version": 3, "model": "m",
    }
    lines = render(report).splitlines()
    assert lines[0].split() == ["TASK", "REWARDS", "MEAN"]
    assert lines[1].split() == ["a", "1.00", "0.50", "0.750"]
    assert lines[3].split() == ["c", "-", "FAIL"]
    assert "  c: invalid task: MissingFileError: x" in lines
    assert lines[-1] == "avg@2 0.375, 95% CI [0.000, 1.000] (t over tasks); tasks 2 (1 failed); policy version 3; model m"
    one = dict(report, tasks=report["tasks"][:1], avg=0.75, ci95=None, n_tasks=1, policy_version="unknown")
    assert render(one).splitlines()[-1] == (
        "avg@2 0.750, 95% CI n/a (needs 2+ tasks); tasks 1; policy version unknown; model m")


# -- real runs --------------------------------------------------------------------


def _env(monkeypatch: pytest.MonkeyPatch, *, home: Path, blob_url: str, tiny: Path, nats=None) -> None:
    for var in ("AES_MODEL_URL", "AES_MODEL", "AES_NATS_URL", "AES_NATS_USER", "AES_NATS_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AES_HOME", str(home))
    monkeypatch.setenv("AES_BLOB_URL", blob_url)
    monkeypatch.setenv("AES_LEARNER_MODEL_PATH", str(tiny))
    if nats is not None:
        monkeypatch.setenv("AES_NATS_URL", nats.nats_url)
        monkeypatch.setenv("AES_NATS_USER", nats.nats_user)
        monkeypatch.setenv("AES_NATS_PASSWORD", nats.nats_password)


def _load_trajectories(blob_url: str, keys: list[str]):
    from aes_lib.agents.trajectory import load_trajectory
    from aes_lib.blobstore import open_store
    from aes_proto.messages import BlobRef

    store = open_store(blob_url)
    root = Path(blob_url.removeprefix("file://"))
    return [load_trajectory(store, BlobRef(key=k, sha256=_sha(root / k), size=(root / k).stat().st_size))
            for k in keys]


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.docker
@pytest.mark.model
def test_eval_dataset_on_base_weights(tiny_model, tmp_path, monkeypatch, capsys):
    """Two seeds and one broken folder, k=2, the private engine on the base (version 0)."""
    dataset = tmp_path / "dataset"
    for name in QUICK_SEEDS:
        shutil.copytree(SEEDS / name, dataset / name)
    shutil.copytree(SEEDS / QUICK_SEEDS[0], dataset / "broken")
    (dataset / "broken" / "instruction.md").unlink()
    blob_url = f"file://{tmp_path / 'blobs'}"
    _env(monkeypatch, home=tmp_path / "home", blob_url=blob_url, tiny=tiny_model)

    code = main(["eval", str(dataset), "--k", "2", "--max-turns", "2", "--concurrency", "4", "--json"])
    out, _ = capsys.readouterr()
    report = json.loads(out)
    assert code == 1  # the broken task failed to load

    by_path = {Path(t["path"]).name: t for t in report["tasks"]}
    assert sorted(by_path) == sorted([*QUICK_SEEDS, "broken"])
    broken = by_path.pop("broken")
    assert "MissingFileError" in broken["error"] and broken["rewards"] == [] and broken["mean"] is None
    for t in by_path.values():
        assert t["error"] == "" and len(t["rewards"]) == 2
        assert all(0.0 <= r <= 1.0 for r in t["rewards"])
        assert t["mean"] == pytest.approx(sum(t["rewards"]) / 2)
        trajs = _load_trajectories(blob_url, t["trajectories"])
        assert sorted(tr.reward for tr in trajs) == sorted(t["rewards"])
        for tr in trajs:  # really sampled by the engine, within the turn budget, and verified
            assert 1 <= len(tr.turns) <= 2 and "reward" in tr.verifier_output
            assert {turn.policy_version for turn in tr.turns} == {0}
            assert all(turn.completion_token_ids for turn in tr.turns)
    assert report["k"] == 2 and report["n_tasks"] == 2
    assert report["avg"] == pytest.approx(sum(t["mean"] for t in by_path.values()) / 2)
    lo, hi = report["ci95"]
    assert 0.0 <= lo <= report["avg"] <= hi <= 1.0
    assert report["policy_version"] == 0 and report["sampled_versions"] == [0]
    assert report["model"] == str(tiny_model)


@pytest.mark.docker
@pytest.mark.model
def test_eval_with_a_seed_repeats_its_attempts(tiny_model, tmp_path, monkeypatch, capsys):
    """--seed: the same seed draws the same samples from the same policy, every attempt and every
    turn; the attempts of one run, and another seed, draw others. One attempt at a time, so that
    no batch mate changes the engine's arithmetic."""
    task = tmp_path / QUICK_SEEDS[0]
    shutil.copytree(SEEDS / QUICK_SEEDS[0], task)
    blob_url = f"file://{tmp_path / 'blobs'}"
    _env(monkeypatch, home=tmp_path / "home", blob_url=blob_url, tiny=tiny_model)

    def samples(seed: int) -> list[tuple]:
        code = main(["eval", str(task), "--k", "3", "--max-turns", "2", "--concurrency", "1", "--seed", str(seed),
                     "--json"])
        report = json.loads(capsys.readouterr()[0])
        assert code == 0 and report["seed"] == seed
        [t] = report["tasks"]
        return sorted(tuple(tuple(turn.completion_token_ids) for turn in tr.turns)
                      for tr in _load_trajectories(blob_url, t["trajectories"]))

    first, again, other = samples(7), samples(7), samples(8)
    assert first == again
    assert len(set(first)) == 3 and all(len(set(turns)) == len(turns) for turns in first)
    assert not set(first) & set(other)


@pytest.mark.docker
@pytest.mark.model
async def test_eval_published_policy_version(tiny_model, fresh_nats, tmp_path, monkeypatch, capsys):
    """--policy-version 1 loads the learner's published checkpoint into the private engine."""
    import torch
    from transformers import AutoModelForCausalLM

    from aes_lib.bus import Bus
    from aes_lib.learner.checkpoint import publish_model
    from aes_lib.learner.policy import version_prefix
    from aes_proto import subjects
    from aes_proto.messages import PolicyVersion

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    with torch.no_grad():
        model.model.norm.weight.mul_(1.5)  # different weights from the base
    async with await Bus.connect(fresh_nats, name="test") as bus:
        ref = publish_model(bus.blobs, version_prefix("checkpoints/policy", 1), model, tokenizer_from=tiny_model)
        await bus.publish(subjects.POLICY_VERSION, PolicyVersion(
            idempotency_key="test:policy:1", episode_id="test", version=1, checkpoint=ref, step=1,
            base_model=str(tiny_model)))
    _env(monkeypatch, home=fresh_nats.home, blob_url=fresh_nats.blob_location, tiny=tiny_model, nats=fresh_nats)
    task = tmp_path / QUICK_SEEDS[1]
    shutil.copytree(SEEDS / QUICK_SEEDS[1], task)

    capsys.readouterr()  # drop the progress bars of loading the model above

    # an unpublished version: a usage error, before any engine or container starts
    assert await asyncio.to_thread(main, ["eval", str(task), "--policy-version", "7"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "published: [1]" in err

    code = await asyncio.to_thread(
        main, ["eval", str(task), "--policy-version", "1", "--k", "2", "--max-turns", "2", "--json"])
    out, _ = capsys.readouterr()
    report = json.loads(out)
    assert code == 0
    [t] = report["tasks"]
    assert t["error"] == "" and len(t["rewards"]) == 2 and all(0.0 <= r <= 1.0 for r in t["rewards"])
    assert report["policy_version"] == 1 and report["sampled_versions"] == [1]
    for tr in _load_trajectories(fresh_nats.blob_location, t["trajectories"]):
        assert {turn.policy_version for turn in tr.turns} == {1}
    # one task: no interval over tasks
    assert report["n_tasks"] == 1 and report["ci95"] is None and report["avg"] == pytest.approx(t["mean"])


@pytest.mark.docker
async def test_eval_external_endpoint_scores_known_replies(tmp_path, monkeypatch, capsys):
    """AES_MODEL_URL set, no --policy-version: the configured endpoint is evaluated as is.
    A replayed solver that really solves the task scores 1.0 on each attempt; the
    endpoint has no /aes/policy route, so the version is unknown."""
    from replay_server import ReplayServer

    from aes_lib.bundle import Task

    name = QUICK_SEEDS[0]
    task = tmp_path / "dataset" / name
    shutil.copytree(SEEDS / name, task)
    solve = (SEEDS / name / "solution" / "solve.sh").read_text()
    attempt = [f"```bash\ncat > /tmp/solve.sh <<'AES_EOF'\n{solve}\nAES_EOF\n```", "```bash\nbash /tmp/solve.sh\n```",
               "TASK_DONE"]
    blob_url = f"file://{tmp_path / 'blobs'}"
    with ReplayServer(attempt * 2) as srv:
        _env(monkeypatch, home=tmp_path / "home", blob_url=blob_url, tiny=tmp_path / "unused")
        monkeypatch.setenv("AES_MODEL_URL", srv.url)
        monkeypatch.setenv("AES_MODEL", "replay")
        code = await asyncio.to_thread(
            main, ["eval", str(tmp_path / "dataset"), "--k", "2", "--concurrency", "1", "--max-turns", "5",
                   "--temperature", "0.3"])
    out, _ = capsys.readouterr()
    assert code == 0 and not srv.errors
    assert {r["temperature"] for r in srv.requests} == {0.3}  # every attempt samples at the asked temperature
    lines = out.splitlines()
    assert lines[1].split() == [Task.load(task).name, "1.00", "1.00", "1.000"]
    assert lines[-1] == "avg@2 1.000, 95% CI n/a (needs 2+ tasks); tasks 1; policy version unknown; model replay"


@pytest.mark.docker
async def test_eval_endpoint_failure_is_a_failed_task(tmp_path, monkeypatch, capsys):
    """An endpoint that refuses every request: the attempt is not scored 0, the task fails (exit 1)."""
    from replay_server import ReplayServer

    task = tmp_path / QUICK_SEEDS[0]
    shutil.copytree(SEEDS / QUICK_SEEDS[0], task)
    with ReplayServer(["TASK_DONE"], fail_first=100, fail_status=400) as srv:
        _env(monkeypatch, home=tmp_path / "home", blob_url=f"file://{tmp_path / 'blobs'}", tiny=tmp_path / "unused")
        monkeypatch.setenv("AES_MODEL_URL", srv.url)
        monkeypatch.setenv("AES_MODEL", "replay")
        code = await asyncio.to_thread(main, ["eval", str(task), "--k", "1", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    [t] = report["tasks"]
    assert "model error" in t["error"] and "HTTP 400" in t["error"] and t["mean"] is None
    assert report["avg"] is None and report["n_tasks"] == 0 and report["endpoint"] == srv.url


@pytest.mark.docker
async def test_regrade_rescores_an_eval_result_with_the_current_verifier(tmp_path, monkeypatch, capsys):
    """``aes regrade --eval``: an eval whose attempts an older verifier scored (links into the
    tests crossed unchecked) is re-scored from the stored end states, without the agent."""
    import posixpath

    from replay_server import ReplayServer

    from aes_lib.sandbox import verifier

    shutil.copytree(Path(__file__).resolve().parents[1] / "security" / "tasks" / "ledger-sum",
                    tmp_path / "dataset" / "ledger-sum")
    forge = ["```bash\nln -sf /tests/expected.txt /app/answer.txt && printf '#!/bin/sh\\ncat /app/answer.txt\\n' "
             "> /app/solve && chmod 755 /app/solve\n```", "TASK_DONE"]
    with ReplayServer(forge * 2) as srv, monkeypatch.context() as old:
        old.setattr(verifier, "_resolve", lambda start, target, roots, view: (posixpath.normpath(
            posixpath.join(start, target)), True))  # the older link rule: every link crosses
        _env(monkeypatch, home=tmp_path / "home", blob_url=f"file://{tmp_path / 'blobs'}", tiny=tmp_path / "unused")
        monkeypatch.setenv("AES_MODEL_URL", srv.url)
        monkeypatch.setenv("AES_MODEL", "replay")
        code = await asyncio.to_thread(main, ["eval", str(tmp_path / "dataset"), "--k", "2", "--concurrency", "1",
                                              "--max-turns", "3", "--json"])
    out, _ = capsys.readouterr()
    assert code == 0 and not srv.errors
    (tmp_path / "eval.json").write_text(out)
    assert json.loads(out)["tasks"][0]["rewards"] == [0.5, 0.5]
    code = await asyncio.to_thread(main, ["regrade", "--eval", str(tmp_path / "eval.json"),
                                          "--json", str(tmp_path / "regraded.json")])
    out, _ = capsys.readouterr()
    assert code == 0
    regraded = json.loads((tmp_path / "regraded.json").read_text())
    assert [(t["old"], t["new"], t["partial"]) for t in regraded["tasks"]] == [([0.5, 0.5], [0.0, 0.0], False)]
    assert (regraded["avg_old"], regraded["avg_new"]) == (0.5, 0.0)
    assert out.splitlines()[-1] == "avg@k 0.500 -> 0.000"
