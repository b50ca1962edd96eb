"""What a service is: an async handler of one decoded message, and nothing more.

The bus runner (``aes_lib.bus``) owns everything else: the durable pull consumer
shared by replicas, ack after success, redelivery with backoff, dead-lettering,
in-progress heartbeats for long handlers, tracing and graceful drain.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Generic, Protocol, TypeVar

from aes_proto.messages import Message

if TYPE_CHECKING:
    from nats.js import JetStreamContext

    from aes_lib.blobstore import BlobStore
    from aes_lib.config import Settings

M = TypeVar("M", bound=Message)


class Context(Protocol):
    """What a handler may touch besides its message."""

    settings: "Settings"
    blobs: "BlobStore"
    js: "JetStreamContext"
    """For reading stream and consumer state (route checks); publish through ``publish``."""

    async def publish(self, subject: str, msg: Message) -> None:
        """Publish with ``Nats-Msg-Id = msg.idempotency_key`` and the current trace context."""

    async def kv(self, bucket: str):  # -> nats.js.kv.KeyValue
        """A JetStream key-value bucket, created on first use."""


class Service(abc.ABC, Generic[M]):
    """Subclass, set the three class variables, implement ``handle``."""

    name: ClassVar[str]
    """Durable consumer name; replicas with the same name share the work."""
    subject: ClassVar[str]
    """Subject consumed (a constant from ``aes_proto.subjects``)."""
    message_type: ClassVar[type[Message]]
    """Type the runner decodes each message into before calling ``handle``."""
    max_deliver: ClassVar[int] = 5
    """Deliveries before a failing message goes to the dead-letter subject."""
    ack_wait: ClassVar[float] = 30.0
    """Seconds without ack or heartbeat before redelivery (the runner heartbeats)."""
    concurrency: ClassVar[int] = 1
    """Messages handled at once by one replica."""
    budget: ClassVar[float] = 600.0
    """Seconds one delivery may run before the runner cancels it and redelivers the message
    (``AES_BUDGETS`` overrides it per service); the heartbeat never extends a delivery past it."""
    decides: ClassVar[bool] = False
    """Whether this stage, last on an admission route, ends a candidate's trip with a final
    result (the calibrator). A route must end on a stage that decides."""

    async def setup(self, ctx: Context) -> None:
        """Called once before the first message (load indexes, models...)."""

    async def teardown(self) -> None:
        """Called once after the last delivery was settled (flush, close or stop what ``setup`` opened)."""

    def companions(self) -> Sequence[Service]:
        """Services run beside this one, in its process and on its connection, started after its
        ``setup`` and stopped with it: one process consuming several subjects shares its state
        (the metrics service's tracking runs)."""
        return ()

    @abc.abstractmethod
    async def handle(self, msg: M, ctx: Context) -> None:
        """Do the work; raise to have the message redelivered."""
