"""Lenient reading, strict validation of the model's review.

Lenient: the JSON object may sit inside prose or a markdown fence; outcomes may be
spelled ``PASS``, ``Not applicable``, ``n/a``; criteria may come as a list of
``{"name", "outcome", "reason"}``. Strict: after that normalization the answer
must match :data:`ReviewAnswer` exactly (every criterion, nothing else).
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from aes_proto.messages import CriterionVerdict

from aes_lib.review.rubric import CRITERION_NAMES
from aes_lib.review.schema import ReviewAnswer


class ReviewParseError(ValueError):
    """The model's text is not a valid review; the message says what is wrong."""


_OUTCOME_ALIASES = {
    "pass": "pass", "passed": "pass", "ok": "pass", "yes": "pass",
    "fail": "fail", "failed": "fail", "no": "fail",
    "not_applicable": "not_applicable", "n_a": "not_applicable", "na": "not_applicable",
}  # fmt: skip


def _json_object(text: str) -> Any:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ReviewParseError(f"no JSON object in the answer: {text[:200]!r}")
    try:
        return json.loads(text[start : end + 1])
    except json.JSONDecodeError as e:
        raise ReviewParseError(f"answer is not valid JSON ({e})") from e


def _normalize(obj: Any) -> Any:
    if isinstance(obj, dict) and isinstance(obj.get("criteria"), (list, dict)):
        obj = obj["criteria"]
    if isinstance(obj, list):
        obj = {str(item.get("name")): item for item in obj if isinstance(item, dict)}
    if not isinstance(obj, dict):
        raise ReviewParseError(f"expected an object keyed by criterion, got {type(obj).__name__}")
    out = {}
    for name, answer in obj.items():
        if isinstance(answer, dict):
            answer = {k: v for k, v in answer.items() if k != "name"}
            if isinstance(answer.get("outcome"), str):
                key = re.sub(r"[^a-z]+", "_", answer["outcome"].strip().lower()).strip("_")
                answer["outcome"] = _OUTCOME_ALIASES.get(key, answer["outcome"])
        out[name] = answer
    return out


def parse_review(text: str) -> tuple[CriterionVerdict, ...]:
    """One verdict per rubric criterion, in rubric order; ``ReviewParseError`` otherwise."""
    obj = _normalize(_json_object(text))
    missing = [n for n in CRITERION_NAMES if n not in obj]
    if missing:
        raise ReviewParseError(f"missing criteria: {', '.join(missing)}")
    try:
        answer = msgspec.convert(obj, ReviewAnswer)
    except msgspec.ValidationError as e:
        raise ReviewParseError(f"answer does not match the schema: {e}") from e
    return tuple(
        CriterionVerdict(name=n, outcome=getattr(answer, n).outcome, reason=getattr(answer, n).reason)
        for n in CRITERION_NAMES
    )
