"""Advantages, zero-variance dropping, oversampling and carry-over in the batcher."""

import pytest

from aes_lib.learner import Batcher, LearnerConfig, LearnerConfigError, Sample, TokenizedTurn, centred, has_signal

TURN = TokenizedTurn((1, 2), (3,), (-0.5,))


def _sample(group, i, reward, role="solver", finished=True, **kw):
    return Sample(f"{group}-{i}", group, role, reward, (TURN,), finished=finished, **kw)


def _add_group(batcher, group, rewards, role="solver"):
    for i, r in enumerate(rewards):
        batcher.add(_sample(group, i, r, role))


def test_centring_has_no_std_division():
    assert centred([1.0, 0.0, 0.0, 0.0]) == [0.75, -0.25, -0.25, -0.25]
    assert centred([0.5, 0.7]) == pytest.approx([-0.1, 0.1])  # std division would give [-1, 1]
    assert has_signal([0.0, 0.5]) and not has_signal([0.3, 0.3, 0.3]) and not has_signal([1.0])
    with pytest.raises(ValueError, match="empty group"):
        centred([])


def test_batch_fills_by_oversampling_past_zero_variance_groups():
    b = Batcher(LearnerConfig(solver_group_size=4, groups_per_batch=2))
    _add_group(b, "all-fail", [0, 0, 0, 0])
    _add_group(b, "useful-1", [1, 0, 0, 0])
    assert b.next_batch() is None  # one useful group of two
    _add_group(b, "all-pass", [1, 1, 1, 1])
    _add_group(b, "useful-2", [1, 1, 0.5, 0])
    batch = b.next_batch()
    assert batch is not None and batch.role == "solver"
    assert [g.group_id for g in batch.groups] == ["useful-1", "useful-2"]
    assert batch.dropped == 2
    assert batch.groups[0].advantages == (0.75, -0.25, -0.25, -0.25)
    assert batch.groups[1].advantages == (0.375, 0.375, -0.125, -0.625)
    assert b.next_batch() is None


def test_incomplete_groups_carry_over_with_their_logprobs_and_updates_replace():
    b = Batcher(LearnerConfig(solver_group_size=3, groups_per_batch=1))
    b.add(_sample("late", 0, 1.0))
    b.add(_sample("late", 1, 0.0, finished=False))  # published while still running
    _add_group(b, "g", [1, 0, 0])
    batch = b.next_batch()
    assert [g.group_id for g in batch.groups] == ["g"] and batch.carried_over == 2
    # The running attempt's final version replaces it; the group completes next update.
    b.add(_sample("late", 1, 0.0))
    b.add(_sample("late", 2, 0.0))
    batch = b.next_batch()
    assert [s.rollout_id for s in batch.groups[0].samples] == ["late-0", "late-1", "late-2"]
    assert all(s.finished for s in batch.groups[0].samples)
    assert batch.groups[0].samples[0].turns[0].sampler_logprobs == (-0.5,)
    assert batch.carried_over == 0


def test_unfinished_attempts_count_toward_completion_but_are_not_trained():
    b = Batcher(LearnerConfig(solver_group_size=4, groups_per_batch=1))
    b.add(_sample("g", 0, 1.0))
    b.add(_sample("g", 1, 0.0, finished=False))  # e.g. cut by a model error
    b.add(_sample("g", 2, 0.0))
    b.add(_sample("g", 3, 0.0))
    batch = b.next_batch()
    assert [s.rollout_id for s in batch.groups[0].samples] == ["g-0", "g-2", "g-3"]
    assert batch.groups[0].advantages == pytest.approx((2 / 3, -1 / 3, -1 / 3))


def test_groups_that_never_fill_are_evicted_after_max_pending_updates():
    b = Batcher(LearnerConfig(solver_group_size=2, groups_per_batch=1, max_pending_updates=2))
    b.add(_sample("calibration", 0, 1.0))  # its group will never reach 2
    for update in range(3):
        _add_group(b, f"g{update}", [1, 0])
        batch = b.next_batch()
        assert batch.evicted == (1 if update == 2 else 0)
    assert b.pending == 0
    b.add(_sample("calibration", 1, 0.0))  # too late: ignored
    assert b.pending == 0 and b.next_batch() is None


def test_roles_use_their_own_group_sizes_and_a_trained_group_ignores_duplicates():
    b = Batcher(LearnerConfig(solver_group_size=2, proposer_group_size=3, groups_per_batch=1))
    _add_group(b, "p", [1, 0], role="proposer")
    assert b.next_batch() is None  # proposer group needs 3
    b.add(_sample("p", 2, 0, role="proposer"))
    batch = b.next_batch()
    assert batch.role == "proposer" and batch.groups[0].advantages == pytest.approx((2 / 3, -1 / 3, -1 / 3))
    b.add(_sample("p", 0, 1, role="proposer"))  # a redelivery after training
    assert b.pending == 0
    with pytest.raises(ValueError, match="role must be"):
        b.add(_sample("x", 0, 1, role="critic"))


def test_config_validation_and_env(monkeypatch):
    assert LearnerConfig().lr == 1e-6
    with pytest.raises(LearnerConfigError, match="group sizes must be >= 2"):
        LearnerConfig(solver_group_size=1)
    with pytest.raises(LearnerConfigError, match="kernel_backend"):
        LearnerConfig(kernel_backend="cuda")
    monkeypatch.setenv("AES_LEARNER_LR", "0.001")
    monkeypatch.setenv("AES_LEARNER_GROUPS_PER_BATCH", "4")
    cfg = LearnerConfig.from_env()
    assert cfg.lr == 0.001 and cfg.groups_per_batch == 4
    monkeypatch.setenv("AES_LEARNER_GROUPS_PER_BATCH", "four")
    with pytest.raises(LearnerConfigError, match="AES_LEARNER_GROUPS_PER_BATCH"):
        LearnerConfig.from_env()


def test_the_samples_size_their_group_and_revisions_join_their_attempt():
    b = Batcher(LearnerConfig(solver_group_size=16, proposer_group_size=128, groups_per_batch=1))
    for i, r in enumerate([1.0, 0.0, 0.0]):  # a wave of 3 attempts, whatever the configured 16
        b.add(_sample("w", i, r, group_size=3))
    assert b.next_batch().groups[0].group_id == "w"
    # Proposer group of 2 attempts: attempt 0 was sent back (not final), its revision is final.
    b.add(_sample("a", 0, 0.25, role="proposer", group_size=2, final=False))
    b.add(_sample("a", 1, 1.0, role="proposer", group_size=2))
    assert b.next_batch() is None  # one attempt has not ended yet
    b.add(_sample("a", 2, 0.0, role="proposer", group_size=2))
    batch = b.next_batch()
    assert batch.role == "proposer" and [s.reward for s in batch.groups[0].samples] == [0.25, 1.0, 0.0]


def test_stale_groups_are_dropped_when_a_batch_is_cut():
    b = Batcher(LearnerConfig(solver_group_size=2, groups_per_batch=1))
    b.add(_sample("old", 0, 1.0, policy_version=1))
    b.add(_sample("old", 1, 0.0, policy_version=3))
    b.add(_sample("new", 0, 1.0, policy_version=3))
    b.add(_sample("new", 1, 0.0, policy_version=3))
    batch = b.next_batch(min_version=2)
    assert [g.group_id for g in batch.groups] == ["new"] and batch.stale == 1


def test_resume_rebuilds_the_held_groups():
    cfg = LearnerConfig(solver_group_size=2, groups_per_batch=2, max_pending_updates=1)
    b = Batcher(cfg)
    _add_group(b, "trained-1", [1, 0])
    _add_group(b, "trained-2", [0, 1])
    _add_group(b, "flat", [1, 1])
    b.next_batch()
    _add_group(b, "queued", [1, 0])
    b.add(_sample("half", 0, 1.0))
    held = b.held()
    assert held == {"queued-0", "queued-1", "half-0"}
    samples = [_sample("queued", 0, 1.0), _sample("queued", 1, 0.0), _sample("half", 0, 1.0)]
    again = Batcher.resume(cfg, 1, ("trained-1", "trained-2"), samples)  # what the last TrainBatch says
    assert again.held() == held and again.pending == 1
    assert not again.add(_sample("trained-1", 0, 1.0))  # a redelivered member of a trained group
    for x in (b, again):
        x.add(_sample("half", 1, 0.0))
        assert [g.group_id for g in x.next_batch().groups] == ["queued", "half"]


def test_a_screened_attempt_completes_its_group_but_is_not_trained_on():
    b = Batcher(LearnerConfig(solver_group_size=4, groups_per_batch=1))
    b.add(_sample("g", 0, 1.0, screened="link to the judge's files: /app/x: a link to /tests/expected.txt"))
    for i, r in enumerate([1.0, 0.0, 0.0], start=1):
        b.add(_sample("g", i, r))
    batch = b.next_batch()
    assert [s.rollout_id for s in batch.groups[0].samples] == ["g-1", "g-2", "g-3"]
    assert batch.groups[0].advantages == pytest.approx((2 / 3, -1 / 3, -1 / 3))  # centred without the forged 1.0
    assert batch.screened == 1
    # A group whose only spread came from the screened attempt carries no signal left.
    b.add(_sample("h", 0, 1.0, screened="setuid file: /app/t"))
    for i in range(1, 4):
        b.add(_sample("h", i, 0.0))
    _add_group(b, "k", [1, 0, 0, 0])
    batch = b.next_batch()
    assert [g.group_id for g in batch.groups] == ["k"] and batch.dropped == 1 and batch.screened == 1
