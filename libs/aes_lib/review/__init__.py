"""Task review gate library: rubric, prompt, answer schema, lenient parser, reviewer; the
broken-or-hard audit of a task the solver failed (``aes_lib.review.audit``)."""

from aes_lib.review.parser import ReviewParseError, parse_review
from aes_lib.review.reviewer import Review, ReviewSettings, ReviewSettingsError, review_task
from aes_lib.review.rubric import CRITERIA, CRITERION_NAMES, Criterion
from aes_lib.review.schema import CriterionAnswer, ReviewAnswer, answer_schema

__all__ = [
    "CRITERIA",
    "CRITERION_NAMES",
    "Criterion",
    "CriterionAnswer",
    "Review",
    "ReviewAnswer",
    "ReviewParseError",
    "ReviewSettings",
    "ReviewSettingsError",
    "answer_schema",
    "parse_review",
    "review_task",
]
