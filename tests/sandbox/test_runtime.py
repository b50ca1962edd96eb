"""Sandboxes under another OCI runtime (``AES_SANDBOX_RUNTIME``): gVisor's runsc where the
engine has it (``deploy/install_runsc.sh``), and a clear refusal of one it lacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from aes_lib.bundle import Task
from aes_lib.sandbox import SandboxError, run_trial
from aes_lib.sandbox.container import Limits, Sandbox
from aes_lib.sandbox.trial import NopAgent, OracleAgent

pytestmark = [pytest.mark.docker]
ECHO = Path(__file__).parent / "tasks" / "echo"


@pytest.fixture
def runsc(docker_client):
    if "runsc" not in (docker_client.info().get("Runtimes") or {}):
        pytest.skip("the engine has no runsc runtime: run deploy/install_runsc.sh")


async def test_a_trial_runs_under_gvisor_with_the_same_verdicts(runsc, images, test_label, monkeypatch):
    monkeypatch.setenv("AES_SANDBOX_RUNTIME", "runsc")
    task = Task.load(ECHO)
    async with Sandbox.start(await images.build(task), Limits(), client=images.client, labels=test_label) as sb:
        assert sb.container.attrs["HostConfig"]["Runtime"] == "runsc"
        kernel = await sb.exec("cat /proc/version", timeout=30)
        assert "Linux" in kernel.output  # gVisor's own kernel answers, not the host's
    oracle = await run_trial(task, OracleAgent(task), images, labels=test_label)
    nop = await run_trial(task, NopAgent(), images, labels=test_label)
    assert (oracle.reward, nop.reward) == (1.0, 0.0), oracle.log()


async def test_a_runtime_the_engine_lacks_refuses_every_sandbox_naming_it(images, test_label, monkeypatch):
    monkeypatch.setenv("AES_SANDBOX_RUNTIME", "no-such-runtime")
    task = Task.load(ECHO)
    image = await images.build(task)
    with pytest.raises(SandboxError, match="no-such-runtime"):
        async with Sandbox.start(image, Limits(), client=images.client, labels=test_label):
            pass
