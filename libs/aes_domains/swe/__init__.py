"""Software engineering: a small git repository in the image, an issue as the instruction,
the repository's own public tests (green at the start), and hidden regression tests in
the task's tests/. aes-base has git, python3 and pytest, so no image of its own."""

from pathlib import Path

from aes_lib.domains.base import Domain

SOLVER_PROMPT = """\
This task is an issue filed against a git repository (its path is in the issue). Read the
code and its history (`git log`, `git show`), reproduce the bug, fix it in the source, and
keep the repository's own tests passing (run them). Hidden tests check the fix, the
cases around it, and that the existing behaviour is unchanged: change only what the fix
needs; do not edit or delete tests to make them pass."""

DOMAIN = Domain(
    name="swe",
    title="Software engineering",
    root=Path(__file__).parent,
    gate="aes_domains.swe.gate:SweGate",
    solver_prompt=SOLVER_PROMPT,
)
