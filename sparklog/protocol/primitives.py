"""Kafka's primitive wire types, sans I/O.

Reference: the "Protocol Primitive Types" section of Kafka's protocol guide
(https://kafka.apache.org/protocol#protocol_types).  Everything is big endian.

    INT8/16/32/64, UINT16, UINT32, FLOAT64   fixed width
    BOOLEAN                                   int8, 0 = false, anything else = true
    UUID                                      16 raw bytes
    VARINT / VARLONG                          zigzag, 7 bits per byte, LSB group first
    UNSIGNED_VARINT                           7 bits per byte, at most 5 bytes (32 bit)
    STRING / NULLABLE_STRING                  int16 length (-1 = null) + UTF-8
    COMPACT_(NULLABLE_)STRING                 uvarint (length + 1, 0 = null) + UTF-8
    BYTES / NULLABLE_BYTES                    int32 length (-1 = null) + bytes
    COMPACT_(NULLABLE_)BYTES                  uvarint (length + 1, 0 = null) + bytes
    ARRAY / COMPACT_ARRAY                     int32 count / uvarint (count + 1), 0/-1 = null
    TAGGED_FIELDS                             uvarint count, then (uvarint tag,
                                              uvarint size, size bytes) in ascending tag order

Every decoder checks a length against the bytes that remain BEFORE it allocates or
slices, so a hostile length prefix costs nothing; every failure is a
``MalformedFrameError``, never an ``IndexError``/``struct.error`` leaking out of here.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from sparklog.protocol.errors import MalformedFrameError

__all__ = [
    "Reader",
    "Writer",
    "encode_varint",
    "decode_varint",
    "encode_uvarint",
    "decode_uvarint",
    "varint_size",
    "uvarint_size",
    "zigzag_encode",
    "zigzag_decode",
]

T = TypeVar("T")

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_UINT32_MAX = (1 << 32) - 1

# One-byte encodings are by far the most common (small lengths, tag counts of zero).
_ONE_BYTE = [bytes((i,)) for i in range(128)]
_EMPTY_TAGS: dict[int, bytes] = {}


# --------------------------------------------------------------------------- varints


def zigzag_encode(n: int) -> int:
    """Map signed to unsigned so small magnitudes stay short (-1 -> 1, 1 -> 2)."""
    return (n << 1) ^ (n >> 63)


def zigzag_decode(z: int) -> int:
    return (z >> 1) ^ -(z & 1)


def encode_uvarint(n: int) -> bytes:
    """Unsigned varint; values up to 2**64 - 1 (the 32-bit limit is the reader's job)."""
    if 0 <= n < 0x80:
        return _ONE_BYTE[n]
    if n < 0 or n >> 64:
        raise ValueError(f"unsigned varint out of range: {n}")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_varint(n: int) -> bytes:
    """Zigzag varint/varlong (the zigzag of an int32 equals its 64-bit zigzag)."""
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise ValueError(f"varlong out of range: {n}")
    return encode_uvarint((n << 1) ^ (n >> 63))


def uvarint_size(n: int) -> int:
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def varint_size(n: int) -> int:
    """Encoded size of a zigzag varint/varlong, without encoding it."""
    return uvarint_size((n << 1) ^ (n >> 63))


def _decode_unsigned(buf: Any, pos: int, max_bytes: int) -> tuple[int, int]:
    try:
        b = buf[pos]
    except IndexError:
        raise MalformedFrameError("truncated varint") from None
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    i = pos + 1
    end = pos + max_bytes
    while True:
        if i >= end:
            raise MalformedFrameError(f"varint longer than {max_bytes} bytes")
        try:
            b = buf[i]
        except IndexError:
            raise MalformedFrameError("truncated varint") from None
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def decode_uvarint(buf: Any, pos: int = 0) -> tuple[int, int]:
    """Unsigned 32-bit varint at ``pos`` -> (value, new_pos)."""
    value, pos = _decode_unsigned(buf, pos, 5)
    if value > _UINT32_MAX:
        raise MalformedFrameError("unsigned varint exceeds 32 bits")
    return value, pos


def decode_varint(buf: Any, pos: int = 0) -> tuple[int, int]:
    """Zigzag varint or varlong at ``pos`` -> (value, new_pos); accepts up to 10 bytes.

    The record codec uses it for both the int32 and the int64 fields of a record, so it
    accepts the varlong width; ``Reader.varint`` enforces the int32 limits.
    """
    z, pos = _decode_unsigned(buf, pos, 10)
    if z >> 64:
        raise MalformedFrameError("varlong exceeds 64 bits")
    return (z >> 1) ^ -(z & 1), pos


# --------------------------------------------------------------------------- reader


class Reader:
    """Cursor over a received frame; every read is bounds checked first."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        if not 0 <= pos <= self.end:
            raise MalformedFrameError(f"start position {pos} outside a {self.end}-byte buffer")

    def remaining(self) -> int:
        return self.end - self.pos

    def _short(self, what: str, need: int) -> MalformedFrameError:
        return MalformedFrameError(
            f"truncated {what}: need {need} bytes at offset {self.pos}, have {self.end - self.pos}"
        )

    # fixed width -------------------------------------------------------------------

    def fixed(self, s: struct.Struct) -> tuple[Any, ...]:
        """Several fixed-width fields in one unpack (used by compiled schemas)."""
        pos = self.pos
        if pos + s.size > self.end:
            raise self._short("fields", s.size)
        self.pos = pos + s.size
        return s.unpack_from(self.buf, pos)

    def _one(self, s: struct.Struct, what: str) -> Any:
        pos = self.pos
        if pos + s.size > self.end:
            raise self._short(what, s.size)
        self.pos = pos + s.size
        return s.unpack_from(self.buf, pos)[0]

    def int8(self) -> int:
        return self._one(_I8, "int8")

    def int16(self) -> int:
        return self._one(_I16, "int16")

    def int32(self) -> int:
        return self._one(_I32, "int32")

    def int64(self) -> int:
        return self._one(_I64, "int64")

    def uint16(self) -> int:
        return self._one(_U16, "uint16")

    def uint32(self) -> int:
        return self._one(_U32, "uint32")

    def float64(self) -> float:
        return self._one(_F64, "float64")

    def boolean(self) -> bool:
        return self._one(_I8, "boolean") != 0

    def uuid(self) -> bytes:
        return bytes(self.raw(16))

    # varints -----------------------------------------------------------------------

    def uvarint(self) -> int:
        pos = self.pos
        if pos >= self.end:
            raise self._short("unsigned varint", 1)
        b = self.buf[pos]
        if b < 0x80:
            self.pos = pos + 1
            return b
        value, pos = _decode_unsigned(self.buf, pos, 5)
        if value > _UINT32_MAX:
            raise MalformedFrameError("unsigned varint exceeds 32 bits")
        if pos > self.end:
            raise self._short("unsigned varint", pos - self.pos)
        self.pos = pos
        return value

    def varint(self) -> int:
        if self.pos >= self.end:
            raise self._short("varint", 1)
        z, pos = _decode_unsigned(self.buf, self.pos, 5)
        if z > _UINT32_MAX:
            raise MalformedFrameError("varint exceeds 32 bits")
        self.pos = pos
        return (z >> 1) ^ -(z & 1)

    def varlong(self) -> int:
        if self.pos >= self.end:
            raise self._short("varlong", 1)
        value, self.pos = decode_varint(self.buf, self.pos)
        return value

    # raw bytes ---------------------------------------------------------------------

    def raw(self, n: int) -> memoryview | bytes:
        """``n`` bytes as a zero-copy slice of the underlying buffer."""
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise self._short("bytes", n)
        self.pos = pos + n
        buf = self.buf
        if type(buf) is not memoryview:
            buf = memoryview(buf)
        return buf[pos : pos + n]

    def _text(self, n: int) -> str:
        pos = self.pos
        if pos + n > self.end:
            raise self._short("string", n)
        self.pos = pos + n
        try:
            return str(self.buf[pos : pos + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedFrameError(f"string is not valid UTF-8 at offset {pos}") from exc

    def _blob(self, n: int) -> bytes:
        pos = self.pos
        if pos + n > self.end:
            raise self._short("bytes", n)
        self.pos = pos + n
        return bytes(self.buf[pos : pos + n])

    # strings -----------------------------------------------------------------------

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise MalformedFrameError(f"negative length {n} for a non-nullable string")
        return self._text(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n < 0:
            if n != -1:
                raise MalformedFrameError(f"invalid string length {n}")
            return None
        return self._text(n)

    def compact_string(self) -> str:
        n = self.uvarint()
        if n == 0:
            raise MalformedFrameError("null value for a non-nullable compact string")
        return self._text(n - 1)

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint()
        if n == 0:
            return None
        return self._text(n - 1)

    # bytes -------------------------------------------------------------------------

    def bytes_(self) -> bytes:
        n = self.int32()
        if n < 0:
            raise MalformedFrameError(f"negative length {n} for non-nullable bytes")
        return self._blob(n)

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        if n < 0:
            if n != -1:
                raise MalformedFrameError(f"invalid bytes length {n}")
            return None
        return self._blob(n)

    def compact_bytes(self) -> bytes:
        n = self.uvarint()
        if n == 0:
            raise MalformedFrameError("null value for non-nullable compact bytes")
        return self._blob(n - 1)

    def compact_nullable_bytes(self) -> bytes | None:
        n = self.uvarint()
        if n == 0:
            return None
        return self._blob(n - 1)

    # record sets: zero-copy views the broker hands to storage unchanged -------------

    def records(self) -> memoryview | None:
        n = self.int32()
        if n < 0:
            if n != -1:
                raise MalformedFrameError(f"invalid records length {n}")
            return None
        return self.raw(n)  # type: ignore[return-value]

    def compact_records(self) -> memoryview | None:
        n = self.uvarint()
        if n == 0:
            return None
        return self.raw(n - 1)  # type: ignore[return-value]

    # arrays ------------------------------------------------------------------------

    def _items(self, n: int, read_item: Callable[[Reader], T]) -> list[T]:
        # Every element of every Kafka array takes at least one byte, so a count larger
        # than what remains is garbage; checking first keeps a hostile count from
        # spinning or allocating.
        if n > self.end - self.pos:
            raise MalformedFrameError(
                f"array of {n} elements cannot fit in {self.end - self.pos} remaining bytes"
            )
        return [read_item(self) for _ in range(n)]

    def array(self, read_item: Callable[[Reader], T]) -> list[T]:
        n = self.int32()
        if n < 0:
            raise MalformedFrameError(f"negative count {n} for a non-nullable array")
        return self._items(n, read_item)

    def nullable_array(self, read_item: Callable[[Reader], T]) -> list[T] | None:
        n = self.int32()
        if n < 0:
            if n != -1:
                raise MalformedFrameError(f"invalid array count {n}")
            return None
        return self._items(n, read_item)

    def compact_array(self, read_item: Callable[[Reader], T]) -> list[T]:
        n = self.uvarint()
        if n == 0:
            raise MalformedFrameError("null value for a non-nullable compact array")
        return self._items(n - 1, read_item)

    def compact_nullable_array(self, read_item: Callable[[Reader], T]) -> list[T] | None:
        n = self.uvarint()
        if n == 0:
            return None
        return self._items(n - 1, read_item)

    # tagged fields -----------------------------------------------------------------

    def tagged_fields(self) -> dict[int, bytes]:
        """The tag section of a flexible struct as {tag: raw value bytes}.

        Returns a shared empty dict in the common no-tags case; callers must not mutate
        the result unless it is non-empty.
        """
        pos = self.pos
        if pos < self.end and self.buf[pos] == 0:
            self.pos = pos + 1
            return _EMPTY_TAGS
        count = self.uvarint()
        if count > self.end - self.pos:
            raise MalformedFrameError(f"{count} tagged fields cannot fit in the frame")
        out: dict[int, bytes] = {}
        last = -1
        for _ in range(count):
            tag = self.uvarint()
            if tag <= last:
                raise MalformedFrameError(f"tagged field {tag} out of order or repeated")
            last = tag
            size = self.uvarint()
            out[tag] = self._blob(size)
        return out


# --------------------------------------------------------------------------- writer


class Writer:
    """Append-only encoder; ``chunks()`` splits the output around external payloads.

    An external payload is any object with an integer ``size`` (e.g. a file slice the
    server will ``os.sendfile``).  It is not copied: ``external(obj)`` ends the current
    bytes chunk and records the object, so the server can send bytes and file slices in
    order.  Its length prefix is written by the caller as ordinary bytes.
    """

    __slots__ = ("buf", "_chunks", "_external_size")

    def __init__(self) -> None:
        self.buf = bytearray()
        self._chunks: list[Any] = []
        self._external_size = 0

    def __len__(self) -> int:
        done = sum(len(c) for c in self._chunks if isinstance(c, bytearray))
        return done + self._external_size + len(self.buf)

    # output ------------------------------------------------------------------------

    def getvalue(self) -> bytes:
        if self._chunks:
            raise ValueError("output holds external chunks; use chunks()")
        return bytes(self.buf)

    def chunks(self) -> list[Any]:
        """Output as a list of byte chunks (``bytearray``) and external objects, in wire order.

        The byte chunks are the writer's own buffers (no copy): stop writing once called.
        """
        out = list(self._chunks)
        if self.buf or not out:
            out.append(self.buf)
        return out

    def begin_frame(self) -> None:
        """Reserve the int32 size prefix of a frame; ``end_frame`` fills it in."""
        if len(self.buf) or self._chunks:
            raise ValueError("a frame must start at the beginning of the output")
        self.buf += b"\0\0\0\0"

    def end_frame(self) -> None:
        """Write the frame size (everything after the prefix) into the reserved prefix."""
        first = self._chunks[0] if self._chunks else self.buf
        first[0:4] = _I32.pack(len(self) - 4)

    def has_external(self) -> bool:
        return bool(self._chunks)

    def external(self, obj: Any) -> None:
        size = obj.size
        if not isinstance(size, int) or size < 0:
            raise ValueError(f"external payload has an invalid size: {size!r}")
        if self.buf:
            self._chunks.append(self.buf)
            self.buf = bytearray()
        self._chunks.append(obj)
        self._external_size += size

    def raw(self, b: bytes | bytearray | memoryview) -> None:
        self.buf += b

    def fixed(self, s: struct.Struct, *values: Any) -> None:
        self.buf += s.pack(*values)

    # fixed width -------------------------------------------------------------------

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uint16(self, v: int) -> None:
        self.buf += _U16.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def float64(self, v: float) -> None:
        self.buf += _F64.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: bytes) -> None:
        if len(v) != 16:
            raise ValueError(f"a UUID is 16 bytes, got {len(v)}")
        self.buf += v

    # varints -----------------------------------------------------------------------

    def uvarint(self, v: int) -> None:
        if not 0 <= v <= _UINT32_MAX:
            raise ValueError(f"unsigned varint out of range: {v}")
        self.buf += encode_uvarint(v)

    def varint(self, v: int) -> None:
        if not _INT32_MIN <= v <= _INT32_MAX:
            raise ValueError(f"varint out of range: {v}")
        self.buf += encode_uvarint((v << 1) ^ (v >> 63))

    def varlong(self, v: int) -> None:
        self.buf += encode_varint(v)

    # strings -----------------------------------------------------------------------

    def string(self, v: str) -> None:
        if v is None:
            raise ValueError("None for a non-nullable string")
        b = v.encode()
        if len(b) > 0x7FFF:
            raise ValueError(f"string of {len(b)} bytes exceeds the int16 length")
        self.buf += _I16.pack(len(b))
        self.buf += b

    def nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf += b"\xff\xff"
        else:
            self.string(v)

    def compact_string(self, v: str) -> None:
        if v is None:
            raise ValueError("None for a non-nullable compact string")
        b = v.encode()
        self.buf += encode_uvarint(len(b) + 1)
        self.buf += b

    def compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_string(v)

    # bytes -------------------------------------------------------------------------

    def bytes_(self, v: bytes | bytearray | memoryview) -> None:
        if v is None:
            raise ValueError("None for non-nullable bytes")
        self.buf += _I32.pack(len(v))
        self.buf += v

    def nullable_bytes(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
        else:
            self.bytes_(v)

    def compact_bytes(self, v: bytes | bytearray | memoryview) -> None:
        if v is None:
            raise ValueError("None for non-nullable compact bytes")
        self.buf += encode_uvarint(len(v) + 1)
        self.buf += v

    def compact_nullable_bytes(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_bytes(v)

    # record sets: bytes-like values are copied in, anything with .size stays external --

    def records(self, v: Any) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
        elif isinstance(v, bytes | bytearray | memoryview):
            self.buf += _I32.pack(len(v))
            self.buf += v
        else:
            self.buf += _I32.pack(v.size)
            self.external(v)

    def compact_records(self, v: Any) -> None:
        if v is None:
            self.buf.append(0)
        elif isinstance(v, bytes | bytearray | memoryview):
            self.buf += encode_uvarint(len(v) + 1)
            self.buf += v
        else:
            self.buf += encode_uvarint(v.size + 1)
            self.external(v)

    # arrays ------------------------------------------------------------------------

    def array(self, items: Iterable[T] | None, write_item: Callable[[Writer, T], None]) -> None:
        if items is None:
            raise ValueError("None for a non-nullable array")
        items = items if isinstance(items, list | tuple) else list(items)
        self.buf += _I32.pack(len(items))
        for item in items:
            write_item(self, item)

    def nullable_array(
        self, items: Iterable[T] | None, write_item: Callable[[Writer, T], None]
    ) -> None:
        if items is None:
            self.buf += b"\xff\xff\xff\xff"
        else:
            self.array(items, write_item)

    def compact_array(self, items: Iterable[T] | None, write_item: Callable[[Writer, T], None]) -> None:
        if items is None:
            raise ValueError("None for a non-nullable compact array")
        items = items if isinstance(items, list | tuple) else list(items)
        self.buf += encode_uvarint(len(items) + 1)
        for item in items:
            write_item(self, item)

    def compact_nullable_array(
        self, items: Iterable[T] | None, write_item: Callable[[Writer, T], None]
    ) -> None:
        if items is None:
            self.buf.append(0)
        else:
            self.compact_array(items, write_item)

    # tagged fields -----------------------------------------------------------------

    def tagged_fields(self, fields: dict[int, bytes] | None) -> None:
        if not fields:
            self.buf.append(0)
            return
        self.buf += encode_uvarint(len(fields))
        for tag in sorted(fields):
            value = fields[tag]
            self.buf += encode_uvarint(tag)
            self.buf += encode_uvarint(len(value))
            self.buf += value
