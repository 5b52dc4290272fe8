"""The consumer's view of fetched bytes: offset ranges, markers, aborted transactions; and
the Spark layout the Arrow fetcher gives those rows."""

import pyarrow as pa
import pytest

from sparklog.client.arrow_decode import decode_fetched
from sparklog.client.arrow_fetch import RECORD_SCHEMA, batch_sizes, record_rows, record_schema
from sparklog.protocol.control_records import encode_control_batch
from sparklog.protocol.errors import CorruptRecordError
from sparklog.protocol.records import Record, encode_batch
from sparklog.protocol.topic_partition import TopicPartition
from tests.helpers.batches import make_batch


def _batch(base, values, **kw):
    n = len(values)
    return make_batch(n, keys=[b"k"] * n, values=values, ts=None, base_offset=base, now_ms=1000,
                      **kw)


def _log():
    # 0-2 plain, 3-4 txn of pid 7 (aborted), 5 ABORT marker, 6-7 txn of pid 8, 8 COMMIT, 9 plain
    return b"".join([
        _batch(0, [b"a", b"b", b"c"]),
        _batch(3, [b"x1", b"x2"], producer_id=7, producer_epoch=0, base_sequence=0,
               is_transactional=True),
        encode_control_batch(False, producer_id=7, producer_epoch=0, base_offset=5),
        _batch(6, [b"t1", b"t2"], producer_id=8, producer_epoch=0, base_sequence=0,
               is_transactional=True),
        encode_control_batch(True, producer_id=8, producer_epoch=0, base_offset=8),
        _batch(9, [b"z"]),
    ])


def test_read_uncommitted_skips_markers_only():
    d = decode_fetched(_log(), start_offset=0)
    assert d.batch.column("offset").to_pylist() == [0, 1, 2, 3, 4, 6, 7, 9]
    assert d.batch.column("value").to_pylist()[3:5] == [b"x1", b"x2"]
    assert d.batch.column("timestamp").to_pylist() == [1000] * 8
    assert d.next_offset == 10


def test_read_committed_drops_aborted_transaction():
    d = decode_fetched(_log(), start_offset=0, read_committed=True, aborted=[(7, 3)])
    assert d.batch.column("value").to_pylist() == [b"a", b"b", b"c", b"t1", b"t2", b"z"]


def test_range_partial_tail_and_only_markers():
    raw = _log()
    d = decode_fetched(raw, start_offset=1, end_offset=7)
    assert d.batch.column("offset").to_pylist() == [1, 2, 3, 4, 6]
    assert d.next_offset == 7
    cut = decode_fetched(raw[:-5], start_offset=0)
    assert cut.batch.column("offset").to_pylist()[-1] == 7 and cut.next_offset == 9
    markers = decode_fetched(encode_control_batch(True, producer_id=1, producer_epoch=0,
                                                  base_offset=40), start_offset=40)
    assert markers.batch.num_rows == 0 and markers.next_offset == 41
    assert [n for _, n, _ in batch_sizes(raw)] == [3, 5, 6, 8, 9, 10]


def test_corrupt_bytes_raise():
    raw = bytearray(_log())
    raw[80] ^= 0x55
    with pytest.raises(CorruptRecordError):
        decode_fetched(bytes(raw), start_offset=0)


def test_record_rows_are_sparks_layout():
    d = decode_fetched(_log(), start_offset=0)
    rows = record_rows(d.batch, [TopicPartition("t", 2)], [d.batch.num_rows], include_headers=True)
    assert rows.schema == RECORD_SCHEMA
    assert RECORD_SCHEMA.names == ["key", "value", "topic", "partition", "offset", "timestamp",
                                   "timestampType", "headers"]
    assert set(rows.column("topic").to_pylist()) == {"t"}
    assert set(rows.column("partition").to_pylist()) == {2}
    assert rows.column("timestamp").type == pa.timestamp("us", tz="UTC")
    assert rows.column("timestamp").cast(pa.int64()).to_pylist() == [1_000_000] * 8
    assert rows.column("headers").to_pylist()[0] == []
    with_header = encode_batch([Record(value=b"v", headers=[("h", b"a")])], now_ms=1000)
    one = record_rows(decode_fetched(with_header, start_offset=0).batch, [TopicPartition("t", 2)],
                      [1], include_headers=True)
    assert one.column("headers").to_pylist() == [[{"key": "h", "value": b"a"}]]
    bare = record_rows(d.batch, [TopicPartition("t", 2)], [d.batch.num_rows], include_headers=False)
    assert bare.schema == record_schema(False) and "headers" not in bare.schema.names
    empty = decode_fetched(b"", start_offset=0)
    assert record_rows(empty.batch, [TopicPartition("t", 0)], [0], include_headers=True).num_rows == 0
