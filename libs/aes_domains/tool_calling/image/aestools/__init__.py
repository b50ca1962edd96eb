"""aestools: a tiny typed-service framework for tool-calling tasks.

A task's service (/srv/service/service.py) declares typed methods with ``Service.method``;
``aes-tools-up`` runs it as root on 127.0.0.1, and the solver calls it with ``aes-call``.
The state lives in one root-only JSON file, so only calls can change it.
"""

from aestools.service import ADDRESS, CallError, Service
from aestools.types import TypeSpec

__all__ = ["ADDRESS", "CallError", "Service", "TypeSpec"]
