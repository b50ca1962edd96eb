"""compose.yaml, read as a file: every registered service, scalable, pinned images, health-gated
start, secrets kept off command lines. tests/compose/test_compose_stack.py runs it for real."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from aes_services.registry import SERVICES, TRAIN

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
INFRA = {"nats", "s3", "otlp", "model"}
SANDBOXING = {"validator", "strength", "attack", "reset", "calibrator", "proposer", "rollouts"} | {s for s in SERVICES if s.startswith("domain-")}
SOCKET = "/var/run/docker.sock:/var/run/docker.sock"


def _default(value: str) -> str:
    """The default of a ``${VAR:-default}`` (or ``${VAR-default}``) reference."""
    m = re.fullmatch(r"\$\{\w+:?-(.+)\}", value)
    assert m, f"expected ${{VAR:-default}}, got {value!r}"
    return m.group(1)


def test_every_registered_service_is_in_compose() -> None:
    services = COMPOSE["services"]
    assert set(services) == set(SERVICES) | INFRA
    for name in SERVICES:
        svc = services[name]
        assert svc["command"] == ["service", name]
        assert svc["build"]["dockerfile"] == "deploy/service.Dockerfile"
        assert (ROOT / svc["build"]["dockerfile"]).is_file()


def test_services_are_scalable_and_configured() -> None:
    for name in SERVICES:
        svc = COMPOSE["services"][name]
        # A fixed container name or host port would make `--scale name=N` fail.
        assert "container_name" not in svc and "ports" not in svc, name
        env = svc["environment"]
        assert env["AES_NATS_URL"] == "nats://nats:4222"
        assert env["AES_BLOB_URL"].startswith("s3://") and "s3:9000" in env["AES_BLOB_URL"]
        assert env["AES_OTLP_ENDPOINT"] == "http://otlp:4318"
        assert "aes-home:/var/lib/aes" in svc["volumes"]
        # Credentials come from the env file, never from the compose file itself.
        assert not {"AES_NATS_PASSWORD", "AES_S3_SECRET_KEY"} & set(env), name
        assert svc["env_file"].startswith("${AES_SECRETS_FILE")
        assert {d: c["condition"] for d, c in svc["depends_on"].items()} == {
            "nats": "service_healthy", "s3": "service_healthy", "otlp": "service_healthy"}


def test_only_sandboxing_services_get_the_docker_socket() -> None:
    with_socket = {name for name, svc in COMPOSE["services"].items() if SOCKET in svc.get("volumes", [])}
    assert with_socket == SANDBOXING
    for name in SANDBOXING:
        assert COMPOSE["services"][name]["group_add"] == ["${AES_DOCKER_GID:-0}"]


def test_registry_images_are_pinned_and_local_ones_selectable() -> None:
    services = COMPOSE["services"]
    for name, var in (("nats", "AES_NATS_IMAGE"), ("s3", "AES_S3_IMAGE"), ("otlp", "AES_OTLP_IMAGE")):
        image = services[name]["image"]
        assert image.startswith("${" + var)
        default = _default(image)
        assert ":" in default and not default.endswith(":latest"), default
    assert re.fullmatch(r"nats:2\.11\.\d+(-alpine)?", _default(services["nats"]["image"]))
    assert _default(services["otlp"]["image"]) == "jaegertracing/all-in-one:1.62.0"
    local = dict(line.split("=", 1) for line in (ROOT / "deploy/images/local.env").read_text().splitlines()
                 if line and not line.startswith("#"))
    assert set(local) == {"AES_NATS_IMAGE", "AES_S3_IMAGE", "AES_OTLP_IMAGE", "AES_SERVICE_IMAGE", "AES_TRAIN_IMAGE"}


def test_only_the_training_services_run_on_the_training_image() -> None:
    # The service image lacks torch (tests/packaging/test_dependencies.py checks they import without it).
    images = {name: svc["image"] for name, svc in COMPOSE["services"].items() if name not in INFRA - {"model"}}
    train = {name for name, image in images.items() if image.startswith("${AES_TRAIN_IMAGE")}
    assert train == {*TRAIN, "model"}  # the torch model server too
    assert all(images[name].startswith("${AES_SERVICE_IMAGE") for name in set(images) - train)
    assert COMPOSE["services"]["learner"]["build"]["args"] == {"AES_EXTRAS": "train"}


def test_infrastructure_is_health_checked_and_keeps_its_data() -> None:
    services = COMPOSE["services"]
    for name in INFRA:
        assert services[name]["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL"), name
    assert "nats-data:/data" in services["nats"]["volumes"] and "s3-data:/data" in services["s3"]["volumes"]
    assert set(COMPOSE["volumes"]) == {"nats-data", "s3-data", "aes-home"}
    assert services["model"]["profiles"] == ["model"]


def test_no_secret_on_a_command_line() -> None:
    nats = COMPOSE["services"]["nats"]
    assert not {"--user", "--pass", "--auth"} & set(nats["command"])
    conf = (ROOT / COMPOSE["configs"]["nats-conf"]["file"]).read_text()
    assert "password: $AES_NATS_PASSWORD" in conf and "jetstream" in conf
    text = (ROOT / "compose.yaml").read_text()
    assert "PASSWORD:" not in text and "SECRET_KEY:" not in text


def test_images_build_without_an_index_and_cache_dependencies() -> None:
    dockerfile = (ROOT / "deploy/service.Dockerfile").read_text()
    assert "--no-index" in dockerfile and "download.pytorch.org" not in dockerfile
    # The dependency layer comes before any source, so a source edit reuses the installed venv;
    # the wheels come over HTTP, never through the context (which leaves build/ out).
    assert dockerfile.index("-r /tmp/deps/runtime.txt") < dockerfile.index("COPY libs")
    assert [l for l in dockerfile.splitlines() if l.startswith("FROM ")] == ["FROM ${AES_BASE_IMAGE}"]
    assert "COPY build" not in dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".aes", "build"} <= set(ignored) and not [i for i in ignored if i.startswith("!build")]
