"""How the pools experiment is read (issue 48's pre-registered plan), one rule each for
``aes experiment pools`` and the in-process harness (bench/gpu_pools_experiment.py): the paired
read-outs in order (``COMPARISONS``), what they compare per run (``ENDPOINTS``, ``endpoint``) and
the positive control's ``gate``. ``aes_ops.power.read_out`` pairs the runs by seed.

Standard library only: the harness loads this without msgspec.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

COMPARISONS = (("oracle", "static"), ("weighted", "static"), ("flywheel", "static"), ("flywheel", "weighted"),
               ("flywheel", "blind"), ("both", "flywheel"))
"""The paired read-outs (arm, baseline), in order; the first is the gate: the positive control
against the fixed pool, read before any flywheel number."""
ENDPOINTS = {"final": "at the last point", "curve": "averaged over the points after the start"}
"""What a read-out may compare per run (``endpoint``), and how a report says it
(``ExperimentConfig.endpoint`` and the harness's ``Shape.endpoint`` choose one)."""


def endpoint(curve: Sequence[float | None], name: str) -> float | None:
    """One run's value on the endpoint ``name`` from its held-out mean reward at each point, the
    start first: ``final`` the last, ``curve`` the mean of those after the start (the area under
    the learning curve); None where a point it reads has none (every held-out task failed)."""
    values = curve[-1:] if name == "final" else curve[1:]
    return None if not values or None in values else statistics.fmean(values)


def gate(read_out: Mapping | None) -> dict | None:
    """The positive control's gate on the first of ``COMPARISONS`` (``aes_ops.power.read_out``'s
    summary): ``passed`` where the difference is at least twice the detectable one; None where it
    did not run or too few seeds ran for a detectable difference."""
    if read_out is None or read_out["detectable"] is None:
        return None
    return {**read_out, "passed": read_out["difference"] >= 2 * read_out["detectable"]}
