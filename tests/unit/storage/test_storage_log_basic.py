"""PartitionLog round trips: segment rolls, index lookups at every offset, time lookups,
read limits, Kafka file layout, and header stamping without re-encoding."""

from __future__ import annotations

import os
import struct

import pytest

from sparklog.protocol.batch_header import BatchView, iter_batch_views
from sparklog.protocol.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from sparklog.protocol.records import decode_batches
from sparklog.storage import LogConfig, PartitionLog
from sparklog.storage.log_info import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from sparklog.storage.log_loader import parse_topic_partition
from tests.helpers.batches import make_batch, read_all, read_records, strip_stamped

SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=150)


def _fill(log, batches=60, per=3, ts0=10_000):
    raws = []
    for i in range(batches):
        raw = make_batch(per, ts=ts0 + 10 * i, key_prefix=b"b%d-" % i)
        raws.append(raw)
        info = log.append_as_leader(raw, 5)
        assert info.first_offset == i * per and info.last_offset == i * per + per - 1
    return raws


def test_round_trip_over_segment_rolls_and_every_offset(tmp_path):
    log = PartitionLog(str(tmp_path / "orders-0"), SMALL)
    raws = _fill(log)
    assert log.num_segments >= 5
    assert log.log_end_offset == 180
    got = read_all(log)
    assert [b.base_offset for b in got] == [3 * i for i in range(60)]
    # every offset finds the batch holding it, first
    for o in range(180):
        info = log.read(o, 1)
        first = next(iter_batch_views(info.read_bytes()))
        assert first.base_offset <= o <= first.last_offset
        assert info.next_offset == first.next_offset
    # a batch read back equals the bytes appended, except the stamped header fields
    data = log.read(0, 1 << 20).read_bytes()
    for raw, view in zip(raws, iter_batch_views(data), strict=True):
        assert strip_stamped(bytes(view.raw())) == strip_stamped(raw)
        assert view.partition_leader_epoch == 5
        assert view.is_valid()
    # reopen (clean) and repeat the lookups from the loaded indexes
    log.close()
    log2 = PartitionLog(str(tmp_path / "orders-0"), SMALL, recovery_point=180, clean_shutdown=True)
    assert log2.log_end_offset == 180
    for o in range(0, 180, 7):
        first = next(iter_batch_views(log2.read(o, 1).read_bytes()))
        assert first.base_offset <= o <= first.last_offset
    assert log2.append_as_leader(make_batch(2), 5).first_offset == 180
    log2.close()


def test_read_limits(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), SMALL)
    _fill(log, 20)
    size1 = len(make_batch(3, ts=0, key_prefix=b"b0-"))
    # max_bytes below one batch: min_one_message returns exactly one whole batch
    info = log.read(0, 10)
    assert len(decode_batches(info.read_bytes())) == 1
    assert log.read(0, 10, min_one_message=False).slices == []
    # whole batches only, never more than max_bytes
    info = log.read(0, size1 * 4 + 5)
    assert info.size <= size1 * 4 + 5
    assert len(decode_batches(info.read_bytes())) == 4
    # max_offset excludes the batch holding it
    info = log.read(0, 1 << 20, max_offset=10)
    batches = decode_batches(info.read_bytes())
    assert batches[-1].last_offset < 10 and info.next_offset == batches[-1].next_offset
    # reads cross segments and stop at the LEO
    info = log.read(0, 1 << 20)
    assert len(info.slices) == log.num_segments and info.next_offset == 60
    assert log.read(60, 100).slices == []
    with pytest.raises(OffsetOutOfRangeError):
        log.read(61, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    sl = info.slices[0]
    assert sl.size > 0 and sl.fileno() is not None and sl.path.endswith(".log")
    log.close()


def test_time_lookups(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), SMALL)
    _fill(log, 40, ts0=10_000)  # batch i: records at 10000+10i, +1, +2
    for target in (0, 10_000, 10_001, 10_003, 10_005, 10_010, 10_155, 10_392):
        hit = log.offset_for_timestamp(target)
        # model: first record with timestamp >= target
        i, j = divmod(target - 10_000, 10) if target >= 10_000 else (0, 0)
        if j > 2:
            i, j = i + 1, 0
        assert hit is not None and hit.offset == 3 * i + j, target
        assert hit.timestamp >= target and hit.leader_epoch == 5
    assert log.offset_for_timestamp(10_393) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert log.offset_for_timestamp(LATEST_TIMESTAMP).offset == 120
    mx = log.offset_for_timestamp(MAX_TIMESTAMP)
    assert (mx.timestamp, mx.offset) == (10_392, 119)
    log.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python's resource loading
def test_kafka_layout_and_index_widths(tmp_path):
    d = tmp_path / "my-topic-with-dashes-12"
    log = PartitionLog(str(d), SMALL, topic_id=bytes(range(16)))
    assert (log.topic, log.partition) == ("my-topic-with-dashes", 12)
    assert parse_topic_partition(str(d)) == ("my-topic-with-dashes", 12)
    _fill(log, 30)
    log.close()
    names = sorted(os.listdir(d))
    logs = [n for n in names if n.endswith(".log")]
    assert logs[0] == "00000000000000000000.log"
    assert all(len(n) == 24 and n[:20].isdigit() for n in logs)
    for n in logs:
        base = int(n[:20])
        idx = (d / (n[:20] + ".index")).read_bytes()
        tix = (d / (n[:20] + ".timeindex")).read_bytes()
        assert len(idx) % 8 == 0 and len(tix) % 12 == 0
        data = (d / n).read_bytes()
        for rel, pos in struct.iter_unpack(">II", idx):
            view = BatchView(data, pos)  # positions point at batch starts
            assert view.base_offset <= base + rel <= view.last_offset
        prev = -1
        for ts, _rel in struct.iter_unpack(">qI", tix):
            assert ts > prev
            prev = ts
    # a third-party reader (kafka-python) walks our .log files as Kafka batches
    from kafka.record.memory_records import MemoryRecords

    expect = 0
    for n in logs:
        mr = MemoryRecords((d / n).read_bytes())
        while (batch := mr.next_batch()) is not None:
            assert batch.validate_crc() and batch.base_offset == expect
            offsets = [r.offset for r in batch]
            assert offsets == list(range(expect, expect + 3))
            expect += 3
    assert expect == 90
    assert "leader-epoch-checkpoint" in names
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n1\n5 0\n"
    assert (d / "partition.metadata").read_text().startswith("version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw")
    assert any(n.endswith(".snapshot") for n in names)


def test_validation_errors(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(max_message_bytes=500))
    good = make_batch(2)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytes(bad_crc), 0)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good[:-3], 0)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(make_batch(5, value_size=200), 0)
    magic1 = bytearray(good)
    magic1[16] = 1
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(bytes(magic1), 0)
    # nothing of the rejected requests was written; a multi-batch request is atomic
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good + bytes(bad_crc), 0)
    assert log.log_end_offset == 0 and log.size_bytes == 0
    info = log.append_as_leader(good + good, 0)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 3, 4)
    log.close()


def test_log_append_time_stamps_header_only(tmp_path):
    now = [1_700_000_000_000]
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(message_timestamp_type="LogAppendTime"),
                       time_ms=lambda: now[0])
    raw = make_batch(3, ts=5)
    info = log.append_as_leader(raw, 0)
    assert info.log_append_time == now[0]
    view = BatchView(log.read(0, 1000).read_bytes())
    assert view.is_valid() and view.max_timestamp == now[0]
    assert view.timestamp_type == 1
    assert bytes(view.records_bytes()) == raw[61:]  # records untouched
    log.close()


def test_log_config_from_props():
    cfg = LogConfig.from_props({"segment.bytes": "1048576", "cleanup.policy": "compact,delete",
                                "retention.ms": "-1"})
    assert cfg.segment_bytes == 1048576 and cfg.compact and cfg.delete and cfg.retention_ms == -1
    assert LogConfig().to_props()["segment.ms"] == "604800000"
    assert LogConfig().to_props()["flush.messages"] == str(2**63 - 1)
    for bad in ({"segment.bytes": "abc"}, {"segment.bytes": "1"}, {"no.such.key": "1"},
                {"cleanup.policy": "forever"}, {"message.timestamp.type": "Now"},
                {"min.cleanable.dirty.ratio": "2"}):
        with pytest.raises(InvalidConfigError):
            LogConfig.from_props(bad)
    b = LogConfig.from_broker_props({"log.segment.bytes": "4096", "log.retention.hours": "2",
                                     "num.network.threads": "3"})
    assert b.segment_bytes == 4096 and b.retention_ms == 7_200_000


def test_roll_on_time_index_full_and_only_active_written(tmp_path):
    now = [1_000_000]
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(segment_ms=1000), time_ms=lambda: now[0])
    log.append_as_leader(make_batch(1, ts=now[0]), 0)
    log.append_as_leader(make_batch(1, ts=now[0] + 999), 0)
    assert log.num_segments == 1
    log.append_as_leader(make_batch(1, ts=now[0] + 1001), 0)  # message time passed segment.ms
    assert log.num_segments == 2 and log.active_segment.base_offset == 2
    sealed = log.segments[0]
    size = os.path.getsize(sealed.log_path)
    log.append_as_leader(make_batch(1, ts=now[0] + 1002), 0)
    assert os.path.getsize(sealed.log_path) == size
    log.close()
    # a full offset index rolls too (segment.index.bytes = 2 entries)
    log = PartitionLog(str(tmp_path / "u-0"), LogConfig(segment_index_bytes=16, index_interval_bytes=0))
    for _ in range(6):
        log.append_as_leader(make_batch(1), 0)
    assert log.num_segments >= 2
    assert all(s.offset_index.entries <= 2 for s in log.segments)
    log.close()


def test_flush_policy_moves_recovery_point(tmp_path):
    now = [0]
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(flush_messages=4), time_ms=lambda: now[0])
    log.append_as_leader(make_batch(3), 0)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(2), 0)  # 5 unflushed messages >= flush.messages
    assert log.recovery_point == 5
    log.close()
    log = PartitionLog(str(tmp_path / "u-0"), LogConfig(flush_ms=100), time_ms=lambda: now[0])
    log.append_as_leader(make_batch(3), 0)
    assert not log.flush_if_due() and log.recovery_point == 0
    now[0] += 100
    assert log.flush_if_due() and log.recovery_point == 3
    log.close()


def test_follower_append_and_listeners(tmp_path):
    from sparklog.storage.errors import UnexpectedAppendOffsetError

    leader = PartitionLog(str(tmp_path / "l" / "t-0"))
    follower = PartitionLog(str(tmp_path / "f" / "t-0"))
    woken = []
    follower.add_append_listener(lambda lg: woken.append(lg.log_end_offset))
    for _ in range(3):
        leader.append_as_leader(make_batch(2), 7)
    data = leader.read(0, 1 << 20).read_bytes()
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, 5) and woken == [6]
    assert follower.read(0, 1 << 20).read_bytes() == data  # byte-identical replica
    assert follower.latest_epoch == 7
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(data)
    follower.update_high_watermark(6)
    assert woken == [6, 6] and follower.high_watermark == 6
    leader.close()
    follower.close()


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_round_trip_time_lookup_and_compaction(tmp_path, codec):
    from sparklog.protocol.records import Record, encode_batch
    from sparklog.storage.cleaner import clean_log

    cfg = LogConfig(segment_bytes=300, cleanup_policy="compact", file_delete_delay_ms=0,
                    min_cleanable_dirty_ratio=0.0)
    log = PartitionLog(str(tmp_path / f"z-{codec}"), cfg)
    raws = []
    for i in range(12):
        recs = [Record(key=b"k%d" % (j % 3), value=b"v%d-%d" % (i, j) * 10, timestamp=100 * i + j)
                for j in range(4)]
        raw = encode_batch(recs, compression=codec)
        raws.append(raw)
        log.append_as_leader(raw, 0)
    log.update_high_watermark(log.log_end_offset)
    stored = [bytes(v.raw()) for v in iter_batch_views(log.read(0, 1 << 20).read_bytes())]
    assert [strip_stamped(b) for b in stored] == [strip_stamped(r) for r in raws]
    hit = log.offset_for_timestamp(502)
    assert (hit.offset, hit.timestamp) == (22, 502)
    clean_log(log, force=True)
    recs = read_records(log)
    sealed_end = log.active_segment.base_offset
    sealed = [r for r in recs if r.offset < sealed_end]
    assert len({r.key for r in sealed}) == len(sealed) <= 3
    assert all(b.compression == codec for b in read_all(log))
    log.close()
