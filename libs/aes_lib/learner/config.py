"""Learner settings: the DPPO protocol's numbers, read from ``AES_LEARNER_*`` variables."""

from __future__ import annotations

import dataclasses
import os
from typing import ClassVar, Literal

from aes_lib.config import read_settings
from aes_lib.learner.losses import LossParamsError, UnknownLossError, build_loss


class LearnerConfigError(ValueError):
    """A learner setting that is missing or out of range."""


@dataclasses.dataclass(frozen=True)
class LearnerConfig:
    """Every field can be set with ``AES_LEARNER_<FIELD>`` (upper case)."""

    env_prefix: ClassVar[str] = "AES_LEARNER_"
    section: ClassVar[str] = "learner"
    model_path: str = ""
    """Folder of a transformers causal LM (config + safetensors) to start training from;
    empty: the bundled SmolLM2-135M-Instruct, exported once to ``<AES_HOME>/models/``."""
    solver_group_size: int = 4
    """Solver attempts on one environment that form a group (centred together), for
    samples that do not carry their group's size (training waves and the planner do);
    sized for 2 CPU cores like the other defaults (paper: 16)."""
    proposer_group_size: int = 2
    """Proposer trajectories for one assignment that form a group (same fallback role; paper: 128)."""
    groups_per_batch: int = 2
    """Solver groups in one update: one wave's worth by default (paper: 16)."""
    proposer_groups_per_batch: int = 1
    """Proposer groups in one proposer update (128 trajectories by default)."""
    max_pending_updates: int = 8
    """Updates an incomplete group may wait for its remaining attempts before it is evicted."""
    max_policy_lag: int = 4
    """Samples drawn from weights more than this many versions behind the learner's are
    dropped (prime-rl's async level): off-policy beyond it, DPPO's mask would fire everywhere."""
    lr: float = 1e-6
    """AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    adam_eps: float = 1e-8
    """AdamW's epsilon. A parameter whose gradient is far below it steps less than ``lr``; at the
    default almost every parameter steps ``lr``, however faint its gradient. On the tiny word
    policy (``tests/training/test_learning.py``) such faint directions broke the reply format in
    one update in 4 of 30 runs, at 1e-5 in 1 of 30 (``bench/results/word_policy_stability.md``)."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip before each optimizer step; 0 disables it."""
    loss: str = "dppo_tv"
    """Name of a registered loss (``aes_lib.learner.losses``): ``dppo_tv``, ``dppo_kl`` or one an
    ``aes.losses`` entry point adds."""
    loss_params: tuple[str, ...] = ()
    """The loss's hyper-parameters as ``key=value`` items, the rest at the loss's defaults (DPPO:
    ``delta=0.1``, the trust-region threshold of its mask on the binary TV or KL)."""
    micro_batch_tokens: int = 2048
    """Padded tokens per forward/backward pass; gradients accumulate over a batch. Peak memory
    grows with it (every layer's activations are kept for the backward pass): SmolLM2-135M on
    2 CPU cores, 4 samples of ~2,100 tokens, peaked at 14.7 GiB with 8192 (the learner was
    OOM-killed on a 24 GiB machine beside vLLM) and 7.2 GiB with 2048, which was also 1.4x faster
    (no padding between samples). Raise it where memory is plentiful (a GPU)."""
    kernel_backend: Literal["auto", "triton", "torch"] = "auto"
    """``auto``: Triton kernels on CUDA, torch reference on CPU (see ``aes_kernels``)."""
    device: str = "cpu"
    """Torch device of the trained model (``cuda`` under several ranks: each rank's local GPU)."""
    nproc: int = 1
    """Ranks on this node (``aes service learner`` launches them with torchrun; ``--nproc`` overrides)."""
    param_dtype: Literal["float32", "bfloat16"] = "float32"
    """Compute dtype of the sharded model's forward and backward; the master weights and the
    AdamW moments stay fp32 (FSDP2's ``MixedPrecisionPolicy``)."""
    reduce_dtype: Literal["float32", "bfloat16"] = "float32"
    """Dtype of the gradient reduce-scatter across ranks."""
    activation_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass instead of keeping them."""
    cpu_offload: bool = False
    """Keep sharded parameters, gradients and optimizer state in CPU memory (FSDP2 ``CPUOffloadPolicy``)."""
    merge_turns: bool = True
    """Train the turns of a sample that extend each other as one sequence (``sequences.pack_turns``)."""
    checkpoint_every: int = 8
    """Updates between two saves of the learner's full state (sharded weights and AdamW moments,
    ``torch.distributed.checkpoint``); the updates since are replayed after a crash."""
    checkpoint_dir: str = ""
    """Folder of those saves, reachable from every node (empty: ``<AES_HOME>/learner``)."""
    publish_dtype: Literal["float32", "bfloat16"] = "float32"
    """Dtype of the safetensors in each published HF-format version."""
    keep_checkpoints: int = 8
    """Published versions kept in the blob store (the newest; about 0.6 GB each for SmolLM2);
    0 keeps every version (``aes eval --policy-version`` needs the version's checkpoint)."""
    checkpoint_prefix: str = "checkpoints/policy"
    """Blob-store key prefix of the published versions (``<prefix>/v<version>/``, HF-format folders)."""
    seed: int = 0
    """Torch seed for reproducible runs."""

    def __post_init__(self) -> None:
        for name in ("solver_group_size", "proposer_group_size", "groups_per_batch",
                     "proposer_groups_per_batch", "micro_batch_tokens", "max_pending_updates", "max_policy_lag",
                     "nproc", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise LearnerConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if min(self.solver_group_size, self.proposer_group_size) < 2:
            raise LearnerConfigError("group sizes must be >= 2: a single attempt has no advantage")
        if self.keep_checkpoints < 0:
            raise LearnerConfigError(f"keep_checkpoints must be >= 0, got {self.keep_checkpoints}")
        if self.lr <= 0 or self.max_grad_norm < 0 or self.adam_eps <= 0:
            raise LearnerConfigError(f"lr and adam_eps must be > 0 and max_grad_norm >= 0, got {self.lr}, "
                                     f"{self.adam_eps}, {self.max_grad_norm}")
        try:
            build_loss(self.loss, self.loss_params)
        except (UnknownLossError, LossParamsError, TypeError) as e:
            raise LearnerConfigError(str(e)) from None
        for name in ("param_dtype", "reduce_dtype", "publish_dtype"):
            if getattr(self, name) not in ("float32", "bfloat16"):
                raise LearnerConfigError(f"{name} must be float32 or bfloat16, got {getattr(self, name)!r}")
        if self.kernel_backend not in ("auto", "triton", "torch"):
            raise LearnerConfigError(f"kernel_backend must be auto, triton or torch, got {self.kernel_backend!r}")

    def group_size(self, role: str) -> int:
        return self.proposer_group_size if role == "proposer" else self.solver_group_size

    def batch_groups(self, role: str) -> int:
        return self.proposer_groups_per_batch if role == "proposer" else self.groups_per_batch

    @classmethod
    def from_env(cls, **overrides: object) -> "LearnerConfig":
        if "AES_LEARNER_DELTA" in os.environ:  # read by no field now: it would change nothing, silently
            raise LearnerConfigError("AES_LEARNER_DELTA: the DPPO threshold is a parameter of its loss now: "
                                     "set AES_LEARNER_LOSS_PARAMS=delta=<value>")
        return cls(**{**read_settings(cls, LearnerConfigError), **overrides})  # type: ignore[arg-type]
