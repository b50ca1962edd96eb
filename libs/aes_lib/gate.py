"""``Gate``: an admission stage that judges one unpacked task; the base does the rest.

Per candidate the base first offers the message to ``judge_message`` (a gate that needs
only what travels on the candidate, the instruction, answers there and reads no bundle).
Otherwise it leases the task's files from the host's unpack cache
(``aes_lib.bundle.cache``): the first stage on a host fetches the bundle (with the I/O
deadline; a store fault is transient and redelivers, see ``aes_lib.faults``), checks that
``env_id`` is its sha256 and unpacks it off the event loop under ``limits``; later stages
lease the same verified tree without a fetch. Bad bundle bytes become an
``invalid_bundle`` verdict. Then it asks ``judge``, publishes the gate's result record and
forwards or rejects along the route (a stage that read the files puts the instruction on
the candidate it forwards, for a publisher that left it off). A rejected candidate from a proposer
with revisions left (``AES_MAX_REVISIONS``) goes back to it with the verdict and the
gate's ``feedback``, and its revision repeats the whole route. A new domain gate is a subclass
with a ``stage`` name and a ``judge``; run it with ``aes service module:Class`` and
add the name to ``AES_ROUTE``.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import functools
import hashlib
import logging
from typing import TYPE_CHECKING, Any, ClassVar

import msgspec

from aes_proto import subjects
from aes_proto.messages import Assignment, BlobRef, CandidateEnv, GateResult, Verdict

from aes_lib import faults
from aes_lib.admission import carried_instruction, forward, reject
from aes_lib.bundle import BundleError, BundleLimits, Task
from aes_lib.bundle.cache import Lease, UnpackCache
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.flywheel.revision import check_feedback, revision_assignment, sends_back
from aes_lib.service import Context, Service

if TYPE_CHECKING:
    from aes_lib.sandbox import ImageCache, LimitCaps
    from aes_lib.sandbox.kinds import TaskKinds

log = logging.getLogger(__name__)


def enforced(stage: str, passed: bool, reason: str, detail: str, enforce: bool, setting: str) -> Verdict:
    """A gate's verdict under its enforce ``setting``: what it found fails the candidate only
    when enforced; otherwise the candidate passes and the detail says the finding was recorded only."""
    if passed or enforce:
        return Verdict(stage=stage, ok=passed, reason=reason, detail=detail)
    return Verdict(stage=stage, ok=True, reason=reason, detail=f"recorded only, {setting} is off: {detail}")


@dataclasses.dataclass(frozen=True)
class Judgement:
    """A gate's verdict and, for its own result record, whatever evidence backs it."""

    verdict: Verdict
    evidence: Any = None
    """Gate-specific (a validation report, a review, an n-gram match); None for a bad bundle."""


class Gate(Service[CandidateEnv], abc.ABC):
    """Subclass, set ``stage``, implement ``judge``; override ``record`` for a richer result."""

    stage: ClassVar[str]
    """Route name; the gate consumes ``aes.candidate.<stage>`` with a durable of the same name."""
    message_type = CandidateEnv
    limits: BundleLimits = BundleLimits()
    """Unpacking limits (size, files, paths) applied to every bundle."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "stage" in cls.__dict__:
            cls.subject = subjects.stage(cls.stage)
            if "name" not in cls.__dict__:
                cls.name = cls.stage

    @abc.abstractmethod
    async def judge(self, task: Task, candidate: CandidateEnv, ctx: Context) -> Judgement | Verdict:
        """Judge the unpacked task. Raise for an infrastructure fault (it is retried, never a
        verdict); return a failing verdict only for what is wrong with the task itself."""

    async def judge_message(self, candidate: CandidateEnv, ctx: Context) -> Judgement | Verdict | None:
        """Judge from what the candidate carries (its ``instruction``), without the bundle's files;
        None (the default): the files are needed, ``judge`` decides."""
        return None

    async def record(self, candidate: CandidateEnv, judgement: Judgement, ctx: Context) -> None:
        """Publish this gate's result record; by default a ``GateResult``."""
        v = judgement.verdict
        await ctx.publish(subjects.RESULT_GATE, GateResult(
            idempotency_key=f"{candidate.idempotency_key}:{self.stage}", episode_id=candidate.episode_id,
            env_id=candidate.env_id, gate=self.stage, ok=v.ok, reason=v.reason, detail=v.detail,
        ))

    def facts(self, judgement: Judgement) -> dict[str, object]:
        """What the gate's log line carries besides the verdict (e.g. the validator's rewards)."""
        return {}

    def feedback(self, judgement: Judgement) -> str | None:
        """What the proposer revising a rejected candidate reads besides the verdict (a build
        log, a trial's output); None when the failure is not the candidate's, so no revision
        of it could pass and it is not sent back."""
        return ""

    @functools.cached_property
    def max_revisions(self) -> int:
        """Times one assignment may go back to its proposer (``AES_MAX_REVISIONS``)."""
        return FlywheelConfig.from_env().max_revisions

    async def handle(self, msg: CandidateEnv, ctx: Context) -> None:
        judgement, msg = await self._judged(msg, ctx)
        v = judgement.verdict
        revision = None if v.ok else self._revision(msg, judgement)
        log.info("gate verdict", extra={
            "stage": self.stage, "verdict": "pass" if v.ok else "fail", "reason": v.reason, "detail": v.detail,
            "env_id": msg.env_id, "assignment_id": msg.lineage.assignment_id, "revision": msg.lineage.revision,
            "sent_back": revision is not None, **self.facts(judgement)})
        await self.record(msg, judgement, ctx)
        if v.ok:
            await forward(ctx, msg, v)
        else:
            await reject(ctx, msg, v, revision=revision)

    def _revision(self, msg: CandidateEnv, judgement: Judgement) -> Assignment | None:
        evidence = self.feedback(judgement)
        if evidence is None or not sends_back(msg.lineage, self.max_revisions):
            return None
        return revision_assignment(msg, msg.direction, check_feedback(judgement.verdict, evidence))

    async def _judged(self, msg: CandidateEnv, ctx: Context) -> tuple[Judgement, CandidateEnv]:
        """The judgement, and the candidate as it goes on (with the instruction once read)."""
        if msg.bundle.sha256 != msg.env_id:  # every read of the bundle checks its bytes against this digest
            return self.invalid(f"env_id {msg.env_id[:12]} is not the bundle's sha256 {msg.bundle.sha256[:12]}"), msg
        out = await self.judge_message(msg, ctx)
        if out is not None:
            return (out if isinstance(out, Judgement) else Judgement(out)), msg
        lease = await self.lease(msg.env_id, msg.bundle, ctx)
        if isinstance(lease, Judgement):
            return lease, msg
        try:
            if msg.instruction and msg.instruction != lease.task.instruction:
                # A stage that judged the carried text must have judged the bundle's.
                return self.invalid("the instruction the candidate carries is not its bundle's"), msg
            if not msg.instruction:
                msg = msgspec.structs.replace(msg, instruction=carried_instruction(lease.task.instruction))
            out = await self.judge(lease.task, msg, ctx)
            return (out if isinstance(out, Judgement) else Judgement(out)), msg
        finally:
            await asyncio.to_thread(lease.release)

    async def lease(self, env_id: str, bundle: BlobRef, ctx: Context) -> Lease | Judgement:
        """A task's files from the host's unpack cache; fetched, checked and put there on a
        miss. A judgement (``invalid_bundle``) when the bytes are not ``env_id``'s or unsafe."""
        cache = self.unpack_cache(ctx)
        try:
            if (lease := await asyncio.to_thread(cache.lease, env_id, self.limits)) is not None:
                return lease
            data = await faults.call(ctx.blobs.get_bytes, bundle, deadline=ctx.settings.io_deadline,
                                     what=f"{self.stage}: read bundle {bundle.key}")
            digest = hashlib.sha256(data).hexdigest()
            if digest != env_id:
                return self.invalid(f"env_id {env_id[:12]} is not the bundle's sha256 {digest[:12]}")
            return await asyncio.to_thread(cache.put, digest, data, self.limits)
        except BundleError as e:
            return self.invalid(f"{type(e).__name__}: {e}")

    def unpack_cache(self, ctx: Context) -> UnpackCache:
        """The host's unpack cache (``UnpackCache.for_settings``), opened on first use."""
        if getattr(self, "_unpack_cache", None) is None:
            self._unpack_cache = UnpackCache.for_settings(ctx.settings)
        return self._unpack_cache

    def invalid(self, detail: str) -> Judgement:
        """The candidate's own bytes are bad: a permanent verdict."""
        return Judgement(Verdict(stage=self.stage, ok=False, reason="invalid_bundle", detail=detail))


class SandboxGate(Gate):
    """A gate that builds the task's image and runs it (the validator, the domain gates): one
    candidate per replica at a time (it already runs containers; scale with replicas), an image
    cache shared by its trials, and the leftovers of dead processes reaped when it starts."""

    max_deliver = 5
    ack_wait = 60.0
    concurrency = 1

    def __init__(self, images: "ImageCache | None" = None, caps: "LimitCaps | None" = None,
                 limits: BundleLimits = BundleLimits()) -> None:
        self.images = images
        self.caps = caps
        """Resource caps of its containers (None: the sandbox's defaults)."""
        self.limits = limits

    @abc.abstractmethod
    def task_kinds(self) -> "TaskKinds":
        """The kinds of task (the domains, which sit above this floor) its image cache builds
        and starts tasks with."""

    async def setup(self, ctx: Context) -> None:
        import docker

        from aes_lib.sandbox import ImageCache, reap_async

        if self.images is None:
            self.images = ImageCache(await asyncio.to_thread(docker.from_env), kinds=self.task_kinds())
        try:
            removed = await reap_async(self.images.client)
        except docker.errors.DockerException as e:  # cleanup is best effort: never a reason not to start
            log.warning("could not reap leftovers of dead processes: %s", e)
        else:
            if removed:
                log.info("reaped %d containers and images left by dead processes", len(removed))
