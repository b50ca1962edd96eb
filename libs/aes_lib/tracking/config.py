"""Experiment-tracking settings (``[metrics]`` in the config file, ``AES_METRICS_*`` variables)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from aes_lib.config import DOC_DEFAULT, SettingsError, read_settings


@dataclasses.dataclass(frozen=True)
class MetricsConfig:
    """Where the ``metrics`` service writes the run's curves."""

    env_prefix: ClassVar[str] = "AES_METRICS_"
    section: ClassVar[str] = "metrics"
    backends: tuple[str, ...] = ("tensorboard",)
    """Registered tracking backends (``aes_lib.tracking.backends``) that get every series:
    ``tensorboard``, ``wandb`` (offline unless ``WANDB_MODE`` says otherwise), ``mlflow``."""
    log_dir: str = dataclasses.field(default="", metadata={DOC_DEFAULT: "<AES_HOME>/tracking"})
    """Folder of the run's event files, offline W&B runs and MLflow store; empty: ``<AES_HOME>/tracking``."""
    project: str = "autoenvscaling"
    """W&B project and MLflow experiment name."""
    run_name: str = ""
    """Name of the run in W&B and MLflow; empty: the name of ``AES_HOME``'s folder."""
    mlflow_uri: str = ""
    """MLflow tracking URI (``http://...``, ``sqlite:///...``); empty: a file store under ``log_dir``."""

    @classmethod
    def from_env(cls) -> "MetricsConfig":
        return cls(**read_settings(cls, SettingsError))  # type: ignore[arg-type]
