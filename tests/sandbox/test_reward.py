"""Reward files are read as Harbor reads them."""

import json

import pytest

from aes_lib.sandbox import RewardError, parse_reward


def test_reward_json_takes_precedence_and_uses_the_reward_key() -> None:
    data = json.dumps({"reward": 0.25, "style": 1.0}).encode()
    assert parse_reward(data, b"1.0") == (0.25, {"reward": 0.25, "style": 1.0})


def test_reward_json_without_reward_key_is_the_mean() -> None:
    reward, metrics = parse_reward(json.dumps({"a": 1, "b": 0.5}).encode(), None)
    assert reward == 0.75 and metrics == {"a": 1.0, "b": 0.5}


def test_fractional_reward_txt_is_kept() -> None:
    assert parse_reward(None, b" 0.6667\n") == (0.6667, {"reward": 0.6667})


@pytest.mark.parametrize(
    ("json_bytes", "txt_bytes"),
    [(None, None), (b"{", None), (b"[]", None), (b'{"reward": "high"}', None), (b'{"reward": true}', None),
     (None, b"nan"), (None, b"pass"), (b"{}", None)],
)
def test_malformed_rewards_raise(json_bytes, txt_bytes) -> None:
    with pytest.raises(RewardError):
        parse_reward(json_bytes, txt_bytes)
