"""Does the contamination gate need its C extension? The gate's check at the scale of a
100,000-instruction held-out corpus, C path against the pure-Python paths, in one run.

Held-out instructions and candidates come from ``contamination_bench.make_data`` (Zipf
vocabulary, a copied 13-gram planted in 1% of the candidates). Candidates are checked one
at a time, as the contamination service does, with

- ``NgramIndex`` with the C extension ``_ngram`` (tokenize, probe a bloom filter in C);
- ``NgramIndex`` without it (the same index bytes; tokenize and hash in Python and numpy);
- ``HashedIndex`` (13-grams hashed to 64 bits in a sorted numpy array; pure Python).

Every method must flag exactly the planted candidates, with the same matches for the two
``NgramIndex`` paths. Reported: per-candidate check time (mean and worst), the ratio against
the C path, and build times (the index is built offline, ``aes contamination index``).

Run: ``.venv/bin/python bench/contamination_scale_bench.py [--heldout N] [--candidates N]``;
writes ``bench/results/contamination_scale_bench.md``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from pathlib import Path

import aes_lib.contamination.index as index_module
from aes_lib.contamination import HashedIndex, NgramIndex, Source

from contamination_bench import machine, make_data


def per_candidate(check, texts: list[str], repeats: int) -> tuple[float, float, set[int]]:
    """Mean and worst seconds per candidate (best of ``repeats`` for each), and which were flagged."""
    best = [float("inf")] * len(texts)
    flagged: set[int] = set()
    for _ in range(repeats):
        for c, text in enumerate(texts):
            t0 = time.perf_counter()
            hit = check(text)
            best[c] = min(best[c], time.perf_counter() - t0)
            if hit is not None:
                flagged.add(c)
    return sum(best) / len(best), max(best), flagged


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--heldout", type=int, default=100_000)
    ap.add_argument("--candidates", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "contamination_scale_bench.md"))
    args = ap.parse_args()
    if index_module._ngram is None:
        raise SystemExit("the C extension aes_lib.contamination._ngram is not built: nothing to compare")

    load = os.getloadavg()[0]
    held, texts, planted = make_data(args.heldout, args.candidates, args.seed)

    t0 = time.perf_counter()
    fast = NgramIndex.build(held)
    t_build_c = time.perf_counter() - t0
    blob = fast.to_bytes()
    index_module._ngram, saved = None, index_module._ngram
    try:
        t0 = time.perf_counter()
        slow_built = NgramIndex.build(held)
        t_build_py = time.perf_counter() - t0
        same_bytes = slow_built.to_bytes() == blob
        del slow_built
        slow = NgramIndex.from_bytes(blob)  # no C probe: the pure-Python check
    finally:
        index_module._ngram = saved
    t0 = time.perf_counter()
    hashed = HashedIndex.build(held, [Source("synthetic", "none/none", "0" * 40)])
    t_build_h = time.perf_counter() - t0
    n_tokens, n_grams = len(fast.token_ids), len(fast.hashes)
    del held

    # Warm-up (first-use caches) outside the timings, then each method in turn.
    for index in (fast, slow, hashed):
        index.check(texts[0])
    rows = {
        "NgramIndex, C extension": per_candidate(fast.check, texts, args.repeats),
        "NgramIndex, pure Python + numpy": per_candidate(slow.check, texts, args.repeats),
        "HashedIndex (hashed 13-grams, numpy), pure Python": per_candidate(hashed.check, texts, args.repeats),
    }
    for name, (_, _, flagged) in rows.items():
        if flagged != planted:
            raise SystemExit(f"{name} flagged {len(flagged)} candidates, planted {len(planted)}")
    same_matches = [fast.check(t) for t in texts] == [slow.check(t) for t in texts]
    if not (same_bytes and same_matches):
        raise SystemExit(f"C and Python paths differ: same index bytes {same_bytes}, same matches {same_matches}")

    c_mean = rows["NgramIndex, C extension"][0]
    table = "\n".join(f"| {name} | {mean * 1e3:.3f} | {worst * 1e3:.3f} | {mean / c_mean:.2f}x |"
                      for name, (mean, worst, _) in rows.items())
    cand_tokens = sum(len(t.split()) for t in texts) / len(texts)
    report = f"""# Contamination gate at 100k held-out instructions: C extension or pure Python

- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}
- machine: {machine()}; load average at start {load:.1f} (shared machine)
- held-out: {args.heldout:,} synthetic instructions ({n_tokens:,} tokens, {n_grams:,} 13-grams), Zipf(1.1) vocabulary
  of 30,000 words; candidates: {len(texts):,} of ~{cand_tokens:.0f} tokens, {len(planted)} with a planted 13-gram
- every method flagged exactly the planted candidates; both NgramIndex paths built identical index bytes and
  reported identical matches; each candidate's time is its best of {args.repeats}, checked one at a time as the gate does

## Checking one candidate (raw text in, tokenization included)

| method | mean ms | worst ms | time vs C |
|---|---|---|---|
{table}

## Building (offline: `aes contamination index`)

| | seconds |
|---|---|
| NgramIndex, C extension | {t_build_c:.1f} |
| NgramIndex, pure Python + numpy | {t_build_py:.1f} |
| HashedIndex | {t_build_h:.1f} |
"""
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
