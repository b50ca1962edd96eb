"""The tracked series: each bus message as named scalars at a step, the policy version.

Names are the same in every backend: ``learner/<role>/<stat>`` per update,
``rollouts/<purpose>/<role>/reward`` per attempt, ``admission/<outcome>`` (running counts
per outcome label, as ``aes status`` names them), ``round/<n>/valid_rate`` and
``round/<n>/cost_usd`` (running, per flywheel round), ``serving/<policy>/load_seconds``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from aes_proto.messages import CalibrationResult, LearnerStats, RolloutSummary, ServingUpdate

from aes_lib.flywheel.status import is_valid, outcome_label

Scalars = dict[str, float]


def learner(s: LearnerStats) -> Scalars:
    """One update's statistics (step: the version it published)."""
    p = f"learner/{s.role}"
    return {f"{p}/loss": s.loss, f"{p}/reward": s.mean_reward, f"{p}/masked_fraction": s.mask_fraction,
            f"{p}/divergence": s.mean_divergence, f"{p}/grad_norm": s.grad_norm,
            f"{p}/tokens_per_s": s.tokens / s.seconds if s.seconds > 0 else 0.0,
            f"{p}/groups_used": float(s.groups_used), f"{p}/stale_dropped": float(s.stale_dropped),
            f"{p}/screened": float(s.screened)}


def rollout(r: RolloutSummary) -> Scalars:
    """One attempt's reward (step: the version that sampled it)."""
    return {f"rollouts/{r.purpose}/{r.role}/reward": r.reward}


def serving(u: ServingUpdate) -> Scalars:
    """An engine's load of a version (step: that version)."""
    return {f"serving/{u.policy}/load_seconds": u.seconds}


@dataclasses.dataclass
class Admissions:
    """Running counts of calibration outcomes, overall and per round."""

    outcomes: Counter[str] = dataclasses.field(default_factory=Counter)
    rounds: dict[int, Counter[str]] = dataclasses.field(default_factory=dict)
    seen: set[str] = dataclasses.field(default_factory=set)

    def add(self, r: CalibrationResult) -> Scalars:
        """The series ``r`` changes (nothing for a redelivered result or a revision's interim one)."""
        if r.resubmitted or r.idempotency_key in self.seen:
            return {}
        self.seen.add(r.idempotency_key)
        label = outcome_label(r)
        self.outcomes[label] += 1
        n = self.rounds.setdefault(r.lineage.round, Counter())
        n["candidates"] += 1
        n["valid"] += is_valid(r)
        n["cost_usd_e6"] += round(r.lineage.cost_usd * 1e6)
        out = {f"admission/{label}": float(self.outcomes[label]),
               f"round/{r.lineage.round}/valid_rate": n["valid"] / n["candidates"],
               f"round/{r.lineage.round}/cost_usd": n["cost_usd_e6"] / 1e6}
        if n["valid"]:
            out[f"round/{r.lineage.round}/cost_per_valid_usd"] = n["cost_usd_e6"] / 1e6 / n["valid"]
        return out
