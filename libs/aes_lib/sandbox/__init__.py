"""Docker sandbox: image build cache, limited containers, exec, copy, trials, reaper."""

from pathlib import Path

from aes_lib.sandbox.container import ExecResult, LimitCaps, Limits, Sandbox, SandboxError, SandboxVerdict
from aes_lib.sandbox.images import BuildFailedError, BuildTimeoutError, ImageCache, environment_hash
from aes_lib.sandbox.reaper import reap, reap_async
from aes_lib.sandbox.trial import (
    Agent,
    AgentOutcome,
    NopAgent,
    OracleAgent,
    RewardError,
    TrialFault,
    TrialResult,
    parse_reward,
    run_trial,
)
from aes_lib.sandbox.validation import ValidationReport, validate_task

VERIFIER_TEMPLATE = Path(__file__).parent / "verifier_template"
"""Folder with the managed verifier's test.sh (see its README.md)."""

__all__ = [
    "Agent", "AgentOutcome", "BuildFailedError", "BuildTimeoutError", "ExecResult", "ImageCache",
    "LimitCaps", "Limits", "NopAgent", "OracleAgent", "RewardError", "Sandbox", "SandboxError",
    "SandboxVerdict", "TrialFault", "TrialResult", "VERIFIER_TEMPLATE", "ValidationReport", "environment_hash", "parse_reward",
    "reap", "reap_async", "run_trial", "validate_task",
]
