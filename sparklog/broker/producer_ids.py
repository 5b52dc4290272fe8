"""Producer ids for idempotent producers, handed out from blocks reserved in the metadata log.

A block is reserved durably before any id of it is handed out, so a restarted broker never
hands out an id whose sequence state might still exist.
"""

from __future__ import annotations

from typing import Protocol


class ProducerIdBlocks(Protocol):
    def allocate_producer_ids(self, count: int = 1000) -> tuple[int, int]:
        """Reserve ``count`` ids durably; returns (first id, count)."""
        ...


class ProducerIdManager:
    """Hands out producer ids from blocks reserved in the metadata log."""

    def __init__(self, blocks: ProducerIdBlocks, block: int = 1000) -> None:
        self._blocks = blocks
        self._block = block
        self._next = 0
        self._end = 0

    def next_id(self) -> int:
        if self._next >= self._end:
            self._next, count = self._blocks.allocate_producer_ids(self._block)
            self._end = self._next + count
        pid = self._next
        self._next += 1
        return pid
