"""The part of the tests that runs the agent's code: a child process, started by
test_kernel.py as an unprivileged user, so the module it imports cannot reach the reward
file or the test process. It never reports a time: test_kernel.py times every batch itself
(timing.py's protocol on this process's stdin and a private copy of its stdout), the eager
baseline BEFORE the module is imported (so the module cannot slow it down), then the kernel.
In between it calls the module on every case and writes WORK/outputs.pt and WORK/result.json.

Usage: python3 harness.py WORK   (APP, default /app, is where kernel.py lives; WORK holds
inputs.pt and a copy of timing.py)
"""

import importlib.util
import json
import os
import sys
from pathlib import Path

import torch
import triton

import timing  # WORK/timing.py, beside this file

FUNCTION = "rmsnorm"


def eager(x, weight, eps):
    """The unfused baseline, as a user would write it without a kernel."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def main(work: Path) -> None:
    torch.cuda.init()
    # Bound now, before the agent's module can replace the attribute it comes from.
    sync = torch._C._cuda_synchronize
    # The protocol's channel: a private copy of stdout; whatever the module prints goes to stderr.
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    inputs = torch.load(work / "inputs.pt", weights_only=True)
    timed = [a.cuda() if isinstance(a, torch.Tensor) else a for a in inputs["timing"]]
    timing.serve(eager, timed, sync, sys.stdin, channel)

    app = Path(os.environ.get("APP", "/app"))
    spec = importlib.util.spec_from_file_location("kernel", app / "kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the agent's code runs from here on
    fn = getattr(module, FUNCTION)
    result = {"errors": {},
              "triton": any(isinstance(v, triton.runtime.KernelInterface) for v in vars(module).values())}
    outputs = {}
    for case, args in inputs["cases"].items():
        try:
            outputs[case] = fn(*[a.cuda() if isinstance(a, torch.Tensor) else a for a in args]).cpu()
        except Exception as e:  # one failing case must not cost the others
            result["errors"][case] = f"{type(e).__name__}: {e}"
    torch.save(outputs, work / "outputs.pt")
    (work / "result.json").write_text(json.dumps(result))
    timing.serve(fn, timed, sync, sys.stdin, channel)

if __name__ == "__main__":
    main(Path(sys.argv[1]))
