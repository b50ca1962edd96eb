"""Reward files are read as Harbor reads them, and only rewards are read: finite numbers in [0, 1]."""

import json

import pytest

from aes_lib.sandbox import RewardError, parse_reward
from aes_lib.sandbox.trial import ConflictingRewards


def test_reward_json_takes_precedence_and_uses_the_reward_key() -> None:
    data = json.dumps({"reward": 0.25, "style": 1.0}).encode()
    assert parse_reward(data, None) == (0.25, {"reward": 0.25, "style": 1.0})
    assert parse_reward(data, b"0.25\n") == (0.25, {"reward": 0.25, "style": 1.0})  # the same verdict twice
    # Metrics beside the reward key are not rewards: any finite number.
    assert parse_reward(b'{"reward": 1.0, "aes_probe": 12}', None) == (1.0, {"reward": 1.0, "aes_probe": 12.0})


def test_two_reward_files_that_disagree_are_refused() -> None:
    # Harbor's precedence let a stray reward.json (the agent's, copied by test.sh) outrank root's reward.txt.
    with pytest.raises(ConflictingRewards, match="two verdicts"):
        parse_reward(b'{"reward": 1.0}', b"0\n")
    with pytest.raises(ConflictingRewards, match="one is no reward"):
        parse_reward(b'{"reward": 1000}', b"0\n")


def test_reward_json_without_reward_key_is_the_mean() -> None:
    reward, metrics = parse_reward(json.dumps({"a": 1, "b": 0.5}).encode(), None)
    assert reward == 0.75 and metrics == {"a": 1.0, "b": 0.5}


def test_fractional_reward_txt_is_kept() -> None:
    assert parse_reward(None, b" 0.6667\n") == (0.6667, {"reward": 0.6667})
    assert parse_reward(None, b"1e-05\n") == (1e-05, {"reward": 1e-05})  # what %g writes for a small one


@pytest.mark.parametrize(
    ("json_bytes", "txt_bytes"),
    [(None, None), (b"{", None), (b"[]", None), (b'{"reward": "high"}', None), (b'{"reward": true}', None),
     (None, b"nan"), (None, b"pass"), (b"{}", None), (b"[" * 100_000, None), (b'{"reward": NaN}', None)],
)
def test_malformed_rewards_raise(json_bytes, txt_bytes) -> None:
    with pytest.raises(RewardError):
        parse_reward(json_bytes, txt_bytes)


@pytest.mark.parametrize(
    ("json_bytes", "txt_bytes"),
    [(b'{"a": 1e308, "b": 1e308}', None),  # each finite, their mean inf
     (b'{"reward": 1000}', None), (b'{"reward": -0.5}', None), (b'{"reward": 1' + b"0" * 400 + b"}", None),
     (b'{"a": 2, "b": -1}', None),  # a mean of metrics is a reward only if each is one
     (b'{"reward": 0.5, "x": Infinity}', None),
     (None, b"1_000"), (None, b"1_0"), (None, b"inf"), (None, b"1e999"), (None, b"2"), (None, b"-0.1"),
     (None, "\u0661".encode()),  # ARABIC-INDIC DIGIT ONE: float() takes it
     (None, b"0x1p0"), (None, b"1.0 0")],
)
def test_a_number_that_is_not_a_reward_is_refused(json_bytes, txt_bytes) -> None:
    with pytest.raises(RewardError):
        parse_reward(json_bytes, txt_bytes)
