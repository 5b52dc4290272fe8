"""Cross-checks against kafka-python's own record code (kafka.record.default_records).

Both directions, every codec, with keys, null keys, null values and headers, for 0, a few
and 10 000 records: batches sparklog encodes must read back identically through
kafka-python's DefaultRecordBatch, and batches kafka-python's builder writes must decode
identically with sparklog (per-record decoder and the Arrow decoder)."""

import pytest

from sparklog.protocol.batch_header import BatchView, Compression
from sparklog.protocol.records import Record, decode_batch, encode_batch

default_records = pytest.importorskip("kafka.record.default_records")
kcodec = pytest.importorskip("kafka.codec")

_HAS = {
    Compression.NONE: lambda: True,
    Compression.GZIP: kcodec.has_gzip,
    Compression.SNAPPY: kcodec.has_snappy,
    Compression.LZ4: kcodec.has_lz4,
    Compression.ZSTD: kcodec.has_zstd,
}


def make_records(n: int) -> list[Record]:
    out = []
    for i in range(n):
        key = None if i % 5 == 0 else b"key-%d" % i
        value = None if i % 7 == 3 else (b"value-%d-" % i) * (i % 13)
        headers = [] if i % 3 else [("trace", b"t%d" % i), ("empty", b""), ("nul", None)]
        out.append(Record(key, value, headers, 1_700_000_000_000 + (i * 37) % 1000))
    return out


def expected(records, base_offset):
    return [(base_offset + i, r.timestamp, r.key, r.value, r.headers)
            for i, r in enumerate(records)]


def read_with_kafka_python(raw: bytes):
    batch = default_records.DefaultRecordBatch(raw)
    assert batch.validate_crc()
    return batch, [
        (r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in batch
    ]


def build_with_kafka_python(records, codec, **kw) -> bytes:
    b = default_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=int(codec), is_transactional=kw.get("txn", False),
        producer_id=kw.get("pid", -1), producer_epoch=kw.get("epoch", -1),
        base_sequence=kw.get("seq", -1), batch_size=1 << 30,
    )
    for i, r in enumerate(records):
        b.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=r.headers)
    return bytes(b.build())


SIZES = [0, 1, 17, 10_000]
# kafka-python needs python-snappy / lz4 / zstandard for these codecs (dev dependencies)
_MISSING = "kafka-python cannot use {} here: pip install python-snappy lz4 zstandard"


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("codec", list(Compression))
def test_sparklog_encodes_kafka_python_decodes(codec, n):
    if not _HAS[codec]():
        pytest.skip(_MISSING.format(codec.name))
    records = make_records(n)
    raw = encode_batch(records, base_offset=1000, compression=codec, producer_id=4,
                       producer_epoch=1, base_sequence=20)
    batch, got = read_with_kafka_python(raw)
    assert got == expected(records, 1000)
    assert batch.compression_type == codec and batch.producer_id == 4
    assert batch.base_sequence == 20 and batch.base_offset == 1000


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("codec", list(Compression))
def test_kafka_python_encodes_sparklog_decodes(codec, n):
    if not _HAS[codec]():
        pytest.skip(_MISSING.format(codec.name))
    records = make_records(n)
    raw = build_with_kafka_python(records, codec, pid=7, epoch=2, seq=5, txn=True)
    view = BatchView(raw)
    view.ensure_valid()
    assert view.record_count == n and view.is_transactional
    if n >= 17:  # kafka-python keeps tiny batches uncompressed when compression does not pay
        assert view.compression == codec
    batch = decode_batch(raw)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == \
        expected(records, 0)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 2, 5)


@pytest.mark.parametrize("codec", list(Compression))
def test_arrow_decoder_agrees_with_kafka_python(codec):
    ra = pytest.importorskip("sparklog.protocol.record_arrow")
    records = make_records(500)
    raw = build_with_kafka_python(records, codec)
    tbl = ra.decode_batches_to_arrow(raw)
    _, kp = read_with_kafka_python(raw)
    assert tbl.column("offset").to_pylist() == [r[0] for r in kp]
    assert tbl.column("timestamp").to_pylist() == [r[1] for r in kp]
    assert tbl.column("key").to_pylist() == [r[2] for r in kp]
    assert tbl.column("value").to_pylist() == [r[3] for r in kp]
    assert [[(h["key"], h["value"]) for h in hs] for hs in tbl.column("headers").to_pylist()] \
        == [r[4] for r in kp]


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch_reads_as_kafka_python_control_record(commit):
    from sparklog.protocol.control_records import encode_control_batch

    raw = encode_control_batch(commit, producer_id=42, producer_epoch=3, coordinator_epoch=9,
                               base_offset=77, timestamp=1234)
    batch, _ = read_with_kafka_python(raw)
    assert batch.is_control_batch and batch.is_transactional and batch.producer_id == 42
    (rec,) = list(default_records.DefaultRecordBatch(raw))
    assert rec.offset == 77 and rec.commit == commit and rec.abort == (not commit)


def test_log_append_time_stamp_reads_in_kafka_python():
    from sparklog.protocol.batch_header import stamp_log_append_time, stamp_offset_and_epoch

    raw = bytearray(build_with_kafka_python(make_records(50), Compression.LZ4))
    stamp_offset_and_epoch(raw, 0, 5000, 3)
    stamp_log_append_time(raw, 0, 1_800_000_000_000)
    batch, got = read_with_kafka_python(bytes(raw))
    assert batch.timestamp_type == 1 and batch.base_offset == 5000
    assert [g[0] for g in got] == list(range(5000, 5050))
    assert {g[1] for g in got} == {1_800_000_000_000}
    ours = decode_batch(bytes(raw))
    assert [r.timestamp for r in ours.records] == [1_800_000_000_000] * 50
