"""JetStream streams of the pipeline, created (or updated) from ``aes_proto.subjects.STREAMS``."""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from aes_proto.subjects import STREAMS

from aes_lib.bus.errors import UnknownSubjectError

DUPLICATE_WINDOW = 20 * 60.0
"""Seconds JetStream remembers a ``Nats-Msg-Id``: longer than any redelivery cycle
(``max_deliver`` x backoff), so a republished result after a crash is dropped."""


def _matches(pattern: str, subject: str) -> bool:
    p, s = pattern.split("."), subject.split(".")
    for i, tok in enumerate(p):
        if tok == ">":
            return len(s) > i
        if i >= len(s) or (tok != "*" and tok != s[i]):
            return False
    return len(p) == len(s)


def stream_for(subject: str) -> str:
    """Name of the stream that stores ``subject``."""
    for name, spec in STREAMS.items():
        if any(_matches(p, subject) for p in spec["subjects"]):
            return name
    raise UnknownSubjectError(f"no stream captures subject {subject!r}; add it to aes_proto.subjects.STREAMS")


def stream_config(name: str, replicas: int = 1) -> StreamConfig:
    spec = STREAMS[name]
    return StreamConfig(
        name=name,
        subjects=list(spec["subjects"]),
        retention=RetentionPolicy(spec["retention"]),
        storage=StorageType.FILE,
        duplicate_window=DUPLICATE_WINDOW,
        num_replicas=replicas,
    )


async def ensure_streams(js: JetStreamContext, replicas: int = 1) -> None:
    """Create every stream with ``replicas`` copies, or update its subjects (and replicas)
    if it already exists."""
    for name in STREAMS:
        config = stream_config(name, replicas)
        try:
            await js.stream_info(name)
        except NotFoundError:
            await js.add_stream(config)
        else:
            await js.update_stream(config)
