"""A stable bootstrap address in front of brokers that come and go (the Spark-hosted
cluster's executors): every connection a client opens here is piped, byte for byte, to one
live broker, so ApiVersions, Metadata (which lists the live brokers at their own
addresses) and whatever else a client sends first are answered by a real broker. Clients
then talk to the brokers directly; only bootstrap and metadata refreshes pass through here.

Invariant: a connection is never answered by the proxy itself: it is piped to a broker
from the current list (round robin, the next one when a broker refuses), or closed when
none accepts, which a Kafka client treats as a broker to retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

__all__ = ["BootstrapProxy"]

log = logging.getLogger(__name__)

_CHUNK = 65536
_CONNECT_TIMEOUT_S = 5.0


class BootstrapProxy:
    """Listens on ``host:port`` (0: any free port) and pipes connections to ``brokers``
    (host, port), a list the owner replaces as brokers register and go."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self._port = port
        self.brokers: Sequence[tuple[str, int]] = ()
        self._next = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        if self._server is None:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self._port,
                                                  reuse_address=True)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        try:
            upstream = await self._connect()
            if upstream is None:
                log.warning("bootstrap: no live broker accepts connections; closing the client's")
                return
            up_reader, up_writer = upstream
            pipes = [asyncio.create_task(_pipe(reader, up_writer)),
                     asyncio.create_task(_pipe(up_reader, writer))]
            try:
                # a Kafka connection is over when either side closes it
                await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pipe in pipes:
                    pipe.cancel()
                await asyncio.gather(*pipes, return_exceptions=True)
                up_writer.close()
        finally:
            writer.close()
            self._pipes.discard(task)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        brokers = list(self.brokers)
        for i in range(len(brokers)):
            host, port = brokers[(self._next + i) % len(brokers)]
            try:
                conn = await asyncio.wait_for(asyncio.open_connection(host, port),
                                              _CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError):
                continue
            self._next = (self._next + i + 1) % len(brokers)
            return conn
        return None


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy until ``src`` ends or either side fails."""
    with contextlib.suppress(OSError):
        while data := await src.read(_CHUNK):
            dst.write(data)
            await dst.drain()
