"""Full RecordBatch v2 codec: round trips, header fields, control records, delete horizon."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparklog.protocol.batch_header import BatchView, Compression, TimestampType
from sparklog.protocol.control_records import (
    ControlRecordType,
    encode_control_batch,
    parse_control_record_key,
    parse_end_txn_marker,
)
from sparklog.protocol.errors import InvalidRecordError
from sparklog.protocol.records import Record, decode_batch, decode_batches, encode_batch
from tests.helpers.strategies import record_st

CODECS = list(Compression)


def _as_tuples(records):
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


@given(
    st.lists(record_st, max_size=25),
    st.sampled_from(CODECS),
    st.integers(min_value=0, max_value=2**62),
)
@settings(max_examples=80, deadline=None)
def test_round_trip_property(records, codec, base_offset):
    raw = encode_batch(records, base_offset=base_offset, compression=codec)
    batch = decode_batch(raw)
    assert batch.base_offset == base_offset and batch.compression == codec
    assert _as_tuples(batch.records) == [
        (base_offset + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)
    ]
    v = BatchView(raw)
    assert v.record_count == len(records) and v.size == len(raw)
    if records:
        assert v.max_timestamp == max(r.timestamp for r in records)
        assert v.base_timestamp == records[0].timestamp
        assert v.last_offset_delta == len(records) - 1


@given(st.integers(min_value=-(2**62), max_value=2**62))
@settings(max_examples=200, deadline=None)
def test_extreme_timestamps_and_deltas(ts):
    recs = [Record(b"k", b"v", [], ts), Record(None, None, [], 0)]
    got = decode_batch(encode_batch(recs)).records
    assert [r.timestamp for r in got] == [ts, 0]


def test_unencodable_delta_is_typed():
    with pytest.raises(InvalidRecordError):
        encode_batch([Record(b"k", b"v", [], -(2**63)), Record(None, None, [], 2**62)])


def test_producer_fields_and_sequences():
    raw = encode_batch(
        [Record(b"a", b"1", timestamp=5), Record(b"b", b"2", timestamp=6)],
        producer_id=12, producer_epoch=3, base_sequence=2**31 - 1, is_transactional=True,
        partition_leader_epoch=4,
    )
    b = decode_batch(raw)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (12, 3, 2**31 - 1)
    assert b.last_sequence == 0  # sequences wrap at INT32_MAX
    assert BatchView(raw).last_sequence == 0
    assert b.is_transactional and not b.is_control and b.partition_leader_epoch == 4
    with pytest.raises(InvalidRecordError):
        encode_batch([Record(b"a", b"1", timestamp=5)], is_transactional=True)


def test_explicit_offset_deltas_and_missing_timestamps():
    raw = encode_batch(
        [Record(b"a", b"1", offset_delta=0), Record(b"b", b"2", offset_delta=7)], now_ms=42,
        base_offset=10,
    )
    b = decode_batch(raw)
    assert [r.offset for r in b.records] == [10, 17] and b.last_offset == 17
    assert [r.timestamp for r in b.records] == [42, 42]
    with pytest.raises(InvalidRecordError):
        encode_batch([Record(offset_delta=3, timestamp=1), Record(offset_delta=3, timestamp=1)])


def test_log_append_time_reports_max_timestamp():
    raw = encode_batch(
        [Record(b"a", b"1", timestamp=5), Record(b"b", b"2", timestamp=6)],
        timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=999,
    )
    b = decode_batch(raw)
    assert b.timestamp_type == TimestampType.LOG_APPEND_TIME and b.max_timestamp == 999
    assert [r.timestamp for r in b.records] == [999, 999]


def test_delete_horizon_and_compacted_span():
    recs = [Record(b"k1", b"v", timestamp=1000, offset_delta=2),
            Record(b"k2", None, timestamp=1500, offset_delta=5)]
    raw = encode_batch(recs, delete_horizon_ms=86_400_000, last_offset_delta=9, base_offset=100)
    v = BatchView(raw)
    assert v.has_delete_horizon and v.delete_horizon_ms == 86_400_000
    assert v.base_timestamp == 86_400_000 and v.last_offset == 109 and v.record_count == 2
    b = decode_batch(raw)
    assert b.has_delete_horizon and b.delete_horizon_ms == 86_400_000
    assert _as_tuples(b.records) == [(102, 1000, b"k1", b"v", []), (105, 1500, b"k2", None, [])]


def test_empty_batch():
    raw = encode_batch([], base_offset=7, last_offset_delta=3)
    b = decode_batch(raw)
    assert b.records == [] and b.last_offset == 10 and len(raw) == 61


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch(commit):
    raw = encode_control_batch(commit, producer_id=9, producer_epoch=2, coordinator_epoch=17,
                               base_offset=50, timestamp=123)
    b = decode_batch(raw)
    assert b.is_control and b.is_transactional and b.producer_id == 9
    (rec,) = b.records
    assert rec.offset == 50 and rec.timestamp == 123
    assert parse_control_record_key(rec.key) == (
        0, ControlRecordType.COMMIT if commit else ControlRecordType.ABORT)
    assert parse_end_txn_marker(rec) == (commit, 17)
    assert rec.value == b"\x00\x00\x00\x00\x00\x11"


def test_decode_batches_walks_a_log_slice():
    parts = [encode_batch([Record(b"k", b"%d" % i, timestamp=i)], base_offset=i) for i in range(5)]
    got = decode_batches(b"".join(parts))
    assert [b.records[0].value for b in got] == [b"0", b"1", b"2", b"3", b"4"]
    assert decode_batches(b"".join(parts)[:-3], allow_partial_tail=True)[-1].base_offset == 3
