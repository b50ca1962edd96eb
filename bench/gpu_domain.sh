#!/usr/bin/env bash
# One-shot check of the gpu-kernels domain's seeds on a GPU host (a lent H200: `device` tool):
#   run(command="bash bench/gpu_domain.sh", timeout_s=420)
# For each seed in libs/aes_domains/gpu_kernels/seeds: the reference solution must score
# 1.0 and the do-nothing agent exactly 0, with the kernel timed against torch eager in the same
# run. With a Docker engine that has an NVIDIA runtime it also runs `aes validate` on them;
# without one (the usual lent machine) the seeds run bare, their /app remapped to a temp root
# (bench/gpu_domain.py). Uses the machine's python3 (torch with CUDA, triton, pytest; nothing
# to install). Prints a table; writes bench/results/gpu_domain.json (and a copy to $OUT).
# Under 5 minutes: each trial is capped (--timeout), and so is the docker part.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/libs:$PWD/proto:$PWD/services${PYTHONPATH:+:$PYTHONPATH}"
log=${OUT:-/tmp}/gpu_domain.log
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$log"
$PY -c "import torch, triton, pytest; assert torch.cuda.is_available(), 'torch sees no CUDA device'; print('torch', torch.__version__, 'triton', triton.__version__, 'pytest', pytest.__version__)" \
  2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "this python lacks torch with CUDA, triton or pytest: set PYTHON=" | tee -a "$log"; exit 1; }
timeout "${GPU_DOMAIN_TIMEOUT:-280}" $PY bench/gpu_domain.py --timeout 120 --docker-timeout "${DOCKER_TIMEOUT:-120}" 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
[ -n "${OUT:-}" ] && cp bench/results/gpu_domain.json "$OUT/" 2>/dev/null
echo "exit $rc" | tee -a "$log"
exit "$rc"
