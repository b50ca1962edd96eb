"""What ``aes run`` says about a model that could not do its part."""

import pytest
from replay_server import ReplayServer

from aes_proto.messages import CalibrationResult, Lineage, Verdict

from aes_lib.agents.loop import LoopLimits
from aes_lib.bundle import pack
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.runners.trial_runner import TrialRolloutRunner
from aes_lib.models import ChatClient
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache
from aes_ops.demo import seed_candidate, shortcomings, through_gates
from aes_ops.seeding import SEEDS_DIR
from aes_services.calibrator import CalibratorService

from flywheel_helpers import running


def _result(decision, stage="validate", reason="oracle_failed"):
    return CalibrationResult(idempotency_key="k", episode_id="e", env_id="e", lineage=Lineage(assignment_id="a"),
                             decision=decision, verdicts=(Verdict(stage=stage, ok=decision == "admitted", reason=reason),))


def test_a_weak_model_is_named_with_where_it_stopped_and_how_to_use_a_stronger_one():
    lines = shortcomings(model="smollm2-135m", proposer=[_result("rejected")], solver_rewards=[0.0, 0.0, 0.1],
                         trained=False)
    text = "\n".join(lines)
    assert "proposer (smollm2-135m) answered 1 assignment(s)" in text and "validate:oracle_failed" in text
    assert "averaged reward 0.03 over 3 attempts" in text
    assert "no update this run: no complete group with differing rewards" in text
    assert lines[-1].startswith("Point the run at a stronger") and "AES_MODEL_URL=" in lines[-1]


def test_equal_rewards_are_named_as_why_nothing_trained():
    [learner] = [line for line in shortcomings(model="m", proposer=[], solver_rewards=[0.0] * 4, trained=False)
                 if line.startswith("The learner")]
    assert "every group of attempts scored the same" in learner


def test_nothing_to_say_when_the_model_did_its_part():
    assert shortcomings(model="m", proposer=[_result("admitted", "calibrate", "admitted")],
                        solver_rewards=[0.5, 0.75], trained=True) == []


@pytest.mark.docker
async def test_a_seed_goes_through_the_route_and_its_stages_are_told(fresh_nats, bus, tmp_path):
    give_up = ["TASK_DONE"] * 4
    with ReplayServer(give_up) as srv:
        runner = TrialRolloutRunner(ChatClient(srv.url, "replay"), ImageCache(kinds=DomainKinds()),
                                    bus.blobs, LoopLimits(max_turns=2),
                                    tmp_path)
        async with running(fresh_nats, CalibratorService(runner, FlywheelConfig())):
            candidate = seed_candidate(SEEDS_DIR / "csv-sales-rollup", bus.blobs, ("calibrate",))
            lines: list[str] = []
            ended = await through_gates(bus, candidate, 300, lines.append)
    assert (candidate.lineage.mode, candidate.env_id) == ("seed", pack(SEEDS_DIR / "csv-sales-rollup").sha256)
    assert ended == "calibrate:too_hard"
    assert sum("calibration rollout" in line for line in lines) == 4
    assert "too_hard" in lines[-1] and "proposer reward" not in lines[-1]
    # A second run sends the seed again rather than being deduplicated.
    assert seed_candidate(SEEDS_DIR / "csv-sales-rollup", bus.blobs, ("calibrate",)).idempotency_key \
        != candidate.idempotency_key
