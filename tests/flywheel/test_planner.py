"""Planner logic: history folding, parent choice across categories, directions, stable ids."""

import pytest

from aes_proto.messages import BlobRef, RolloutSummary
from aes_proto.records import EnvHistory, PoolEntry, RolloutRecord

from aes_lib.flywheel.planner import WINDOW, choose, fold, parents, plan_round


def _entry(env_id, category="text", mean=None):
    return PoolEntry(env_id=env_id, bundle=BlobRef(key=f"b/{env_id}", sha256="x", size=1), category=category, mean_reward=mean)


def _summary(env_id, rid, reward, failure="", purpose="training", role="solver"):
    return RolloutSummary(idempotency_key=rid, episode_id="ep", rollout_id=rid, env_id=env_id, role=role,
                          reward=reward, failure=failure, purpose=purpose, model="m")


def _history(env_id, *rewards):
    return EnvHistory(env_id=env_id, recent=tuple(RolloutRecord(rollout_id=f"{env_id}{i}", reward=r)
                                                  for i, r in enumerate(rewards)))


def test_fold_records_rewards_and_failures_once_per_rollout():
    h = None
    for i, (r, f) in enumerate([(0.0, "test_a: x"), (0.5, "test_a: x"), (1.0, ""), (0.0, "timeout")]):
        h = fold(h, _summary("e1", f"r{i}", r, f))
    assert fold(h, _summary("e1", "r1", 0.5, "test_a: x")) == h  # redelivered
    assert [r.reward for r in h.recent] == [0.0, 0.5, 1.0, 0.0] and h.recent[0].solver == "m"
    assert h.pass_rate == 0.375
    assert h.common_failure == "test_a: x"


def test_a_hinted_attempt_is_kept_for_the_workspace_but_not_counted():
    h = fold(fold(None, _summary("e1", "r0", 0.0, "timeout")), _summary("e1", "d", 1.0, "x", purpose="diagnostic"))
    assert [r.purpose for r in h.recent] == ["training", "diagnostic"]
    assert h.pass_rate == 0.0 and h.failures == {"timeout": 1}
    assert fold(h, _summary("e1", "p", 1.0, role="proposer")) is None  # not the solver's record


def test_fold_keeps_a_window():
    h = None
    for i in range(WINDOW + 5):
        h = fold(h, _summary("e1", f"r{i}", 1.0 if i >= 5 else 0.0))
    assert len(h.recent) == WINDOW and h.pass_rate == 1.0


def test_direction_follows_the_pass_rate():
    stats = {"hard": _history("hard", 0.0, 0.0, 0.5), "easy": _history("easy", 1.0, 1.0, 0.5)}
    out = plan_round([_entry("hard"), _entry("easy")], [], stats, fresh=2, round_=1)
    by_parent = {a.lineage.parent_env_id: a for a in out}
    assert by_parent["hard"].direction == "easier" and by_parent["easy"].direction == "harder"
    assert by_parent["hard"].pass_rate == 1 / 6


def test_entry_mean_is_used_without_rollouts_and_unknown_is_new():
    ps = parents([_entry("a", mean=0.9), _entry("b")], {})
    out = plan_round([e.entry for e in ps], [], {}, fresh=2, round_=0)
    assert {a.lineage.parent_env_id: a.direction for a in out} == {"a": "harder", "b": "new"}


def test_categories_with_fewest_environments_come_first():
    active = [_entry(f"t{i}", "text") for i in range(4)] + [_entry("g0", "git"), _entry("s0", "sql")]
    chosen = choose(parents(active, {}), count=4)
    cats = [p.entry.category for p in chosen]
    # git and sql have 1 each, text 4: the first three go to git, sql, then git/sql again.
    assert cats.count("text") == 0 and sorted(cats) == ["git", "git", "sql", "sql"]


def test_replacements_come_from_retired_parents_with_stable_ids():
    retired = [_entry("r" * 64, "text")]
    stats = {"r" * 64: _history("r" * 64, 1.0, 1.0, 1.0, 1.0)}
    first = plan_round([_entry("a")], retired, stats, fresh=1, round_=3)
    again = plan_round([_entry("a")], retired, stats, fresh=1, round_=3)
    assert [a.idempotency_key for a in first] == [a.idempotency_key for a in again]
    assert first[0].lineage.assignment_id == "r3-replace-" + "r" * 16 and first[0].direction == "harder"
    assert first[1].lineage.assignment_id == "r3-000" and all(a.lineage.round == 3 for a in first)


def test_empty_pool_plans_nothing():
    assert plan_round([], [], {}, fresh=5, round_=0) == []


def test_a_review_that_empties_the_pool_plans_fresh_work_from_the_retired():
    out = plan_round([], [_entry("gone", mean=0.0)], {}, fresh=2, round_=4)
    assert [a.lineage.assignment_id for a in out] == ["r4-replace-gone", "r4-000", "r4-001"]
    assert all(a.lineage.parent_env_id == "gone" and a.direction == "easier" for a in out)


def test_each_slot_becomes_a_group_of_parallel_attempts():
    out = plan_round([_entry("a")], [_entry("gone")], {}, fresh=1, round_=2, attempts=3)
    assert [a.lineage.assignment_id for a in out] == [f"r2-replace-gone-a{k}" for k in range(3)] + [f"r2-000-a{k}" for k in range(3)]
    assert {(a.group_id, a.group_size) for a in out} == {("r2-replace-gone", 3), ("r2-000", 3)}
    assert len({a.idempotency_key for a in out}) == 6  # each attempt is its own proposer episode
    [single] = plan_round([_entry("a")], [], {}, fresh=1, round_=2)
    assert (single.lineage.assignment_id, single.group_id, single.group_size) == ("r2-000", "r2-000", 1)


def test_a_blind_plan_tosses_a_coin_for_each_direction_whatever_the_pass_rate():
    """The no-feedback ablation: the same parents, each child's direction by a coin seeded with its
    slot and parent, so a replanned round repeats it and runs from other pools toss their own."""
    active = [_entry(f"hard{i}") for i in range(12)]
    stats = {e.env_id: _history(e.env_id, 0.0, 0.0) for e in active}  # all failing: the planner says easier
    seen = plan_round(active, [], stats, fresh=12, round_=1)
    blind = plan_round(active, [], stats, fresh=12, round_=1, blind=True)
    assert {a.direction for a in seen} == {"easier"}
    assert {a.direction for a in blind} == {"easier", "harder"}
    assert [a.lineage.parent_env_id for a in blind] == [a.lineage.parent_env_id for a in seen]
    assert [a.pass_rate for a in blind] == [a.pass_rate for a in seen]  # the move's step size still reads it
    assert [a.direction for a in plan_round(active, [], stats, fresh=12, round_=1, blind=True)] == \
        [a.direction for a in blind]
    # the proposals of one slot share its coin
    group = plan_round(active[:1], [], stats, fresh=1, round_=1, attempts=4, blind=True)
    assert len({a.direction for a in group}) == 1


def test_the_planner_direction_is_a_setting(monkeypatch):
    from aes_lib.flywheel.config import FlywheelConfig, FlywheelConfigError

    monkeypatch.setenv("AES_PLANNER_DIRECTION", "coin")
    assert FlywheelConfig.from_env().planner_direction == "coin"
    with pytest.raises(FlywheelConfigError, match="AES_PLANNER_DIRECTION"):
        FlywheelConfig(planner_direction="random")
