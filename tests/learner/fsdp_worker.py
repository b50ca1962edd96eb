"""One rank of the FSDP2 equivalence test (run by torchrun; not a test module).

``fsdp_worker.py OUT CASE=MODEL_DIR...``: rank 0 drives the others through ``Ranks`` as the
learner service does: for each case, build the sharded model, one DPPO step on
``helpers.dppo_batch`` packed into one share per rank (a file store under OUT) as the
orchestrator packs it, export the updated weights as an HF folder
(``OUT/CASE/hf``), save the training state (``OUT/CASE/state``); the stats go to
``OUT/CASE/stats.json``. Case names pick the settings: ``*-bf16`` computes in bf16 with
activation checkpointing.
"""

import json
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import torch.distributed as dist  # noqa: E402

from aes_lib.blobstore import open_store  # noqa: E402
from aes_lib.learner import LearnerConfig, write_batch  # noqa: E402
from aes_lib.learner.distributed import Ranks, init_ranks  # noqa: E402
from aes_lib.learner.runtime import LearnerRuntime  # noqa: E402
from aes_lib.learner.trainer import batch_sequences  # noqa: E402
from helpers import dppo_batch  # noqa: E402


def config(case: str) -> LearnerConfig:
    bf16 = case.endswith("-bf16")
    return LearnerConfig(lr=1e-2, kernel_backend="torch", micro_batch_tokens=48, seed=0,
                         param_dtype="bfloat16" if bf16 else "float32", activation_checkpointing=bf16)


def main() -> None:
    out = Path(sys.argv[1])
    cases = dict(a.split("=", 1) for a in sys.argv[2:])
    init_ranks(LearnerConfig())
    ranks, rt = Ranks(), LearnerRuntime(open_store(f"file://{out.resolve()}/store"))
    if dist.get_rank():
        ranks.follow(rt)
        return
    for case, model_dir in cases.items():
        ranks.call(rt, "build", config(case), model_dir)
        cfg = config(case)
        packed = write_batch(rt.store, case, batch_sequences(dppo_batch(), cfg.merge_turns), ranks.world,
                             cfg.micro_batch_tokens)
        stats = ranks.call(rt, "step", packed.shares, packed.share_micro, packed.n_tokens)
        ranks.call(rt, "export", str(out / case / "hf"))
        ranks.call(rt, "save", str(out / case / "state"))
        (out / case / "stats.json").write_text(json.dumps(asdict(stats)))
    ranks.stop()


if __name__ == "__main__":
    main()
    dist.destroy_process_group()
