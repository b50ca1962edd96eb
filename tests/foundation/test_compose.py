"""compose.yaml runs every registered service, scalably, against NATS with auth, MinIO and Jaeger.

(Docker Compose itself is not installable on the test machines; this checks the file.)
"""

from __future__ import annotations

from pathlib import Path

import yaml

from aes_services.registry import SERVICES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
INFRA = {"nats", "minio", "jaeger", "model"}


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
        assert env["AES_NATS_URL"] == "nats://nats:4222" and env["AES_NATS_PASSWORD"]
        assert env["AES_BLOB_URL"].startswith("s3://") and "minio:9000" in env["AES_BLOB_URL"]
        assert env["AES_OTLP_ENDPOINT"] == "http://jaeger:4318"


def test_nats_requires_credentials_and_keeps_jetstream_data() -> None:
    cmd = COMPOSE["services"]["nats"]["command"]
    assert "-js" in cmd and "--user" in cmd and "--pass" in cmd
    assert any(v.endswith(":/data") for v in COMPOSE["services"]["nats"]["volumes"])
    assert COMPOSE["services"]["jaeger"]["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"
