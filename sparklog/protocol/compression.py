"""Kafka's record-batch codecs (gzip, snappy, lz4, zstd), all through ``cramjam``.

One native library covers every codec, so there is a single dependency to install and one
error type to translate. What each codec writes, and why:

* gzip: a plain gzip member (RFC 1952), what the Java client's GZIPOutputStream writes.
* snappy: the Java client writes snappy-java's *xerial* framing (magic ``\\x82SNAPPY\\x00``,
  two i32 versions, then ``[i32 length][raw snappy block]`` chunks), librdkafka and some other
  clients write one raw snappy block. We write xerial (Java's form, readable everywhere) and
  read both, telling them apart by the magic.
* lz4: the LZ4 *frame* format (KIP-57) with independent blocks, because Java's
  KafkaLZ4BlockInputStream decompresses each block on its own.
* zstd: a standard zstd frame.

``decompress`` returns a memoryview over cramjam's output buffer (no extra copy),
``decompress_into`` appends to a growing ``cramjam.Buffer``. They raise sparklog's typed
errors only: UnsupportedCompressionError for codec ids this module does not know,
CorruptRecordError for bytes that do not decompress.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager

import cramjam

from .errors import CorruptRecordError, UnsupportedCompressionError

__all__ = [
    "CODEC_NAMES",
    "XERIAL_MAGIC",
    "codec_for_name",
    "compress",
    "decompress",
    "decompress_into",
    "snappy_xerial_encode",
    "snappy_decode",
]

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_BY_NAME = {v: k for k, v in CODEC_NAMES.items()}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, min compatible version
_XERIAL_VERSION = 1
XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default block size
_I32 = struct.Struct(">i")

# Kafka's defaults for compression.<codec>.level (KIP-390)
DEFAULT_GZIP_LEVEL = 6
DEFAULT_ZSTD_LEVEL = 3

Buffer = bytes | bytearray | memoryview


def codec_for_name(name: str) -> int:
    """Kafka's ``compression.type`` values (``producer`` and ``uncompressed`` are topic-level
    settings handled by the caller)."""
    try:
        return _BY_NAME[name.lower()]
    except KeyError:
        raise UnsupportedCompressionError(f"unknown compression type {name!r}") from None


# ----------------------------------------------------------------------------- snappy


def snappy_xerial_encode(data: Buffer, block_size: int = XERIAL_BLOCK_SIZE) -> bytes:
    mv = memoryview(data)
    if not len(mv):
        # a bare xerial header is not recognised as xerial by some readers (they require
        # more than 16 bytes); an empty raw snappy block reads everywhere
        return bytes(cramjam.snappy.compress_raw(b""))
    out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_VERSION))
    for start in range(0, len(mv), block_size):
        block = cramjam.snappy.compress_raw(mv[start : start + block_size])
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


def snappy_decode(data: Buffer) -> bytes | memoryview:
    """Raw snappy or xerial-framed snappy (detected by the 8-byte magic)."""
    chunks = [cramjam.snappy.decompress_raw(block) for block in _snappy_blocks(data)]
    if len(chunks) == 1:
        return memoryview(chunks[0])
    return b"".join(chunks)


def _snappy_blocks(data: Buffer) -> list[memoryview]:
    """The raw snappy blocks of ``data``: itself, or the chunks of its xerial framing."""
    mv = memoryview(data)
    if not (len(mv) >= 16 and mv[:8] == XERIAL_MAGIC):
        return [mv]
    pos, end = 16, len(mv)
    blocks = []
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("truncated xerial snappy block length")
        (n,) = _I32.unpack_from(mv, pos)
        pos += 4
        if n < 0 or n > end - pos:
            raise CorruptRecordError(f"xerial snappy block of {n} bytes, {end - pos} left")
        blocks.append(mv[pos : pos + n])
        pos += n
    return blocks


# ----------------------------------------------------------------------------- API


def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress a batch's records section with Kafka codec id ``codec``."""
    if codec == NONE:
        return bytes(data)
    try:
        if codec == GZIP:
            return bytes(
                cramjam.gzip.compress(data, level=DEFAULT_GZIP_LEVEL if level is None else level)
            )
        if codec == SNAPPY:
            return snappy_xerial_encode(data)
        if codec == LZ4:
            c = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
            c.compress(data if isinstance(data, bytes) else bytes(data))
            return bytes(c.finish())
        if codec == ZSTD:
            return bytes(
                cramjam.zstd.compress(data, level=DEFAULT_ZSTD_LEVEL if level is None else level)
            )
    except (cramjam.CompressionError, ValueError, TypeError) as e:  # pragma: no cover
        raise CorruptRecordError(f"{CODEC_NAMES.get(codec, codec)} compression failed: {e}") from e
    raise UnsupportedCompressionError(f"unsupported compression codec id {codec}")


def decompress(codec: int, data: Buffer) -> bytes | memoryview:
    """Decompress a batch's records section; bad input raises CorruptRecordError."""
    if codec == NONE:
        return memoryview(data)
    with _decompressing(codec):
        if codec == GZIP:
            return memoryview(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return snappy_decode(data)
        if codec == LZ4:
            return memoryview(cramjam.lz4.decompress(data))
        return memoryview(cramjam.zstd.decompress(data))


def decompress_into(codec: int, data: Buffer, out: cramjam.Buffer) -> int:
    """Decompress a batch's records section onto the end of ``out``; returns its size.

    Several batches decompressed into one growing buffer end up contiguous without the
    copy that joining separately decompressed sections costs (the Arrow decoder reads all
    of a fetch's records from one buffer)."""
    if codec == NONE:
        return out.write(data)
    with _decompressing(codec):
        if codec == GZIP:
            return cramjam.gzip.decompress_into(data, out)
        if codec == SNAPPY:  # raw blocks do not grow a Buffer: decompress, then append
            return sum(out.write(cramjam.snappy.decompress_raw(b)) for b in _snappy_blocks(data))
        if codec == LZ4:
            return cramjam.lz4.decompress_into(data, out)
        return cramjam.zstd.decompress_into(data, out)


@contextmanager
def _decompressing(codec: int) -> Iterator[None]:
    """Unknown codec ids raise UnsupportedCompressionError, bytes that do not decompress
    CorruptRecordError (cramjam raises its own errors, and Rust panics)."""
    if codec not in CODEC_NAMES:
        raise UnsupportedCompressionError(f"unsupported compression codec id {codec}")
    try:
        yield
    except CorruptRecordError:
        raise
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as e:  # DecompressionError; a Rust panic arrives as BaseException
        raise CorruptRecordError(
            f"{CODEC_NAMES[codec]} decompression failed: {type(e).__name__}: {e}"
        ) from e
