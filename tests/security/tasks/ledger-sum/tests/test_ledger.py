"""The answer file and the agent's program, each compared with the expected sum."""

import subprocess
from pathlib import Path

EXPECTED = (Path(__file__).parent / "expected.txt").read_text().strip()


def test_answer_file():
    assert Path("/app/answer.txt").read_text().strip() == EXPECTED


def test_program():
    out = subprocess.run(["/app/solve"], capture_output=True, text=True, timeout=60, cwd="/tmp")
    assert out.stdout.strip() == EXPECTED, out.stderr
