"""Run the review: ask the model, retry malformed answers, report what happened.

A malformed answer is sent back to the model with what was wrong, up to
``retries`` more times; if it is still malformed the review is *reported* with
``error`` set (never raised), so one bad answer cannot stall admission. An
endpoint that is down is different: ``ModelError`` propagates, and the service's
runner redelivers the candidate later.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import ClassVar

from aes_proto.messages import CriterionVerdict

from aes_lib.config import read_settings
from aes_lib.models import ChatClient
from aes_lib.review.parser import ReviewParseError, parse_review
from aes_lib.review.prompt import retry_message, review_messages, task_files
from aes_lib.review.schema import answer_schema


class ReviewSettingsError(ValueError):
    """An ``AES_REVIEW_*`` variable has a value of the wrong type."""


@dataclasses.dataclass(frozen=True)
class ReviewSettings:
    """How the review gate asks and what it does with the answer (``AES_REVIEW_<FIELD>``)."""

    env_prefix: ClassVar[str] = "AES_REVIEW_"
    section: ClassVar[str] = "review"
    enforce: bool = False
    """Whether a failed criterion rejects the candidate. Off by default: the default local
    model (SmolLM2-135M) cannot judge a task, so its verdicts are recorded as evidence but
    would reject at random; turn it on with a capable reviewer model."""
    retries: int = 2
    """Extra model calls after a malformed answer, each told what was wrong with the last."""
    max_tokens: int = 1500
    """Completion budget of one answer (11 criteria with a sentence each)."""
    temperature: float = 0.0
    """Sampling temperature; 0 makes a review repeatable on one endpoint."""
    max_file_chars: int = 4000
    """Characters of one task file shown to the model (the rest is marked truncated)."""
    max_total_chars: int = 8000
    """Characters of all task files together (about 3-4k tokens of code), to fit small
    context windows and keep a CPU-served model's prompt time in the tens of seconds."""
    structured: bool = True
    """Send ``response_format`` with the answer's JSON Schema (grammar-constrained decoding
    on llama.cpp, vLLM and OpenAI); turn off for an endpoint that rejects it."""

    @classmethod
    def from_env(cls) -> "ReviewSettings":
        return cls(**read_settings(cls, ReviewSettingsError))  # type: ignore[arg-type]


@dataclasses.dataclass(frozen=True)
class Review:
    """The outcome of one review."""

    criteria: tuple[CriterionVerdict, ...]
    """One verdict per criterion, in rubric order; empty when ``error`` is set."""
    error: str = ""
    """Why no valid answer came back after every retry."""
    attempts: int = 0
    """Model calls made."""

    @property
    def failed(self) -> tuple[CriterionVerdict, ...]:
        return tuple(c for c in self.criteria if c.outcome == "fail")


def _response_format() -> dict[str, object]:
    return {"type": "json_schema", "json_schema": {"name": "task_review", "strict": True, "schema": answer_schema()}}


async def review_task(task_dir: Path, client: ChatClient, settings: ReviewSettings) -> Review:
    """Review the Harbor task in ``task_dir`` with ``client``."""
    files = task_files(Path(task_dir), settings.max_file_chars, settings.max_total_chars)
    messages = review_messages(files)
    response_format = _response_format() if settings.structured else None
    error = ""
    for attempt in range(1, settings.retries + 2):
        turn = await client.chat(
            messages, max_tokens=settings.max_tokens, temperature=settings.temperature, response_format=response_format
        )
        try:
            return Review(criteria=parse_review(turn.text), attempts=attempt)
        except ReviewParseError as e:
            error = str(e)
            messages = messages + retry_message(turn.text, error)
    return Review(criteria=(), error=f"no valid review after {settings.retries + 1} attempts: {error}", attempts=settings.retries + 1)
