"""Experiment tracking: the run's series (``series``) written to every configured backend
(``backends``) by the ``metrics`` service (``aes_services.metrics``)."""

from __future__ import annotations

from aes_lib.tracking.backends import BACKENDS, Backend, Run, open_backends, register
from aes_lib.tracking.config import MetricsConfig

__all__ = ["BACKENDS", "Backend", "MetricsConfig", "Run", "open_backends", "register"]
