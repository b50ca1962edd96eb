"""The task-review rubric: Harbor's ``harbor check`` criteria, in our own words.

``binary_reward`` is left out on purpose: our rewards are fractional (tests passed
/ total), so a rule that the reward must be 0 or 1 does not apply.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Criterion:
    name: str
    """Key in the model's answer and in ``CriterionVerdict.name``."""
    question: str
    """What the reviewer must decide; ``pass`` means the answer is yes."""


CRITERIA: tuple[Criterion, ...] = (
    Criterion(
        "behavior_in_task_description",
        "Is every behavior that the tests check stated in the instruction, so a solver "
        "who follows the instruction exactly can pass?",
    ),
    Criterion(
        "behavior_in_tests",
        "Is every behavior that the instruction asks for checked by some test?",
    ),
    Criterion(
        "informative_test_structure",
        "Are the tests split into clearly named cases (one behavior each) so a failure "
        "says what went wrong?",
    ),
    Criterion(
        "anti_cheating_measures",
        "Is it hard to pass without doing the work (answers not guessable, not readable "
        "from files in the image, tests not trivially satisfiable)?",
    ),
    Criterion(
        "structured_data_schema",
        "If the task asks for structured output (JSON, CSV, a schema), does the "
        "instruction define its exact format? not_applicable when there is none.",
    ),
    Criterion(
        "pinned_dependencies",
        "Are packages installed in the image or by the tests pinned to exact versions "
        "(apt packages may stay unpinned)?",
    ),
    Criterion(
        "typos",
        "Are file names, paths, variable names and commands free of typos and "
        "consistent between instruction, tests and solution?",
    ),
    Criterion(
        "tests_or_solution_in_image",
        "Are the tests and the reference solution kept out of the image (the Dockerfile "
        "does not copy tests/ or solution/)? pass when they are kept out.",
    ),
    Criterion(
        "test_deps_in_image",
        "Are dependencies used only by the tests installed by the test script rather "
        "than baked into the image? pass when they are.",
    ),
    Criterion(
        "hardcoded_solution",
        "Does the reference solution derive its answer by doing the work rather than "
        "printing or copying a hard-coded final result? pass when it does the work.",
    ),
    Criterion(
        "file_reference_mentioned",
        "Is every file or path that the tests read from or expect the solver to write "
        "named in the instruction?",
    ),
)

CRITERION_NAMES: tuple[str, ...] = tuple(c.name for c in CRITERIA)
