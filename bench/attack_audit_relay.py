"""Issue 49's relay run: what the attacker gate and the broken-or-hard audit find, and what they cost.

On each task (the seeds, a few family instances as generated tasks, and planted cases: tasks whose
tests and reference agree on something the instruction never says, and tasks whose tests check
too little), in one run:

- validation (``validate_task``, its probes included): the admission the two gates are added to;
- the attacker gate's check (``aes_lib.runners.attack.attack_task``) with the model at ``--url``;
- the audit (``aes_lib.review.audit.audit_task``) with the same model, given the empty solution's
  trial as the failed attempt it reads (every task here passed validation, so its reference scores 1).

Point ``--url`` at ``bench/relay.py serve`` and have a capable stand-in answer each request: its
figures are then a stand-in's, and are labelled so. Costs are container seconds (a trial's wall
time less the seconds spent waiting for the model) and estimated tokens, each as a ratio against
validation measured in the same run.

Run: ``.venv/bin/python bench/attack_audit_relay.py --url http://127.0.0.1:8765/v1 [--only NAME ...]``;
writes ``bench/results/attack_audit_relay.json`` and ``.md`` (``--out NAME``: another name).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from aes_proto.trajectory import Trajectory

from aes_lib.agents.solver import solver_limits
from aes_lib.blobstore.filestore import FileBlobStore
from aes_lib.bundle import Task
from aes_lib.domains.kinds import DomainKinds
from aes_lib.families.base import Params
from aes_lib.families.registry import get as family
from aes_lib.families.render import write_instance
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.models import ChatClient
from aes_lib.review.audit import AuditSettings, audit_task
from aes_lib.runners.attack import AttackSettings, attack_task
from aes_lib.sandbox import ImageCache, validate_task
from aes_lib.sandbox.trial import NopAgent, run_trial

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "seeds"
OUT = ROOT / "bench" / "results" / "attack_audit_relay"
GENERATED = (("echo-words", 5, 1), ("make-files", 4, 2), ("pick-first", 6, 3))
"""(family, difficulty, seed) of the generated tasks."""
MARKER_TEST = '''from pathlib import Path


def test_run_is_marked_complete():
    assert Path("/app/.complete").read_text() == "ok\\n"
'''


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def planted(work: Path) -> list[tuple[Path, str, str]]:
    """(task, kind, what is planted): defects validation cannot see, and verifiers that check too little."""
    out = []
    t = _copy(SEEDS / "csv-sales-rollup", work / "defect-output-path")
    for rel in ("tests/test_rollup.py", "solution/solve.sh"):
        (t / rel).write_text((t / rel).read_text().replace("/app/out/monthly_region.csv", "/app/out/monthly.csv"))
    out.append((t, "defect", "tests and reference read /app/out/monthly.csv; the instruction names monthly_region.csv"))
    for name in ("fix-interval-merge", "access-log-report"):
        t = _copy(SEEDS / name, work / f"defect-marker-{name}")
        (t / "tests" / "test_marker.py").write_text(MARKER_TEST)
        solve = t / "solution" / "solve.sh"
        solve.write_text(solve.read_text().rstrip("\n") + "\nprintf 'ok\\n' > /app/.complete\n")
        out.append((t, "defect", "a test demands /app/.complete, which the instruction never mentions"))
    t = _copy(SEEDS / "csv-sales-rollup", work / "weak-header-only")
    tests = (t / "tests" / "test_rollup.py").read_text()
    (t / "tests" / "test_rollup.py").write_text(tests[: tests.index("def test_one_row_per_region_and_month")])
    out.append((t, "weak", "the tests check only the header row"))
    return out


def tasks(work: Path) -> list[tuple[Path, str, str]]:
    out = [(d, "seed", "") for d in sorted(SEEDS.iterdir()) if (d / "task.toml").is_file()]
    for name, difficulty, seed in GENERATED:
        out.append((write_instance(family(name), Params(difficulty, seed), work / f"{name}-d{difficulty}"), "generated", ""))
    return out + planted(work)


async def measure(cases, client: ChatClient, store, attack: AttackSettings) -> list[dict]:
    images = ImageCache(kinds=DomainKinds())
    limits = solver_limits(FlywheelConfig.from_env())
    rows = []
    for path, kind, planted_what in cases:
        task = Task.load(path)
        await images.build(task)
        t0 = time.monotonic()
        report = await validate_task(path, images)
        validate_s = time.monotonic() - t0
        row = {"task": path.name, "kind": kind, "planted": planted_what, "validate_s": validate_s,
               "validation": report.reason}
        if not report.ok:
            rows.append(row)
            print(f"{path.name}: validation {report.reason}: {report.detail}", flush=True)
            continue
        a = await attack_task(task, client, images, store, limits, attack, env_id=task.name, key=path.name)
        row |= {"attack": a.reason, "attack_detail": a.detail, "attack_rewards": list(a.rewards), "nop": a.nop,
                "control": a.control, "attack_trials": a.trials, "attack_container_s": a.seconds - a.model_seconds,
                "attack_model_s": a.model_seconds, "attack_tokens": a.tokens, "attack_evidence": a.evidence}
        nop = await run_trial(task, NopAgent(), images)
        failed = Trajectory(rollout_id=f"{path.name}-nop", role="solver", reward=nop.reward, stop_reason="done",
                            verifier_output=nop.verifier.output)
        t1 = time.monotonic()
        audit = await audit_task(task.root, [failed], "No attempt was given the reference solution; the attempt "
                                 "shown is the empty solution (nothing done).", client, AuditSettings())
        row |= {"audit": audit.label or "audit_error", "audit_reason": audit.reason or audit.error,
                "audit_s": time.monotonic() - t1, "audit_nop_s": nop.seconds,
                "audit_tokens": audit.prompt_tokens + audit.completion_tokens}
        rows.append(row)
        print(f"{path.name}: attack {a.reason} {list(a.rewards)}; audit {row['audit']}", flush=True)
    return rows


def render(rows: list[dict], model: str, started: str) -> str:
    done = [r for r in rows if "attack" in r]
    v = sum(r["validate_s"] for r in done)
    ac = sum(r["attack_container_s"] for r in done)
    au = sum(r["audit_nop_s"] for r in done)
    lines = [
        "# Attacker gate and broken-or-hard audit: a relay run",
        "",
        f"**The model answering as attacker and auditor is `{model}`.** Through `bench/relay.py` that is a "
        "stand-in: an LLM agent that read each request and wrote the reply, not a hosted model. Tokens are the "
        "relay's estimates (characters / 4).",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} cores, {platform.platform()}; started {started} UTC. "
        "`bench/attack_audit_relay.py`: images built before timing, one task at a time, one attack episode per "
        "task (the empty solution and an honest control run only when the attack earned something).",
        "",
        "| task | kind | attack rewards | attack verdict | audit | attack trials | attack container s | / validate | audit tokens |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "attack" not in r:
            lines.append(f"| {r['task']} | {r['kind']} | | validation {r['validation']} | | | | | |")
            continue
        lines.append(f"| {r['task']} | {r['kind']} | {', '.join(f'{x:.2f}' for x in r['attack_rewards'])} | "
                     f"{r['attack']} | {r['audit']} | {r['attack_trials']} | {r['attack_container_s']:.1f} | "
                     f"{r['attack_container_s'] / r['validate_s']:.2f} | {r['audit_tokens']} |")
    lines += ["", f"Over {len(done)} tasks: validation {v:.1f} s; the attacker gate adds {ac:.1f} container s "
              f"(**{(v + ac) / v:.2f}x** admission without it), plus {sum(r['attack_model_s'] for r in done):.0f} s "
              f"waiting for the attacker's {sum(r['attack_tokens'] for r in done)} estimated tokens; the audit adds "
              f"{sum(r['audit_tokens'] for r in done)} estimated tokens and no trial of its own "
              f"(here one empty-solution trial, {au:.1f} s, stood in for the failed attempts calibration keeps).", "",
              "What each gate found:", ""]
    for r in rows:
        if "attack" in r:
            what = f" (planted: {r['planted']})" if r["planted"] else ""
            lines.append(f"- **{r['task']}**{what}: attack: {r['attack_detail']}; audit **{r['audit']}**: {r['audit_reason']}")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="relay")
    ap.add_argument("--only", nargs="*", default=None, help="task folder names to run (default: all)")
    ap.add_argument("--out", default=OUT.name, help="result file name under bench/results (.json and .md)")
    args = ap.parse_args()
    out = OUT.with_name(args.out)
    started = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M}"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cases = [c for c in tasks(work) if args.only is None or c[0].name in args.only]
        client = ChatClient(args.url, args.model, timeout_s=3600)
        rows = asyncio.run(measure(cases, client, FileBlobStore(work / "blobs"), AttackSettings(attempts=1)))
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    out.with_suffix(".md").write_text(render(rows, args.model, started))
    print(out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
