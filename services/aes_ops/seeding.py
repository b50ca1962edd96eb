"""Seeding the pool with the bundled hand-written tasks or any Harbor dataset's (validated
first), and exporting it as a Harbor dataset."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from aes_proto import subjects
from aes_proto.messages import CandidateEnv, Lineage, PoolEvent, PoolPlan, PoolReview

from aes_lib.bundle import Task, harbor_dataset, pack, unpack
from aes_lib.bundle.imported import ImportedNetwork, as_imported, dataset_tasks
from aes_lib.bundle.precheck import Precheck, precheck
from aes_lib.domains import domain_name
from aes_lib.domains.terminal import SEEDS_DIR
from aes_proto.records import PoolEntry
from aes_lib.config import Settings
from aes_lib.runners.pool_store import PoolStore
from aes_ops.connect import with_pool
from aes_ops.validation import image_cache

class SeedsNotFoundError(FileNotFoundError):
    """The seeds folder holds no task directory (one with a task.toml)."""


def seed_dirs(root: Path = SEEDS_DIR) -> list[Path]:
    dirs = sorted(p for p in root.iterdir() if (p / "task.toml").is_file()) if root.is_dir() else []
    if not dirs:
        raise SeedsNotFoundError(f"no task directories (with task.toml) under {root}")
    return dirs


def seed_entry(task_dir: Path, blobs, forgeable: str = "") -> PoolEntry:
    """Pack ``task_dir``, store the archive, and describe it as a pool entry (``forgeable``: the
    tamper probe's finding, for an imported task the operator seeds anyway)."""
    task = Task.load(task_dir)
    packed = pack(task_dir)
    ref = blobs.put_content("bundles", packed.data, suffix=".tar.gz")
    category = str(task.config.metadata.get("category", "")) if task.config.metadata else ""
    return PoolEntry(env_id=packed.sha256, bundle=ref, category=category, domain=domain_name(task.config.metadata),
                     source="seed", name=task.name, forgeable=forgeable,
                     episode_id=f"seed-{packed.sha256[:16]}")


async def seed_pool(bus, store: PoolStore, dirs: Sequence[Path],
                    forgeable: Mapping[Path, str] | None = None) -> list[PoolEvent]:
    """Admit every seed task once; re-seeding republishes the same event keys. ``forgeable``:
    the tamper probe's finding for those of ``dirs`` the operator seeds in spite of it."""
    events = []
    for d in dirs:
        entry = await asyncio.to_thread(seed_entry, d, bus.blobs, (forgeable or {}).get(d, ""))
        change = await store.admit(entry)
        assert change.admission is not None
        if change.admission.kind == "duplicate" and (known := await store.entry(entry.env_id)) and known.retired:
            continue  # retired by a review: seeding again must not revive it
        ev = PoolEvent(idempotency_key=f"pool:{entry.env_id}:admitted", episode_id=entry.episode_id,
                       env_id=entry.env_id, kind="admitted", reason="seed", pool_size=change.size)
        await bus.publish(subjects.POOL_EVENT, ev)
        events.append(ev)
    return events


async def send_to_calibration(bus, dirs: Sequence[Path]) -> list[CandidateEnv]:
    """Hand imported tasks without a reference solution to the calibrator: no oracle showed
    they can be solved, so the solver's attempts decide (admitted and marked ``no_reference``,
    or ``unverified_too_hard``). Keys derive from the content: sending again repeats them."""
    sent = []
    for d in dirs:
        entry = await asyncio.to_thread(seed_entry, d, bus.blobs)
        key = f"import-{entry.env_id[:16]}"
        c = CandidateEnv(idempotency_key=f"{key}:candidate", episode_id=key, env_id=entry.env_id, bundle=entry.bundle,
                         lineage=Lineage(assignment_id=key, category=entry.category, domain=entry.domain, mode="seed"),
                         route=("calibrate",), no_reference=True)
        await bus.publish(subjects.stage("calibrate"), c)
        sent.append(c)
    return sent


async def request_review(bus, *, round_: int = 0, fresh: int = 0, rerun: bool = True) -> str:
    """Ask the pool for a review (the solver reruns on the pool, out-of-band tasks retire,
    replacements are planned) or, without ``rerun``, for a plan only; the request's key."""
    key = f"review:manual:{uuid.uuid4().hex[:12]}"
    kind, subject = (PoolReview, subjects.POOL_REVIEW) if rerun else (PoolPlan, subjects.POOL_PLAN)
    await bus.publish(subject, kind(idempotency_key=key, episode_id=key, round=round_, fresh=fresh))
    return key


@dataclasses.dataclass(frozen=True)
class ImportedTask:
    """One task of an imported dataset, validated."""

    source: Path
    """The task folder in the dataset."""
    folder: Path
    """What was validated and is seeded: ``source``, or its copy with the network granted."""
    report: object
    """Its ``ValidationReport``."""
    how: str = "validated"
    """``validated``; ``prechecked`` (never built: unsupported or not loadable); ``resumed``
    (finished by an earlier run, read from the journal); ``duplicate`` (same content digest as
    another task of the dataset, validated once)."""


class Journal:
    """What a run has finished, one JSON line per task, appended as each ends and keyed by the
    task's content digest: a run killed at any point resumes without redoing those tasks (a
    torn last line is ignored)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.done: dict[str, dict] = {}
        if path is not None and path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                    self.done[entry["digest"]] = entry["report"]
                except (ValueError, KeyError, TypeError):
                    continue

    def record(self, digest: str, report) -> None:
        if self.path is None or not digest.startswith("sha256:"):
            return
        line = json.dumps({"digest": digest, "report": dataclasses.asdict(report)}) + "\n"
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self.done[digest] = dataclasses.asdict(report)


def prechecked_report(check: Precheck):
    """The verdict of a task that is not built: ``unsupported`` or ``invalid_bundle``."""
    from aes_lib.sandbox import ValidationReport

    reason = "unsupported" if check.verdict == "unsupported" else "invalid_bundle"
    detail = f"unsupported: {check.detail}" if reason == "unsupported" else check.detail
    return ValidationReport(task=check.task or check.path, ok=False, reason=reason, detail=detail)


async def validate_dataset(root: Path, images, scratch: Path, *, jobs: int = 1,
                           network: ImportedNetwork = "off",
                           progress: Callable[[Path, str], None] | None = None,
                           journal: Path | None = None,
                           checked: Callable[[list[Precheck]], None] | None = None,
                           require_reference: bool = False,
                           ) -> tuple[list[ImportedTask], list[str]]:
    """Validate every task of the Harbor dataset at ``root`` (``validate_in_domain``, ``jobs``
    at a time) as imported human-written tasks under the ``network`` policy; copies it makes
    go under ``scratch``, which must outlive the seeding. Every task is loaded and pre-checked
    first (``checked`` hears the verdicts before anything is built); only those that would
    build are validated, each content digest once, and none that ``journal`` records as
    finished. ``require_reference``: refuse tasks without a reference solution (``aes validate``
    of a dataset not marked imported). Returns the tasks and the index entries that name no
    local task (``dataset_tasks``)."""
    from aes_lib.domains.validation import validate_in_domain
    from aes_lib.sandbox import ValidationReport

    found = dataset_tasks(root)
    if not found.dirs:
        raise SeedsNotFoundError(f"no task directories (with task.toml) in the dataset at {root}")
    checks = await asyncio.to_thread(lambda: [precheck(d) for d in found.dirs])
    if checked:
        checked(checks)
    done = Journal(journal)
    # A verdict holds for the content under one policy: a rerun under another validates again.
    policy = f"network={network},reference={'required' if require_reference else 'optional'}"
    sem = asyncio.Semaphore(max(1, jobs))
    fields = {f.name for f in dataclasses.fields(ValidationReport)}
    first: dict[str, asyncio.Future] = {}

    async def validate(i: int, source: Path, digest: str) -> tuple[Path, object]:
        async with sem:
            folder = await asyncio.to_thread(as_imported, source, scratch / str(i), network)
            say = (lambda line: progress(source, line)) if progress else None
            report = await validate_in_domain(folder, images, caps=images.caps, progress=say,
                                              require_reference=require_reference)
        done.record(f"{digest} {policy}", report)
        return folder, report

    async def one(i: int, source: Path, check: Precheck) -> ImportedTask:
        if not check.would_build:
            return ImportedTask(source, source, prechecked_report(check), "prechecked")
        if f"{check.digest} {policy}" in done.done:
            d = {k: v for k, v in done.done[f"{check.digest} {policy}"].items() if k in fields}
            report = ValidationReport(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})  # JSON lists
            return ImportedTask(source, await asyncio.to_thread(as_imported, source, scratch / str(i), network),
                                report, "resumed")
        if check.digest and check.digest in first:
            folder, report = await first[check.digest]
            return ImportedTask(source, folder, report, "duplicate")
        job = asyncio.ensure_future(validate(i, source, check.digest))
        if check.digest:
            first[check.digest] = job
        folder, report = await job
        return ImportedTask(source, folder, report)

    tasks = await asyncio.gather(*(one(i, d, c) for i, (d, c) in enumerate(zip(found.dirs, checks))))
    return list(tasks), found.skipped


async def check_dataset(root: Path, *, allow_network: bool, network: ImportedNetwork = "off", jobs: int = 1,
                        journal: Path | None = None, require_reference: bool = False,
                        progress: Callable[[Path, str], None] | None = None,
                        checked: Callable[[list[Precheck]], None] | None = None,
                        ) -> tuple[list[ImportedTask], list[str]]:
    """``validate_dataset`` on the local Docker engine for the verdicts alone (``aes validate``
    of a dataset folder): the copies it makes are deleted at the end."""
    with tempfile.TemporaryDirectory(prefix="aes-validate-") as scratch:
        images = await image_cache(allow_network)
        return await validate_dataset(root, images, Path(scratch), jobs=jobs, network=network, journal=journal,
                                      require_reference=require_reference, progress=progress, checked=checked)


@dataclasses.dataclass(frozen=True)
class Import:
    """What ``import_dataset`` did."""

    tasks: list[ImportedTask]
    skipped: list[str]
    """Index entries that name no local task."""
    seeded: int = 0
    """Tasks admitted to the pool (a task already there is not counted again)."""
    sent: int = 0
    """Tasks without a reference solution sent to the calibrator."""
    pool: int | None = None
    """Active tasks in the pool afterwards; None: no task was valid, the stack was not asked."""


async def import_dataset(settings: Settings, root: Path, *, jobs: int = 1, journal: Path | None = None,
                         allow_forgeable: bool = False, report: Path | None = None,
                         progress: Callable[[Path, str], None] | None = None,
                         checked: Callable[[list[Precheck]], None] | None = None) -> Import:
    """Validate every task of the Harbor dataset at ``root`` as imported human-written tasks
    (``validate_dataset`` under ``settings.imported_network``), write ``report``, then seed the
    valid ones and send those without a reference solution to the calibrator. A forgeable task
    is seeded only with ``allow_forgeable``, flagged in the pool (and so left out of training
    waves unless AES_TRAINING_ALLOW_FORGEABLE=1)."""
    with tempfile.TemporaryDirectory(prefix="aes-import-") as scratch:  # the seeded copies live here
        # Imported tasks: the network their task.toml asks for where the operator allows it.
        images = await image_cache(allow_network=True)
        tasks, skipped = await validate_dataset(root, images, Path(scratch), jobs=jobs,
                                                network=settings.imported_network, progress=progress,
                                                journal=journal, checked=checked)
        if report:
            write_report(tasks, skipped, report)
        kept = [t for t in tasks if t.report.ok and t.how != "duplicate"]
        forgeable = {t.folder: t.report.detail for t in tasks if allow_forgeable and t.how != "duplicate"
                     and t.report.reason == "verifier_forgeable"}
        valid = [t.folder for t in kept if not t.report.no_reference] + list(forgeable)
        unverified = [t.folder for t in kept if t.report.no_reference]
        if not (valid or unverified):
            return Import(tasks, skipped)

        async def seed(bus, store: PoolStore) -> Import:
            events = await seed_pool(bus, store, valid, forgeable)
            sent = await send_to_calibration(bus, unverified)
            return Import(tasks, skipped, len(events), len(sent), len((await store.index()).active))

        return await with_pool("aes-cli", seed, settings)


def write_report(tasks: Sequence[ImportedTask], skipped: Sequence[str], path: Path) -> None:
    """The run as one JSON document: each task's source, how it was decided, and its report."""
    doc = {"tasks": [{"source": str(t.source), "how": t.how, **dataclasses.asdict(t.report)} for t in tasks],
           "skipped": list(skipped)}
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


_UNSAFE_NAME = re.compile(r"[^-_.A-Za-z0-9]")


def export(entries: Sequence[PoolEntry], blobs, dest: Path, name: str = "aes/pool") -> Path:
    """Write the pool as a Harbor dataset called ``name``: ``dest/<task>/`` per environment (a
    task directory ``harbor run -p`` accepts) and Harbor's manifest ``dest/dataset.toml``
    pinning each by its content digest, with the pool's record of each in its metadata."""
    harbor_dataset.check_dataset_name(name)
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise FileExistsError(f"{dest}: export needs an empty or new directory")
    tasks = []
    try:
        for e in entries:
            tmp = dest / f".{e.env_id}"
            task = unpack(blobs.get_bytes(e.bundle), tmp)
            short = _UNSAFE_NAME.sub("_", (task.name or e.env_id).split("/")[-1])
            folder = f"{short}-{e.env_id[:8]}"
            tmp.rename(dest / folder)
            task_name = task.name if task.name and harbor_dataset.valid_name(task.name) else f"aes/{folder}"
            tasks.append(harbor_dataset.DatasetTask(
                name=task_name, folder=folder, digest=harbor_dataset.content_digest(dest / folder),
                info={"env_id": e.env_id, "domain": e.domain, "category": e.category, "source": e.source,
                      "mean_reward": e.mean_reward, "round": e.round, "no_reference": e.no_reference or None}))
    except BaseException:
        # The folder was empty: leave it so, ready for the next try, rather than half a dataset.
        for child in dest.iterdir():
            shutil.rmtree(child)
        raise
    manifest = dest / harbor_dataset.MANIFEST
    manifest.write_text(harbor_dataset.manifest_text(name, tasks, f"{len(tasks)} environments exported by aes"))
    return manifest
