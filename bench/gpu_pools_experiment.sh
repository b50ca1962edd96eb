#!/usr/bin/env bash
# One-shot pools experiment on a lent GPU (an H200: `device` tool), in process, on issue 48's
# ladder by default (POOLS_SHAPE=ladder: static, oracle-frontier, weighted, flywheel and blind;
# bench/results/ladder_plan.md is the plan; POOLS_SHAPE=default: part 1's echo-words setting),
# a small random-init SmolLM2-shaped policy (bench/gpu_pools_experiment.py says what is the
# project's and what is not; its scorer is in process, not the Docker verifier).
# The machine has torch, transformers and pytest but no msgspec and no network, so the base
# model's config and tokenizer (3.5 MB, no weights) travel with the tree. Here, once:
#   python bench/gpu_pools_experiment.py --export-base bench/.carry/smollm2-base
# then:
#   run(command="bash bench/gpu_pools_experiment.sh", carry=["bench/.carry"], timeout_s=540)
# Seeds run until --budget-s (420 s); the record says how many ran. Writes
# bench/results/pools_experiment_gpu.md (.json, .png) and copies them and the log to $OUT.
# Dry run here: python bench/gpu_pools_experiment.py --device cpu --tiny
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
BASE=${BASE:-bench/.carry/smollm2-base}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
log=${OUT:-/tmp}/pools_experiment_gpu.log
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$log"
$PY -c "import torch, transformers, pytest; assert torch.cuda.is_available(), 'torch sees no CUDA device'; print('torch', torch.__version__, 'transformers', transformers.__version__)" \
  2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "this python lacks torch with CUDA, transformers or pytest: set PYTHON=" | tee -a "$log"; exit 1; }
[ -f "$BASE/tokenizer.json" ] || { echo "no $BASE/tokenizer.json: export it here with --export-base and carry bench/.carry" | tee -a "$log"; exit 1; }
timeout "${POOLS_TIMEOUT:-500}" $PY bench/gpu_pools_experiment.py --device cuda --base "$BASE" \
  --shape "${POOLS_SHAPE:-ladder}" --budget-s "${POOLS_BUDGET_S:-420}" --out bench/results/pools_experiment_gpu.md 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
[ -n "${OUT:-}" ] && cp bench/results/pools_experiment_gpu.{md,json,png} "$OUT/" 2>/dev/null
echo "exit $rc" | tee -a "$log"
exit "$rc"
