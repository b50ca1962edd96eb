"""task.toml: every Harbor 0.26 field of the supported subset parses to its typed value."""

from __future__ import annotations

import pytest

from aes_lib.bundle import InvalidFieldError, UnknownFieldError, parse_task_toml

FULL = """
schema_version = "1.4"

[task]
name = "acme/log-report"
version = "2"
description = "Summarize logs."
authors = [{ name = "Ada", email = "ada@example.com" }]
keywords = ["logs", "json"]

[metadata]
difficulty = "hard"
category = "data"
tags = ["a", "b"]
nested = { anything = [1, 2] }

[agent]
timeout_sec = 300
user = "agent"

[verifier]
timeout_sec = 90.5
env = { PYTHONHASHSEED = "0" }
environment_mode = "shared"

[environment]
build_timeout_sec = 120
docker_image = "aes-base:latest"
cpus = 0.5
memory_mb = 512
storage_mb = 1024
gpus = 0
allow_internet = true
env = { LANG = "C.UTF-8" }
workdir = "/app"

[solution]
env = { SEED = "1" }
"""


def test_full_config_parses_to_typed_values() -> None:
    cfg = parse_task_toml(FULL)
    assert cfg.task is not None and cfg.task.name == "acme/log-report"
    assert cfg.task.authors[0].email == "ada@example.com"
    assert cfg.metadata["nested"] == {"anything": [1, 2]}
    assert cfg.agent.timeout_sec == 300.0 and isinstance(cfg.agent.timeout_sec, float)
    assert cfg.agent.user == "agent"
    assert cfg.verifier.env == {"PYTHONHASHSEED": "0"} and cfg.verifier.timeout_sec == 90.5
    env = cfg.environment
    assert (env.cpus, env.memory_mb, env.storage_mb, env.allow_internet, env.workdir) == (0.5, 512, 1024, True, "/app")
    assert cfg.solution.env == {"SEED": "1"}


def test_defaults_keep_the_network_off() -> None:
    cfg = parse_task_toml("")
    assert cfg.environment.allow_internet is False
    assert cfg.agent.timeout_sec is None and cfg.verifier.timeout_sec == 600.0


def test_numeric_user_is_accepted() -> None:
    assert parse_task_toml("[agent]\nuser = 1000\n").agent.user == 1000


@pytest.mark.parametrize("section", ["agent", "verifier", "environment", "solution", "task"])
def test_unknown_field_names_its_section(section: str) -> None:
    extra = 'name = "a/b"\n' if section == "task" else ""
    with pytest.raises(UnknownFieldError, match=f"\\$.{section}"):
        parse_task_toml(f"[{section}]\n{extra}surprise = 1\n")


def test_invalid_field_names_its_path() -> None:
    with pytest.raises(InvalidFieldError, match=r"\$\.environment\.memory_mb"):
        parse_task_toml("[environment]\nmemory_mb = -1\n")
