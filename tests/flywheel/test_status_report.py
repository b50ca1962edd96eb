"""Status numbers from result streams, and the HTML report."""

import base64
import re

from aes_proto.messages import (
    BlobRef, CalibrationResult, LearnerStats, Lineage, PoolEvent, RolloutSummary, ServingUpdate, Verdict,
)

from aes_ops.report import build
from aes_lib.flywheel.status import outcome_label, render, summarize, wilson

OK = Verdict(stage="validate", ok=True, reason="ok")


def _r(aid, decision, verdicts=(OK,), cost=0.01, mean=0.5, mode="agent", rnd=1):
    return CalibrationResult(idempotency_key=aid, episode_id=aid, env_id=aid,
                             lineage=Lineage(assignment_id=aid, round=rnd, cost_usd=cost, mode=mode), decision=decision,
                             verdicts=verdicts, mean=mean,
                             proposer_reward={"admitted": 1.0, "rejected": 0.0}.get(decision, 0.25))


RESULTS = [
    _r("r1-000", "admitted"),
    _r("r1-001", "rejected", (Verdict(stage="validate", ok=False, reason="oracle_failed"),)),
    _r("r1-002", "too_easy", mean=1.0),
    _r("r2-000", "rejected", (OK, Verdict(stage="contamination", ok=False, reason="ngram_overlap")), rnd=2),
    _r("r2-001", "rejected", (Verdict(stage="validate", ok=False, reason="build_failed"),), mode="prompt", rnd=2),
    _r("r2-002", "admitted", mean=0.25, rnd=2),
]
EVENTS = [PoolEvent(idempotency_key="x", episode_id="x", env_id="e", kind="retired", reason="too_easy")]
ROLLOUTS = [RolloutSummary(idempotency_key=f"s{i}", episode_id="e", rollout_id=f"s{i}", env_id="e", role="solver",
                           reward=i / 4, purpose="calibration") for i in range(5)]


def test_outcome_labels_name_the_failing_gate():
    assert [outcome_label(r) for r in RESULTS] == [
        "admitted", "validate:oracle_failed", "calibrate:too_easy", "contamination:ngram_overlap",
        "validate:build_failed", "admitted"]


def test_an_audited_too_hard_candidate_is_counted_by_its_label():
    audited = [_r(f"a{i}", "too_hard", (OK, Verdict(stage="audit", ok=label == "hard", reason=label)), mean=0.0)
               for i, label in enumerate(("defect", "hard", "defect"))]
    assert summarize(audited + [_r("n", "too_hard", mean=0.0)], [], []).outcomes == {
        "calibrate:too_hard:defect": 2, "calibrate:too_hard:hard": 1, "calibrate:too_hard": 1}


def test_imported_tasks_without_a_reference_are_labelled_in_the_status():
    import msgspec

    admitted = msgspec.structs.replace(_r("i-1", "admitted", mode="seed"), no_reference=True)
    unverified = msgspec.structs.replace(_r("i-2", "unverified_too_hard", mode="seed"), no_reference=True)
    assert [outcome_label(admitted), outcome_label(unverified)] == ["admitted:no_reference",
                                                                   "calibrate:unverified_too_hard"]
    s = summarize([admitted, unverified], [], [])
    assert s.no_reference == {"admitted:no_reference": 1, "calibrate:unverified_too_hard": 1}
    assert s.modes["seed"].admitted == 1 and s.admitted == 0  # imported tasks are no proposer's work
    assert "admitted:no_reference" in render(s, 1, {}) and "unverified_too_hard" in render(s, 1, {})


def test_summary_counts_valid_rate_cost_and_rounds():
    s = summarize(RESULTS, EVENTS, ROLLOUTS)
    assert (s.candidates, s.valid, s.admitted) == (6, 4, 2)
    assert s.outcomes["admitted"] == 2 and s.outcomes["validate:build_failed"] == 1
    assert abs(s.cost_per_valid - 0.06 / 4) < 1e-12
    assert s.retired == {"too_easy": 1}
    assert {k: (t.candidates, t.valid, t.admitted) for k, t in s.rounds.items()} == {1: (3, 2, 1), 2: (3, 2, 1)}
    assert s.modes["prompt"].valid == 0 and s.modes["agent"].valid == 4
    lo, hi = s.valid_interval
    assert lo < 4 / 6 < hi


def test_a_seed_sent_through_admission_stays_out_of_the_proposer_numbers():
    seed = _r("seed-x", "too_hard", mean=0.0, mode="seed", rnd=0, cost=0.0)
    s = summarize([*RESULTS, seed], EVENTS, ROLLOUTS)
    assert (s.candidates, s.valid, s.admitted) == (6, 4, 2)
    assert 0 not in s.rounds and "calibrate:too_hard" not in s.outcomes
    assert (s.modes["seed"].candidates, s.modes["seed"].valid) == (1, 1)


def test_wilson_interval():
    assert wilson(0, 0) == (0.0, 1.0)
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and 0.2 < hi < 0.35
    lo, hi = wilson(50, 100)
    assert abs((lo + hi) / 2 - 0.5) < 1e-9 and 0.39 < lo < 0.41


def test_no_valid_environment_has_no_cost_per_valid():
    s = summarize([RESULTS[1]], [], [])
    assert s.cost_per_valid is None and s.valid_rate == 0.0


def test_report_embeds_three_png_plots_and_the_numbers():
    s = summarize(RESULTS, EVENTS, ROLLOUTS)
    page = build(s, RESULTS, ROLLOUTS, pool_size=3, pool_by_category={"text": 3}, band=(0.25, 0.75))
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 3
    assert all(base64.b64decode(b).startswith(b"\x89PNG") for b in images)
    assert "valid-environment rate: 4/6" in page and "pool: 3 active (text 3)" in page
    assert "contamination:ngram_overlap" in page


def _stats(version, role, seconds=2.0):
    # Separate policies: each role trains its own, so the curves split by policy too.
    return LearnerStats(idempotency_key=f"v{version}", episode_id="run", step=version, policy_version=version,
                        loss=0.1 * version, mean_reward=0.5, mask_fraction=0.05, mean_divergence=0.01,
                        tokens=1000, role=role, policy=role, seconds=seconds)


def _sync(policy, version, seconds):
    return ServingUpdate(idempotency_key=f"{policy}{version}", episode_id="run", policy=policy, version=version,
                         engine="http://engine", seconds=seconds)


def _learner_html(page):
    return page[page.index("<h2>Learner</h2>"):]


def test_report_shows_learner_curves_and_table():
    stats = [_stats(1, "solver"), _stats(2, "proposer"), _stats(3, "solver", seconds=0.0), _stats(4, "solver")]
    serving = [_sync("solver", 3, 1.0), _sync("solver", 1, 2.0), _sync("proposer", 2, 3.0)]
    page = build(summarize(RESULTS, EVENTS, ROLLOUTS), RESULTS, ROLLOUTS, pool_size=3, pool_by_category={"text": 3},
                 band=(0.25, 0.75), learner=stats, serving=serving)
    section = _learner_html(page)
    (curves,) = re.findall(r'alt="Learner curves" src="data:image/png;base64,([^"]+)"', section)
    assert base64.b64decode(curves).startswith(b"\x89PNG")
    assert "<td>updates (solver)</td><td>3</td>" in section and "<td>updates (proposer)</td><td>1</td>" in section
    assert "<td>latest policy version served</td><td>proposer v2, solver v3</td>" in section
    assert "<td>mean weight-sync seconds</td><td>2.00</td>" in section


def test_report_without_learner_stats_says_why():
    page = build(summarize(RESULTS, EVENTS, ROLLOUTS), RESULTS, ROLLOUTS, pool_size=3, pool_by_category={"text": 3},
                 band=(0.25, 0.75), learner=[], serving=[])
    section = _learner_html(page)
    assert "No learner update has run yet" in section and "groups fill only from training rollouts" in section
    assert "<img" not in section
    assert "<td>updates (solver)</td><td>0</td>" in section
    assert "<td>latest policy version served</td><td>none</td>" in section


def test_revisions_count_rounds_per_accepted_task_and_only_final_rewards():
    import msgspec

    def rev(r, revision, resubmitted=False):
        return msgspec.structs.replace(r, idempotency_key=f"{r.idempotency_key}:{revision}", resubmitted=resubmitted,
                                       lineage=msgspec.structs.replace(r.lineage, revision=revision))

    # r3-000 failed validation, was sent back and admitted on its second round; r3-001 took three.
    failed = (Verdict(stage="validate", ok=False, reason="build_failed"),)
    results = [rev(_r("r3-000", "rejected", failed, rnd=3), 0, resubmitted=True), rev(_r("r3-000", "admitted", rnd=3), 1),
               rev(_r("r3-001", "too_hard", mean=0.0, rnd=3), 0, resubmitted=True),
               rev(_r("r3-001", "rejected", failed, rnd=3), 1, resubmitted=True), rev(_r("r3-001", "admitted", rnd=3), 2),
               _r("r3-002", "rejected", failed, rnd=3)]
    s = summarize(results, [], [])
    assert (s.candidates, s.admitted, s.revised) == (6, 2, 3)
    assert s.rounds_per_admitted == 2.5 and s.rounds[3].rounds_per_admitted == 2.5
    # r_P from final outcomes only: the rejections that were revised are no final failures.
    assert s.mean_proposer_reward == (1.0 + 1.0 + 0.0) / 3
    text = render(s, 0, {})
    assert "sent back for revision: 3   rounds per accepted task: 2.50" in text
    page = build(s, results, [], pool_size=0, pool_by_category={}, band=(0.25, 0.75))
    assert "<th>rounds per accepted task</th>" in page and "<td>2.50</td>" in page
    assert "rounds per accepted task: n/a" in render(summarize(results[-1:], [], []), 0, {})


def test_status_leads_with_the_admission_gaps():
    s = summarize(RESULTS, EVENTS, ROLLOUTS, gaps=["contamination check OFF: no held-out index"])
    assert render(s, 3, {}).splitlines()[0] == "WARNING: contamination check OFF: no held-out index"


def test_admission_gaps_say_when_a_check_is_closed_off_or_advisory():
    from aes_lib.config import Settings
    from aes_lib.review import ReviewSettings
    from aes_ops.readout import admission_gaps

    index = BlobRef(key="contamination/index/x.bin", sha256="x", size=1)
    advisory, enforced = ReviewSettings(enforce=False), ReviewSettings(enforce=True)
    [closed, review] = admission_gaps(Settings(), None, advisory)
    assert (closed.stage, closed.closed) == ("contamination", True)
    assert "no_heldout_index" in closed.text and "aes contamination index SRC" in closed.text
    assert "AES_CONTAMINATION_REQUIRED=0" in closed.text
    assert (review.stage, review.closed) == ("review", False) and "advisory" in review.text
    [off] = admission_gaps(Settings(contamination_required=False), None, enforced)
    assert not off.closed and off.text.startswith("contamination check OFF")
    assert admission_gaps(Settings(), index, enforced) == []
    assert [g.stage for g in admission_gaps(Settings(route="validate,calibrate"), index, enforced)] == [
        "contamination", "review"]
