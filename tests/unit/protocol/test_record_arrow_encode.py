"""The vectorised batch encoder, checked by decoding with kafka-python's v2 record reader."""

import random

import numpy as np
import pyarrow as pa
import pytest
from kafka.record.default_records import DefaultRecordBatch

from sparklog.protocol.batch_header import BatchView
from sparklog.protocol.record_arrow_encode import encode_batches

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _decode(batches):
    out = []
    for b in batches:
        raw = bytes(b.data)
        view = BatchView(raw)
        view.ensure_valid()
        kb = DefaultRecordBatch(raw)
        assert kb.validate_crc()
        recs = list(kb)
        assert len(recs) == b.record_count == view.record_count
        out.extend(recs)
    return out


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_round_trip_mixed_nulls_headers_every_codec(codec):
    rng = random.Random(codec)
    n = 700
    vals = [rng.randbytes(rng.randint(0, 300)) if i % 7 else None for i in range(n)]
    keys = [rng.randbytes(rng.randint(0, 20)) if i % 5 else None for i in range(n)]
    ts = np.arange(n, dtype=np.int64) * 997 + 1_700_000_000_000
    hdrs = [[(f"h{j}", rng.randbytes(j) if j != 1 else None) for j in range(i % 4)]
            if i % 9 else None for i in range(n)]
    harr = pa.array([[{"key": k, "value": v} for k, v in h] if h is not None else None
                     for h in hdrs], HEADERS)
    batches = encode_batches(pa.array(vals, pa.binary()), pa.array(keys, pa.binary()), ts, harr,
                             compression=codec, max_batch_bytes=16384)
    assert len(batches) > 1
    assert all(BatchView(bytes(b.data)).compression == codec for b in batches)
    recs = _decode(batches)
    assert [r.value for r in recs] == vals
    assert [r.key for r in recs] == keys
    assert [r.timestamp for r in recs] == ts.tolist()
    assert [list(r.headers) for r in recs] == [h or [] for h in hdrs]
    # offsets restart at 0 in every batch (the broker assigns real ones)
    assert recs[0].offset == 0


def test_fixed_size_values_use_run_path_and_split_on_size():
    rng = random.Random(1)
    vals = [rng.randbytes(100) for _ in range(20_000)]
    batches = encode_batches(pa.array(vals, pa.binary()), max_batch_bytes=64 * 1024, now_ms=42)
    assert len(batches) > 20
    assert all(len(b.data) <= 64 * 1024 for b in batches)
    recs = _decode(batches)
    assert [r.value for r in recs] == vals
    assert all(r.timestamp == 42 for r in recs)
    assert sum(b.record_count for b in batches) == len(vals)
    assert [b.first_index for b in batches][:2] == [0, batches[0].record_count]


def test_sliced_string_columns_and_sequences():
    vals = pa.array([f"value-{i}" for i in range(100)]).slice(10, 50)
    keys = pa.array([f"k{i}" for i in range(100)]).slice(10, 50)
    batches = encode_batches(vals, keys, producer_id=7, producer_epoch=2, base_sequence=40,
                             max_batch_bytes=400)
    seq = 40
    for b in batches:
        v = BatchView(bytes(b.data))
        assert (v.producer_id, v.producer_epoch, v.base_sequence) == (7, 2, seq)
        seq += b.record_count
    recs = _decode(batches)
    assert [r.value.decode() for r in recs] == [f"value-{i}" for i in range(10, 60)]
    assert [r.key.decode() for r in recs] == [f"k{i}" for i in range(10, 60)]
