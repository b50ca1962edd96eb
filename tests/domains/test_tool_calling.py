"""The tool-calling domain: its declaration, its gate's static rules, and, with Docker, the
domain image's client and service in a real container, the seeds through the real
validator and gate, and the gate's verdicts on unsafe tasks."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import uuid
from pathlib import Path

import pytest

from aes_lib.bundle import Task
from aes_lib.domains import get
from aes_lib.sandbox import VERIFIER_TEMPLATE, Limits, Sandbox
from aes_lib.sandbox.trial import OracleAgent, run_trial, start_services

from aes_domains.tool_calling import DOMAIN, SERVICE_PATH
from aes_domains.tool_calling.gate import ToolCallingGate

SEEDS = {p.name: p for p in DOMAIN.seeds}
TICKETS = "offboard-customer-tickets"
RAW_CALL = """
import urllib.error, urllib.request
req = urllib.request.Request("http://127.0.0.1:7410/call/get_ticket", data=b'{"ticket_id": true}')
try:
    urllib.request.urlopen(req)
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
"""
"""A call that bypasses aes-call's checks."""


def variant(tmp_path: Path, seed: str, toml: dict[str, str] | None = None, dockerfile: dict[str, str] | None = None,
            remove: tuple[str, ...] = ()) -> Task:
    """A copy of ``seed`` with lines of task.toml and of its Dockerfile replaced (regex ->
    text) and files removed."""
    root = tmp_path / f"{seed}-{uuid.uuid4().hex[:6]}"
    shutil.copytree(SEEDS[seed], root)
    for name, edits in (("task.toml", toml), ("environment/Dockerfile", dockerfile)):
        text = (root / name).read_text()
        for pattern, line in (edits or {}).items():
            text, n = re.subn(pattern, line, text, flags=re.M)
            assert n == 1, pattern
        (root / name).write_text(text)
    for rel in remove:
        (root / rel).unlink()
    return Task.load(root)


def test_declared_and_registered():
    assert get("tool-calling") is DOMAIN and DOMAIN.title == "Tool calling"
    assert DOMAIN.image == "aes-tool-calling:latest"
    assert DOMAIN.startup == f"aes-tools-up {SERVICE_PATH}"
    assert "aes-call list" in DOMAIN.solver_prompt
    assert DOMAIN.route(("validator",)) == ("tool-calling", "validator")
    assert "agent_is_root" in DOMAIN.proposer_guide
    assert sorted(SEEDS) == [TICKETS, "restock-warehouse"]


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_seed_is_a_complete_offline_task(seed):
    task = Task.load(SEEDS[seed])
    assert task.name == f"aes-seeds/{seed}"
    assert task.config.metadata["domain"] == "tool-calling"
    assert task.config.environment.allow_internet is False
    assert (task.tests_dir / "test.sh").read_bytes() == (VERIFIER_TEMPLATE / "test.sh").read_bytes()
    solve = (task.solution_dir / "solve.sh").read_text()
    assert "aes-call" in solve and "/srv/service" not in solve and "/tests" not in solve
    assert ToolCallingGate().check(task) is None


@pytest.mark.parametrize("change, reason", [
    ({"toml": {r'^user = .*$': ""}}, "no_agent_user"),
    ({"toml": {r'^user = .*$': 'user = "root"'}}, "agent_is_root"),
    ({"toml": {r'^user = .*$': "user = 0"}}, "agent_is_root"),
    ({"dockerfile": {r"^FROM .*$": "FROM aes-base:latest"}}, "wrong_image"),
    ({"remove": ("environment/service/service.py",)}, "no_service"),
])
def test_check_refuses(tmp_path, change, reason):
    verdict = ToolCallingGate().check(variant(tmp_path, TICKETS, **change))
    assert verdict is not None and (verdict.stage, verdict.ok, verdict.reason) == ("tool-calling", False, reason)


@pytest.mark.docker
async def test_aes_call_types_and_errors_in_a_container(images):
    task = Task.load(SEEDS[TICKETS])
    image = await images.build(task)
    async with Sandbox.start(image, Limits(), client=images.client) as sb:
        up = await start_services(sb, DOMAIN.startup)
        assert up is not None and up.exit_code == 0, up.output

        async def call(args: str):
            return await sb.exec(f"aes-call {args}", timeout=60, user="agent")

        listed = await call("list")
        assert listed.exit_code == 0 and "get_ticket(ticket_id: int)" in listed.output
        assert "close_ticket(ticket_id: int, resolution: str, note: str)  [changes state]" in listed.output
        # A string where an int is declared: refused by the client, never sent.
        wrong = await call("""get_ticket '{"ticket_id": "1009"}'""")
        assert wrong.exit_code == 2
        assert """argument 'ticket_id' must be int, got str "1009\"""" in wrong.output
        assert (await call("get_ticket ticket_id=abc")).exit_code == 2
        missing = await call("close_ticket ticket_id=1036 resolution=wont_fix")
        assert missing.exit_code == 2 and "missing argument 'note' (str)" in missing.output
        assert "unexpected argument 'colour'" in (await call("get_ticket ticket_id=1 colour=red")).output
        assert "unknown method 'delete_all'" in (await call("delete_all")).output
        # The service checks too, for a caller that skips aes-call.
        raw = await sb.exec("python3 -c " + shlex.quote(RAW_CALL), timeout=60, user="agent")
        assert raw.output.startswith("400") and "must be int, got bool true" in raw.output, raw.output
        # A refusal of the service itself, then a good call whose result is JSON.
        closed = await call("close_ticket ticket_id=1020 resolution=fixed note=again")
        assert closed.exit_code == 1 and "ticket 1020 is closed" in closed.output
        got = await call("get_ticket ticket_id=1009")
        assert got.exit_code == 0 and json.loads(got.output)["customer"] == "acme"
        # The state is the service's alone.
        assert (await sb.exec(f"cat {Path(SERVICE_PATH).parent}/state.json", timeout=30, user="agent")).exit_code != 0


@pytest.mark.docker
@pytest.mark.parametrize("dockerfile, toml, reason", [
    # A second name for uid 0 passes the static rule; the container shows it is root.
    ({r"^RUN useradd .*$": "RUN useradd -o -u 0 -M agent"}, {}, "agent_is_root"),
    ({r"^RUN chown .*$": "RUN chmod 0755 /srv/service && chmod 0644 /srv/service/*"}, {}, "state_exposed"),
    ({}, {r'^user = .*$': 'user = "nobody2"'}, "no_such_user"),
])
async def test_probe_refuses(tmp_path, images, dockerfile, toml, reason):
    report = await ToolCallingGate(images).check_task(variant(tmp_path, TICKETS, toml=toml, dockerfile=dockerfile))
    assert (report.verdict.ok, report.verdict.reason) == (False, reason), report.verdict


@pytest.mark.docker
async def test_startup_failure_is_reported(tmp_path, images):
    task = variant(tmp_path, TICKETS)
    (task.environment_dir / "service/service.py").write_text("raise SystemExit('bad config: no tickets')\n")
    report = await ToolCallingGate(images).check_task(task)
    assert (report.verdict.ok, report.verdict.reason) == (False, "startup_failed"), report.verdict
    assert "bad config: no tickets" in report.logs
    # In a trial, neither the agent nor the verifier runs on an environment that never came up.
    trial = await run_trial(task, OracleAgent(task), images)
    assert trial.reward == 0.0 and "startup" in trial.error and "bad config: no tickets" in trial.error, trial
    assert trial.verifier.exit_code is None and trial.verifier.output == "", trial.verifier
