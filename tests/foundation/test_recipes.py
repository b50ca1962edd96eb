"""Every config file written in the docs loads with the run's config loader."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from aes_lib import runconfig
from aes_lib.config import CONFIG_VAR, SET_VAR

ROOT = Path(__file__).resolve().parents[2]
TOML = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)
BLOCKS = [(path.relative_to(ROOT), i, text) for path in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
          for i, text in enumerate(TOML.findall(path.read_text()))]


def test_the_docs_have_the_recipes_configs():
    named = {str(p) for p, _, _ in BLOCKS}
    assert "docs/RECIPES.md" in named and "README.md" in named
    # laptop, 8-GPU node, the pools experiment on CPU and at Table 3 scale, cluster
    assert sum(str(p) == "docs/RECIPES.md" for p, _, _ in BLOCKS) == 5


@pytest.mark.parametrize("path, index, text", BLOCKS, ids=[f"{p}#{i}" for p, i, _ in BLOCKS])
def test_a_config_in_the_docs_loads(path, index, text, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(SET_VAR, "")
    monkeypatch.setenv(CONFIG_VAR, "")
    monkeypatch.setenv("AES_HOME", str(tmp_path / "home"))
    file = tmp_path / "aes.toml"
    file.write_text(text)
    runconfig.activate(file)
    tables = runconfig.as_tables(runconfig.effective())
    for section, keys in tomllib.loads(text).items():
        for key, value in keys.items():
            assert tables[section][key] == value, (section, key)


def test_the_check_catches_a_bad_block(monkeypatch, tmp_path):
    # Guards the test above: the same path refuses a typo'd key in a recipe.
    monkeypatch.setenv(SET_VAR, "")
    monkeypatch.setenv(CONFIG_VAR, "")
    laptop = next(text for p, _, text in BLOCKS if str(p) == "docs/RECIPES.md" and "[learner]" in text)
    file = tmp_path / "aes.toml"
    file.write_text(laptop.replace("[learner]", "[learner]\ndevise = 'cuda'", 1))
    with pytest.raises(ValueError, match="learner.devise: unknown key"):
        runconfig.activate(file)
