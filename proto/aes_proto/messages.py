"""Every message the pipeline exchanges, as msgspec Structs.

Each message carries a schema version, an idempotency key (the publisher sets it
from its input so a redelivered input republishes the *same* key, which
JetStream de-duplicates), and the ids that follow one episode across services:
``episode_id`` (one assignment and every candidate, check and rollout it causes)
and, where an environment exists, ``env_id`` (the content hash of its bundle).
"""

from __future__ import annotations

import time
from typing import Literal

import msgspec

SCHEMA_VERSION = 1
UNKNOWN_VERSION = -1
"""A sample's policy version when the engine that sampled it did not say which weights it used."""


class SchemaVersionError(ValueError):
    pass


class Message(msgspec.Struct, kw_only=True, frozen=True, tag_field="type", forbid_unknown_fields=True):
    """Fields shared by every message on the bus."""

    schema_version: int = SCHEMA_VERSION
    """Version of this contract; a reader refuses any other."""
    idempotency_key: str
    """Stable for one logical event; used as the JetStream ``Nats-Msg-Id``."""
    episode_id: str
    """Follows one assignment through proposer, gates, calibration and the pool."""
    created_at: float = msgspec.field(default_factory=time.time)
    """Unix time at which the publisher built the message."""

    def __post_init__(self) -> None:
        if self.schema_version != SCHEMA_VERSION:
            raise SchemaVersionError(
                f"schema_version: expected {SCHEMA_VERSION}, got {self.schema_version}"
            )


class BlobRef(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """A pointer into the blob store; payloads over a few KB never ride the bus."""

    key: str
    """Key in the store, e.g. ``bundles/sha256/<hex>.tar.gz``."""
    sha256: str
    """Hex digest of the stored bytes, checked on read."""
    size: int
    """Size in bytes."""


class Verdict(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """One admission stage's outcome, carried along with the candidate."""

    stage: str
    """Name of the stage (``validate``, ``contamination``, ``review``, ``reset``...)."""
    ok: bool
    reason: str
    """Machine-readable reason, ``ok`` when passed (e.g. ``oracle_failed``)."""
    detail: str = ""
    """Human-readable explanation."""


class ProposalRef(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """The proposer episode behind a candidate: what the learner trains once its outcome is known."""

    trajectory: BlobRef
    """The stored proposer ``Trajectory``."""
    group_id: str
    """The proposals for one assignment form one group (their rewards are centred together)."""
    group_size: int = 1
    """Attempts in the group; the group is complete when each attempt's last episode is scored."""
    rollout_id: str = ""
    """The episode's rollout id. This and the three scalars below are what the learner's
    ``TrajectoryRef`` needs of the episode, so ``proposer-samples`` never reads the trajectory;
    empty on a message from before they travelled (it then reads them from the trajectory)."""
    policy_version: int = UNKNOWN_VERSION
    """Oldest weights any of the episode's turns was sampled from (``Trajectory.policy_version``)."""
    n_tokens: int = 0
    """Completion tokens of the episode."""
    finished: bool = True
    """False when the episode was cut by a model error: no sample of the policy."""


Direction = Literal["new", "easier", "harder", "revise"]
Role = Literal["solver", "proposer"]
ProposerMode = Literal["prompt", "feedback", "agent", "procedural", "parametric"]
"""How a proposer builds an environment: the modes a planner may assign, each a generator of
``aes_lib.agents.proposer.boundary``."""
GenerationMode = Literal[ProposerMode, "seed"]
"""Where a task came from: a proposer's mode, or ``seed`` for the bundled tasks."""


class Lineage(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """Where an episode's work comes from: set by the planner on the assignment, completed by
    the proposer, and carried whole (never field by field) by the candidate, its final
    result and any revision, so every reader knows the round, revision and parent."""

    assignment_id: str
    round: int = 0
    """Flywheel round of the assignment (0: outside a round, e.g. ``aes generate``)."""
    revision: int = 0
    """0 for a fresh assignment; 1..max_revisions when sent back by a check."""
    parent_env_id: str | None = None
    category: str = ""
    domain: str = ""
    """The environment's domain (``aes_lib.domains``); empty: terminal."""
    mode: GenerationMode = "agent"
    """How the proposer builds the environment: ``agent``, ``prompt``, ``feedback``, ``procedural`` (a task
    family's instance, no model), ``parametric`` (a family's instance whose difficulty a model chose)
    (``seed``: a seed task)."""
    proposer_model: str = ""
    """Set by the proposer."""
    cost_usd: float = 0.0
    """What the proposer spent on the candidate (set by the proposer): cost per valid environment."""


class Assignment(Message, frozen=True):
    """Planner -> proposer: build an environment relative to a parent."""

    lineage: Lineage
    direction: Direction
    """Easier when the solver keeps failing the parent, harder when it succeeds."""
    parent_bundle: BlobRef | None = None
    pass_rate: float | None = None
    """Solver's mean reward on the parent over its latest rollouts."""
    common_failure: str = ""
    """Commonest failure on the parent, from verifier output and trajectories."""
    feedback: str = ""
    """Evidence for a revision: which check failed and why (diagnostic rollout included)."""
    previous_bundle: BlobRef | None = None
    """The rejected candidate that a revision starts from."""
    group_id: str = ""
    """Proposer group: the parallel attempts at one assignment (empty: the assignment id)."""
    group_size: int = 1
    """Attempts the planner issued for the group (the paper's 128 proposals per assignment)."""


class CandidateEnv(Message, frozen=True):
    """Proposer -> admission stages: a complete Harbor task bundle.

    ``route`` is a routing slip: the stages still to pass, in order. Each stage
    pops itself and forwards the candidate to the next, so adding a gate is one
    more consumer and one more name in the configured route.
    """

    env_id: str
    """sha256 of the bundle archive."""
    bundle: BlobRef
    lineage: Lineage
    direction: Direction = "new"
    """The assignment's direction, kept when a failed check sends the candidate back."""
    route: tuple[str, ...] = ()
    verdicts: tuple[Verdict, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    proposal: ProposalRef | None = None
    """The proposer episode that wrote this candidate (None for seeds)."""
    no_reference: bool = False
    """An imported task without a reference solution: no oracle ran; the calibrator admits it
    only if some solver attempt passes (else ``unverified_too_hard``)."""
    instruction: str = ""
    """The task's instruction (``instruction.md``, a multi-step task's first step), set where the
    bundle was packed, so a stage that judges only the text (contamination) reads no bundle.
    Empty when the publisher left it off (an older message, one too long for the bus): the
    first stage that reads the bundle's files fills it in for the rest of the route."""


class ValidationResult(Message, frozen=True):
    """Validator: the image builds, oracle scores 1.0, the empty solution < 0.5."""

    env_id: str
    ok: bool
    reason: str
    """``ok`` | ``invalid_bundle`` | ``build_failed`` | ``oracle_failed`` | ``nop_passed`` | ``timeout`` |
    ``verifier_forgeable`` (a tamper probe earned more than the empty solution) | ``answer_in_image``
    (the image holds the task's own tests or solution) | ..."""
    detail: str = ""
    oracle_reward: float | None = None
    nop_reward: float | None = None
    logs: BlobRef | None = None
    """Build, oracle and verifier logs of a failure."""
    seconds: float = 0.0


class ContaminationResult(Message, frozen=True):
    """Contamination checker: 13-gram overlap with held-out instructions."""

    env_id: str
    ok: bool
    matched_ngram: str = ""
    heldout_task: str = ""
    n: int = 13


class CriterionVerdict(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    name: str
    outcome: Literal["pass", "fail", "not_applicable"]
    reason: str = ""


class ReviewResult(Message, frozen=True):
    """LLM task review against the rubric."""

    env_id: str
    ok: bool
    enforced: bool
    """Whether a failed review rejects the candidate (a setting)."""
    criteria: tuple[CriterionVerdict, ...] = ()
    model: str = ""
    error: str = ""
    """Set when the model's output could not be parsed after retries."""


class GateResult(Message, frozen=True):
    """Any pluggable domain gate (reset check, GPU-kernel timing, ...)."""

    env_id: str
    gate: str
    ok: bool
    reason: str
    detail: str = ""


class CalibrationResult(Message, frozen=True):
    """Calibrator: solver rollouts decide admission and the proposer's reward."""

    env_id: str
    lineage: Lineage
    decision: Literal["admitted", "too_hard", "too_easy", "no_spread", "rejected", "unverified_too_hard"]
    """``unverified_too_hard``: a task without a reference solution that no solver attempt passed."""
    rewards: tuple[float, ...] = ()
    mean: float = 0.0
    std: float = 0.0
    proposer_reward: float = 0.0
    """0 broken, partial for valid outside the band, 1 admitted."""
    resubmitted: bool = False
    """True when the candidate went back to its proposer for revision."""
    bundle: BlobRef | None = None
    verdicts: tuple[Verdict, ...] = ()
    proposal: ProposalRef | None = None
    """The proposer episode behind the candidate; ``proposer_reward`` is its reward."""
    no_reference: bool = False
    """The task has no reference solution (``CandidateEnv.no_reference``)."""


class PoolEvent(Message, frozen=True):
    """Pool manager: an environment entered or left the active pool."""

    env_id: str
    kind: Literal["admitted", "retired", "rescored", "duplicate"]
    reason: str = ""
    mean_reward: float | None = None
    pool_size: int = 0


class TrajectoryRef(Message, frozen=True):
    """A scored trajectory, stored in the blob store, for the learner and planner."""

    rollout_id: str
    env_id: str
    role: Role
    group_id: str
    """Attempts that share a group are centred together by the learner."""
    reward: float
    trajectory: BlobRef
    policy_version: int = 0
    """Oldest weights any of its turns was sampled from (the learner drops samples too old);
    ``UNKNOWN_VERSION`` (-1) when the engine did not say (the learner drops those too)."""
    n_tokens: int = 0
    finished: bool = True
    group_size: int = 0
    """Members of the group; 0: the learner's configured size for the role."""
    final: bool = True
    """Whether this sample ends one member of its group: every solver attempt does; a
    proposer episode that was sent back for revision does not (its revision continues it)."""
    screened: str = ""
    """The forgery signs in its trial's evidence (``Trajectory.screened``): the learner counts it
    toward its group's completion but leaves it out of the advantages and the update."""


class RolloutSummary(Message, frozen=True):
    """One solver attempt, summarized for the planner, status and reports."""

    rollout_id: str
    env_id: str
    role: Role
    reward: float
    n_turns: int = 0
    seconds: float = 0.0
    """Wall time of the attempt: its container's life, model calls and verifier included."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    """The attempt's model calls, as the endpoint counted them."""
    failure: str = ""
    """Short failure signature: the first failing test, a timeout, an error."""
    trajectory: BlobRef | None = None
    policy_version: int = 0
    """Oldest weights any of its turns was sampled from; ``UNKNOWN_VERSION`` (-1): not known."""
    purpose: Literal["calibration", "training", "pool_review", "diagnostic", "proposer_tool"] = "training"
    model: str = ""
    """Model name of the solver that made the attempt."""
    metrics: dict[str, float] = {}
    """Domain metrics of the attempt (ask_human: ``asks``, ``ask_f1``); empty for a plain task."""
    end_state: BlobRef | None = None
    """The agent's result paths as the verifier received them, for ``aes regrade``; None when
    the trial kept none."""
    screened: str = ""
    """The forgery signs in its trial's evidence (``Trajectory.screened``); empty: none."""


PolicyName = Literal["shared", "solver", "proposer"]


class PolicyVersion(Message, frozen=True):
    """Learner: new weights that the next round samples from."""

    version: int
    checkpoint: BlobRef | None = None
    """The version's HF-format folder in the blob store (its manifest): the store transport's, for
    engines on other machines and for tools (``aes policy export``, eval)."""
    folder: str = ""
    """The version's HF-format folder on a filesystem the trainer and the engines share (the
    filesystem transport: the one copy, read in place). Engines read it when set, else ``checkpoint``;
    a version names at least one."""
    step: int = 0
    base_model: str = ""
    policy: PolicyName = "shared"
    """Which policy: ``shared`` (one model in both roles) or, with separate models, ``solver``/``proposer``."""
    solver_updates: int = 0
    """Updates on solver groups so far (the pool review cadence counts these)."""
    trained_role: Role = "solver"
    """Whose groups the update that made this version trained on."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.checkpoint is None and not self.folder:
            raise ValueError("a PolicyVersion names where its weights are: a checkpoint or a folder")


class ServingUpdate(Message, frozen=True):
    """Weight sync: an engine now serves ``version`` of ``policy``."""

    policy: PolicyName
    version: int
    engine: str
    """Base URL of the engine that loaded it."""
    seconds: float
    """Time to load the checkpoint into the engine."""


class TrainingWave(Message, frozen=True):
    """Request one wave of training rollouts: groups of attempts on environments of the pool."""

    wave_id: str
    """Unique per wave (e.g. ``r3w1``); group and rollout ids derive from it."""
    groups: int
    """Environments sampled from the active pool (one group each)."""
    group_size: int
    """Attempts per environment."""
    policy_version: int = 0
    """The engine must serve at least this version before an attempt starts."""
    round: int = 0


class RolloutRequest(Message, frozen=True):
    """One training attempt: run the current solver on ``env_id`` as a member of ``group_id``."""

    rollout_id: str
    env_id: str
    bundle: BlobRef
    group_id: str
    group_size: int
    wave_id: str
    policy_version: int = 0
    """Minimum version the engine must serve when the attempt starts."""
    imported: bool = False
    """The environment is a pool seed (written by people, imported by the operator): its sandbox
    may get the network its task.toml asks for, under ``AES_SANDBOX_NETWORK=imported``."""


class LearnerStats(Message, frozen=True):
    """Learner: one optimizer step's statistics."""

    step: int
    policy_version: int
    loss: float
    mean_reward: float
    mask_fraction: float
    """Fraction of tokens whose gradient the DPPO trust-region mask removed."""
    mean_divergence: float
    groups_used: int = 0
    groups_dropped: int = 0
    tokens: int = 0
    carried_over: int = 0
    masked_tokens: int = 0
    """Tokens whose gradient the mask removed (how often it fired this step)."""
    role: Role = "solver"
    """Whose groups the step trained on."""
    grad_norm: float = 0.0
    """Gradient norm before clipping."""
    seconds: float = 0.0
    """Wall time of the update (forward, backward, optimizer step)."""
    policy: PolicyName = "shared"
    group_ids: tuple[str, ...] = ()
    """The groups trained on: a group appears in exactly one update."""
    stale_dropped: int = 0
    """Samples dropped since the last update for being older than the allowed policy lag."""
    screened: int = 0
    """Samples left out of the update's groups for forgery signs (``TrajectoryRef.screened``)."""
    sequence_tokens: int = 0
    """Tokens forwarded (prompts, context, completions; turns that extend each other counted once)."""
    ranks: int = 1
    """Learner processes that shared the update."""


class TrainBatch(Message, frozen=True):
    """Orchestrator -> trainer: one update, packed. The trainer reads its ranks' shares from the
    store, steps once and publishes ``batch_id`` as the policy version (the boundary another
    trainer plugs in behind, docs/TRAINER.md)."""

    batch_id: int
    """Consecutive from 1 per orchestrator run; also the policy version this update makes, and
    what the trainer's checkpoint remembers (a batch at or below it is acked untrained)."""
    policy: PolicyName = "shared"
    role: Role = "solver"
    shares: tuple[BlobRef, ...] = ()
    """One packed share per rank the orchestrator packed for (``aes_lib.learner.packing``): its
    micro-batches as flat token arrays. A trainer with fewer ranks takes shares ``r::world``."""
    share_micro: tuple[int, ...] = ()
    """Micro-batches in each share (every rank runs as many as the busiest, padding with empty ones)."""
    n_tokens: int = 0
    """Completion tokens of the whole batch: the loss's shared normalizer."""
    group_ids: tuple[str, ...] = ()
    mean_reward: float = 0.0
    groups_dropped: int = 0
    """Groups without a reward spread, evicted or stale since the previous batch."""
    carried_over: int = 0
    stale_dropped: int = 0
    """Samples dropped for policy lag since the previous batch."""
    screened: int = 0
    """Samples of the batch's groups left out for forgery signs (``TrajectoryRef.screened``)."""


class DeadLetter(Message, frozen=True, kw_only=True):
    """A message a service gave up on, why, and its bytes for ``aes dlq replay``."""

    subject: str
    """Subject the message was published on (where a replay sends it back)."""
    stream: str
    consumer: str
    """Durable consumer (service) that gave up."""
    deliveries: int
    fault: Literal["malformed", "transient", "error", "deadline", "unacked"] = "error"
    """Why: ``malformed`` bytes no delivery can decode; ``transient`` infrastructure faults
    (store, Docker, model endpoint) still failing after every retry; ``error`` an unexpected
    exception on every delivery; ``deadline`` the handler ran past its stage budget on the
    last delivery; ``unacked`` no ack at all (the handler's process died each time)."""
    error: str
    """The last error, one line."""
    lineage: Lineage | None = None
    """The message's lineage when its bytes still show one (a malformed message may not)."""
    data: bytes = b""
    """The message's bytes, when they fit beside this record on the bus; else empty and
    ``payload`` holds them."""
    payload: BlobRef | None = None
    """The message's bytes in the blob store, for a message too large to copy onto the bus."""
    headers: dict[str, str] = {}
    source_sequence: int = 0
    """Sequence of the message in ``stream`` (0 when unknown)."""


class PoolReview(Message, frozen=True):
    """On ``aes.pool.review`` (from the policy watcher every ``review_every`` solver updates,
    ``aes run`` or ``aes pool review``): rerun the current solver on the pool, retire the
    tasks outside the band, then publish the round's ``PoolPlan``."""

    round: int = 0
    """Flywheel round; carried into the plan."""
    policy_version: int = 0
    """Solver version that triggered the review (0 when manual)."""
    fresh: int = 0
    """New assignments the plan asks for besides one replacement per retired task."""


class PoolPlan(Message, frozen=True):
    """On ``aes.pool.plan`` (from the pool reviewer, or directly for a round without a
    review): the planner publishes one replacement per retired task and ``fresh`` new
    assignments."""

    round: int = 0
    """Flywheel round; the planner derives its assignments' idempotent ids from it."""
    policy_version: int = 0
    fresh: int = 0
    retired: tuple[str, ...] = ()
    """Env ids the review retired."""


MESSAGE_TYPES: tuple[type[Message], ...] = (
    Assignment,
    CandidateEnv,
    ValidationResult,
    ContaminationResult,
    ReviewResult,
    GateResult,
    CalibrationResult,
    PoolEvent,
    PoolReview,
    PoolPlan,
    TrajectoryRef,
    RolloutSummary,
    PolicyVersion,
    ServingUpdate,
    TrainingWave,
    RolloutRequest,
    LearnerStats,
    TrainBatch,
    DeadLetter,
)

__all__ = [t.__name__ for t in MESSAGE_TYPES] + [
    "BlobRef",
    "ProposalRef",
    "Lineage",
    "Verdict",
    "CriterionVerdict",
    "Message",
    "SchemaVersionError",
]
