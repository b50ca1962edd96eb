"""Harbor (the task format's reference implementation) run on a task or dataset folder, to
compare its verdicts with ours.

Harbor needs Python >= 3.12 and lives in a venv of its own (``make harbor`` creates
``.venv-harbor``; deploy/install_harbor.sh). :func:`run` calls ``harbor run -p DIR -a AGENT -e
docker`` and reads each trial's ``result.json`` (``verifier_result.rewards.reward``).

The one edit made before Harbor sees a task (:func:`harbor_copy`): ``allow_internet = false``
is dropped, because Harbor 0.26 enforces it on plain Docker with an egress-control sidecar
whose base image comes from a registry, and these machines reach none. Our sandbox enforces
that setting itself (``--network none``), so the comparison is of everything else.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

_NO_INTERNET = re.compile(r"(?m)^[ \t]*allow_internet[ \t]*=[ \t]*false[ \t]*(#.*)?\n?")


@dataclasses.dataclass(frozen=True)
class HarborTrial:
    task: str
    """The task's name as Harbor reports it."""
    reward: float | None
    """``verifier_result.rewards.reward``; None when Harbor produced none."""
    error: str = ""
    """Harbor's exception message for the trial, if any."""


@dataclasses.dataclass(frozen=True)
class HarborJob:
    trials: list[HarborTrial]
    seconds: float
    """Wall time of the ``harbor run`` process, start-up included."""
    output: str
    """The tail of Harbor's output (for a failure message)."""


class HarborMissingError(FileNotFoundError):
    """No Harbor install at the given path."""


def harbor_copy(src: Path, dest: Path) -> Path:
    """``src`` (a task or a dataset folder) copied to ``dest`` as Harbor gets it: unchanged
    but for each task.toml's dropped ``allow_internet = false``."""
    shutil.copytree(src, dest, symlinks=True)
    for toml in [dest / "task.toml", *dest.glob("*/task.toml")]:
        if toml.is_file():
            toml.write_text(_NO_INTERNET.sub("", toml.read_text()))
    return dest


def run(harbor: Path, path: Path, agent: str, work: Path, *, concurrent: int = 8,
        timeout: float = 1800) -> HarborJob:
    """``harbor run`` of ``agent`` (oracle, nop, ...) on ``path`` (used as is: see
    :func:`harbor_copy`), with jobs under ``work``. Trials mostly wait on Docker: on 2 cores the 15
    fixture trials of tests/harbor took 118 s at ``concurrent=8``, 151 s at 4 and 202 s at 2."""
    if not harbor.is_file():
        raise HarborMissingError(f"{harbor}: Harbor is not installed (run `make harbor`)")
    job = f"{agent}-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # no price-list download
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(harbor), "run", "-p", str(path), "-a", agent, "-e", "docker", "-n", str(concurrent),
         "-o", str(work / "jobs"), "--job-name", job, "-q", "-y"],
        env=env, cwd=work, capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - t0
    trials = []
    for result in sorted((work / "jobs" / job).glob("*/result.json")):
        data = json.loads(result.read_text())
        rewards = (data.get("verifier_result") or {}).get("rewards") or {}
        error = (data.get("exception_info") or {}).get("exception_message", "")
        trials.append(HarborTrial(str(data.get("task_name") or result.parent.name), rewards.get("reward"), error))
    return HarborJob(trials, seconds, (proc.stdout + proc.stderr)[-2000:])
