"""The proposer boundary: one registry of modes, one result type, budgets from one place."""

from __future__ import annotations

from typing import get_args

import pytest

from aes_lib.agents.proposer.baselines import BaselineLimits
from aes_lib.agents.proposer.boundary import GENERATORS, MODES, generator
from aes_lib.agents.proposer.harness import EpisodeBudget
from aes_lib.agents.proposer.proposal import Proposal
from aes_lib.flywheel.config import FlywheelConfig, FlywheelConfigError
from aes_proto.messages import BlobRef, ProposerMode
from aes_proto.trajectory import Trajectory
from aes_lib.agents.proposer.config import ProposerConfig


def test_modes_are_the_registry_and_the_flywheel_accepts_exactly_them():
    assert MODES == tuple(GENERATORS) == get_args(ProposerMode) == ("prompt", "feedback", "agent", "procedural",
                                                                 "parametric")
    for mode in MODES:
        assert FlywheelConfig(generation_mode=mode).generation_mode == mode
    with pytest.raises(FlywheelConfigError):
        FlywheelConfig(generation_mode="seed")
    with pytest.raises(ValueError, match="unknown generation mode 'oracle': choose from prompt, feedback, agent"):
        generator("oracle")


def test_a_proposal_has_a_task_or_a_reason():
    traj, ref = Trajectory(rollout_id="r", role="proposer"), BlobRef(key="k", sha256="s", size=0)
    assert Proposal(traj, ref, None, failure="no_submission").failure == "no_submission"
    with pytest.raises(ValueError):
        Proposal(traj, ref, None)


def test_proposer_config_defaults_are_the_budgets_and_env_overrides_them(monkeypatch):
    assert ProposerConfig().budget() == EpisodeBudget() and ProposerConfig().baseline() == BaselineLimits()
    monkeypatch.setenv("AES_PROPOSER_MAX_TURNS", "7")
    monkeypatch.setenv("AES_PROPOSER_MAX_REVISIONS", "0")
    monkeypatch.setenv("AES_PROPOSER_PROMPT_MAX_TOKENS", "512")
    monkeypatch.setenv("AES_PROPOSER_TEMPERATURE", "1.0")
    config = ProposerConfig.from_env()
    assert config.budget() == EpisodeBudget().with_loop(max_turns=7) and config.budget().loop.max_turns == 7
    assert config.baseline() == BaselineLimits(max_revisions=0, max_tokens=512, temperature=1.0)
