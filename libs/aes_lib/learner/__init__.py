"""The learner: batching, role-separated advantages, DPPO updates, checkpoints, reload.

    batcher = Batcher(config); batcher.add(sample)          # samples from stored trajectories
    if (batch := batcher.next_batch()): stats = trainer.step(batch)
    await publish_policy(ctx, folder, version=..., ...)     # HF-format folder + PolicyVersion
    engine.load_state_dict(policy_tensors(store, pv.checkpoint), pv.version)  # rollout side

Several ranks (FSDP2): ``distributed`` (launch, sharding, rank 0 driving the others) and
``runtime`` (what each rank holds and does).
"""

from aes_lib.learner.advantages import centred, has_signal
from aes_lib.learner.batcher import Batch, Batcher, Group
from aes_lib.learner.checkpoint import (
    CheckpointError,
    folder_tensors,
    load_tensors,
    policy_tensors,
    publish_model,
    write_hf_folder,
)
from aes_lib.learner.config import LearnerConfig, LearnerConfigError
from aes_lib.learner.head import LogprobHead, UnsupportedModelError, install_head
from aes_lib.learner.losses import (
    Loss,
    LossOutput,
    LossParamsError,
    UnknownLossError,
    build_loss,
    loss_class,
    loss_names,
    register_loss,
)
from aes_lib.learner.policy import checkpoint_key, publish_policy
from aes_lib.learner.samples import Sample, TokenizedTurn, TrajectoryFormatError, turns_from_trajectory
from aes_lib.learner.sequences import TrainSeq, pack_turns
from aes_lib.learner.trainer import DppoTrainer, StepStats

__all__ = [
    "Batch", "Batcher", "CheckpointError", "DppoTrainer", "Group", "LearnerConfig", "Loss", "LossOutput",
    "LossParamsError",
    "LearnerConfigError", "LogprobHead", "Sample", "StepStats", "TokenizedTurn", "TrainSeq",
    "TrajectoryFormatError", "UnknownLossError", "UnsupportedModelError", "centred", "checkpoint_key",
    "build_loss", "folder_tensors", "has_signal", "install_head", "load_tensors", "loss_class", "loss_names", "pack_turns", "policy_tensors",
    "publish_model", "publish_policy", "register_loss", "turns_from_trajectory", "write_hf_folder",
]
