"""The record of one agent episode, stored as JSON in the blob store."""

from __future__ import annotations

import msgspec

from aes_proto.messages import UNKNOWN_VERSION, BlobRef


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


def turn_from_chat(index: int, chat) -> Turn:
    """The record of one model call (an ``aes_lib.models.ChatTurn``), before its action ran."""
    return Turn(index=index, reply=chat.text, prompt_token_ids=chat.prompt_token_ids,
                completion_token_ids=chat.completion_token_ids, completion_logprobs=chat.completion_logprobs,
                prompt_tokens=chat.prompt_tokens, completion_tokens=chat.completion_tokens,
                model_seconds=chat.seconds, temperature=chat.temperature, policy_version=chat.policy_version)


class Trajectory(msgspec.Struct, kw_only=True):
    """Everything the learner, planner and reports need about one episode."""

    rollout_id: str
    role: str
    """``solver`` or ``proposer``."""
    env_id: str = ""
    model: str = ""
    instruction: str = ""
    messages: list[dict[str, str]] = []
    """The full conversation (system, user, assistant, observations)."""
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


def store_trajectory(store, traj: Trajectory) -> BlobRef:
    """JSON under ``trajectories/<role>/<rollout_id>.json``."""
    return store.put_bytes(f"trajectories/{traj.role}/{traj.rollout_id}.json", msgspec.json.encode(traj))


def load_trajectory(store, ref: BlobRef) -> Trajectory:
    return msgspec.json.decode(store.get_bytes(ref), type=Trajectory)
