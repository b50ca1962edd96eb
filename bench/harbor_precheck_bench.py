"""Load + pre-check time per task on a generated 3,000-task training-environment set
(``bench/harbor_dataset_gen.py``), against ``Task.load`` alone measured in the same run (the
pre-check adds the unsupported check and Harbor's content digest).

    python bench/harbor_precheck_bench.py [N]   # writes bench/results/harbor_precheck.md
"""

from __future__ import annotations

import datetime
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from aes_lib.bundle import Task
from aes_lib.bundle.imported import dataset_tasks
from aes_lib.bundle.precheck import precheck

sys.path.insert(0, str(Path(__file__).parent))
from harbor_dataset_gen import make  # noqa: E402


def main(n: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        make(Path(tmp), n)
        dirs = dataset_tasks(Path(tmp)).dirs
        t0 = time.perf_counter()
        for d in dirs:
            Task.load(d)
        load = time.perf_counter() - t0
        t0 = time.perf_counter()
        checks = [precheck(d) for d in dirs]
        pre = time.perf_counter() - t0
    verdicts = Counter(c.verdict for c in checks)
    return (f"# Load + pre-check of {n} generated task folders (tests, no solution)\n\n"
            f"{datetime.date.today()} on {platform.node()} ({platform.machine()}, shared 2-core machine)\n\n"
            f"| | total s | ms per task |\n|---|---|---|\n"
            f"| Task.load alone (baseline) | {load:.2f} | {1000 * load / n:.2f} |\n"
            f"| precheck (load + unsupported + content digest) | {pre:.2f} | {1000 * pre / n:.2f} |\n\n"
            f"precheck / load = {pre / load:.2f}x. Verdicts: {dict(verdicts)}\n")


if __name__ == "__main__":
    text = main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
    out = Path(__file__).parent / "results" / "harbor_precheck.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)
    print(text)
