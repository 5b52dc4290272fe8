"""The committed metadata as an offset-addressed log that brokers in other processes fetch.

A controller process serves its metadata to brokers the way KRaft does: as the partition
``__cluster_metadata``-0, read with the Fetch API (format: ``sparklog.broker.metadata_wire``).
Offset 0.. holds the records that recreate the image when this controller started (its
snapshot), then every batch the controller publishes, in commit order.

Invariants: offsets only grow within one controller run; every batch carries the
controller epoch as its partition leader epoch, which grows with every controller start
(``ControllerEpoch``). A broker fetching with an older epoch is told FENCED_LEADER_EPOCH
and loads the whole stream again, so after a controller restart no broker applies records
from two different numberings. The stream is in memory: it is rebuilt from the durable
metadata log at start, and only committed changes enter it.
"""

from __future__ import annotations

import asyncio
import bisect
import os
from pathlib import Path

from sparklog.broker.metadata_cache import MetadataRecord
from sparklog.broker.metadata_wire import encode_metadata_batch

__all__ = ["ControllerEpoch", "MetadataStream"]


class ControllerEpoch:
    """The controller epoch, kept in ``<metadata dir>/controller-epoch``: each controller
    start claims the next one (written durably before it serves)."""

    FILE = "controller-epoch"

    @classmethod
    def claim(cls, metadata_dir: str | os.PathLike[str]) -> int:
        path = Path(metadata_dir) / cls.FILE
        try:
            epoch = int(path.read_text(encoding="ascii").strip()) + 1
        except FileNotFoundError:
            epoch = 1
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="ascii") as fh:
            fh.write(f"{epoch}\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        return epoch


class MetadataStream:
    """Published metadata batches by offset; ``append`` is a controller listener."""

    def __init__(self, epoch: int, snapshot: list[MetadataRecord]) -> None:
        self.epoch = epoch
        self.end_offset = 0
        self._bases: list[int] = []
        self._batches: list[bytes] = []
        self._changed = asyncio.Event()
        self.append(snapshot)

    def append(self, records: list[MetadataRecord]) -> None:
        if not records:
            return
        batch = encode_metadata_batch(records, self.end_offset, self.epoch)
        self._bases.append(self.end_offset)
        self._batches.append(batch)
        self.end_offset += len(records)
        self.wake()

    def wake(self) -> None:
        """Answer every waiting fetch now (new records, or the controller stopping)."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset`` on, at least one, then up to
        ``max_bytes`` in all."""
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        out: list[bytes] = []
        size = 0
        for batch in self._batches[i:]:
            if out and size + len(batch) > max_bytes:
                break
            out.append(batch)
            size += len(batch)
        return b"".join(out)

    async def wait_beyond(self, offset: int, timeout_s: float) -> None:
        """Return once the stream ends after ``offset`` or ``timeout_s`` passed."""
        if self.end_offset > offset or timeout_s <= 0:
            return
        try:
            await asyncio.wait_for(self._changed.wait(), timeout_s)
        except TimeoutError:
            pass

