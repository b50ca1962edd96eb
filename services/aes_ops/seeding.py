"""Seeding the pool with the bundled hand-written tasks or any Harbor dataset's (validated
first), and exporting it as a Harbor dataset."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from aes_proto import subjects
from aes_proto.messages import PoolEvent

from aes_lib.bundle import Task, harbor_dataset, pack, unpack
from aes_lib.bundle.imported import ImportedNetwork, as_imported, dataset_tasks
from aes_lib.domains import domain_name
from aes_lib.domains.terminal import SEEDS_DIR
from aes_proto.records import PoolEntry
from aes_lib.flywheel.runners.pool_store import PoolStore

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


@dataclasses.dataclass(frozen=True)
class ImportedTask:
    """One task of an imported dataset, validated."""

    source: Path
    """The task folder in the dataset."""
    folder: Path
    """What was validated and is seeded: ``source``, or its copy with the network granted."""
    report: object
    """Its ``ValidationReport``."""


async def validate_dataset(root: Path, images, scratch: Path, *, jobs: int = 1,
                           network: ImportedNetwork = "off",
                           progress: Callable[[Path, str], None] | None = None) -> tuple[list[ImportedTask], list[str]]:
    """Validate every task of the Harbor dataset at ``root`` (``validate_in_domain``, ``jobs``
    at a time) as imported human-written tasks under the ``network`` policy; copies it makes
    go under ``scratch``, which must outlive the seeding. Returns the tasks and the index
    entries that name no local task (``dataset_tasks``)."""
    from aes_lib.domains.validation import validate_in_domain

    found = dataset_tasks(root)
    if not found.dirs:
        raise SeedsNotFoundError(f"no task directories (with task.toml) in the dataset at {root}")
    sem = asyncio.Semaphore(max(1, jobs))

    async def one(i: int, source: Path) -> ImportedTask:
        async with sem:
            folder = await asyncio.to_thread(as_imported, source, scratch / str(i), network)
            say = (lambda line: progress(source, line)) if progress else None
            report = await validate_in_domain(folder, images, caps=images.caps, progress=say)
        return ImportedTask(source, folder, report)

    tasks = await asyncio.gather(*(one(i, d) for i, d in enumerate(found.dirs)))
    return list(tasks), found.skipped


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
                      "mean_reward": e.mean_reward, "round": e.round}))
    except BaseException:
        # The folder was empty: leave it so, ready for the next try, rather than half a dataset.
        for child in dest.iterdir():
            shutil.rmtree(child)
        raise
    manifest = dest / harbor_dataset.MANIFEST
    manifest.write_text(harbor_dataset.manifest_text(name, tasks, f"{len(tasks)} environments exported by aes"))
    return manifest
