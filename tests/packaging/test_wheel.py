"""The wheel is the whole program: installed into a fresh venv, ``aes validate`` runs a bundled
seed from any directory, with code, templates and seeds coming from the installed copy.

Third-party dependencies are not downloaded: the fresh venv sees the project venv's
site-packages through a ``.pth`` line (a plain path entry, so that venv's editable
``autoenvscaling`` finder is not loaded) and pip resolves the wheel's requirements,
version bounds included, against those with ``--no-index``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {"aes_proto": "proto/aes_proto", "aes_lib": "libs/aes_lib", "aes_domains": "libs/aes_domains",
           "aes_cli": "services/aes_cli",
           "aes_ops": "services/aes_ops", "aes_services": "services/aes_services",
           "aes_kernels": "kernels/aes_kernels", "aes_seeds": "seeds"}
"""Installed package -> its folder in the checkout."""
# A seed with an executable environment file and one with an empty folder kept by a dotfile.
SEEDS = ("fix-backup-script", "fix-permissions")


def run(*cmd: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def tree_files() -> set[str]:
    return {f"{pkg}/{p.relative_to(ROOT / src).as_posix()}"
            for pkg, src in SOURCES.items() for p in (ROOT / src).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of the checkout, so no build/ or egg-info lands in the repo."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for folder in ("proto", "libs", "services", "kernels", "seeds"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp / "dist", src, cwd=tmp)
    (whl,) = (tmp / "dist").glob("autoenvscaling-*.whl")
    return whl


def test_wheel_holds_every_source_and_data_file(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        packaged = {n for n in z.namelist() if ".dist-info/" not in n}
    tree = tree_files()
    assert packaged == tree, (f"not in the wheel (a new package goes in pyproject.toml's packages): "
                              f"{sorted(tree - packaged)}; not in the tree: {sorted(packaged - tree)}")


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(venv, its site-packages) with the wheel installed."""
    tmp = tmp_path_factory.mktemp("installed")
    venv = tmp / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp)
    python = venv / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=tmp).stdout.strip())
    (site / "project-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run(python, "-m", "pip", "install", "-q", "--no-index", wheel, cwd=tmp)
    return venv, site


@pytest.mark.slow
def test_installed_wheel_registers_every_domain_with_its_data(installed: tuple[Path, Path], tmp_path: Path) -> None:
    """The shipped domains reach an installed ``aes`` through the wheel's ``aes.domains`` entry
    points, each with its seeds, image recipe and proposer guide from the installed copy."""
    venv, site = installed
    shipped = sorted(p.name for p in (ROOT / "libs" / "aes_domains").iterdir() if (p / "__init__.py").is_file())
    out = run(venv / "bin" / "python", "-c", "import json\nfrom aes_lib.domains import get, names\n"
              "print(json.dumps({n: [str(get(n).root), len(get(n).seeds), bool(get(n).proposer_guide),"
              " str(get(n).image_dir)] for n in names()}))", cwd=tmp_path).stdout
    found = json.loads(out)
    assert sorted(n.replace("-", "_") for n in found if n != "terminal") == shipped
    for name, (root, seeds, guide, image) in found.items():
        if name == "terminal":
            continue
        tree = ROOT / "libs" / "aes_domains" / Path(root).name
        assert Path(root).is_relative_to(site) and guide, name
        assert seeds == len(list((tree / "seeds").glob("*/task.toml"))) >= 2, name
        assert (image != "None") == (tree / "image" / "Dockerfile").is_file(), name


@pytest.mark.slow
@pytest.mark.docker
def test_installed_wheel_validates_a_bundled_seed_from_anywhere(installed: tuple[Path, Path], tmp_path: Path) -> None:
    venv, site = installed
    python = venv / "bin" / "python"
    work = tmp_path / "elsewhere"
    work.mkdir()
    where = run(python, "-c", "import aes_lib, aes_ops.seeding as s; print(aes_lib.__file__); print(s.SEEDS_DIR)",
                cwd=work).stdout.split()
    assert [Path(p).is_relative_to(site) for p in where] == [True, True], where
    seeds = Path(where[1])
    # Modes survive the wheel: an image's content hash (and a seed's behaviour) depends on them.
    for rel in SEEDS:
        for f in (ROOT / "seeds" / rel).rglob("*"):
            if f.is_file():
                assert os.access(seeds / rel / f.relative_to(ROOT / "seeds" / rel), os.X_OK) == os.access(f, os.X_OK)

    out = run(venv / "bin" / "aes", "validate", "-j", "2", *(seeds / s for s in SEEDS), cwd=work).stdout
    rows = [line.split() for line in out.splitlines() if line.startswith("aes-seeds/")]
    assert [(r[0], r[1]) for r in rows] == [(f"aes-seeds/{s}", "pass") for s in SEEDS], out


def test_every_code_package_is_listed_for_the_wheel() -> None:
    """A package missing from pyproject's list is left out of the wheel and of the service
    image (aes_lib.families once was: `aes` failed to start in the compose stack)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    data = {"template", "seeds", "image", "verifier_template", "tests"}  # task files shipped as data
    found = {".".join(p.parent.relative_to(ROOT / top).parts)
             for top in ("proto", "libs", "services", "kernels") for p in (ROOT / top).rglob("__init__.py")
             if not data & set(p.parent.relative_to(ROOT / top).parts)}
    assert found - listed == set(), "add these to [tool.setuptools] packages"
