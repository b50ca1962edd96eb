"""The model's answer as a msgspec schema: one object per criterion, all required.

An object keyed by criterion name (rather than a list) lets the JSON schema demand
every criterion exactly once, which a grammar-constrained endpoint then enforces.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from aes_lib.review.rubric import CRITERION_NAMES

Outcome = Literal["pass", "fail", "not_applicable"]


class CriterionAnswer(msgspec.Struct, forbid_unknown_fields=True):
    outcome: Outcome
    reason: str


ReviewAnswer = msgspec.defstruct(
    "ReviewAnswer",
    [(name, CriterionAnswer) for name in CRITERION_NAMES],
    forbid_unknown_fields=True,
    module=__name__,
)
"""``{"<criterion>": {"outcome": ..., "reason": ...}, ...}`` for every criterion."""


def inlined_schema(tp: Any) -> dict[str, Any]:
    """JSON Schema of a msgspec type, inlined (no ``$ref``) for endpoints without $ref support."""
    schema = msgspec.json.schema(tp)
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return inline(schema)


def answer_schema() -> dict[str, Any]:
    """JSON Schema of :data:`ReviewAnswer`, inlined for response_format."""
    return inlined_schema(ReviewAnswer)
