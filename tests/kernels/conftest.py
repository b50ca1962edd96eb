"""Kernel tests run the Triton kernels on the CPU through the Triton interpreter.

``triton.jit`` reads ``TRITON_INTERPRET`` when it decorates a kernel, so the kernel
modules are imported here with it set; the variable is then restored so that other
test folders in the same run keep the dispatcher's CPU choice (the torch
reference), and set again around each kernel test for the dispatcher tests.
"""

import os

import pytest

_previous = os.environ.get("TRITON_INTERPRET")
os.environ["TRITON_INTERPRET"] = "1"
import aes_kernels.dppo_loss  # noqa: E402,F401
import aes_kernels.fused_logprob  # noqa: E402,F401

if _previous is None:
    del os.environ["TRITON_INTERPRET"]
else:
    os.environ["TRITON_INTERPRET"] = _previous


@pytest.fixture(autouse=True)
def triton_interpret(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
