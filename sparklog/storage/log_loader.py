"""Opening a partition directory: what a crash left behind is finished, dropped or
re-validated before the log serves anything (Kafka's ``LogLoader``).

In order: transient files go (``.tmp``, ``.cleaned``, ``.deleted``, index swaps); a
compaction that crashed after its output became ``.log.swap`` is completed; orphan indexes
go; then sealed segments below the recovery point are loaded as trusted (their indexes only
sanity-checked, rebuilt when that fails) and the rest, always including the active segment,
are recovered batch by batch (``LogSegment.recover``); finally leader epochs are cut to the
log's range (rebuilt from the batches' partition leader epochs when the checkpoint was
missing or unreadable) and producer state is rebuilt from the latest snapshot plus the
batches after it.

The active segment is validated even after a clean shutdown (Kafka trusts it then): it is the
only segment appended to, so an undetected torn or garbage tail there would have the next
append land after bytes no reader can pass, and that acknowledged record would never be
served. Sealed segments below the recovery point stay trusted (re-reading every byte at each
start would make start-up cost grow with the log); the scrub (``LogManager``'s
``scrub_interval_ms``) finds bit rot in them.

Invariants it establishes:

* Segments are sorted by base offset, all but the last non-empty, and each one's batches
  follow the previous segment's offsets.
* A torn or corrupt tail of the LAST non-empty segment is truncated at its first invalid
  batch (Kafka's recovery), with an ERROR line naming the file, the position and the bytes
  dropped; later, empty segments go with it. So the log end offset always follows the last
  servable batch, and appends keep offsets dense.
* A bad batch inside a *sealed* segment followed by non-empty segments is never dropped
  (later segments hold acknowledged data a single replica cannot get back): the segment
  keeps ``corrupt_position``/``corrupt_offset`` so reads of that range fail with
  KAFKA_STORAGE_ERROR and the broker can re-fetch it from a replica; later segments are
  served, and appends go to the active segment, never after those bytes.
* log start offset <= recovery point <= log end offset; the leader-epoch cache and
  producer state cover exactly [log start, log end).
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

from sparklog.protocol.batch_header import BatchView
from sparklog.protocol.control_records import read_control_batch
from sparklog.protocol.errors import KafkaStorageError
from sparklog.protocol.topic_partition import TopicPartition

from .checkpoints import read_partition_metadata, topic_id_to_str, write_partition_metadata
from .leader_epoch import LeaderEpochCache
from .producer_state import ProducerBatch, ProducerStateManager
from .segment import (
    BY_BASE_OFFSET,
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    filename_prefix,
    parse_segment_name,
)
from .txn_index import AbortedTxn

__all__ = [
    "PARTITION_METADATA",
    "LoadedLog",
    "LogLoader",
    "check_topic_id",
    "parse_topic_partition",
    "rebuild_producer_state",
]

log = logging.getLogger(__name__)

PARTITION_METADATA = "partition.metadata"

def parse_topic_partition(dirname: str) -> TopicPartition:
    """``orders-3`` -> ("orders", 3): topics may contain '-', partitions never do."""
    topic, sep, part = os.path.basename(dirname.rstrip("/")).rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise ValueError(f"not a partition directory name: {dirname!r}")
    return TopicPartition(topic, int(part))


def check_topic_id(directory: str, topic_id: bytes | str | None) -> bytes | str | None:
    """The topic id of the partition in ``directory``: ``topic_id`` when given (recorded in
    ``partition.metadata`` if nothing is; a different recorded id is refused, the directory
    belongs to a deleted topic of the same name), else whatever is recorded."""
    meta_path = os.path.join(directory, PARTITION_METADATA)
    existing = read_partition_metadata(meta_path)
    if topic_id is None:
        return existing
    if existing is not None and topic_id_to_str(existing) != topic_id_to_str(topic_id):
        raise KafkaStorageError(
            f"topic id {topic_id_to_str(topic_id)} does not match "
            f"{topic_id_to_str(existing)} recorded in {meta_path}"
        )
    if existing is None:
        write_partition_metadata(meta_path, topic_id)
    return topic_id


@dataclass(slots=True)
class LoadedLog:
    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int


class LogLoader:
    """Loads one partition directory; ``new_segment(base, suffix)`` opens a segment with the
    log's config, ``name`` (``topic-partition``) is for log lines."""

    def __init__(self, directory: str, new_segment: Callable[[int, str], LogSegment],
                 epochs: LeaderEpochCache, producers: ProducerStateManager, name: str) -> None:
        self.directory = directory
        self._new_segment = new_segment
        self._epochs = epochs
        self._producers = producers
        self._name = name

    def load(self, recovery_point: int, log_start_offset: int | None,
             clean: bool) -> LoadedLog:
        """Everything the module docstring lists. ``clean`` (a clean shutdown) trusts every
        sealed segment; otherwise those from the one holding ``recovery_point`` on are
        recovered. The active segment is recovered either way."""
        bases = self._clear_transient_files()
        segments = [self._new_segment(b, "") for b in sorted(bases)]
        if not segments:
            segments = [self._new_segment(log_start_offset or 0, "")]

        active = len(segments) - 1
        if clean:
            first_unflushed = active
        else:
            first_unflushed = min(active, max(
                0, bisect_right(segments, recovery_point, key=BY_BASE_OFFSET) - 1))
        for i in range(first_unflushed):
            segments[i].load(segments[i + 1].base_offset)
        self._recover_segments(segments, first_unflushed)
        if self._epochs.needs_rebuild:
            self._rebuild_epochs(segments)

        leo = segments[-1].next_offset
        start = segments[0].base_offset if log_start_offset is None else log_start_offset
        start = min(max(start, segments[0].base_offset), leo)
        self._epochs.truncate_from_end(leo)
        self._epochs.truncate_from_start(start)
        rebuild_producer_state(self._producers, segments, start, leo)
        return LoadedLog(segments, start, leo, min(recovery_point, leo))

    def _clear_transient_files(self) -> set[int]:
        """Remove what a crash may leave besides whole segments; returns the segment bases."""
        swaps: list[int] = []
        bases: set[int] = set()
        for name in sorted(os.listdir(self.directory)):
            parsed = parse_segment_name(name)
            path = os.path.join(self.directory, name)
            if name.endswith(".tmp"):
                os.remove(path)
                continue
            if parsed is None:
                continue
            base, suffix = parsed
            if suffix.endswith(CLEANED_SUFFIX) or suffix.endswith(DELETED_SUFFIX):
                os.remove(path)
            elif suffix == LOG_SUFFIX + SWAP_SUFFIX:
                swaps.append(base)
            elif suffix == TXN_INDEX_SUFFIX + SWAP_SUFFIX:
                continue  # a swap's aborted transactions: kept by ``_complete_swap``
            elif suffix.endswith(SWAP_SUFFIX):
                os.remove(path)  # index swaps: indexes of swapped segments are rebuilt
            elif suffix == LOG_SUFFIX:
                bases.add(base)
        for base in sorted(swaps):
            self._complete_swap(base, bases)
        for name in os.listdir(self.directory):
            if name.endswith(TXN_INDEX_SUFFIX + SWAP_SUFFIX):  # its swap was not completed
                os.remove(os.path.join(self.directory, name))
        # orphan indexes (their .log is gone) would confuse a later segment with that base
        for name in os.listdir(self.directory):
            parsed = parse_segment_name(name)
            if (parsed and parsed[1] in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
                    and parsed[0] not in bases):
                os.remove(os.path.join(self.directory, name))
        return bases

    def _remove_segment_files(self, base: int, suffixes: tuple[str, ...]) -> None:
        prefix = os.path.join(self.directory, filename_prefix(base))
        for suf in suffixes:
            try:
                os.remove(prefix + suf)
            except FileNotFoundError:
                pass

    def _complete_swap(self, base: int, bases: set[int]) -> None:
        """A crash after compaction renamed its output to ``.swap``: the swap file is whole
        (it was fsynced before the rename), so finish replacing the segments it covers."""
        seg = self._new_segment(base, SWAP_SUFFIX)
        res = seg.recover(truncate=False)
        if seg.size == 0 or res.error is not None:
            # not a whole swap file after all: the segments it would replace are intact
            log.warning("discarding unusable swap file %s (%s)", seg.log_path, res.error)
            seg.delete_files()
            return
        end = seg.next_offset
        replaced = sorted(b for b in bases if base <= b < end)
        for b in replaced:
            self._remove_segment_files(b, (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX,
                                           TXN_INDEX_SUFFIX))
            bases.discard(b)
        txn_swap = seg.txn_index.path
        if os.path.exists(txn_swap):
            os.replace(txn_swap, txn_swap[: -len(SWAP_SUFFIX)])
        seg.offset_index.delete_file()
        seg.time_index.delete_file()
        seg.close_fd_only()
        prefix = os.path.join(self.directory, filename_prefix(base))
        os.replace(prefix + LOG_SUFFIX + SWAP_SUFFIX, prefix + LOG_SUFFIX)
        self._remove_segment_files(base, (INDEX_SUFFIX, TIME_INDEX_SUFFIX))  # rebuilt on load
        bases.add(base)
        log.info("completed interrupted segment swap at %s (replaced %s)", prefix, replaced)

    def _recover_segments(self, segs: list[LogSegment], first: int) -> None:
        """Recover ``segs[first:]`` in place (see the invariants in the module docstring)."""
        expected = segs[first - 1].next_offset if first > 0 else None
        i = first
        while i < len(segs):
            seg = segs[i]
            is_tail = all(os.fstat(s.fd).st_size == 0 for s in segs[i + 1 :])
            res = seg.recover(self._on_recovered_batch, truncate=is_tail, min_offset=expected)
            if res.error is not None and is_tail:
                for s in segs[i + 1 :]:
                    s.delete_files()
                del segs[i + 1 :]
                break
            if res.error is not None:
                log.error("%s: sealed segment %s corrupt from offset %d; later segments kept",
                          self._name, seg.log_path, seg.next_offset)
            expected = seg.next_offset if seg.size else (expected or seg.base_offset)
            if not seg.size:
                seg.next_offset = seg.base_offset
            i += 1
        # drop empty non-last segments left by a crash between roll and first append
        for s in segs[:-1]:
            if not s.size:
                s.delete_files()
        segs[:] = [s for s in segs[:-1] if s.size] + [segs[-1]]
        last = segs[-1]
        if last.size == 0:
            last.next_offset = last.base_offset
        for s in segs:
            s.offset_index.flush()
            s.time_index.flush()

    def _rebuild_epochs(self, segs: list[LogSegment]) -> None:
        """The leader-epoch cache from the partition leader epoch of every servable batch
        (the checkpoint was missing or unreadable); one header read per batch."""
        epochs = self._epochs
        epochs.clear()
        for seg in segs:
            end = seg.size if seg.corrupt_position is None else seg.corrupt_position
            for b in seg.iter_headers(0, end):
                h = seg.read_header(b.position)
                if h is not None and h.partition_leader_epoch > epochs.latest_epoch:
                    epochs.assign(h.partition_leader_epoch, h.base_offset)
        if epochs.entries():
            log.warning("%s: rebuilt leader epochs %s from the log into %s", self._name,
                        epochs.entries(), epochs.path)

    def _on_recovered_batch(self, view: BatchView) -> None:
        ple = view.partition_leader_epoch
        if ple >= 0 and ple > self._epochs.latest_epoch:
            self._epochs.assign(ple, view.base_offset)


def rebuild_producer_state(producers: ProducerStateManager, segments: list[LogSegment],
                           log_start_offset: int, log_end_offset: int) -> None:
    """Producer state for [log start, log end): the latest usable snapshot, then every
    batch with a producer id after it (after truncation too). Aborted transactions whose
    marker the replay meets are added to their segment's ``.txnindex`` where missing (a
    crash may come between the marker's write and its index entry's)."""
    for seg in segments:
        seg.txn_index.truncate_to(seg.next_offset)
    start = producers.truncate_and_reload(log_start_offset, log_end_offset)
    from_offset = log_start_offset if start is None else max(start, log_start_offset)
    if from_offset < log_end_offset:
        for seg in segments:
            if seg.next_offset <= from_offset:
                continue
            b = seg.find_batch(from_offset)
            if b is None:
                continue
            for pos in seg.iter_headers(b.position):
                h = seg.read_header(pos.position)
                if h is None or h.producer_id < 0:
                    continue
                marker = (read_control_batch(seg.read_batch_bytes(pos.position, pos.size))
                          if h.is_control else (-1, -1))
                done = producers.replay(ProducerBatch.from_header(h, h.base_offset,
                                                                  h.max_timestamp, marker))
                if done is not None and done.is_aborted:
                    seg.txn_index.append(AbortedTxn(done.producer_id, done.first_offset,
                                                    done.last_offset,
                                                    producers.stable_offset_after(done)))
    producers.map_end_offset = log_end_offset
