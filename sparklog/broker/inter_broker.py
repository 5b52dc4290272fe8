"""Requests one broker sends another on its own account (the transaction coordinator's
WriteTxnMarkers, a partition leader's KIP-890 AddPartitionsToTxn verify): one connection
per destination broker, opened on first use at the address the metadata gives for it and
opened again after it broke.

The replica fetchers keep their own connections (one per leader, owned by each fetcher
task), so a slow fetch never queues behind these requests or the other way round.
Connections carry several requests at once (correlation ids), so callers need no queue of
their own; a broken connection fails every request on it and is dropped, and the next
request opens a new one. The connection to a broker that gets fenced is dropped at once
(``disconnect``): what waits on it is retried at the partitions' new leaders.
"""

from __future__ import annotations

import asyncio
import logging

from sparklog.broker.metadata_cache import MetadataCache
from sparklog.client.connection import BrokerConnection, KafkaConnectionError, send_request
from sparklog.protocol.schema import TopLevel

log = logging.getLogger(__name__)

__all__ = ["InterBrokerClients"]


class InterBrokerClients:
    """This broker's connections to the others; ``request_timeout_ms`` bounds each
    request (``KafkaTimeoutError`` after it, and the connection is dropped)."""

    def __init__(self, node_id: int, metadata: MetadataCache, request_timeout_ms: int) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.request_timeout_ms = request_timeout_ms
        self._conns: dict[int, BrokerConnection] = {}
        self._opening: dict[int, asyncio.Lock] = {}
        self._closing: set[asyncio.Task[None]] = set()

    async def send(self, node_id: int, request: TopLevel, version: int) -> TopLevel:
        """``request`` to broker ``node_id``, its decoded response; raises
        ``KafkaConnectionError`` / ``KafkaTimeoutError`` / ``OSError`` when it cannot be
        reached."""
        conn = await self._connection(node_id)
        return await send_request(conn, request, version)

    async def _connection(self, node_id: int) -> BrokerConnection:
        lock = self._opening.setdefault(node_id, asyncio.Lock())
        async with lock:
            conn = self._conns.get(node_id)
            if conn is not None and conn.connected:
                return conn
            if conn is not None:
                await conn.close()
            broker = self.metadata.image.brokers.get(node_id)
            if broker is None or node_id not in self.metadata.live_brokers:
                raise KafkaConnectionError(f"broker {node_id} is not live in the metadata")
            conn = BrokerConnection(broker.host, broker.port,
                                    client_id=f"broker-{self.node_id}", node_id=node_id,
                                    request_timeout_ms=self.request_timeout_ms)
            await conn.connect()
            self._conns[node_id] = conn
            return conn

    def disconnect(self, node_id: int) -> None:
        """Drop the connection to a broker that left the cluster (fenced): requests
        waiting on it fail now, and are retried where the metadata then points, instead
        of at their timeout (a paused broker answers nothing)."""
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            task = asyncio.get_running_loop().create_task(conn.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        conns, self._conns = self._conns, {}
        for conn in conns.values():
            await conn.close()
