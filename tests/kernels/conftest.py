"""Kernel tests run the Triton kernels on the CPU through the Triton interpreter.

The variable must be set before ``triton.jit`` decorates the kernels, i.e. before
``aes_kernels.fused_logprob`` / ``aes_kernels.dppo_loss`` are first imported
(``aes_kernels`` itself imports them lazily).
"""

import os

os.environ["TRITON_INTERPRET"] = "1"
