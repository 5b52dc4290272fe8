"""Consumer-group state as records in the compacted internal topic ``__consumer_offsets``.

Kafka keeps committed offsets and group metadata as ordinary records of a compacted
topic so that a coordinator rebuilds everything by replaying the log, and tools that
read ``__consumer_offsets`` directly (or a Kafka broker handed our log dirs) understand
it.  The formats are Kafka's:

    key   version 0/1  OffsetCommitKey     group STRING, topic STRING, partition INT32
    key   version 2    GroupMetadataKey    group STRING
    value OffsetCommitValue v0..v4 (we write v3):
          v0 offset INT64, metadata STRING, commit_timestamp INT64
          v1 v0 + expire_timestamp INT64
          v2 = v0
          v3 offset INT64, leader_epoch INT32, metadata STRING, commit_timestamp INT64
          v4 v3 in flexible encoding (compact string + tagged fields)
    value GroupMetadataValue v0..v3 (we write v3):
          protocol_type STRING, generation INT32, protocol NULLABLE_STRING,
          leader NULLABLE_STRING, [v2+ current_state_timestamp INT64],
          members ARRAY(member_id STRING, [v3+ group_instance_id NULLABLE_STRING],
                        client_id STRING, client_host STRING,
                        [v1+ rebalance_timeout INT32], session_timeout INT32,
                        subscription BYTES, assignment BYTES)

A ``None`` value is a tombstone (offset expired/deleted, group deleted).
A group lives in partition ``abs(javaHashCode(group)) % offsets.topic.num.partitions``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from sparklog.protocol.errors import MalformedFrameError
from sparklog.protocol.primitives import Reader, Writer

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

NO_LEADER_EPOCH = -1


# --------------------------------------------------------------------------- partitioning


def java_string_hash(s: str) -> int:
    """``java.lang.String.hashCode``: over UTF-16 code units, wrapped to int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_group(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % n`` (``Utils.abs(MIN_VALUE) == 0``)."""
    h = java_string_hash(group_id)
    h = 0 if h == -(1 << 31) else abs(h)
    return h % num_partitions


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int | None = None


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberRecord, ...] = ()


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


# --------------------------------------------------------------------------- encoders


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    w = Writer()
    w.int16(OFFSET_KEY_VERSION)
    w.string(group)
    w.string(topic)
    w.int32(partition)
    return w.getvalue()


def encode_group_key(group: str) -> bytes:
    w = Writer()
    w.int16(GROUP_KEY_VERSION)
    w.string(group)
    return w.getvalue()


def encode_offset_value(om: OffsetAndMetadata) -> bytes:
    """v3, or v1 when an explicit expire timestamp must be kept (as Kafka does)."""
    w = Writer()
    if om.expire_timestamp is not None:
        w.int16(1)
        w.int64(om.offset)
        w.string(om.metadata)
        w.int64(om.commit_timestamp)
        w.int64(om.expire_timestamp)
        return w.getvalue()
    w.int16(OFFSET_VALUE_VERSION)
    w.int64(om.offset)
    w.int32(om.leader_epoch)
    w.string(om.metadata)
    w.int64(om.commit_timestamp)
    return w.getvalue()


def encode_group_value(g: GroupMetadataRecord) -> bytes:
    w = Writer()
    w.int16(GROUP_VALUE_VERSION)
    w.string(g.protocol_type)
    w.int32(g.generation)
    w.nullable_string(g.protocol)
    w.nullable_string(g.leader)
    w.int64(g.current_state_timestamp)

    def member(w: Writer, m: MemberRecord) -> None:
        w.string(m.member_id)
        w.nullable_string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.int32(m.rebalance_timeout_ms)
        w.int32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)

    w.array(g.members, member)
    return w.getvalue()


# --------------------------------------------------------------------------- decoders


def decode_key(key: bytes | memoryview) -> OffsetKey | GroupKey:
    r = Reader(key)
    version = r.int16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.int32())
    if version == 2:
        return GroupKey(r.string())
    raise MalformedFrameError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(value: bytes | memoryview) -> OffsetAndMetadata:
    r = Reader(value)
    version = r.int16()
    if version in (0, 2):
        return OffsetAndMetadata(r.int64(), NO_LEADER_EPOCH, r.string(), r.int64())
    if version == 1:
        offset, metadata, ts, expire = r.int64(), r.string(), r.int64(), r.int64()
        return OffsetAndMetadata(offset, NO_LEADER_EPOCH, metadata, ts, expire)
    if version == 3:
        return OffsetAndMetadata(r.int64(), r.int32(), r.string(), r.int64())
    if version == 4:
        om = OffsetAndMetadata(r.int64(), r.int32(), r.compact_string(), r.int64())
        r.tagged_fields()
        return om
    raise MalformedFrameError(f"unknown offset commit value version {version}")


def decode_group_value(value: bytes | memoryview) -> GroupMetadataRecord:
    r = Reader(value)
    version = r.int16()
    if not 0 <= version <= 4:
        raise MalformedFrameError(f"unknown group metadata value version {version}")
    flexible = version >= 4
    s = r.compact_string if flexible else r.string
    ns = r.compact_nullable_string if flexible else r.nullable_string
    b = r.compact_bytes if flexible else r.bytes_
    protocol_type = s()
    generation = r.int32()
    protocol = ns()
    leader = ns()
    state_ts = r.int64() if version >= 2 else -1

    def member(r: Reader) -> MemberRecord:
        member_id = s()
        instance_id = ns() if version >= 3 else None
        client_id = s()
        client_host = s()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        subscription = b()
        assignment = b()
        if flexible:
            r.tagged_fields()
        return MemberRecord(member_id, instance_id, client_id, client_host,
                            rebalance_timeout, session_timeout, subscription, assignment)

    members = r.compact_array(member) if flexible else r.array(member)
    if flexible:
        r.tagged_fields()
    return GroupMetadataRecord(protocol_type, generation, protocol, leader, state_ts,
                               tuple(members))


# --------------------------------------------------------------------------- storage


class RecordLog(Protocol):
    """Where the coordinator's records go: one append-only log per offsets partition."""

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]],
               timestamp_ms: int) -> None: ...

    def scan(self, partition: int) -> Iterable[tuple[bytes, bytes | None]]: ...


class MemoryRecordLog:
    """In-process log for coordinators without a broker (unit tests, tools)."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes, bytes | None]]] = {}

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]],
               timestamp_ms: int) -> None:
        self.partitions.setdefault(partition, []).extend(records)

    def scan(self, partition: int) -> Iterable[tuple[bytes, bytes | None]]:
        return list(self.partitions.get(partition, ()))


class PartitionLogRecordLog:
    """Records in real ``__consumer_offsets`` partition logs, one batch per append.

    ``log_for(partition)`` returns the storage layer's PartitionLog, or None while the
    topic does not exist (nothing to replay); ``append(partition, batch)`` appends one
    encoded batch as leader (the broker routes it through its replica manager so the high
    watermark moves); without it the batch goes straight to ``log_for(p).append_as_leader``.
    """

    def __init__(self, log_for: Callable[[int], Any],
                 append: Callable[[int, bytes], None] | None = None) -> None:
        self._log_for = log_for
        self._append = append

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]],
               timestamp_ms: int) -> None:
        from sparklog.protocol import records as rec

        batch = rec.encode_batch(
            [rec.Record(key=k, value=v, timestamp=timestamp_ms, offset_delta=i)
             for i, (k, v) in enumerate(records)],
            now_ms=timestamp_ms,
        )
        if self._append is not None:
            self._append(partition, batch)
            return
        plog = self._log_for(partition)
        if plog is None:
            raise RuntimeError(f"{OFFSETS_TOPIC}-{partition} does not exist")
        plog.append_as_leader(batch, max(getattr(plog, "latest_epoch", 0) or 0, 0),
                              origin="coordinator")

    def scan(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        from sparklog.protocol import records as rec

        plog = self._log_for(partition)
        if plog is None:
            return
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            data = plog.read(offset, 1 << 20)
            buf = data.read_bytes() if hasattr(data, "read_bytes") else bytes(data)
            if not buf:
                break
            progressed = False
            for batch in rec.decode_batches(buf, allow_partial_tail=True):
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


# --------------------------------------------------------------------------- the store


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

    def store_offsets(self, group_id: str,
                      offsets: dict[tuple[str, int], OffsetAndMetadata], now_ms: int) -> None:
        if not offsets:
            return
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_key(group_id, t, p), encode_offset_value(om))
            for (t, p), om in offsets.items()
        ]
        self.log.append(self.partition_for(group_id), records, now_ms)

    def delete_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]],
                       now_ms: int, *, delete_group: bool = False) -> None:
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_key(group_id, t, p), None) for t, p in partitions
        ]
        if delete_group:
            records.append((encode_group_key(group_id), None))
        if records:
            self.log.append(self.partition_for(group_id), records, now_ms)

    def store_group(self, group_id: str, metadata: GroupMetadataRecord, now_ms: int) -> None:
        self.log.append(self.partition_for(group_id),
                        [(encode_group_key(group_id), encode_group_value(metadata))], now_ms)

    def load(self) -> dict[str, LoadedGroup]:
        """Replay every partition; later records win, tombstones remove."""
        groups: dict[str, LoadedGroup] = {}
        for p in range(self.num_partitions):
            for key, value in self.log.scan(p):
                try:
                    k = decode_key(key)
                except MalformedFrameError as e:
                    log.warning("skipping unreadable __consumer_offsets-%d key: %s", p, e)
                    continue
                g = groups.get(k.group)
                if isinstance(k, OffsetKey):
                    tp = (k.topic, k.partition)
                    if value is None:
                        if g is not None:
                            g.offsets.pop(tp, None)
                        continue
                    if g is None:
                        g = groups[k.group] = LoadedGroup(k.group)
                    try:
                        g.offsets[tp] = decode_offset_value(value)
                    except MalformedFrameError as e:
                        log.warning("skipping unreadable offset of group %r: %s", k.group, e)
                else:
                    if value is None:
                        if g is not None:
                            g.metadata = None
                        continue
                    if g is None:
                        g = groups[k.group] = LoadedGroup(k.group)
                    try:
                        g.metadata = decode_group_value(value)
                    except MalformedFrameError as e:
                        log.warning("skipping unreadable metadata of group %r: %s", k.group, e)
        return {gid: g for gid, g in groups.items() if g.metadata is not None or g.offsets}
