"""The vectorised Arrow decoder must agree with the per-record decoder on every input."""

import random

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparklog.protocol import record_arrow as ra
from sparklog.protocol import record_arrow_fixed
from sparklog.protocol.batch_header import Compression, TimestampType
from sparklog.protocol.control_records import encode_control_batch
from sparklog.protocol.errors import CorruptRecordError
from sparklog.protocol.records import Record, decode_batches, encode_batch
from tests.helpers.strategies import record_st


@pytest.fixture(autouse=True, params=["vectorised", "small-input"])
def path(request, monkeypatch):
    """Every test runs through both the vectorised path and the small-input fallback."""
    monkeypatch.setattr(ra, "SMALL_INPUT_ROWS", 0 if request.param == "vectorised" else 1 << 30)
    return request.param


def rows_of(rb: pa.RecordBatch):
    return list(zip(
        rb.column("offset").to_pylist(), rb.column("timestamp").to_pylist(),
        rb.column("key").to_pylist(), rb.column("value").to_pylist(),
        [[(h["key"], h["value"]) for h in hs] for hs in rb.column("headers").to_pylist()],
        strict=True,
    ))


def expected_rows(raw: bytes):
    return [(r.offset, r.timestamp, r.key, r.value, r.headers)
            for b in decode_batches(raw) if not b.is_control for r in b.records]


@given(
    st.lists(
        st.tuples(st.lists(record_st, max_size=40), st.sampled_from(list(Compression))),
        min_size=1, max_size=4,
    ),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_agrees_with_per_record_decoder(batches):
    # each batch its own codec: uncompressed sections before a compressed one are copied into
    # the buffer the compressed ones are decompressed into
    raw = b"".join(
        encode_batch(recs, base_offset=1000 * i, compression=codec)
        for i, (recs, codec) in enumerate(batches)
    )
    assert rows_of(ra.decode_batches_to_arrow(raw)) == expected_rows(raw)


@given(
    st.integers(min_value=1, max_value=3000),
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=0, max_value=300),
    st.integers(min_value=0, max_value=5),
    st.booleans(),
)
@settings(max_examples=25, deadline=None)
def test_piecewise_uniform_batches(n, key_len, val_len, jitter, nulls):
    """Fixed-size payloads exercise the equal-size-run and fixed-layout fast paths, with
    size changes where offset/timestamp deltas gain a varint byte and random jitter."""
    rng = random.Random(n * 7 + key_len)
    recs = []
    for i in range(n):
        vl = val_len + (rng.randrange(jitter + 1) if jitter and rng.random() < 0.05 else 0)
        recs.append(Record(
            None if nulls and i % 11 == 0 else b"k" * key_len,
            None if nulls and i % 13 == 5 else bytes([i % 251]) * vl,
            [], 1_700_000_000_000 + i * 3,
        ))
    raw = b"".join(encode_batch(recs[i:i + 700], base_offset=i) for i in range(0, n, 700))
    want = expected_rows(raw)
    saved = record_arrow_fixed.PY_LAYOUT_MAX_RUNS
    try:
        for limit in (0, 1 << 20):  # vectorised and Python layout detection
            record_arrow_fixed.PY_LAYOUT_MAX_RUNS = limit
            assert rows_of(ra.decode_batches_to_arrow(raw)) == want
    finally:
        record_arrow_fixed.PY_LAYOUT_MAX_RUNS = saved


def test_many_headers_and_long_varints():
    recs = [Record(b"k", b"v", [(f"h{j}", bytes([j]) * j) for j in range(50)], -5),
            Record(None, b"x" * 20_000, [], 2**62),
            Record(b"k" * 300, None, [("a", None)] * 40, 0)]
    raw = encode_batch(recs, compression=Compression.LZ4)
    assert rows_of(ra.decode_batches_to_arrow(raw)) == expected_rows(raw)


def test_columns_types_and_options():
    raw = (encode_batch([Record(b"a", b"1", timestamp=5)], base_offset=10)
           + encode_control_batch(True, producer_id=1, producer_epoch=0, base_offset=11)
           + encode_batch([Record(b"b", b"2", timestamp=6), Record(b"c", b"3", timestamp=7)],
                          base_offset=12, timestamp_type=TimestampType.LOG_APPEND_TIME,
                          log_append_time=99))
    rb = ra.decode_batches_to_arrow(raw, topic="t1", partition=4)
    assert rb.schema == ra.arrow_schema(topic=True, partition=True)
    assert rb.column("offset").to_pylist() == [10, 12, 13]  # control batch skipped
    assert rb.column("timestamp").to_pylist() == [5, 99, 99]
    assert rb.column("timestampType").to_pylist() == [0, 1, 1]
    assert rb.column("topic").to_pylist() == ["t1"] * 3
    assert rb.column("partition").to_pylist() == [4] * 3
    assert ra.decode_batches_to_arrow(raw, skip_control=False).num_rows == 4
    assert ra.decode_batches_to_arrow(raw, min_offset=13).column("offset").to_pylist() == [13]
    kept = ra.decode_batches_to_arrow(raw, keep_batch=lambda v: v.base_offset != 12)
    assert kept.column("offset").to_pylist() == [10]
    view = ra.decode_batches_to_arrow(raw, binary_view=True)
    assert view.schema.field("value").type == pa.binary_view()
    assert view.column("value").to_pylist() == [b"1", b"2", b"3"]
    empty = ra.decode_batches_to_arrow(b"")
    assert empty.num_rows == 0 and empty.schema == ra.arrow_schema()
    # a fetch may end mid-batch: the partial tail is dropped
    assert ra.decode_batches_to_arrow(raw[:-4]).num_rows == 1
    one = ra.decode_batch_to_arrow(raw, 0)
    assert one.column("offset").to_pylist() == [10]


def test_invalid_utf8_header_key_is_corrupt():
    raw = bytearray(encode_batch([Record(b"k", b"v", [("ab", b"x")], timestamp=1)]))
    i = raw.index(b"ab")
    raw[i] = 0xFF
    from sparklog.protocol.batch_header import stamp_crc
    stamp_crc(raw, 0)
    with pytest.raises(CorruptRecordError):
        ra.decode_batches_to_arrow(bytes(raw))


def test_verify_crc_false_still_rejects_bad_structure():
    raw = bytearray(encode_batch([Record(b"k", b"v" * 50, timestamp=1)] * 40))
    raw[30] ^= 0x01  # inside the CRC range: only a CRC check notices
    with pytest.raises(CorruptRecordError):
        ra.decode_batches_to_arrow(bytes(raw))
    assert ra.decode_batches_to_arrow(bytes(raw), verify_crc=False).num_rows == 40
    raw[61] = 0x7F  # first record's length -> the chain no longer tiles the batch
    with pytest.raises(CorruptRecordError):
        ra.decode_batches_to_arrow(bytes(raw), verify_crc=False)


@pytest.mark.parametrize("key_len,null_key,val_len,null_value", [
    (20, False, 0, True),  # long keys; empty and null values encode to the same size
    (0, True, 100, False),  # long values; empty and null keys encode to the same size
    (5, False, 0, True),  # inline keys, same again
])
def test_same_size_records_with_other_layouts(key_len, null_key, val_len, null_value):
    """Records that keep the run's size but not its layout (a null where the others hold an
    empty value) fall out of the layout group and are decoded by the general parser."""
    recs = [Record(None if null_key and i % 3 == 1 else b"k" * key_len,
                   None if null_value and i % 3 == 1 else b"v" * val_len, [], 1000 + i)
            for i in range(300)]
    raw = encode_batch(recs)
    assert rows_of(ra.decode_batches_to_arrow(raw)) == expected_rows(raw)


def test_nine_byte_timestamp_deltas_in_a_run():
    recs = [Record(b"k" * 16, b"v" * 40, [], 0 if i == 0 else 2**61 + i) for i in range(200)]
    raw = encode_batch(recs)
    assert rows_of(ra.decode_batches_to_arrow(raw)) == expected_rows(raw)


def _section_batches(base: int, n: int, compression: int = Compression.NONE) -> bytes:
    return encode_batch([Record(b"k%d" % i, b"v%d-%d" % (base, i), timestamp=base + i)
                         for i in range(n)], base_offset=base, compression=compression)


@pytest.mark.parametrize("layout", ["one response", "one bytearray", "separate buffers",
                                    "compressed"])
def test_sections_decode_in_one_pass(layout):
    """Several partitions' records (slices of one Fetch response, or not) in one decode:
    each section's rows within its own bounds, section after section, with its count."""
    codec = Compression.LZ4 if layout == "compressed" else Compression.NONE
    parts = [_section_batches(0, 5) + _section_batches(5, 5, codec), b"",
             _section_batches(100, 7, codec), _section_batches(40, 3)]
    if layout == "separate buffers":
        records = [memoryview(p) for p in parts]
    else:  # slices of one bytes object, as the parsed Fetch response hands them over
        whole = b"junk" + b"".join(parts) + b"tail"
        if layout == "one bytearray":  # what the connection reads responses into
            whole = bytearray(whole)
        at, records = 4, []
        for p in parts:
            records.append(memoryview(whole)[at : at + len(p)])
            at += len(p)
    sections = [ra.Section(records[0], min_offset=3, end_offset=8), ra.Section(records[1]),
                ra.Section(records[2], keep_batch=lambda v: True, min_offset=104),
                ra.Section(records[3], end_offset=40)]
    dec = ra.decode_sections_to_arrow(sections)
    assert dec.count.tolist() == [5, 0, 3, 0]
    assert sum(dec.rows.tolist()) == dec.batch.num_rows
    rb = pa.concat_batches([dec.wanted(i) for i in range(4)])
    assert rb.column("offset").to_pylist() == [3, 4, 5, 6, 7, 104, 105, 106]
    assert rb.column("value").to_pylist()[:5] == [b"v0-3", b"v0-4", b"v5-0", b"v5-1", b"v5-2"]
    assert rb.column("value").to_pylist()[5:] == [b"v100-4", b"v100-5", b"v100-6"]
    assert rb.column("timestamp").to_pylist()[5:] == [104, 105, 106]
