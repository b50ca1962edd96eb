"""What the learner trains on: tokenized assistant turns with the sampler's log-probs.

The trajectory JSON is ``aes_proto.trajectory.Trajectory``: each ``Turn``
carries ``prompt_token_ids`` (the whole chat-templated prompt the model saw),
``completion_token_ids`` and ``completion_logprobs`` (the sampler's log-prob of each
completion token). Each turn trains as its own sequence ``prompt + completion``,
so the log-prob of every completion token is conditioned on exactly what the
sampler conditioned on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the trainer's modules import without msgspec
    from aes_proto.trajectory import Trajectory


class TrajectoryFormatError(ValueError):
    """A trajectory whose turns cannot be trained on (missing ids or mismatched log-probs)."""


@dataclass(frozen=True)
class TokenizedTurn:
    """One model call, as the trainer needs it."""

    prompt_ids: tuple[int, ...]
    """Token ids of the prompt (chat template applied)."""
    completion_ids: tuple[int, ...]
    """Token ids the sampler produced."""
    sampler_logprobs: tuple[float, ...]
    """The sampler's log-prob of each completion token (the DPPO anchor ``log mu``)."""
    temperature: float = 1.0
    """Sampling temperature: the trainer scores ``softmax(logits / temperature)``, the
    distribution the sampler drew from (greedy turns, temperature 0, score at 1)."""

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise TrajectoryFormatError("a turn needs prompt token ids")
        if len(self.completion_ids) != len(self.sampler_logprobs):
            raise TrajectoryFormatError(
                f"{len(self.completion_ids)} completion ids but {len(self.sampler_logprobs)} log-probs"
            )
        if any(lp > 0 for lp in self.sampler_logprobs):
            raise TrajectoryFormatError("sampler log-probs must be <= 0")
        if self.temperature < 0:
            raise TrajectoryFormatError(f"temperature must be >= 0, got {self.temperature}")


@dataclass(frozen=True)
class Sample:
    """One scored attempt in a group."""

    rollout_id: str
    group_id: str
    role: str
    """``solver`` or ``proposer``: decides the group size."""
    reward: float
    turns: tuple[TokenizedTurn, ...]
    finished: bool = True
    """False for a trajectory still running at publish time; it waits for its final version."""
    policy_version: int = 0
    """Version of the weights that sampled it."""
    group_size: int = 0
    """Members of its group as the publisher sized it; 0: the learner's setting for the role."""
    final: bool = True
    """Ends one member of the group (a proposer episode sent back for revision does not)."""
    screened: str = ""
    """Forgery signs in its trial (``TrajectoryRef.screened``): it completes its group but is not trained on."""

    @property
    def n_tokens(self) -> int:
        return sum(len(t.completion_ids) for t in self.turns)


def turns_from_trajectory(traj: Trajectory) -> tuple[TokenizedTurn, ...]:
    """The trainable turns of a stored trajectory (turns without completion tokens are skipped)."""
    turns = []
    for t in traj.turns:
        if not t.completion_token_ids:
            continue
        try:
            turns.append(TokenizedTurn(tuple(t.prompt_token_ids), tuple(t.completion_token_ids),
                                       tuple(t.completion_logprobs), t.temperature or 1.0))
        except TrajectoryFormatError as e:
            raise TrajectoryFormatError(f"trajectory {traj.rollout_id} turn {t.index}: {e}") from e
    return tuple(turns)
