"""Admission reads a candidate's bundle from the store once.

A proposer's candidate for a seed task goes through validate, contamination, review and
calibrate, each a real service on a real bus, with one blob store behind them all that
counts its reads. The validator fetches the bundle; contamination judges the instruction
the candidate carries; review and the calibrator's solver attempts lease the tree the
validator unpacked into the host's cache. Before, each stage fetched, hashed and unpacked
it again (four reads here).

Real parts: nats-server, the local blob store, Docker (the validator's build and trials, the
solver's attempts scored by the task's verifier), the contamination index, and a replayed
model for the reviewer and the solver.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path

import pytest

from aes_proto import subjects
from aes_proto.messages import Assignment, CalibrationResult, ContaminationResult, Lineage

from aes_lib.agents.loop import LoopLimits
from aes_lib.agents.proposer.candidate import candidate_env
from aes_lib.blobstore import open_store
from aes_lib.bundle import pack
from aes_lib.bundle.cache import UnpackCache
from aes_lib.domains.kinds import DomainKinds
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.runners.trial_runner import TrialRolloutRunner
from aes_lib.models import ChatClient
from aes_lib.review.rubric import CRITERION_NAMES
from aes_lib.sandbox import ImageCache
from aes_services.calibrator import CalibratorService
from aes_services.contamination import ContaminationService
from aes_services.review import ReviewService
from aes_services.validator import ValidatorService
from counting_store import CountingStore, bus_over

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "flywheel"))
from flywheel_helpers import idle, one_turn_solve, register_heldout, routed_replay, running, wait_for  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]

SEED = Path(__file__).resolve().parents[2] / "seeds" / "csv-sales-rollup"
ROUTE = ("validate", "contamination", "review", "calibrate")
REVIEW_OK = json.dumps({name: {"outcome": "pass", "reason": "checked"} for name in CRITERION_NAMES})


async def test_a_candidate_is_fetched_from_the_store_once_through_the_admission_stages(fresh_nats, tmp_path):
    store = CountingStore(open_store(fresh_nats.blob_location))
    buses = bus_over(store)
    packed = pack(SEED)
    bundle = store.put_content("bundles", packed.data, suffix=".tar.gz")
    a = Assignment(idempotency_key="r1-000", episode_id="r1-000", direction="new",
                   lineage=Lineage(assignment_id="r1-000", round=1, category="data-processing"))
    candidate = candidate_env(a, packed, bundle, ROUTE, model="replay", cost_usd=0.0, prompt_tokens=0,
                              completion_tokens=0, episode=None)
    assert candidate.instruction == (SEED / "instruction.md").read_text()  # the proposer puts it on the message

    bus = await buses.connect(fresh_nats, name="test")
    try:
        await register_heldout(bus)
        # Two attempts solve, two give up: admitted, no diagnostic attempt.
        solver = [one_turn_solve(SEED), "TASK_DONE"] * 2
        with routed_replay(solver, REVIEW_OK) as model:
            settings = dataclasses.replace(fresh_nats, model_url=model.url, model="replay")
            runner = TrialRolloutRunner(ChatClient(model.url, "replay"), ImageCache(kinds=DomainKinds()), store,
                                        LoopLimits(max_turns=1), UnpackCache.for_settings(settings))
            calibrator = CalibratorService(runner, FlywheelConfig(solver_max_turns=1))
            services = (ValidatorService(), ContaminationService(), ReviewService(), calibrator)
            async with running(settings, *services, bus_type=buses):
                await bus.publish(subjects.stage(ROUTE[0]), candidate)
                [result] = await asyncio.wait_for(
                    wait_for(bus, subjects.RESULT_CALIBRATION, CalibrationResult, lambda m: m), 540)
                await idle(bus, CalibratorService)
        [checked] = await bus.history(subjects.RESULT_CONTAMINATION, ContaminationResult)
    finally:
        await bus.close()

    assert [(v.stage, v.ok) for v in result.verdicts] == [(s, True) for s in ROUTE], result.verdicts
    assert (result.decision, result.rewards) == ("admitted", (1.0, 0.0, 1.0, 0.0))
    assert checked.ok and checked.n == 13
    assert store.reads[bundle.key] == 1  # the validator's; every later stage read the host's cache

