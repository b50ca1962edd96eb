"""The JetStream layer every service stands on.

    async with await Bus.connect(settings) as bus:     # also the handler Context
        await bus.publish(subjects.ASSIGNMENT, assignment)
    await run_service(MyService(), settings)           # until SIGTERM

See ``runner`` for delivery semantics, ``client`` for publishing and reading back,
``deadletters`` for what the runner gave up on.
"""

from aes_lib.bus.client import Bus, History, connect
from aes_lib.bus.deadletters import DeadLetterError, StoredLetter
from aes_lib.bus.errors import BusAuthError, BusError, BusUnavailableError, UnknownSubjectError
from aes_lib.bus.runner import Backoff, consumer_config, dead_letter_subject, run_service, serve
from aes_lib.bus.streams import ensure_streams, stream_for

__all__ = [
    "Bus",
    "History",
    "connect",
    "DeadLetterError",
    "StoredLetter",
    "Backoff",
    "BusError",
    "BusAuthError",
    "BusUnavailableError",
    "UnknownSubjectError",
    "consumer_config",
    "dead_letter_subject",
    "ensure_streams",
    "run_service",
    "serve",
    "stream_for",
]
