"""A route that would strand candidates is refused at startup, with the reason."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aes_proto.messages import CandidateEnv, Verdict

from aes_lib.admission import RouteConfigError, check_route, live_stages
from aes_lib.bus import Bus, serve
from aes_lib.gate import Gate
from aes_services.proposer import ProposerService
from aes_services.registry import builtin_stages

from .helpers import env_for

BUILTIN = builtin_stages()


def test_the_default_route_is_accepted() -> None:
    check_route(("validate", "contamination", "review", "reset", "calibrate"), BUILTIN)


@pytest.mark.parametrize("route, message", [
    (("validate", "contamination"), "ends on 'contamination', which only passes candidates on"),
    (("validate", "typo", "calibrate"), "nothing consumes stage(s) typo"),
    (("calibrate", "validate", "calibrate"), "names a stage twice"),
    ((), "AES_ROUTE is empty"),
])
def test_routes_that_strand_candidates_are_refused(route: tuple[str, ...], message: str) -> None:
    with pytest.raises(RouteConfigError) as err:
        check_route(route, BUILTIN)
    assert message in str(err.value)


def test_a_deciding_stage_must_be_last() -> None:
    with pytest.raises(RouteConfigError, match="calibrate decides and forwards nothing"):
        check_route(("calibrate", "review"), {**BUILTIN, "review": True})


class Stamp(Gate):
    """A gate from outside the package: its consumer announces the stage on the bus."""

    stage = "stamp"

    async def judge(self, task, candidate: CandidateEnv, ctx) -> Verdict:
        return Verdict(stage=self.stage, ok=True, reason="ok")


async def test_a_running_gate_outside_the_package_makes_its_stage_known(bus: Bus) -> None:
    stop = asyncio.Event()
    ready = asyncio.Event()
    runner = asyncio.create_task(serve(Stamp(), bus, stop, on_ready=ready.set))
    await asyncio.wait_for(ready.wait(), 30)
    stop.set()
    await runner
    stages = await live_stages(bus.js)
    assert stages == {"stamp": False}
    check_route(("validate", "stamp", "calibrate"), {**stages, **BUILTIN})


async def test_the_proposer_refuses_to_start_on_a_route_ending_on_a_gate(fresh_nats) -> None:
    settings = dataclasses.replace(fresh_nats, route="validate,contamination")
    async with await Bus.connect(settings) as bus:
        with pytest.raises(RouteConfigError, match="ends on 'contamination'"):
            await ProposerService().setup(bus)


def test_aes_up_refuses_a_route_ending_on_a_gate(tmp_path: Path, nats_server) -> None:
    home = tmp_path / "home"
    env = {**env_for(dataclasses.replace(nats_server, home=home)), "AES_ROUTE": "validate,contamination"}
    for key in ("AES_NATS_URL", "AES_NATS_USER", "AES_NATS_PASSWORD"):
        env.pop(key)  # aes up starts its own server
    env["AES_BLOB_URL"] = f"file://{tmp_path / 'blobs'}"
    try:
        up = subprocess.run([sys.executable, "-m", "aes_cli.main", "up", "--no-model"], env=env,
                            capture_output=True, text=True, timeout=120)
    finally:
        subprocess.run([sys.executable, "-m", "aes_cli.main", "down"], env=env, capture_output=True, timeout=60)
    assert up.returncode == 2, up.stderr
    # The progress lines of what started (NATS) come first; the error is the one last line.
    errors = [line for line in up.stderr.splitlines() if not line.startswith("[up ")]
    assert len(errors) == 1 and errors[0] == up.stderr.splitlines()[-1], up.stderr
    assert errors[0].startswith("aes up: ") and "ends on 'contamination'" in errors[0] and "Traceback" not in up.stderr
    assert not list((home / "run").glob("*.ready")), "no service may start on a refused route"
    assert os.path.isdir(home)
