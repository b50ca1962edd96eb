"""Proposer samples: each proposer episode becomes a training sample once its outcome is known.

Consumes ``aes.result.calibration``: every candidate's final word (admitted,
calibrated out of the band, rejected by a gate, or no submission at all) carries
the ``ProposalRef`` of the episode that wrote it and the proposer's reward r_P
(1 admitted, partial for valid-but-out-of-band, 0 broken). It publishes that
episode's trajectory as a ``role="proposer"`` ``TrajectoryRef`` in the
assignment's group. An episode sent back for revision is not ``final``: the group
completes when each attempt's last episode is scored. What the sample needs of the episode
(rollout id, policy version, tokens, whether it finished) travels on its ``ProposalRef``, so
the trajectory is read only by the learner (and here only for a message from before that).
"""

from __future__ import annotations

import asyncio
import logging

from aes_lib.agents.proposer.candidate import with_scalars
from aes_lib.agents.trajectory import load_trajectory
from aes_lib.service import Context, Service
from aes_proto import subjects
from aes_proto.messages import CalibrationResult, TrajectoryRef

log = logging.getLogger(__name__)


class ProposerSampleService(Service[CalibrationResult]):
    name = "proposer-samples"
    subject = subjects.RESULT_CALIBRATION
    message_type = CalibrationResult

    async def handle(self, msg: CalibrationResult, ctx: Context) -> None:
        p = msg.proposal
        if p is None:  # seeds and candidates from outside have no proposer episode
            return
        if not p.rollout_id:  # published before the episode's scalars travelled with it
            p = with_scalars(p, await asyncio.to_thread(load_trajectory, ctx.blobs, p.trajectory))
        log.info("proposer sample", extra={"env_id": msg.env_id, "decision": msg.decision, "reward": msg.proposer_reward,
                                           "final": not msg.resubmitted, "group_id": p.group_id})
        await ctx.publish(subjects.trajectory("proposer"), TrajectoryRef(
            idempotency_key=f"{msg.idempotency_key}:sample", episode_id=msg.episode_id,
            rollout_id=p.rollout_id, env_id=msg.env_id, role="proposer", group_id=p.group_id,
            group_size=p.group_size, final=not msg.resubmitted, reward=msg.proposer_reward,
            trajectory=p.trajectory, policy_version=p.policy_version, n_tokens=p.n_tokens,
            finished=p.finished,  # a cut episode is no sample of the policy
        ))
