"""The paper's two non-agentic baselines.

Prompt: one model call writes every file of the task (``files.py`` format);
nothing is executed. Prompt + Env Feedback: the files are validated (build,
oracle, empty solution) and the failure's logs go back to the model for up to
``max_revisions`` more attempts.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from aes_lib.agents.limits import cut_notice
from aes_lib.agents.proposer.files import FileFormatError, UnsafeFilePathError, format_files, parse_files, write_files
from aes_lib.agents.proposer.proposal import Proposal
from aes_lib.agents.proposer.workspace import INSTRUCTIONS, TEMPLATE, assignment_text, install_verifier
from aes_lib.agents.trajectory import record_chat, store_trajectory
from aes_lib.bundle import BundleError, pack, unpack
from aes_lib.models import ChatClient, ModelError
from aes_lib.domains.validation import validate_in_domain
from aes_lib.sandbox import ValidationReport
from aes_lib.text import truncate
from aes_proto.messages import Assignment, BlobRef
from aes_proto.trajectory import Trajectory

SYSTEM_PROMPT = """You design tasks (training environments) for a terminal agent.
Reply with every file of one task, each in this exact format and nothing else between files:

=== FILE: <path relative to the task directory> ===
<file contents>
=== END ===

Required: instruction.md, task.toml, environment/Dockerfile, solution/solve.sh, and at least one
tests/test_*.py (pytest). Do not write tests/test.sh: the harness adds the managed verifier."""


@dataclass(frozen=True)
class BaselineLimits:
    """Budgets of one Prompt / Prompt + Env Feedback generation."""

    max_tokens: int = 2048
    """Completion tokens per model call."""
    temperature: float = 0.7
    max_revisions: int = 2
    """Feedback mode: revisions after the first attempt (0 makes it the Prompt baseline plus a check)."""
    max_log_chars: int = 3000
    """Validation log returned to the model per revision."""


def _example() -> str:
    files = {str(p.relative_to(TEMPLATE)): p.read_text() for p in sorted(TEMPLATE.rglob("*"))
             if p.is_file() and "__pycache__" not in p.parts}  # bytecode a local compileall left
    return format_files(files)


def parent_view(parent_dir: Path, max_chars: int = 2500, data_lines: int = 5) -> str:
    """The parent's files in the reply format, bounded for a small context: data files
    under environment/ show only their first lines, long files their head and tail."""
    files: dict[str, str] = {}
    for p in sorted(parent_dir.rglob("*")):
        rel = str(p.relative_to(parent_dir))
        if not p.is_file() or rel == "tests/test.sh":  # the managed verifier is always the same
            continue
        text = p.read_text(errors="replace")
        if rel.startswith("environment/") and rel != "environment/Dockerfile":
            head = "\n".join(text.splitlines()[:data_lines])
            text = f"{head}\n[... data file, {p.stat().st_size} bytes in all ...]"
        files[rel] = truncate(text, max_chars)
    return format_files(files)


_AIM = "Aim for a task the current solver solves"
_BLIND = ("You see no results of the current solver this round (the parent has none yet), so you cannot aim "
          "at its pass rate: write a task of moderate difficulty, several steps with every requirement stated.")


def guide(a: Assignment) -> str:
    """The guide without the agentic workspace the one-shot modes do not have (``## Your workspace``
    on); without a pass rate on the parent they are not told to aim at a band they cannot see."""
    text = INSTRUCTIONS.read_text().split("## Your workspace")[0]
    if a.pass_rate is not None:
        return text
    return "\n\n".join(_BLIND if p.startswith(_AIM) else p for p in text.split("\n\n"))


def first_prompt(a: Assignment, parent_dir: Path | None, previous_dir: Path | None = None, *,
                 revisions: int = 0) -> str:
    """The guide (``guide``), the assignment, the parent and previous candidate inline, and the
    template in the reply format; ``revisions`` (feedback mode): how often a failed check comes
    back for another attempt."""
    parts = [guide(a), assignment_text(a, inline=True)]
    if parent_dir is not None:
        parts.append("## The parent task\n" + parent_view(parent_dir))
    if previous_dir is not None:  # a revision: the rejected candidate the feedback is about
        parts.append("## Your previous candidate\n" + parent_view(previous_dir))
    parts.append("## The template (a trivial task, in the reply format; the harness adds tests/test.sh)\n"
                 + _example())
    if revisions:
        parts.append(f"Your files will be built and checked (the reference solution must score 1.0, doing "
                     f"nothing below 0.5). If a check fails you get its log and may reply with all files "
                     f"again, up to {revisions} times.")
    parts.append("Now write the new task's files.")
    return "\n\n".join(parts)


async def _attempt(client: ChatClient, traj: Trajectory, limits: BaselineLimits, out: Path) -> tuple[Path | None, str]:
    """One model call; the task written to ``out`` or the reason it was not."""
    try:
        chat = await client.chat(traj.messages, max_tokens=limits.max_tokens, temperature=limits.temperature)
    except ModelError as e:
        traj.error = str(e)
        return None, "model_error"
    record_chat(traj, chat)
    try:
        files = parse_files(chat.text)
    except (FileFormatError, UnsafeFilePathError) as e:
        traj.format_errors += 1
        traj.turns[-1].format_error = True
        traj.turns[-1].output = str(e)
        if chat.finish_reason == "length":
            return None, "format_error: " + cut_notice(
                limits.max_tokens, "Keep every file short: fewer and smaller files, data generated by a script, "
                "no text between files.")
        return None, f"format_error: {e}"
    shutil.rmtree(out, ignore_errors=True)
    write_files(files, out)
    install_verifier(out)
    return out, ""


async def _rounds(client: ChatClient, traj: Trajectory, mode: str, images, limits: BaselineLimits,
                  out: Path) -> tuple[Path | None, ValidationReport | None, str]:
    """The attempts: the last task written (or None), its validation (feedback mode) and the
    last attempt's failure."""
    task_dir: Path | None = None
    report: ValidationReport | None = None
    failure = ""
    for _ in range(1 + (limits.max_revisions if mode == "feedback" else 0)):
        written, why = await _attempt(client, traj, limits, out)
        if written is None:
            failure = why.split(":")[0]
            if why == "model_error":
                break
            feedback = f"Your reply could not be used: {why}\nReply with all files again."
        else:
            failure, task_dir = "", written
            if mode == "prompt":
                break
            report = await validate_in_domain(written, images)
            if report.ok:
                break
            feedback = (f"Validation failed: {report.reason}: {report.detail}\n"
                        f"{truncate(report.logs, limits.max_log_chars)}\nFix the task and reply with all files again.")
        traj.turns[-1].output = feedback if traj.turns else ""
        traj.messages.append({"role": "user", "content": feedback})
    return task_dir, report, failure


async def _unpacked(store, ref: BlobRef | None, dest: Path) -> Path | None:
    if ref is None:
        return None
    await asyncio.to_thread(unpack, await asyncio.to_thread(store.get_bytes, ref), dest)
    return dest


async def generate(
    a: Assignment,
    client: ChatClient,
    store,
    *,
    mode: str,
    images=None,
    limits: BaselineLimits = BaselineLimits(),
) -> Proposal:
    """``mode`` ``prompt`` (one call) or ``feedback`` (validate and revise; needs ``images``).
    The parent and, for a revision, the previous candidate come from ``store``; the trajectory goes there."""
    if mode not in ("prompt", "feedback"):
        raise ValueError(f"baseline mode must be prompt or feedback, got {mode!r}")
    traj = Trajectory(rollout_id=uuid.uuid4().hex, role="proposer", env_id=a.lineage.parent_env_id or "", model=client.model)
    packed = None
    with tempfile.TemporaryDirectory(prefix=f"aes-{mode}-") as tmp:
        parent_dir = await _unpacked(store, a.parent_bundle, Path(tmp) / "parent")
        previous_dir = await _unpacked(store, a.previous_bundle, Path(tmp) / "previous")
        traj.instruction = first_prompt(a, parent_dir, previous_dir,
                                        revisions=limits.max_revisions if mode == "feedback" else 0)
        traj.messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": traj.instruction}]
        task_dir, report, failure = await _rounds(client, traj, mode, images, limits, Path(tmp) / "task")
        traj.stop_reason = "submitted" if task_dir else (failure or "format_error")
        if task_dir is not None:
            try:
                packed = await asyncio.to_thread(pack, task_dir)
            except BundleError as e:
                failure = "invalid_bundle"
                traj.error = f"{type(e).__name__}: {e}"
    ref = await asyncio.to_thread(store_trajectory, store, traj)
    return Proposal(traj, ref, packed, failure="" if packed else failure, report=report)
