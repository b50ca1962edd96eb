"""``aes report``: one self-contained HTML file with the status and three plots.

Plots (matplotlib, Agg, embedded as base64 PNG): solver reward distributions by
rollout purpose, band occupancy (calibration means against the admission band),
and valid / admitted rate per round.
"""

from __future__ import annotations

import base64
import datetime
import html
import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402

from aes_proto.messages import CalibrationResult, RolloutSummary  # noqa: E402

from aes_lib.flywheel.status import Status, render  # noqa: E402


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def reward_plot(rollouts: Sequence[RolloutSummary]) -> str:
    fig, ax = plt.subplots(figsize=(6, 3.2))
    by_purpose: dict[str, list[float]] = {}
    for r in rollouts:
        by_purpose.setdefault(r.purpose, []).append(r.reward)
    bins = [i / 10 for i in range(11)]
    for purpose, rewards in sorted(by_purpose.items()):
        ax.hist(rewards, bins=bins, alpha=0.6, label=f"{purpose} ({len(rewards)})")
    ax.set(xlabel="solver reward", ylabel="rollouts", title="Solver reward distribution")
    if by_purpose:
        ax.legend()
    return _png(fig)


def band_plot(results: Sequence[CalibrationResult], band: tuple[float, float]) -> str:
    fig, ax = plt.subplots(figsize=(6, 3.2))
    calibrated = [r for r in results if r.decision != "rejected"]
    ax.axvspan(*band, color="tab:green", alpha=0.15, label="admission band")
    for decision in ("admitted", "too_hard", "too_easy", "no_spread"):
        means = [r.mean for r in calibrated if r.decision == decision]
        if means:
            ax.hist(means, bins=[i / 20 for i in range(21)], alpha=0.7, label=f"{decision} ({len(means)})")
    ax.set(xlabel="mean solver reward at calibration", ylabel="candidates", title="Band occupancy", xlim=(0, 1))
    ax.legend()
    return _png(fig)


def rounds_plot(status: Status) -> str:
    fig, ax = plt.subplots(figsize=(6, 3.2))
    rounds = list(status.rounds)
    ax.plot(rounds, [t.valid_rate for t in status.rounds.values()], marker="o", label="valid rate")
    ax.plot(rounds, [t.admitted / t.candidates if t.candidates else 0 for t in status.rounds.values()],
            marker="s", label="admitted rate")
    ax.set(xlabel="round", ylabel="fraction of candidates", title="Valid and admitted rate per round", ylim=(0, 1.05))
    if rounds:
        ax.set_xticks(rounds)
    ax.legend()
    return _png(fig)


def build(status: Status, results: Sequence[CalibrationResult], rollouts: Sequence[RolloutSummary],
          pool_size: int, pool_by_category: dict[str, int], band: tuple[float, float]) -> str:
    """The report as an HTML string."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    plots = [("Reward distributions", reward_plot(rollouts)), ("Band occupancy", band_plot(results, band)),
             ("Valid rate per round", rounds_plot(status))]
    rows = "".join(
        f"<tr><td>{k}</td><td>{t.candidates}</td><td>{t.valid}</td><td>{t.admitted}</td>"
        f"<td>{100 * t.valid_rate:.1f}%</td></tr>" for k, t in status.rounds.items()
    )
    figures = "".join(f'<h2>{html.escape(t)}</h2><img alt="{html.escape(t)}" src="data:image/png;base64,{b}">' for t, b in plots)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>AutoEnvScaling report</title>"
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}td,th{padding:.2em .8em}</style>"
        f"</head><body><h1>AutoEnvScaling report</h1><p>Generated {now}.</p>"
        f"<pre>{html.escape(render(status, pool_size, pool_by_category))}</pre>"
        "<h2>Per round</h2><table><tr><th>round</th><th>candidates</th><th>valid</th><th>admitted</th><th>valid rate</th></tr>"
        f"{rows}</table>{figures}</body></html>"
    )
