"""Training waves: which pool environments the solver practises on, and how often.

A wave samples ``groups_per_wave`` environments from the active pool and asks for
``group_size`` attempts at each; every attempt is one ``RolloutRequest`` that any
replica of the training-rollout service may run. Ids derive from the wave id, so a
redelivered wave republishes the same keys. With ``buffer_weight`` below 1 an environment whose
latest training group had no reward spread is sampled less (``buffer_weights``).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence
from typing import ClassVar

from aes_proto.messages import RolloutRequest, TrainingWave

from aes_lib.config import read_settings
from aes_lib.flywheel import controls
from aes_proto.records import EnvHistory, PoolEntry


class TrainingConfigError(ValueError):
    """A training setting out of range."""


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """Training rollouts. Field ``x`` reads ``AES_TRAINING_X``; defaults are sized for 2 CPU cores."""

    env_prefix: ClassVar[str] = "AES_TRAINING_"
    section: ClassVar[str] = "training"
    groups_per_wave: int = 2
    """Environments sampled per wave (paper: 16 groups a batch)."""
    group_size: int = 4
    """Attempts per environment, centred together (paper: 16)."""
    waves_per_round: int = 1
    """Waves ``aes run`` requests after each round's admissions (each followed by the learner's update)."""
    max_turns: int = 4
    """Turns of one training attempt."""
    max_tokens: int = 192
    """Completion tokens per model call of a training attempt."""
    history_turns: int = 6
    """Past exchanges re-sent each turn of a training attempt; 0: all, as far as ``context_tokens``
    allows (turns that extend each other merge into one training sequence)."""
    context_tokens: int = 8192
    """The policy's context window: the history is cut to fit it."""
    temperature: float = 1.0
    """Sampling temperature; recorded per turn and reproduced by the trainer."""
    engine_wait_s: float = 600.0
    """How long ``aes run`` waits for the learner's update and the engine's reload after a wave."""
    allow_forgeable: bool = False
    """Sample pool entries the tamper probe found forgeable (imported tasks the operator seeded anyway)."""
    policy_lag: int = 0
    """How many versions a wave's samples may trail the learner, so the next wave samples while
    the learner trains (``aes_ops.waves.train``): 0 waits for each update to be served first
    (synchronous); keep it within the learner's ``max_policy_lag``, beyond which samples are dropped."""
    buffer_weight: float = 1.0
    """Sampling weight of a pool environment whose latest training group all passed or all failed,
    against 1 for the others (prime-rl's buffer idea: what teaches nothing is drawn less; read
    from the planner-stats service's histories); 1: uniform."""

    def __post_init__(self) -> None:
        if (min(self.groups_per_wave, self.group_size, self.max_turns, self.max_tokens) < 1
                or min(self.waves_per_round, self.policy_lag, self.history_turns, self.context_tokens) < 0):
            raise TrainingConfigError("groups_per_wave, group_size, max_turns and max_tokens must be >= 1, "
                                      "waves_per_round, policy_lag, history_turns and context_tokens >= 0")
        if self.group_size < 2:
            raise TrainingConfigError("group_size must be >= 2: one attempt has no advantage")
        if self.temperature <= 0:
            raise TrainingConfigError(f"temperature must be > 0 for on-policy sampling, got {self.temperature}")
        if not 0.0 < self.buffer_weight <= 1.0:
            raise TrainingConfigError(f"buffer_weight must be in (0, 1], got {self.buffer_weight}")

    @classmethod
    def from_env(cls, **overrides: object) -> "TrainingConfig":
        return cls(**{**read_settings(cls, TrainingConfigError), **overrides})  # type: ignore[arg-type]


def last_group(history: EnvHistory) -> list[float]:
    """The rewards of the latest training group in ``history`` (as far as its window reaches;
    empty: never trained on). A training rollout's id is its group's id and ``-<k>``
    (``wave_requests``)."""
    training = [r for r in history.recent if r.purpose == "training"]
    group = training[-1].rollout_id.rsplit("-", 1)[0] if training else ""
    return [r.reward for r in training if r.rollout_id.rsplit("-", 1)[0] == group]


def buffer_weights(histories: Mapping[str, EnvHistory], weight: float) -> dict[str, float]:
    """Env id -> ``weight`` for each environment whose latest training group had no reward spread
    (``controls.buffer_weights``); the others, and those never trained on, weigh 1."""
    return controls.buffer_weights({env_id: last_group(h) for env_id, h in histories.items()}, weight)


def sample_environments(entries: Sequence[PoolEntry], n: int, seed: str,
                        weights: Mapping[str, float] | None = None) -> list[PoolEntry]:
    """``n`` environments, uniformly and without replacement while the pool allows (a pool
    smaller than ``n`` is cycled); with ``weights`` (env id -> weight, 1 where absent) weighted
    without replacement (``controls.weighted_order``); the same seed picks the same ones."""
    ordered = sorted(entries, key=lambda e: e.env_id)
    rng = random.Random(seed)
    rng.shuffle(ordered)
    if weights:
        ordered = controls.weighted_order(ordered, lambda e: weights.get(e.env_id, 1.0), rng)
    return [ordered[i % len(ordered)] for i in range(n)] if ordered else []


def wave_requests(wave: TrainingWave, entries: Sequence[PoolEntry], allow_forgeable: bool = False,
                  weights: Mapping[str, float] | None = None) -> list[RolloutRequest]:
    """One request per attempt of each sampled environment (``weights``: ``sample_environments``'s);
    entries flagged forgeable only when ``allow_forgeable`` (a solver could learn to forge their reward)."""
    entries = [e for e in entries if allow_forgeable or not e.forgeable]
    out = []
    for g, e in enumerate(sample_environments(entries, wave.groups, wave.wave_id, weights)):
        group_id = f"{wave.wave_id}-g{g}-{e.env_id[:12]}"
        for k in range(wave.group_size):
            rid = f"{group_id}-{k}"
            out.append(RolloutRequest(
                idempotency_key=rid, episode_id=wave.wave_id, rollout_id=rid, env_id=e.env_id, bundle=e.bundle,
                group_id=group_id, group_size=wave.group_size, wave_id=wave.wave_id,
                policy_version=wave.policy_version, imported=e.source == "seed"))
    return out
