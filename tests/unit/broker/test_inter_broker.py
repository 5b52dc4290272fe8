"""Broker-to-broker connections: one per destination, opened at the metadata's address,
reused; a request to a broker that never answers fails as soon as that broker is
disconnected (fenced), not at its timeout. The other broker is a real socket that accepts
requests and answers none."""

from __future__ import annotations

import asyncio
import time

import pytest

from sparklog.broker.inter_broker import InterBrokerClients
from sparklog.broker.metadata_cache import MetadataCache, unfence_record
from sparklog.client.connection import KafkaConnectionError
from sparklog.protocol.messages.transactions import WriteTxnMarkersRequest
from tests.helpers.clock import in_loop, settle


@in_loop
async def test_a_fenced_brokers_connection_fails_its_waiting_requests_at_once() -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def silent(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        accepted.append(w)  # reads nothing, answers nothing: a paused broker

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    md = MetadataCache()
    md.apply([{"type": "broker", "node_id": 2, "host": "127.0.0.1", "port": port},
              unfence_record(2)])
    clients = InterBrokerClients(1, md, request_timeout_ms=60_000)
    try:
        sending = [asyncio.ensure_future(clients.send(2, WriteTxnMarkersRequest(markers=[]), 1))
                   for _ in range(2)]
        await settle()
        await asyncio.sleep(0.05)
        assert len(accepted) == 1 and not any(s.done() for s in sending)  # one connection
        started = time.monotonic()
        clients.disconnect(2)
        for s in sending:
            with pytest.raises(KafkaConnectionError):
                await s
        assert time.monotonic() - started < 5  # not the 60 s request timeout
    finally:
        await clients.close()
        for w in accepted:
            w.close()
        server.close()
        await server.wait_closed()
