"""Run a seed task the way Harbor does, with plain Docker (the raw floor the validator is measured against).

One trial: start a container from the task image with no network and the task's limits, optionally
copy ``solution/`` to ``/solution`` and run ``solve.sh`` (the oracle), then empty ``/logs/verifier``,
copy ``tests/`` to ``/tests``, run ``test.sh`` and read ``/logs/verifier/reward.txt``.

Usage while authoring: ``python tests/seeds/seed_runner.py seeds/<name> [...]`` prints oracle and nop rewards.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import sys
import tarfile
import tomllib
from pathlib import Path

import docker

LABELS = {"aes.managed": "1", "aes.owner": "tests.seeds"}


@dataclasses.dataclass(frozen=True)
class TrialOutcome:
    """Result of one plain-Docker trial."""

    reward: float
    """Reward read from /logs/verifier/reward.txt (0.0 when the verifier wrote none)."""
    solve_exit: int | None
    """Exit code of solve.sh (124 on timeout); None when no solution was run."""
    solve_output: str
    """Combined output of solve.sh."""
    verifier_output: str
    """Combined output of test.sh."""


def _dir_tar(src: Path, arcname: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(src, arcname=arcname)
    return buf.getvalue()


def _config(task_dir: Path) -> dict:
    return tomllib.loads((task_dir / "task.toml").read_text())


def build_image(client: docker.DockerClient, task_dir: Path) -> str:
    """Build the task's environment image, tagged by a hash of the environment folder."""
    env_dir = task_dir / "environment"
    digest = hashlib.sha256()
    for path in sorted(p for p in env_dir.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(env_dir)).encode() + b"\0" + path.read_bytes())
    tag = f"aes-seed-{task_dir.name}:{digest.hexdigest()[:12]}"
    client.images.build(path=str(env_dir), tag=tag, rm=True, forcerm=True, network_mode="none", labels=LABELS)
    return tag


def _exec(container, cmd: str, timeout: float) -> tuple[int, str]:
    # exec_run has no timeout of its own; coreutils `timeout` exits 124 when it fires.
    result = container.exec_run(["timeout", "-k", "5", str(int(timeout)), "bash", "-c", cmd])
    return result.exit_code, result.output.decode(errors="replace")


def run_trial(client: docker.DockerClient, task_dir: Path, image: str, with_solution: bool) -> TrialOutcome:
    """Run one trial (oracle when ``with_solution``, otherwise nop) and return the verifier's reward."""
    cfg = _config(task_dir)
    env = cfg.get("environment", {})
    container = client.containers.run(
        image,
        command=["sleep", "infinity"],
        detach=True,
        network_mode="none",
        labels=LABELS,
        mem_limit=f"{env.get('memory_mb', 1024)}m",
        nano_cpus=int(float(env.get("cpus", 1)) * 1e9),
        pids_limit=512,
    )
    try:
        solve_exit, solve_output = None, ""
        if with_solution:
            container.put_archive("/", _dir_tar(task_dir / "solution", "solution"))
            solve_exit, solve_output = _exec(container, "bash /solution/solve.sh", cfg["agent"]["timeout_sec"])
        # Harbor runs the verifier after the agent; rewards planted by the agent must not count.
        _exec(container, "rm -rf /logs/verifier && mkdir -p /logs/verifier && rm -rf /tests", 30)
        container.put_archive("/", _dir_tar(task_dir / "tests", "tests"))
        _, verifier_output = _exec(container, "bash /tests/test.sh", cfg["verifier"]["timeout_sec"])
        code, text = _exec(container, "cat /logs/verifier/reward.txt", 30)
        reward = float(text.strip()) if code == 0 and text.strip() else 0.0
        return TrialOutcome(reward, solve_exit, solve_output, verifier_output)
    finally:
        container.remove(force=True)


def main(paths: list[str]) -> None:
    client = docker.from_env()
    for path in paths:
        task_dir = Path(path).resolve()
        image = build_image(client, task_dir)
        oracle = run_trial(client, task_dir, image, with_solution=True)
        nop = run_trial(client, task_dir, image, with_solution=False)
        print(f"{task_dir.name}: oracle={oracle.reward} (solve exit {oracle.solve_exit}) nop={nop.reward}")
        if oracle.reward != 1.0:
            print(oracle.solve_output[-3000:], oracle.verifier_output[-5000:], sep="\n----\n")
        if nop.reward >= 0.5:
            print(nop.verifier_output[-3000:])


if __name__ == "__main__":
    main(sys.argv[1:])
