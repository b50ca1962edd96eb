"""Running a policy on a Harbor dataset: k solver attempts per task, scored as avg@k
(``aes eval``; the statistics are ``aes_ops.evaluation``'s).

The policy evaluated: ``EvalOptions.policy_version`` V serves the learner's published
version V (0: the base weights) from a private torch engine; otherwise whatever
``settings.model_url`` serves, or the base weights in a private engine when it is empty.
A task that fails to load or run is listed with its error and left out of the average;
an attempt the endpoint failed is such a failure, never a 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import msgspec

from aes_lib.agents.loop import SEED_RANGE, LoopLimits
from aes_lib.config import Settings
from aes_lib.models.weights import EngineWeightsError, TorchEngineClient
from aes_ops.evaluation import summarize, task_mean

SCORED_POLICIES = ("shared", "solver")
"""PolicyVersion.policy values that play the solver."""


class DatasetError(ValueError):
    """A path that is no dataset, or a policy version nobody published: bad input."""


class EngineError(RuntimeError):
    """The private model engine did not start, or does not serve the version asked for."""


class Reporter(Protocol):
    """Where progress goes (``aes_cli.output.Progress`` is one): a total, then steps."""

    total: int | None

    def step(self, line: str, advance: int = 1) -> None: ...


class _Quiet:
    total: int | None = None

    def step(self, line: str, advance: int = 1) -> None:
        pass


@dataclasses.dataclass(frozen=True)
class EvalOptions:
    k: int = 5
    """Attempts per task (the paper reports avg@5)."""
    concurrency: int = 4
    max_turns: int = LoopLimits.max_turns
    max_tokens: int = LoopLimits.max_tokens
    """Completion tokens per model call."""
    temperature: float = LoopLimits.temperature
    """Sampling temperature of every attempt."""
    history_turns: int = LoopLimits.history_turns
    context_tokens: int = LoopLimits.context_tokens
    """History re-sent each turn, as ``LoopLimits``: a policy trained under other settings sees another prompt."""
    policy_version: int | None = None
    """The learner's published version to load into a private engine (0: base weights)."""
    seed: int | None = None
    """Attempt i of task T samples with seeds derived from (seed, T, i): a re-run on the same
    policy repeats its attempts, and two policies are scored on the same random numbers (a
    paired comparison; engines that honour a request's seed: vLLM, torch, llama.cpp). Exact with
    ``concurrency`` 1; attempts batched together can, rarely, draw differently where the engine's
    arithmetic depends on its batch. None: unseeded."""


def attempt_seed(seed: int, task: str, attempt: int) -> int:
    """The first sampling seed of ``attempt`` at ``task`` under the run's ``seed``."""
    digest = hashlib.sha256(f"{seed}/{task}/{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % SEED_RANGE


@dataclasses.dataclass
class TaskResult:
    name: str
    path: str
    rewards: list[float] = dataclasses.field(default_factory=list)
    error: str = ""
    trajectories: list[str] = dataclasses.field(default_factory=list)
    end_states: list[dict | None] = dataclasses.field(default_factory=list)
    """Each attempt's stored end state (a ``BlobRef`` as JSON; None: none kept), for ``aes regrade --eval``."""
    versions: set[int] = dataclasses.field(default_factory=set)
    """Policy versions the engine said sampled this task's turns."""
    metrics: list[dict[str, float]] = dataclasses.field(default_factory=list)
    """Each attempt's domain metrics (ask_human: asks, ask_f1)."""

    @property
    def mean(self) -> float | None:
        return None if self.error or not self.rewards else task_mean(self.rewards)


def task_folders(dataset: Path) -> list[Path]:
    """The task folders of ``dataset``: itself if it holds task.toml, else its visible subfolders."""
    if not dataset.is_dir():
        raise DatasetError(f"{dataset}: {'not a directory' if dataset.exists() else 'no such directory'}")
    if (dataset / "task.toml").is_file():
        return [dataset]
    folders = sorted(p for p in dataset.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not folders:
        raise DatasetError(f"{dataset}: neither a task folder (no task.toml) nor a folder of task folders")
    return folders


# -- the model --------------------------------------------------------------------


async def _published(settings: Settings, version: int):
    """The PolicyVersion message of ``version`` (the newest one announced, for the solver)."""
    from aes_lib.bus import Bus
    from aes_proto import subjects
    from aes_proto.messages import PolicyVersion

    async with await Bus.connect(settings, name="aes-eval") as bus:
        published = await bus.history(subjects.POLICY_VERSION, PolicyVersion)
    found = [p for p in published if p.version == version and p.policy in SCORED_POLICIES]
    if not found:
        have = sorted({p.version for p in published if p.policy in SCORED_POLICIES})
        raise DatasetError(f"policy version {version} is not published on {subjects.POLICY_VERSION} "
                           f"(published: {have or 'none'})")
    return found[-1]


def _base_folder(settings: Settings) -> Path:
    from aes_lib.learner import LearnerConfig
    from aes_lib.learner.base_model import bundled_base_model

    path = LearnerConfig.from_env().model_path
    return Path(path) if path else bundled_base_model(settings.home)


@contextlib.contextmanager
def _private_engine(folder: Path) -> Iterator[str]:
    """A torch engine on the base weights, in this process, for the duration."""
    from aes_lib.models.torch_serve import serve

    server, url = serve(folder, port=0)
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()
        server.RequestHandlerClass.engine.close()  # its decode thread


async def _policy(url: str) -> dict | None:
    """``{"version", "model"}`` the engine serves, or None for an endpoint that cannot say."""
    try:
        version, model = await TorchEngineClient(url, timeout_s=10).served()
    except EngineWeightsError:
        return None
    return {"version": version, "model": model}


async def _load(url: str, msg) -> None:
    """Load the published checkpoint into the private engine and check it took."""
    try:  # a 135M fp32 checkpoint from S3 takes a while
        result = await TorchEngineClient(url, timeout_s=1800).load(msg)
    except EngineWeightsError as e:
        raise EngineError(f"loading policy version {msg.version} ({msg.folder or msg.checkpoint.key}): {e}") from None
    if result.version != msg.version:
        raise EngineError(f"loading policy version {msg.version}: the engine serves v{result.version}")


# -- attempts ----------------------------------------------------------------------


async def _attempts(tasks: list[tuple[TaskResult, object]], url: str, model: str, settings: Settings,
                    options: EvalOptions, progress: Reporter) -> None:
    from aes_lib.agents.solver import rollout
    from aes_lib.blobstore import open_store
    from aes_lib.models import chat_client
    from aes_lib.domains.kinds import DomainKinds
    from aes_lib.sandbox import ImageCache

    store = open_store(settings.blob_location, settings)
    client = chat_client(settings, url=url, model=model)
    await client.probe()  # an unreachable endpoint or a refused key fails the run, not each task
    images = ImageCache(kinds=DomainKinds())
    limits = LoopLimits(max_turns=options.max_turns, max_tokens=options.max_tokens, temperature=options.temperature,
                        history_turns=options.history_turns, context_tokens=options.context_tokens)
    gate = asyncio.Semaphore(options.concurrency)
    run = uuid.uuid4().hex[:8]

    async def one(res: TaskResult, task, i: int) -> None:
        async with gate:
            if res.error:  # an earlier attempt failed: the task is out of the average anyway
                return
            seeded = limits if options.seed is None else dataclasses.replace(
                limits, seed=attempt_seed(options.seed, task.name, i))
            try:
                r = await rollout(task, client, images, store, seeded, env_id=task.name,
                                  rollout_id=f"eval-{run}-{re.sub(r'[^A-Za-z0-9_.-]', '_', task.name)}-{i}")
            except Exception as e:  # build failure, Docker gone...: this task, not the whole run
                res.error = f"attempt {i + 1}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                progress.step(f"{task.name} #{i + 1}: {res.error}")
                return
        t = r.trajectory
        res.rewards.append(t.reward)
        res.metrics.append(t.metrics)
        res.trajectories.append(r.ref.key)
        res.end_states.append(msgspec.to_builtins(r.end_state) if r.end_state else None)
        res.versions.update(turn.policy_version for turn in t.turns if turn.policy_version is not None)
        progress.step(f"{task.name} #{i + 1}: reward {t.reward:g} ({t.stop_reason}, {len(t.turns)} turns)")

    async with client:
        await asyncio.gather(*(one(res, task, i) for res, task in tasks for i in range(options.k)))


async def evaluate(folders: list[Path], settings: Settings, options: EvalOptions = EvalOptions(),
                   progress: Reporter | None = None) -> dict:
    """avg@k of the policy on the task ``folders``: per-task rewards, errors and trajectory
    keys, avg@k with its 95% interval over tasks, and which policy version sampled them."""
    from aes_lib.bundle import BundleError, Task

    progress = progress or _Quiet()
    published = None
    if options.policy_version:  # 0 is the base weights; checked before anything slow (a usage error)
        published = await _published(settings, options.policy_version)
    results: list[TaskResult] = []
    loaded: list[tuple[TaskResult, object]] = []
    for folder in folders:
        res = TaskResult(name=folder.name, path=str(folder))
        try:
            task = Task.load(folder)
            res.name = task.name
            loaded.append((res, task))
        except BundleError as e:
            res.error = f"invalid task: {type(e).__name__}: {e}"
        results.append(res)

    private = options.policy_version is not None or not settings.model_url
    served = None
    progress.total = options.k * len(loaded)
    with contextlib.ExitStack() as stack:
        if not loaded:  # nothing to run: do not export or load a model for it
            url = "" if private else settings.model_url
        elif private:
            progress.step("starting the model engine", advance=0)
            try:
                url = stack.enter_context(_private_engine(_base_folder(settings)))
            except Exception as e:  # missing model folder, export failure...
                raise EngineError(f"cannot start the model engine: {type(e).__name__}: {e}") from None
            if published is not None:
                progress.step(f"loading policy version {published.version}", advance=0)
                await _load(url, published)
        else:
            url = settings.model_url
        if loaded:
            served = await _policy(url)
            if options.policy_version is not None and (served is None or served["version"] != options.policy_version):
                raise EngineError(f"the engine serves {served} instead of policy version {options.policy_version}")
            await _attempts(loaded, url, settings.model, settings, options, progress)

    summary = summarize([r.rewards for r in results if r.mean is not None])
    return {
        "tasks": [{"name": r.name, "path": r.path, "rewards": r.rewards, "mean": r.mean, "error": r.error,
                   "trajectories": r.trajectories, "end_states": r.end_states} for r in results],
        "avg": summary.avg,
        "ci95": list(summary.ci95) if summary.ci95 else None,
        "k": options.k,
        "seed": options.seed,
        "temperature": options.temperature,
        "n_tasks": summary.n_tasks,
        "policy_version": served["version"] if served else "unknown",
        "sampled_versions": sorted(set().union(*(r.versions for r in results))),
        "model": str(served.get("model") or settings.model) if served else settings.model,
        "endpoint": "private" if private else url,
        "ask_human": _ask_summary([m for r in results if r.mean is not None for m in r.metrics]),
    }


def _ask_summary(metrics: list[dict[str, float]]) -> dict | None:
    """Ask rate and mean Ask-F1 over the attempts that had the ask_human tool; None if none did."""
    asked = [m for m in metrics if "ask_f1" in m]
    if not asked:
        return None
    return {"attempts": len(asked), "ask_rate": sum(m.get("asks", 0) > 0 for m in asked) / len(asked),
            "ask_f1": sum(m["ask_f1"] for m in asked) / len(asked)}
