"""``aes domains`` lists what is registered; ``aes domains hil-settings`` writes an ask-human task's
three settings; ``aes generate --domain`` refuses a domain nothing registers."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

from aes_lib.domains import get

AES = str(Path(sys.executable).with_name("aes"))
ROOT = Path(__file__).resolve().parents[2]


def aes(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([AES, *args], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_domains_lists_every_registered_domain_with_its_route_image_and_seeds():
    done = aes("domains", "--json")
    assert done.returncode == 0, done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)}
    assert set(rows) >= {"terminal", "swe", "tool-calling", "browser", "gpu-kernels", "ask-human"}
    assert rows["browser"]["image"] == "aes-browser:latest" and rows["browser"]["startup"] == "aes-web-up"
    assert rows["terminal"]["gate"] == "" and len(rows["terminal"]["seeds"]) >= 12
    assert rows["swe"]["seeds"] == [str(p) for p in get("swe").seeds]


def test_hil_settings_writes_three_tasks_from_one(tmp_path):
    seed = get("ask-human").seeds[0]
    done = aes("domains", "hil-settings", str(seed), str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    written = {p.name: p for p in (tmp_path / "out").iterdir()}
    assert set(written) == {"full_info", "ask_human", "incomplete"}
    for name, folder in written.items():
        assert tomllib.loads((folder / "task.toml").read_text())["metadata"]["hil_setting"] == name
    answers = [b["answer"] for b in json.loads((seed / "tests" / "blockers.json").read_text())["blockers"]]
    full = (written["full_info"] / "instruction.md").read_text()
    assert all(a in full for a in answers)
    assert (written["incomplete"] / "instruction.md").read_text() == (seed / "instruction.md").read_text()


def test_bad_input_is_one_line_and_status_2(tmp_path):
    plain = aes("domains", "hil-settings", str(ROOT / "seeds" / "fix-permissions"), str(tmp_path / "x"))
    assert plain.returncode == 2 and "blockers.json" in plain.stderr and not (tmp_path / "x").exists()
    unknown = aes("generate", "--domain", "chemistry")
    assert unknown.returncode == 2 and "unknown domain 'chemistry'" in unknown.stderr


def test_a_domain_from_another_package_plugs_in_through_its_entry_point(tmp_path):
    """A third party's installed package (here a dist-info folder on the path, as pip leaves it)
    adds a domain: ``aes domains`` lists it, and only while that package is installed."""
    pkg = tmp_path / "labwork_domain"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from pathlib import Path\nfrom aes_lib.domains.base import Domain\n"
        "DOMAIN = Domain(name='lab-work', title='Lab work', root=Path(__file__).parent)\n")
    info = tmp_path / "labwork_domain-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: labwork-domain\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[aes.domains]\nlab-work = labwork_domain\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": str(Path(AES).parent)}
    done = subprocess.run([AES, "domains", "--json"], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)}
    assert rows["lab-work"]["title"] == "Lab work" and "swe" in rows
    without = subprocess.run([AES, "domains", "--json"], capture_output=True, text=True, timeout=120,
                             env={"PATH": env["PATH"]})
    assert "lab-work" not in {r["name"] for r in json.loads(without.stdout)}
