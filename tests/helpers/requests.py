"""Produce and Fetch requests built the way a client builds them, for tests that talk the
raw protocol (``tests.helpers.wire.KafkaWire``) at versions or with inputs no client sends.

Fields a test does not name get what Kafka's Java client sends: no transactional id, a
5 s produce timeout, read_uncommitted, no fetch session, 1 MiB fetch limits.
"""

from __future__ import annotations

from collections.abc import Iterable

from sparklog.protocol.messages.fetch import FetchRequest
from sparklog.protocol.messages.produce import ProduceRequest
from sparklog.protocol.schema import TopLevel

__all__ = ["fetch_request", "produce_request"]


def produce_request(topic: str, partition: int, records: bytes, *, acks: int = -1,
                    transactional_id: str | None = None) -> TopLevel:
    """Produce ``records`` (encoded batches) to one partition."""
    return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=records)])])


def fetch_request(topic: str, offsets: Iterable[tuple[int, int]], *, max_wait_ms: int = 0,
                  min_bytes: int = 1, max_bytes: int = 1 << 20,
                  partition_max_bytes: int = 1 << 20, replica_id: int = -1,
                  isolation_level: int = 0) -> TopLevel:
    """Fetch from each ``(partition, offset)`` of ``topic``, as a consumer (replica id -1)
    or as the follower ``replica_id``; ``isolation_level`` 1 is read_committed."""
    return FetchRequest(
        replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation_level, session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
            topic=topic, partitions=[FetchRequest.FetchPartition(
                partition=p, fetch_offset=o, partition_max_bytes=partition_max_bytes)
                for p, o in offsets])],
        forgotten_topics_data=[], rack_id="")
