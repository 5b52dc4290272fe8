"""The per-partition manifest: which uploaded segments are complete, and who wrote them.

A segment object becomes visible only when a manifest lists it, so an upload that died
half-way (or one by a fenced leader) is never read: its objects are orphans under names no
manifest mentions. The manifest is one small JSON object replaced whole (``RemoteStore.
put_atomic``), so a reader sees the old list or the new one, and only if it still holds
what the writer read (``conditional.replace_if``).

Invariants: segments are sorted by base offset and each one's ``end_offset`` is greater than
the previous one's (consecutive leaders may cut segments differently, so a segment may start
below the previous end: the bytes of the overlap are the same committed batches);
``log_start_offset`` <= the first segment's end offset; ``leader_epoch`` only grows: a
writer whose epoch is below the stored one is fenced and writes nothing.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from dataclasses import dataclass, field, replace

from .store import RemoteStorageError, RemoteStore

__all__ = ["PartitionManifest", "RemoteSegment", "parse_manifest", "read_manifest"]

_VERSION = 1


@dataclass(frozen=True, slots=True)
class RemoteSegment:
    """One uploaded segment. Its objects are ``<base:020d>-<segment_id><suffix>`` for every
    suffix in ``files`` (suffix -> object size)."""

    base_offset: int
    end_offset: int  # last offset + 1
    max_timestamp: int
    segment_id: str
    leader_epoch: int  # the epoch of the leader that uploaded it
    files: dict[str, int] = field(default_factory=dict)
    # the partition's leader epochs (epoch, start offset) up to ``end_offset``
    leader_epochs: tuple[tuple[int, int], ...] = ()

    @property
    def size(self) -> int:
        """Bytes of the ``.log`` object."""
        return self.files.get(".log", 0)

    def to_json(self) -> dict[str, object]:
        return {"base_offset": self.base_offset, "end_offset": self.end_offset,
                "max_timestamp": self.max_timestamp, "segment_id": self.segment_id,
                "leader_epoch": self.leader_epoch, "files": self.files,
                "leader_epochs": [list(e) for e in self.leader_epochs]}

    @classmethod
    def from_json(cls, d: dict) -> RemoteSegment:
        return cls(int(d["base_offset"]), int(d["end_offset"]), int(d["max_timestamp"]),
                   str(d["segment_id"]), int(d["leader_epoch"]),
                   {str(k): int(v) for k, v in d["files"].items()},
                   tuple((int(e), int(s)) for e, s in d["leader_epochs"]))


@dataclass(frozen=True, slots=True)
class PartitionManifest:
    leader_epoch: int = -1
    log_start_offset: int = 0
    segments: tuple[RemoteSegment, ...] = ()

    @property
    def end_offset(self) -> int | None:
        """The offset after the last uploaded one (None: nothing uploaded)."""
        return self.segments[-1].end_offset if self.segments else None

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def segment_for(self, offset: int) -> RemoteSegment | None:
        """The first segment holding ``offset`` (at or above the log start)."""
        if offset < self.log_start_offset:
            return None
        i = bisect_right(self.segments, offset, key=_end) if self.segments else 0
        if i < len(self.segments) and self.segments[i].base_offset <= offset:
            return self.segments[i]
        return None

    def with_segment(self, seg: RemoteSegment, log_start_offset: int) -> PartitionManifest:
        """``seg`` appended; the log start is the partition's (``log_start_offset``), never
        below the first segment's base nor below the start recorded before."""
        end = self.end_offset
        if end is not None and seg.end_offset <= end:
            raise ValueError(f"segment ending at {seg.end_offset} adds nothing after {end}")
        first = self.segments[0] if self.segments else seg
        start = max(self.log_start_offset, log_start_offset, first.base_offset)
        return PartitionManifest(max(self.leader_epoch, seg.leader_epoch), start,
                                 self.segments + (seg,))

    def without_segments_below(self, log_start_offset: int, leader_epoch: int) -> PartitionManifest:
        """Segments wholly below ``log_start_offset`` dropped (retention, DeleteRecords)."""
        kept = tuple(s for s in self.segments if s.end_offset > log_start_offset)
        return replace(self, leader_epoch=max(self.leader_epoch, leader_epoch),
                       log_start_offset=max(self.log_start_offset, log_start_offset),
                       segments=kept)

    def to_bytes(self) -> bytes:
        return json.dumps({"version": _VERSION, "leader_epoch": self.leader_epoch,
                           "log_start_offset": self.log_start_offset,
                           "segments": [s.to_json() for s in self.segments]},
                          separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> PartitionManifest:
        d = json.loads(data)
        if d.get("version") != _VERSION:
            raise ValueError(f"unknown manifest version {d.get('version')!r}")
        return cls(int(d["leader_epoch"]), int(d["log_start_offset"]),
                   tuple(RemoteSegment.from_json(s) for s in d["segments"]))


def read_manifest(store: RemoteStore, path: str) -> PartitionManifest:
    """The manifest stored at ``path`` (an empty one when there is none yet); a manifest
    that cannot be parsed raises ``RemoteStorageError`` like a store that cannot be read."""
    return parse_manifest(store.get_bytes(path), path)


def parse_manifest(data: bytes | None, path: str) -> PartitionManifest:
    """The manifest in ``data`` read from ``path`` (None: there is none yet)."""
    try:
        return PartitionManifest() if data is None else PartitionManifest.from_bytes(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise RemoteStorageError(f"unreadable manifest {path}: {exc}") from exc


def _end(seg: RemoteSegment) -> int:
    return seg.end_offset
