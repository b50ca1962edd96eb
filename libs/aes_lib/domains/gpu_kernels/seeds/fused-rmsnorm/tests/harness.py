"""The part of the tests that runs the agent's code: a child process, started by
test_kernel.py as an unprivileged user, so the module it imports cannot reach the reward
file or the test process. It reads WORK/inputs.pt, times the eager baseline BEFORE importing
the module (so the module cannot slow it down), then calls the module on every case and
times it, and writes WORK/outputs.pt and WORK/result.json for the tests to judge.

Usage: python3 harness.py WORK   (APP, default /app, is where kernel.py lives)
"""

import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import triton

FUNCTION = "rmsnorm"
WARMUP, REPS, CALLS = 3, 15, 10
"""Median over REPS batches of CALLS back-to-back calls: one batch amortises launch jitter,
the median drops batches disturbed by anything else on the machine."""


def eager(x, weight, eps):
    """The unfused baseline, as a user would write it without a kernel."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def main(work: Path) -> None:
    torch.cuda.init()
    # Bound now, before the agent's module can replace the attributes they come from.
    sync, clock = torch._C._cuda_synchronize, time.perf_counter

    def timed(fn, args):
        for _ in range(WARMUP):  # the first call compiles a Triton kernel
            out = fn(*args)
        sync()
        batches = []
        for _ in range(REPS):
            start = clock()
            for _ in range(CALLS):
                out = fn(*args)
            sync()
            batches.append((clock() - start) / CALLS * 1e3)
        return statistics.median(batches), out

    inputs = torch.load(work / "inputs.pt", weights_only=True)
    timing = [a.cuda() if isinstance(a, torch.Tensor) else a for a in inputs["timing"]]
    eager_ms, _ = timed(eager, timing)

    app = Path(os.environ.get("APP", "/app"))
    spec = importlib.util.spec_from_file_location("kernel", app / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the agent's code runs from here on
    fn = getattr(module, FUNCTION)
    result = {"eager_ms": eager_ms, "errors": {},
              "triton": any(isinstance(v, triton.runtime.KernelInterface) for v in vars(module).values())}
    outputs = {}
    for case, args in inputs["cases"].items():
        try:
            outputs[case] = fn(*[a.cuda() if isinstance(a, torch.Tensor) else a for a in args]).cpu()
        except Exception as e:  # one failing case must not cost the others
            result["errors"][case] = f"{type(e).__name__}: {e}"
    result["kernel_ms"], out = timed(fn, timing)
    outputs["timing"] = out.cpu()
    torch.save(outputs, work / "outputs.pt")
    (work / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
