"""The metrics service beside a training learner, on a real NATS bus: TensorBoard's event files
(read back with TensorBoard's own reader), an offline W&B run and an MLflow file store hold
the learner's stats as published on the bus, at the policy version."""

import asyncio
import logging
import struct
import threading
from pathlib import Path

import pytest

from aes_lib.bus import Bus, stream_for
from aes_lib.learner import LearnerConfig
from aes_lib.tracking import MetricsConfig
from aes_lib.tracking.backends import BACKENDS, MLFLOW_DIR, TENSORBOARD_DIR, UnknownBackendError, Run, open_backends
from aes_lib.tracking.series import learner as learner_series
from aes_proto import subjects
from aes_proto.messages import CalibrationResult, LearnerStats, Lineage, RolloutSummary, ServingUpdate, Verdict
from aes_services.learner import LearnerService
from aes_services.orchestrator import OrchestratorService
from aes_services import metrics as metrics_service
from aes_services.metrics import MetricsService

from .helpers import tiny_llama
from .test_service import publish_group, serving, until

pytestmark = pytest.mark.timeout(300)



def tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder / TENSORBOARD_DIR), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def wandb_history(folder: Path) -> list[dict[str, float]]:
    """The history rows of the offline run's ``.wandb`` file: W&B's record log (LevelDB's log
    format, 32 KiB blocks, after a 7-byte header) of ``Record`` protobufs."""
    from wandb.proto import wandb_internal_pb2

    (path,) = folder.glob("wandb/offline-run-*/run-*.wandb")
    data, pos, buf, rows = path.read_bytes(), 7, b"", []
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if left < 7 or (length == 0 and kind == 0):
            pos += left
            continue
        buf += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or a record's last fragment
            record = wandb_internal_pb2.Record.FromString(buf)
            buf = b""
            if record.WhichOneof("record_type") == "history":
                items = {i.key or "/".join(i.nested_key): i.value_json for i in record.history.item}
                rows.append({k: float(v) for k, v in items.items() if not k.startswith("_")})
    return rows


def mlflow_series(folder: Path, name: str) -> dict[str, list[tuple[int, float]]]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=(folder / MLFLOW_DIR).resolve().as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("aes-test").experiment_id])
    assert run.info.run_name == name
    return {key: sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
            for key in run.data.metrics}


async def _wait_for(check, what: str, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, f"no {what} within {timeout:.0f} s"
        await asyncio.sleep(0.2)


async def test_tracked_series_match_the_learner_stats_on_the_bus(fresh_nats, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    tiny_llama(seed=0).save_pretrained(tmp_path / "model")
    learner = LearnerService(LearnerConfig(model_path=str(tmp_path / "model"), solver_group_size=4, groups_per_batch=1,
                                           lr=1e-2), run_id="run1")
    folder = tmp_path / "tracking"
    metrics = MetricsService(MetricsConfig(backends=("tensorboard", "wandb", "mlflow"), log_dir=str(folder),
                                           project="aes-test", run_name="run1"))
    async with await Bus.connect(fresh_nats) as bus:
        await publish_group(bus, "env-a", 3, [4, 1, 2, 5], [1, 0, 0, 0])
        await publish_group(bus, "env-b", 8, [9, 9, 0, 1], [1, 1, 0, 0])
        async with serving(fresh_nats, metrics):
            async with serving(fresh_nats, OrchestratorService(learner.config), learner):
                stats = await until(bus, subjects.LEARNER_STATS, LearnerStats, 2)
            await _wait_for(lambda: len(tensorboard_scalars(folder).get("learner/solver/loss", [])) == 2,
                            "learner series in TensorBoard")
            # The other feeds, at their own versions; an admission at the newest version seen.
            await bus.publish(subjects.SERVING_VERSION, ServingUpdate(
                idempotency_key="s2", episode_id="e", policy="shared", version=2, engine="http://e/v1", seconds=1.5))
            await bus.publish(subjects.ROLLOUT_SUMMARY, RolloutSummary(
                idempotency_key="r1", episode_id="e", rollout_id="r1", env_id="env-a", role="solver", reward=0.25,
                policy_version=1))
            for i, (decision, verdicts) in enumerate([("admitted", ()), ("rejected", (
                    Verdict(stage="validate", ok=True, reason="ok"), Verdict(stage="review", ok=False, reason="vague")))]):
                await bus.publish(subjects.RESULT_CALIBRATION, CalibrationResult(
                    idempotency_key=f"c{i}", episode_id="e", env_id=f"env-{i}", decision=decision, verdicts=verdicts,
                    lineage=Lineage(assignment_id=f"a{i}", round=1, cost_usd=0.5)))
            await _wait_for(lambda: {"serving/shared/load_seconds", "rollouts/training/solver/reward",
                                     "admission/review:vague"} <= set(tensorboard_scalars(folder)), "other series")

    expected = {}
    for s in sorted(stats, key=lambda s: s.policy_version):
        for name, value in learner_series(s).items():
            expected.setdefault(name, []).append((s.policy_version, value))
    assert [s.policy_version for s in stats] == [1, 2]
    assert set(expected) >= {"learner/solver/loss", "learner/solver/reward", "learner/solver/masked_fraction",
                             "learner/solver/divergence", "learner/solver/grad_norm", "learner/solver/tokens_per_s"}
    board = tensorboard_scalars(folder)
    for name, series in expected.items():
        assert [step for step, _ in board[name]] == [1, 2], name
        assert [v for _, v in board[name]] == pytest.approx([v for _, v in series], rel=1e-6), name  # float32
    assert board["serving/shared/load_seconds"] == [(2, 1.5)]
    assert board["rollouts/training/solver/reward"] == [(1, 0.25)]
    assert board["admission/admitted"] == [(2, 1.0)] and board["admission/review:vague"] == [(2, 1.0)]
    assert [v for _, v in board["round/1/valid_rate"]] == [1.0, 1.0]  # both passed validation
    assert [v for _, v in board["round/1/cost_usd"]] == [0.5, 1.0]

    rows = wandb_history(folder)
    got: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        for name, value in row.items():
            if name != "policy_version":
                got.setdefault(name, []).append((int(row["policy_version"]), value))
    for name, series in expected.items():
        assert got[name] == series, name  # float64, exactly
    assert set(got) == set(board)
    runs = mlflow_series(folder, "run1")
    for name, series in expected.items():
        assert runs[name] == series, name
    assert set(runs) == set(board)


async def _handled(bus: Bus, service, n: int) -> None:
    """Until ``service`` has acked ``n`` messages (so none is in flight or waiting when it stops)."""
    while (await bus.js.consumer_info(stream_for(service.subject), service.name)).ack_floor.consumer_seq < n:
        await asyncio.sleep(0.1)


async def test_the_offline_wandb_run_is_on_disk_once_the_service_has_stopped(fresh_nats, tmp_path, monkeypatch):
    """W&B's core process keeps an offline run's records in a buffer until it closes the run's
    stream, which ``run.finish()`` only asks for (a request without a reply): under load the
    ``.wandb`` file still held no row after the service had stopped. Here the request is held
    back, as by a core that has not got to it yet; the drain must still leave every point on disk."""
    from wandb.sdk.lib.service.service_connection import ServiceConnection

    held: list[str] = []
    monkeypatch.setattr(ServiceConnection, "inform_finish", lambda self, run_id: held.append(run_id))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    folder = tmp_path / "tracking"
    metrics = MetricsService(MetricsConfig(backends=("wandb",), log_dir=str(folder), project="aes-test",
                                           run_name="run1"))
    stats = [LearnerStats(idempotency_key=f"s{v}", episode_id="", step=v, policy_version=v, loss=0.5 / v,
                          mean_reward=0.25 * v, mask_fraction=0.0, mean_divergence=0.01) for v in (1, 2)]
    async with await Bus.connect(fresh_nats) as bus:
        async with serving(fresh_nats, metrics):
            for s in stats:
                await bus.publish(subjects.LEARNER_STATS, s)
            await _handled(bus, metrics, len(stats))

    assert held, "W&B no longer asks its core to finish the run through ServiceConnection.inform_finish"
    rows = wandb_history(folder)
    assert [(row["policy_version"], row["learner/solver/loss"]) for row in rows] == [(1, 0.5), (2, 0.25)]


async def test_the_drain_closes_every_backend_whatever_another_does(fresh_nats, tmp_path, monkeypatch, caplog):
    """A backend whose close raises, or never returns, costs only its own points: the others are
    still closed (what they hold written) and the service still stops, naming the ones that failed."""
    release, closed = threading.Event(), []

    class Quiet:
        def __init__(self, run: Run) -> None: ...

        def log(self, scalars, step: int) -> None: ...

    class Broken(Quiet):
        def close(self) -> None:
            raise OSError("disk full")

    class Stuck(Quiet):
        def close(self) -> None:
            release.wait()

    class Recorded(Quiet):
        def close(self) -> None:
            closed.append(self)

    for name, backend in {"broken": Broken, "stuck": Stuck, "recorded": Recorded}.items():
        monkeypatch.setitem(BACKENDS, name, backend)
    monkeypatch.setattr(metrics_service, "CLOSE_WAIT", 0.5)
    metrics = MetricsService(MetricsConfig(backends=("broken", "stuck", "recorded"), log_dir=str(tmp_path)))
    try:
        with caplog.at_level(logging.ERROR, logger="aes_services.metrics"):
            async with serving(fresh_nats, metrics):
                pass
    finally:
        release.set()
    assert len(closed) == 1
    assert "the Broken backend may have lost points: OSError('disk full')" in caplog.text
    assert "the Stuck backend may have lost points: not closed within 0.5 s" in caplog.text


def test_an_unknown_backend_is_refused_naming_it(tmp_path):
    with pytest.raises(UnknownBackendError, match="unknown backend tensorbored .*registered: .*tensorboard"):
        open_backends(("tensorbored",), Run(folder=tmp_path, project="p", name="n"))
    assert {"tensorboard", "wandb", "mlflow"} <= set(BACKENDS)
