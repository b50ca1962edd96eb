"""Domains as plug-ins: terminal tasks and the others (software engineering, tool calling,
browser use, GPU kernels, ask_human). See ``base`` for what a domain declares."""

from aes_lib.domains.base import Domain, ToolSession, UnknownDomainError
from aes_lib.domains.registry import TERMINAL, domain_name, domain_of, get, names

__all__ = ["Domain", "TERMINAL", "ToolSession", "UnknownDomainError", "domain_name", "domain_of", "get", "names"]
