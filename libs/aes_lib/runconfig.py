"""A run's configuration as a whole: every settings class as a section of one TOML file.

``aes --config PATH`` (or ``AES_CONFIG``, or ``./aes.toml``) names the file and ``aes --set
section.key=value`` overrides it; ``activate`` puts both in the environment (so that every
process the command starts reads the same layers through ``aes_lib.config.read_settings``)
and checks the whole configuration at once, so a typo'd key or a wrong type fails at start
in one line. ``effective`` is what ``aes config show`` prints and what a run records.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import tomli_w

from aes_lib.agents.proposer.config import ProposerConfig
from aes_lib.config import (CONFIG_VAR, SET_VAR, Settings, SettingsError, config_file, config_path,
                            set_overrides, sourced, stack_settings)
from aes_lib.contamination.novelty import NoveltySettings
from aes_lib.domains import get as domain, names as domain_names
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.flywheel.experiment import ExperimentConfig
from aes_lib.flywheel.training import TrainingConfig
from aes_lib.learner.config import LearnerConfig
from aes_lib.review.audit import AuditSettings
from aes_lib.runners.attack import AttackSettings
from aes_lib.review.reviewer import ReviewSettings
from aes_lib.sandbox.strength import StrengthSettings
from aes_lib.tracking.config import MetricsConfig

REGISTRY: tuple[tuple[str, type], ...] = (
    ("Infrastructure, models and admission", Settings),
    ("Flywheel rounds", FlywheelConfig),
    ("Proposer", ProposerConfig),
    ("Review gate", ReviewSettings),
    ("Broken-or-hard audit", AuditSettings),
    ("Verifier-strength gate", StrengthSettings),
    ("Attacker gate", AttackSettings),
    ("Novelty gate", NoveltySettings),
    ("Training waves", TrainingConfig),
    ("Learner", LearnerConfig),
    *(entry for name in domain_names() for entry in domain(name).settings),  # e.g. [ask_human]
    ("Experiment tracking", MetricsConfig),
    ("Pools experiment", ExperimentConfig),
)
"""(heading, class) of every settings class: the class's ``section`` is its table in the
config file, ``<env_prefix><FIELD>`` its variables. A domain adds its own (``Domain.settings``)."""

SECRET_MARKERS = ("password", "secret", "api_key")
"""A field whose name contains one of these is shown and recorded as ``<redacted>`` when set."""
REDACTED = "<redacted>"


def sections() -> dict[str, type]:
    """Section name -> settings class."""
    return {cls.section: cls for _, cls in REGISTRY}  # type: ignore[attr-defined]


class Entry(NamedTuple):
    """One setting of the effective configuration."""

    section: str
    key: str
    value: object
    source: str
    """The config file's path, ``AES_<FIELD>``, ``--set``, ``stack.json`` or ``default``."""


def activate(config: Path | None = None, sets: Sequence[str] = ()) -> None:
    """Make ``config`` and ``sets`` this process's (and its children's) layers, then ``check``.

    ``sets`` add to those an ``AES_SET`` inherited from a parent ``aes`` already holds."""
    if config is not None:
        os.environ[CONFIG_VAR] = str(Path(config).resolve())
    if sets:
        inherited = json.loads(os.environ.get(SET_VAR) or "[]")
        os.environ[SET_VAR] = json.dumps([*inherited, *sets])
    check()


def check() -> None:
    """Raise the first error in the configuration: an unknown section or key, a value of the
    wrong type, or one its class refuses (each class's own error, one line naming it)."""
    known = sections()
    path = config_path()
    named = {**(config_file(path) if path else {}), **set_overrides()}
    for section in named:
        if section not in known:
            where = f"{path}" if path and section in config_file(path) else "--set"
            raise SettingsError(f"{where}: [{section}]: unknown section (sections: {', '.join(known)})")
    for cls in known.values():
        cls.from_env()


def _shown(key: str, value: object) -> object:
    if any(m in key for m in SECRET_MARKERS) and value:
        return REDACTED
    return str(value) if isinstance(value, Path) else value


def effective() -> list[Entry]:
    """Every setting's value in this process and where it came from (secrets redacted)."""
    entries: list[Entry] = []
    for section, cls in sections().items():
        instance = cls.from_env()
        layered = sourced(cls)
        stacked = stack_settings(instance.home) if cls is Settings else {}
        for f in dataclasses.fields(cls):
            value = getattr(instance, f.name)
            source = layered[f.name].source if f.name in layered else \
                "stack.json" if f.name in stacked else "default"
            entries.append(Entry(section, f.name, _shown(f.name, value), source))
    return entries


def as_tables(entries: Sequence[Entry]) -> dict[str, dict[str, object]]:
    """``entries`` as section -> key -> value (what a config file holds), less redacted secrets."""
    tables: dict[str, dict[str, object]] = {}
    for e in entries:
        if e.value == REDACTED:
            continue
        tables.setdefault(e.section, {})[e.key] = list(e.value) if isinstance(e.value, tuple) else e.value
    return tables


def to_toml(entries: Sequence[Entry], header: str = "") -> str:
    """``entries`` as a config file (which ``--config`` reads back to the same values)."""
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    return comment + tomli_w.dumps(as_tables(entries))
