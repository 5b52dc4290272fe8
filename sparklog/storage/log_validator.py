"""What an append must satisfy before the log writes it, and the stamping it gets (Kafka's
``LogValidator``).

Two kinds of append reach ``PartitionLog``:

* **as leader**: a producer's batches (``origin="client"``) or the group coordinator's.
  ``validate_leader_append`` checks them; ``assign_offsets`` gives them offsets from the log
  end, the leader's epoch and, under LogAppendTime, the append time.
* **as follower**: batches replicated from the leader keep their offsets, epochs and
  timestamps; ``validate_batches`` checks their structure and CRC and
  ``replicated_batches`` checks their offsets follow the log end.

Both produce an ``AppendBatches``: the buffers for the segment's one ``pwritev``, the
per-batch index input and what producer state and epochs learn from them.

Invariants:

* Every batch passes before anything is written: one bad batch rejects the whole append.
* The client's bytes are never modified (they may sit in a read-only request buffer):
  ``assign_offsets`` stamps a 61-byte copy of each header (``protocol.batch_header``) and
  the write sends [stamped header, untouched records] per batch.
* A producer's batch that breaks several rules reports the first of: its structure (torn,
  magic, ``max.message.bytes``, codec, negative delta or count), the producer rules (records
  present, lastOffsetDelta + 1 == recordCount, no control batch, a sequence with a producer
  id, ``message.timestamp.before/after.max.ms``), its CRC; then a missing key on a
  compacted topic. Batches are checked in order. Only a failing batch pays for finding out
  which rule it broke.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

from sparklog.protocol.batch_header import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    LOG_OVERHEAD,
    BatchHeader,
    Buffer,
    stamp_log_append_time,
    stamp_offset_and_epoch,
    validate_batches,
)
from sparklog.protocol.control_records import read_control_batch
from sparklog.protocol.errors import InvalidRecordError, InvalidTimestampError

from .errors import UnexpectedAppendOffsetError
from .log_config import LogConfig
from .producer_state import ProducerBatch

__all__ = [
    "AppendBatches",
    "assign_offsets",
    "replicated_batches",
    "validate_leader_append",
]

Batches = list[tuple[int, BatchHeader]]  # (position in the append, header) per batch


class AppendBatches(NamedTuple):
    """An append ready to write, and what the log's bookkeeping learns from it."""

    buffers: list[Buffer]  # written in this order with one pwritev
    size: int
    # per batch (base offset, last offset, size, max timestamp): the segment's index input
    metas: list[tuple[int, int, int, int]]
    producer_batches: list[ProducerBatch]
    leader_epochs: list[tuple[int, int]]  # (epoch, start offset) of replicated batches
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int
    next_offset: int

    @property
    def first_offset(self) -> int:
        return self.metas[0][0]


_new_append = tuple.__new__  # AppendBatches(...) without its Python-level __new__


def validate_leader_append(mv: memoryview, config: LogConfig, *, from_client: bool,
                           now_ms: int) -> Batches:
    """Every batch of a leader append, checked as the module docstring says. A producer's
    batches get every rule; the coordinator's, written by this broker, only the structure
    and the CRC (no size limit: its batches are bounded by its own config)."""
    if not from_client:
        return validate_batches(mv)
    log_append_time = config.message_timestamp_type == "LogAppendTime"
    before = -1 if log_append_time else config.message_timestamp_before_max_ms
    rules = partial(_check_producer_batch, now_ms, before, config.message_timestamp_after_max_ms)
    batches = validate_batches(mv, config.max_message_bytes, rules)
    if "compact" in config.cleanup_policy:
        _check_keys(mv, batches)
    return batches


def _check_producer_batch(now: int, before: int, after: int, h: BatchHeader) -> None:
    """The rules a producer's batch must follow; ``before`` < 0 skips the timestamp checks
    (LogAppendTime replaces the timestamps anyway)."""
    count, max_ts = h.record_count, h.max_timestamp
    ok = (count > 0 and h.last_offset_delta + 1 == count and not h.attributes & CONTROL_MASK
          and (h.producer_id < 0 or h.base_sequence >= 0))
    if ok and before >= 0 and max_ts >= 0:
        ok = max_ts - now <= after and now - max_ts <= before
    if not ok:
        _raise_broken_rule(h, now, before, after)


def _raise_broken_rule(h: BatchHeader, now: int, before: int, after: int) -> None:
    if h.record_count <= 0:
        raise InvalidRecordError("Invalid reported count for record batch: 0")
    if h.last_offset_delta + 1 != h.record_count:
        raise InvalidRecordError("Inconsistent batch offset range and record count")
    if h.is_control:
        raise InvalidRecordError("Clients are not allowed to write control records")
    if h.producer_id >= 0 and h.base_sequence < 0:
        raise InvalidRecordError("Invalid sequence number")
    if h.max_timestamp - now > after:
        raise InvalidTimestampError(
            f"timestamp {h.max_timestamp} is more than message.timestamp.after.max.ms={after} "
            "ahead")
    raise InvalidTimestampError(
        f"timestamp {h.max_timestamp} is more than message.timestamp.before.max.ms={before} old")


def _check_keys(mv: memoryview, batches: Batches) -> None:
    """Compacted topics need a key on every record (this decodes: compacted topics only)."""
    from sparklog.protocol.records import decode_batch

    for pos, _h in batches:
        for r in decode_batch(mv, pos, verify_crc=False).records:
            if r.key is None:
                raise InvalidRecordError("Compacted topic cannot accept message without key")


def assign_offsets(mv: memoryview, batches: Batches, first_offset: int, leader_epoch: int,
                   log_append_time: int | None) -> AppendBatches:
    """Offsets from ``first_offset`` on, the leader's epoch and (when given) the log-append
    time, stamped into a copy of each header; the records are sent as they came."""
    buffers: list[Buffer] = []
    metas, producer_batches = [], []
    max_ts, offset_of_max_ts, count, nxt = -1, -1, 0, first_offset
    for pos, h in batches:
        # one unpack instead of six attribute reads: this loop runs for every produced batch
        _b, length, _e, _m, _c, _a, lod, _bt, ts, producer_id, _pe, _bs, n = h
        size = LOG_OVERHEAD + length
        header = bytearray(mv[pos : pos + BATCH_HEADER_SIZE])
        stamp_offset_and_epoch(header, 0, nxt, leader_epoch)
        records = mv[pos + BATCH_HEADER_SIZE : pos + size]
        buffers.append(header)
        if size > BATCH_HEADER_SIZE:
            buffers.append(records)
        if log_append_time is not None:
            ts = log_append_time
            stamp_log_append_time(header, 0, ts, records)
        # the bookkeeping, as in replicated_batches
        last = nxt + lod
        metas.append((nxt, last, size, ts))
        if ts > max_ts:
            max_ts, offset_of_max_ts = ts, last
        if producer_id >= 0:
            producer_batches.append(_producer_batch(mv, pos, h, nxt, ts))
        count += n
        nxt = last + 1
    return _new_append(AppendBatches, (buffers, len(mv), metas, producer_batches, [], max_ts,
                                       offset_of_max_ts, count, nxt))


def _producer_batch(mv: memoryview, pos: int, h: BatchHeader, first_offset: int,
                    ts: int) -> ProducerBatch:
    """What producer state learns from the batch at ``pos`` (a control batch is read for
    its marker type)."""
    if h.attributes & CONTROL_MASK:
        return ProducerBatch.from_header(h, first_offset, ts, read_control_batch(mv, pos))
    return ProducerBatch.from_header(h, first_offset, ts)


def replicated_batches(mv: memoryview, batches: Batches, log_end_offset: int,
                       partition: str) -> AppendBatches:
    """A follower append: batches keep their offsets, which must start at or after the log
    end and increase (a gap is allowed: the leader compacted or moved its start)."""
    metas, producer_batches, epochs = [], [], []
    max_ts, offset_of_max_ts, count, expected = -1, -1, 0, log_end_offset
    for _pos, h in batches:
        base, ts = h.base_offset, h.max_timestamp
        if base < expected:
            raise UnexpectedAppendOffsetError(
                f"{partition}: batch at offset {base} is below the expected offset {expected}")
        if h.partition_leader_epoch >= 0:
            epochs.append((h.partition_leader_epoch, base))
        # the bookkeeping, as in assign_offsets
        last = base + h.last_offset_delta
        metas.append((base, last, LOG_OVERHEAD + h.batch_length, ts))
        if ts > max_ts:
            max_ts, offset_of_max_ts = ts, last
        if h.producer_id >= 0:
            producer_batches.append(_producer_batch(mv, _pos, h, base, ts))
        count += h.record_count
        expected = last + 1
    return _new_append(AppendBatches, ([mv], len(mv), metas, producer_batches, epochs, max_ts,
                                       offset_of_max_ts, count, expected))
