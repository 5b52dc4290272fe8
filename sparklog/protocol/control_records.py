"""Control records: the transaction markers (and KRaft's control types) inside control batches.

A control batch has the control attribute bit set and records whose key is
(version i16, type i16); a transaction marker's value is (version i16, coordinatorEpoch i32).
WriteTxnMarkers appends them, consumers skip them (and drop aborted data by them).
"""

from __future__ import annotations

import struct
from enum import IntEnum

from .batch_header import NO_PARTITION_LEADER_EPOCH, Buffer
from .errors import CorruptRecordError, InvalidRecordError
from .records import Record, decode_batch, encode_batch

__all__ = [
    "ControlRecordType",
    "control_record_key",
    "end_txn_marker_value",
    "parse_control_record_key",
    "parse_end_txn_marker",
    "encode_control_batch",
    "read_control_batch",
]


class ControlRecordType(IntEnum):
    """Key ``type`` of a control record (ABORT/COMMIT are transaction markers; the others
    belong to KRaft's metadata log)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


def control_record_key(record_type: ControlRecordType | int) -> bytes:
    return _CONTROL_KEY.pack(CONTROL_KEY_VERSION, int(record_type))


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return _END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def parse_control_record_key(key: Buffer | None) -> tuple[int, int]:
    """(version, type); consumers must skip types they do not know."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError("control record key shorter than 4 bytes")
    return _CONTROL_KEY.unpack_from(key, 0)


def parse_end_txn_marker(record: Record) -> tuple[bool, int]:
    """(is_commit, coordinator_epoch) of a transaction marker record."""
    _version, rtype = parse_control_record_key(record.key)
    if rtype not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise InvalidRecordError(f"control record type {rtype} is not a transaction marker")
    if record.value is None or len(record.value) < _END_TXN_VALUE.size:
        raise CorruptRecordError("end-transaction marker value shorter than 6 bytes")
    _vversion, coordinator_epoch = _END_TXN_VALUE.unpack_from(record.value, 0)
    return rtype == ControlRecordType.COMMIT, coordinator_epoch


def encode_control_batch(
    commit: bool,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp: int | None = None,
) -> bytes:
    """A transaction marker batch (what WriteTxnMarkers appends): transactional + control,
    one record whose key is (version 0, ABORT|COMMIT) and value (version 0, epoch)."""
    rtype = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    rec = Record(
        control_record_key(rtype), end_txn_marker_value(coordinator_epoch), [], timestamp
    )
    return encode_batch(
        [rec], base_offset=base_offset, producer_id=producer_id, producer_epoch=producer_epoch,
        is_transactional=True, is_control=True, partition_leader_epoch=partition_leader_epoch,
    )


def read_control_batch(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """(record type, coordinator epoch) of the control batch at ``pos``; the epoch is -1
    for a type that is not a transaction marker. Control batches are rare (one per
    transaction and partition), so this decodes the batch."""
    records = decode_batch(buf, pos, verify_crc=False).records
    if not records:
        raise CorruptRecordError("control batch without a record")
    _version, rtype = parse_control_record_key(records[0].key)
    if rtype not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return rtype, -1
    return rtype, parse_end_txn_marker(records[0])[1]
