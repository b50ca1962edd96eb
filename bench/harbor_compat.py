"""Harbor 0.26 compatibility: tasks our validator admits pass Harbor's own oracle run too.

For each task it validates ``aes`` first, then, for the admitted ones, runs
``harbor run -p TASK -a oracle -e docker`` and ``-a nop`` and reads
``jobs/<job>/<trial>/result.json`` (``verifier_result.rewards.reward``). A task is
compatible when Harbor's oracle scores 1.0 and its nop below 0.5.

The one edit made to a task before Harbor sees it: the line ``allow_internet =
false`` is dropped, because Harbor 0.26's plain-Docker environment refuses to
run a no-network task (it needs egress-control sidecar images from a registry).

Setup, once (Harbor needs Python 3.12 and Docker Compose v2, absent from Debian 12):

    ~/.pyenv/versions/3.12.1/bin/python -m venv .venv-harbor
    .venv-harbor/bin/pip install 'harbor==0.26.*'
    # Compose v2 plugin from Debian trixie's docker-compose .deb, private to this venv:
    apt-get download docker-compose   # with a temporary sources list for trixie
    dpkg -x docker-compose_*.deb x && mkdir -p .venv-harbor/docker-config/cli-plugins
    cp x/usr/lib/docker/cli-plugins/docker-compose .venv-harbor/docker-config/cli-plugins/

Run: ``.venv/bin/python bench/harbor_compat.py [TASK...]`` (default: every seed);
exits 1 when an admitted task fails under Harbor.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARBOR = ROOT / ".venv-harbor" / "bin" / "harbor"
DOCKER_CONFIG = ROOT / ".venv-harbor" / "docker-config"


@dataclasses.dataclass(frozen=True)
class HarborRun:
    agent: str
    reward: float | None
    """``verifier_result.rewards.reward``; None when Harbor produced no reward."""
    seconds: float
    """Wall time of the ``harbor run`` process, start-up included."""
    error: str = ""


def unavailable() -> str:
    """Why Harbor cannot run here, or "" when it can."""
    if not HARBOR.exists():
        return f"{HARBOR} missing (see setup in bench/harbor_compat.py)"
    if not (DOCKER_CONFIG / "cli-plugins" / "docker-compose").exists():
        return "docker compose v2 plugin missing (see setup in bench/harbor_compat.py)"
    return ""


def harbor_copy(task_dir: Path, dest: Path) -> Path:
    """The task as Harbor gets it: unchanged but for a dropped ``allow_internet = false``."""
    out = dest / task_dir.name
    shutil.copytree(task_dir, out, symlinks=True)
    toml = out / "task.toml"
    toml.write_text(re.sub(r"(?m)^[ \t]*allow_internet[ \t]*=[ \t]*false[ \t]*\n?", "", toml.read_text()))
    return out


def harbor_trial(task_dir: Path, agent: str, work: Path) -> HarborRun:
    """One ``harbor run`` of ``agent`` (oracle or nop) on a copy of ``task_dir``."""
    job = f"{agent}-{uuid.uuid4().hex[:8]}"
    copy = harbor_copy(task_dir, work / job)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "DOCKER_CONFIG": str(DOCKER_CONFIG)}
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(HARBOR), "run", "-p", str(copy), "-a", agent, "-e", "docker", "-o", str(work / "jobs"),
         "--job-name", job, "-q", "-y"],
        env=env, cwd=work, capture_output=True, text=True, timeout=1800,
    )
    seconds = time.monotonic() - t0
    results = [p for p in (work / "jobs" / job).glob("*/result.json")]
    if not results:
        return HarborRun(agent, None, seconds, f"no trial result (exit {proc.returncode}): {proc.stdout[-500:]}")
    data = json.loads(results[0].read_text())
    rewards = (data.get("verifier_result") or {}).get("rewards") or {}
    error = (data.get("exception_info") or {}).get("exception_message", "") if data.get("exception_info") else ""
    return HarborRun(agent, rewards.get("reward"), seconds, error)


def compatible(oracle: HarborRun, nop: HarborRun) -> bool:
    return oracle.reward == 1.0 and nop.reward is not None and nop.reward < 0.5


async def _ours(paths: list[Path]):
    import docker

    from aes_lib.sandbox import ImageCache, validate_task

    images = ImageCache(docker.from_env())
    return [await validate_task(p, images) for p in paths]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="*", type=Path, help="task directories (default: seeds/*)")
    args = ap.parse_args()
    reason = unavailable()
    if reason:
        print(f"harbor unavailable: {reason}", file=sys.stderr)
        return 2
    paths = args.tasks or sorted(p.parent for p in (ROOT / "seeds").glob("*/task.toml"))
    failures = 0
    with tempfile.TemporaryDirectory(prefix="aes-harbor-") as tmp:
        for path, ours in zip(paths, asyncio.run(_ours(paths))):
            if not ours.ok:
                print(f"{ours.task}: not admitted by aes ({ours.reason}), skipped")
                continue
            oracle, nop = harbor_trial(path, "oracle", Path(tmp)), harbor_trial(path, "nop", Path(tmp))
            ok = compatible(oracle, nop)
            failures += not ok
            print(f"{ours.task}: harbor oracle {oracle.reward} nop {nop.reward} -> {'ok' if ok else 'INCOMPATIBLE'}"
                  f"{'  ' + oracle.error if oracle.error else ''}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
