"""Records kept in JetStream key-value buckets (state, not events), beside the streams.

A bucket is shared state; every read-modify-write of a key goes through one bounded
compare-and-set (``aes_lib.bus.kv.update``), and readers tolerate a missing key.
Records are msgpack-encoded like messages.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from aes_proto.messages import UNKNOWN_VERSION, BlobRef

POOL_BUCKET = "aes_pool"
"""``env.<env_id>``: ``PoolEntry``; ``index``: ``PoolIndex``."""
HISTORY_BUCKET = "aes_env_rollouts"
"""``env.<env_id>``: ``EnvHistory``, the solver's record on one environment (planner, proposer workspace)."""
CALIBRATION_BUCKET = "aes_calibration"
"""``r.<rollout id>``: ``RolloutOutcome`` of finished calibration attempts (a redelivery reuses them)."""
REVIEW_BUCKET = "aes_review"
"""``r.<rollout id>``: ``RolloutOutcome`` of finished pool-review attempts."""
TRAINING_BUCKET = "aes_training"
"""``r.<rollout id>``: ``RolloutOutcome`` of finished training attempts."""
NOVELTY_BUCKET = "aes_novelty"
"""``env.<env_id>``: the ``aes_lib.contamination.novelty.Signature`` of a task the novelty gate read."""
CONTAMINATION_BUCKET = "aes_contamination"
"""``index``: the ``BlobRef`` (JSON) of the registered held-out n-gram index."""
LEARNER_BUCKET = "aes_learner"
"""``<run id>``: the ``BlobRef`` (JSON) of the learner's (the trainer's) saved state."""
ORCHESTRATOR_BUCKET = "aes_orchestrator"
"""``<run id>.<sha256 of a rollout id>``: a ``TrajectoryRef`` the orchestrator holds (its group is
not batched, dropped or evicted yet); deleted once it is."""
HEALTH_BUCKET = "aes_health"
"""``<service>.<host>-<pid>``: ``ServiceHealth`` of each running replica (expires when it stops reporting)."""
RUNS_BUCKET = "aes_runs"
"""``<run id>``: ``RunRecord`` of each ``aes run`` / ``aes train``, with the configuration it ran with."""


class PoolEntry(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """One environment the pool has seen (active or retired)."""

    env_id: str
    """Content hash of the bundle."""
    bundle: BlobRef
    category: str = ""
    domain: str = ""
    """The task's domain (``[metadata] domain``); empty: terminal."""
    mean_reward: float | None = None
    """Latest mean solver reward (calibration, then each pool review)."""
    source: Literal["seed", "calibration"] = "calibration"
    assignment_id: str = ""
    episode_id: str = ""
    round: int = 0
    """Flywheel round in which the environment was admitted."""
    name: str = ""
    """Harbor task name, used as the directory name on export."""
    retired: bool = False
    """Set once the environment leaves the pool; a retired environment never comes back."""
    no_reference: bool = False
    """Admitted without a reference solution (an imported task some solver attempts passed)."""
    forgeable: str = ""
    """Why the tamper probe found its verifier forgeable (an imported task the operator seeded
    anyway, ``aes pool seed --from --allow-forgeable``); empty: none found. Training waves leave
    such an entry out unless ``AES_TRAINING_ALLOW_FORGEABLE=1``."""


class PoolIndex(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """The active pool: ids in admission order (oldest first)."""

    active: tuple[str, ...] = ()


class RolloutOutcome(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """One finished solver attempt: what the solver returns and the services publish, so none of
    them reads the stored trajectory back (only the learner reads its body)."""

    reward: float
    """The verifier's reward."""
    trajectory: BlobRef
    """The stored ``aes_proto.trajectory.Trajectory``."""
    failure: str = ""
    """Failure signature (``aes_lib.agents.solver.failure_signature``); empty for a full reward."""
    n_turns: int = 0
    seconds: float = 0.0
    """Agent and verifier time."""
    rollout_id: str = ""
    """Empty only in a record stored before outcomes carried their summary (it is run again)."""
    env_id: str = ""
    model: str = ""
    """Model name of the solver that made the attempt."""
    stop_reason: str = ""
    """As in ``Trajectory.stop_reason``."""
    policy_version: int = UNKNOWN_VERSION
    """``Trajectory.policy_version``: the oldest weights any turn was sampled from."""
    n_tokens: int = 0
    """Completion tokens carrying ids and log-probs (what the learner trains on)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    metrics: dict[str, float] = {}
    """Domain metrics (``Trajectory.metrics``), the shaped reward among them when the domain has one."""
    end_state: BlobRef | None = None
    """The agent's result paths as the verifier received them (``aes regrade`` re-scores them);
    None when the trial kept none (``aes_lib.sandbox.TrialResult.end_state``)."""
    screened: str = ""
    """``Trajectory.screened``: the forgery signs that keep it out of training."""


def history_key(env_id: str) -> str:
    """Key of an environment's ``EnvHistory`` in ``HISTORY_BUCKET``."""
    return f"env.{env_id}"


class RolloutRecord(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """One solver attempt as an environment's history keeps it."""

    rollout_id: str
    reward: float
    failure: str = ""
    """Failure signature; empty for a full reward."""
    solver: str = ""
    """Model name of the solver that made the attempt."""
    trajectory: BlobRef | None = None
    purpose: str = "training"
    """As in ``RolloutSummary``; ``diagnostic`` attempts saw the reference solution."""


class EnvHistory(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """The solver's record on one environment: what the planner plans from and the proposer's
    workspace shows. Folded from ``RolloutSummary`` messages by the planner-stats service."""

    env_id: str
    recent: tuple[RolloutRecord, ...] = ()
    """Latest attempts, oldest first (a bounded window)."""
    failures: dict[str, int] = {}
    """Failure signature -> count over every own attempt (diagnostic ones aside)."""

    @property
    def own(self) -> tuple[RolloutRecord, ...]:
        """Recent attempts made without hints (the solver's own pass rate)."""
        return tuple(r for r in self.recent if r.purpose != "diagnostic")

    @property
    def pass_rate(self) -> float | None:
        own = self.own
        return sum(r.reward for r in own) / len(own) if own else None

    @property
    def common_failure(self) -> str:
        if not self.failures:
            return ""
        # Most frequent; ties broken by text so the choice is deterministic.
        return min(self.failures.items(), key=lambda kv: (-kv[1], kv[0]))[0]


class Overrun(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """One delivery cancelled because it ran past its stage budget."""

    at: float
    """Unix time of the cancellation."""
    subject: str
    sequence: int
    """Stream sequence of the message (redelivered, or dead-lettered on its last delivery)."""
    budget: float
    """Seconds allowed."""


class ServiceHealth(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """What a replica's runner says about itself, rewritten on every change and every minute."""

    service: str
    host: str
    pid: int
    updated_at: float
    handled: int = 0
    """Deliveries settled (acked, redelivered or dead-lettered) since start."""
    overruns: int = 0
    """Deliveries cancelled past the budget since start."""
    last_overrun: Overrun | None = None
    stuck_io: tuple[str, ...] = ()
    """Blocking I/O calls past their deadline whose threads have not returned yet."""
    dead_lettered: int = 0


class RunRecord(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """One run of the flywheel (``aes run``) or of training waves (``aes train``)."""

    run_id: str
    command: str
    started_at: float
    config: dict[str, dict[str, str | int | float | bool | list[str]]]
    """The effective configuration, section -> key -> value, as its config file holds it
    (secrets left out): ``aes --config`` on it runs the same settings."""
    sources: dict[str, str] = {}
    """``section.key`` -> where its value came from: the config file, ``AES_<FIELD>``, ``--set``,
    ``stack.json``; keys left at their default are not listed."""
