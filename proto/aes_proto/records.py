"""Records kept in JetStream key-value buckets (state, not events), beside the streams.

A bucket is shared state with one writer per key; readers tolerate a missing key.
"""

from __future__ import annotations

import msgspec

HEALTH_BUCKET = "aes_health"
"""One ``ServiceHealth`` per running replica, keyed ``<service>.<host>-<pid>``."""


class Overrun(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """One delivery cancelled because it ran past its stage budget."""

    at: float
    """Unix time of the cancellation."""
    subject: str
    sequence: int
    """Stream sequence of the message (redelivered, or dead-lettered on its last delivery)."""
    budget: float
    """Seconds allowed."""


class ServiceHealth(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """What a replica's runner says about itself, rewritten on every change and every minute."""

    service: str
    host: str
    pid: int
    updated_at: float
    handled: int = 0
    """Deliveries settled (acked, redelivered or dead-lettered) since start."""
    overruns: int = 0
    """Deliveries cancelled past the budget since start."""
    last_overrun: Overrun | None = None
    stuck_io: tuple[str, ...] = ()
    """Blocking I/O calls past their deadline whose threads have not returned yet."""
    dead_lettered: int = 0
