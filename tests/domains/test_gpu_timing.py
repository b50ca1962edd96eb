"""The gpu-kernels timing protocol (``aes_domains.gpu_kernels.timing``), on the CPU: the
tests' process keeps the clock, and a child (the agent's side) that fakes its time or answers
without doing the timed work earns no timing at all."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from aes_domains.gpu_kernels import timing

# The child: serves ``fn`` over stdin/stdout the way harness.py does; MODE picks how it cheats.
CHILD = textwrap.dedent("""
    import json, statistics, sys, time
    import torch
    from aes_domains.gpu_kernels import timing

    mode = sys.argv[1]

    def norm(x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    x = torch.randn(64, 128, generator=torch.Generator().manual_seed(0))
    if mode == "honest":
        timing.serve(norm, [x], lambda: None, sys.stdin, sys.stdout)
        sys.exit()
    # The cheats the old harness allowed, which now change nothing: fake clocks and medians.
    time.perf_counter = lambda: 0.0
    statistics.median = lambda values: 1e-9
    print(json.dumps({"ready": True}), flush=True)
    ahead = float(timing.digest(norm(x), *timing.weights(1, 64, 128)))  # work done before the clock
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["op"] != "go":
            break
        calls = msg["calls"]
        if mode == "instant":
            digests = [0.0] * len(calls)
        elif mode == "ahead":
            digests = [ahead] * len(calls)
        else:  # "one call": does the first call's work and repeats its digest
            c = calls[0]
            d = float(timing.digest(norm(timing.rolled(x, c)), *timing.weights(c[2], 64, 128)))
            digests = [d] * len(calls)
        print(json.dumps({"digests": digests, "kernel_ms": 1e-6}), flush=True)
""")


def norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def measure(mode: str) -> float:
    x = torch.randn(64, 128, generator=torch.Generator().manual_seed(0))
    root = Path(__file__).resolve().parents[2]
    env = {"PYTHONPATH": f"{root / 'libs'}:{root / 'proto'}"}
    with subprocess.Popen([sys.executable, "-c", CHILD, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True, env=env) as child:
        try:
            return timing.measure(child.stdout, child.stdin, x, norm, reps=3, calls=4)
        finally:
            child.stdin.close()
            child.kill()


def test_honest_child_is_timed_by_the_parent() -> None:
    ms = measure("honest")
    assert ms > 0.0  # the parent's own clock, not a number the child sent


@pytest.mark.parametrize("mode", ["instant", "ahead", "one call"])
def test_child_that_fakes_its_time_earns_no_timing(mode) -> None:
    with pytest.raises(timing.ForgedTiming):
        measure(mode)


def test_every_seed_ships_the_protocol_unchanged() -> None:
    seeds = Path(timing.__file__).parent / "seeds"
    copies = sorted(seeds.glob("*/tests/timing.py"))
    assert len(copies) == len(list(seeds.glob("*/task.toml"))) >= 2
    assert all(c.read_bytes() == Path(timing.__file__).read_bytes() for c in copies)
