"""A validator replica on another Docker engine: ``DOCKER_HOST`` names it, and every build and
sandbox of the replica happens there (the sandbox layer opens its engine with ``docker.from_env``).

The second engine is a real ``dockerd`` of its own (socket, data root, exec root, containerd) on
this machine, standing in for a remote host; it gets the base image with ``docker save | load``,
as a fresh sandbox host without a registry would.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import docker
import pytest

from aes_proto import subjects
from aes_proto.messages import CandidateEnv, Lineage, ValidationResult

from aes_lib.bundle import pack
from aes_lib.sandbox.images import IMAGE_REPO

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]
ECHO = ROOT / "tests" / "sandbox" / "tasks" / "echo"
sys.path.insert(0, str(ROOT / "tests"))
from foundation.helpers import env_for, eventually  # noqa: E402


def task_images(client: docker.DockerClient) -> set[str]:
    return {t for i in client.images.list(name=IMAGE_REPO) for t in i.tags}


async def test_a_validator_replica_builds_and_runs_on_the_engine_docker_host_names(fresh_engine, bus, fresh_nats,
                                                                                   tmp_path):
    task = tmp_path / "echo"
    shutil.copytree(ECHO, task)
    # A unique environment: its image exists nowhere before this test.
    (task / "environment" / "marker.txt").write_text(uuid.uuid4().hex)
    packed = pack(task)
    before = task_images(docker.DockerClient(base_url=fresh_engine))  # the engine is shared by other tests
    ref = bus.blobs.put_content("bundles", packed.data, ".tar.gz")
    candidate = CandidateEnv(idempotency_key="remote", episode_id="ep-remote", env_id=packed.sha256, bundle=ref,
                             lineage=Lineage(assignment_id="as-remote"), route=("validate", "calibrate"))
    ready = tmp_path / "ready"
    log = tmp_path / "validator.log"
    proc = subprocess.Popen([sys.executable, "-m", "aes_cli.main", "service", "validator", "--ready-file", str(ready)],
                            env=env_for(fresh_nats, DOCKER_HOST=fresh_engine), stdout=log.open("wb"),
                            stderr=subprocess.STDOUT)

    async def validated() -> bool:
        assert proc.poll() is None, log.read_text()
        return bool(await bus.history(subjects.RESULT_VALIDATION, ValidationResult))

    try:
        await eventually(lambda: asyncio.sleep(0, ready.exists()), "the validator replica to consume", timeout=120)
        await bus.publish(subjects.stage("validate"), candidate)
        await eventually(validated, "the replica's verdict", timeout=300)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    [result] = await bus.history(subjects.RESULT_VALIDATION, ValidationResult)
    assert (result.ok, result.oracle_reward, result.nop_reward) == (True, 1.0, 0.0), result

    remote = task_images(docker.DockerClient(base_url=fresh_engine)) - before
    local = task_images(docker.from_env(environment={}))
    assert len(remote) == 1, remote  # built there...
    assert not remote & local  # ...and only there
    left = docker.DockerClient(base_url=fresh_engine).containers.list(all=True)
    assert left == [], "the replica left sandboxes behind"
