"""``aes report``: one self-contained HTML file with the status, plots and learner curves.

Plots (matplotlib, Agg, embedded as base64 PNG): solver reward distributions by
rollout purpose, band occupancy (calibration means against the admission band),
valid / admitted rate per round, and the learner's curves over policy versions
with a table of updates per role and weight syncs.
"""

from __future__ import annotations

import dataclasses
import datetime
import html
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from aes_proto import subjects
from aes_proto.messages import CalibrationResult, LearnerStats, RolloutSummary, ServingUpdate

from aes_lib.config import Settings
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.flywheel.status import Status, render
from aes_ops.connect import with_bus
from aes_ops.figures import img, page, png, pyplot
from aes_ops.readout import Snapshot, skipped, snapshot, unique


def reward_plot(rollouts: Sequence[RolloutSummary]) -> bytes:
    fig, ax = pyplot().subplots(figsize=(6, 3.2))
    by_purpose: dict[str, list[float]] = {}
    for r in rollouts:
        by_purpose.setdefault(r.purpose, []).append(r.reward)
    bins = [i / 10 for i in range(11)]
    for purpose, rewards in sorted(by_purpose.items()):
        ax.hist(rewards, bins=bins, alpha=0.6, label=f"{purpose} ({len(rewards)})")
    ax.set(xlabel="solver reward", ylabel="rollouts", title="Solver reward distribution")
    if by_purpose:
        ax.legend()
    return png(fig)


def band_plot(results: Sequence[CalibrationResult], band: tuple[float, float]) -> bytes:
    fig, ax = pyplot().subplots(figsize=(6, 3.2))
    calibrated = [r for r in results if r.decision != "rejected"]
    ax.axvspan(*band, color="tab:green", alpha=0.15, label="admission band")
    for decision in ("admitted", "too_hard", "too_easy", "no_spread"):
        means = [r.mean for r in calibrated if r.decision == decision]
        if means:
            ax.hist(means, bins=[i / 20 for i in range(21)], alpha=0.7, label=f"{decision} ({len(means)})")
    ax.set(xlabel="mean solver reward at calibration", ylabel="candidates", title="Band occupancy", xlim=(0, 1))
    ax.legend()
    return png(fig)


def rounds_plot(status: Status) -> bytes:
    fig, ax = pyplot().subplots(figsize=(6, 3.2))
    rounds = list(status.rounds)
    ax.plot(rounds, [t.valid_rate for t in status.rounds.values()], marker="o", label="valid rate")
    ax.plot(rounds, [t.admitted / t.candidates if t.candidates else 0 for t in status.rounds.values()],
            marker="s", label="admitted rate")
    ax.set(xlabel="round", ylabel="fraction of candidates", title="Valid and admitted rate per round", ylim=(0, 1.05))
    if rounds:
        ax.set_xticks(rounds)
    ax.legend()
    return png(fig)


_MARKERS = {"solver": "o", "proposer": "s", "": "."}


def _curves(ax, stats: Sequence[LearnerStats], value: Callable[[LearnerStats], float | None], title: str,
            by_role: bool) -> None:
    """One line per policy (and per role when ``by_role``) over policy versions; an
    update for which ``value`` is None has no point."""
    several = len({s.policy for s in stats}) > 1
    lines: dict[tuple[str, str], tuple[list[int], list[float]]] = {}
    for s in sorted(stats, key=lambda s: s.policy_version):
        if (y := value(s)) is not None:
            xs, ys = lines.setdefault((s.policy if several else "", s.role if by_role else ""), ([], []))
            xs.append(s.policy_version)
            ys.append(y)
    for (policy, role), (xs, ys) in sorted(lines.items()):
        ax.plot(xs, ys, marker=_MARKERS[role], markersize=4,
                label=", ".join(filter(None, (role, policy and f"{policy} policy"))) or None)
    ax.set(xlabel="policy version", title=title)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # versions are whole numbers
    if not lines:  # e.g. no update recorded its wall time
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    elif several or by_role:
        ax.legend(fontsize="small")


def learner_plot(stats: Sequence[LearnerStats]) -> bytes:
    fig, axes = pyplot().subplots(2, 3, figsize=(10, 5.5))
    panels = [
        ("loss", lambda s: s.loss, False),
        ("mean reward", lambda s: s.mean_reward, True),
        ("masked-token fraction", lambda s: s.mask_fraction, False),
        ("mean divergence", lambda s: s.mean_divergence, False),
        ("throughput (tokens/s)", lambda s: s.tokens / s.seconds if s.seconds else None, False),
    ]
    for ax, (title, value, by_role) in zip(axes.flat, panels):
        _curves(ax, stats, value, title, by_role)
    fig.delaxes(axes.flat[-1])
    fig.tight_layout()
    return png(fig)


def learner_section(stats: Sequence[LearnerStats], serving: Sequence[ServingUpdate]) -> str:
    """Curves over updates (or why there are none) and a table of updates and weight syncs."""
    latest: dict[str, int] = {}
    for u in serving:
        latest[u.policy] = max(u.version, latest.get(u.policy, u.version))
    roles = Counter(s.role for s in stats)
    rows = [*((f"updates ({role})", roles[role]) for role in ("solver", "proposer")),
            ("latest policy version served", ", ".join(f"{p} v{v}" for p, v in sorted(latest.items())) or "none"),
            ("mean weight-sync seconds", f"{statistics.fmean(u.seconds for u in serving):.2f}" if serving else "none")]
    table = "".join(f"<tr><td>{k}</td><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    body = (img("Learner curves", learner_plot(stats)) if stats else
            "<p>No learner update has run yet: the learner trains on full groups of rollouts, "
            "and groups fill only from training rollouts.</p>")
    return f"<h2>Learner</h2>{body}<table>{table}</table>"


def _rounds(mean: float | None) -> str:
    return f"{mean:.2f}" if mean is not None else "-"


def build(status: Status, results: Sequence[CalibrationResult], rollouts: Sequence[RolloutSummary],
          pool_size: int, pool_by_category: dict[str, int], band: tuple[float, float],
          learner: Sequence[LearnerStats] = (), serving: Sequence[ServingUpdate] = ()) -> str:
    """The report as an HTML string."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    plots = [("Reward distributions", reward_plot(rollouts)), ("Band occupancy", band_plot(results, band)),
             ("Valid rate per round", rounds_plot(status))]
    rows = "".join(
        f"<tr><td>{k}</td><td>{t.candidates}</td><td>{t.valid}</td><td>{t.admitted}</td>"
        f"<td>{100 * t.valid_rate:.1f}%</td><td>{_rounds(t.rounds_per_admitted)}</td></tr>"
        for k, t in status.rounds.items()
    )
    figures = "".join(f"<h2>{html.escape(t)}</h2>{img(t, b)}" for t, b in plots)
    return page("AutoEnvScaling report", (
        f"<p>Generated {now}.</p><pre>{html.escape(render(status, pool_size, pool_by_category))}</pre>"
        "<h2>Per round</h2><table><tr><th>round</th><th>candidates</th><th>valid</th><th>admitted</th><th>valid rate</th>"
        "<th>rounds per accepted task</th></tr>"
        f"{rows}</table>{figures}{learner_section(learner, serving)}"))


async def write(bus, config: FlywheelConfig, out: Path, snap: Snapshot | None = None) -> dict[str, int]:
    """Write the report of everything on ``bus`` to ``out`` (``snap``: a snapshot the caller
    already read, so the result history is not read twice); returns the undecodable
    messages it had to leave out, by subject."""
    snap = snap or await snapshot(bus, config)
    learner = await bus.history(subjects.LEARNER_STATS, LearnerStats)
    serving = await bus.history(subjects.SERVING_VERSION, ServingUpdate)
    status = dataclasses.replace(snap.status, skipped={**snap.status.skipped, **skipped([learner, serving])})
    page = build(status, snap.results, snap.rollouts, len(snap.pool), snap.pool_by_category,
                 (config.band_low, config.band_high), unique(learner), unique(serving))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    return status.skipped


async def write_current(out: Path, settings: Settings | None = None) -> dict[str, int]:
    """``write`` the report of the stack ``settings`` (the environment's by default) points at."""
    return await with_bus("aes-report", lambda bus: write(bus, FlywheelConfig.from_env(), out), settings)
