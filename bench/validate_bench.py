"""Validation speed: against the raw Docker floor, against Harbor's CLI, and across replicas.

Measured in one run on the seed tasks (or the ``echo`` test fixture if there are none):

1. Per task, cold (the task's image absent): ``validate_task`` (bundle checks, build,
   oracle and nop trials concurrently from one image) against the raw Docker floor:
   the same ``docker build`` and the same two ``docker run`` (solve.sh then test.sh;
   test.sh alone), run concurrently, timed directly with the docker CLI. Warm (image
   present): the validator against the floor's two runs alone.
2. Harbor 0.26's CLI (``harbor run -a oracle`` then ``-a nop``, see
   ``bench/harbor_compat.py``) on the same tasks, with its rewards (if ``.venv-harbor`` exists).
3. Throughput of the validator service: K candidates over a real nats-server with
   1..N replica processes sharing the durable consumer (images warm).

Run: ``.venv/bin/python bench/validate_bench.py [--tasks 4] [--candidates 8] [--replicas 1,2,4] [--no-harbor]``;
writes ``bench/results/validate_bench.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import dataclasses
import datetime
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker

sys.path.insert(0, str(Path(__file__).parent))
import harbor_compat  # noqa: E402  (a sibling script)

from aes_proto import subjects  # noqa: E402
from aes_proto.messages import CandidateEnv, Lineage, ValidationResult  # noqa: E402

from aes_ops import stack  # noqa: E402
from aes_lib.bundle import Task, pack  # noqa: E402
from aes_lib.bus import Bus  # noqa: E402
from aes_lib.config import Settings  # noqa: E402
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache, environment_hash, validate_task  # noqa: E402
from aes_lib.sandbox.images import IMAGE_REPO  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "validate_bench.md"
FLOOR_TAG = "aes-bench-floor:latest"


@dataclasses.dataclass
class Row:
    task: str
    path: Path
    reason: str = ""
    floor_cold: float = 0.0
    ours_cold: float = 0.0
    floor_warm: float = 0.0
    floor_separate: float = 0.0
    """Warm, the verifier in a container of its own (``separate_floor``)."""
    ours_warm: float = 0.0
    harbor: float | None = None
    harbor_rewards: str = ""


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal"))
    return f"{os.cpu_count()} CPUs ({cpu}), {mem_kb / 2**20:.1f} GiB RAM, Python {platform.python_version()}"


def task_dirs(limit: int) -> list[Path]:
    seeds = sorted(p.parent for p in (ROOT / "seeds").glob("*/task.toml"))
    return (seeds or [ROOT / "tests" / "sandbox" / "tasks" / "echo"])[:limit]


def remove_image(client: docker.DockerClient, tag: str) -> None:
    try:
        client.images.remove(tag, force=True)
    except docker.errors.ImageNotFound:
        pass


def floor_runs(task: Task, image: str, work: Path) -> None:
    """The two trials with nothing but ``docker run``: oracle (solve.sh then test.sh) and nop (test.sh)."""
    procs = []
    for agent in ("oracle", "nop"):
        d = work / agent
        shutil.copytree(task.tests_dir, d / "tests")
        shutil.copytree(task.solution_dir, d / "solution")
        solve = "bash /solution/solve.sh >/dev/null 2>&1; " if agent == "oracle" else ""
        procs.append(subprocess.Popen(
            ["docker", "run", "--rm", "--network", "none", "--memory", "1024m", "--cpus", "1",
             "-v", f"{d / 'solution'}:/solution", "-v", f"{d / 'tests'}:/tests", image, "bash", "-c",
             f"{solve}mkdir -p /logs/verifier; bash /tests/test.sh >/dev/null 2>&1; cat /logs/verifier/reward.txt"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        ))
    for p in procs:
        p.communicate()


def _docker(*args: str, stdin=None) -> str:
    return subprocess.run(["docker", *args], input=stdin, capture_output=True, check=True).stdout.decode()


def separate_floor_trial(task: Task, image: str, agent: str) -> float:
    """One trial as our validator runs it, with nothing but the docker CLI: an agent's container
    and a verifier's container from the image; solve.sh in the first (oracle); what ``docker
    diff`` reports it added, changed and deleted carried into the second (no checks); the tests
    run there; both removed."""
    run = ["run", "-d", "--network", "none", "--memory", "1024m", "--cpus", "1", image, "sleep", "infinity"]
    a, v = (_docker(*run).strip() for _ in range(2))
    try:
        if agent == "oracle":
            _docker("cp", str(task.solution_dir), f"{a}:/solution")
            subprocess.run(["docker", "exec", a, "bash", "/solution/solve.sh"], capture_output=True)
        # What the agent added, changed and deleted, as Docker's own diff reports it.
        diff = [line.split(" ", 1) for line in _docker("diff", a).splitlines()]
        changed = "".join(f"{p}\n" for kind, p in diff if kind in "AC" and not p.startswith("/solution"))
        archive = subprocess.run(["docker", "exec", "-i", a, "tar", "--no-recursion", "-cf", "-", "-T", "-"],
                                 input=changed.encode(), capture_output=True).stdout
        deleted = [p for kind, p in diff if kind == "D"]
        if deleted:
            _docker("exec", v, "rm", "-rf", "--", *deleted)
        # Docker's own mounts (/etc/hosts...) refuse to be replaced: ignored, as our carry skips them.
        _docker("exec", "-i", v, "sh", "-c", "tar -xf - -C / 2>/dev/null; true", stdin=archive)
        _docker("cp", str(task.tests_dir), f"{v}:/tests")
        return float(_docker("exec", v, "bash", "-c", "mkdir -p /logs/verifier; bash /tests/test.sh >/dev/null 2>&1; "
                             "cat /logs/verifier/reward.txt"))
    finally:
        _docker("rm", "-f", a, v)


def separate_floor(task: Task, image: str) -> float:
    """Oracle and nop trials of ``separate_floor_trial``, concurrently (image present); the
    oracle must score 1 there too, or the floor would not be doing the work."""
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        oracle, nop = (f.result() for f in [pool.submit(separate_floor_trial, task, image, agent)
                                            for agent in ("oracle", "nop")])
    seconds = time.monotonic() - t0
    if oracle != 1.0:
        raise RuntimeError(f"{task.name}: the own-container floor's oracle scored {oracle} (nop {nop})")
    return seconds


def floor(task: Task, build: bool) -> float:
    t0 = time.monotonic()
    if build:
        subprocess.run(["docker", "build", "-q", "-t", FLOOR_TAG, str(task.environment_dir)],
                       check=True, capture_output=True)
    with tempfile.TemporaryDirectory(prefix="aes-floor-") as work:
        floor_runs(task, FLOOR_TAG, Path(work))
    return time.monotonic() - t0


async def per_task(paths: list[Path], client: docker.DockerClient, harbor: bool) -> list[Row]:
    images = ImageCache(client, kinds=DomainKinds())
    rows = []
    for path in paths:
        task = Task.load(path)
        row = Row(task=task.name, path=path)
        ours_tag = f"{IMAGE_REPO}:{environment_hash(task.environment_dir)[:32]}"
        remove_image(client, FLOOR_TAG)
        remove_image(client, ours_tag)
        row.floor_cold = floor(task, build=True)
        row.floor_warm = floor(task, build=False)
        row.floor_separate = separate_floor(task, FLOOR_TAG)
        remove_image(client, FLOOR_TAG)
        t0 = time.monotonic()
        report = await validate_task(path, images)
        row.ours_cold = time.monotonic() - t0
        row.reason = report.reason
        t0 = time.monotonic()
        await validate_task(path, images)
        row.ours_warm = time.monotonic() - t0
        if harbor and report.ok:
            with tempfile.TemporaryDirectory(prefix="aes-harbor-") as work:
                oracle, nop = harbor_compat.harbor_trials(path, Path(work))
            row.harbor = oracle.seconds + nop.seconds
            row.harbor_rewards = f"{harbor_compat.reward(oracle)} / {harbor_compat.reward(nop)}" + (
                "" if harbor_compat.compatible(oracle, nop) else " INCOMPATIBLE")
        print(f"{row.task}: {row.reason} floor {row.floor_cold:.1f}s aes {row.ours_cold:.1f}s harbor {row.harbor}", flush=True)
        rows.append(row)
    return rows


async def replicas_run(paths: list[Path], n_candidates: int, replicas: int) -> float:
    """Seconds for ``replicas`` validator processes to validate ``n_candidates`` candidates."""
    packed = [pack(p) for p in paths]
    with tempfile.TemporaryDirectory(prefix="aes-bench-") as home:
        services = {f"validator-{i}": "aes_services.validator:ValidatorService" for i in range(replicas)}
        settings = stack.up(Settings(home=Path(home)), services=services, model=False)
        try:
            async with await Bus.connect(settings, name="bench") as bus:
                cands = []
                for i in range(n_candidates):
                    b = packed[i % len(packed)]
                    ref = bus.blobs.put_content("bundles", b.data, ".tar.gz")
                    cands.append(CandidateEnv(idempotency_key=f"c{i}", episode_id=f"e{i}", env_id=b.sha256,
                                              bundle=ref, lineage=Lineage(assignment_id=f"a{i}"),
                                              route=("validate", "next")))
                t0 = time.monotonic()
                for c in cands:
                    await bus.publish(subjects.stage("validate"), c)
                while len(await bus.history(subjects.RESULT_VALIDATION, ValidationResult, timeout=0.2)) < n_candidates:
                    await asyncio.sleep(0.2)
                return time.monotonic() - t0
        finally:
            stack.down(Path(home))


def render(rows: list[Row], scaling: dict[int, float], n_candidates: int, harbor_note: str, repeats: int,
           load: float, replica_tasks: list[str]) -> str:
    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}" if b else "-"

    lines = [
        "# Validation benchmark", "",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"- Machine: {machine()}",
        f"- Docker: {docker.from_env().version().get('Version')}; tasks: {len(rows)} "
        f"({'seeds' if (ROOT / 'seeds').exists() else 'fixture'}); load average at start {load:.1f} "
        "(other processes share the CPUs, so single timings are noisy).",
        "",
        "## Per task: aes validator against the raw Docker floor and Harbor's CLI", "",
        "Cold: the task's image absent (build + oracle + nop). Warm: image present (two trials only).",
        "Floor: `docker build` + two `docker run` (oracle: solve.sh then test.sh; nop: test.sh) concurrently, via the",
        "docker CLI: the tests run in the container the solution ran in. Own-container floor (warm): the same two",
        "trials as our validator runs them, with the docker CLI alone: an agent's and a verifier's container each,",
        "what `docker diff` says the agent added, changed and deleted carried across (no checks), the tests in the second.",
        "Harbor: `harbor run -a oracle` then `harbor run -a nop` (it builds on each run).", "",
        "| task | verdict | floor cold s | aes cold s | aes/floor | floor warm s | aes warm s | aes/floor | "
        "own-container floor warm s | aes/own-container floor | harbor s | harbor/aes cold | harbor oracle / nop |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        h = f"{r.harbor:.1f}" if r.harbor is not None else "-"
        lines.append(
            f"| {r.task} | {r.reason} | {r.floor_cold:.1f} | {r.ours_cold:.1f} | {ratio(r.ours_cold, r.floor_cold)} | "
            f"{r.floor_warm:.1f} | {r.ours_warm:.1f} | {ratio(r.ours_warm, r.floor_warm)} | "
            f"{r.floor_separate:.1f} | {ratio(r.ours_warm, r.floor_separate)} | {h} | "
            f"{ratio(r.harbor, r.ours_cold) if r.harbor is not None else '-'} | {r.harbor_rewards or '-'} |"
        )
    tot = {k: sum(getattr(r, k) for r in rows)
           for k in ("floor_cold", "ours_cold", "floor_warm", "ours_warm", "floor_separate")}
    hrows = [r for r in rows if r.harbor is not None]
    h_tot = sum(r.harbor for r in hrows)
    h_ours = sum(r.ours_cold for r in hrows)
    lines.append(
        f"| **total** | | {tot['floor_cold']:.1f} | {tot['ours_cold']:.1f} | {ratio(tot['ours_cold'], tot['floor_cold'])} | "
        f"{tot['floor_warm']:.1f} | {tot['ours_warm']:.1f} | {ratio(tot['ours_warm'], tot['floor_warm'])} | "
        f"{tot['floor_separate']:.1f} | {ratio(tot['ours_warm'], tot['floor_separate'])} | {h_tot:.1f} | {ratio(h_tot, h_ours) if hrows else '-'} | |"
    )
    lines += ["", harbor_note, "", "## Validator service replicas", "",
              f"{n_candidates} candidates published at once over a real nats-server; N `aes service` processes "
              f"share the durable consumer (one candidate each at a time); images warm; best of {repeats} rounds; "
              f"candidates cycle over the quickest tasks ({', '.join(replica_tasks)}).", "",
              "| replicas | seconds | candidates/min | speed-up vs 1 |", "|---|---|---|---|"]
    base = scaling.get(min(scaling)) if scaling else 0
    for n, s in sorted(scaling.items()):
        lines.append(f"| {n} | {s:.1f} | {60 * n_candidates / s:.1f} | {ratio(base, s)} |")
    return "\n".join(lines) + "\n"


async def main_async(args: argparse.Namespace) -> str:
    load = os.getloadavg()[0]
    client = docker.from_env()
    paths = task_dirs(args.tasks)
    reason = "" if args.no_harbor or harbor_compat.HARBOR.is_file() else f"{harbor_compat.HARBOR} missing"
    harbor = not args.no_harbor and not reason
    rows = await per_task(paths, client, harbor)
    # Other processes share the machine: take the best of a few interleaved rounds.
    counts = [int(x) for x in args.replicas.split(",")]
    runs: dict[int, list[float]] = {n: [] for n in counts}
    # The quickest tasks, so that no single long validation bounds the makespan.
    quick = [r.path for r in sorted(rows, key=lambda r: r.ours_warm)[: args.replica_tasks]]
    for _ in range(args.repeats):
        for n in counts:
            runs[n].append(await replicas_run(quick, args.candidates, n))
            print(f"replicas {n}: {runs[n][-1]:.1f}s", flush=True)
    scaling = {n: min(t) for n, t in runs.items()}
    note = ("Harbor was not run: " + (reason or "--no-harbor")) if not harbor else (
        "Harbor's copy of each task drops `allow_internet = false` (its plain-Docker environment refuses "
        "no-network tasks); nothing else changes. Its time is the wall time of the two `harbor run` processes.")
    return render(rows, scaling, args.candidates, note, args.repeats, load, [q.name for q in quick])


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: at least 1 round is needed for a best-of figure")
    return value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=4, help="how many seed tasks (default 4)")
    ap.add_argument("--candidates", type=int, default=8, help="candidates for the replica runs (default 8)")
    ap.add_argument("--replicas", default="1,2,4", help="replica counts (default 1,2,4)")
    ap.add_argument("--replica-tasks", type=int, default=4, help="quickest tasks cycled in the replica runs (default 4)")
    ap.add_argument("--repeats", type=_at_least_one, default=2, help="rounds of replica runs; the best counts (default 2)")
    ap.add_argument("--no-harbor", action="store_true", help="skip Harbor's CLI")
    args = ap.parse_args()
    report = asyncio.run(main_async(args))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
