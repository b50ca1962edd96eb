"""Solver rollouts per admission decision: the adaptive 4-to-8 rule against a fixed 8.

Simulates many tasks whose true solver pass probability spans easy to impossible,
with Bernoulli rewards (one test) and fractional rewards (tests passed / total).
Each task draws 8 rewards once (seeded); the adaptive rule reads the first 4 and
the rest only when it expands, so both rules see the same attempts and every
difference comes from the rule. Reports rollouts per decision as a ratio against
the fixed-8 baseline, how often the two rules decide differently, and how often
each agrees with the decision the true pass probability implies.

Run: ``.venv/bin/python bench/calibration_bench.py [--tasks N] [--seed S]``;
writes ``bench/results/calibration_bench.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
from pathlib import Path

import numpy as np

from aes_lib.flywheel.calibration import CalibrationRule

FIXED = 8


@dataclasses.dataclass
class Tally:
    """Counts for one reward model."""

    tasks: int = 0
    adaptive_rollouts: int = 0
    fixed_rollouts: int = 0
    expanded: int = 0
    differ_admit: int = 0
    differ_outcome: int = 0
    adaptive_correct: int = 0
    fixed_correct: int = 0


def _draw(rng: np.random.Generator, kind: str, p: float, n_tests: int) -> np.ndarray:
    if kind == "bernoulli":
        return (rng.random(FIXED) < p).astype(float)
    return rng.binomial(n_tests, p, size=FIXED) / n_tests


def _true_admit(rule: CalibrationRule, kind: str, p: float, n_tests: int) -> bool:
    """The decision an infinite number of rollouts would make."""
    var = p * (1 - p) if kind == "bernoulli" else p * (1 - p) / n_tests
    return rule.band_low <= p <= rule.band_high and var ** 0.5 >= rule.min_std


def simulate(rule: CalibrationRule, kind: str, tasks: int, seed: int) -> Tally:
    rng = np.random.default_rng(seed)
    t = Tally()
    for _ in range(tasks):
        p = float(rng.random())
        n_tests = int(rng.integers(2, 11))
        draws = _draw(rng, kind, p, n_tests)
        first = list(draws[: rule.initial_rollouts])
        n = rule.rollouts_needed(first)
        adaptive = rule.decide(list(draws[:n]), revision=0)
        fixed = rule.decide(list(draws), revision=0)
        truth = _true_admit(rule, kind, p, n_tests)
        t.tasks += 1
        t.adaptive_rollouts += n
        t.fixed_rollouts += FIXED
        t.expanded += n > rule.initial_rollouts
        t.differ_admit += (adaptive.outcome == "admitted") != (fixed.outcome == "admitted")
        t.differ_outcome += adaptive.outcome != fixed.outcome
        t.adaptive_correct += (adaptive.outcome == "admitted") == truth
        t.fixed_correct += (fixed.outcome == "admitted") == truth
    return t


def _machine() -> str:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "unknown"
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{os.cpu_count()} CPUs ({model}), {mem} memory, Python {platform.python_version()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=50_000, help="simulated tasks per reward model")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "calibration_bench.md")
    args = ap.parse_args()
    rule = CalibrationRule()
    rows = []
    for i, kind in enumerate(("bernoulli", "fractional")):
        t = simulate(rule, kind, args.tasks, args.seed + i)
        rows.append(
            f"| {kind} | {t.tasks} | {t.adaptive_rollouts / t.tasks:.2f} | {t.fixed_rollouts / t.tasks:.2f} "
            f"| {t.adaptive_rollouts / t.fixed_rollouts:.3f} | {100 * t.expanded / t.tasks:.1f}% "
            f"| {100 * t.differ_admit / t.tasks:.2f}% | {100 * t.differ_outcome / t.tasks:.2f}% "
            f"| {100 * t.adaptive_correct / t.tasks:.1f}% | {100 * t.fixed_correct / t.tasks:.1f}% |"
        )
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = "\n".join([
        "# Calibration: adaptive 4-to-8 rollouts vs a fixed 8",
        "",
        f"Date: {now}. Machine: {_machine()}. Seed {args.seed}.",
        "",
        f"Rule: band [{rule.band_low}, {rule.band_high}], std >= {rule.min_std}, {rule.initial_rollouts} rollouts, "
        f"{rule.expanded_rollouts} when the mean is within {rule.edge_margin} of a band edge. True pass probability "
        "uniform on [0, 1]; fractional rewards are Binomial(n, p)/n with n uniform in 2..10 tests. Both rules read "
        "the same 8 draws per task.",
        "",
        "| rewards | tasks | adaptive rollouts/decision | fixed rollouts/decision | ratio adaptive/fixed "
        "| expanded to 8 | admit decision differs | outcome differs | adaptive agrees with truth "
        "| fixed-8 agrees with truth |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "`ratio adaptive/fixed` < 1 is the fraction of solver rollouts the adaptive rule spends per decision "
        "relative to always running 8. `truth` is the decision implied by the true pass probability "
        "(and the true reward std).",
        "",
    ])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
