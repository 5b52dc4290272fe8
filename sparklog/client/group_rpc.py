"""The requests to a group's coordinator that Consumer and AdminClient both send.

FindCoordinator locates the broker that owns a group; OffsetCommit and OffsetFetch write and
read the group's committed offsets there. Each function is one request (FindCoordinator is
retried while the coordinator loads) and raises the typed error of any failed partition.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from sparklog.client.connection import BrokerConnection
from sparklog.client.core import AsyncClient
from sparklog.protocol.errors import ErrorCode, error_for_code
from sparklog.protocol.messages.groups import KEY_TYPE_GROUP, FindCoordinatorRequest
from sparklog.protocol.messages.offsets import OffsetCommitRequest, OffsetFetchRequest
from sparklog.protocol.topic_partition import TopicPartition

__all__ = ["find_coordinator", "commit_offsets", "fetch_committed"]


async def find_coordinator(client: AsyncClient, group: str,
                           key_type: int = KEY_TYPE_GROUP) -> BrokerConnection:
    """The coordinator's connection for a group (or, with ``KEY_TYPE_TRANSACTION``, a
    transactional id): FindCoordinator, retried while it loads."""
    deadline = time.monotonic() + client.config.request_timeout_ms / 1000
    delay = client.config.retry_backoff_ms / 1000
    while True:
        resp = await client.send_any(FindCoordinatorRequest(key=group, key_type=key_type))
        if resp.error_code == 0:
            node = resp.node_id
            if node not in client.metadata.brokers:
                await client.refresh_metadata([])
            if node in client.metadata.brokers:
                return await client.connection(node)
            conn = BrokerConnection(resp.host, resp.port, client_id=client.config.client_id,
                                    node_id=node)
            await conn.connect()
            await client._negotiate(conn)
            client._conns[node] = conn
            return conn
        err = error_for_code(resp.error_code, resp.error_message)
        if not err.retriable or time.monotonic() + delay > deadline:
            raise err
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


async def commit_offsets(client: AsyncClient, conn: BrokerConnection, group: str,
                         offsets: dict[TopicPartition, int], *, generation: int = -1,
                         member_id: str = "", group_instance_id: str | None = None,
                         metadata: str = "") -> None:
    topics: dict[str, list] = {}
    for tp, off in offsets.items():
        topics.setdefault(tp.topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=tp.partition, committed_offset=off, committed_metadata=metadata))
    req = OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=group_instance_id,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                for t, ps in topics.items()])
    resp = await client.send(conn, req)
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code:
                raise error_for_code(p.error_code,
                                     f"commit {t.name}-{p.partition_index} for group {group!r}: "
                                     f"{ErrorCode.for_code(p.error_code).name}")


async def fetch_committed(client: AsyncClient, conn: BrokerConnection, group: str,
                          tps: Iterable[TopicPartition] | None) -> dict[TopicPartition, int]:
    """Committed offsets (-1 = none); ``tps`` None = every partition the group has."""
    if tps is None:
        topics = None
    else:
        by: dict[str, list[int]] = {}
        for tp in tps:
            by.setdefault(tp.topic, []).append(tp.partition)
        topics = [OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                  for t, ps in by.items()]
    resp = await client.send(conn, OffsetFetchRequest(group_id=group, topics=topics))
    if getattr(resp, "error_code", 0):
        raise error_for_code(resp.error_code, f"OffsetFetch for group {group!r}")
    out: dict[TopicPartition, int] = {}
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code and p.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise error_for_code(p.error_code, f"OffsetFetch {t.name}-{p.partition_index}")
            out[TopicPartition(t.name, p.partition_index)] = p.committed_offset
    return out
