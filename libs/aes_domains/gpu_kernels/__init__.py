"""GPU kernels: write a CUDA kernel (in Triton) that matches torch eager and is no slower.

Its tasks ask for a GPU (``[environment] gpus``) and build on ``aes-gpu-kernels:latest``
(torch with CUDA, Triton); where the Docker engine has no GPU runtime they are judged
``needs_gpu``, a fact about the machine, and bench/gpu_domain.sh validates them on a GPU host.
"""

from pathlib import Path

from aes_lib.domains.base import Domain

DOMAIN = Domain(
    name="gpu-kernels",
    title="GPU kernels",
    root=Path(__file__).parent,
    gate="aes_domains.gpu_kernels.gate:GpuKernelsGate",
    solver_prompt=("This container has an NVIDIA GPU and python3 with a CUDA build of torch and Triton. "
                   "Check your kernel's output against torch on several shapes and dtypes, and time it "
                   "against the eager version (torch.cuda.synchronize() before reading a clock): the first "
                   "call of a Triton kernel compiles it, so warm up first."),
)
