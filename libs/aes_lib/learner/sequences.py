"""Training sequences: the turns of a sample packed into as few sequences as their prefixes allow.

A multi-turn agent re-sends its growing conversation: turn ``k + 1``'s prompt is turn
``k``'s prompt and completion plus the environment's reply. Such turns train as one
sequence (the last turn's tokens), each completion token scored at its own position
with its own turn's temperature and sampler log-prob; the tokens between turns (tool
output, the next user message) are context only. A causal model's log-prob of a token
depends on its prefix alone, so this is the same loss as training the turns one by one,
for one sequence's tokens instead of the sum of every growing prefix (prime-rl merges
turns the same way). A turn whose prompt does not extend the previous sequence (the
history was truncated or re-templated) starts a new sequence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aes_lib.learner.samples import TokenizedTurn


@dataclass(frozen=True)
class TrainSeq:
    """One forward pass's worth of tokens and the completion tokens trained in it."""

    ids: tuple[int, ...]
    targets: tuple[int, ...]
    """Positions in ``ids`` of trained (completion) tokens; each is predicted by the position before it."""
    logprobs: tuple[float, ...]
    """The sampler's log-prob of each target token."""
    temperatures: tuple[float, ...]
    """The sampling temperature of each target token's turn (0, greedy, scores at 1)."""
    advantage: float

    @property
    def length(self) -> int:
        return len(self.ids)

    @property
    def n_targets(self) -> int:
        return len(self.targets)


def pack_turns(turns: Iterable[TokenizedTurn], advantage: float, merge: bool = True) -> list[TrainSeq]:
    """The training sequences of one sample's turns (``merge=False``: one sequence per turn)."""
    out: list[TrainSeq] = []
    ids: tuple[int, ...] = ()
    targets: list[int] = []
    logprobs: list[float] = []
    temps: list[float] = []
    for t in turns:
        if not t.completion_ids:
            continue
        if not (merge and ids and t.prompt_ids[: len(ids)] == ids):
            if ids:
                out.append(TrainSeq(ids, tuple(targets), tuple(logprobs), tuple(temps), advantage))
            ids, targets, logprobs, temps = (), [], [], []
        start = len(t.prompt_ids)
        ids = t.prompt_ids + t.completion_ids
        targets += range(start, len(ids))
        logprobs += t.sampler_logprobs
        temps += [t.temperature or 1.0] * len(t.completion_ids)
    if ids:
        out.append(TrainSeq(ids, tuple(targets), tuple(logprobs), tuple(temps), advantage))
    return out


def micro_batches(seqs: list[TrainSeq], max_tokens: int) -> list[list[TrainSeq]]:
    """Consecutive runs whose padded size (count x longest) stays within ``max_tokens``."""
    out: list[list[TrainSeq]] = []
    cur: list[TrainSeq] = []
    longest = 0
    for s in seqs:
        if cur and max(longest, s.length) * (len(cur) + 1) > max_tokens:
            out.append(cur)
            cur, longest = [], 0
        cur.append(s)
        longest = max(longest, s.length)
    if cur:
        out.append(cur)
    return out


def split_across(seqs: list[TrainSeq], world: int) -> list[list[TrainSeq]]:
    """``world`` shares of ``seqs`` with about equal token counts (longest first to the lightest
    share), each share in the original order so that runs stay deterministic."""
    loads = [0] * world
    owner: dict[int, int] = {}
    for i in sorted(range(len(seqs)), key=lambda i: -seqs[i].length):
        r = loads.index(min(loads))
        owner[i] = r
        loads[r] += seqs[i].length
    return [[s for i, s in enumerate(seqs) if owner[i] == r] for r in range(world)]
