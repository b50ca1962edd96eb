"""What every generation mode returns (``boundary.generate``)."""

from __future__ import annotations

from dataclasses import dataclass

from aes_lib.bundle import PackedBundle
from aes_lib.sandbox import ValidationReport
from aes_proto.messages import BlobRef
from aes_proto.trajectory import Trajectory


@dataclass(frozen=True)
class Proposal:
    """One generation's outcome, whatever the mode: a packed task, or why there is none."""

    trajectory: Trajectory
    """The proposer's conversation: turns, token counts and cost (the learner's sample)."""
    trajectory_ref: BlobRef
    """``trajectory`` in the blob store."""
    packed: PackedBundle | None
    """The task, or None when nothing came out."""
    failure: str = ""
    """Why ``packed`` is None: ``no_submission`` | ``format_error`` | ``model_error`` |
    ``invalid_bundle`` | ``not_procedural`` | ``no_difficulty`` | ``difficulty_out_of_range``; empty
    when it is not."""
    report: ValidationReport | None = None
    """The last validation of ``packed``'s files, when the mode ran one (``feedback``)."""

    def __post_init__(self) -> None:
        if (self.packed is None) != bool(self.failure):
            raise ValueError("a proposal holds either a task or the reason there is none")
