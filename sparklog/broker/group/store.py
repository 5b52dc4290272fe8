"""The ``__consumer_offsets`` store: group records written to, and replayed from, the
offsets partition each group lives in.

``RecordLog`` is the seam to the log: ``append`` adds one batch of records to an offsets
partition (a transactional one for TxnOffsetCommit), ``scan`` yields a partition's records
and transaction markers from its start. The broker's is ``ReplicatedRecordLog`` (the
transaction coordinator's ``__transaction_state`` uses it too): a batch built here goes
straight to the partition log through the replica manager as an internal append (as
leader, high watermark moved, waiting fetches woken), without the checks a client's batch
gets (every record has a key by construction, so the compacted topic's key check, which
decodes every record, is not run). Coordinators without a broker (unit tests) use
``MemoryRecordLog``.

Offsets committed in a transaction (KIP-98) are replayed as Kafka does: held per producer
until that producer's COMMIT marker (then they count as if written there) or dropped at its
ABORT marker; those still open at the end of the log are returned as pending.

Replay is per partition (``GroupStore.load_partition``), so a coordinator can take over or
give up one offsets partition at a time as its leadership moves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

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
from sparklog.protocol.control_records import ControlRecordType, parse_control_record_key
from sparklog.protocol.errors import MalformedFrameError
from sparklog.protocol.internal_topics import CONSUMER_OFFSETS
from sparklog.protocol.records import Record, decode_batches, encode_batch

if TYPE_CHECKING:
    from sparklog.broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

KeyValue = tuple[bytes, bytes | None]
Producer = tuple[int, int]  # (producer id, epoch) of a transactional append


class LogRecord(NamedTuple):
    """One entry replayed from a coordinator's partition: a record (written in a
    transaction of ``producer_id``, or -1), or a transaction marker (``key`` None,
    ``commit`` its outcome)."""

    key: bytes | None
    value: bytes | None
    producer_id: int = -1
    commit: bool = False

# one read of a partition during replay; a larger batch is still read whole
_SCAN_BYTES = 1 << 20


class RecordLog(Protocol):
    """Where the coordinator's records go: one append-only log per partition."""

    def append(self, partition: int, records: list[KeyValue], timestamp_ms: int,
               producer: Producer | None = None) -> None: ...

    def scan(self, partition: int) -> Iterable[LogRecord]: ...


def load_each_partition(load: Callable[[int], int], partitions: Iterable[int], topic: str,
                        what: str) -> int:
    """``load(p)`` for each of a coordinator's ``partitions`` of ``topic``; one that fails
    stays unloaded (its keys get NOT_COORDINATOR) and the others still load. Returns how
    many ``what`` were loaded."""
    total, n = 0, 0
    for p in partitions:
        n += 1
        try:
            total += load(p)
        except Exception:  # noqa: BLE001 - the other partitions still serve
            log.exception("loading %s-%d failed", topic, p)
    if n:
        log.info("loaded %d %s from %d %s partitions", total, what, n, topic)
    return total


class MemoryRecordLog:
    """In-process log for coordinators without a broker (unit tests, tools);
    ``add_marker`` stands for the transaction coordinator's markers."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[LogRecord]] = {}

    def append(self, partition: int, records: list[KeyValue], timestamp_ms: int,
               producer: Producer | None = None) -> None:
        pid = -1 if producer is None else producer[0]
        self.partitions.setdefault(partition, []).extend(LogRecord(k, v, pid) for k, v in records)

    def add_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        self.partitions.setdefault(partition, []).append(LogRecord(None, None, producer_id, commit))

    def scan(self, partition: int) -> Iterable[LogRecord]:
        return list(self.partitions.get(partition, ()))


class ReplicatedRecordLog:
    """The partitions of ``topic`` (a coordinator's internal topic) this broker hosts, one
    batch per append.

    ``ensure_topic`` creates the topic on the first write (it is not created at start-up,
    as in Kafka); a partition not hosted here has nothing to replay."""

    def __init__(self, replicas: ReplicaManager, topic: str,
                 ensure_topic: Callable[[], object]) -> None:
        self._replicas = replicas
        self.topic = topic
        self._ensure_topic = ensure_topic

    def append(self, partition: int, records: list[KeyValue], timestamp_ms: int,
               producer: Producer | None = None) -> None:
        pid, epoch = (-1, -1) if producer is None else producer
        batch = encode_batch(
            [Record(key=k, value=v, timestamp=timestamp_ms, offset_delta=i)
             for i, (k, v) in enumerate(records)],
            now_ms=timestamp_ms, producer_id=pid, producer_epoch=epoch,
            base_sequence=-1 if producer is None else 0,
            is_transactional=producer is not None,
        )
        self._ensure_topic()
        self._replicas.append_internal(self.topic, partition, batch)

    def scan(self, partition: int) -> Iterator[LogRecord]:
        p = self._replicas.get(self.topic, partition)
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
                    if batch.records:
                        _v, rtype = parse_control_record_key(batch.records[0].key)
                        if rtype in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                            yield LogRecord(None, None, batch.producer_id,
                                            rtype == ControlRecordType.COMMIT)
                    continue
                pid = batch.producer_id if batch.is_transactional else -1
                for r in batch.records:
                    if r.key is not None:
                        yield LogRecord(bytes(r.key),
                                        None if r.value is None else bytes(r.value), pid)
            if not progressed:
                break


@dataclass
class LoadedGroup:
    """What replaying ``__consumer_offsets`` knows about one group."""

    group_id: str
    metadata: GroupMetadataRecord | None = None
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # offsets of transactions still open at the log's end: producer id -> offsets
    pending: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)


class KeyedStore:
    """A coordinator's store in its internal topic: each record's key names a group or a
    transactional id, and every record of one id goes to partition
    ``abs(hashCode(id)) % num_partitions`` (Kafka's rule for ``__consumer_offsets`` and
    ``__transaction_state`` alike), so the broker leading that partition coordinates it."""

    partitions_key = ""  # the config key of num_partitions, for the error

    def __init__(self, log: RecordLog, num_partitions: int) -> None:
        if num_partitions < 1:
            raise ValueError(f"{self.partitions_key} must be >= 1")
        self.log = log
        self.num_partitions = num_partitions

    def partition_for(self, key: str) -> int:
        return partition_for_group(key, self.num_partitions)


class GroupStore(KeyedStore):
    """Writes and replays group records, routed to the group's offsets partition."""

    partitions_key = "offsets.topic.num.partitions"

    def store_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata],
                      now_ms: int, producer: Producer | None = None) -> None:
        """Write ``offsets``; with ``producer`` as part of its transaction (they count only
        once its COMMIT marker follows)."""
        if not offsets:
            return
        keys = encode_offset_keys(group_id, offsets)
        records: list[KeyValue] = [(k, encode_offset_value(om))
                                   for k, om in zip(keys, offsets.values(), strict=True)]
        self.log.append(self.partition_for(group_id), records, now_ms, producer)

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
        open_txns: dict[int, dict[bytes, bytes | None]] = {}
        for key, value, pid, commit in self.log.scan(partition):
            if key is None:  # a marker: the producer's offsets count now, or never
                done = open_txns.pop(pid, {})
                if commit:
                    latest.update(done)
            elif pid >= 0:
                open_txns.setdefault(pid, {})[key] = value
            else:
                latest[key] = value
        groups: dict[str, LoadedGroup] = {}
        for key, value in latest.items():
            if value is not None:
                self._load_record(groups, key, value, partition)
        for pid, records in open_txns.items():
            for key, value in records.items():
                if value is not None:
                    self._load_record(groups, key, value, partition, pid)
        return {gid: g for gid, g in groups.items()
                if g.metadata is not None or g.offsets or g.pending}

    @staticmethod
    def _load_record(groups: dict[str, LoadedGroup], key: bytes, value: bytes,
                     partition: int, pending_of: int = -1) -> None:
        try:
            k = decode_key(key)
        except MalformedFrameError as e:
            log.warning("skipping unreadable %s-%d key: %s", CONSUMER_OFFSETS, partition, e)
            return
        g = groups.get(k.group)
        if g is None:
            g = groups[k.group] = LoadedGroup(k.group)
        try:
            if not isinstance(k, OffsetKey):
                g.metadata = decode_group_value(value)
            elif pending_of >= 0:
                g.pending.setdefault(pending_of, {})[(k.topic, k.partition)] = \
                    decode_offset_value(value)
            else:
                g.offsets[(k.topic, k.partition)] = decode_offset_value(value)
        except MalformedFrameError as e:
            log.warning("skipping unreadable record of group %r: %s", k.group, e)
