"""A candidate that a check sends back becomes revision + 1 of the same assignment."""

import msgspec
import pytest

from aes_proto.messages import BlobRef, CandidateEnv, Lineage, ProposalRef, Verdict

from aes_lib.flywheel.calibration import CalibrationRule
from aes_lib.flywheel.revision import (
    MAX_EVIDENCE_CHARS, RolloutEvidence, check_feedback, feedback_text, revision_assignment, sends_back,
)

RULE = CalibrationRule()
BUNDLE = BlobRef(key="bundles/sha256/ab.tar.gz", sha256="ab", size=10)


def _candidate(revision=0, mode="agent", **kw):
    return CandidateEnv(
        idempotency_key="c1", episode_id="ep1", env_id="e" * 64, bundle=BUNDLE,
        lineage=Lineage(assignment_id="a1", round=3, revision=revision, parent_env_id="p1", category="text",
                        mode=mode, proposer_model="m", cost_usd=0.5), **kw,
    )


def test_revision_carries_the_evidence_and_previous_bundle():
    d = RULE.decide([0.0] * 4, revision=0)
    rollouts = [RolloutEvidence(0.0, "test_output_exists failed")] * 4
    fb = feedback_text(d, rollouts, RolloutEvidence(1.0), (RULE.band_low, RULE.band_high))
    c = _candidate()
    a = revision_assignment(c, d.direction, fb, pass_rate=d.mean)
    lin = a.lineage
    assert (lin.assignment_id, lin.revision, a.direction, a.previous_bundle, lin.round) == ("a1", 1, "easier", BUNDLE, 3)
    assert a.idempotency_key == "a1:rev1" and a.episode_id == "ep1" and lin.parent_env_id == "p1"
    # The candidate's lineage, one revision on; what the proposer spent is set again by the revision's proposer.
    assert lin == msgspec.structs.replace(c.lineage, revision=1, proposer_model="", cost_usd=0.0)
    assert "too_hard" in a.feedback and "test_output_exists failed" in a.feedback
    assert "hints scored 1.00" in a.feedback


def test_same_candidate_gives_the_same_key():
    a1 = revision_assignment(_candidate(1), "harder", "x")
    a2 = revision_assignment(_candidate(1), "harder", "x")
    assert a1.idempotency_key == a2.idempotency_key == "a1:rev2" and a1.lineage.revision == 2
    assert a1.direction == "harder"


@pytest.mark.parametrize("revision,mode,back", [(0, "agent", True), (1, "prompt", True), (2, "agent", False),
                                                 (0, "seed", False)])
def test_only_a_proposers_candidate_with_revisions_left_goes_back(revision, mode, back):
    assert sends_back(_candidate(revision, mode).lineage, max_revisions=2) is back
    assert not sends_back(_candidate(0).lineage, max_revisions=0)


def test_a_failed_gate_sends_its_evidence_and_keeps_the_direction_and_group():
    c = _candidate(0, direction="harder", proposal=ProposalRef(trajectory=BUNDLE, group_id="g1", group_size=4))
    verdict = Verdict(stage="validate", ok=False, reason="oracle_failed", detail="oracle reward 0")
    log = "== agent (exit 1)\n" + "x" * 10_000 + "\nAssertionError: expected 42 rows"
    a = revision_assignment(c, c.direction, check_feedback(verdict, log))
    assert (a.direction, a.lineage.revision, a.previous_bundle, a.pass_rate) == ("harder", 1, BUNDLE, None)
    assert (a.group_id, a.group_size) == ("g1", 4)  # the revision continues its attempt in the proposer group
    assert a.feedback.startswith("Check failed: validate (oracle_failed). oracle reward 0")
    # Head and tail of a long log: the start and the final error both reach the proposer.
    assert "== agent (exit 1)" in a.feedback and "expected 42 rows" in a.feedback
    assert len(a.feedback) < MAX_EVIDENCE_CHARS + 500
    assert "every check again" in a.feedback
