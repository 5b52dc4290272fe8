"""Corrupt one byte anywhere in a batch: decoding raises a typed error, never wrong records.

Bytes 0..7 (baseOffset) and 12..15 (partitionLeaderEpoch) sit outside Kafka's CRC by design
(the broker stamps them), so no decoder can notice a flip there; for those positions the
test checks that the records themselves still come back unchanged."""

import random

import pytest

from sparklog.protocol.batch_header import BATCH_HEADER_SIZE, Compression, stamp_crc, write_header
from sparklog.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    SparklogError,
    UnsupportedCompressionError,
)
from sparklog.protocol.records import Record, decode_batch, encode_batch

TYPED = (CorruptRecordError, InvalidRecordError)
UNPROTECTED = set(range(0, 8)) | set(range(12, 16))


def records(n, seed=0):
    rng = random.Random(seed)
    return [
        Record(
            None if i % 4 == 0 else rng.randbytes(rng.randrange(1, 20)),
            None if i % 9 == 1 else rng.randbytes(rng.randrange(0, 120)),
            [(f"h{i}", rng.randbytes(3)), ("n", None)] if i % 3 == 0 else [],
            1_700_000_000_000 + rng.randrange(10_000),
        )
        for i in range(n)
    ]


def _decoders():
    out = [("records", lambda raw: [(r.offset, r.key, r.value, r.headers, r.timestamp)
                                    for r in decode_batch(raw).records])]
    try:
        from sparklog.protocol import record_arrow
    except ImportError:  # pragma: no cover
        return out

    def arrow_with(threshold):
        def arrow(raw):
            saved = record_arrow.SMALL_INPUT_ROWS
            record_arrow.SMALL_INPUT_ROWS = threshold
            try:
                t = record_arrow.decode_batches_to_arrow(raw, allow_partial_tail=False)
            finally:
                record_arrow.SMALL_INPUT_ROWS = saved
            return list(zip(t.column("offset").to_pylist(), t.column("key").to_pylist(),
                            t.column("value").to_pylist(),
                            [[(h["key"], h["value"]) for h in hs]
                             for hs in t.column("headers").to_pylist()],
                            t.column("timestamp").to_pylist(), strict=True))
        return arrow

    out.append(("arrow", arrow_with(0)))  # always the vectorised path
    out.append(("arrow-small", arrow_with(1 << 30)))  # always the small-input path
    return out


DECODERS = _decoders()


def _positions(size, limit, seed):
    if size <= limit:
        return range(size)
    rng = random.Random(seed)
    return sorted(set(rng.sample(range(size), limit)) | set(range(61)))


@pytest.mark.parametrize("name,decode", DECODERS, ids=[d[0] for d in DECODERS])
@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("n", [1, 40, 1000])
def test_flip_every_byte(codec, n, name, decode):
    if name == "arrow-small" and n > 40:
        pytest.skip("the small-input path is the per-record decoder: covered by 'records'")
    raw = encode_batch(records(n, seed=n), base_offset=500, compression=codec)
    good = decode(raw)
    rng = random.Random(1234 + n)
    for pos in _positions(len(raw), 2000, seed=n):
        bad = bytearray(raw)
        bad[pos] ^= rng.randrange(1, 256)
        try:
            got = decode(bytes(bad))
        except TYPED:
            continue
        except SparklogError as e:
            pytest.fail(f"{name}: flip at {pos}: {type(e).__name__} is not a record error")
        assert pos in UNPROTECTED, f"{name}: flip at {pos} of {len(raw)} went unnoticed"
        if pos in range(0, 8):
            shift = got[0][0] - good[0][0]
            assert [g[1:] for g in got] == [g[1:] for g in good]
            assert [g[0] - shift for g in got] == [g[0] for g in good]
        else:
            assert got == good


@pytest.mark.parametrize("name,decode", DECODERS, ids=[d[0] for d in DECODERS])
@pytest.mark.parametrize("codec", list(Compression))
def test_garbage_with_valid_crc_is_typed(codec, name, decode):
    """An adversarial batch (valid CRC over garbage) must still fail typed, not crash."""
    raw = encode_batch(records(30, seed=7), compression=codec)
    rng = random.Random(99)
    for pos in _positions(len(raw), 150, seed=3):
        if pos < 21:
            continue
        bad = bytearray(raw)
        bad[pos] ^= rng.randrange(1, 256)
        stamp_crc(bad, 0)
        try:
            decode(bytes(bad))
        except (*TYPED, UnsupportedCompressionError):
            pass


@pytest.mark.parametrize("name,decode", DECODERS, ids=[d[0] for d in DECODERS])
def test_truncations_are_typed(name, decode):
    raw = encode_batch(records(20), compression=Compression.NONE)
    for cut in range(1, len(raw), 7):
        with pytest.raises(TYPED):
            decode(raw[:cut])


def test_random_bytes_never_crash_untyped():
    """Arbitrary bytes (some shaped like a batch header with a valid CRC) only ever raise
    typed errors or decode to nothing."""
    from sparklog.protocol.records import decode_batches

    rng = random.Random(5)
    for i in range(200):
        body = rng.randbytes(rng.randrange(0, 300))
        if i % 2:  # a plausible header around the garbage, CRC made valid
            count = rng.randrange(0, 40)
            buf = bytearray(BATCH_HEADER_SIZE) + body
            write_header(buf, 0, len(buf), base_offset=0, partition_leader_epoch=0,
                         attributes=rng.choice([0, 0, 0, 1, 2, 3, 4, 8]),
                         last_offset_delta=max(count - 1, 0), base_timestamp=0, max_timestamp=0,
                         producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=count)
            data = bytes(buf)
        else:
            data = body
        for name, decode in DECODERS:
            try:
                decode(data)
            except (*TYPED, UnsupportedCompressionError):
                pass
            except SparklogError as e:  # pragma: no cover
                pytest.fail(f"{name}: {type(e).__name__}")
        try:
            decode_batches(data)
        except (*TYPED, UnsupportedCompressionError):
            pass
