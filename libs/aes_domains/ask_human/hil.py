"""The three settings of one ask-human task, as in HiL-Bench: ``full_info`` (the withheld
details written into the instruction, no tool: the ceiling), ``ask_human`` (the instruction
as is, the tool on: what is measured) and ``incomplete`` (as is, no tool: the floor).
A task records its setting in ``task.toml`` (``[metadata] hil_setting``); none is ``ask_human``."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path
from typing import Literal

from aes_domains.ask_human.blockers import load_blockers

Setting = Literal["full_info", "ask_human", "incomplete"]
SETTINGS: tuple[Setting, ...] = ("full_info", "ask_human", "incomplete")
DEFAULT: Setting = "ask_human"
KEY = "hil_setting"


class UnknownSettingError(ValueError):
    """A setting none of ``SETTINGS`` names."""


def check_setting(value: object) -> Setting:
    if value not in SETTINGS:
        raise UnknownSettingError(f"[metadata] {KEY} must be one of {', '.join(SETTINGS)}, got {value!r}")
    return value  # type: ignore[return-value]


def setting_of(metadata: dict | None) -> Setting:
    """The setting a task's ``[metadata]`` records (``ask_human`` when none)."""
    return check_setting((metadata or {}).get(KEY, DEFAULT))


def derive(task_dir: Path, setting: str, dest_dir: Path) -> Path:
    """Write a copy of the task at ``task_dir`` to ``dest_dir`` (which must not exist) in
    ``setting``; returns ``dest_dir``. No model is involved: ``full_info`` appends each
    blocker's answer to the instruction as an explicit requirement."""
    setting = check_setting(setting)
    task_dir, dest_dir = Path(task_dir), Path(dest_dir)
    blockers = load_blockers(task_dir)  # a broken registry fails here, not in a half-written copy
    if dest_dir.exists():
        raise FileExistsError(f"{dest_dir} exists: derive writes a new task folder")
    shutil.copytree(task_dir, dest_dir, symlinks=True)
    if setting == "full_info":
        instruction = (dest_dir / "instruction.md").read_text(encoding="utf-8").rstrip()
        lines = "\n".join(f"- {b.answer}" for b in blockers)
        (dest_dir / "instruction.md").write_text(f"{instruction}\n\n## Further requirements\n\n{lines}\n",
                                                 encoding="utf-8")
    toml = dest_dir / "task.toml"
    toml.write_text(with_metadata(toml.read_text(encoding="utf-8"), KEY, setting), encoding="utf-8")
    return dest_dir


def with_metadata(text: str, key: str, value: str) -> str:
    """``task.toml`` text with ``[metadata] key = "value"`` set, the rest kept as written."""
    line = f"{key} = {json.dumps(value)}"
    lines = text.splitlines()
    header = next((i for i, l in enumerate(lines) if l.strip() == "[metadata]"), None)
    if header is None:
        lines += ["", "[metadata]", line]
    else:
        end = next((i for i in range(header + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        own = [i for i in range(header + 1, end) if re.match(rf"\s*{re.escape(key)}\s*=", lines[i])]
        if own:
            lines[own[0]] = line
        else:
            lines.insert(header + 1, line)
    out = "\n".join(lines) + "\n"
    if tomllib.loads(out).get("metadata", {}).get(key) != value:  # e.g. a dotted or inline metadata table
        raise ValueError(f"cannot set [metadata] {key} in this task.toml")
    return out
