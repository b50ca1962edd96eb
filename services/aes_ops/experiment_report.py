"""What ``aes experiment pools`` shows of its report (the dict ``run_experiment`` returns and
writes as JSON): the plot, an HTML page and the markdown summary kept in ``bench/results``.
The page and the summary render the same setup lines and tables."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aes_lib import families
from aes_lib.flywheel.readouts import COMPARISONS, ENDPOINTS
from aes_ops.experiment_cost import MEASURES
from aes_ops.figures import img, page, png, pyplot

PHASES = ("stack", "evaluation", "training", "choosing")
"""``RunResult.phase_s``'s keys, in the order shown."""

PLOT_TITLE = "Held-out mean reward per arm over training rollouts"


@dataclass(frozen=True)
class Section:
    title: str
    intro: str
    header: tuple[str, ...]
    rows: list[tuple[str, ...]]


def interval(ci: Sequence[float] | None) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "n/a"


def number(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _signed(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.3f}"


def _count(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def setup(report: dict) -> list[str]:
    """The run's shape, one line each (markdown inline code allowed)."""
    cfg, tr = report["config"], report["training"]
    left_out = f"; left out, not finished: {', '.join(report['left_out'])}" if report.get("left_out") else ""
    return [
        f"seeds: {cfg['seeds']} (0..{cfg['seeds'] - 1}); arms: {cfg['arms']}{left_out}",
        f"budget per run: {cfg['waves']} waves x {tr['groups_per_wave']} groups x {tr['group_size']} attempts = "
        f"{report['rollout_budget']} training rollouts (max_turns {tr['max_turns']}, max_tokens {tr['max_tokens']}, "
        f"temperature {tr['temperature']}); learner lr {report['learner']['lr']}, "
        f"{report['learner']['groups_per_batch']} group(s) per update",
        f"families: {cfg['families']} up to difficulty {cfg['max_difficulty'] or 'max'}; held-out: "
        f"{len(report['heldout'])} instances ({cfg['heldout_per_difficulty']} per difficulty), k = {cfg['eval_k']}, "
        f"evaluated before training and every {cfg['eval_every']} waves",
        f"static pool: {cfg['static_pool_size']} instances (weighted: {cfg['buffer_weight']} for an instance whose "
        f"last group had no spread); oracle: fresh instances at the held-out frontier, read every "
        f"{cfg['frontier_every']} waves; flywheel: starts from {cfg['start_per_family']} "
        f"easiest instance(s) per family, a round (review + retirement + new assignments) every "
        f"{cfg['waves_per_round']} waves (blind: directions by a coin)",
        f"policy: {cfg['policy']}",
        f"total wall time: {report['wall_s']:.0f} s",
    ]


def sections(report: dict) -> list[Section]:
    """Held-out reward over the budget per arm, the groups that carry a signal, every run, and the
    proposer's reward where the policy proposes (the ``both`` arm; no section without one)."""
    heldout = [(arm, str(p["wave"]), str(p["training_rollouts"]), f"{p['updates']:.1f}", number(p["mean_reward"]),
                interval(p["ci95"]), number(p["pass_rate"]), interval(p["pass_ci95"]))
               for arm, data in report["arms"].items() for p in data["points"]]
    signal = [(arm, str(data["groups"]), str(round(data["signal_fraction"] * data["groups"])),
               f"{data['signal_fraction']:.3f}", interval(data["signal_ci95"]), f"{data['updates']:.1f}",
               f"{data['selection_rollouts']:.0f}", f"{data['wall_s']:.0f}") for arm, data in report["arms"].items()]
    # per read-out its endpoint first (what the plan reads), then each evaluation point by its wave
    versus = [(o["arm"], o["baseline"], at, str(q["seeds"]), _signed(q["difference"]), interval(q["ci95"]),
               number(q["sd"]), number(q["detectable"])) for o in report["read_outs"]
              for at, q in [(o["endpoint"], o)] + [(str(p["wave"]), p) for p in o["points"]]]
    gain = [(arm, _family(g["family"]), str(g["seeds"]), _signed(g["gain"]), interval(g["ci95"]))
            for arm, data in report["arms"].items() for g in data["gain"]]
    cost = [(arm, unit.replace("_", " "), *(number(c[m]) if m != "rollouts" else _count(c[m]) for m in MEASURES))
            for arm, data in report["arms"].items() for unit, c in data["cost"].items()]
    phases = [(arm, *(f"{data['phase_s'].get(k, 0.0):.0f}" for k in PHASES), f"{data['wall_s']:.0f}")
              for arm, data in report["arms"].items()]
    runs = [(r["arm"], str(r["seed"]), " -> ".join(number(p["mean_reward"]) for p in r["points"]), str(r["updates"]),
             f"{r['signal_groups']}/{r['groups']}", " ".join(f"{d:.1f}" for d in r["trained_difficulty"]) or "-",
             f"{r['admitted']} / {r['retired']}", str(r["empty_waves"]), f"{r['wall_s']:.0f}") for r in report["runs"]]
    proposer = [(r["arm"], str(r["seed"]), proposer_rewards(r["proposer_reward"]), str(r["proposer_samples"]),
                 str(r["proposer_updates"])) for r in report["runs"] if r["proposer_samples"] or r["proposer_reward"]]
    return [
        Section(PLOT_TITLE,
                "Mean over seeds; the interval is a 95% t interval over seeds (n/a with one seed). Pass rate: share "
                "of held-out attempts with reward 1.",
                ("arm", "wave", "training rollouts", "updates (mean)", "held-out mean reward", "95% CI", "pass rate",
                 "95% CI"), heldout),
        Section("Paired read-outs in held-out mean reward",
                "Arm minus baseline, seed by seed (both start from one policy and draw the same samples), then the "
                "mean over seeds with its 95% t interval (over runs, not groups). Detectable: the smallest true "
                "difference that many seeds find with 80% power at the observed sd (aes_ops.power); an interval "
                "excluding 0 separates the arms. Each pair's first row is the endpoint the plan reads, the held-out "
                f"mean reward {ENDPOINTS[endpoint(report)]}, then one row per evaluation point. Oracle minus static, "
                "where both ran, is the gate: the positive control must beat the fixed pool by twice its "
                "detectable difference before any flywheel number is read. "
                f"{gate_line(report)}".strip(),
                ("arm", "minus", "endpoint or wave", "seeds", "difference", "95% CI", "sd over seeds",
                 "detectable (80%)"), versus),
        Section("Learning within each arm",
                "Held-out mean reward at the last point minus before training, seed by seed, then the mean over "
                "seeds with its 95% t interval; per family, over that family's held-out difficulties. A curriculum "
                "family's difficulty steps build on each other; a control's do not.",
                ("arm", "held-out", "seeds", "gain", "95% CI"), gain),
        Section("Groups that carry a learning signal (a reward spread), per arm",
                "Training groups pooled over seeds; 95% Wilson interval. Selection rollouts: solver runs the flywheel "
                "spent choosing environments (calibration, pool review), per run, on top of the training budget.",
                ("arm", "groups", "with signal", "share", "95% CI", "updates per run", "selection rollouts per run",
                 "wall s per run"), signal),
        Section("Cost per unit of learning signal",
                "Pooled over seeds. Per admitted task: what choosing environments spent (calibration and pool-review "
                "attempts, validations, proposer calls) over the tasks the calibrator admitted. Per signal group: "
                "everything the arm spent (training and selection) over the training groups whose rewards differ. "
                "Container seconds: wall time of solver attempts and validations; tokens: sampled by the models. "
                "Held-out evaluation is not counted.",
                ("arm", "per", "solver rollouts", "container s", "sampled tokens"), cost),
        Section("Where the time went", "Mean seconds per run. Training: the waves (rollouts, updates, weight "
                "loads); choosing: the flywheel's rounds (pool review, proposals, validation, calibration) and the "
                "run's bookkeeping; evaluation: the held-out points; stack: starting and stopping nats-server and "
                "the engine.", ("arm", *PHASES, "wall"), phases),
        Section("Per run", "",
                ("arm", "seed", "held-out reward at each point", "updates", "signal groups",
                 "mean difficulty trained per wave", "admitted / retired", "empty waves", "wall s"), runs),
    ] + ([Section("Proposer reward per round, where the policy also proposes",
                  "Mean r_P of the round's scored proposals (1 admitted, partial out of the band, 0 broken or no "
                  "answer); proposer samples sent to the learner and the updates on proposer groups, per run.",
                  ("arm", "seed", "mean r_P per round", "proposer samples", "proposer updates"), proposer)]
         if proposer else [])


def endpoint(report: dict) -> str:
    """The endpoint the read-outs compare (``ExperimentConfig.endpoint``; ``final`` where none ran)."""
    return next((o["endpoint"] for o in report["read_outs"]), "final")


def gate_line(report: dict) -> str:
    """The positive control's gate (``aes_ops.experiment.gate``) in words; empty where the oracle
    and the static arm did not both run."""
    on = ENDPOINTS[endpoint(report)]
    if (gate := report.get("gate")) is None:
        ran = any((o["arm"], o["baseline"]) == COMPARISONS[0] for o in report["read_outs"])
        return f"Gate (oracle minus static {on}): not read, fewer than 2 seeds." if ran else ""
    verdict = "passed" if gate["passed"] else "not passed: change the setting, not the analysis"
    return (f"Gate: oracle minus static {on} {gate['difference']:+.3f} against twice its detectable "
            f"difference {2 * gate['detectable']:.3f}: {verdict}.")


def _family(name: str) -> str:
    """A family's name and kind, "all" as it is."""
    if name == "all":
        return name
    try:
        return f"{name} ({'curriculum' if families.get(name).curriculum else 'control'})"
    except families.FamilyError:  # a report read back where the family's package is not installed
        return name


def proposer_rewards(per_round: Sequence[float]) -> str:
    """Mean r_P of each round, in order ("-" where no model proposed)."""
    return " -> ".join(number(x) for x in per_round) or "-"


def plot(report: dict) -> bytes:
    """Held-out mean reward per arm over training rollouts, with the intervals over seeds, as PNG."""
    fig, (ax, dx) = pyplot().subplots(1, 2, figsize=(11, 4))
    for i, o in enumerate(report["read_outs"]):
        pts = [q for q in o["points"] if q["difference"] is not None]
        if pts:
            x = [q["training_rollouts"] for q in pts]
            dx.plot(x, [q["difference"] for q in pts], marker="o", color=f"C{i}", label=f"{o['arm']} - {o['baseline']}")
            dx.fill_between(x, [q["ci95"][0] if q["ci95"] else q["difference"] for q in pts],
                            [q["ci95"][1] if q["ci95"] else q["difference"] for q in pts], color=f"C{i}", alpha=0.2)
    for i, (arm, data) in enumerate(report["arms"].items()):
        colour = f"C{i}"
        pts = [p for p in data["points"] if p["mean_reward"] is not None]
        x = [p["training_rollouts"] for p in pts]
        y = [p["mean_reward"] for p in pts]
        ax.plot(x, y, marker="o", color=colour, label=f"{arm} (signal groups {data['signal_fraction']:.0%})")
        lo = [p["ci95"][0] if p["ci95"] else p["mean_reward"] for p in pts]
        hi = [p["ci95"][1] if p["ci95"] else p["mean_reward"] for p in pts]
        ax.fill_between(x, lo, hi, color=colour, alpha=0.2)
    ax.set(xlabel="training rollouts", ylabel="held-out mean reward", ylim=(0, 1),
           title="held-out mean reward (95% interval over seeds)")
    ax.legend()
    dx.axhline(0.0, color="grey", linewidth=0.8)
    dx.set(xlabel="training rollouts", ylabel="difference in held-out mean reward",
           title="paired difference per seed (95% interval)")
    if dx.lines[1:]:
        dx.legend()
    return png(fig, dpi=100)


def markdown(report: dict, machine: str, date: str, command: str) -> str:
    """``bench/results/pools_experiment.md``: setup, then the sections as markdown tables."""
    lines = ["# Pools experiment: static pool vs flywheel (paper Table 3 in miniature)", "",
             f"- date: {date}", f"- machine: {machine}", f"- command: `{command}`",
             *(f"- {line}" for line in setup(report))]
    for s in sections(report):
        lines += ["", f"## {s.title}", ""] + ([s.intro, ""] if s.intro else [])
        lines += ["| " + " | ".join(s.header) + " |", "|" + "---|" * len(s.header)]
        lines += ["| " + " | ".join(row) + " |" for row in s.rows]
    return "\n".join(lines) + "\n"


def _table(s: Section) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in s.header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in s.rows)
    intro = f"<p>{html.escape(s.intro)}</p>" if s.intro else ""
    return f"<h2>{html.escape(s.title)}</h2>{intro}<table><tr>{head}</tr>{body}</table>"


def to_html(report: dict, figure: bytes) -> str:
    """One self-contained page: the setup, the plot (``figure``, PNG) and the sections."""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in setup(report))
    return page("Pools experiment: static pool vs flywheel",
                f"<ul>{items}</ul>{img(PLOT_TITLE, figure)}{''.join(_table(s) for s in sections(report))}")


def write(report: dict, out: Path) -> tuple[Path, Path]:
    """``out/pools_experiment.png`` and ``out/pools_experiment.html``; returns both paths."""
    figure = plot(report)
    png_path, html_path = out / "pools_experiment.png", out / "pools_experiment.html"
    png_path.write_bytes(figure)
    html_path.write_text(to_html(report, figure))
    return png_path, html_path
