"""The Prompt baselines' one-reply file format."""

import pytest

from aes_lib.agents.proposer.files import (
    FileFormatError,
    UnsafeFilePathError,
    format_files,
    parse_files,
    write_files,
)

FILES = {
    "instruction.md": "Write /app/out.txt containing hello.\n",
    "task.toml": 'schema_version = "1.4"\n',
    "environment/Dockerfile": "FROM aes-base:latest\nWORKDIR /app\n",
    "solution/solve.sh": "#!/bin/bash\necho hello > /app/out.txt\n",
    "tests/test_out.py": "def test_out():\n    assert open('/app/out.txt').read() == 'hello\\n'\n",
}


def test_round_trip_and_write(tmp_path):
    reply = "Here is the task.\n" + format_files(FILES) + "\nGood luck!"
    assert parse_files(reply) == FILES
    root = write_files(parse_files(reply), tmp_path / "task")
    assert (root / "environment/Dockerfile").read_text() == FILES["environment/Dockerfile"]
    assert (root / "solution/solve.sh").stat().st_mode & 0o111


def test_code_fences_inside_a_block_are_stripped():
    reply = format_files(FILES).replace(
        "=== FILE: solution/solve.sh ===\n#!/bin/bash\necho hello > /app/out.txt\n",
        "=== FILE: solution/solve.sh ===\n```bash\n#!/bin/bash\necho hello > /app/out.txt\n```\n",
    )
    assert parse_files(reply)["solution/solve.sh"] == FILES["solution/solve.sh"]


def test_missing_file_and_no_blocks():
    partial = {k: v for k, v in FILES.items() if k != "solution/solve.sh"}
    with pytest.raises(FileFormatError, match="missing required file.*solution/solve.sh"):
        parse_files(format_files(partial))
    no_tests = {k: v for k, v in FILES.items() if not k.startswith("tests/")}
    with pytest.raises(FileFormatError, match="no tests/test_\\*.py"):
        parse_files(format_files(no_tests))
    with pytest.raises(FileFormatError, match="no '=== FILE"):
        parse_files("I cannot do that.")


@pytest.mark.parametrize("bad", ["../escape.sh", "/etc/passwd", "tests/../../x", "a\\b"])
def test_paths_cannot_escape(bad):
    with pytest.raises(UnsafeFilePathError, match="refusing file path"):
        parse_files(format_files({**FILES, bad: "x"}))
