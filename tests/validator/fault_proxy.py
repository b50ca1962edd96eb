"""A TCP proxy a test can stall: every byte between client and server waits while it is held.

Put in front of the real S3 server, it turns reads into hung reads (a wedged mount or
a frozen storage node) without touching the server the rest of the session uses.
"""

from __future__ import annotations

import asyncio
import contextlib


class StallingProxy:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> "StallingProxy":
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.flowing.set()
        assert self._server is not None
        self._server.close()

    def stall(self) -> None:
        self.flowing.clear()

    def release(self) -> None:
        self.flowing.set()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(1 << 16):
                await self.flowing.wait()
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()
