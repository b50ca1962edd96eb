"""The learner: batching, role-separated advantages, DPPO updates, checkpoints, reload.

    batcher = Batcher(config); batcher.add(sample)          # samples from stored trajectories
    if (batch := batcher.next_batch()): stats = trainer.step(batch)
    await publish_policy(ctx, model, version=..., ...)      # safetensors + PolicyVersion
    engine.load_state_dict(checkpoint_tensors(store, pv.checkpoint), pv.version)  # rollout side
"""

from aes_lib.learner.advantages import centred, has_signal
from aes_lib.learner.batcher import Batch, Batcher, Group
from aes_lib.learner.checkpoint import CheckpointError, checkpoint_tensors, load_checkpoint, save_checkpoint
from aes_lib.learner.config import LearnerConfig, LearnerConfigError
from aes_lib.learner.losses import LOSSES, UnknownLossError, get_loss, register_loss
from aes_lib.learner.policy import checkpoint_key, publish_policy
from aes_lib.learner.samples import Sample, TokenizedTurn, TrajectoryFormatError, turns_from_trajectory
from aes_lib.learner.trainer import DppoTrainer, StepStats, UnsupportedModelError

__all__ = [
    "Batch", "Batcher", "CheckpointError", "DppoTrainer", "Group", "checkpoint_tensors",
    "LOSSES", "LearnerConfig", "LearnerConfigError", "Sample", "StepStats", "TokenizedTurn",
    "TrajectoryFormatError", "UnknownLossError", "UnsupportedModelError", "centred", "checkpoint_key",
    "get_loss", "has_signal", "load_checkpoint", "publish_policy", "register_loss", "save_checkpoint",
    "turns_from_trajectory",
]
