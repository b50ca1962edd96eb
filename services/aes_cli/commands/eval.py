"""``aes eval DATASET``: avg@k of the solver on a Harbor dataset (what training did).

DATASET is a folder of task folders or one task folder. Each task gets k solver
attempts (the paper reports Terminal-Bench avg@5); the summary is avg@k with a
95% t interval over the per-task means (``aes_ops.evaluation``). Tasks that fail
to load or run are listed with their error and left out of the average.

The policy evaluated: ``--policy-version V`` serves the learner's published
version V (0: the base weights) from a private torch engine; otherwise whatever
``AES_MODEL_URL`` serves, or the base weights in a private engine when it is empty.

Exit status: 0 all tasks scored, 1 a task failed to load or run (or the model
engine did not start), 2 a bad DATASET or an unpublished ``--policy-version``; the
other failures have the statuses of ``aes_cli.errors``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from aes_cli.errors import CommandError, Exit
from aes_cli.output import Progress, print_json
from aes_lib.agents.loop import LoopLimits
from aes_lib.config import Settings
from aes_ops.evaluation import Summary, summarize, task_mean
from aes_lib.models.weights import EngineWeightsError, TorchEngineClient

SCORED_POLICIES = ("shared", "solver")
"""PolicyVersion.policy values that play the solver."""


@dataclass
class TaskResult:
    name: str
    path: str
    rewards: list[float] = field(default_factory=list)
    error: str = ""
    trajectories: list[str] = field(default_factory=list)
    versions: set[int] = field(default_factory=set)
    """Policy versions the engine said sampled this task's turns."""
    metrics: list[dict[str, float]] = field(default_factory=list)
    """Each attempt's domain metrics (ask_human: asks, ask_f1)."""

    @property
    def mean(self) -> float | None:
        return None if self.error or not self.rewards else task_mean(self.rewards)


def task_folders(dataset: Path) -> list[Path]:
    """The task folders of ``dataset``: itself if it holds task.toml, else its visible subfolders."""
    if not dataset.is_dir():
        raise CommandError(f"{dataset}: {'not a directory' if dataset.exists() else 'no such directory'}")
    if (dataset / "task.toml").is_file():
        return [dataset]
    folders = sorted(p for p in dataset.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not folders:
        raise CommandError(f"{dataset}: neither a task folder (no task.toml) nor a folder of task folders")
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
        raise CommandError(f"policy version {version} is not published on {subjects.POLICY_VERSION} "
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
        raise CommandError(f"loading policy version {msg.version} ({msg.checkpoint.key}): {e}", Exit.NEGATIVE) from None
    if result.version != msg.version:
        raise CommandError(f"loading policy version {msg.version}: the engine serves v{result.version}", Exit.NEGATIVE)


# -- attempts ----------------------------------------------------------------------


async def _attempts(tasks: list[tuple[TaskResult, object]], url: str, model: str, settings: Settings,
                    args: argparse.Namespace, progress: Progress) -> None:
    from aes_lib.agents.solver import rollout
    from aes_lib.blobstore import open_store
    from aes_lib.models import chat_client
    from aes_lib.domains.kinds import DomainKinds
    from aes_lib.sandbox import ImageCache

    store = open_store(settings.blob_location, settings)
    client = chat_client(settings, url=url, model=model)
    await client.probe()  # an unreachable endpoint or a refused key fails the run, not each task
    images = ImageCache(kinds=DomainKinds())
    limits = LoopLimits(max_turns=args.max_turns)
    gate = asyncio.Semaphore(args.concurrency)
    run = uuid.uuid4().hex[:8]

    async def one(res: TaskResult, task, i: int) -> None:
        async with gate:
            if res.error:  # an earlier attempt failed: the task is out of the average anyway
                return
            try:
                r = await rollout(task, client, images, store, limits, env_id=task.name,
                                  rollout_id=f"eval-{run}-{re.sub(r'[^A-Za-z0-9_.-]', '_', task.name)}-{i}")
            except Exception as e:  # build failure, Docker gone...: this task, not the whole run
                res.error = f"attempt {i + 1}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                progress.step(f"{task.name} #{i + 1}: {res.error}")
                return
        t = r.trajectory
        if t.stop_reason == "model_error":  # the endpoint failed: a 0 would not measure the policy
            res.error = f"attempt {i + 1}: model error: {t.error.splitlines()[0] if t.error else ''}"
            progress.step(f"{task.name} #{i + 1}: {res.error}")
            return
        res.rewards.append(t.reward)
        res.metrics.append(t.metrics)
        res.trajectories.append(r.ref.key)
        res.versions.update(turn.policy_version for turn in t.turns if turn.policy_version is not None)
        progress.step(f"{task.name} #{i + 1}: reward {t.reward:g} ({t.stop_reason}, {len(t.turns)} turns)")

    async with client:
        await asyncio.gather(*(one(res, task, i) for res, task in tasks for i in range(args.k)))


async def _eval(folders: list[Path], settings: Settings, args: argparse.Namespace) -> dict:
    from aes_lib.bundle import BundleError, Task

    published = None
    if args.policy_version:  # 0 is the base weights; checked before anything slow (a usage error)
        published = await _published(settings, args.policy_version)
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

    private = args.policy_version is not None or not settings.model_url
    served = None
    with contextlib.ExitStack() as stack:
        progress = stack.enter_context(Progress("eval", total=args.k * len(loaded)))
        if not loaded:  # nothing to run: do not export or load a model for it
            url = "" if private else settings.model_url
        elif private:
            progress.step("starting the model engine", advance=0)
            try:
                url = stack.enter_context(_private_engine(_base_folder(settings)))
            except Exception as e:  # missing model folder, export failure...
                raise CommandError(f"cannot start the model engine: {type(e).__name__}: {e}", Exit.NEGATIVE) from None
            if published is not None:
                progress.step(f"loading policy version {published.version}", advance=0)
                await _load(url, published)
        else:
            url = settings.model_url
        if loaded:
            served = await _policy(url)
            if args.policy_version is not None and (served is None or served["version"] != args.policy_version):
                raise CommandError(f"the engine serves {served} instead of policy version {args.policy_version}",
                                   Exit.NEGATIVE)
            await _attempts(loaded, url, settings.model, settings, args, progress)

    summary: Summary = summarize([r.rewards for r in results if r.mean is not None])
    return {
        "tasks": [{"name": r.name, "path": r.path, "rewards": r.rewards, "mean": r.mean, "error": r.error,
                   "trajectories": r.trajectories} for r in results],
        "avg": summary.avg,
        "ci95": list(summary.ci95) if summary.ci95 else None,
        "k": args.k,
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


# -- output -----------------------------------------------------------------------


def render(report: dict) -> str:
    """Per-task table (task, k rewards, mean), failures, then the avg@k summary line."""
    rows = [("TASK", "REWARDS", "MEAN")] + [
        (t["name"], " ".join(f"{r:.2f}" for r in t["rewards"]) or "-",
         "FAIL" if t["error"] else f"{t['mean']:.3f}")
        for t in report["tasks"]
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    failures = [f"  {t['name']}: {t['error']}" for t in report["tasks"] if t["error"]]
    k, n = report["k"], report["n_tasks"]
    if report["avg"] is None:
        score = f"avg@{k} n/a (no task scored)"
    elif report["ci95"] is None:  # one task: the spread between tasks is unknown
        score = f"avg@{k} {report['avg']:.3f}, 95% CI n/a (needs 2+ tasks)"
    else:
        lo, hi = report["ci95"]
        score = f"avg@{k} {report['avg']:.3f}, 95% CI [{lo:.3f}, {hi:.3f}] (t over tasks)"
    failed = len(report["tasks"]) - n
    summary = (f"{score}; tasks {n}" + (f" ({failed} failed)" if failed else "")
               + f"; policy version {report['policy_version']}; model {report['model']}")
    if ask := report.get("ask_human"):
        summary += (f"\nask_human: {ask['attempts']} attempts, ask rate {100 * ask['ask_rate']:.1f}%, "
                    f"Ask-F1 {100 * ask['ask_f1']:.1f}%")
    return "\n".join(lines + ([""] + failures if failures else []) + ["", summary])


def _run(args: argparse.Namespace) -> int:
    report = asyncio.run(_eval(task_folders(args.dataset), Settings.from_env(), args))
    if args.json:
        print_json(report)
    else:
        print(render(report))
    return 1 if any(t["error"] for t in report["tasks"]) else 0


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
    return n


def _version(text: str) -> int:
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="avg@k of the solver on a Harbor dataset, with a 95%% interval over tasks")
    p.add_argument("dataset", type=Path, metavar="DATASET", help="folder of task folders, or one task folder")
    p.add_argument("--policy-version", type=_version, default=None, metavar="V",
                   help="evaluate the learner's published version V (0: base weights) in a private engine; "
                        "default: whatever AES_MODEL_URL serves")
    p.add_argument("--k", type=_positive, default=5, help="attempts per task (default 5, as avg@5)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--concurrency", type=_positive, default=4, metavar="N", help="attempts running at once (default 4)")
    p.add_argument("--max-turns", type=_positive, default=LoopLimits.max_turns, metavar="T", help="model calls per attempt")
    p.set_defaults(func=_run)
