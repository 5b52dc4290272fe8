"""Metadata records on the wire: the ``__cluster_metadata`` partition a controller process
serves and brokers in other processes fetch (the controller side is
``sparklog.controller.metadata_stream``).

One record batch per batch the controller published, in commit order, at consecutive
offsets; each record's value is one JSON metadata record (``MetadataRecord``); every
batch's partition leader epoch is the controller epoch that wrote it.
"""

from __future__ import annotations

import json

from sparklog.broker.metadata_cache import MetadataRecord
from sparklog.protocol.records import Record, decode_batches, encode_batch

__all__ = ["METADATA_TOPIC", "decode_metadata_batches", "encode_metadata_batch"]

METADATA_TOPIC = "__cluster_metadata"


def encode_metadata_batch(records: list[MetadataRecord], base_offset: int, epoch: int) -> bytes:
    return encode_batch(
        [Record(value=json.dumps(r, separators=(",", ":")).encode()) for r in records],
        base_offset=base_offset, partition_leader_epoch=epoch)


def decode_metadata_batches(data: bytes | memoryview, from_offset: int
                            ) -> tuple[list[MetadataRecord], int, int]:
    """A fetched records section -> (its records at ``from_offset`` and after, the offset
    after the last one, the controller epoch of the last batch or -1 when none came)."""
    records: list[MetadataRecord] = []
    end = from_offset
    epoch = -1
    for batch in decode_batches(data):
        epoch = batch.partition_leader_epoch
        for rec in batch.records:
            if rec.offset >= end and rec.value is not None:
                records.append(json.loads(rec.value))
                end = rec.offset + 1
    return records, end, epoch
