"""A segment's ``.txnindex``: the aborted transactions whose ABORT marker lies in it
(Kafka's ``TransactionIndex``, byte for byte).

A ``read_committed`` fetch returns the data below the last stable offset together with the
aborted transactions overlapping it, and the consumer drops those producers' records from
each transaction's first offset to its marker. The broker finds them here without reading
the log. Each entry is 34 bytes, big endian::

    version             i16 (0)
    producer id         i64
    first offset        i64  the transaction's first data offset in this partition
    last offset         i64  the offset of its ABORT marker
    last stable offset  i64  the partition's LSO once this transaction completed

Invariants: entries are in marker order (``last_offset`` increasing) and every marker lies
in the segment the file belongs to, so an entry is appended at most once (``append``
ignores one at or below the last entry: replaying the log after a restart adds only what
is missing). The whole file is held in memory too (entries are few: one per aborted
transaction). Not thread-safe; the ``PartitionLog`` lock guards it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from typing import NamedTuple

__all__ = ["AbortedTxn", "TransactionIndex", "collect_aborted", "parse_txn_index"]

log = logging.getLogger(__name__)

_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def parse_txn_index(data: bytes, name: str) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file's bytes (``name`` it, for the log lines): a
    torn last entry, and everything from an entry of an unknown version on, are dropped."""
    whole = len(data) - len(data) % _ENTRY.size
    if whole != len(data):
        log.warning("%s: dropping a torn entry of %d bytes", name, len(data) - whole)
    out = []
    for version, pid, first, last, lso in _ENTRY.iter_unpack(data[:whole]):
        if version != _VERSION:
            log.warning("%s: entry version %d; dropping the rest", name, version)
            break
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def collect_aborted(entries: list[AbortedTxn], fetch_offset: int,
                    upper_bound: int) -> tuple[list[AbortedTxn], bool]:
    """The ``entries`` overlapping [fetch_offset, upper_bound), and whether the search is
    complete (an entry's LSO reached ``upper_bound``: no later segment can hold a
    transaction that began below it)."""
    out = []
    for e in entries:
        if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
            out.append(e)
        if e.last_stable_offset >= upper_bound:
            return out, True
    return out, False


class TransactionIndex:
    """The aborted transactions of one segment, on disk at ``path`` (created on the first
    entry: most segments never have one)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._load()

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        self.entries = parse_txn_index(data, self.path)
        if len(self.entries) * _ENTRY.size != len(data):
            self._rewrite()

    @property
    def last_offset(self) -> int:
        return self.entries[-1].last_offset if self.entries else -1

    def append(self, txn: AbortedTxn) -> bool:
        """Record ``txn`` unless its marker is not past the last one recorded."""
        if txn.last_offset <= self.last_offset:
            return False
        self.entries.append(txn)
        with open(self.path, "ab") as f:
            f.write(_ENTRY.pack(_VERSION, *txn))
        return True

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """``collect_aborted`` over this segment's entries."""
        return collect_aborted(self.entries, fetch_offset, upper_bound)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after ``offset`` (log truncation)."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            self._rewrite()

    def _rewrite(self) -> None:
        if not self.entries:
            self.delete_file()
            return
        from .checkpoints import atomic_write

        atomic_write(self.path, b"".join(_ENTRY.pack(_VERSION, *e) for e in self.entries))

    def flush(self) -> None:
        """fsync the file (appends go straight to it, unbuffered)."""
        if not self.entries:
            return
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, path)
        self.path = path

    def delete_file(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)
