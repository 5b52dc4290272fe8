"""__consumer_offsets record formats, partitioning and replay."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from sparklog.broker.group.records import (
    GroupKey,
    GroupMetadataRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    java_string_hash,
    partition_for_group,
)
from sparklog.broker.group.store import GroupStore, MemoryRecordLog, RecordLog, ReplicatedRecordLog
from sparklog.broker.replica_manager import ReplicaManager
from sparklog.protocol.errors import MalformedFrameError
from sparklog.protocol.internal_topics import CONSUMER_OFFSETS
from sparklog.storage.log_config import LogConfig
from sparklog.storage.log_manager import LogManager
from tests.helpers.broker import ManagedLogs


@pytest.mark.parametrize("s,h", [
    ("", 0),
    ("a", 97),
    ("hello", 99162322),
    ("polygenelubricants", -(1 << 31)),  # the classic Integer.MIN_VALUE string
    ("\U0001F600", 0xD83D * 31 + 0xDE00),  # hashed over UTF-16 surrogates
    ("Aa", 2112), ("BB", 2112),
])
def test_java_string_hash(s: str, h: int) -> None:
    assert java_string_hash(s) == h


def test_partition_for_group_matches_kafka_utils_abs() -> None:
    assert partition_for_group("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) = 0
    assert partition_for_group("hello", 50) == 99162322 % 50
    neg = "console-consumer-1"
    h = java_string_hash(neg)
    assert partition_for_group(neg, 50) == abs(h) % 50
    assert all(0 <= partition_for_group(f"g{i}", 7) < 7 for i in range(200))


def test_offset_key_bytes_are_kafkas() -> None:
    key = encode_offset_key("g", "t", 5)
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + struct.pack(">i", 5)
    assert decode_key(key) == OffsetKey("g", "t", 5)
    # Version 0 keys (older brokers) have the same layout.
    assert decode_key(b"\x00\x00" + key[2:]) == OffsetKey("g", "t", 5)
    assert encode_group_key("grp") == b"\x00\x02\x00\x03grp"
    assert decode_key(encode_group_key("grp")) == GroupKey("grp")
    with pytest.raises(MalformedFrameError):
        decode_key(b"\x00\x07\x00\x01g")
    with pytest.raises(MalformedFrameError):
        decode_key(b"\x00\x01\x00\x05g")


def test_offset_value_versions() -> None:
    om = OffsetAndMetadata(123, 4, "meta", 1_700_000_000_000)
    v = encode_offset_value(om)
    assert v == (struct.pack(">hqi", 3, 123, 4) + b"\x00\x04meta"
                 + struct.pack(">q", 1_700_000_000_000))
    assert decode_offset_value(v) == om
    # v1 (explicit expire timestamp) round-trips and keeps the expiry.
    om1 = OffsetAndMetadata(5, -1, "", 10, 20)
    assert encode_offset_value(om1)[:2] == b"\x00\x01"
    assert decode_offset_value(encode_offset_value(om1)) == om1
    # v0 / v2 as older brokers wrote them.
    v0 = struct.pack(">hq", 0, 9) + b"\x00\x01x" + struct.pack(">q", 77)
    assert decode_offset_value(v0) == OffsetAndMetadata(9, -1, "x", 77)
    assert decode_offset_value(b"\x00\x02" + v0[2:]) == OffsetAndMetadata(9, -1, "x", 77)
    # v4 is v3 in flexible encoding.
    v4 = struct.pack(">hqi", 4, 1, 2) + b"\x02m" + struct.pack(">q", 3) + b"\x00"
    assert decode_offset_value(v4) == OffsetAndMetadata(1, 2, "m", 3)
    with pytest.raises(MalformedFrameError):
        decode_offset_value(v[:-3])


def test_group_value_round_trip_and_old_versions() -> None:
    g = GroupMetadataRecord("consumer", 7, "range", "m1", 1234, (
        MemberRecord("m1", None, "c1", "/h1", 30000, 10000, b"sub1", b"asg1"),
        MemberRecord("m2", "inst", "c2", "/h2", 30000, 10000, b"sub2", b""),
    ))
    assert decode_group_value(encode_group_value(g)) == g
    empty = GroupMetadataRecord("consumer", 8, None, None, 99, ())
    assert decode_group_value(encode_group_value(empty)) == empty
    # v0: no state timestamp, no rebalance timeout, no instance id.
    v0 = (struct.pack(">h", 0) + b"\x00\x08consumer" + struct.pack(">i", 3) + b"\x00\x05range"
          + b"\x00\x02m1" + struct.pack(">i", 1) + b"\x00\x02m1" + b"\x00\x02c1" + b"\x00\x03/h1"
          + struct.pack(">i", 6000) + struct.pack(">i", 3) + b"sub" + struct.pack(">i", 1) + b"a")
    d = decode_group_value(v0)
    assert (d.generation, d.protocol, d.leader, d.current_state_timestamp) == (3, "range", "m1", -1)
    assert d.members == (MemberRecord("m1", None, "c1", "/h1", 6000, 6000, b"sub", b"a"),)


def test_store_replay_last_value_wins_and_tombstones() -> None:
    store = GroupStore(MemoryRecordLog(), 3)
    store.store_offsets("a", {("t", 0): OffsetAndMetadata(1), ("t", 1): OffsetAndMetadata(2)}, 0)
    store.store_offsets("a", {("t", 0): OffsetAndMetadata(5)}, 0)
    store.store_offsets("b", {("t", 0): OffsetAndMetadata(9)}, 0)
    store.store_group("b", GroupMetadataRecord("consumer", 2, None, None), 0)
    store.delete_offsets("a", [("t", 1)], 0)
    store.delete_offsets("b", [("t", 0)], 0, delete_group=True)
    loaded = {gid: g for p in range(3) for gid, g in store.load_partition(p).items()}
    assert set(loaded) == {"a"}
    assert loaded["a"].offsets == {("t", 0): OffsetAndMetadata(5)}
    # Records of a group all land in the group's partition.
    parts = store.log.partitions  # type: ignore[attr-defined]
    for p, records in parts.items():
        assert {partition_for_group(decode_key(r.key).group, 3) for r in records} == {p}


def test_replay_skips_garbage_records() -> None:
    log = MemoryRecordLog()
    store = GroupStore(log, 1)
    log.append(0, [(b"\x00\x09junk", b"x"), (encode_offset_key("g", "t", 0), b"\x00\x03\x00")], 0)
    store.store_offsets("g", {("t", 1): OffsetAndMetadata(3)}, 0)
    assert store.load_partition(0)["g"].offsets == {("t", 1): OffsetAndMetadata(3)}


def write_some(log: RecordLog) -> GroupStore:
    store = GroupStore(log, 3)
    store.store_offsets("a", {("t", 0): OffsetAndMetadata(1), ("u", 1): OffsetAndMetadata(2)}, 5)
    store.store_group("b", GroupMetadataRecord("consumer", 2, "range", "m", 5, (
        MemberRecord("m", None, "c", "/h", 300, 100, b"sub", b"asg"),)), 5)
    store.store_offsets("a", {("t", 0): OffsetAndMetadata(3, metadata="x")}, 6)
    store.delete_offsets("a", [("u", 1)], 7)
    return store


def test_the_brokers_record_log_appends_to_the_offsets_partitions_and_replays(
        tmp_path: Path) -> None:
    manager = LogManager([str(tmp_path)], LogConfig(), cluster_id="c", node_id=1)
    try:
        rm = ReplicaManager(1, ManagedLogs(manager, {
            CONSUMER_OFFSETS: LogConfig(cleanup_policy="compact")}))
        ensured: list[int] = []

        def ensure_topic() -> None:
            # what the broker's does: create the topic (here: host its partitions) on first use
            if not ensured:
                for p in range(3):
                    rm.apply_partition_state(CONSUMER_OFFSETS, bytes(16), p, 1, 0, 0, [1], [1],
                                             internal=True)
            ensured.append(1)

        log = ReplicatedRecordLog(rm, CONSUMER_OFFSETS, ensure_topic)
        assert list(log.scan(0)) == []  # the topic does not exist yet: nothing to replay
        store = write_some(log)
        assert len(ensured) == 4  # once per append
        expected = write_some(MemoryRecordLog())
        for p in range(3):
            assert store.load_partition(p) == expected.load_partition(p)
            plog = rm.leader_partition(CONSUMER_OFFSETS, p).log
            assert plog.high_watermark == plog.log_end_offset  # appended as leader
        assert store.load_partition(store.partition_for("a"))["a"].offsets == {
            ("t", 0): OffsetAndMetadata(3, metadata="x", commit_timestamp=0)}
    finally:
        manager.shutdown()


def test_transactional_offsets_count_from_their_commit_marker() -> None:
    """TxnOffsetCommit records are replayed as Kafka does: held per producer until its
    COMMIT marker, dropped at its ABORT marker, pending while neither came."""
    log = MemoryRecordLog()
    store = GroupStore(log, 1)
    store.store_offsets("g", {("t", 0): OffsetAndMetadata(1)}, 0)
    store.store_offsets("g", {("t", 0): OffsetAndMetadata(5)}, 0, producer=(9, 0))
    store.store_offsets("g", {("t", 1): OffsetAndMetadata(6)}, 0, producer=(8, 0))
    loaded = store.load_partition(0)["g"]
    assert loaded.offsets == {("t", 0): OffsetAndMetadata(1)}
    assert loaded.pending == {9: {("t", 0): OffsetAndMetadata(5)},
                              8: {("t", 1): OffsetAndMetadata(6)}}
    log.add_marker(0, 9, commit=True)
    log.add_marker(0, 8, commit=False)
    loaded = store.load_partition(0)["g"]
    assert (loaded.offsets, loaded.pending) == ({("t", 0): OffsetAndMetadata(5)}, {})
