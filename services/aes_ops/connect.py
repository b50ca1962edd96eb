"""A command's one connection to the stack: ``fn`` runs on the bus (and the pool through it),
which is closed when it returns or raises."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from aes_lib.bus import Bus
from aes_lib.config import Settings
from aes_lib.flywheel.config import FlywheelConfig
from aes_lib.runners.pool_store import BUCKET, PoolStore

T = TypeVar("T")


async def with_bus(name: str, fn: Callable[[Bus], Awaitable[T]], settings: Settings | None = None) -> T:
    """``fn(bus)`` on a connection named ``name`` (settings: the environment's by default)."""
    async with await Bus.connect(settings or Settings.from_env(), name=name) as bus:
        return await fn(bus)


async def with_pool(name: str, fn: Callable[[Bus, PoolStore], Awaitable[T]], settings: Settings | None = None) -> T:
    """``fn(bus, pool)``: the pool's store as the configured capacity bounds it."""

    async def go(bus: Bus) -> T:
        return await fn(bus, PoolStore(await bus.kv(BUCKET), FlywheelConfig.from_env().pool_capacity))

    return await with_bus(name, go, settings)
