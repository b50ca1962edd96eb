"""Compose services on a network of their own, and Harbor's separate verifier mode, in real
containers: the services are reachable by name and the host is not, each service has the
sandbox's limits, and a separate verifier sees only the artifacts."""

from __future__ import annotations

import dataclasses
import io
import shutil
import tarfile
import time
from pathlib import Path

import pytest

from aes_lib.bundle import Task
from aes_lib.sandbox import validate_task
from aes_lib.sandbox.artifacts import artifact_paths, collect
from aes_lib.sandbox.container import Limits, Sandbox
from aes_lib.sandbox.trial import AgentOutcome, run_trial
from aes_lib.sandbox.verifier import result_paths

from test_hostile_builds import connect_script, host_addresses, listener  # noqa: F401  (a fixture)

pytestmark = pytest.mark.docker

HARBOR_TASKS = Path(__file__).parents[1] / "harbor" / "tasks"


def copy_task(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(HARBOR_TASKS / name, tmp_path / name))


@dataclasses.dataclass
class ScriptAgent:
    """Runs one bash script as the agent; ``during`` is called while its container is up."""

    script: str
    during: object = None
    seen: dict = dataclasses.field(default_factory=dict)

    async def run(self, sandbox: Sandbox, instruction: str) -> AgentOutcome:
        if self.during:
            self.seen.update(self.during())
        r = await sandbox.exec(self.script, timeout=120, user=0)
        return AgentOutcome(exit_code=r.exit_code, output=r.output)


async def test_services_are_reachable_by_name_the_host_is_not(docker_client, images, listener, test_label,
                                                              tmp_path) -> None:
    task = Task.load(copy_task("compose-app-db", tmp_path))
    probe = connect_script(host_addresses(docker_client), listener.port)

    def services() -> dict:
        found = docker_client.containers.list(filters={"label": f"aes.test={test_label['aes.test']}"})
        db = next(c for c in found if c.name.startswith("aes-db-"))
        (net,) = db.attrs["NetworkSettings"]["Networks"].keys()
        return {"db": db.attrs["HostConfig"], "internal": docker_client.networks.get(net).attrs["Internal"]}

    agent = ScriptAgent(
        "python3 -c \"import urllib.request; print('DB', urllib.request.urlopen('http://db:8080/kv/shelf_a').read())\""
        f" && python3 - <<'PY'\n{probe}PY\n", during=services)
    result = await run_trial(task, agent, images, labels=test_label)
    assert "DB b'41'" in result.agent.output and "CONNECTED" not in result.agent.output
    assert result.agent.exit_code == 1 and result.reward == 0.0  # the probe failed; the task is undone
    time.sleep(0.5)
    assert listener.seen == []
    limits = Limits.for_task(task.config.environment)
    db = agent.seen["db"]
    assert agent.seen["internal"] is True
    assert (db["NanoCpus"], db["Memory"], db["PidsLimit"]) == (int(limits.cpus * 1e9), limits.memory_mb << 20,
                                                              limits.pids)
    assert db["SecurityOpt"] == ["no-new-privileges"] and not db["Privileged"] and not db["Binds"]
    # test_label checks that no container and no network of the trial is left.


@pytest.mark.parametrize(("db_line", "reason", "evidence"), [
    # A service that dies fails the trial with its exit status (in the logs).
    ('command: ["false"]', "oracle_failed", "service db exited with 1"),
    # A compose file that reaches the host is a bad bundle, named by its key (in the detail).
    ("volumes: ['/:/host']", "invalid_bundle", "services.db.volumes: '/:/host' is refused in a sandbox (mounts reach the host)"),
], ids=["service-dies", "hostile-mount"])
async def test_a_broken_service_fails_validation_with_its_reason(images, test_label, tmp_path, db_line, reason,
                                                                  evidence) -> None:
    root = copy_task("compose-app-db", tmp_path)
    compose = root / "environment" / "docker-compose.yaml"
    compose.write_text(compose.read_text().replace("build: ./db", f"build: ./db\n    {db_line}"))
    report = await validate_task(root, images, labels=test_label)
    assert (report.ok, report.reason) == (False, reason)
    assert evidence in report.logs + report.detail


TAMPER = r"""
echo '{"count": 1, "max": 1}' > /app/report.json
# Everything an agent could do to its own container's verifier path:
printf '#!/bin/sh\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n' > /usr/local/bin/python3
chmod +x /usr/local/bin/python3; cp /usr/local/bin/python3 /usr/bin/python3
mkdir -p /logs/verifier /tests && echo 1 > /logs/verifier/reward.txt && cp /usr/bin/python3 /tests/test.sh
echo '{"reward": 1}' > /logs/verifier/reward.json
"""


async def test_a_separate_verifier_sees_only_the_artifacts(images, test_label, tmp_path) -> None:
    task = Task.load(copy_task("separate-verifier", tmp_path))
    tampered = await run_trial(task, ScriptAgent(TAMPER), images, labels=test_label)
    assert tampered.agent.exit_code == 0 and tampered.reward == 0.0, tampered.log()
    honest = await run_trial(task, ScriptAgent("bash /dev/stdin <<'EOF'\n" + (task.solution_dir / "solve.sh").read_text()
                                               + "EOF\n"), images, labels=test_label)
    assert honest.reward == 1.0, honest.log()


def test_artifacts_never_name_a_system_or_verifier_path(tmp_path) -> None:
    # A proposer leaving its solver a way in: the verifier's toolchain, tests and reward files,
    # named as they are or below the working directory (/ here).
    root = copy_task("separate-verifier", tmp_path)
    toml = root / "task.toml"
    toml.write_text(toml.read_text().replace('artifacts = ["/app/report.json"]', (
        'artifacts = ["/usr/local/bin/python3", "/usr/bin", "/logs/verifier", "/tests", "/etc", "/", '
        '"usr/local/bin/python3", "etc/passwd", "report.json", "/app/report.json"]')))
    task = Task.load(root)
    assert task.config.environment.workdir is None
    assert artifact_paths(task) == ["/logs/artifacts", "/report.json", "/app/report.json"]
    # In a shared verifier, relative ones are below the image's working directory (/app here).
    assert result_paths(task, "/app") == (["/app"], [
        f"artifact {p} is reserved for the verifier's toolchain: not carried"
        for p in ("/usr/local/bin/python3", "/usr/bin", "/logs/verifier", "/tests", "/etc", "/")])


async def test_artifacts_carry_files_and_folders_never_links(docker_client, test_label) -> None:
    async with Sandbox.start("aes-base:latest", client=docker_client, labels=test_label) as sb:
        r = await sb.exec("mkdir -p /logs/artifacts/sub /app && echo a > /logs/artifacts/sub/a.txt"
                          " && ln -s /etc/shadow /logs/artifacts/shadow && mkfifo /logs/artifacts/pipe"
                          " && echo out > /app/out.txt && chmod 4755 /app/out.txt"
                          " && mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt"
                          " && echo x > /usr/local/bin/planted", timeout=30, user=0)
        assert r.exit_code == 0, r.output
        data = await collect(sb, ["/logs/artifacts", "/app/out.txt", "/app/absent"])
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar}
        assert sorted(n for n, m in members.items() if m.isreg()) == ["app/out.txt", "logs/artifacts/sub/a.txt"]
        assert all(m.isreg() or m.isdir() for m in members.values())
        assert members["app/out.txt"].mode == 0o755  # set-uid dropped
        assert tar.extractfile(members["logs/artifacts/sub/a.txt"]).read() == b"a\n"
