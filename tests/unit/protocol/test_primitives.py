"""Kafka primitive types: known encodings, round trips, and hostile input."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparklog.protocol.errors import MalformedFrameError
from sparklog.protocol.primitives import (
    Reader,
    Writer,
    decode_uvarint,
    decode_varint,
    encode_uvarint,
    encode_varint,
    uvarint_size,
    varint_size,
)

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
UINT32 = st.integers(0, (1 << 32) - 1)

# Known encodings (zigzag table from the protobuf/Kafka varint definition).
KNOWN_VARINTS = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (1, b"\x02"),
    (-2, b"\x03"),
    (63, b"\x7e"),
    (-64, b"\x7f"),
    (64, b"\x80\x01"),
    (300, b"\xd8\x04"),
    ((1 << 31) - 1, b"\xfe\xff\xff\xff\x0f"),
    (-(1 << 31), b"\xff\xff\xff\xff\x0f"),
    ((1 << 63) - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
    (-(1 << 63), b"\xff" * 9 + b"\x01"),
]


@pytest.mark.parametrize(("value", "encoded"), KNOWN_VARINTS)
def test_varint_known_encodings(value, encoded):
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))
    assert varint_size(value) == len(encoded)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (127, b"\x7f"), (128, b"\x80\x01"), ((1 << 32) - 1, b"\xff\xff\xff\xff\x0f")],
)
def test_uvarint_known_encodings(value, encoded):
    assert encode_uvarint(value) == encoded
    assert decode_uvarint(encoded, 0) == (value, len(encoded))
    assert uvarint_size(value) == len(encoded)


@given(INT64, st.binary(max_size=8))
def test_varlong_round_trip_property(n, prefix):
    enc = encode_varint(n)
    assert len(enc) == varint_size(n) <= 10
    value, pos = decode_varint(prefix + enc + b"junk", len(prefix))
    assert (value, pos) == (n, len(prefix) + len(enc))
    w = Writer()
    w.varlong(n)
    r = Reader(w.getvalue())
    assert r.varlong() == n and r.remaining() == 0


@given(INT32)
def test_varint_round_trip_property(n):
    w = Writer()
    w.varint(n)
    data = w.getvalue()
    assert len(data) <= 5
    assert data == encode_varint(n)
    r = Reader(data)
    assert r.varint() == n and r.remaining() == 0


@given(INT64)
def test_zigzag_keeps_small_magnitudes_short(n):
    # |n| < 64 fits in one byte whatever the sign: that is the point of zigzag.
    if -64 <= n < 64:
        assert len(encode_varint(n)) == 1
    else:
        assert len(encode_varint(n)) > 1


@given(UINT32)
def test_uvarint_round_trip_property(n):
    w = Writer()
    w.uvarint(n)
    r = Reader(w.getvalue())
    assert r.uvarint() == n and r.remaining() == 0
    assert decode_uvarint(encode_uvarint(n)) == (n, uvarint_size(n))


@given(INT64)
def test_varint_truncation_raises_malformed(n):
    enc = encode_varint(n)
    for cut in range(len(enc)):
        with pytest.raises(MalformedFrameError):
            decode_varint(enc[:cut], 0)
        with pytest.raises(MalformedFrameError):
            Reader(enc[:cut]).varlong()


@given(UINT32)
def test_uvarint_truncation_raises_malformed(n):
    enc = encode_uvarint(n)
    for cut in range(len(enc)):
        with pytest.raises(MalformedFrameError):
            decode_uvarint(enc[:cut], 0)
        with pytest.raises(MalformedFrameError):
            Reader(enc[:cut]).uvarint()


def test_overlong_varints_are_rejected():
    with pytest.raises(MalformedFrameError):
        decode_varint(b"\x80" * 10 + b"\x00", 0)
    with pytest.raises(MalformedFrameError):
        Reader(b"\x80" * 5 + b"\x00").varint()
    with pytest.raises(MalformedFrameError):
        Reader(b"\x80" * 5 + b"\x00").uvarint()
    # Five bytes whose value exceeds 32 bits.
    with pytest.raises(MalformedFrameError):
        Reader(b"\xff\xff\xff\xff\x7f").uvarint()
    with pytest.raises(MalformedFrameError):
        Reader(b"\xff\xff\xff\xff\x7f").varint()


def test_writer_rejects_out_of_range_varints():
    with pytest.raises(ValueError):
        Writer().varint(1 << 31)
    with pytest.raises(ValueError):
        Writer().uvarint(-1)
    with pytest.raises(ValueError):
        encode_varint(1 << 63)


@given(
    st.integers(-128, 127),
    st.integers(-(1 << 15), (1 << 15) - 1),
    INT32,
    INT64,
    st.integers(0, 0xFFFF),
    UINT32,
    st.floats(allow_nan=False),
    st.booleans(),
    st.binary(min_size=16, max_size=16),
)
def test_fixed_width_round_trip(i8, i16, i32, i64, u16, u32, f64, flag, uid):
    w = Writer()
    w.int8(i8)
    w.int16(i16)
    w.int32(i32)
    w.int64(i64)
    w.uint16(u16)
    w.uint32(u32)
    w.float64(f64)
    w.boolean(flag)
    w.uuid(uid)
    data = w.getvalue()
    assert len(data) == len(w) == 1 + 2 + 4 + 8 + 2 + 4 + 8 + 1 + 16
    assert data[:7] == struct.pack(">bhi", i8, i16, i32)
    r = Reader(data)
    got = (r.int8(), r.int16(), r.int32(), r.int64(), r.uint16(), r.uint32(), r.float64())
    assert got == (i8, i16, i32, i64, u16, u32, f64)
    assert r.boolean() is flag
    assert r.uuid() == uid
    assert r.remaining() == 0


TEXT = st.text(max_size=40)
NTEXT = st.none() | TEXT
BLOB = st.binary(max_size=40)
NBLOB = st.none() | BLOB


@given(TEXT, NTEXT, TEXT, NTEXT, BLOB, NBLOB, BLOB, NBLOB)
def test_strings_and_bytes_round_trip(s1, s2, s3, s4, b1, b2, b3, b4):
    w = Writer()
    w.string(s1)
    w.nullable_string(s2)
    w.compact_string(s3)
    w.compact_nullable_string(s4)
    w.bytes_(b1)
    w.nullable_bytes(b2)
    w.compact_bytes(b3)
    w.compact_nullable_bytes(b4)
    data = w.getvalue()
    r = Reader(data)
    assert r.string() == s1
    assert r.nullable_string() == s2
    assert r.compact_string() == s3
    assert r.compact_nullable_string() == s4
    assert r.bytes_() == b1
    assert r.nullable_bytes() == b2
    assert r.compact_bytes() == b3
    assert r.compact_nullable_bytes() == b4
    assert r.remaining() == 0
    # Truncating anywhere raises the typed error, nothing else.
    for cut in range(len(data)):
        r = Reader(data[:cut])
        with pytest.raises(MalformedFrameError):
            r.string()
            r.nullable_string()
            r.compact_string()
            r.compact_nullable_string()
            r.bytes_()
            r.nullable_bytes()
            r.compact_bytes()
            r.compact_nullable_bytes()


def test_string_known_encodings():
    w = Writer()
    w.string("ab")
    w.nullable_string(None)
    w.compact_string("ab")
    w.compact_nullable_string(None)
    w.compact_nullable_string("")
    assert w.getvalue() == b"\x00\x02ab" + b"\xff\xff" + b"\x03ab" + b"\x00" + b"\x01"


@given(st.lists(INT32, max_size=20), st.none() | st.lists(TEXT, max_size=5))
def test_arrays_round_trip(ints, strs):
    w = Writer()
    w.array(ints, Writer.int32)
    w.nullable_array(strs, Writer.string)
    w.compact_array(ints, Writer.varint)
    w.compact_nullable_array(strs, Writer.compact_string)
    r = Reader(w.getvalue())
    assert r.array(Reader.int32) == ints
    assert r.nullable_array(Reader.string) == strs
    assert r.compact_array(Reader.varint) == ints
    assert r.compact_nullable_array(Reader.compact_string) == strs
    assert r.remaining() == 0


def test_hostile_lengths_fail_before_allocating():
    # A 2 GiB length prefix on a 4-byte buffer must fail on the length check.
    for method in ("bytes_", "nullable_bytes", "array", "nullable_array", "records"):
        r = Reader(b"\x7f\xff\xff\xff")
        with pytest.raises(MalformedFrameError):
            fn = getattr(r, method)
            fn(Reader.int8) if "array" in method else fn()
    with pytest.raises(MalformedFrameError):
        Reader(b"\xff\xff\xff\xff\x0f").compact_array(Reader.int8)
    with pytest.raises(MalformedFrameError):
        Reader(b"\x7f\xff").string()
    # Negative lengths other than -1 are garbage; -1 is illegal where null is not allowed.
    with pytest.raises(MalformedFrameError):
        Reader(b"\xff\xfe").nullable_string()
    with pytest.raises(MalformedFrameError):
        Reader(b"\xff\xff").string()
    with pytest.raises(MalformedFrameError):
        Reader(b"\xff\xff\xff\xff").array(Reader.int8)
    with pytest.raises(MalformedFrameError):
        Reader(b"\x00").compact_string()
    with pytest.raises(MalformedFrameError):
        Reader(b"\x00\x02\xff\xfe").string()  # not UTF-8


def test_tagged_fields_round_trip_and_order():
    w = Writer()
    w.tagged_fields({5: b"xyz", 0: b"", 300: b"\x01" * 200})
    w.tagged_fields({})
    data = w.getvalue()
    r = Reader(data)
    assert r.tagged_fields() == {0: b"", 5: b"xyz", 300: b"\x01" * 200}
    assert r.tagged_fields() == {}
    assert r.remaining() == 0
    # Tags must ascend strictly.
    with pytest.raises(MalformedFrameError):
        Reader(b"\x02\x05\x00\x05\x00").tagged_fields()
    with pytest.raises(MalformedFrameError):
        Reader(b"\x02\x05\x00\x01\x00").tagged_fields()
    for cut in range(len(data) // 2):
        with pytest.raises(MalformedFrameError):
            Reader(data[:cut]).tagged_fields()


def test_raw_is_zero_copy_and_checked():
    frame = bytearray(b"0123456789")
    r = Reader(frame, 2)
    view = r.raw(4)
    assert bytes(view) == b"2345" and r.pos == 6
    frame[2] = ord("X")
    assert bytes(view) == b"X345"  # a view, not a copy
    with pytest.raises(MalformedFrameError):
        r.raw(5)
    with pytest.raises(MalformedFrameError):
        r.raw(-1)
    with pytest.raises(MalformedFrameError):
        Reader(b"ab", 3)


class FileSlice:
    """Stands in for a file region the server sends with os.sendfile (only .size matters)."""

    def __init__(self, size):
        self.size = size


def test_writer_chunks_around_external_payloads():
    w = Writer()
    w.int32(7)
    piece = FileSlice(1000)
    w.records(piece)
    w.int16(1)
    w.records(b"abc")
    w.compact_records(FileSlice(5))
    chunks = w.chunks()
    assert chunks[0] == struct.pack(">ii", 7, 1000)
    assert chunks[1] is piece
    assert chunks[2] == struct.pack(">hi", 1, 3) + b"abc" + b"\x06"
    assert len(chunks) == 4 and chunks[3].size == 5
    assert len(w) == 8 + 1000 + 2 + 4 + 3 + 1 + 5
    with pytest.raises(ValueError):
        w.getvalue()
    plain = Writer()
    plain.records(None)
    assert plain.chunks() == [b"\xff\xff\xff\xff"]
    assert Writer().chunks() == [b""]


def test_records_decode_as_views():
    w = Writer()
    w.records(b"batch")
    w.records(None)
    w.compact_records(b"xy")
    w.compact_records(None)
    r = Reader(w.getvalue())
    first = r.records()
    assert isinstance(first, memoryview) and bytes(first) == b"batch"
    assert r.records() is None
    assert bytes(r.compact_records()) == b"xy"
    assert r.compact_records() is None
