"""Codecs round-trip, interoperate with kafka-python's codec module, and fail typed."""

import os
import random
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparklog.protocol import compression as C
from sparklog.protocol.errors import CorruptRecordError, SparklogError, UnsupportedCompressionError

CODECS = [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]
kcodec = pytest.importorskip("kafka.codec")

SAMPLES = [
    b"",
    b"a",
    b"hello kafka " * 1000,
    os.urandom(70_000),  # incompressible, > 2 xerial blocks
    bytes(range(256)) * 1024,
]


@pytest.mark.parametrize("codec", [C.NONE, *CODECS])
@pytest.mark.parametrize("idx", range(len(SAMPLES)))
def test_round_trip(codec, idx):
    data = SAMPLES[idx]
    assert bytes(C.decompress(codec, C.compress(codec, data))) == data


@given(st.binary(max_size=5000), st.sampled_from(CODECS))
@settings(max_examples=60, deadline=None)
def test_round_trip_property(data, codec):
    assert bytes(C.decompress(codec, C.compress(codec, data))) == data


def test_decompress_into_appends_each_section():
    out = cramjam.Buffer()
    sizes = [C.decompress_into(codec, C.compress(codec, data), out)
             for codec, data in zip([C.NONE, *CODECS], SAMPLES, strict=True)]
    assert sizes == [len(d) for d in SAMPLES]
    assert bytes(memoryview(out)) == b"".join(SAMPLES)
    with pytest.raises(CorruptRecordError):
        C.decompress_into(C.ZSTD, b"not zstd", out)
    with pytest.raises(UnsupportedCompressionError):
        C.decompress_into(7, b"", out)


def _kafka_python_pair(codec):
    if codec == C.GZIP:
        return kcodec.gzip_encode, kcodec.gzip_decode
    if codec == C.SNAPPY:
        return kcodec.snappy_encode, kcodec.snappy_decode
    if codec == C.LZ4:
        return kcodec.lz4_encode, kcodec.lz4_decode
    return kcodec.zstd_encode, kcodec.zstd_decode


@pytest.mark.parametrize("codec", CODECS)
def test_interop_with_kafka_python_codecs(codec):
    has = {C.GZIP: kcodec.has_gzip, C.SNAPPY: kcodec.has_snappy, C.LZ4: kcodec.has_lz4,
           C.ZSTD: kcodec.has_zstd}[codec]
    if not has():
        pytest.skip("kafka-python lacks this codec's library")
    enc, dec = _kafka_python_pair(codec)
    for data in SAMPLES[1:]:
        assert bytes(dec(C.compress(codec, data))) == data
        assert bytes(C.decompress(codec, enc(data))) == data


def test_snappy_reads_raw_and_xerial_and_writes_xerial():
    import cramjam

    data = b"0123456789" * 10_000
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert bytes(C.decompress(C.SNAPPY, raw)) == data
    framed = C.compress(C.SNAPPY, data)
    assert framed.startswith(C.XERIAL_MAGIC)
    assert struct.unpack_from(">ii", framed, 8) == (1, 1)
    # 100 000 bytes in 32 KiB blocks -> 4 blocks
    pos, blocks = 16, 0
    while pos < len(framed):
        (n,) = struct.unpack_from(">i", framed, pos)
        pos += 4 + n
        blocks += 1
    assert pos == len(framed) and blocks == 4
    if kcodec.has_snappy():
        # kafka-python's non-xerial (raw) output reads too
        assert bytes(C.decompress(C.SNAPPY, kcodec.snappy_encode(data, xerial_compatible=False))) == data


def test_lz4_frame_uses_independent_blocks():
    out = C.compress(C.LZ4, b"x" * 300_000)
    assert out[:4] == b"\x04\x22\x4d\x18"
    flg = out[4]
    assert flg >> 6 == 1 and flg & 0x20  # version 01, block independence


def test_unknown_codec_ids():
    for codec in (5, 6, 7, -1):
        with pytest.raises(UnsupportedCompressionError):
            C.decompress(codec, b"abc")
        with pytest.raises(UnsupportedCompressionError):
            C.compress(codec, b"abc")
    assert C.codec_for_name("ZSTD") == C.ZSTD
    with pytest.raises(UnsupportedCompressionError):
        C.codec_for_name("brotli")


@pytest.mark.parametrize("codec", CODECS)
def test_garbage_and_truncation_raise_typed(codec):
    rng = random.Random(codec)
    good = C.compress(codec, b"some payload " * 500)
    inputs = [b"\x00" * 10, os.urandom(64), good[: len(good) // 2], good[:5]]
    for _ in range(60):
        bad = bytearray(good)
        bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
        inputs.append(bytes(bad))
    for data in inputs:
        try:
            out = C.decompress(codec, data)
        except CorruptRecordError:
            continue
        except SparklogError as e:  # pragma: no cover - wrong type
            pytest.fail(f"unexpected {type(e).__name__}")
        # some flips land in bytes the format does not check (e.g. gzip header fields);
        # decoding is then allowed to succeed - the batch CRC is what catches those
        assert isinstance(bytes(out), bytes)


def test_snappy_xerial_bad_block_length():
    framed = bytearray(C.compress(C.SNAPPY, b"abc" * 100))
    struct.pack_into(">i", framed, 16, 10_000)
    with pytest.raises(CorruptRecordError):
        C.decompress(C.SNAPPY, bytes(framed))
    with pytest.raises(CorruptRecordError):
        C.decompress(C.SNAPPY, bytes(framed[:18]))
