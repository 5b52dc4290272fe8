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
    """ListOffsets grouped per leader -> {tp: (offset, timestamp)}, keyed by the caller's
    own ``specs`` keys; retries stale leaders."""
    result: dict[TopicPartition, tuple[int, int]] = {}
    todo = dict(specs)
    deadline = time.monotonic() + client.config.request_timeout_ms / 1000
    delay = client.config.retry_backoff_ms / 1000
    Partition = ListOffsetsRequest.ListOffsetsPartition  # noqa: N806
    while todo:
        # leader -> topic -> partition -> the caller's key: answers are filed under the
        # caller's own key objects (no new TopicPartition per answer; a driver asks for
        # 1 000 partitions every micro-batch)
        by_leader: dict[int, dict[str, dict[int, TopicPartition]]] = {}
        for tp in todo:
            # fresh: after ``invalidate`` below, the cached leader (maybe the dead one) is
            # not trusted again without asking the cluster
            leader = client.cached_leader(tp)
            if leader is None:
                leader = await client.leader_id(tp, fresh=True)
            by_leader.setdefault(leader, {}).setdefault(tp[0], {})[tp[1]] = tp
        retry: dict[TopicPartition, int] = {}
        last_err: Exception | None = None
        for leader, topics in by_leader.items():
            req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=[
                    Partition(partition_index=p, timestamp=todo[tp]) for p, tp in ps.items()])
                for t, ps in topics.items()])
            try:
                resp = await client.send_node(leader, req)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                # a dead leader: its partitions are asked again where fresh metadata points
                for ps in topics.values():
                    for tp in ps.values():
                        retry[tp] = todo[tp]
                last_err = e
                continue
            for t in resp.topics:
                asked = topics.get(t.name, {})
                for p in t.partitions:
                    tp = asked.get(p.partition_index)
                    if tp is None:  # an answer to a question not asked
                        continue
                    if p.error_code == 0:
                        result[tp] = (p.offset, p.timestamp)
                        continue
                    err = error_for_code(p.error_code, f"ListOffsets {tp[0]}-{tp[1]}")
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
