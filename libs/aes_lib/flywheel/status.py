"""What the flywheel has done, from the result streams: the numbers ``aes status`` and ``aes report`` show.

Every candidate ends in exactly one ``CalibrationResult`` (admitted, calibrated
out of band, or rejected by a gate), so counting those counts candidates. One sent
back for revision (``resubmitted``) is a candidate but no final outcome: its
assignment's revision decides.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from aes_proto import subjects
from aes_proto.messages import CalibrationResult, DeadLetter, PoolEvent, RolloutSummary

from aes_lib.models.prices import usd


Z95 = 1.959964
"""Normal quantile of the 95% two-sided interval."""


def outcome_label(r: CalibrationResult) -> str:
    """``admitted`` (``admitted:no_reference`` for a task without a reference solution),
    ``calibrate:<too_hard|too_easy|no_spread|unverified_too_hard>`` (a too-hard one that was audited:
    ``calibrate:too_hard:<hard|defect|audit_error>``), or ``<stage>:<reason>`` of the rejecting gate."""
    if r.decision == "admitted":
        return "admitted:no_reference" if r.no_reference else "admitted"
    if r.decision != "rejected":
        audit = [v.reason for v in r.verdicts if v.stage == "audit"]
        return f"calibrate:{r.decision}" + (f":{audit[-1]}" if audit else "")
    failed = [v for v in r.verdicts if not v.ok]
    v = failed[-1] if failed else (r.verdicts[-1] if r.verdicts else None)
    return f"{v.stage}:{v.reason}" if v else "rejected:unknown"


def is_valid(r: CalibrationResult) -> bool:
    """Valid environment (builds, oracle passes, empty solution fails): it passed the
    validate stage, which every candidate that reached calibration did."""
    return r.decision != "rejected" or any(v.stage == "validate" and v.ok for v in r.verdicts)


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (sensible at 0 and n, unlike the normal one)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclasses.dataclass(frozen=True)
class RoundStats:
    candidates: int
    valid: int
    admitted: int
    admitted_rounds: int
    """Proposer rounds (revision + 1) behind the admitted environments, summed."""

    @property
    def valid_rate(self) -> float:
        return self.valid / self.candidates if self.candidates else 0.0

    @property
    def rounds_per_admitted(self) -> float | None:
        """Mean proposer rounds per accepted task (the paper's Appendix C: 1.3-2.8); None before any."""
        return self.admitted_rounds / self.admitted if self.admitted else None


@dataclasses.dataclass(frozen=True)
class DomainStats:
    """The paper's Table 8 columns for one domain, over finished runs (an assignment and its
    revisions is one run; a run sent back is not finished until its last revision is judged)."""

    runs: int
    accepted: int
    accepted_rounds: int
    """Proposer rounds (revision + 1) behind the accepted tasks, summed."""

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.runs if self.runs else None

    @property
    def rounds_per_accepted(self) -> float | None:
        return self.accepted_rounds / self.accepted if self.accepted else None


@dataclasses.dataclass(frozen=True)
class AskStats:
    """Clarification behaviour over the solver attempts that had the ask_human tool."""

    attempts: int
    asked: int
    """Attempts that asked at least once."""
    mean_ask_f1: float
    mean_reward: float

    @property
    def ask_rate(self) -> float:
        return self.asked / self.attempts if self.attempts else 0.0


def ask_stats(rollouts: Sequence[RolloutSummary]) -> AskStats | None:
    """Ask rate, mean Ask-F1 and task reward of the attempts that recorded ask metrics; None if none did."""
    with_tool = [r for r in rollouts if "ask_f1" in r.metrics]
    if not with_tool:
        return None
    n = len(with_tool)
    return AskStats(attempts=n, asked=sum(r.metrics.get("asks", 0) > 0 for r in with_tool),
                    mean_ask_f1=sum(r.metrics["ask_f1"] for r in with_tool) / n,
                    mean_reward=sum(r.reward for r in with_tool) / n)


def by_domain(results: Sequence[CalibrationResult]) -> dict[str, DomainStats]:
    """Domain -> acceptance and rounds per accepted task, over final outcomes."""
    groups: dict[str, list[CalibrationResult]] = defaultdict(list)
    for r in results:
        if not r.resubmitted:
            groups[r.lineage.domain or "terminal"].append(r)
    out = {}
    for name, rs in sorted(groups.items()):
        accepted = [r for r in rs if r.decision == "admitted"]
        out[name] = DomainStats(len(rs), len(accepted), sum(r.lineage.revision + 1 for r in accepted))
    return out


@dataclasses.dataclass(frozen=True)
class Status:
    candidates: int
    valid: int
    admitted: int
    outcomes: dict[str, int]
    """Outcome label -> candidates, commonest first."""
    valid_interval: tuple[float, float]
    cost_usd: float
    mean_proposer_reward: float
    """Over final outcomes: an episode sent back for revision is not one."""
    retired: dict[str, int]
    """Retirement reason -> environments."""
    rounds: dict[int, RoundStats]
    modes: dict[str, RoundStats]
    rollouts: int
    dead_lettered: int = 0
    """Assignments and candidates a service gave up on: they never reach a result."""
    attempts_dropped: int = 0
    """Training attempts given up on after their retries (a sandbox, engine or store fault):
    dropped from their group, never scored."""
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)
    """Subject -> stored messages that did not decode, so are missing from these numbers."""
    revised: int = 0
    """Candidates sent back to their proposer for revision."""
    rounds_per_admitted: float | None = None
    """Mean proposer rounds (revision + 1) per accepted task; None before any admission."""
    gaps: tuple[str, ...] = ()
    """Admission checks the deployment runs weaker than the paper's (no held-out index,
    advisory review), shown first."""
    domains: dict[str, DomainStats] = dataclasses.field(default_factory=dict)
    """Domain -> acceptance rate and rounds per accepted task (the paper's Table 8)."""
    ask: AskStats | None = None
    """Ask rate and Ask-F1 of the solver's attempts with the ask_human tool; None without any."""
    no_reference: dict[str, int] = dataclasses.field(default_factory=dict)
    """Imported tasks without a reference solution, by outcome (``admitted:no_reference``,
    ``calibrate:unverified_too_hard``)."""
    diversity: tuple[float, int] | None = None
    """One minus the mean pairwise similarity of the active pool's tasks (``contamination.novelty``),
    and how many of them the novelty gate has read; None under two."""

    @property
    def valid_rate(self) -> float:
        return self.valid / self.candidates if self.candidates else 0.0

    @property
    def cost_per_valid(self) -> float | None:
        return self.cost_usd / self.valid if self.valid else None


def _tally(results: Sequence[CalibrationResult]) -> RoundStats:
    admitted = [r for r in results if r.decision == "admitted"]
    return RoundStats(len(results), sum(map(is_valid, results)), len(admitted),
                      sum(r.lineage.revision + 1 for r in admitted))


def summarize(results: Sequence[CalibrationResult], events: Sequence[PoolEvent], rollouts: Sequence[RolloutSummary],
              dead_letters: Sequence[DeadLetter] = (), skipped: Mapping[str, int] | None = None,
              gaps: Sequence[str] = ()) -> Status:
    by_round: dict[int, list[CalibrationResult]] = defaultdict(list)
    by_mode: dict[str, list[CalibrationResult]] = defaultdict(list)
    for r in results:
        by_mode[r.lineage.mode].append(r)
    # A seed sent through admission (``aes run``) shows under its mode, not in the proposer's numbers.
    no_reference = Counter(outcome_label(r) for r in results if r.no_reference)
    results = [r for r in results if r.lineage.mode != "seed"]
    for r in results:
        by_round[r.lineage.round].append(r)
    total = _tally(results)
    final = [r for r in results if not r.resubmitted]
    return Status(
        candidates=total.candidates,
        valid=total.valid,
        admitted=total.admitted,
        outcomes=dict(Counter(outcome_label(r) for r in results).most_common()),
        valid_interval=wilson(total.valid, total.candidates),
        cost_usd=sum(r.lineage.cost_usd for r in results),
        mean_proposer_reward=sum(r.proposer_reward for r in final) / len(final) if final else 0.0,
        retired=dict(Counter(e.reason for e in events if e.kind == "retired").most_common()),
        rounds={k: _tally(v) for k, v in sorted(by_round.items())},
        modes={k: _tally(v) for k, v in sorted(by_mode.items())},
        no_reference=dict(no_reference.most_common()),
        rollouts=len(rollouts),
        dead_lettered=sum(subjects.on_admission_path(d.subject) for d in dead_letters),
        attempts_dropped=sum(d.subject == subjects.ROLLOUT_REQUEST for d in dead_letters),
        skipped={k: n for k, n in (skipped or {}).items() if n},
        revised=len(results) - len(final),
        rounds_per_admitted=total.rounds_per_admitted,
        gaps=tuple(gaps),
        domains=by_domain(results),
        ask=ask_stats(rollouts),
    )


def render(s: Status, pool_size: int, pool_by_category: dict[str, int]) -> str:
    """Plain-text status for the terminal."""
    lo, hi = s.valid_interval
    cpv = usd(s.cost_per_valid) if s.cost_per_valid is not None else "n/a (no valid environment yet)"
    rounds = f"{s.rounds_per_admitted:.2f}" if s.rounds_per_admitted is not None else "n/a (nothing admitted yet)"
    lines = [
        *[f"WARNING: {gap}" for gap in s.gaps],
        f"pool: {pool_size} active" + (" (" + ", ".join(f"{c or 'uncategorized'} {n}" for c, n in sorted(pool_by_category.items())) + ")" if pool_by_category else ""),
        *([f"pool diversity: {s.diversity[0]:.2f} (1 - mean pairwise similarity of the instruction, tests and "
            f"files of {s.diversity[1]} of them)"] if s.diversity else []),
        f"candidates: {s.candidates}   admitted: {s.admitted}   solver rollouts: {s.rollouts}",
        f"sent back for revision: {s.revised}   rounds per accepted task: {rounds}",
        f"dead-lettered: {s.dead_lettered}" + ("   (assignments/candidates a service gave up on: aes dlq list)" if s.dead_lettered else ""),
        *([f"training attempts dropped after faults: {s.attempts_dropped}   (never scored: aes dlq list)"]
          if s.attempts_dropped else []),
        f"valid-environment rate: {s.valid}/{s.candidates} = {100 * s.valid_rate:.1f}% (95% CI {100 * lo:.1f}-{100 * hi:.1f}%)",
        f"cost per valid environment: {cpv}   (proposer spend {usd(s.cost_usd)})",
        f"mean proposer reward: {s.mean_proposer_reward:.3f}",
        "outcomes:",
        *[f"  {label:<32} {n}" for label, n in s.outcomes.items()],
    ]
    if s.retired:
        lines += ["retired:", *[f"  {reason:<32} {n}" for reason, n in s.retired.items()]]
    if set(s.domains) - {"terminal"}:
        lines.append("by domain (accepted runs, rounds per accepted task):")
        for name, d in s.domains.items():
            rounds_d = f"{d.rounds_per_accepted:.2f}" if d.rounds_per_accepted is not None else "n/a"
            lines.append(f"  {name:<14} {d.accepted}/{d.runs} = {100 * (d.acceptance or 0):.1f}%   rounds {rounds_d}")
    if s.ask:
        lines.append(f"ask_human: {s.ask.attempts} attempts, ask rate {100 * s.ask.ask_rate:.1f}%, "
                     f"Ask-F1 {100 * s.ask.mean_ask_f1:.1f}%, task reward {s.ask.mean_reward:.3f}")
    if s.no_reference:
        lines += ["imported without a reference solution (the solver's attempts decide):",
                  *[f"  {label:<32} {n}" for label, n in s.no_reference.items()]]
    if len(s.modes) > 1:
        lines += ["by generation mode:", *[f"  {m:<10} {t.valid}/{t.candidates} valid, {t.admitted} admitted" for m, t in s.modes.items()]]
    return "\n".join(lines + skipped_notes(s.skipped))


def skipped_notes(skipped: Mapping[str, int]) -> list[str]:
    """One line per subject on which undecodable messages were left out of the numbers."""
    return [f"{n} undecodable messages skipped on {subject}" for subject, n in skipped.items() if n]
