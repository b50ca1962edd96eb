"""Kernel timing the agent's code cannot report: the tests' process keeps the clock.

The agent's module runs only in a child process (another user, see harness.py); anything the
child reports about time is ignored. The parent times each batch itself, from the moment it
sends the batch's inputs to the moment the child answers, and the answer must prove the work:

- the inputs are fresh per call and unknown before the clock starts: each call's input is the
  (2-D) timing input rolled along both dimensions by shifts the parent draws and sends with
  ``go``, so no output can be computed ahead;
- the child answers with a digest of every call's output, taken inside the timed window: the
  absolute values weighted by a random vector per row and one per column (drawn from a seed
  sent with the shifts), which no table of precomputed results can give more cheaply than the
  call itself. The parent checks two calls of each batch, drawn after the answer, against its
  own reference: a child that answers before doing the work, or skips calls, fails the check
  and earns no timing at all.

Eager and kernel are timed the same way (the roll and the digest cost both the same), eager
first, before the child imports the agent's module. This file is copied unchanged next to each
gpu-kernels seed's tests (``tests/timing.py``), so the tests import it from /tests.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

WARMUP, REPS, CALLS = 3, 15, 10
"""Median over REPS batches of CALLS back-to-back calls (the first WARMUP calls compile)."""
CHECKED = 2
"""Calls of each batch whose digest the parent checks."""
RTOL = 1e-2
"""Relative tolerance of a digest: allows half-precision rounding, not skipped work."""


class ForgedTiming(AssertionError):
    """The child's answer does not prove the timed work was done."""


def weights(seed: int, rows: int, cols: int) -> tuple[Any, Any]:
    """The digest's row and column weights for ``seed`` (on the CPU: the same on both sides)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.rand(rows, generator=g), torch.rand(cols, generator=g)


def digest(out: Any, row_w: Any, col_w: Any) -> Any:
    """sum_ij row_w[i] * col_w[j] * |out[i, j]| (a 0-d tensor on out's device)."""
    return ((out.float().abs() * col_w).sum(-1) * row_w).sum()


def rolled(x: Any, call: Sequence[int]) -> Any:
    return x.roll((call[0], call[1]), (0, 1))


# -- the child (harness.py): runs the functions, never reads a clock ---------------------------


def serve(fn: Callable[..., Any], args: Sequence[Any], sync: Callable[[], None], read: IO[str], write: IO[str]) -> None:
    """Answer the parent's batches for ``fn(x, *rest)`` (``args`` = x, *rest) until it says ``done``."""
    x, rest = args[0], list(args[1:])
    for _ in range(WARMUP):
        fn(x, *rest)
    sync()
    _send(write, {"ready": True})
    for line in read:
        msg = json.loads(line)
        if msg.get("op") != "go":
            return
        # Inside the parent's clock: a fresh input per call, the call, its digest.
        sums = []
        for call in msg["calls"]:
            row_w, col_w = (w.to(x.device) for w in weights(call[2], *x.shape))
            sums.append(digest(fn(rolled(x, call), *rest), row_w, col_w))
        sync()
        _send(write, {"digests": [float(d) for d in sums]})


def _send(write: IO[str], msg: dict) -> None:
    write.write(json.dumps(msg) + "\n")
    write.flush()


# -- the parent (the tests' process): keeps the clock and checks the work ----------------------


def measure(read: IO[str], write: IO[str], x: Any, reference: Callable[[Any], Any], *, reps: int = REPS,
            calls: int = CALLS, clock: Callable[[], float] = time.perf_counter,
            rng: random.Random | None = None) -> float:
    """Median milliseconds per call of the child's function, as this process's ``clock`` saw
    them; ``reference(x_rolled)`` computes the expected output here (x: the 2-D timing input,
    on the CPU). Raises ``ForgedTiming`` when an answer does not prove the work."""
    rng = rng or random.SystemRandom()
    if json.loads(read.readline() or "{}").get("ready") is not True:
        raise ForgedTiming("the child did not get ready")
    rows, cols = x.shape
    batches = []
    for _ in range(reps):
        batch = [[rng.randrange(rows), rng.randrange(1, cols), rng.randrange(1 << 62)] for _ in range(calls)]
        start = clock()
        _send(write, {"op": "go", "calls": batch})
        answer = read.readline()
        batches.append((clock() - start) / calls * 1e3)
        digests = _digests(answer, calls)
        for i in rng.sample(range(calls), min(CHECKED, calls)):
            want = float(digest(reference(rolled(x, batch[i])), *weights(batch[i][2], rows, cols)))
            if not math.isclose(digests[i], want, rel_tol=RTOL):
                raise ForgedTiming(f"call {i} of a timed batch: digest {digests[i]!r}, expected {want!r}")
    _send(write, {"op": "done"})
    return statistics.median(batches)


def _digests(answer: str, calls: int) -> list[float]:
    try:
        digests = json.loads(answer)["digests"]
    except (ValueError, KeyError, TypeError) as e:
        raise ForgedTiming(f"unreadable answer {answer[:200]!r}") from e
    if not (isinstance(digests, list) and len(digests) == calls
            and all(isinstance(d, float) and math.isfinite(d) for d in digests)):
        raise ForgedTiming(f"expected {calls} finite digests, got {str(digests)[:200]}")
    return digests
