"""``GpuKernelsGate``: a GPU-kernel task must ask for a GPU and time its kernel against eager.

Without a GPU request the task would be scheduled where its kernel cannot run; without an
eager baseline measured by the tests themselves, "fast" means nothing on another GPU. Both
are read from the task's files; a machine without a GPU runtime never gets this far (the
base class answers ``needs_gpu``).
"""

from __future__ import annotations

import re

from aes_proto.messages import Verdict

from aes_lib.bundle import Task
from aes_lib.domains.gate import DomainGate

TIMES_ON_GPU = re.compile(r"synchroni[sz]e\b|cuda\.Event\b|do_bench\b")
"""A test that times GPU work waits for the device (or uses an event or Triton's timer)."""
EAGER = re.compile(r"\beager\w*", re.IGNORECASE)
"""The baseline it times is named as the eager version."""


class GpuKernelsGate(DomainGate):
    stage = "gpu-kernels"

    def check(self, task: Task) -> Verdict | None:
        gpus = task.config.environment.gpus or 0
        if gpus < 1:
            return self.verdict(False, "no_gpu_requested",
                                "a GPU-kernel task must set [environment] gpus = 1 (or more) in task.toml")
        tests = task.root / "tests"
        source = "\n".join(p.read_text(errors="replace") for p in sorted(tests.rglob("*.py")) if p.is_file())
        if not TIMES_ON_GPU.search(source):
            return self.verdict(False, "no_eager_baseline", "the tests time nothing on the GPU: time the kernel "
                                "and the eager version in the same run, calling torch.cuda.synchronize() "
                                "before each clock read")
        if not EAGER.search(source):
            return self.verdict(False, "no_eager_baseline", "the tests time the kernel but name no eager "
                                "baseline: compare it with the torch eager version, measured in the same run")
        return None
