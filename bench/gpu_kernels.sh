#!/usr/bin/env bash
# One-shot GPU check of the Triton kernels and the learner, prepared for a lent H200 (`device` tool):
#   run(command="bash bench/gpu_kernels.sh", timeout_s=600)
# It uses the machine's own python3 (torch + triton with CUDA + transformers; nothing to
# install: the benches import only those and libs/, proto/, kernels/ from this tree).
# 1. bench/kernels_bench.py: checks the fused kernels against the torch reference on the GPU
#    (fp32 and bf16, values and gradients), times fused vs eager vs chunked torch at
#    V = 151,936 and the DPPO loss kernel -> bench/results/kernels_gpu.md.
# 2. bench/gpu_learner.py: the learner's FSDP2 step (1 rank, nccl; activation checkpointing;
#    fp32 master weights, fp32 and bf16 compute) on a random-init ~0.5B Qwen2 (vocab 151,936)
#    with kernel_backend triton vs torch: the backends' first-step losses must agree; tokens/s
#    and peak memory; then the HF-format export, reloaded -> bench/results/learner_gpu.md.
#    Dry run here: python bench/gpu_learner.py --device cpu --tiny
# Each part has its own timeout; logs and results are copied to $OUT as they finish, so the
# figures come back even if the run is cut short. Exit status: the first failing part's.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
log=${OUT:-/tmp}/kernels_gpu.log
llog=${OUT:-/tmp}/learner_gpu.log
mkdir -p bench/results
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$log"
$PY -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())" \
  2>&1 | tee -a "$log" || exit 1
timeout ${KERNELS_TIMEOUT:-300} $PY bench/kernels_bench.py --device cuda --out bench/results/kernels_gpu.md 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
[ -n "${OUT:-}" ] && cp bench/results/kernels_gpu.md "$OUT/" 2>/dev/null
echo "kernels_bench exit $rc" | tee -a "$log"
timeout ${LEARNER_TIMEOUT:-240} $PY bench/gpu_learner.py --device cuda --out bench/results/learner_gpu.md 2>&1 | tee "$llog"
lrc=${PIPESTATUS[0]}
[ -n "${OUT:-}" ] && cp bench/results/learner_gpu.md "$OUT/" 2>/dev/null
echo "gpu_learner exit $lrc" | tee -a "$llog"
[ "$rc" -eq 0 ] && rc=$lrc
echo "exit $rc"
exit "$rc"
