"""Shared helpers for the storage tests (imported by basename: the test dir is on sys.path)."""

from __future__ import annotations

import struct

from sparklog.protocol.records import Record, decode_batches, encode_batch


def make_batch(n: int = 3, *, key_prefix: bytes = b"k", value_size: int = 20, ts: int = 1_000,
               producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
               keys: list[bytes | None] | None = None,
               values: list[bytes | None] | None = None) -> bytes:
    recs = []
    for i in range(n):
        key = keys[i] if keys is not None else key_prefix + str(i).encode()
        value = values[i] if values is not None else bytes([65 + i % 26]) * value_size
        recs.append(Record(key=key, value=value, timestamp=ts + i))
    return encode_batch(recs, producer_id=producer_id, producer_epoch=producer_epoch,
                        base_sequence=base_sequence)


def read_all(log, start: int | None = None, max_offset: int | None = None):
    start = log.log_start_offset if start is None else start
    info = log.read(start, 1 << 30, max_offset=max_offset)
    return decode_batches(info.read_bytes())


def read_records(log):
    return [r for b in read_all(log) for r in b.records]


def strip_stamped(raw: bytes) -> bytes:
    """A batch with the fields a broker stamps (base offset, leader epoch) zeroed."""
    b = bytearray(raw)
    struct.pack_into(">q", b, 0, 0)
    struct.pack_into(">i", b, 12, 0)
    return bytes(b)
