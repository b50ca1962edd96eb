"""environment/docker-compose.yaml: what a sandbox reads of it, and what it refuses by name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aes_lib.bundle import InvalidComposeError
from aes_lib.bundle.compose import load_compose, parse_compose


def env_dir(tmp_path: Path, compose: str, folders: tuple[str, ...] = ("db",)) -> Path:
    d = tmp_path / "environment"
    d.mkdir()
    for f in folders:
        (d / f).mkdir(parents=True)
        (d / f / "Dockerfile").write_text("FROM aes-base:latest\n")
    (d / "docker-compose.yaml").write_text(compose)
    return d


def test_services_start_after_what_they_depend_on(tmp_path) -> None:
    spec = load_compose(env_dir(tmp_path, """
services:
  app:
    image: aes-base:latest
    command: python3 -m http.server 80
    environment: [DB=db, DEBUG]
    depends_on: {db: {condition: service_healthy}}
  db:
    build: {context: ./db}
    healthcheck: {test: "true", interval: 500ms, retries: 3}
    container_name: fixed
  main:
    depends_on: [app]
    environment: {MODE: test, FLAG: true}
"""))
    assert [s.name for s in spec.services] == ["db", "app"]
    db, app = spec.services
    assert db.build == "db" and db.image is None and db.healthcheck.test == ("sh", "-c", "true")
    assert db.healthcheck.interval == 0.5 and db.healthcheck.retries == 3
    assert app.environment == {"DB": "db", "DEBUG": ""} and app.command == "python3 -m http.server 80"
    assert spec.main_depends_on == {"app": "service_started"} and spec.main_environment == {"MODE": "test", "FLAG": "true"}
    assert spec.warnings == ("docker-compose.yaml: services.db.container_name is ignored",)


def test_no_compose_file_is_none(tmp_path) -> None:
    assert load_compose(tmp_path) is None


@pytest.mark.parametrize(("service", "message"), [
    ("{image: x, privileged: true}", "services.s.privileged is refused in a sandbox (no privileges)"),
    ("{image: x, volumes: ['/:/host']}", "services.s.volumes: '/:/host' is refused in a sandbox (mounts reach the host)"),
    ("{image: x, ports: ['80:80']}", "services.s.ports is refused"),
    ("{image: x, network_mode: host}", "services.s.network_mode is refused"),
    ("{image: x, cap_add: [NET_ADMIN]}", "services.s.cap_add is refused"),
    ("{image: x, pid: host}", "services.s.pid is refused"),
    ("{image: x, devices: ['/dev/sda']}", "services.s.devices is refused"),
    ("{image: x, env_file: /etc/shadow}", "services.s.env_file is refused"),
    ("{image: x, frobnicate: 1}", "services.s.frobnicate: not supported"),
    ("{build: ../../outside}", "services.s.build: '../../outside' is not a folder below environment/"),
    ("{build: {context: db, dockerfile: Other}}", "services.s.build: only a context folder with a Dockerfile"),
    ("{command: x}", "services.s: needs an image or a build folder"),
    ("{image: x, depends_on: [ghost]}", "services.s.depends_on: 'ghost' is not a service here"),
    ("{image: x, depends_on: {db: {condition: service_healthy}}}", "service_healthy needs a healthcheck on db"),
    ("{image: x, environment: {'A-B': 1}}", "'A-B' is not a variable name"),
    ("{image: x, healthcheck: {test: [NONE]}}", "healthcheck.test: expected [CMD, ...]"),
])
def test_what_reaches_past_the_sandbox_is_refused_by_name(tmp_path, service, message) -> None:
    with pytest.raises(InvalidComposeError) as e:
        load_compose(env_dir(tmp_path, f"services:\n  db: {{image: x}}\n  s: {service}\n"))
    assert message in str(e.value)


@pytest.mark.parametrize(("text", "message"), [
    ("services: [a]", "expected a mapping with a 'services' mapping"),
    ("services: {}\nconfigs: {data: {}}", "top-level configs: not supported"),
    ("services: {}\nvolumes: {data: {driver: local, driver_opts: {device: /}}}", "volumes.data: only a plain named volume"),
    ("services: {}\nnetworks: {out: {external: true}}", "networks.out: external is refused"),
    ("services:\n  main: {volumes: ['data:/x']}\nvolumes: {data: {}}\n", "main is the agent's container: only build"),
    ("services:\n  main: {build: ../..}\n", "services.main.build: '../..' is not a folder below environment/"),
    ("services:\n  A_B: {image: x}\n", "service name 'A_B'"),
    ("services:\n  a: {image: x, depends_on: [b]}\n  b: {image: x, depends_on: [a]}\n", "depends_on cycle: a -> b -> a"),
    ("services: {a: [", "not YAML"),
])
def test_malformed_files_are_refused(tmp_path, text, message) -> None:
    with pytest.raises(InvalidComposeError) as e:
        load_compose(env_dir(tmp_path, text, ()))
    assert message in str(e.value)


def test_parse_takes_decoded_yaml(tmp_path) -> None:
    spec = parse_compose({"services": {"cache": {"image": "aes-base:latest", "user": 1000}}}, tmp_path)
    assert spec.services[0].user == "1000" and spec.main_depends_on == {}


def test_an_alias_bomb_is_refused_without_expanding_it(tmp_path) -> None:
    # Nine levels of nine aliases (9**9 strings if anything turned the nest into text), defined
    # inside the very values the parser reads.
    chain = ["&a0 [x, x, x, x, x, x, x, x, x]"] + [f"&a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    named = ", ".join(f"a{i}: {c}" for i, c in enumerate(chain))
    for service in (f"{{image: x, environment: {{{named}}}}}", f"{{image: x, environment: [{', '.join(chain)}]}}",
                    f"{{image: x, healthcheck: {{test: [CMD, {', '.join(chain)}]}}}}",
                    f"{{image: x, healthcheck: {{{named}, test: [CMD, x], interval: *a8}}}}"):
        with pytest.raises(InvalidComposeError):
            parse_compose(yaml.safe_load(f"services:\n  s: {service}\n"), tmp_path)
