"""What ``aes run`` says about a model that could not do its part."""

from aes_proto.messages import CalibrationResult, Lineage, Verdict

from aes_ops.demo import shortcomings


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
