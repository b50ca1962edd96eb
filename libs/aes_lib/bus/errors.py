"""One exception type per way reaching the bus can fail."""

from __future__ import annotations


class BusError(Exception):
    """Base of every bus error."""


class BusAuthError(BusError):
    """The server refused the credentials (or their absence)."""


class BusUnavailableError(BusError):
    """No NATS server answered at the configured URL."""


class UnknownSubjectError(BusError):
    """A subject that no stream in ``aes_proto.subjects.STREAMS`` captures."""
