"""The validation rule and the trial runner on real containers, with the ``echo`` fixture task."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path

import pytest

from aes_lib.sandbox import AgentOutcome, NopAgent, OracleAgent, Sandbox, run_trial, validate_task
from aes_lib.bundle import Task

pytestmark = [pytest.mark.docker, pytest.mark.podman]

TOML = (Path(__file__).parent / "tasks" / "echo" / "task.toml").read_text()


async def test_good_task_is_admitted(make_task, images, test_label) -> None:
    r = await validate_task(make_task(), images, labels=test_label)
    assert (r.ok, r.reason, r.oracle_reward, r.nop_reward) == (True, "ok", 1.0, 0.0)
    assert r.logs == ""


async def test_wrong_reference_solution_is_oracle_failed(make_task, images, test_label) -> None:
    task = make_task({"solution/solve.sh": "#!/bin/bash\nprintf 'hello, world\\n' > /app/greeting.txt\necho 99 > /app/count.txt\n"})
    r = await validate_task(task, images, labels=test_label)
    assert (r.ok, r.reason, r.oracle_reward) == (False, "oracle_failed", 0.5)
    assert "test_count" in r.logs  # the verifier's output names the failing test


async def test_tests_that_pass_on_the_empty_solution_are_nop_passed(make_task, images, test_label) -> None:
    task = make_task({"tests/test_outputs.py": "from pathlib import Path\n\n\ndef test_input():\n    assert Path('/app/input.txt').exists()\n"})
    r = await validate_task(task, images, labels=test_label)
    assert (r.ok, r.reason, r.nop_reward) == (False, "nop_passed", 1.0)


async def test_image_that_does_not_build_is_build_failed(make_task, images, test_label) -> None:
    task = make_task({"environment/Dockerfile": "FROM aes-base:latest\nRUN echo about to fail && exit 7\n"})
    r = await validate_task(task, images, labels=test_label)
    assert (r.ok, r.reason) == (False, "build_failed")
    assert "about to fail" in r.logs


async def test_build_past_its_timeout_is_timeout(make_task, images, test_label) -> None:
    task = make_task({
        "environment/Dockerfile": "FROM aes-base:latest\nRUN sleep 120\n",
        "task.toml": TOML.replace("build_timeout_sec = 120.0", "build_timeout_sec = 3.0"),
    })
    r = await validate_task(task, images, labels=test_label)
    assert (r.ok, r.reason) == (False, "timeout")


async def test_solve_that_hangs_after_working_is_timeout(make_task, images, test_label) -> None:
    # Harbor scores this 1.0 (the work is done before the hang); an admission gate must not.
    solve = (Path(__file__).parent / "tasks" / "echo" / "solution" / "solve.sh").read_text() + "sleep 1000\n"
    task = make_task({"solution/solve.sh": solve, "task.toml": TOML.replace("timeout_sec = 60.0\n\n[verifier]", "timeout_sec = 3.0\n\n[verifier]")})
    r = await validate_task(task, images, labels=test_label)
    assert (r.ok, r.reason) == (False, "timeout")
    assert "solve.sh" in r.detail


async def test_malformed_bundle_is_invalid_bundle(make_task, images, test_label) -> None:
    task = make_task({"task.toml": TOML.replace("memory_mb = 256", 'memory_mb = "lots"')})
    r = await validate_task(task, images, labels=test_label)
    assert (r.ok, r.reason) == (False, "invalid_bundle")
    assert r.detail.startswith("InvalidFieldError") and "memory_mb" in r.detail


async def test_image_is_built_once_per_environment(make_task, images, docker_client) -> None:
    a = Task.load(make_task())
    b = Task.load(make_task({"solution/solve.sh": "#!/bin/bash\ntrue\n"}))  # same environment/
    tag_a = await images.build(a)
    created = docker_client.images.get(tag_a).attrs["Created"]
    assert await images.build(b) == tag_a
    assert docker_client.images.get(tag_a).attrs["Created"] == created
    c = Task.load(make_task({"environment/input.txt": "one line\n"}))
    assert await images.build(c) != tag_a


@dataclasses.dataclass
class PlantingAgent:
    """Cheats: writes a perfect reward now and again later from a background process."""

    async def run(self, sandbox: Sandbox, instruction: str) -> AgentOutcome:
        await sandbox.exec(
            "mkdir -p /logs/verifier /tests && echo 1.0 > /logs/verifier/reward.txt"
            " && echo '{\"reward\": 1.0}' > /logs/verifier/reward.json"
            " && (while true; do echo 1.0 > /logs/verifier/reward.txt; sleep 0.1; done) >/dev/null 2>&1 &",
            timeout=30,
        )
        return AgentOutcome(exit_code=0)


@dataclasses.dataclass
class HalfAgent:
    """Does half the task."""

    async def run(self, sandbox: Sandbox, instruction: str) -> AgentOutcome:
        r = await sandbox.exec("printf 'hello, world\\n' > /app/greeting.txt", timeout=30)
        return AgentOutcome(exit_code=r.exit_code)


@dataclasses.dataclass
class SnoopingAgent:
    """Records what the solver can see during its turn."""

    seen: str = ""

    async def run(self, sandbox: Sandbox, instruction: str) -> AgentOutcome:
        r = await sandbox.exec("ls -d /tests /solution /logs/verifier/* 2>/dev/null; echo end", timeout=30)
        self.seen = r.output
        return AgentOutcome(exit_code=0)


async def test_planted_reward_is_ignored(make_task, images, test_label) -> None:
    r = await run_trial(Task.load(make_task()), PlantingAgent(), images, labels=test_label)
    assert r.reward == 0.0
    assert r.metrics == {"reward": 0.0}


async def test_fractional_reward_is_kept(make_task, images, test_label) -> None:
    r = await run_trial(Task.load(make_task()), HalfAgent(), images, labels=test_label)
    assert r.reward == 0.5


async def test_solver_sees_neither_tests_nor_solution(make_task, images, test_label) -> None:
    agent = SnoopingAgent()
    r = await run_trial(Task.load(make_task()), agent, images, labels=test_label)
    assert agent.seen.split() == ["end"]
    assert r.reward == 0.0


async def test_oracle_and_nop_agents(make_task, images, test_label) -> None:
    task = Task.load(make_task())
    oracle = await run_trial(task, OracleAgent(task), images, labels=test_label)
    nop = await run_trial(task, NopAgent(), images, labels=test_label)
    assert (oracle.reward, nop.reward) == (1.0, 0.0)
    assert "reward 2/2" in oracle.verifier.output and "reward 0/2" in nop.verifier.output


CHANGES = """#!/bin/bash
set -e
mkdir -p "/app/dir with space/sub" /srv/data/empty && printf x > "/app/dir with space/sub/f"
printf 'hello\\n' > /app/greeting.txt && touch -d 2001-01-01 /app/greeting.txt
printf 'new\\nline' > $'/app/new\\nline'
ln -s /app/greeting.txt /app/link && ln /app/greeting.txt /app/hard
chown nobody:nogroup /app/input.txt && chmod 640 /app/input.txt
mv /app/input.txt /app/renamed.txt && rm /srv/data/old.txt
# Outside the result paths: none of it reaches the verifier.
mkdir -p /opt/empty && mv /etc/selinux /etc/selinux-moved && rm /etc/debian_version && rm -r /var/cache/debconf
"""
CHECKS = """import os
from pathlib import Path


def test_new_and_changed_files():
    assert Path("/app/dir with space/sub/f").read_text() == "x" and Path("/srv/data/empty").is_dir()
    assert Path("/app/greeting.txt").read_text() == "hello\\n"
    assert Path("/app/greeting.txt").stat().st_mtime < 1e9 and Path("/app/new\\nline").read_text() == "new\\nline"
    st = os.stat("/app/renamed.txt")
    assert (st.st_uid, oct(st.st_mode & 0o777)) == (65534, "0o640")


def test_links_renames_and_deletions():
    assert os.readlink("/app/link") == "/app/greeting.txt" and os.path.samefile("/app/hard", "/app/greeting.txt")
    assert not Path("/app/input.txt").exists() and not Path("/srv/data/old.txt").exists()


def test_nothing_outside_the_results():
    assert not Path("/opt/empty").exists() and Path("/etc/selinux/semanage.conf").is_file()
    assert Path("/etc/debian_version").exists() and Path("/var/cache/debconf").exists()
"""


@pytest.mark.skipif(os.environ.get("AES_TEST_ENGINE") == "podman",
                    reason="Podman's archives carry no owners: test_podman.py checks the refusal")
async def test_verifier_sees_the_agents_final_files(make_task, images, test_label) -> None:
    # The verifier runs in a fresh container: every kind of change in the result paths (the
    # workdir and a declared artifact) is carried into it, and nothing else.
    task = Task.load(make_task({
        "solution/solve.sh": CHANGES, "tests/test_outputs.py": CHECKS,
        "task.toml": 'artifacts = ["/srv/data"]\n' + TOML,
        "environment/Dockerfile": (Path(__file__).parent / "tasks" / "echo" / "environment" / "Dockerfile").read_text()
        + "RUN mkdir -p /srv/data && echo old > /srv/data/old.txt\n"}))
    r = await run_trial(task, OracleAgent(task), images, labels=test_label)
    assert r.reward == 1.0, r.log()


async def test_an_artifact_naming_a_file_reaches_the_tests_as_that_file(make_task, images, test_label) -> None:
    task = Task.load(make_task({
        "solution/solve.sh": "#!/bin/bash\nmkdir -p /srv && printf 'n=3\\n' > /srv/report.txt\n",
        "tests/test_outputs.py": "from pathlib import Path\n\n\ndef test_report():\n"
                                 "    assert Path('/srv/report.txt').read_text() == 'n=3\\n'\n",
        "task.toml": 'artifacts = ["/srv/report.txt"]\n' + TOML}))
    r = await run_trial(task, OracleAgent(task), images, labels=test_label)
    assert (r.reward, r.dropped) == (1.0, ()), r.log()


@dataclasses.dataclass
class SaboteurAgent:
    """Kills the container's keep-alive, which stops the container under the trial."""

    async def run(self, sandbox: Sandbox, instruction: str) -> AgentOutcome:
        await sandbox.exec("kill -KILL $(ls /proc | grep -E '^[0-9]+$' | sort -n | sed -n 2p)", timeout=30)
        return AgentOutcome(exit_code=0)


async def test_agent_that_stops_its_container_is_judged_on_what_it_left(make_task, images, test_label) -> None:
    # The engine reads the results of a stopped container as of a running one: no fault, no escape.
    r = await run_trial(Task.load(make_task()), SaboteurAgent(), images, labels=test_label)
    assert r.reward == 0.0 and r.verifier.exit_code is not None, r.log()


async def test_chatty_build_past_its_timeout_is_cancelled(make_task, images, docker_client, test_label) -> None:
    marker = f"tick-{test_label['aes.test']}"
    task = make_task({
        "environment/Dockerfile": f"FROM aes-base:latest\nRUN for i in $(seq 300); do echo {marker} $i; sleep 0.5; done\n",
        "task.toml": TOML.replace("build_timeout_sec = 120.0", "build_timeout_sec = 3.0"),
    })
    r = await validate_task(task, images, labels=test_label)
    assert (r.ok, r.reason) == (False, "timeout")
    assert marker in r.logs  # the build's output up to the deadline
    for _ in range(50):  # the daemon stops the build's container once the client is gone
        # Every container on the daemon, other tests' too: one removed between the listing and its
        # inspection is gone, not an error (a full run met that race).
        running = [c for c in docker_client.containers.list(ignore_removed=True)
                   if marker in str(c.attrs["Config"]["Cmd"])]
        if not running:
            break
        await asyncio.sleep(0.2)
    assert not running


def test_fixture_uses_the_managed_verifier_template_verbatim() -> None:
    from aes_lib.sandbox import VERIFIER_TEMPLATE

    fixture = Path(__file__).parent / "tasks" / "echo" / "tests" / "test.sh"
    assert fixture.read_bytes() == (VERIFIER_TEMPLATE / "test.sh").read_bytes()


async def test_template_counts_skips_and_failures_as_not_passed(make_task, images, test_label) -> None:
    tests = (
        "import pytest\n\n\ndef test_pass():\n    assert True\n\n\n"
        "@pytest.mark.skip(reason='no credit for skipping')\ndef test_skip():\n    pass\n\n\n"
        "def test_fail():\n    assert False\n"
    )
    task = Task.load(make_task({"tests/test_outputs.py": tests}))
    r = await run_trial(task, OracleAgent(task), images, labels=test_label)
    assert r.reward == pytest.approx(1 / 3)
    assert "reward 1/3" in r.verifier.output
