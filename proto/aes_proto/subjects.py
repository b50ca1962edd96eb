"""Subject and stream names: the only addresses services know each other by.

Admission is a routing slip of stage names (see ``CandidateEnv.route``); stage
``X`` consumes ``aes.candidate.X``. A new domain gate is one more stage name.
"""

from __future__ import annotations

ASSIGNMENT = "aes.assignment"
"""Planner and calibrator -> proposer (fresh assignments and revisions)."""

CANDIDATE_PREFIX = "aes.candidate"


def stage(name: str) -> str:
    """Subject on which admission stage ``name`` consumes candidates."""
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"stage name must be alphanumeric (with - or _): {name!r}")
    return f"{CANDIDATE_PREFIX}.{name}"


def on_admission_path(subject: str) -> bool:
    """Whether a message on ``subject`` carries an assignment or its candidate, so that a
    dead letter of it ends the episode (unlike a side consumer's, e.g. stats or learner)."""
    return subject == ASSIGNMENT or subject.startswith(CANDIDATE_PREFIX + ".")


RESULT_VALIDATION = "aes.result.validation"
RESULT_CONTAMINATION = "aes.result.contamination"
RESULT_REVIEW = "aes.result.review"
RESULT_GATE = "aes.result.gate"
RESULT_CALIBRATION = "aes.result.calibration"
POOL_EVENT = "aes.pool.event"
POOL_REVIEW = "aes.pool.review"
"""Request: rerun the solver on the pool and retire what it outgrew (``PoolReview``)."""
POOL_PLAN = "aes.pool.plan"
"""The review's outcome, or a round without one: plan the assignments (``PoolPlan``)."""
ROLLOUT_SUMMARY = "aes.rollout.summary"
TRAJECTORY_PREFIX = "aes.trajectory"
TRAJECTORIES = f"{TRAJECTORY_PREFIX}.>"
"""Every role's scored trajectories (the shared-policy learner consumes them all)."""


def trajectory(role: str) -> str:
    """Subject of ``role``'s scored trajectories (a separate-models learner consumes one)."""
    if role not in ("solver", "proposer"):
        raise ValueError(f"role must be solver or proposer, got {role!r}")
    return f"{TRAJECTORY_PREFIX}.{role}"


TRAINING_WAVE = "aes.training.wave"
"""``aes run``/``aes train`` -> wave planner: sample groups from the pool."""
ROLLOUT_REQUEST = "aes.rollout.request"
"""Wave planner -> training-rollout replicas: one attempt each."""
POLICY_VERSION = "aes.policy.version"
SERVING_VERSION = "aes.policy.serving"
"""Weight sync -> anyone: an engine loaded a version."""
LEARNER_STATS = "aes.learner.stats"
TRAIN_BATCH_PREFIX = "aes.train.batch"


def train_batch(policy: str) -> str:
    """Subject of ``policy``'s packed updates (``TrainBatch``, orchestrator -> trainer)."""
    if policy not in ("shared", "solver", "proposer"):
        raise ValueError(f"policy must be shared, solver or proposer, got {policy!r}")
    return f"{TRAIN_BATCH_PREFIX}.{policy}"


DEAD_LETTER_PREFIX = "aes.dlq"

# Streams. Work-queue streams hand each message to exactly one replica of the
# consuming service; limits streams keep history that several readers replay.
STREAMS: dict[str, dict] = {
    "AES_ASSIGNMENTS": {"subjects": [ASSIGNMENT], "retention": "workqueue"},
    "AES_CANDIDATES": {"subjects": [f"{CANDIDATE_PREFIX}.>"], "retention": "workqueue"},
    "AES_RESULTS": {"subjects": ["aes.result.>"], "retention": "limits"},
    "AES_POOL": {"subjects": [POOL_EVENT, POOL_REVIEW, POOL_PLAN], "retention": "limits"},
    "AES_ROLLOUTS": {"subjects": [ROLLOUT_SUMMARY, TRAJECTORIES], "retention": "limits"},
    "AES_TRAINING": {"subjects": [TRAINING_WAVE, ROLLOUT_REQUEST], "retention": "workqueue"},
    "AES_POLICY": {"subjects": [POLICY_VERSION, SERVING_VERSION, LEARNER_STATS], "retention": "limits"},
    # Limits: a restarted orchestrator reads its last batch back (its id and groups).
    "AES_TRAIN": {"subjects": [f"{TRAIN_BATCH_PREFIX}.>"], "retention": "limits"},
    "AES_DLQ": {"subjects": [f"{DEAD_LETTER_PREFIX}.>"], "retention": "limits"},
}
