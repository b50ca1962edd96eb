"""The layers import downward only, between the packages and inside ``aes_lib``.

Between packages: proto <- aes_lib <- aes_domains <- services <- operator tools and CLI. A
library module that imports a service or the CLI makes every service carry the operator's code
(and its import cycles); the wire contract imports nothing of ours. The library finds the
domains this project ships (``aes_domains``) the way it finds a third party's, by entry point,
so it imports none; the services reach them through that registry too, and no domain imports
another (each could ship as a package of its own).

Inside ``aes_lib``: the floors of ``FLOORS`` (docs/ARCHITECTURE.md, "Floors inside aes_lib"
says why each sits where it does). A unit (a top-level folder or module) imports only units
on its own floor or below, and no two units import
each other. Every import counts: inside functions and under ``TYPE_CHECKING`` too, as each
is knowledge of the module it names.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "libs" / "aes_lib"
DOMAINS = ROOT / "libs" / "aes_domains"
FORBIDDEN = {
    "proto/aes_proto": ("aes_lib", "aes_domains", "aes_services", "aes_ops", "aes_cli", "kernels"),
    "libs/aes_lib": ("aes_domains", "aes_services", "aes_ops", "aes_cli"),
    "libs/aes_domains": ("aes_services", "aes_ops", "aes_cli"),
    # ``aes domains hil-settings`` (aes_cli) is the one command about one domain's files.
    "services/aes_services": ("aes_domains", "aes_ops", "aes_cli"),
    "services/aes_ops": ("aes_domains", "aes_cli"),
}

FLOORS: tuple[frozenset[str], ...] = tuple(map(frozenset, (
    # 0 ground: settings, bundles, storage, observability, the fault policy, small shared types
    {"config", "profiles", "bundle", "blobstore", "checkpoints", "telemetry", "logs", "faults", "text", "tools"},
    # 1 machinery: messaging and the Docker sandbox; neither knows a domain, a model or a policy
    {"service", "bus", "admission", "sandbox"},
    # 2 training: batches, advantages, DPPO, the checkpoints it publishes
    {"learner"},
    # 3 models: endpoints, the chat client, engines that serve the learner's weights
    {"models"},
    # 4 weight transports: how the trainer's versions reach the engines (filesystem, store, nccl)
    {"weights"},
    # 5 rules and judges: the flywheel's pure rules, n-gram index, rubric review, metric series
    {"flywheel", "contamination", "review", "tracking"},
    # 6 the admission stage base
    {"gate"},
    # 7 the domain plug-in contract and registry (the plug-ins: aes_domains); task families (procedural tasks)
    {"domains", "families"},
    # 8 agents: the solver and the proposer, which use the domains
    {"agents"},
    # 9 what carries the flywheel's rules out with agents, sandbox and bus
    {"runners"},
    # 10 assembly: every settings class in one place
    {"runconfig", "settings_table"},
)))

ALLOWED: dict[tuple[str, str], str] = {
    # Each entry: an upward import that is known, and what removes it. An entry that no
    # import needs any more fails the test, so the list only shrinks.
}


@dataclasses.dataclass(frozen=True)
class Import:
    """One import statement's arrow between two units, and where it is."""

    source: str
    target: str
    file: str
    line: int
    module: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.source} -> {self.target} ({self.module})"


def unit_of(module: str) -> str | None:
    """The unit of ``aes_lib.x.y...`` (``x``); None outside aes_lib."""
    parts = module.split(".")
    return parts[1] if parts[0] == "aes_lib" and len(parts) >= 2 else None


def _module_name(path: Path, root: Path) -> tuple[str, list[str]]:
    """The dotted name of ``path`` under ``root``'s parent, and the package it resolves relative imports in."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
        return ".".join(parts), parts
    return ".".join(parts), parts[:-1]


def _imported(path: Path, package: list[str]) -> list[tuple[ast.stmt, str | None, list[str]]]:
    """Each import statement of ``path``, the package a ``from`` import reads (None for a plain
    import) and the dotted names it imports (``X.a`` for ``from X import a``: a name or a submodule)."""
    out: list[tuple[ast.stmt, str | None, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.append((node, None, [a.name for a in node.names]))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            out.append((node, base, [f"{base}.{a.name}" for a in node.names]))
    return out


def imports_of(path: Path, root: Path = LIB) -> list[Import]:
    """Every arrow from ``path``'s unit to another unit of the library rooted at ``root``."""
    name, package = _module_name(path, root)
    source = unit_of(name) or name  # the package root is a unit no floor lists: it must import nothing
    out: list[Import] = []
    for node, base, names in _imported(path, package):
        # ``from aes_lib import models`` names a unit in the imported names
        targets = names if base in (None, "aes_lib") else [base, *names]
        seen: set[str] = set()
        for module in targets:
            target = unit_of(module)
            if target and target != source and target not in seen:
                seen.add(target)
                out.append(Import(source, target, str(path.relative_to(root.parent)), node.lineno, module))
    return out


def library_imports(root: Path = LIB) -> list[Import]:
    files = sorted(root.rglob("*.py"))
    assert files, f"no modules under {root}"
    return [i for f in files for i in imports_of(f, root)]


def module_imports(root: Path = LIB) -> dict[str, set[str]]:
    """Each module of the library and the modules of it that it imports. ``from pkg import a``
    counts as an import of ``pkg.a`` where that is a module, else of ``pkg``: the names a
    package re-exports are its submodules' knowledge, not a circle through it."""
    files = {_module_name(f, root)[0]: f for f in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        out: set[str] = set()
        for _, base, names in _imported(path, _module_name(path, root)[1]):
            modules = {n for n in names if n in files}
            out |= modules | ({base} if base in files and len(modules) < len(names) else set())
        graph[name] = out - {name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules that reach each other through imports, one sorted list per circle."""
    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reached = {m: reach(m) for m in graph}
    circles = {tuple(sorted({m} | {o for o in reached[m] if m in reached[o]})) for m in graph if m in reached[m]}
    return sorted(map(list, circles))


def floor_of(unit: str, floors: tuple[frozenset[str], ...] = FLOORS) -> int:
    for n, members in enumerate(floors):
        if unit in members:
            return n
    raise LookupError(f"{unit} is on no floor: add it to FLOORS and docs/ARCHITECTURE.md")


def unplaced(imports: list[Import], units: set[str], floors: tuple[frozenset[str], ...] = FLOORS) -> list[str]:
    """Units of the library that no floor names."""
    placed = set().union(*floors)
    return sorted({u for u in units if u not in placed} | {u for i in imports for u in (i.source, i.target)
                                                            if u not in placed})


def upward(imports: list[Import], floors: tuple[frozenset[str], ...] = FLOORS,
           allowed: dict[tuple[str, str], str] = ALLOWED) -> list[Import]:
    """Imports of a unit on a higher floor, bar the allowed ones."""
    return [i for i in imports if (i.source, i.target) not in allowed
            and floor_of(i.target, floors) > floor_of(i.source, floors)]


def mutual(imports: list[Import], allowed: dict[tuple[str, str], str] = ALLOWED) -> list[tuple[Import, Import]]:
    """Pairs of units that import each other (bar those an allowed import makes): one import
    each way, as evidence."""
    first: dict[tuple[str, str], Import] = {}
    for i in imports:
        first.setdefault((i.source, i.target), i)
    return [(i, first[(b, a)]) for (a, b), i in sorted(first.items())
            if a < b and (b, a) in first and (a, b) not in allowed and (b, a) not in allowed]


def _units(root: Path = LIB) -> set[str]:
    units = {unit_of(_module_name(f, root)[0]) for f in root.rglob("*.py")}
    return {u for u in units if u}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_module_imports_a_layer_above_it(package: str) -> None:
    def tops(path: Path) -> set[str]:
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                out.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out.add(node.module.split(".")[0])
        return out

    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no modules under {package}"
    found = {str(f.relative_to(ROOT)): sorted(tops(f) & set(FORBIDDEN[package])) for f in files}
    assert {f: names for f, names in found.items() if names} == {}


def test_no_domain_imports_another() -> None:
    found = [str(i) for d in sorted(p for p in DOMAINS.iterdir() if (p / "__init__.py").is_file())
             for i in imports_of_domains(d)]
    assert found == []


def imports_of_domains(domain: Path) -> list[str]:
    """``file:line: module`` of each import in ``domain``'s modules that names another of ``aes_domains``."""
    out: list[str] = []
    for path in sorted(domain.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            out += [f"{path.relative_to(domain.parent)}:{node.lineno}: {n}" for n in names
                    if n.split(".")[0] == "aes_domains" and n.split(".")[1:2] != [domain.name]]
    return out


def test_every_unit_of_the_library_has_a_floor() -> None:
    assert unplaced(library_imports(), _units()) == [], "add it to FLOORS and docs/ARCHITECTURE.md"
    assert sum(len(f) for f in FLOORS) == len(set().union(*FLOORS)), "a unit on two floors"


def test_no_import_runs_up_a_floor() -> None:
    found = upward(library_imports())
    assert not found, "imports that run up a floor:\n" + "\n".join(map(str, found))


def test_no_two_units_import_each_other() -> None:
    found = mutual(library_imports())
    assert not found, "units that import each other:\n" + "\n".join(f"{a}\n  <-> {b}" for a, b in found)


def test_no_modules_import_in_a_circle() -> None:
    # Inside a unit too: an interface that imports its implementations (the weights transports
    # once did) ties every implementation to every other.
    assert import_cycles(module_imports()) == []


def test_every_allowed_upward_import_still_exists() -> None:
    arrows = {(i.source, i.target) for i in library_imports()}
    assert sorted(set(ALLOWED) - arrows) == [], "that import is gone: remove its ALLOWED entry"
    assert all(floor_of(t) > floor_of(s) for s, t in ALLOWED), "an ALLOWED entry that does not run up"


# -- tests of the checks above, on a planted library --------------------------------------------

PLANTED_FLOORS = tuple(map(frozenset, ({"config"}, {"sandbox"}, {"domains"})))


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "aes_lib"
    for name, text in {"__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_a_planted_upward_import_is_named(tmp_path: Path) -> None:
    root = _plant(tmp_path, {
        "config.py": "",
        "domains/__init__.py": "from aes_lib.sandbox import trial\n",
        "sandbox/__init__.py": "",
        "sandbox/trial.py": "import os\n\n\ndef startup():\n    from aes_lib.domains.registry import domain_of\n",
    })
    found = upward(library_imports(root), PLANTED_FLOORS, allowed={})
    assert [str(i) for i in found] == [
        "aes_lib/sandbox/trial.py:5: sandbox -> domains (aes_lib.domains.registry)"]
    assert upward(library_imports(root), PLANTED_FLOORS, allowed={("sandbox", "domains"): "planted"}) == []


def test_relative_and_package_imports_count(tmp_path: Path) -> None:
    root = _plant(tmp_path, {
        "config.py": "from . import sandbox\n",
        "sandbox/__init__.py": "",
        "sandbox/images.py": "from ..domains import base\nfrom aes_lib import domains\n",
        "domains/__init__.py": "",
    })
    assert [(i.source, i.target, i.line) for i in library_imports(root)] == [
        ("config", "sandbox", 1), ("sandbox", "domains", 1), ("sandbox", "domains", 2)]


def test_a_planted_pair_that_imports_each_other_is_found(tmp_path: Path) -> None:
    root = _plant(tmp_path, {
        "config.py": "",
        "domains/__init__.py": "from aes_lib.sandbox.trial import run_trial\n",
        "sandbox/__init__.py": "",
        "sandbox/trial.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from aes_lib.domains import Domain\n",
    })
    pairs = mutual(library_imports(root), allowed={})
    assert [(str(a), str(b)) for a, b in pairs] == [(
        "aes_lib/domains/__init__.py:1: domains -> sandbox (aes_lib.sandbox.trial)",
        "aes_lib/sandbox/trial.py:3: sandbox -> domains (aes_lib.domains)")]


def test_a_planted_circle_of_modules_is_found(tmp_path: Path) -> None:
    root = _plant(tmp_path, {
        "weights/__init__.py": "from aes_lib.weights.transport import publish\n",
        "weights/transport.py": "def publish():\n    from aes_lib.weights.store import Store\n",
        "weights/store.py": "from aes_lib.weights import transport\n",
        "weights/filesystem.py": "from aes_lib.weights.transport import publish\n",
    })
    graph = module_imports(root)
    assert graph["aes_lib.weights.store"] == {"aes_lib.weights.transport"}  # the submodule, not the package
    assert import_cycles(graph) == [["aes_lib.weights.store", "aes_lib.weights.transport"]]
    (root / "weights" / "transport.py").write_text("def publish():\n    pass\n")
    assert import_cycles(module_imports(root)) == []


def test_a_unit_without_a_floor_is_named(tmp_path: Path) -> None:
    root = _plant(tmp_path, {"config.py": "", "newthing.py": "from aes_lib import config\n"})
    assert unplaced(library_imports(root), _units(root), PLANTED_FLOORS) == ["newthing"]
    (root / "__init__.py").write_text("from aes_lib.config import x\n")
    assert unplaced(library_imports(root), _units(root), PLANTED_FLOORS) == ["aes_lib", "newthing"]


def test_a_planted_import_of_another_domain_is_named(tmp_path: Path) -> None:
    for name, text in {"swe/__init__.py": "from aes_lib.domains.base import Domain\nimport aes_domains.swe.gate\n",
                       "swe/gate.py": "def f():\n    from aes_domains.browser import APP_URL\n"}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert imports_of_domains(tmp_path / "swe") == ["swe/gate.py:2: aes_domains.browser"]


def test_a_unit_is_the_top_level_folder_or_module() -> None:
    assert unit_of("aes_lib.runners.pool_store") == unit_of("aes_lib.runners") == "runners"
    assert unit_of("aes_lib.flywheel.config") == "flywheel"
    assert unit_of("aes_lib.flywheel_extra") == "flywheel_extra"
    assert unit_of("aes_proto.messages") is None
