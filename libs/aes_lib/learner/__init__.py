"""The learner: batching, role-separated advantages, packing, DPPO updates, checkpoints, reload.

    batcher = Batcher(config); batcher.add(sample)          # samples from stored trajectories
    if (batch := batcher.next_batch()): stats = trainer.step(batch)
    packed = write_batch(store, prefix, seqs, world, ...)    # orchestrator: per-rank flat arrays
    runtime.step(packed.shares, packed.share_micro, packed.n_tokens)  # trainer: each rank its share
    await publish_version(ctx, write, meta)                  # aes_lib.weights: folder + PolicyVersion
    engine.load_state_dict(policy_tensors(store, pv.checkpoint), pv.version)  # rollout side

Several ranks (FSDP2): ``distributed`` (launch, sharding, rank 0 driving the others) and
``runtime`` (what each rank holds and does).
"""

import importlib

_EXPORTS = {
    # advantages
    "centred": "advantages",
    "has_signal": "advantages",
    # batcher
    "Batch": "batcher",
    "Batcher": "batcher",
    "Group": "batcher",
    # checkpoint
    "CheckpointError": "checkpoint",
    "folder_tensors": "checkpoint",
    "load_tensors": "checkpoint",
    "policy_tensors": "checkpoint",
    "publish_model": "checkpoint",
    "write_hf_folder": "checkpoint",
    # config
    "LearnerConfig": "config",
    "LearnerConfigError": "config",
    # head
    "LogprobHead": "head",
    "UnsupportedModelError": "head",
    "install_head": "head",
    # losses
    "Loss": "losses",
    "LossOutput": "losses",
    "LossParamsError": "losses",
    "UnknownLossError": "losses",
    "build_loss": "losses",
    "loss_class": "losses",
    "loss_names": "losses",
    "register_loss": "losses",
    # packing
    "PackFormatError": "packing",
    "PackedBatch": "packing",
    "read_rank_share": "packing",
    "write_batch": "packing",
    # policy
    "checkpoint_key": "policy",
    # samples
    "Sample": "samples",
    "TokenizedTurn": "samples",
    "TrajectoryFormatError": "samples",
    "turns_from_trajectory": "samples",
    # sequences
    "TrainSeq": "sequences",
    "pack_turns": "sequences",
    # trainer
    "DppoTrainer": "trainer",
    "StepStats": "trainer",
}
"""Public name -> the submodule that defines it. Imported on first use (PEP 562): most importers
want the config or a small helper, and the trainer and checkpoints bring in torch (seconds)."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
