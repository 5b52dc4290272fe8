"""BatchView, iter_batch_views and in-place stamping, on batches built by kafka-python."""

import struct

import pytest
from crc32c import crc32c

from sparklog.protocol.batch_header import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    RECORD_COUNT_OFFSET,
    BatchView,
    Compression,
    TimestampType,
    iter_batch_views,
    stamp_crc,
    stamp_log_append_time,
    stamp_offset_and_epoch,
)
from sparklog.protocol.errors import CorruptRecordError, InvalidRecordError

default_records = pytest.importorskip("kafka.record.default_records")


def kp_batch(n=3, *, pid=-1, epoch=-1, seq=-1, txn=False) -> bytes:
    b = default_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=txn, producer_id=pid,
        producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20,
    )
    for i in range(n):
        b.append(i, timestamp=1_000 + i, key=b"k%d" % i, value=b"v" * i, headers=[])
    return bytes(b.build())


def test_header_fields_match_kafka_python():
    raw = kp_batch(5, pid=77, epoch=3, seq=10, txn=True)
    v = BatchView(raw)
    kp = default_records.DefaultRecordBatch(raw)
    assert v.size == len(raw) == kp.size_in_bytes
    assert (v.base_offset, v.last_offset_delta, v.record_count) == (0, 4, 5)
    assert (v.base_timestamp, v.max_timestamp) == (1000, 1004)
    assert (v.producer_id, v.producer_epoch, v.base_sequence, v.last_sequence) == (77, 3, 10, 14)
    assert v.is_transactional and not v.is_control and not v.has_delete_horizon
    assert v.compression == Compression.NONE and v.timestamp_type == TimestampType.CREATE_TIME
    assert v.crc == kp.crc and v.is_valid()
    v.ensure_valid()
    assert bytes(v.raw()) == raw


def test_iter_views_and_partial_tail():
    raw = kp_batch(2) + kp_batch(4) + kp_batch(1)
    views = list(iter_batch_views(raw))
    assert [v.record_count for v in views] == [2, 4, 1]
    cut = raw[:-5]
    with pytest.raises(CorruptRecordError):
        list(iter_batch_views(cut))
    assert [v.record_count for v in iter_batch_views(cut, allow_partial_tail=True)] == [2, 4]


def test_stamping_in_place_keeps_crc_valid():
    buf = bytearray(b"\0" * 7 + kp_batch(3))
    pos = 7
    stamp_offset_and_epoch(buf, pos, 1_000_000, 9)
    v = BatchView(buf, pos)
    assert (v.base_offset, v.last_offset, v.next_offset) == (1_000_000, 1_000_002, 1_000_003)
    assert v.partition_leader_epoch == 9 and v.is_valid()
    stamp_log_append_time(buf, pos, 55_555)
    assert v.max_timestamp == 55_555 and v.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert v.is_valid() and v.crc == crc32c(bytes(buf[pos + ATTRIBUTES_OFFSET :]))
    # kafka-python agrees after our stamping
    kp = default_records.DefaultRecordBatch(bytes(buf[pos:]))
    assert kp.validate_crc() and kp.timestamp_type == 1 and kp.max_timestamp == 55_555
    buf[pos + 40] ^= 1
    assert not v.is_valid()
    stamp_crc(buf, pos)
    assert v.is_valid()


def test_bad_magic_and_truncation_are_typed():
    raw = bytearray(kp_batch(1))
    with pytest.raises(CorruptRecordError):
        BatchView(raw[: BATCH_HEADER_SIZE - 1])
    with pytest.raises(CorruptRecordError):
        BatchView(raw[:-1])
    raw[16] = 1
    with pytest.raises(InvalidRecordError):
        BatchView(raw)


def test_inconsistent_header_is_invalid_record():
    raw = bytearray(kp_batch(3))
    struct.pack_into(">i", raw, RECORD_COUNT_OFFSET, -1)
    stamp_crc(raw, 0)
    with pytest.raises(InvalidRecordError):
        BatchView(raw).ensure_valid()
    raw = bytearray(kp_batch(3))
    raw[30] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        BatchView(raw).ensure_valid()
