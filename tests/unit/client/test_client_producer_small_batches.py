"""Small producer batches take the record-by-record encoder; the bytes must mean the same as
the vectorised encoder's (checked by decoding both with the protocol layer's decoder)."""

import pytest

from sparklog.client import producer_batch
from sparklog.client.producer_batch import BatchFormat, ProducerBatch
from sparklog.protocol.compression import codec_for_name
from sparklog.protocol.records import decode_batch
from sparklog.protocol.topic_partition import TopicPartition


def _batch(rows):  # noqa: ANN001, ANN202
    b = ProducerBatch(TopicPartition("t", 0), 0.0)
    b.created_ms = 1_700_000_000_000
    for key, value, headers, ts in rows:
        b.append(key, value, ts, headers, None)
    b.base_sequence = 7
    return b


ROWS = [
    (b"k1", b"v1", None, None),
    (None, b"v2", [("h", b"x"), ("n", None)], 1_700_000_000_123),
    (b"", None, None, None),  # empty key, tombstone
    (b"k4", b"v" * 300, [("only", b"")], 1_699_999_999_000),
]


@pytest.mark.parametrize("compression", ["none", "gzip", "lz4"])
@pytest.mark.parametrize("rows", [ROWS, ROWS[:1], [(None, b"x", None, None)] * 5])
def test_small_path_means_what_the_vectorised_path_means(monkeypatch, compression, rows):
    fmt = BatchFormat(codec_for_name(compression), None, producer_id=42, producer_epoch=3)
    small = _batch(rows).encode(fmt)
    monkeypatch.setattr(producer_batch, "SMALL_BATCH_RECORDS", 0)
    big = _batch(rows).encode(fmt)
    a, b = decode_batch(bytes(small.data)), decode_batch(bytes(big.data))
    assert small.record_count == big.record_count == len(rows)
    assert small.max_timestamp == big.max_timestamp
    for field in ("attributes", "producer_id", "producer_epoch", "base_sequence",
                  "last_offset_delta", "base_timestamp", "max_timestamp"):
        assert getattr(a, field) == getattr(b, field), field
    got = [(r.key, r.value, r.headers, r.timestamp, r.offset) for r in a.records]
    want = [(r.key, r.value, r.headers, r.timestamp, r.offset) for r in b.records]
    assert got == want
    assert [(r.key, r.value) for r in a.records] == [(k, v) for k, v, _h, _t in rows]
