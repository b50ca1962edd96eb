"""Validate the gpu-kernels seeds for real on a GPU host (run by bench/gpu_domain.sh).

Two ways, each used when the host allows it:

* docker: ``aes validate`` on every seed, when the Docker engine has an NVIDIA runtime (the
  domain image installs torch from PyPI, so it also needs the network, or the image already built);
* bare: outside any container, with this python (torch with CUDA, Triton, pytest). ``place``
  lays a seed's files under a temporary root the way its image would (each ``COPY`` of its
  Dockerfile, ``solution/``, ``tests/``) and rewrites the managed verifier's absolute paths
  (``/tests``, ``/logs``) and ``python3`` to that root and interpreter; the seed's own files
  take ``/app`` from ``$APP``. Then the oracle (solve.sh, then the tests) and the nop (the
  tests alone) run, and the tests' ``KERNEL_TIMING`` line gives eager and kernel times.

Prints a table and writes a JSON record (machine, date, rewards, times).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEEDS_DIR = ROOT / "libs/aes_domains/gpu_kernels/seeds"
CONTAINER_PATHS = re.compile(r"(?<![\w./-])/(tests|logs)\b")
"""The managed verifier's absolute paths (``cd /tests``, ``/logs/verifier/reward.txt``)."""
PYTHON3 = re.compile(r"\bpython3\b")
TIMING = re.compile(r"^KERNEL_TIMING (\{.*\})$", re.M)
COPY = re.compile(r"^\s*COPY\s+(?:--\S+\s+)*(\S+)\s+(\S+)\s*$", re.I | re.M)
WORKDIR = re.compile(r"^\s*WORKDIR\s+(\S+)\s*$", re.I | re.M)


@dataclasses.dataclass
class Placed:
    """A seed laid out under ``root`` as its container would hold it."""

    root: Path
    app: Path
    solve: Path
    verifier: Path
    reward: Path

    def env(self) -> dict[str, str]:
        """The variables a bare run needs: the seed's ``/app`` under the root; the kernel runs
        as this user (there is no other user to drop to outside a container)."""
        # Bare, on a lent machine: the tests and the kernel run as the current user.
        return {**os.environ, "APP": str(self.app), "KERNEL_USER": "", "AES_TESTS_AS_ROOT": "1"}


def inside(root: Path, container_path: str) -> Path:
    """``container_path`` (absolute, in the image) under ``root``."""
    return root / container_path.lstrip("/")


def place(seed: Path, root: Path, python: str = sys.executable) -> Placed:
    """Copy ``seed``'s image files, solution and tests under ``root``, with the verifier's
    paths and interpreter rewritten to it; returns where things are."""
    env_dir = seed / "environment"
    dockerfile = (env_dir / "Dockerfile").read_text()
    for workdir in WORKDIR.findall(dockerfile):
        inside(root, workdir).mkdir(parents=True, exist_ok=True)
    for src, dst in COPY.findall(dockerfile):
        source, target = env_dir / src, inside(root, dst)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / source.name if dst.endswith("/") else target)
    shutil.copytree(seed / "solution", root / "solution")
    shutil.copytree(seed / "tests", root / "tests")
    verifier = root / "tests" / "test.sh"
    text = CONTAINER_PATHS.sub(lambda m: str(root / m.group(1)), verifier.read_text())
    verifier.write_text(PYTHON3.sub(lambda m: shlex.quote(python), text))
    (root / "logs" / "verifier").mkdir(parents=True)
    return Placed(root=root, app=inside(root, "/app"), solve=root / "solution" / "solve.sh", verifier=verifier,
                  reward=root / "logs" / "verifier" / "reward.txt")


def run_bare(seed: Path, oracle: bool, timeout: float) -> dict:
    """One trial outside a container: solve.sh first when ``oracle``, then the verifier."""
    with tempfile.TemporaryDirectory(prefix=f"gpu-{seed.name}-") as tmp:
        placed = place(seed, Path(tmp))
        t0, log = time.monotonic(), ""
        if oracle:
            solved = subprocess.run(["bash", str(placed.solve)], env=placed.env(), capture_output=True, text=True,
                                    timeout=timeout)
            log += solved.stdout + solved.stderr
        tested = subprocess.run(["bash", str(placed.verifier)], env=placed.env(), cwd=placed.app,
                                capture_output=True, text=True, timeout=timeout)
        log += tested.stdout + tested.stderr
        reward = float(placed.reward.read_text()) if placed.reward.is_file() else None
        timing = json.loads(m.group(1)) if (m := TIMING.search(log)) else {}
        return {"reward": reward, **timing, "seconds": round(time.monotonic() - t0, 1), "log_tail": log[-2500:]}


def docker_validate(seeds: list[Path], timeout: float) -> dict[str, dict]:
    """``aes validate --json`` on every seed; {seed name: its report}, or {} with the reason
    printed when this host cannot run it."""
    aes = shutil.which("aes")
    cmd = [aes] if aes else [sys.executable, "-m", "aes_cli.main"]
    try:
        proc = subprocess.run([*cmd, "validate", "--json", *map(str, seeds)], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        print(f"docker: aes validate ran past {timeout:.0f}s (building aes-gpu-kernels takes long the first time)")
        return {}
    try:
        reports = json.loads(proc.stdout)
    except json.JSONDecodeError:
        print(f"docker: aes validate gave no report (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-2000:]}")
        return {}
    return {Path(r["task"]).name: r for r in reports}  # "aes-seeds/<seed>"


def has_gpu_runtime() -> bool:
    try:
        out = subprocess.run(["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "nvidia" in out.stdout


def machine() -> dict:
    import torch
    import triton

    return {"host": platform.node(), "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "cuda": torch.version.cuda, "triton": triton.__version__, "python": platform.python_version()}


def fmt(x) -> str:
    return "-" if x is None else f"{x:.3g}" if isinstance(x, float) else str(x)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "bench/results/gpu_domain.json")
    p.add_argument("--timeout", type=float, default=240.0, help="seconds per bare trial")
    p.add_argument("--docker-timeout", type=float, default=240.0, help="seconds for aes validate in all")
    args = p.parse_args()
    seeds = sorted(s for s in SEEDS_DIR.iterdir() if (s / "task.toml").is_file())
    record = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
              "docker": has_gpu_runtime(), "seeds": {}}
    docker = docker_validate(seeds, args.docker_timeout) if record["docker"] else {}
    if not record["docker"]:
        print("docker: no engine with an NVIDIA runtime here; bare runs only")
    ok = True
    rows = [("SEED", "ORACLE", "NOP", "EAGER_MS", "KERNEL_MS", "RATIO", "DOCKER")]
    for seed in seeds:
        oracle, nop = run_bare(seed, True, args.timeout), run_bare(seed, False, args.timeout)
        ratio = oracle["kernel_ms"] / oracle["eager_ms"] if oracle.get("eager_ms") else None
        verdict = docker.get(seed.name)
        seed_ok = oracle["reward"] == 1.0 and nop["reward"] == 0.0 and (verdict is None or verdict["ok"])
        ok &= seed_ok
        record["seeds"][seed.name] = {"oracle": oracle, "nop": nop, "ratio": ratio, "docker": verdict, "ok": seed_ok}
        rows.append((seed.name, fmt(oracle["reward"]), fmt(nop["reward"]), fmt(oracle.get("eager_ms")),
                     fmt(oracle.get("kernel_ms")), fmt(ratio), verdict["reason"] if verdict else "-"))
        for name, trial in (("oracle", oracle), ("nop", nop)):
            if trial["reward"] != (1.0 if name == "oracle" else 0.0):
                print(f"--- {seed.name} {name}: reward {trial['reward']}\n{trial['log_tail']}")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print("\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows))
    record["ok"] = ok
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"{'ok' if ok else 'FAILED'}; record in {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
