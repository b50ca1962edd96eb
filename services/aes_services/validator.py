"""Validator: the first admission gate. Does the candidate build and work?

For each candidate on ``aes.candidate.validate``: fetch the bundle, check that
its sha256 is the env_id, unpack it safely, build the image once, run the
reference solution and the empty solution concurrently from that image, and
publish a ``ValidationResult`` (failure logs go to the blob store). A pass
forwards the candidate along its route; a failure rejects it with proposer reward 0.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import shutil
import tempfile
from pathlib import Path

import docker

from aes_proto import subjects
from aes_proto.messages import BlobRef, CandidateEnv, ValidationResult, Verdict

from aes_lib.admission import forward, reject
from aes_lib.blobstore import BlobCorruptError, BlobNotFoundError
from aes_lib.bundle import BundleError, BundleLimits, unpack
from aes_lib.sandbox import ImageCache, LimitCaps, ValidationReport, reap_async, validate_task
from aes_lib.service import Context, Service

STAGE = "validate"
log = logging.getLogger(__name__)


class ValidatorService(Service[CandidateEnv]):
    name = "validator"
    subject = subjects.stage(STAGE)
    message_type = CandidateEnv
    max_deliver = 3
    ack_wait = 60.0
    concurrency = 1
    """One candidate per replica at a time (it already runs two containers): scale with replicas."""

    def __init__(self, images: ImageCache | None = None, caps: LimitCaps | None = None,
                 limits: BundleLimits = BundleLimits()) -> None:
        self.images = images
        self.caps = caps
        self.limits = limits

    async def setup(self, ctx: Context) -> None:
        if self.images is None:
            self.images = ImageCache(await asyncio.to_thread(docker.from_env))
        removed = await reap_async(self.images.client)
        if removed:
            log.info("reaped %d containers left by dead processes", len(removed))

    async def handle(self, msg: CandidateEnv, ctx: Context) -> None:
        report = await self.validate(msg, ctx)
        logs = None
        if report.logs:
            logs = await asyncio.to_thread(ctx.blobs.put_content, "logs/validate", report.logs.encode(), ".txt")
        await ctx.publish(subjects.RESULT_VALIDATION, ValidationResult(
            idempotency_key=f"{msg.idempotency_key}:{STAGE}", episode_id=msg.episode_id, env_id=msg.env_id,
            ok=report.ok, reason=report.reason, detail=report.detail, oracle_reward=report.oracle_reward,
            nop_reward=report.nop_reward, logs=logs, seconds=report.seconds,
        ))
        verdict = Verdict(stage=STAGE, ok=report.ok, reason=report.reason, detail=report.detail)
        log.info("%s %s: %s %s", msg.env_id[:12], report.task, report.reason, report.detail)
        if not report.ok:
            await reject(ctx, msg, verdict)
        elif len(msg.route) > 1:
            await forward(ctx, msg, verdict)

    async def validate(self, msg: CandidateEnv, ctx: Context) -> ValidationReport:
        assert self.images is not None, "setup() not run"
        try:
            data = await asyncio.to_thread(ctx.blobs.get_bytes, msg.bundle)
        except (BlobNotFoundError, BlobCorruptError) as e:  # other blob errors are transient: redeliver
            return _invalid(msg.bundle, f"{type(e).__name__}: {e}")
        digest = hashlib.sha256(data).hexdigest()
        if digest != msg.env_id:
            return _invalid(msg.bundle, f"env_id {msg.env_id[:12]} is not the bundle's sha256 {digest[:12]}")
        tmp = Path(tempfile.mkdtemp(prefix="aes-validate-"))
        try:
            try:
                task = await asyncio.to_thread(unpack, data, tmp / "task", self.limits)
            except BundleError as e:
                return _invalid(msg.bundle, f"{type(e).__name__}: {e}")
            labels = {"aes.env_id": msg.env_id[:32], "aes.stage": STAGE}
            return await validate_task(task.root, self.images, limits=self.limits, caps=self.caps, labels=labels)
        finally:
            await asyncio.to_thread(shutil.rmtree, tmp, True)


def _invalid(bundle: BlobRef, detail: str) -> ValidationReport:
    return ValidationReport(task=bundle.key, ok=False, reason="invalid_bundle", detail=detail)
