"""A candidate that calibration sends back becomes revision + 1 of the same assignment."""

import msgspec
import pytest

from aes_proto.messages import BlobRef, CandidateEnv, Lineage

from aes_lib.flywheel.calibration import CalibrationRule
from aes_lib.flywheel.revision import RolloutEvidence, feedback_text, revision_assignment

RULE = CalibrationRule()
BUNDLE = BlobRef(key="bundles/sha256/ab.tar.gz", sha256="ab", size=10)


def _candidate(revision=0):
    return CandidateEnv(
        idempotency_key="c1", episode_id="ep1", env_id="e" * 64, bundle=BUNDLE,
        lineage=Lineage(assignment_id="a1", round=3, revision=revision, parent_env_id="p1", category="text",
                        mode="agent", proposer_model="m", cost_usd=0.5),
    )


def test_revision_carries_the_evidence_and_previous_bundle():
    d = RULE.decide([0.0] * 4, revision=0)
    rollouts = [RolloutEvidence(0.0, "test_output_exists failed")] * 4
    fb = feedback_text(d, rollouts, RolloutEvidence(1.0), (RULE.band_low, RULE.band_high))
    c = _candidate()
    a = revision_assignment(c, d, fb)
    lin = a.lineage
    assert (lin.assignment_id, lin.revision, a.direction, a.previous_bundle, lin.round) == ("a1", 1, "easier", BUNDLE, 3)
    assert a.idempotency_key == "a1:rev1" and a.episode_id == "ep1" and lin.parent_env_id == "p1"
    # The candidate's lineage, one revision on; what the proposer spent is set again by the revision's proposer.
    assert lin == msgspec.structs.replace(c.lineage, revision=1, proposer_model="", cost_usd=0.0)
    assert "too_hard" in a.feedback and "test_output_exists failed" in a.feedback
    assert "hints scored 1.00" in a.feedback


def test_same_candidate_gives_the_same_key():
    d = RULE.decide([1.0] * 4, revision=1)
    a1 = revision_assignment(_candidate(1), d, "x")
    a2 = revision_assignment(_candidate(1), d, "x")
    assert a1.idempotency_key == a2.idempotency_key == "a1:rev2" and a1.lineage.revision == 2
    assert a1.direction == "harder"


def test_an_admitted_or_final_decision_is_not_sent_back():
    with pytest.raises(ValueError, match="does not send"):
        revision_assignment(_candidate(), RULE.decide([1.0, 0.0, 1.0, 0.0], 0), "x")
    with pytest.raises(ValueError, match="does not send"):
        revision_assignment(_candidate(2), RULE.decide([0.0] * 4, 2), "x")
