"""The validation rule, as a library function shared by the service, CLI and bench.

A task is valid when its bundle checks out, names a known domain, needs no Harbor feature this
sandbox does not run yet (else ``unsupported``: a separate verifier, steps...), gets the GPUs it asks
for (else the verdict is ``needs_gpu``, not a failure of the task), its image builds, the reference
solution (oracle) scores exactly 1.0 within its time limit, the empty
solution (nop) scores below 0.5, and the tamper probe (``aes_lib.sandbox.probes``: the reference's
work broken, hooks planted wherever the tests could run the agent's code) earns no more than the
empty solution (else ``verifier_forgeable``, naming the hook), the image holds none of the task's
test or solution files (``aes_lib.sandbox.leaks``; else ``answer_in_image``), and the input probe
(``aes_lib.sandbox.input_probe``) finds no verdict that follows inputs the agent can rewrite. Oracle and nop run concurrently
from one image; the probe runs once the task is otherwise valid (one extra trial, a second, the
probe's control, only when the probe earns more than the empty solution; the input probe's one
trial, and a second only where the first shows the verdict reads the image's inputs).

An imported task may come without a reference solution (``require_reference=False``): then
there is no oracle to run (nor a reference end state for the probe to break), the report says
``no_reference``, and the solver's own attempts decide at calibration
(``aes_lib.flywheel.calibration.decide_unverified``). A generated task without one is an
``invalid_bundle``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from aes_lib.bundle import BundleError, BundleLimits, Task
from aes_lib.sandbox.container import LimitCaps
from aes_lib.sandbox.kinds import UnknownKindError
from aes_lib.sandbox.images import BuildFailedError, BuildTimeoutError, ImageCache, gpu_engine
from aes_lib.sandbox import leaks
from aes_lib.sandbox.input_probe import InputProbe, mutated
from aes_lib.sandbox.probes import TamperProbe, forgery, planted
from aes_lib.sandbox.trial import NopAgent, OracleAgent, TrialFault, TrialResult, run_trial
from aes_lib.sandbox.verifier import PRISTINE

Reason = Literal["ok", "invalid_bundle", "unknown_domain", "unsupported", "needs_gpu", "build_failed",
                 "oracle_failed", "nop_passed", "timeout", "domain_rule", "verifier_forgeable", "answer_in_image"]
NOP_THRESHOLD = 0.5


@dataclasses.dataclass(frozen=True)
class ValidationReport:
    task: str
    """Task name, or the path when the bundle did not load."""
    ok: bool
    reason: Reason
    detail: str = ""
    """One line: the specific error, or the rewards."""
    oracle_reward: float | None = None
    nop_reward: float | None = None
    logs: str = ""
    """Build, oracle and verifier output of a failure; empty when ok."""
    seconds: float = 0.0
    warnings: tuple[str, ...] = ()
    """task.toml's fields kept but not applied (``Task.warnings``): never a reason to fail."""
    nop_passes: tuple[str, ...] = ()
    """Tests the empty solution passed (from the verifier's ``pytest -rA`` summary), which check no work."""
    oracle_fails: tuple[str, ...] = ()
    """Tests the reference solution failed, with pytest's one-line reason."""
    no_reference: bool = False
    """The task has no reference solution: the oracle did not run (ok means built, nop < 0.5
    and the domain's gate); the calibrator's solver attempts must show it can be solved."""


async def validate_task(
    path: str | Path,
    images: ImageCache,
    *,
    limits: BundleLimits = BundleLimits(),
    caps: LimitCaps | None = None,
    labels: dict[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
    require_reference: bool = True,
    probe: bool = True,
) -> ValidationReport:
    """Validate the task directory at ``path``; ``progress`` hears of each step done
    (image built, oracle run, nop run, tamper probe) in one line. ``require_reference``: False
    for an imported task, which may lack solution/ (generated tasks must ship it).
    ``probe=False`` skips the tamper probe."""
    t0 = time.monotonic()
    say = progress or (lambda line: None)

    warnings: tuple[str, ...] = ()

    def report(task: str, reason: Reason, detail: str, **kw) -> ValidationReport:
        return ValidationReport(task=task, ok=reason == "ok", reason=reason, detail=detail,
                                seconds=time.monotonic() - t0, warnings=warnings, **kw)

    try:
        task = Task.load(path, limits)
    except BundleError as e:
        return report(str(path), "invalid_bundle", f"{type(e).__name__}: {e}")
    warnings = tuple(task.warnings)
    try:
        images.kinds.startup(task)  # resolves only for a kind (domain) that exists
    except UnknownKindError as e:
        return report(task.name, "unknown_domain", str(e))
    if not task.has_solution and require_reference:
        return report(task.name, "invalid_bundle", "MissingFileError: missing solution/solve.sh (a generated task "
                      "must ship its reference solution; only imported tasks may come without one)")
    if needs := task.unsupported:
        return report(task.name, "unsupported", "unsupported: " + "; ".join(needs))
    if (gpus := task.config.environment.gpus) and not await asyncio.to_thread(gpu_engine, images.client):
        return report(task.name, "needs_gpu", f"needs a GPU: the task asks for {gpus} and this Docker engine has "
                      "no GPU runtime; validate it where one exists (bench/gpu_domain.sh)")
    try:
        image = await images.build(task)
    except BuildTimeoutError as e:
        return report(task.name, "timeout", str(e), logs=e.log)
    except BuildFailedError as e:
        return report(task.name, "build_failed", str(e), logs=e.log)
    say("image built")

    async def trial(name: str, agent) -> TrialResult:
        result = await run_trial(task, agent, images, image=image, caps=caps, labels=labels)
        say(f"{name} reward {result.reward:g}")
        return result

    async def planted_trial(name: str, agent: TamperProbe) -> TrialResult:
        # Planting cut off by its timeout (a loaded machine) would leave the reference's work
        # intact beside the hooks, so the probe would "forge" honest work: a fault, never a verdict.
        result = await trial(name, agent)
        if not planted(result):
            raise TrialFault(f"{name}: the reference or the planting did not finish (exit "
                             f"{result.agent.exit_code}, timed out {result.agent.timed_out}): "
                             f"{result.agent.output[-300:]}")
        return result

    if not task.has_solution:
        nop = await trial("nop", NopAgent())
        logs = f"### nop\n{nop.log()}"
        if nop.verifier.timed_out:
            return report(task.name, "timeout", "nop: the verifier ran past its timeout", logs=logs, nop_reward=nop.reward,
                          no_reference=True)
        if nop.reward >= NOP_THRESHOLD:
            return report(task.name, "nop_passed", f"nop reward {nop.reward:g} >= {NOP_THRESHOLD}", logs=logs,
                          nop_reward=nop.reward, no_reference=True)
        return report(task.name, "ok", f"no reference solution (oracle not run; the solver's attempts decide at "
                      f"calibration), nop {nop.reward:g}", nop_reward=nop.reward, no_reference=True)
    oracle, nop = await asyncio.gather(trial("oracle", OracleAgent(task)), trial("nop", NopAgent()))
    rewards = {"oracle_reward": oracle.reward, "nop_reward": nop.reward, "nop_passes": _tests(nop, "PASSED"),
               "oracle_fails": _tests(oracle, "FAILED", "ERROR")}
    logs = f"### oracle\n{oracle.log()}\n### nop\n{nop.log()}"
    if oracle.timed_out:
        which = "solve.sh" if oracle.agent.timed_out else "the verifier"
        return report(task.name, "timeout", f"oracle: {which} ran past its timeout", logs=logs, **rewards)
    if nop.verifier.timed_out:
        return report(task.name, "timeout", "nop: the verifier ran past its timeout", logs=logs, **rewards)
    if oracle.reward != 1.0:
        return report(task.name, "oracle_failed", _why("oracle", oracle), logs=logs, **rewards)
    if nop.reward >= NOP_THRESHOLD:
        return report(task.name, "nop_passed", f"nop reward {nop.reward:g} >= {NOP_THRESHOLD}", logs=logs, **rewards)
    if found_leaks := await leaks.scan(task, images, image, labels):
        return report(task.name, "answer_in_image", leaks.detail(found_leaks), **rewards)
    say("leak scan: the image holds no test or solution file")
    if probe:
        kind_paths = images.kinds.results(task)
        tampered = await planted_trial("tamper probe", TamperProbe(task, kind_paths=kind_paths))
        found = forgery(tampered, nop.reward)
        if found is not None:  # the broken work alone may earn that: compare with it
            control = await planted_trial("probe control", TamperProbe(task, control=True, kind_paths=kind_paths))
            found = forgery(tampered, max(nop.reward, control.reward))
        if found is not None:
            return report(task.name, "verifier_forgeable", found.detail(), logs=f"### tamper probe\n{tampered.log()}",
                          **rewards)
        after = await trial("input probe", InputProbe(task, before=False, kind_paths=kind_paths))
        if after.agent.exit_code != 0 or after.agent.timed_out:
            raise TrialFault(f"input probe: the reference or the mutation did not finish: {after.agent.output[-300:]}")
        if (files := mutated(after)) and after.reward < oracle.reward:  # the verdict reads them: does it follow them?
            before = await trial("input probe, reference on the mutated inputs", InputProbe(task, before=True,
                                                                                          kind_paths=kind_paths))
            if before.reward >= oracle.reward:
                return report(task.name, "verifier_forgeable", _follows(files, before), **rewards,
                              logs=f"### input probe\n{after.log()}\n### reference on the mutated inputs\n{before.log()}")
    return report(task.name, "ok", f"oracle {oracle.reward:g}, nop {nop.reward:g}", **rewards)


def _follows(files: list[str], before: TrialResult) -> str:
    shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    return (f"the tests judge against inputs the agent can rewrite: with {shown} changed in the result paths, the "
            f"reference's answer for the changed inputs earned {before.reward:g}, so an agent that shrinks an input "
            f"and answers for it earns full reward. Judge against the image's own copy under {PRISTINE} "
            "(docs/SECURITY.md, \"input\")")


def _tests(r: TrialResult, *outcomes: str) -> tuple[str, ...]:
    """The tests of ``r``'s verifier with one of ``outcomes`` in pytest's short summary (the last one:
    captured output above it may print anything)."""
    _, found, summary = r.verifier.output.rpartition("short test summary info")
    marks = tuple(f"{o} " for o in outcomes)
    return tuple(line.split(" ", 1)[1] for line in summary.splitlines() if found and line.startswith(marks))


def _why(who: str, r: TrialResult) -> str:
    return f"{who} reward {r.reward:g}" + (f" ({r.error})" if r.error else "")
