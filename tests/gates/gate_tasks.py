"""Small Harbor task folders for the gate tests (helpers, not tests)."""

from __future__ import annotations

from pathlib import Path

TASK_TOML = '''schema_version = "1.4"

[task]
name = "aes-tests/{name}"

[environment]
build_timeout_sec = 300.0
'''


def write_task(root: Path, name: str, dockerfile: str, instruction: str, test_sh: str = "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n") -> Path:
    """A complete task folder at ``root/name``; returns its path."""
    d = root / name
    for sub in ("environment", "solution", "tests"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "task.toml").write_text(TASK_TOML.format(name=name))
    (d / "instruction.md").write_text(instruction)
    (d / "environment" / "Dockerfile").write_text(dockerfile)
    (d / "solution" / "solve.sh").write_text("#!/bin/sh\ntrue\n")
    (d / "tests" / "test.sh").write_text(test_sh)
    return d
