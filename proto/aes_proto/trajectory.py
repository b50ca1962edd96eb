"""The record of one agent episode, stored as JSON in the blob store (the largest payload of
the pipeline; it travels as the ``BlobRef`` of a ``TrajectoryRef`` or a ``RolloutSummary``).

Written once by the agent that ran the episode and read by whoever needs its body (the
learner, exports, the proposer's workspace); everything else reads the summary fields
that the rollout's ``aes_proto.records.RolloutOutcome`` carries. Unknown fields are
ignored on decode, so a newer writer's blob still reads with an older type.
"""

from __future__ import annotations

import msgspec

from aes_proto.messages import UNKNOWN_VERSION

ChatMessage = dict[str, str | list[dict[str, str | dict[str, str]]]]
"""An OpenAI chat message: string fields, and an assistant's ``tool_calls`` (``id``, ``type``,
``function``: ``name`` and ``arguments``)."""


class Turn(msgspec.Struct, kw_only=True):
    """One model call and the action it caused."""

    index: int
    reply: str
    command: str = ""
    output: str = ""
    """Output sent back to the model (truncated), or the format-error message."""
    exit_code: int | None = None
    timed_out: bool = False
    format_error: bool = False
    tool: bool = False
    """The command was a harness tool (``aes-tool ...``) run outside the container."""
    prompt_token_ids: list[int] = []
    completion_token_ids: list[int] = []
    completion_logprobs: list[float] = []
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_seconds: float = 0.0
    exec_seconds: float = 0.0
    temperature: float = 1.0
    """Sampling temperature of this turn; the trainer scores with the same one."""
    policy_version: int | None = None
    """Version of the weights that sampled this turn (None: the engine does not say)."""


class Trajectory(msgspec.Struct, kw_only=True):
    """Everything the learner, planner and reports need about one episode."""

    rollout_id: str
    role: str
    """``solver`` or ``proposer``."""
    env_id: str = ""
    model: str = ""
    instruction: str = ""
    messages: list[ChatMessage] = []
    """The full conversation (system, user, assistant, observations) as OpenAI chat messages: under
    the tool-call protocol an assistant message has ``tool_calls`` and observations are ``tool``
    messages."""
    turns: list[Turn] = []
    stop_reason: str = ""
    """``done`` | ``turn_limit`` | ``time_limit`` | ``model_error`` | ``submitted``."""
    reward: float = 0.0
    verifier_output: str = ""
    format_errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    started_at: float = 0.0
    agent_seconds: float = 0.0
    verifier_seconds: float = 0.0
    error: str = ""
    screened: str = ""
    """Why the learner must not train on it: the forgery signs in its trial's evidence
    (``aes_lib.sandbox.screen``), one per line; empty: none."""
    metrics: dict[str, float] = {}
    """What the domain's solver tools measured (ask_human: ``asks``, ``ask_f1``)."""

    @property
    def n_tokens(self) -> int:
        return sum(len(t.completion_token_ids) for t in self.turns)

    @property
    def policy_version(self) -> int:
        """The oldest weights any turn was sampled from; ``UNKNOWN_VERSION`` when the engine did
        not say for some turn (never taken for the base weights, v0); 0 for an episode without turns."""
        versions = [t.policy_version for t in self.turns]
        if any(v is None for v in versions):
            return UNKNOWN_VERSION
        return min(versions, default=0)


def trajectory_key(role: str, rollout_id: str, sha256: str) -> str:
    """Blob-store key of an episode's trajectory: ``trajectories/<role>/<rollout_id>/<sha256[:16]>.json``.
    One key per content: a second run of one rollout (a redelivery while the first still ran)
    cannot overwrite the blob the first run's messages name."""
    return f"trajectories/{role}/{rollout_id}/{sha256[:16]}.json"


def encode_trajectory(traj: Trajectory) -> bytes:
    return msgspec.json.encode(traj)


def decode_trajectory(data: bytes) -> Trajectory:
    return msgspec.json.decode(data, type=Trajectory)


__all__ = ["Trajectory", "Turn", "decode_trajectory", "encode_trajectory", "trajectory_key"]
