"""The admission routing slip: a stage passes a candidate on, or rejects it for good.

``CandidateEnv.route`` lists the stages still to pass, the current one first.
``forward`` pops the current stage, appends its verdict and publishes to the
next; ``reject`` ends the candidate's trip with a ``CalibrationResult`` so the
pool, planner and status see every outcome, and may send it back to its proposer
as a revision (which starts the route again). Both derive the idempotency key from
the candidate's, so a redelivered candidate republishes the same key.
``check_route`` refuses, at startup, a route that would strand candidates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence

import msgspec
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from aes_proto import subjects
from aes_proto.messages import Assignment, CalibrationResult, CandidateEnv, Verdict

from aes_lib.bus.streams import stream_for
from aes_lib.service import Context, Service


INSTRUCTION_ON_BUS = 64 << 10
"""Largest instruction (UTF-8 bytes) a candidate carries; a longer one stays in the bundle, well
under the bus's message size beside the rest of the candidate."""


def carried_instruction(instruction: str) -> str:
    """What ``CandidateEnv.instruction`` carries of a task's instruction: all of it, or nothing
    when it is too long for the bus (the stages then read it from the bundle)."""
    return instruction if len(instruction.encode()) <= INSTRUCTION_ON_BUS else ""


class RouteError(ValueError):
    """The verdict's stage is not the one at the head of the candidate's route."""


class RouteConfigError(ValueError):
    """``AES_ROUTE`` names a stage nothing consumes, or does not end on a stage that decides."""


def stages_of(services: Iterable[type[Service]]) -> dict[str, bool]:
    """Stage name -> whether it decides, for the given service classes that consume candidates."""
    prefix = subjects.CANDIDATE_PREFIX + "."
    return {s.subject[len(prefix):]: s.decides for s in services if s.subject.startswith(prefix)}


async def live_stages(js: JetStreamContext) -> dict[str, bool]:
    """Stage name -> decides, for every consumer of the candidate stream on the bus (a replica
    records ``aes.decides`` in its consumer's metadata)."""
    prefix = subjects.CANDIDATE_PREFIX + "."
    try:
        consumers = await js.consumers_info(stream_for(subjects.stage("x")))
    except NotFoundError:
        return {}
    out: dict[str, bool] = {}
    for c in consumers:
        subject = c.config.filter_subject or ""
        if subject.startswith(prefix):
            out[subject[len(prefix):]] = (c.config.metadata or {}).get("aes.decides") == "1"
    return out


async def check_live_route(js: JetStreamContext, route: Sequence[str], known: Mapping[str, bool],
                           wait: float = 30.0) -> None:
    """``check_route`` against ``known`` stages plus the consumers on the bus, giving stages
    not yet consumed ``wait`` seconds to appear (services of one deployment start together)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        stages = {**await live_stages(js), **known}
        if all(s in stages for s in route) or loop.time() >= deadline:
            return check_route(route, stages)
        await asyncio.sleep(0.5)


def check_route(route: Sequence[str], stages: Mapping[str, bool]) -> None:
    """Refuse a route that would strand candidates: every stage must have a consumer, the
    last must decide, and a deciding stage (which forwards nothing) must be last."""
    shown = ",".join(route)
    if not route:
        raise RouteConfigError("AES_ROUTE is empty: list the admission stages, e.g. validate,contamination,calibrate")
    if len(set(route)) != len(route):
        raise RouteConfigError(f"AES_ROUTE={shown} names a stage twice")
    missing = [s for s in route if s not in stages]
    if missing:
        raise RouteConfigError(
            f"AES_ROUTE={shown}: nothing consumes stage(s) {', '.join(missing)} (known: {', '.join(sorted(stages))}); "
            "start the gate's service first (aes service module:Class) or fix the name")
    deciders = sorted(s for s, d in stages.items() if d)
    if not stages[route[-1]]:
        raise RouteConfigError(
            f"AES_ROUTE={shown} ends on {route[-1]!r}, which only passes candidates on: end it on a stage that "
            f"decides ({', '.join(deciders) or 'none known'})")
    early = [s for s in route[:-1] if stages[s]]
    if early:
        raise RouteConfigError(f"AES_ROUTE={shown}: {', '.join(early)} decides and forwards nothing, so it must be last")


def _check_head(candidate: CandidateEnv, verdict: Verdict) -> None:
    if not candidate.route or candidate.route[0] != verdict.stage:
        raise RouteError(
            f"stage {verdict.stage!r} is not at the head of candidate {candidate.env_id}'s route {candidate.route}"
        )


def next_candidate(candidate: CandidateEnv, verdict: Verdict) -> CandidateEnv:
    """The candidate as the next stage receives it: current stage popped, verdict appended."""
    _check_head(candidate, verdict)
    if len(candidate.route) == 1:
        raise RouteError(f"stage {verdict.stage!r} is the last on the route: it must decide, not forward")
    return msgspec.structs.replace(
        candidate,
        idempotency_key=f"{candidate.idempotency_key}>{verdict.stage}",
        route=candidate.route[1:],
        verdicts=(*candidate.verdicts, verdict),
    )


async def forward(ctx: Context, candidate: CandidateEnv, verdict: Verdict) -> CandidateEnv:
    """Pass ``candidate`` to the next stage on its route; returns what was published."""
    nxt = next_candidate(candidate, verdict)
    await ctx.publish(subjects.stage(nxt.route[0]), nxt)
    return nxt


def rejection(candidate: CandidateEnv, verdict: Verdict, proposer_reward: float,
              resubmitted: bool = False) -> CalibrationResult:
    """The final result of a candidate that failed ``verdict.stage``."""
    _check_head(candidate, verdict)
    if not 0.0 <= proposer_reward <= 1.0:
        raise ValueError(f"proposer_reward must be in [0, 1], got {proposer_reward}")
    return CalibrationResult(
        idempotency_key=f"{candidate.idempotency_key}>{verdict.stage}:rejected",
        episode_id=candidate.episode_id,
        env_id=candidate.env_id,
        lineage=candidate.lineage,
        decision="rejected",
        proposer_reward=proposer_reward,
        resubmitted=resubmitted,
        bundle=candidate.bundle,
        verdicts=(*candidate.verdicts, verdict),
        proposal=candidate.proposal,
    )


async def reject(ctx: Context, candidate: CandidateEnv, verdict: Verdict, proposer_reward: float = 0.0,
                 revision: Assignment | None = None) -> CalibrationResult:
    """Publish the rejection of ``candidate`` on ``aes.result.calibration`` and, given its
    ``revision``, send it back to its proposer (the result says ``resubmitted``); returns the result."""
    result = rejection(candidate, verdict, proposer_reward, resubmitted=revision is not None)
    await ctx.publish(subjects.RESULT_CALIBRATION, result)
    if revision is not None:
        await ctx.publish(subjects.ASSIGNMENT, revision)
    return result
