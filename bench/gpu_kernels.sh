#!/usr/bin/env bash
# One-shot GPU check of the Triton kernels, prepared for a lent H200 (`device` tool):
#   run(command="bash bench/gpu_kernels.sh", timeout_s=540)
# It uses the machine's own python3 (torch + triton with CUDA; nothing to install:
# the bench imports only torch, triton and kernels/aes_kernels from this tree),
# checks the fused kernels against the torch reference on the GPU (fp32 and bf16,
# values and gradients), times fused vs eager vs chunked torch at V = 151,936 and the
# DPPO loss kernel, and writes bench/results/kernels_gpu.md (copied to $OUT too, with
# the log), so the figures come back even if the run is cut short.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
log=${OUT:-/tmp}/kernels_gpu.log
mkdir -p bench/results
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$log"
$PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.cuda.is_available())" \
  2>&1 | tee -a "$log" || exit 1
timeout 480 $PY bench/kernels_bench.py --device cuda --out bench/results/kernels_gpu.md 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
[ -n "${OUT:-}" ] && cp bench/results/kernels_gpu.md "$OUT/" 2>/dev/null
echo "exit $rc"
exit "$rc"
