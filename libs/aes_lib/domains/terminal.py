"""The default domain: a shell task in a container, judged by the common stages alone.
Its seeds are the top-level ``seeds/`` folder, installed as the data-only package ``aes_seeds``."""

import importlib.util
from pathlib import Path

from aes_lib.domains.base import Domain


def package_dir(name: str) -> Path:
    """Folder of the data-only package ``name`` (no ``__init__``, so found without importing)."""
    spec = importlib.util.find_spec(name)
    found = [Path(p) for p in (spec.submodule_search_locations or []) if Path(p).is_dir()] if spec else []
    if not found:
        raise ModuleNotFoundError(f"package {name} is not installed: reinstall autoenvscaling (make install)")
    return found[0]


SEEDS_DIR = package_dir("aes_seeds")
"""The bundled terminal seed tasks."""

DOMAIN = Domain(name="terminal", title="Terminal", root=Path(__file__).parent, seeds_dir=SEEDS_DIR)
