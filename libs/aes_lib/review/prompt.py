"""The review prompt: the rubric, the answer format, and the task's files."""

from __future__ import annotations

import json
from pathlib import Path

from aes_lib.review.rubric import CRITERIA
from aes_lib.sandbox.verifier import MANAGED_HEADER

_SYSTEM = (
    "You review a terminal task for a reinforcement-learning benchmark. A solver sees only "
    "instruction.md inside a container built from environment/; afterwards tests/test.sh "
    "scores it with the fraction of tests passed; solution/solve.sh is the reference "
    "solution. Judge each criterion below as pass, fail or not_applicable and give a "
    "one-sentence reason. Answer with a single JSON object and nothing else."
)

# Files the reviewer reads first; then everything under these folders, in this order,
# so that bulky data in environment/ is what a tight budget truncates.
_FIRST = ("instruction.md", "task.toml", "environment/Dockerfile")
_FOLDERS = ("tests", "solution", "environment")


MANAGED_STUB = ("[the managed verifier, the same in every task: runs every tests/test_*.py with pytest and "
                "writes reward = tests passed / tests collected]")


def task_files(task_dir: Path, max_file_chars: int, max_total_chars: int) -> list[tuple[str, str]]:
    """(relative path, text) of the task's text files, each and all together truncated."""
    paths = [task_dir / name for name in _FIRST if (task_dir / name).is_file()]
    for folder in _FOLDERS:
        # The test scripts before their fixtures and data, which a tight budget then truncates.
        paths += sorted((p for p in (task_dir / folder).rglob("*") if p.is_file() and p not in paths),
                        key=lambda p: (not p.name.startswith("test"), p))
    files: list[tuple[str, str]] = []
    budget = max_total_chars
    for path in paths:
        if budget <= 0:
            break
        raw = path.read_bytes()
        if b"\x00" in raw[:4096]:
            continue  # binary: nothing a reviewer can read
        # The managed verifier is the same in every task and long: shown whole it would take the
        # budget the task's own tests need.
        text = MANAGED_STUB if raw.startswith(MANAGED_HEADER) else raw.decode("utf-8", errors="replace")
        limit = min(max_file_chars, budget)
        if len(text) > limit:
            text = text[:limit] + f"\n[... truncated, {len(text) - limit} more characters]"
        budget -= len(text)
        files.append((path.relative_to(task_dir).as_posix(), text))
    return files


def review_messages(files: list[tuple[str, str]]) -> list[dict[str, str]]:
    rubric = "\n".join(f"- {c.name}: {c.question}" for c in CRITERIA)
    example = {
        CRITERIA[0].name: {"outcome": "fail", "reason": "tests/test_out.py checks a header row the instruction never asks for"},
        CRITERIA[4].name: {"outcome": "not_applicable", "reason": "the task writes no structured output"},
    }
    body = "\n\n".join(f"=== {name} ===\n{text}" for name, text in files)
    user = (
        f"Criteria:\n{rubric}\n\n"
        f"Answer format: a JSON object with one key per criterion (all {len(CRITERIA)}), each "
        'value {"outcome": "pass" | "fail" | "not_applicable", "reason": "..."}, e.g. '
        f"{json.dumps(example)} ...\n\n"
        f"The task's files:\n\n{body}"
    )
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def retry_message(answer: str, error: str) -> list[dict[str, str]]:
    """Turns appended after an invalid answer: the answer, then what was wrong with it."""
    return [
        {"role": "assistant", "content": answer[:2000]},
        {"role": "user", "content": f"That answer is invalid: {error}. Reply again with only the JSON object."},
    ]
