"""Following a round: when it is over, and what each stage outcome prints."""

from aes_proto import subjects
from aes_proto.codec import encode
from aes_proto.messages import Assignment, CalibrationResult, DeadLetter, Lineage, PoolPlan, Verdict

from aes_ops.rounds import RoundTracker, decode_any, describe, run_rounds


def _a(aid, rnd=1, rev=0):
    return Assignment(idempotency_key=f"{aid}:{rev}", episode_id=aid,
                      lineage=Lineage(assignment_id=aid, round=rnd, revision=rev), direction="harder")


def _res(aid, decision, resubmitted=False, rev=0, rnd=1):
    return CalibrationResult(idempotency_key=f"{aid}:{rev}:res", episode_id=aid, env_id="e" * 64,
                             lineage=Lineage(assignment_id=aid, round=rnd, revision=rev),
                             decision=decision, resubmitted=resubmitted,
                             verdicts=(Verdict(stage="validate", ok=decision != "rejected", reason="oracle_failed"),))


def test_round_ends_when_every_assignment_ends_including_revisions():
    t = RoundTracker(round=1)
    for m in (_a("r1-000"), _a("r1-001"), _a("r0-000", rnd=0)):
        t.observe(m)
    assert not t.done  # the plan step (how many to expect) not seen yet
    t.observe(PoolPlan(idempotency_key="p", episode_id="p", round=1, fresh=2))
    t.observe(_res("r1-000", "too_hard", resubmitted=True))  # sent back: not over
    t.observe(_res("r1-001", "admitted"))
    t.observe(_res("r0-000", "admitted", rnd=0))  # another round's result: not counted
    assert not t.done
    t.observe(_a("r1-000", rev=1))
    t.observe(_res("r1-000", "rejected", rev=1))
    assert t.done and t.finished == {"r1-000": "validate:oracle_failed", "r1-001": "admitted"}


def test_a_gate_rejection_sent_back_for_revision_does_not_end_the_assignment():
    from aes_proto.messages import BlobRef, CandidateEnv

    from aes_lib.admission import rejection

    t = RoundTracker(round=1)
    t.observe(PoolPlan(idempotency_key="p", episode_id="p", round=1, fresh=1))
    t.observe(_a("r1-000"))
    cand = CandidateEnv(idempotency_key="c", episode_id="r1-000", env_id="e" * 64, route=("validate", "calibrate"),
                        bundle=BlobRef(key="b", sha256="b", size=1), lineage=Lineage(assignment_id="r1-000", round=1))
    fail = Verdict(stage="validate", ok=False, reason="build_failed")
    t.observe(rejection(cand, fail, 0.0, resubmitted=True))
    assert not t.done
    t.observe(_a("r1-000", rev=1))
    t.observe(rejection(cand, fail, 0.0))
    assert t.done and t.finished == {"r1-000": "validate:build_failed"}


def test_dead_letter_on_the_admission_path_ends_an_assignment():
    t = RoundTracker(round=2)
    t.observe(PoolPlan(idempotency_key="p", episode_id="p", round=2, fresh=1))
    a = _a("r2-000", rnd=2)
    t.observe(a)
    side = DeadLetter(idempotency_key="d0", episode_id="r2-000", subject=subjects.ROLLOUT_SUMMARY, stream="S",
                      consumer="planner-stats", deliveries=6, error="x", lineage=a.lineage, data=b"")
    t.observe(side)
    other = DeadLetter(idempotency_key="d2", episode_id="r1-000", subject=subjects.stage("validate"), stream="S",
                       consumer="validator", deliveries=6, error="boom", lineage=Lineage(assignment_id="r1-000", round=1))
    t.observe(other)  # another round's
    blind = DeadLetter(idempotency_key="d3", episode_id="r2-000", subject=subjects.stage("validate"), stream="S",
                       consumer="validator", deliveries=1, fault="malformed", error="junk")
    t.observe(blind)  # no lineage in its bytes: it names no assignment
    assert not t.done
    t.observe(DeadLetter(idempotency_key="d1", episode_id="r2-000", subject=subjects.stage("validate"), stream="S",
                         consumer="validator", deliveries=6, error="boom", lineage=a.lineage, data=b""))
    assert t.done and t.finished == {"r2-000": "dead_letter"}


def test_empty_pool_round_is_immediately_done():
    t = RoundTracker(round=0)
    t.set_empty_pool()
    assert t.done


def test_describe_and_decode_any():
    m = decode_any(encode(_res("r1-000", "too_hard", resubmitted=True)))
    line = describe(subjects.RESULT_CALIBRATION, m)
    assert line.startswith("result r1-000 rev0: calibrate:too_hard") and "revision 1 requested" in line
    assert describe(subjects.ASSIGNMENT, _a("r1-000")).startswith("assignment r1-000 rev0: harder")
    assert decode_any(b"\x00garbage") is None


async def test_the_training_phase_reads_on_from_the_rounds_feed(bus):
    """A round with nothing to plan ends at once; ``after_round`` gets the feed the round read,
    so what was published in between (here by the phase itself) reaches it exactly once."""
    seen = []

    async def after_round(r, feed):
        await bus.publish(subjects.POOL_PLAN, PoolPlan(idempotency_key="after", episode_id="after", round=r))
        while (got := await feed.next(5.0)) is not None:
            seen.append(got[1])
            if got[1].idempotency_key == "after":
                return

    async def one() -> int:
        return 1

    [tracker] = await run_rounds(bus, one, rounds=1, fresh=0, review=False, round_timeout=30, out=lambda _: None,
                                 after_round=after_round)
    assert tracker.done
    assert [m.idempotency_key for m in seen] == ["after"]  # the round's own plan step was read by the round
