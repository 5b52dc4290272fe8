"""The records of ``__consumer_offsets``: keys, values and which partition a group lives in.

Kafka keeps committed offsets and group metadata as ordinary records of a compacted
topic so that a coordinator rebuilds everything by replaying the log, and tools that
read ``__consumer_offsets`` directly (or a Kafka broker handed our log dirs) understand
it.  The formats are Kafka's:

    key   version 0/1  OffsetCommitKey     group STRING, topic STRING, partition INT32
    key   version 2    GroupMetadataKey    group STRING
    value OffsetCommitValue v0..v4 (we write v3, or v1 to keep an explicit expiry):
          v0 offset INT64, metadata STRING, commit_timestamp INT64
          v1 v0 + expire_timestamp INT64
          v2 = v0
          v3 offset INT64, leader_epoch INT32, metadata STRING, commit_timestamp INT64
          v4 v3 in flexible encoding (compact string + tagged fields)
    value GroupMetadataValue v0..v4 (we write v3):
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

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from sparklog.protocol.errors import MalformedFrameError
from sparklog.protocol.internal_topics import CONSUMER_OFFSETS
from sparklog.protocol.primitives import Reader, Writer

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


@dataclass(eq=False)
class MemberInfo:
    """Who a member is and the timeouts it asked for: what a group's metadata record keeps
    of each member (``MemberRecord``) and the start of the coordinator's live
    ``model.Member``, declared once for both (so neither is frozen: the live one changes)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int


@dataclass
class MemberRecord(MemberInfo):
    """A member as ``__consumer_offsets`` keeps it: its subscription to the group's
    protocol and its assignment."""

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


_H = struct.Struct(">h")
_I32 = struct.Struct(">i")
_V3_HEAD = struct.Struct(">hqi")
_Q = struct.Struct(">q")


def _str16(s: str) -> bytes:
    b = s.encode()
    if len(b) > 0x7FFF:
        raise ValueError(f"string of {len(b)} bytes exceeds the int16 length")
    return _H.pack(len(b)) + b


def _offset_key_prefix(group: str, topic: str) -> bytes:
    """Everything of an offset key but the partition."""
    return _H.pack(OFFSET_KEY_VERSION) + _str16(group) + _str16(topic)


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    return _offset_key_prefix(group, topic) + _I32.pack(partition)


def encode_offset_keys(group: str, partitions: Iterable[tuple[str, int]]) -> list[bytes]:
    """The offset keys of ``group`` for ``partitions``, in order; the group and topic part
    is encoded once per topic (a commit names many partitions of few topics)."""
    prefixes: dict[str, bytes] = {}
    keys = []
    for topic, partition in partitions:
        prefix = prefixes.get(topic)
        if prefix is None:
            prefix = prefixes[topic] = _offset_key_prefix(group, topic)
        keys.append(prefix + _I32.pack(partition))
    return keys


def encode_group_key(group: str) -> bytes:
    return _H.pack(GROUP_KEY_VERSION) + _str16(group)


def encode_offset_value(om: OffsetAndMetadata) -> bytes:
    """v3, or v1 when an explicit expire timestamp must be kept (as Kafka does)."""
    if om.expire_timestamp is not None:
        return (_H.pack(1) + _Q.pack(om.offset) + _str16(om.metadata)
                + _Q.pack(om.commit_timestamp) + _Q.pack(om.expire_timestamp))
    return (_V3_HEAD.pack(OFFSET_VALUE_VERSION, om.offset, om.leader_epoch)
            + _str16(om.metadata) + _Q.pack(om.commit_timestamp))


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


def _short(what: str) -> MalformedFrameError:
    return MalformedFrameError(f"{CONSUMER_OFFSETS} record truncated in {what}")


def _fast_str(b: bytes, pos: int) -> tuple[str, int]:
    """An int16-length string at ``pos`` (replay is per record: struct, not Reader)."""
    if pos + 2 > len(b):
        raise _short("string length")
    (n,) = _H.unpack_from(b, pos)
    pos += 2
    if n < 0 or pos + n > len(b):
        raise _short("string")
    try:
        return b[pos:pos + n].decode(), pos + n
    except UnicodeDecodeError as e:
        raise MalformedFrameError(f"invalid UTF-8 in {CONSUMER_OFFSETS} record: {e}") from None


def decode_key(key: bytes | memoryview) -> OffsetKey | GroupKey:
    b = bytes(key)
    if len(b) < 2:
        raise _short("key version")
    (version,) = _H.unpack_from(b, 0)
    if version in (0, 1):
        group, pos = _fast_str(b, 2)
        topic, pos = _fast_str(b, pos)
        if pos + 4 > len(b):
            raise _short("partition")
        return OffsetKey(group, topic, _I32.unpack_from(b, pos)[0])
    if version == 2:
        return GroupKey(_fast_str(b, 2)[0])
    raise MalformedFrameError(f"unknown {CONSUMER_OFFSETS} key version {version}")


def decode_offset_value(value: bytes | memoryview) -> OffsetAndMetadata:
    b = bytes(value)
    if len(b) < 2:
        raise _short("value version")
    (version,) = _H.unpack_from(b, 0)
    if version == 3:
        if len(b) < 14:
            raise _short("offset")
        _, offset, epoch = _V3_HEAD.unpack_from(b, 0)
        metadata, pos = _fast_str(b, 14)
        if pos + 8 > len(b):
            raise _short("commit timestamp")
        return OffsetAndMetadata(offset, epoch, metadata, _Q.unpack_from(b, pos)[0])
    r = Reader(b, 2)
    if version in (0, 2):
        return OffsetAndMetadata(r.int64(), NO_LEADER_EPOCH, r.string(), r.int64())
    if version == 1:
        offset, metadata, ts, expire = r.int64(), r.string(), r.int64(), r.int64()
        return OffsetAndMetadata(offset, NO_LEADER_EPOCH, metadata, ts, expire)
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
