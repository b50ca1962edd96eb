"""Harbor 0.26 compatibility by hand: tasks our validator admits pass Harbor's own oracle run too.

For each task it validates with ``aes`` first, then, for the admitted ones, runs Harbor's
``oracle`` and ``nop`` agents (``aes_ops.harbor_ref``, which drops ``allow_internet = false``
before Harbor sees a task, and says why). A task is compatible when Harbor's oracle scores 1.0
and its nop below 0.5. CI runs the same comparison on its own fixtures (tests/harbor).

Setup, once: ``make harbor`` (Harbor in .venv-harbor). Run:
``.venv/bin/python bench/harbor_compat.py [TASK...]`` (default: every seed); exits 1 when an
admitted task fails under Harbor.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from aes_ops.harbor_ref import HarborJob, harbor_copy, run

ROOT = Path(__file__).resolve().parents[1]
HARBOR = ROOT / ".venv-harbor" / "bin" / "harbor"


def harbor_trials(task_dir: Path, work: Path) -> tuple[HarborJob, HarborJob]:
    """Harbor's oracle and nop jobs on a copy of ``task_dir``."""
    copy = harbor_copy(task_dir, work / "task" / task_dir.name)
    return run(HARBOR, copy, "oracle", work), run(HARBOR, copy, "nop", work)


def reward(job: HarborJob) -> float | None:
    return job.trials[0].reward if job.trials else None


def compatible(oracle: HarborJob, nop: HarborJob) -> bool:
    nop_reward = reward(nop)
    return reward(oracle) == 1.0 and nop_reward is not None and nop_reward < 0.5


async def _ours(paths: list[Path]):
    import docker

    from aes_lib.domains.kinds import DomainKinds
    from aes_lib.sandbox import ImageCache, validate_task

    images = ImageCache(docker.from_env(), kinds=DomainKinds())
    return [await validate_task(p, images) for p in paths]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="*", type=Path, help="task directories (default: seeds/*)")
    args = ap.parse_args()
    if not HARBOR.is_file():
        print(f"harbor unavailable: {HARBOR} missing (run `make harbor`)", file=sys.stderr)
        return 2
    paths = args.tasks or sorted(p.parent for p in (ROOT / "seeds").glob("*/task.toml"))
    failures = 0
    for path, ours in zip(paths, asyncio.run(_ours(paths))):
        if not ours.ok:
            print(f"{ours.task}: not admitted by aes ({ours.reason}), skipped")
            continue
        with tempfile.TemporaryDirectory(prefix="aes-harbor-") as tmp:
            oracle, nop = harbor_trials(path, Path(tmp))
        ok = compatible(oracle, nop)
        failures += not ok
        errors = " ".join(t.error for t in oracle.trials if t.error)
        print(f"{ours.task}: harbor oracle {reward(oracle)} nop {reward(nop)} -> {'ok' if ok else 'INCOMPATIBLE'}"
              f"{'  ' + errors if errors else ''}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
