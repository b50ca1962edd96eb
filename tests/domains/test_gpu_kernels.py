"""The gpu-kernels domain on a machine without a GPU: its seeds are well-formed GPU tasks that
validation and the gate answer ``needs_gpu`` (never sent back), the gate's static rules, the
reference kernels' numerics under Triton's CPU interpreter, and the bench helper that runs
the seeds bare on a GPU host (its remapping, and the verifier it rewrites, run for real here).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from aes_lib.bundle import Task
from aes_lib.domains import domain_of, get
from aes_lib.gate import Judgement
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import VERIFIER_TEMPLATE, ImageCache, validate_task
from aes_lib.sandbox.images import base_images, gpu_engine

from aes_domains.gpu_kernels.gate import GpuKernelsGate

ROOT = Path(__file__).resolve().parents[2]
DOMAIN = get("gpu-kernels")
SEEDS = {p.name: p for p in DOMAIN.seeds}
KERNELS = {"fused-rmsnorm": "rmsnorm", "fused-bias-gelu": "bias_gelu"}
"""Each seed's function in /app/kernel.py."""


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = sys.modules[name] = importlib.util.module_from_spec(spec)  # dataclasses look it up
    spec.loader.exec_module(module)
    return module


bench = load_module(ROOT / "bench" / "gpu_domain.py", "gpu_domain_bench")


@pytest.fixture(scope="module")
def images():
    client = docker.from_env()
    if gpu_engine(client):
        pytest.fail("this Docker engine has a GPU runtime: these tests are about a machine without one")
    return ImageCache(client, kinds=DomainKinds())


def copy_seed(tmp_path: Path, seed: str = "fused-rmsnorm") -> Path:
    return Path(shutil.copytree(SEEDS[seed], tmp_path / seed))


def test_the_domain_declares_its_image_seeds_and_gate():
    assert (DOMAIN.name, DOMAIN.title, DOMAIN.image) == ("gpu-kernels", "GPU kernels", "aes-gpu-kernels:latest")
    assert set(SEEDS) == set(KERNELS)
    assert DOMAIN.gate_class() is GpuKernelsGate and GpuKernelsGate.stage == DOMAIN.name
    recipe = (DOMAIN.image_dir / "Dockerfile").read_text()
    assert re.findall(r"^FROM .*$", recipe, re.M) == ["FROM aes-base:latest"]
    assert re.search(r"pip3? install .*\btorch\b.*\btriton\b", recipe)
    assert "needs_gpu" in DOMAIN.proposer_guide and "gpus = 1" in DOMAIN.proposer_guide


@pytest.mark.parametrize("seed", sorted(KERNELS))
def test_seed_loads_as_an_offline_gpu_task(seed):
    task = Task.load(SEEDS[seed])
    assert task.name == f"aes-seeds/{seed}"
    assert domain_of(task) is DOMAIN
    env = task.config.environment
    assert env.gpus == 1 and env.allow_internet is False
    assert base_images(task.environment_dir / "Dockerfile", DomainKinds()) == [DOMAIN.image]
    assert not re.search(r"^\s*RUN\b", (task.environment_dir / "Dockerfile").read_text(), re.M)
    assert (task.root / "tests/test.sh").read_bytes() == (VERIFIER_TEMPLATE / "test.sh").read_bytes()
    assert "/app/kernel.py" in task.instruction and f"def {KERNELS[seed]}(" in task.instruction
    assert "/tests" not in (task.root / "solution/solve.sh").read_text()


@pytest.mark.docker
@pytest.mark.parametrize("seed", sorted(KERNELS))
def test_validation_says_needs_gpu(seed, images):
    report = asyncio.run(validate_task(SEEDS[seed], images))
    assert (report.ok, report.reason) == (False, "needs_gpu")
    assert "needs a GPU" in report.detail and report.oracle_reward is None


@pytest.mark.docker
def test_gate_says_needs_gpu_and_sends_nothing_back(images):
    gate = GpuKernelsGate(images=images)
    report = asyncio.run(gate.check_task(Task.load(SEEDS["fused-bias-gelu"]), images))
    assert (report.verdict.ok, report.verdict.stage, report.verdict.reason) == (False, "gpu-kernels", "needs_gpu")
    assert "needs a GPU" in report.verdict.detail
    assert gate.feedback(Judgement(report.verdict, report)) is None


@pytest.mark.docker
def test_gate_rejects_a_task_that_asks_for_no_gpu(tmp_path, images):
    task_dir = copy_seed(tmp_path)
    toml = task_dir / "task.toml"
    toml.write_text(re.sub(r"^gpus = 1\n", "", toml.read_text(), flags=re.M))
    gate = GpuKernelsGate(images=images)
    report = asyncio.run(gate.check_task(Task.load(task_dir), images))  # no GPU asked: no needs_gpu either
    assert (report.verdict.ok, report.verdict.reason) == (False, "no_gpu_requested")
    assert "gpus = 1" in report.verdict.detail
    assert gate.feedback(Judgement(report.verdict, report)) == ""  # the proposer's to fix: sent back


def test_gate_passes_the_seeds_static_rules():
    for seed in SEEDS.values():
        assert GpuKernelsGate().check(Task.load(seed)) is None, seed.name


def test_gate_rejects_tests_that_time_nothing(tmp_path):
    task_dir = copy_seed(tmp_path)
    harness = task_dir / "tests/harness.py"
    harness.write_text(harness.read_text().replace("torch._C._cuda_synchronize", "torch.cuda.current_stream"))
    verdict = GpuKernelsGate().check(Task.load(task_dir))
    assert (verdict.ok, verdict.reason) == (False, "no_eager_baseline")
    assert "time nothing on the GPU" in verdict.detail


def test_gate_rejects_tests_without_an_eager_baseline(tmp_path):
    task_dir = copy_seed(tmp_path, "fused-bias-gelu")
    for f in (task_dir / "tests").glob("*.py"):
        f.write_text(re.sub(r"eager", "base", f.read_text(), flags=re.I))
    verdict = GpuKernelsGate().check(Task.load(task_dir))
    assert (verdict.ok, verdict.reason) == (False, "no_eager_baseline")
    assert "name no eager baseline" in verdict.detail


CHECK_KERNEL = """
import importlib.util, os, sys, torch, triton
sys.path.insert(0, os.path.dirname(sys.argv[1]))  # the tests import timing.py beside them
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); return module
tests, kernel = load(sys.argv[1], "seed_tests"), load(sys.argv[2], "kernel")
assert any(isinstance(v, triton.runtime.KernelInterface) for v in vars(kernel).values()), "no Triton kernel"
for i, (name, (shape, dtype, *rest)) in enumerate(tests.CASES.items()):
    args = [*tests.make(shape, dtype, i), *rest]
    tests.check(getattr(kernel, sys.argv[3])(*args), *args)
    print("ok", name)
"""


def solve_and_check(seed: str, app: Path, edit=None) -> subprocess.CompletedProcess:
    """The seed's solve.sh writes kernel.py under ``app``; ``edit`` may change it; then the
    kernel runs in Triton's interpreter (CPU tensors) on every case the seed's tests check."""
    subprocess.run(["bash", str(SEEDS[seed] / "solution/solve.sh")], env={**os.environ, "APP": str(app)}, check=True)
    if edit:
        (app / "kernel.py").write_text(edit((app / "kernel.py").read_text()))
    return subprocess.run([sys.executable, "-c", CHECK_KERNEL, str(SEEDS[seed] / "tests/test_kernel.py"),
                           str(app / "kernel.py"), KERNELS[seed]],
                          # no bytecode: the seed folder stays as shipped
                          env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONDONTWRITEBYTECODE": "1"},
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("seed", sorted(KERNELS))
def test_reference_kernel_matches_torch_in_the_interpreter(seed, tmp_path):
    done = solve_and_check(seed, tmp_path / "app")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("ok ") == 6


def test_the_seed_tolerance_catches_a_wrong_kernel(tmp_path):
    done = solve_and_check("fused-rmsnorm", tmp_path / "app", edit=lambda s: s.replace("x * rstd * w", "x * rstd"))
    assert done.returncode != 0 and "Mismatched elements" in done.stderr


def test_bench_places_a_seed_under_a_root(tmp_path):
    placed = bench.place(SEEDS["fused-rmsnorm"], tmp_path, python="/opt/py/bin/python")
    assert placed.app == tmp_path / "app" and (placed.app / "reference.py").is_file()  # COPY app/ /app/
    assert (tmp_path / "tests/test_kernel.py").is_file() and placed.solve.is_file()
    verifier = placed.verifier.read_text()
    assert not re.search(r"(?<![\w.-])/(tests|logs)\b", verifier.replace(str(tmp_path), "ROOT"))
    assert f"cd {tmp_path}/tests" in verifier and f"{tmp_path}/logs/verifier/reward.txt" in verifier
    assert "python3" not in verifier and "/opt/py/bin/python -I -c" in verifier
    env = placed.env()
    assert env["APP"] == str(placed.app) and env["KERNEL_USER"] == "" and env["AES_TESTS_AS_ROOT"] == "1"
    subprocess.run(["bash", str(placed.solve)], env=placed.env(), check=True)
    assert "def rmsnorm(" in (placed.app / "kernel.py").read_text()
    assert not Path("/app/kernel.py").exists()


def test_bench_nop_run_scores_zero_at_the_remapped_reward_path():
    """The rewritten verifier and tests run here for real (no module, no CUDA): every test
    fails and the reward lands under the temporary root."""
    trial = bench.run_bare(SEEDS["fused-bias-gelu"], oracle=False, timeout=240)
    assert trial["reward"] == 0.0, trial["log_tail"]
    assert "harness exited" in trial["log_tail"]


def test_bench_script_parses():
    done = subprocess.run(["bash", "-n", str(ROOT / "bench/gpu_domain.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
