"""What the chaos suite runs under test: nats-server (JetStream file store, auth, one fixed port),
a SeaweedFS S3 store, a replayed model that always gives up, and the admission services as
processes on the route validate,contamination,reset,calibrate."""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import json
import os
import secrets
import sys
from pathlib import Path

from aes_ops.localinfra import find_binary, free_ports

from chaos.procs import ROOT, Child, port_open, say, wait_until

sys.path.insert(0, str(ROOT / "tests" / "replay"))  # the replay model server (a stand-in for a hosted model)

ROUTE = ("validate", "contamination", "reset", "calibrate")
SERVICES = {"validator": 2, "contamination": 1, "reset": 1, "calibrator": 1, "pool": 1}
"""Service name -> replicas (each replica its own process)."""
GIVE_UP = "TASK_DONE"

WEED_PORTS = ["master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
              "filer.port.grpc", "s3.port", "s3.port.grpc", "s3.port.iceberg", "s3.port.lance",
              "admin.port", "admin.port.grpc", "webdav.port", "debug.port", "metricsPort",
              "s3.metricsPort", "s3.debug.port"]


@dataclasses.dataclass
class Infra:
    root: Path
    nats: Child
    nats_port: int
    nats_user: str
    nats_password: str
    weed: Child
    s3_endpoint: str
    s3_access: str
    s3_secret: str
    bucket: str

    @property
    def nats_url(self) -> str:
        return f"nats://127.0.0.1:{self.nats_port}"

    @property
    def blob_url(self) -> str:
        return f"s3://{self.bucket}?endpoint={self.s3_endpoint}&secure=0"

    def settings(self):
        from aes_lib.config import Settings

        return Settings(home=self.root / "home", nats_url=self.nats_url, nats_user=self.nats_user,
                        nats_password=self.nats_password, blob_url=self.blob_url,
                        s3_access_key=self.s3_access, s3_secret_key=self.s3_secret, route=",".join(ROUTE))

    def start_nats(self) -> float:
        self.nats.start()
        return wait_until(lambda: port_open(self.nats_port), "nats-server", self.nats)

    def start_weed(self) -> float:
        from minio import Minio

        self.weed.start()
        client = Minio(self.s3_endpoint, access_key=self.s3_access, secret_key=self.s3_secret, secure=False)
        return wait_until(lambda: client.list_buckets() is not None, "seaweedfs", self.weed, timeout=120)


def start_infra(root: Path) -> Infra:
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    # nats-server: JetStream with a file store, auth, one fixed port (a restart reuses it).
    nroot = root / "nats"
    nroot.mkdir()
    user, password = "aes", secrets.token_urlsafe(16)
    (nroot / "nats.conf").write_text(f'authorization {{ user: "{user}", password: "{password}" }}\n')
    [nats_port] = free_ports(1)
    nats_child = Child("nats-server", [find_binary("nats-server"), "-c", str(nroot / "nats.conf"), "-a", "127.0.0.1",
                                       "-p", str(nats_port), "-js", "-sd", str(nroot / "js")], logs / "nats-server.log")
    # SeaweedFS S3 that checks credentials (as tests/conftest.py's s3_server).
    wroot = root / "seaweed"
    (wroot / "data").mkdir(parents=True)
    (wroot / "logs").mkdir()
    access, secret = "aes" + secrets.token_hex(6), secrets.token_urlsafe(24)
    (wroot / "s3.json").write_text(json.dumps({"identities": [{
        "name": "aes", "credentials": [{"accessKey": access, "secretKey": secret}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    ports = dict(zip(WEED_PORTS, free_ports(len(WEED_PORTS))))
    weed_child = Child("weed", [find_binary("weed"), f"-logdir={wroot / 'logs'}", "mini", f"-dir={wroot / 'data'}",
                                "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.telemetry=false", "-webdav=false",
                                "-admin.ui=false", f"-s3.config={wroot / 's3.json'}",
                                *(f"-{k}={v}" for k, v in ports.items())],
                       logs / "weed.log", env={**os.environ, "TMPDIR": str(wroot)}, cwd=wroot)
    infra = Infra(root, nats_child, nats_port, user, password, weed_child, f"127.0.0.1:{ports['s3.port']}",
                  access, secret, "chaos")
    say(f"nats-server on :{nats_port} ready in {infra.start_nats():.1f}s")
    say(f"seaweedfs S3 on {infra.s3_endpoint} ready in {infra.start_weed():.1f}s")
    return infra


def start_model():
    from replay_server import ReplayServer

    class GiveUp(ReplayServer):
        """Answers every request with the solver's give-up reply (no recording to run out)."""

        def _answer(self, body):
            with self._lock:  # counted, not kept: a long run would hold every request body
                self.count = getattr(self, "count", 0) + 1
            return 200, {"id": f"giveup-{self.count}", "object": "chat.completion", "model": self.model,
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": GIVE_UP}}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1}}

    server = GiveUp([])
    server.__enter__()
    atexit.register(server.__exit__, None, None, None)
    return server


def service_children(infra: Infra, model_url: str, args: argparse.Namespace) -> list[Child]:
    env = dict(os.environ)
    env.update({
        "AES_HOME": str(infra.root / "home"), "AES_NATS_URL": infra.nats_url, "AES_NATS_USER": infra.nats_user,
        "AES_NATS_PASSWORD": infra.nats_password, "AES_BLOB_URL": infra.blob_url,
        "AES_S3_ACCESS_KEY": infra.s3_access, "AES_S3_SECRET_KEY": infra.s3_secret,
        "AES_MODEL_URL": model_url, "AES_MODEL": "replay", "AES_ROUTE": ",".join(ROUTE),
        "AES_SOLVER_MAX_TURNS": "1", "AES_MAX_REVISIONS": "0", "PYTHONUNBUFFERED": "1",
    })
    if args.validator_budget > 0:
        env["AES_BUDGETS"] = f"validator={args.validator_budget:g}"
    if args.io_deadline > 0:
        env["AES_IO_DEADLINE"] = f"{args.io_deadline:g}"
    for kv in args.env:
        k, _, v = kv.partition("=")
        env[k] = v
    children = []
    for name, replicas in SERVICES.items():
        for r in range(replicas):
            label = f"{name}-{r + 1}" if replicas > 1 else name
            children.append(Child(label, [sys.executable, "-m", "aes_cli.main", "service", name],
                                  infra.root / "logs" / f"{label}.log", env=env, cwd=ROOT))
    return children


def service_of(process: str) -> str:
    """``validator-2`` -> ``validator``."""
    base, _, n = process.rpartition("-")
    return base if n.isdigit() and base in SERVICES else process
