"""The ``__consumer_offsets`` store: group records written to, and replayed from, the
offsets partition each group lives in.

``RecordLog`` is the seam to the log: ``append`` adds one batch of records to an offsets
partition, ``scan`` yields a partition's records from its start. The broker's is
``ReplicatedRecordLog``: a batch built here goes straight to the partition log through the
replica manager as an internal append (as leader, high watermark moved, waiting fetches
woken), without the checks a client's batch gets (every record has a key by construction,
so the compacted topic's key check, which decodes every record, is not run). Coordinators
without a broker (unit tests) use ``MemoryRecordLog``.

Replay is per partition (``GroupStore.load_partition``), so a coordinator can take over or
give up one offsets partition at a time as its leadership moves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from sparklog.broker.group.records import (
    GroupMetadataRecord,
    OffsetAndMetadata,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_keys,
    encode_offset_value,
    partition_for_group,
)
from sparklog.protocol.errors import MalformedFrameError
from sparklog.protocol.internal_topics import CONSUMER_OFFSETS
from sparklog.protocol.records import Record, decode_batches, encode_batch

if TYPE_CHECKING:
    from sparklog.broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

KeyValue = tuple[bytes, bytes | None]

# one read of a partition during replay; a larger batch is still read whole
_SCAN_BYTES = 1 << 20


class RecordLog(Protocol):
    """Where the coordinator's records go: one append-only log per offsets partition."""

    def append(self, partition: int, records: list[KeyValue], timestamp_ms: int) -> None: ...

    def scan(self, partition: int) -> Iterable[KeyValue]: ...


class MemoryRecordLog:
    """In-process log for coordinators without a broker (unit tests, tools)."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[KeyValue]] = {}

    def append(self, partition: int, records: list[KeyValue], timestamp_ms: int) -> None:
        self.partitions.setdefault(partition, []).extend(records)

    def scan(self, partition: int) -> Iterable[KeyValue]:
        return list(self.partitions.get(partition, ()))


class ReplicatedRecordLog:
    """The ``__consumer_offsets`` partitions this broker hosts, one batch per append.

    ``ensure_topic`` creates the topic on the first write (it is not created at start-up,
    as in Kafka); a partition not hosted here has nothing to replay."""

    def __init__(self, replicas: ReplicaManager, ensure_topic: Callable[[], object]) -> None:
        self._replicas = replicas
        self._ensure_topic = ensure_topic

    def append(self, partition: int, records: list[KeyValue], timestamp_ms: int) -> None:
        batch = encode_batch(
            [Record(key=k, value=v, timestamp=timestamp_ms, offset_delta=i)
             for i, (k, v) in enumerate(records)],
            now_ms=timestamp_ms,
        )
        self._ensure_topic()
        self._replicas.append_internal(CONSUMER_OFFSETS, partition, batch)

    def scan(self, partition: int) -> Iterator[KeyValue]:
        p = self._replicas.get(CONSUMER_OFFSETS, partition)
        if p is None:
            return
        plog = p.log
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            buf = plog.read(offset, _SCAN_BYTES).read_bytes()
            if not buf:
                break
            progressed = False
            for batch in decode_batches(buf, allow_partial_tail=True):
                if batch.next_offset <= offset:
                    continue
                offset = batch.next_offset
                progressed = True
                if batch.is_control:
                    continue
                for r in batch.records:
                    if r.key is not None:
                        yield bytes(r.key), (None if r.value is None else bytes(r.value))
            if not progressed:
                break


@dataclass
class LoadedGroup:
    """What replaying ``__consumer_offsets`` knows about one group."""

    group_id: str
    metadata: GroupMetadataRecord | None = None
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)


class GroupStore:
    """Writes and replays group records, routed to the group's offsets partition."""

    def __init__(self, log: RecordLog, num_partitions: int) -> None:
        if num_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be >= 1")
        self.log = log
        self.num_partitions = num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.num_partitions)

    def store_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata],
                      now_ms: int) -> None:
        if not offsets:
            return
        keys = encode_offset_keys(group_id, offsets)
        records: list[KeyValue] = [(k, encode_offset_value(om))
                                   for k, om in zip(keys, offsets.values(), strict=True)]
        self.log.append(self.partition_for(group_id), records, now_ms)

    def delete_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]],
                       now_ms: int, *, delete_group: bool = False) -> None:
        records: list[KeyValue] = [(k, None) for k in encode_offset_keys(group_id, partitions)]
        if delete_group:
            records.append((encode_group_key(group_id), None))
        if records:
            self.log.append(self.partition_for(group_id), records, now_ms)

    def store_group(self, group_id: str, metadata: GroupMetadataRecord, now_ms: int) -> None:
        self.log.append(self.partition_for(group_id),
                        [(encode_group_key(group_id), encode_group_value(metadata))], now_ms)

    def load_partition(self, partition: int) -> dict[str, LoadedGroup]:
        """Replay one offsets partition; later records win, tombstones remove.

        Only the last record of each key matters (as after compaction), so records are
        first reduced per key as raw bytes and only the survivors are decoded: replay
        costs a dict store per record plus one decode per live key."""
        latest: dict[bytes, bytes | None] = {}
        for key, value in self.log.scan(partition):
            latest[key] = value
        groups: dict[str, LoadedGroup] = {}
        for key, value in latest.items():
            if value is None:
                continue
            try:
                k = decode_key(key)
            except MalformedFrameError as e:
                log.warning("skipping unreadable %s-%d key: %s", CONSUMER_OFFSETS, partition, e)
                continue
            g = groups.get(k.group)
            if g is None:
                g = groups[k.group] = LoadedGroup(k.group)
            try:
                if isinstance(k, OffsetKey):
                    g.offsets[(k.topic, k.partition)] = decode_offset_value(value)
                else:
                    g.metadata = decode_group_value(value)
            except MalformedFrameError as e:
                log.warning("skipping unreadable record of group %r: %s", k.group, e)
        return {gid: g for gid, g in groups.items() if g.metadata is not None or g.offsets}
