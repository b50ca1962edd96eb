"""What the newer admission checks cost per candidate, against validation without them, in one run.

On each seed task (images built first, so only trials are timed): ``validate_task`` with its
probes (the validator's work, the leak scan included), the leak scan alone, the strength
gate's ``check_strength`` (near misses and up to 9 mutants of the reference's end state), and the
novelty gate's work (the task's MinHash signature, compared with the other seeds' as its pool).
Each figure is wall time on this machine; the ratios are against validation, measured in the same
run, with the verdicts each check gave. The model-driven gates (attacker, audit) are costed in
``bench/attack_audit_relay.py``.

Run: ``.venv/bin/python bench/admission_gates_bench.py [--tasks N]``; writes
``bench/results/admission_gates.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import time
from pathlib import Path

from aes_lib.bundle import Task
from aes_lib.contamination.novelty import NoveltySettings, signature, similarity
from aes_lib.domains.kinds import DomainKinds
from aes_lib.sandbox import ImageCache, validate_task
from aes_lib.sandbox import leaks
from aes_lib.sandbox.strength import check_strength

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "admission_gates.md"


async def measure(tasks: list[Path]) -> list[dict]:
    """Each of ``tasks`` measured; novelty compares each with the others."""
    images = ImageCache(kinds=DomainKinds())
    rows = []
    for d in tasks:
        task = Task.load(d)
        image = await images.build(task)
        t0 = time.monotonic()
        report = await validate_task(d, images)
        t1 = time.monotonic()
        found = await leaks.scan(task, images, image)
        t2 = time.monotonic()
        strength = await check_strength(task, images, image=image)
        t3 = time.monotonic()
        own = signature(d)
        nearest = max(similarity(own, signature(o))["overall"] for o in tasks if o != d)
        t4 = time.monotonic()
        rows.append({"task": d.name, "validate": t1 - t0, "verdict": report.reason, "leak": t2 - t1,
                     "leaks": len(found), "strength": t3 - t2, "trials": strength.trials,
                     "strength_verdict": strength.reason, "detail": strength.detail, "novelty": t4 - t3,
                     "nearest": nearest,
                     "novelty_verdict": "near_copy" if nearest >= NoveltySettings().threshold else "ok"})
        print(f"{d.name}: validate {t1 - t0:.1f}s ({report.reason}), leak scan {t2 - t1:.1f}s, "
              f"strength {t3 - t2:.1f}s ({strength.trials} trials, {strength.reason})", flush=True)
    return rows


def render(rows: list[dict]) -> str:
    total = {k: sum(r[k] for r in rows) for k in ("validate", "leak", "strength", "trials", "novelty")}
    lines = [
        "# Admission checks: cost per candidate against validation",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} cores, {platform.platform()}; "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC. `bench/admission_gates_bench.py`, "
        "the seed tasks, images built before timing, one candidate at a time. Validation includes its probes "
        "and the leak scan; the leak scan is also timed alone; strength is `check_strength` (its trials run two "
        "at a time); novelty signs the task and compares it with the other seeds' signatures (each signed "
        "anew here, as with a cold KV cache).",
        "",
        "| task | validate (s) | verdict | leak scan (s) | leak / validate | strength (s) | trials | strength / validate | strength verdict | novelty (s) | novelty / validate | nearest seed |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['task']} | {r['validate']:.1f} | {r['verdict']} | {r['leak']:.1f} | "
                     f"{r['leak'] / r['validate']:.2f} | {r['strength']:.1f} | {r['trials']} | "
                     f"{r['strength'] / r['validate']:.2f} | {r['strength_verdict']} | {r['novelty']:.2f} | "
                     f"{r['novelty'] / r['validate']:.3f} | {r['nearest']:.2f} |")
    lines += [f"| **all** | {total['validate']:.1f} | | {total['leak']:.1f} | {total['leak'] / total['validate']:.2f} | "
              f"{total['strength']:.1f} | {total['trials']} | {total['strength'] / total['validate']:.2f} | | "
              f"{total['novelty']:.2f} | {total['novelty'] / total['validate']:.3f} | |", "",
              f"Admission with the strength gate costs {(total['validate'] + total['strength']) / total['validate']:.2f}x "
              "the validation it follows on these tasks (reset and calibration, which follow, are not counted here); "
              f"the novelty gate {(total['validate'] + total['novelty']) / total['validate']:.3f}x.", "",
              "What the strength gate found per task:", ""]
    lines += [f"- {r['task']}: {r['strength_verdict']}: {r['detail']}" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=0, help="the first N seeds (default: all)")
    args = p.parse_args()
    seeds = sorted(d for d in (ROOT / "seeds").iterdir() if (d / "task.toml").is_file())
    rows = asyncio.run(measure(seeds[: args.tasks or None]))
    OUT.write_text(render(rows))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
