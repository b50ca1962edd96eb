"""The fault policy every stage follows, in one place.

- **Transient** faults belong to the infrastructure: the blob store unreachable, slow or
  answering with missing or garbled bytes for a reference it issued; the Docker daemon
  busy; the model endpoint failing (5xx, 429, timeouts); an I/O step past its deadline.
  The handler raises, the runner redelivers the message with backoff, and the candidate
  never gets a verdict from it. Retries exhausted: the message goes to the dead-letter
  stream with ``fault="transient"`` and can be replayed (``aes dlq replay``).
- **Permanent** faults belong to the candidate: bundle bytes that do not unpack, an
  ``env_id`` that is not the bundle's sha256. They are verdicts (``invalid_bundle``).
- **Malformed messages** (bytes that do not decode) are dead-lettered at once.
- Anything else is a bug: retried like a transient fault, then dead-lettered as ``error``.

Every blocking I/O step runs through ``call`` with a deadline, and every delivery runs
within its stage's ``Service.budget``; a step or delivery past its time is cancelled
and redelivered, so a hung mount or a wedged daemon cannot stall a stage.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from collections.abc import Callable
from typing import Literal, TypeVar

import docker.errors
import httpx
import minio.error
import nats.errors
import requests.exceptions
import urllib3.exceptions

from aes_lib.blobstore.errors import BlobCorruptError, BlobNotFoundError

T = TypeVar("T")
Fault = Literal["transient", "error"]


class TransientError(Exception):
    """An infrastructure fault a later attempt may not meet; never a verdict on a candidate.

    An error class of a module this one must not import (it sits below them all) says the same
    with a class attribute ``transient = True`` (the model client's ``ModelUnavailableError``)."""

    transient = True


class DeadlineExceeded(TransientError):
    """An I/O step ran past its deadline (its thread may still be blocked)."""


_S3_TRANSIENT = {"InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout", "503", "500"}
_TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
    # A reference the pipeline itself issued no longer reads back: the store lost or
    # garbled it (or is mid-restart). The proposer is not at fault.
    BlobNotFoundError,
    BlobCorruptError,
    ConnectionError,
    TimeoutError,
    asyncio.TimeoutError,
    urllib3.exceptions.HTTPError,
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    httpx.TransportError,
    nats.errors.TimeoutError,
    nats.errors.ConnectionClosedError,
    nats.errors.NoServersError,
    nats.errors.NoRespondersError,
)


def classify(exc: BaseException) -> Fault:
    """``transient`` for infrastructure faults (see the module docstring), else ``error``."""
    for e in _chain(exc):
        if getattr(type(e), "transient", False) is True or isinstance(e, _TRANSIENT_TYPES):
            return "transient"
        if isinstance(e, docker.errors.APIError) and not isinstance(e, docker.errors.NotFound):
            if e.status_code is None or e.status_code >= 500 or e.status_code == 429:
                return "transient"
        if isinstance(e, minio.error.S3Error) and e.code in _S3_TRANSIENT:
            return "transient"
        if isinstance(e, minio.error.ServerError):
            return "transient"
    return "error"


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its explicit causes (``raise ... from e``): a wrapped connection error is
    still one, while an error merely raised during another's handling is judged alone."""
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out:
        out.append(cur)
        cur = cur.__cause__
    return out


class _Stuck:
    """Threads still blocked after their deadline, by description (reported by health)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[int, str] = {}

    def add(self, key: int, what: str) -> None:
        with self._lock:
            self._calls[key] = what

    def discard(self, key: int) -> None:
        with self._lock:
            self._calls.pop(key, None)

    def snapshot(self) -> list[str]:
        with self._lock:
            return list(self._calls.values())


STUCK = _Stuck()

# Blocking I/O runs in its own pool: threads wedged on a hung mount must not starve the
# default executor that everything else (unpacking, Docker calls) shares.
_IO_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="aes-io")


async def call(fn: Callable[..., T], *args: object, deadline: float, what: str) -> T:
    """``fn(*args)`` in an I/O thread; ``DeadlineExceeded`` after ``deadline`` seconds.

    Python cannot kill the thread: it stays in ``STUCK`` until the call returns, and
    ``aes health`` reports it. The caller is free at once.
    """
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(_IO_POOL, functools.partial(fn, *args))
    try:
        return await asyncio.wait_for(asyncio.shield(future), deadline)
    except asyncio.TimeoutError:
        _abandon(future, what)
        raise DeadlineExceeded(f"{what}: no answer within {deadline:g}s") from None
    except asyncio.CancelledError:  # the delivery's budget ran out first
        _abandon(future, what)
        raise


def _abandon(future: asyncio.Future, what: str) -> None:
    """Count a call nobody waits for any more until its thread returns."""
    if future.done():
        return
    key = id(future)
    STUCK.add(key, what)
    future.add_done_callback(lambda _f: STUCK.discard(key))
    future.add_done_callback(_consume)


def _consume(future: asyncio.Future) -> None:
    """Retrieve a late result or error so asyncio does not log it as never retrieved."""
    if not future.cancelled():
        future.exception()
