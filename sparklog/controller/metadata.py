"""Cluster metadata's durable record log, which the image (``MetadataImage``, in the broker
layer so brokers keep the same image as their metadata cache) is rebuilt from.

Every change is a record appended to ``metadata.log`` and fsynced before the change is
visible, so a crash never loses a topic a client was told exists. Replaying the log from
the start rebuilds the image; that is also how a standby controller (multi-node, later)
catches up, which is why changes are records and not a rewritten state file.

File format (``<metadata dir>/metadata.log``), one record per line, UTF-8::

    <crc32c of the JSON text as 8 lowercase hex digits> <space> <JSON object> <LF>

A line whose CRC does not match, or a torn last line, ends the log: everything from it on
is truncated at open (it was never acknowledged). When the log holds many more records
than the image needs, it is rewritten as a snapshot (the records that recreate the image)
via write-temp + fsync + rename.

Record types (``"type"``): ``cluster`` (cluster_id), ``broker`` (node_id, host, port, rack, epoch: the broker epoch of
that registration),
``topic`` (name, topic_id hex, configs, internal), ``partition`` (topic, partition,
replicas, isr, leader, leader_epoch, partition_epoch; during a reassignment also
adding_replicas and removing_replicas), ``config`` (topic, configs: the full
override map), ``remove_topic`` (name), ``producer_ids`` (next: first id of the next
unallocated block), ``unfence_broker`` / ``fence_broker`` (node_id: the broker is live /
fenced), ``broker_config`` (entity: a broker id, or "" for the cluster-wide
default; configs: that entity's whole dynamic config map).
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any

import crc32c

from sparklog.broker.metadata_cache import MetadataImage, MetadataRecord

log = logging.getLogger(__name__)

__all__ = ["METADATA_DIR_NAME", "MetadataLog", "new_cluster_id", "new_topic_id"]

# The metadata log's directory inside the node's first log dir. Not "<topic>-<n>": a log
# manager must never take it for a partition directory.
METADATA_DIR_NAME = "__sparklog_metadata"


def _encode_line(rec: MetadataRecord) -> bytes:
    text = json.dumps(rec, separators=(",", ":"), sort_keys=True).encode()
    return b"%08x " % crc32c.crc32c(text) + text + b"\n"


def _decode_line(line: bytes) -> MetadataRecord | None:
    if len(line) < 10 or line[8:9] != b" " or not line.endswith(b"\n"):
        return None
    text = line[9:-1]
    try:
        if int(line[:8], 16) != crc32c.crc32c(text):
            return None
        rec = json.loads(text)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


class MetadataLog:
    """Append-only, fsynced record file backing a ``MetadataImage``."""

    FILE = "metadata.log"

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.dir = Path(directory)
        self.path = self.dir / self.FILE
        self.image = MetadataImage()
        self._records = 0
        self._fh: Any = None

    def open(self) -> MetadataImage:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".log.tmp")
        if tmp.exists():
            tmp.unlink()  # an interrupted snapshot; the old log is still whole
        valid_end = 0
        if self.path.exists():
            with open(self.path, "rb") as fh:
                for line in fh:
                    rec = _decode_line(line)
                    if rec is None:
                        break
                    self.image.apply(rec)
                    self._records += 1
                    valid_end += len(line)
            size = self.path.stat().st_size
            if size > valid_end:
                log.warning("metadata log %s: dropping %d bytes of torn/corrupt tail",
                            self.path, size - valid_end)
                with open(self.path, "r+b") as fh:
                    fh.truncate(valid_end)
                    fh.flush()
                    os.fsync(fh.fileno())
        self._fh = open(self.path, "ab")  # noqa: SIM115 - kept open for appends
        if self._records > 1000 and self._records > 4 * len(self.image.records()):
            self.snapshot()
        return self.image

    def append(self, *records: MetadataRecord) -> None:
        """Durably append records, then apply them to the image."""
        if self._fh is None:
            raise RuntimeError("metadata log is not open")
        data = b"".join(_encode_line(r) for r in records)
        self._fh.write(data)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        for r in records:
            self.image.apply(r)
        self._records += len(records)

    def snapshot(self) -> None:
        """Rewrite the log as the minimal records for the current image (atomic)."""
        records = self.image.records()
        tmp = self.path.with_suffix(".log.tmp")
        with open(tmp, "wb") as fh:
            fh.write(b"".join(_encode_line(r) for r in records))
            fh.flush()
            os.fsync(fh.fileno())
        if self._fh is not None:
            self._fh.close()
        os.replace(tmp, self.path)
        dfd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        self._fh = open(self.path, "ab")  # noqa: SIM115
        self._records = len(records)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def new_topic_id() -> bytes:
    """A random non-zero v4 UUID (the zero UUID means 'no id' on the wire)."""
    while True:
        u = uuid.uuid4().bytes
        if u != bytes(16):
            return u


def new_cluster_id() -> str:
    """Kafka's cluster id shape: URL-safe base64 of 16 random bytes, no padding."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
