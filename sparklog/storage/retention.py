"""Retention: which sealed segments a log drops (``retention.ms``, ``retention.bytes``, the
log start offset), and the dropped segments' ``.deleted`` files waiting out
``file.delete.delay.ms`` (Kafka's ``UnifiedLog.deleteOldSegments`` and its async delete).

Invariants: retention never drops the active segment nor a segment holding offsets at or
above the high watermark, and drops oldest first (a prefix of the segment list). A segment
in ``PendingDeletes`` is already out of its log's segment list and renamed ``.deleted``:
only its files remain, and they go once its deadline passes (or at close).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .log_config import LogConfig
from .segment import LogSegment

__all__ = ["PendingDeletes", "segments_past_retention"]


def segments_past_retention(segments: list[LogSegment], config: LogConfig, *,
                            high_watermark: int, log_start_offset: int, now_ms: int,
                            time_ms: Callable[[], int]) -> int:
    """How many of ``segments`` (oldest first; the last is the active one) retention
    deletes: those wholly below the log start, or past ``retention.ms``, or needed to bring
    the log under ``retention.bytes``, stopping at the first one that stays."""
    doomed = 0
    excess = (sum(s.size for s in segments) - config.retention_bytes
              if config.delete and config.retention_bytes >= 0 else 0)
    while doomed < len(segments) - 1:
        seg, nxt = segments[doomed], segments[doomed + 1]
        if nxt.base_offset > high_watermark:
            break
        below_start = nxt.base_offset <= log_start_offset
        by_time = (config.delete and config.retention_ms >= 0
                   and now_ms - seg.retention_timestamp(time_ms()) > config.retention_ms)
        by_size = excess > 0 and excess - seg.size >= 0
        if not (below_start or by_time or by_size):
            break
        excess -= seg.size
        doomed += 1
    return doomed


class PendingDeletes:
    """Segments renamed ``.deleted``, each with the time (ms) its files may go.
    Thread-safe; files are removed outside the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[tuple[int, LogSegment]] = []

    def add(self, seg: LogSegment, deadline_ms: int) -> None:
        with self._lock:
            self._queue.append((deadline_ms, seg))

    def delete_due(self, now_ms: int, force: bool = False) -> int:
        """Remove the files of every segment whose deadline passed (all with ``force``);
        returns how many."""
        with self._lock:
            due = [s for d, s in self._queue if force or d <= now_ms]
            self._queue = [(d, s) for d, s in self._queue if not (force or d <= now_ms)]
        for seg in due:
            seg.delete_files()
        return len(due)
