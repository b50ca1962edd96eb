"""What one update costs to hand to the trainer's ranks: the pickled plan broadcast whole to every
rank (before issue 38) against packed per-rank shares in the store with only their refs broadcast.

Batch: ``GROUPS`` groups of ``SIZE`` agent episodes of ``TURNS`` turns (first prompt
``PROMPT`` tokens, each completion ``COMPLETION``, each tool reply ``REPLY``), turns merged into
one sequence per episode as both paths do. Measured in one run on this machine: bytes every
follower rank receives, bytes each rank reads, and CPU seconds to produce and decode them
(median of ``REPEATS``). Writes ``bench/results/train_batch_bench.md``.

    .venv/bin/python bench/train_batch_bench.py
"""

from __future__ import annotations

import datetime
import os
import pickle
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

from aes_lib.blobstore import open_store
from aes_lib.learner import Batch, Group, Sample, TokenizedTurn, write_batch
from aes_lib.learner.packing import read_rank_share
from aes_lib.learner.sequences import micro_batches, pack_turns, split_across

GROUPS, SIZE, TURNS = 8, 8, 10
PROMPT, COMPLETION, REPLY = 512, 64, 128
WORLD, MICRO_TOKENS, REPEATS = 4, 8192, 5
OUT = Path(__file__).parent / "results" / "train_batch_bench.md"


def episode(rng: random.Random, gid: str, i: int) -> Sample:
    ids: tuple[int, ...] = tuple(rng.randrange(50_000) for _ in range(PROMPT))
    turns = []
    for _ in range(TURNS):
        completion = tuple(rng.randrange(50_000) for _ in range(COMPLETION))
        turns.append(TokenizedTurn(ids, completion, tuple(-rng.random() * 3 for _ in completion), 0.7))
        ids = ids + completion + tuple(rng.randrange(50_000) for _ in range(REPLY))
    return Sample(f"{gid}-{i}", gid, "solver", float(i % 2), tuple(turns))


def median_time(fn) -> float:
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    rng = random.Random(0)
    groups = tuple(Group(f"g{g}", "solver", samples := tuple(episode(rng, f"g{g}", i) for i in range(SIZE)),
                         tuple(s.reward - 0.5 for s in samples)) for g in range(GROUPS))
    batch = Batch("solver", groups, 0, 0, 0)
    seqs = [s for sample, adv in batch.samples for s in pack_turns(sample.turns, adv)]

    # Before: rank 0 cut the plan and broadcast it pickled, whole, to every rank.
    def old_plan() -> bytes:
        shares = split_across(seqs, WORLD)
        return pickle.dumps(("step", ({"shares": shares, "n_tokens": sum(s.n_targets for s in seqs),
                                        "n_micro": max(len(micro_batches(s, MICRO_TOKENS)) for s in shares)},)))

    blob = old_plan()
    old_encode = median_time(old_plan)
    old_decode = median_time(lambda: pickle.loads(blob))

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"file://{tmp}")
        packed = write_batch(store, "b", seqs, WORLD, MICRO_TOKENS)
        command = pickle.dumps(("step", (packed.shares, packed.share_micro, packed.n_tokens)))
        share_bytes = [ref.size for ref in packed.shares]
        new_encode = median_time(lambda: write_batch(store, "b", seqs, WORLD, MICRO_TOKENS))
        new_decode = median_time(lambda: read_rank_share(store, packed.shares, packed.share_micro, 0, WORLD))

    tokens = sum(s.length for s in seqs)
    rows = [
        ("bytes every follower rank receives", f"{len(blob):,}", f"{len(command):,}",
         f"{len(blob) / len(command):,.0f}x fewer"),
        ("bytes each rank reads (largest share)", f"{len(blob):,}", f"{max(share_bytes):,}",
         f"{len(blob) / max(share_bytes):.1f}x fewer"),
        ("s to produce (rank 0 / orchestrator, all ranks)", f"{old_encode:.3f}", f"{new_encode:.3f}",
         f"{old_encode / new_encode:.2f}x"),
        ("s for a rank to get its share", f"{old_decode:.3f}", f"{new_decode:.3f}", f"{old_decode / new_decode:.2f}x"),
    ]
    text = [
        "# Handing an update to the trainer's ranks: pickled plan vs packed shares",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- machine: {os.cpu_count()} cores ({platform.processor() or platform.machine()}), shared with other work; "
        f"Python {platform.python_version()}",
        f"- batch: {GROUPS} groups x {SIZE} episodes of {TURNS} turns (prompt {PROMPT}, completion {COMPLETION}, "
        f"tool reply {REPLY} tokens), merged: {len(seqs)} sequences, {tokens:,} tokens forwarded; "
        f"{WORLD} ranks, micro-batches of {MICRO_TOKENS} padded tokens; file store on local disk",
        f"- median of {REPEATS}; `bench/train_batch_bench.py`",
        "",
        "| per update | pickled plan broadcast (before) | packed shares + refs (now) | ratio |",
        "|---|---|---|---|",
        *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows),
        "",
        "Before, every follower received the whole batch (every rank's share) over the gloo control group "
        "and unpickled it; now the command carries the share refs and each rank reads its own share "
        "(int32 tokens, float32 log-probs, temperatures and advantages) from the store. Producing the "
        "shares includes hashing and writing them to the store, and runs in the orchestrator, beside "
        "the trainer (it packs the next batch while the trainer steps); the pickled plan was never stored, "
        "so a restarted learner re-read every trajectory of its logged updates and held samples instead "
        "(now it reads none: tests/learner/test_trajectory_reads.py).",
    ]
    OUT.write_text("\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main()
