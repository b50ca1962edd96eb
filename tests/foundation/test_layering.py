"""The layers import downward only: proto <- aes_lib <- services <- operator tools and CLI.

A library module that imports a service or the CLI makes every service carry the
operator's code (and its import cycles); the wire contract imports nothing of ours.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "proto/aes_proto": ("aes_lib", "aes_services", "aes_ops", "aes_cli", "kernels"),
    "libs/aes_lib": ("aes_services", "aes_ops", "aes_cli"),
    "services/aes_services": ("aes_ops", "aes_cli"),
    "services/aes_ops": ("aes_cli",),
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_module_imports_a_layer_above_it(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no modules under {package}"
    upward = {str(f.relative_to(ROOT)): sorted(_imports(f) & set(FORBIDDEN[package])) for f in files}
    assert {f: names for f, names in upward.items() if names} == {}
