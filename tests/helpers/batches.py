"""Record batches built for tests, and read back from a partition log.

``make_batch`` is the one builder: n records with keys ``<key_prefix><i>`` (or given
``keys``), values of ``value_size`` bytes (or given ``values``) and timestamps ``ts + i``.
``ts=None`` leaves the timestamps to the encoder (``now_ms``, else the wall clock), which is
what a batch sent to a broker needs: a 1970 timestamp would be old enough for retention.
"""

from __future__ import annotations

from collections.abc import Sequence

from sparklog.protocol.batch_header import stamp_offset_and_epoch
from sparklog.protocol.control_records import encode_control_batch
from sparklog.protocol.records import Record, RecordBatch, decode_batches, encode_batch
from sparklog.storage import PartitionLog

__all__ = ["append_committed", "append_marker", "make_batch", "read_all", "read_records",
           "strip_stamped", "txn_batch"]


def make_batch(n: int = 3, *, key_prefix: bytes | None = b"k", value_size: int = 20,
               ts: int | None = 1_000, keys: Sequence[bytes | None] | None = None,
               values: Sequence[bytes | None] | None = None, base_offset: int = 0,
               producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
               is_transactional: bool = False, now_ms: int | None = None) -> bytes:
    """One uncompressed batch of ``n`` records; ``key_prefix=None`` makes null keys."""
    recs = []
    for i in range(n):
        if keys is not None:
            key = keys[i]
        else:
            key = None if key_prefix is None else key_prefix + str(i).encode()
        value = values[i] if values is not None else bytes([65 + i % 26]) * value_size
        recs.append(Record(key=key, value=value, timestamp=None if ts is None else ts + i))
    return encode_batch(recs, base_offset=base_offset, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=base_sequence,
                        is_transactional=is_transactional, now_ms=now_ms)


def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0, **kw) -> bytes:
    """A transactional batch of producer ``pid`` (``make_batch``'s keywords pass through)."""
    return make_batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                      is_transactional=True, ts=None, **kw)


def append_committed(log: PartitionLog, batch: bytes) -> int:
    """Append ``batch`` as the leader and move the HW to the LEO; its first offset."""
    info = log.append_as_leader(batch, 0)
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def append_marker(log: PartitionLog, pid: int, commit: bool, epoch: int = 0) -> int:
    """Append ``pid``'s COMMIT or ABORT marker as the coordinator does, HW to the LEO; its
    offset."""
    info = log.append_as_leader(encode_control_batch(commit, producer_id=pid,
                                                     producer_epoch=epoch, coordinator_epoch=3),
                                0, origin="coordinator")
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def read_all(log: PartitionLog, start: int | None = None,
             max_offset: int | None = None) -> list[RecordBatch]:
    """Every batch of ``log`` from ``start`` (default: the log start) up to ``max_offset``."""
    start = log.log_start_offset if start is None else start
    info = log.read(start, 1 << 30, max_offset=max_offset)
    return decode_batches(info.read_bytes())


def read_records(log: PartitionLog) -> list[Record]:
    return [r for b in read_all(log) for r in b.records]


def strip_stamped(raw: bytes) -> bytes:
    """A batch with the fields a broker stamps (base offset, leader epoch) zeroed."""
    b = bytearray(raw)
    stamp_offset_and_epoch(b, 0, 0, 0)
    return bytes(b)
