"""Driving training waves from outside the services, and reporting what the learner did.

``train`` requests waves one after another. A wave is over when all its attempts
were published, the learner has consumed every trajectory on the bus, and -- if
that produced a new version -- the engine serves it, so the next wave samples the
new weights. Each wave prints one line; ``LearnerTally`` sums a round's updates.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable

from nats.js.errors import NotFoundError

from aes_proto import subjects
from aes_proto.messages import LearnerStats, PolicyVersion, RolloutSummary, ServingUpdate, TrainingWave, TrajectoryRef

from aes_lib.bus import stream_for
from aes_ops.rounds import BusFeed
from aes_lib.flywheel.training import TrainingConfig

LEARNERS = ("learner", "learner-solver", "learner-proposer")
"""Durable names of the learner consumers (shared, or one per role)."""


@dataclasses.dataclass
class LearnerTally:
    """What the learner did while a round ran: the numbers ``aes run`` prints per round."""

    updates: int = 0
    version: int = 0
    """Latest version published (0: none)."""
    served: int = 0
    """Latest version an engine reported serving."""
    rewards: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    """Role -> mean batch reward of each update."""
    samples: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    """Role -> reward of each sample that reached the learner (solver attempts, proposer r_P)."""
    tokens: int = 0
    masked: int = 0

    def observe(self, m) -> None:
        match m:
            case LearnerStats():
                self.updates += 1
                self.version = max(self.version, m.policy_version)
                self.rewards.setdefault(m.role, []).append(m.mean_reward)
                self.tokens += m.tokens
                self.masked += m.masked_tokens
            case PolicyVersion():
                self.version = max(self.version, m.version)
            case ServingUpdate():
                self.served = max(self.served, m.version)
            case TrajectoryRef():
                self.samples.setdefault(m.role, []).append(m.reward)

    def reset(self) -> None:
        """Count afresh (the next round)."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, f.default_factory() if f.default is dataclasses.MISSING else f.default)

    def line(self) -> str:
        def means(by_role: dict[str, list[float]]) -> str:
            return ", ".join(f"{role} {sum(r) / len(r):.3f} (n={len(r)})" for role, r in sorted(by_role.items())) or "-"

        mask = f"{self.masked / self.tokens:.1%}" if self.tokens else "-"
        return (f"learner: policy v{self.version} (served v{self.served}), {self.updates} updates; mean training "
                f"reward per role: {means(self.samples)}; masked tokens {mask}")


async def learner_idle(js) -> bool:
    """Whether every learner consumer has settled every message on the bus."""
    for name in LEARNERS:
        try:
            info = await js.consumer_info(stream_for(subjects.TRAJECTORIES), name)
        except NotFoundError:
            continue
        if info.num_pending or info.num_ack_pending:
            return False
    return True


async def train(
    bus,
    config: TrainingConfig,
    *,
    round_: int,
    prefix: str,
    served_version: Callable[[], Awaitable[int]],
    out: Callable[[str], None] = print,
    tally: LearnerTally | None = None,
    feed: BusFeed | None = None,
) -> LearnerTally:
    """Run ``config.waves_per_round`` waves of round ``round_``; wave ids are ``<prefix>w<i>``
    (unique per request: rollout ids derive from them). ``feed``: the rounds' feed, read
    on (what the round's last results caused is counted too); else one of its own.
    Returns what the learner did."""
    tally = tally or LearnerTally()
    loop = asyncio.get_running_loop()
    async with contextlib.AsyncExitStack() as stack:
        feed = feed or await stack.enter_async_context(BusFeed.open(bus))
        for w in range(config.waves_per_round):
            wave_id = f"{prefix}w{w}"
            version = await served_version()
            expected = config.groups_per_wave * config.group_size
            await bus.publish(subjects.TRAINING_WAVE, TrainingWave(
                idempotency_key=wave_id, episode_id=wave_id, wave_id=wave_id, groups=config.groups_per_wave,
                group_size=config.group_size, policy_version=version, round=round_))
            out(f"== training wave {wave_id}: {config.groups_per_wave} environments x {config.group_size} "
                f"attempts at policy v{version}")
            rewards: list[float] = []
            refs = 0
            published = tally.version
            deadline = loop.time() + config.engine_wait_s
            while loop.time() < deadline:
                got = await feed.next(1.0)
                if got is not None:
                    m = got[1]
                    tally.observe(m)
                    match m:
                        case RolloutSummary(purpose="training") if m.episode_id == wave_id:
                            rewards.append(m.reward)
                            out(f"    attempt on {m.env_id[:12]}: reward {m.reward:.2f} (v{m.policy_version})")
                        case TrajectoryRef() if m.episode_id == wave_id:
                            refs += 1
                        case LearnerStats():
                            out(f"    update -> v{m.policy_version} ({m.role}): loss {m.loss:.4f}, "
                                f"reward {m.mean_reward:.3f}, masked {m.mask_fraction:.1%}, {m.seconds:.1f} s")
                        case ServingUpdate():
                            out(f"    engine serves v{m.version} (loaded in {m.seconds:.1f} s)")
                attempts_done = len(rewards) >= expected and refs >= expected
                # Decide only once the feed was quiet for a read: the learner may have acked its
                # last sample while its LearnerStats and PolicyVersion are still on their way to us.
                if got is None and attempts_done and await learner_idle(bus.js) and tally.served >= tally.version:
                    break
            else:
                out(f"== wave {wave_id}: gave up waiting after {config.engine_wait_s:.0f} s "
                    f"({len(rewards)}/{expected} attempts, policy v{tally.version}, served v{tally.served})")
                continue
            mean = sum(rewards) / len(rewards) if rewards else 0.0
            change = f"new policy v{tally.version}" if tally.version > published else "no update (the batch is not full yet)"
            out(f"== wave {wave_id} done: mean reward {mean:.3f}; {change}")
    return tally
