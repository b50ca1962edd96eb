"""The browser domain: its seeds validate and pass its gate in real containers of the real
``aes-browser`` image, ``browse`` explains failed actions, and the gate rejects tasks whose
agent could bypass the browser."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import pytest

from aes_lib.bundle import Task
from aes_lib.domains import registry
from aes_lib.sandbox import VERIFIER_TEMPLATE, Limits, Sandbox
from aes_lib.sandbox.trial import start_services

from aes_domains.browser import APP_URL, DOMAIN
from aes_domains.browser.gate import BrowserGate

SEEDS = {p.name: p for p in DOMAIN.seeds}
NETWORK_COMMANDS = re.compile(r"\b(apt-get|apt|pip3?|curl|wget|git\s+clone|npm|uv)\b")


def variant(seed: str, tmp_path: Path, toml: tuple[str, str] | None = None,
            dockerfile: tuple[str, str] | None = None) -> Task:
    """A copy of ``seed`` with one text replacement in task.toml and/or the Dockerfile."""
    dest = tmp_path / seed
    shutil.copytree(SEEDS[seed], dest)
    for rel, change in (("task.toml", toml), ("environment/Dockerfile", dockerfile)):
        if change:
            text = (dest / rel).read_text()
            assert change[0] in text
            (dest / rel).write_text(text.replace(*change))
    return Task.load(dest)


def test_registered_with_an_image_startup_and_prompt():
    assert registry.get("browser") is DOMAIN
    assert DOMAIN.image == "aes-browser:latest" and DOMAIN.startup == "aes-web-up"
    assert "browse" in DOMAIN.solver_prompt and "browse" in DOMAIN.proposer_guide
    assert set(SEEDS) == {"resolve-support-case", "update-store-settings"}


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_seed_is_a_browser_task(seed):
    root = SEEDS[seed]
    task = Task.load(root)
    cfg = tomllib.loads((root / "task.toml").read_text())
    assert task.name == f"aes-seeds/{seed}" and registry.domain_of(task) is DOMAIN
    assert cfg["environment"]["allow_internet"] is False and cfg["environment"]["memory_mb"] >= 2048
    assert (root / "tests/test.sh").read_bytes() == (VERIFIER_TEMPLATE / "test.sh").read_bytes()
    steps = [ln for ln in (root / "environment/Dockerfile").read_text().splitlines() if ln.startswith("RUN")]
    assert not NETWORK_COMMANDS.search(" ".join(steps))
    assert BrowserGate().check(task) is None


@pytest.mark.parametrize(("user", "reason"), [('"root"', "agent_is_root"), ("0", "agent_is_root"),
                                              (None, "no_agent_user")])
async def test_gate_rejects_an_agent_that_could_bypass_the_browser(user, reason, tmp_path, images):
    change = ('user = "clerk"', f"user = {user}" if user else "")
    report = await BrowserGate().check_task(variant("resolve-support-case", tmp_path, toml=change), images)
    assert (report.verdict.ok, report.verdict.stage, report.verdict.reason) == (False, "browser", reason)


def test_gate_rejects_an_oracle_that_does_not_browse(tmp_path):
    task = variant("update-store-settings", tmp_path)
    (task.solution_dir / "solve.sh").write_text("#!/bin/bash\npython3 -c 'print(1)'\n")
    assert BrowserGate().check(task).reason == "oracle_not_browsing"


@pytest.mark.docker
async def test_gate_rejects_state_the_agent_can_write(tmp_path, images):
    task = variant("update-store-settings", tmp_path,
                   dockerfile=("chmod 0700 /srv/web && chmod 0600", "chmod 0777 /srv/web && chmod 0666"))
    report = await BrowserGate().check_task(task, images)
    assert report.verdict.reason == "state_exposed", report
    assert "/srv/web/state.json" in report.verdict.detail


@pytest.mark.docker
async def test_browse_explains_failed_actions(images):
    task = Task.load(SEEDS["resolve-support-case"])
    image = await images.build(task)
    async with Sandbox.start(image, Limits(memory_mb=2048), client=images.client) as sb:
        assert (await start_services(sb, DOMAIN.startup)).exit_code == 0

        async def browse(args: str):
            return await sb.exec(f"browse {APP_URL}cases {args}", timeout=120, user="clerk")

        r = await browse("--fill '#q=QZ-418' --click '#search' --click 'a.nope' --timeout 1")
        assert r.exit_code == 3, r.output
        assert "step 3 (--click 'a.nope'): no element matches CSS selector 'a.nope'" in r.output
        assert "URL: http://127.0.0.1:8000/cases?q=QZ-418" in r.output  # the page it stopped on
        r = await browse("--click 'a[href=\"/cases/CS-1031\"]' --fill '#status=resolved'")
        assert r.exit_code == 3 and "'#status' is a <select>, not a text field" in r.output, r.output
        r = await browse("--click 'a[href=\"/cases/CS-1031\"]' --select '#status=Closed'")
        assert r.exit_code == 3 and "has no option 'Closed' (options: ['Open', 'Pending', 'Resolved'])" in r.output
        r = await browse("--click 'a[href=\"/cases/CS-1031\"]' --select '#status=Resolved' --click '#save'")
        assert r.exit_code == 0, r.output  # the app refuses; browse reports the page that says why
        assert "A resolved case must have an assignee." in r.output
        # As the agent user, nothing but the browser reaches the app's state.
        r = await sb.exec("cat /srv/web/state.json", timeout=30, user="clerk")
        assert r.exit_code != 0 and "Permission denied" in r.output
