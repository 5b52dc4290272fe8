"""ListOffsets: a partition's offset for a timestamp, or its earliest / latest offset.

Shared by Consumer (seek, positions, watermarks) and AdminClient. One request per partition
leader; partitions whose leader moved are asked again after a metadata refresh.
"""

from __future__ import annotations

import asyncio
import time

from sparklog.client.connection import KafkaConnectionError, KafkaTimeoutError
from sparklog.client.core import AsyncClient
from sparklog.protocol.errors import error_for_code
from sparklog.protocol.messages.fetch import ListOffsetsRequest
from sparklog.protocol.topic_partition import TopicPartition

__all__ = ["EARLIEST", "LATEST", "MAX_TIMESTAMP", "list_offsets"]

# the special timestamps of a ListOffsets request
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


async def list_offsets(client: AsyncClient, specs: dict[TopicPartition, int],
                       isolation_level: int = 0) -> dict[TopicPartition, tuple[int, int]]:
    """ListOffsets grouped per leader -> {tp: (offset, timestamp)}; retries stale leaders."""
    result: dict[TopicPartition, tuple[int, int]] = {}
    todo = dict(specs)
    deadline = time.monotonic() + client.config.request_timeout_ms / 1000
    delay = client.config.retry_backoff_ms / 1000
    while todo:
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in todo:
            # fresh: after ``invalidate`` below, the cached leader (maybe the dead one) is
            # not trusted again without asking the cluster
            by_leader.setdefault(await client.leader_id(tp, fresh=True), []).append(tp)
        retry: dict[TopicPartition, int] = {}
        last_err: Exception | None = None
        for leader, tps in by_leader.items():
            topics: dict[str, list] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=tp.partition, timestamp=todo[tp]))
            req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps)
                for t, ps in topics.items()])
            try:
                resp = await client.send_node(leader, req)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                # a dead leader: its partitions are asked again where fresh metadata points
                for tp in tps:
                    retry[tp] = todo[tp]
                last_err = e
                continue
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code == 0:
                        result[tp] = (p.offset, p.timestamp)
                        continue
                    err = error_for_code(p.error_code, f"ListOffsets {tp.topic}-{tp.partition}")
                    if err.retriable:
                        retry[tp] = todo[tp]
                        last_err = err
                    else:
                        raise err
        if retry:
            if time.monotonic() + delay > deadline:
                assert last_err is not None
                raise last_err
            client.invalidate()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
        todo = retry
    return result
