"""Make N Harbor task folders in the shape of a published training-environment set: task.toml,
instruction.md, environment/Dockerfile, tests/ (the managed verifier and one pytest file), and
no solution/ (such sets ship without reference solutions).

    python bench/harbor_dataset_gen.py DEST [N]
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from aes_lib.sandbox import VERIFIER_TEMPLATE

TOML = """schema_version = "1.4"

[task]
name = "gen-envs/{name}"
description = "Generated training environment {i}."

[metadata]
category = "data-processing"
difficulty = "medium"

[agent]
timeout_sec = 300.0

[verifier]
timeout_sec = 120.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 1024
"""


def make(dest: Path, n: int) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        name = f"env-{i:05d}"
        d = dest / name
        (d / "environment").mkdir(parents=True, exist_ok=True)
        (d / "tests").mkdir(exist_ok=True)
        (d / "task.toml").write_text(TOML.format(name=name, i=i))
        (d / "instruction.md").write_text(f"Write the number {i} to /app/answer.txt.\n")
        (d / "environment" / "Dockerfile").write_text("FROM aes-base:latest\nWORKDIR /app\n")
        shutil.copy(VERIFIER_TEMPLATE / "test.sh", d / "tests" / "test.sh")
        (d / "tests" / "test_answer.py").write_text(
            f"from pathlib import Path\n\n\ndef test_answer():\n    assert Path('/app/answer.txt').read_text().strip() == '{i}'\n")
        out.append(d)
    return out


if __name__ == "__main__":
    make(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3000)
