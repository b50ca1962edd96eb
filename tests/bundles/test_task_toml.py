"""task.toml: every Harbor 0.26 field parses to its typed value; fields Harbor does not model
are kept as warnings; wrong types stay errors."""

from __future__ import annotations

import pytest

from aes_lib.bundle import InvalidFieldError, parse_task_toml
from aes_lib.bundle.config import grant_network, leaves_network_unset

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
def test_unknown_field_is_kept_as_a_warning(section: str) -> None:
    extra = 'name = "a/b"\n' if section == "task" else ""
    cfg = parse_task_toml(f"[{section}]\n{extra}surprise = 1\n")
    assert cfg.extras == {f"{section}.surprise": 1}
    assert cfg.warnings() == [f"task.toml: {section}.surprise is not a Harbor 0.26 field (kept, ignored)"]


def test_invalid_field_names_its_path() -> None:
    with pytest.raises(InvalidFieldError, match=r"\$\.environment\.memory_mb"):
        parse_task_toml("[environment]\nmemory_mb = -1\n")


# A task as Harbor's registry datasets write them: fields of Harbor 0.26's model this sandbox
# does not apply (MCP servers, artifacts, healthcheck) and fields Harbor does not model at all.
REGISTRY_STYLE = """
version = "1.0"
source = "terminal-bench"
artifacts = ["/app/report.json", { source = "/logs/app", destination = "app-logs", exclude = ["*.tmp"] }]

[task]
name = "terminal-bench/hello-world"
description = "Write hello."
format = "harbor"
workstream = "core"
language = "bash"

[metadata]
difficulty = "easy"

[agent]
timeout_sec = 120.0
network_mode = "no-network"

[verifier]
timeout_sec = 60.0
user = "root"
environment_mode = "shared"

[environment]
build_timeout_sec = 300.0
memory = "2G"
storage = "4G"
cpus = 1
gpu_types = ["H100", "A100"]
OS = "Linux"
network_mode = "public"
skills_dir = "/skills"

[environment.healthcheck]
command = "true"
retries = 2

[[environment.mcp_servers]]
name = "search"
transport = "http"
url = "http://mcp:8000/mcp"

[[environment.mcp_servers]]
name = "files"
transport = "stdio"
command = "mcp-files"
args = ["--root", "/app"]
"""


def test_registry_style_task_loads_with_warnings() -> None:
    cfg = parse_task_toml(REGISTRY_STYLE)
    assert cfg.schema_version == "1.0" and cfg.source == "terminal-bench"
    assert cfg.task is not None and cfg.task.name == "terminal-bench/hello-world"
    assert cfg.extras == {"task.format": "harbor", "task.workstream": "core", "task.language": "bash",
                          "environment.OS": "Linux"}
    env = cfg.environment
    assert (env.memory_mb, env.storage_mb, env.gpu_types) == (2048, 4096, ("H100", "A100"))
    assert env.network_mode == "public" and env.allow_internet is True
    assert [(s.name, s.transport) for s in env.mcp_servers] == [("search", "streamable-http"), ("files", "stdio")]
    assert env.mcp_servers[1].args == ("--root", "/app") and env.healthcheck is not None
    assert cfg.artifacts[0] == "/app/report.json" and cfg.artifacts[1].destination == "app-logs"
    assert cfg.unsupported() == []
    warnings = "\n".join(cfg.warnings())
    for text in ("task.format is not a Harbor 0.26 field", "task.workstream", "task.language",
                 "top-level version is Harbor's older name", "memory = '2G'", "mcp_servers (2) are not offered",
                 "healthcheck", "skills_dir", "gpu_types",
                 "[verifier] user", "[agent] network_mode"):
        assert text in warnings
    assert "artifacts" not in warnings  # they are the task's result paths: carried to the verifier


def test_gpu_types_and_gpus_parse() -> None:
    env = parse_task_toml('[environment]\ngpus = 2\ngpu_types = ["H100"]\n').environment
    assert env.gpus == 2 and env.gpu_types == ("H100",)


@pytest.mark.parametrize(("text", "needs"), [
    ('[verifier]\nenvironment_mode = "separate"\n[[steps]]\nname = "one"\n', "[[steps]] with a separate verifier"),
    ('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org", "*.pythonhosted.org", "2001:db8::1"]\n',
     "allowed_hosts *.pythonhosted.org, 2001:db8::1: wildcard names and IPv6 entries"),
    ('[environment]\nos = "Windows"\n', 'os = "windows"'),
    ('[environment.tpu]\ntype = "v6e"\ntopology = "2x4"\n', "needs a TPU"),
    ('[[verifier.collect]]\ncommand = "cp /db /logs"\nservice = "db"\n', "other than main (db)"),
])
def test_harbor_features_not_run_here_parse_and_are_named(text: str, needs: str) -> None:
    found = parse_task_toml(text).unsupported()
    assert len(found) == 1 and needs in found[0]


@pytest.mark.parametrize(("text", "path"), [
    ('[environment]\ngpu_types = "H100"\n', "gpu_types"),
    ('[[environment.mcp_servers]]\nname = "m"\ntransport = "sse"\n', "needs a url"),
    ('[[environment.mcp_servers]]\nname = "m"\ntransport = "carrier-pigeon"\nurl = "x"\n', "transport"),
    ('[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\ncpus = 1\n', "conflicts"),
    ('[environment]\nallowed_hosts = ["a.org"]\n', "allowed_hosts needs"),
    ('artifacts = [1]\n', "artifacts"),
    ('[environment]\nmemory = "lots"\n', "size 'lots'"),
    ('[environment]\nmemory = "1G"\nmemory_mb = 2\n', "contradicts"),
    ('[agent]\ntimeout_sec = "600"\n', "timeout_sec"),
    ('version = 1\n', "schema_version"),
])
def test_wrong_types_of_known_fields_stay_errors(text: str, path: str) -> None:
    with pytest.raises(InvalidFieldError, match=path.replace("[", "\\[").replace("(", "\\(")):
        parse_task_toml(text)


@pytest.mark.parametrize(("text", "network"), [
    ("", False),
    ("[environment]\nallow_internet = true\n", True),
    ('[environment]\nnetwork_mode = "no-network"\nallow_internet = true\n', False),  # network_mode wins
    ('[environment]\nnetwork_mode = "public"\nallow_internet = false\n', True),
])
def test_network_follows_harbor_precedence_with_our_default(text: str, network: bool) -> None:
    assert parse_task_toml(text).environment.allow_internet is network


@pytest.mark.parametrize("text", ["", "[task]\nname = \"a/b\"\n", "[environment]\ncpus = 1 # one\n[solution]\n",
                                  "environment.cpus = 1\n", "[environment.healthcheck]\ncommand = \"true\"\n"])
def test_grant_network_writes_allow_internet(text: str) -> None:
    assert leaves_network_unset(text)
    granted = grant_network(text)
    assert not leaves_network_unset(granted)
    assert parse_task_toml(granted).environment.allow_internet is True
    assert parse_task_toml(granted).environment.cpus == parse_task_toml(text).environment.cpus


def test_an_explicit_network_is_not_unset() -> None:
    assert not leaves_network_unset("[environment]\nallow_internet = false\n")
    assert not leaves_network_unset('[environment]\nnetwork_mode = "no-network"\n')


@pytest.mark.parametrize("name", ["../escape", "a/b", "a\\u0000b", "trailing.", ".."])
def test_step_names_are_one_portable_folder_name(name: str) -> None:
    # Harbor's rule; a step's files are read from steps/<name>/, never outside it.
    with pytest.raises(InvalidFieldError, match=r"\[\[steps\]\] name"):
        parse_task_toml(f'[[steps]]\nname = "{name}"\n')
    assert parse_task_toml('[[steps]]\nname = "write the file"\n').steps[0].name == "write the file"
