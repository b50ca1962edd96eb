"""Validation as a domain's candidate must pass it: the common rule, then the domain's gate."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from aes_lib.bundle import Task
from aes_lib.domains.registry import domain_of
from aes_lib.sandbox import ImageCache, LimitCaps, ValidationReport, validate_task


async def validate_in_domain(path: str | Path, images: ImageCache, *, caps: LimitCaps | None = None,
                             labels: dict[str, str] | None = None,
                             progress: Callable[[str], None] | None = None,
                             require_reference: bool = True) -> ValidationReport:
    """``validate_task``, then, for a task whose domain has a gate, that gate's rules: what a
    candidate of the domain must pass before calibration (``aes validate`` runs this).
    ``require_reference``: False for imported tasks, which may lack solution/."""
    report = await validate_task(path, images, caps=caps, labels=labels, progress=progress,
                                 require_reference=require_reference)
    if not report.ok:
        return report
    task = Task.load(path)
    domain = domain_of(task)
    if (gate := domain.gate_class()) is None:
        return report
    found = await gate(images=images, caps=caps).check_task(task, images, labels)
    if progress:
        progress(f"{domain.name} gate: {found.verdict.reason}")
    if found.verdict.ok:
        return report
    return dataclasses.replace(report, ok=False, reason="domain_rule",
                               detail=f"{domain.name} gate: {found.verdict.reason}: {found.verdict.detail}",
                               logs=found.logs)
