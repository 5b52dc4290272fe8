"""Reading uploaded segments straight from the bucket (the source's ``storageReads``).

A tiered topic's sealed segments are objects in a bucket (``sparklog.storage.remote``), so a
task can read them itself instead of asking the partition's leader: a long backfill then
scales with Spark executors, not with brokers, and brokers are left alone.

Driver (``BucketPlanner``): for each read it asks the brokers which of the read's topics
are tiered (``remote.storage.enable``, remembered once true: Kafka never lets a topic go
back; a topic found not tiered is asked again after a minute) and their topic ids, then reads the manifest of every partition with data to read
(one small GET each, done together; never a listing of the bucket). Its ``route`` hook,
given to ``planning.plan_tasks``, turns a planned range that starts in uploaded segments
into a ``BucketRange`` naming the segment objects it needs and where its bucket part ends
(``bucket_end``: the upload's end, see below for read_committed): its task reads that part
from the bucket and the rest (the local tail) through brokers, so a read plans the tasks
``never`` plans (a tail of its own would cost a Spark task for a few records). A manifest
that cannot be read leaves the partition to the brokers (logged): bucket reads are a
shortcut, never a new way to fail.

Executors (``read_planned``): a ``BucketRange`` is read segment by segment from the index
entry at or before its start, in windows of ``kafka.max.partition.fetch.bytes`` (the next
one read on a thread while this one is decoded, and decoded on another while Spark takes
the rows before), decoded by the same vectorised Arrow
decoder and filters as a broker fetch (``decode_fetched``: offset bounds, control batches,
aborted transactions under read_committed; ``record_rows``: headers or not) and yielded one
Arrow batch per window. Rows are therefore those ``storageReads=never`` gives, partition by
partition in offset order. A segment object gone since planning (retention ran) hands the
rest of the range to the brokers, whose answer follows ``failOnDataLoss``; so does a store
that still fails after ``RemoteStore``'s retries.

Aborted transactions come from the uploaded ``.txnindex`` objects (``aborted_transactions``,
the one hook a transactions implementation plugs into): the planner lists, under
read_committed, those of every uploaded segment from the range's first one on, and each
window is decoded with those whose ABORT marker is at or after its first batch
(``overlapping``), as a Fetch from there lists them. A transaction
still open at the upload's end has its marker (ABORT or COMMIT) in the local tail, in no
uploaded ``.txnindex``; so under read_committed the bucket part ends at the first offset of
the earliest such transaction (``committed_end``, from the producer snapshot uploaded with the
last segment, which names them: Kafka's own record of the transactions open at an offset),
and brokers serve the rest, their Fetch listing what they abort. Invariant: the bucket part
holds no record of a transaction whose marker is above the upload's end. No readable
snapshot: the partition is left to the brokers.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import pyarrow as pa

from sparklog.protocol.batch_header import BATCH_HEADER_SIZE, LOG_OVERHEAD, batch_size
from sparklog.protocol.errors import CorruptRecordError
from sparklog.spark.offsets import TopicPartitionKey
from sparklog.spark.partition_reader import read_ranges
from sparklog.spark.planning import OffsetRange
from sparklog.storage.producer_state import SNAPSHOT_SUFFIX, parse_snapshot
from sparklog.storage.remote.manifest import PartitionManifest, RemoteSegment, read_manifest
from sparklog.storage.remote.remote_log import index_floor, parse_offset_index
from sparklog.storage.remote.store import MANIFEST, RemoteStorageError, RemoteStore

if TYPE_CHECKING:
    from sparklog.spark.offset_reader import OffsetReader
    from sparklog.spark.options import SourceOptions

log = logging.getLogger(__name__)

__all__ = [
    "BucketPlanner",
    "BucketRange",
    "SegmentObjects",
    "aborted_transactions",
    "committed_end",
    "read_planned",
    "split_at_upload",
]

# Kafka's .txnindex entry: version int16, producer id, first offset, last offset, last
# stable offset (int64 each)
_TXN_ENTRY = struct.Struct(">hqqqq")
_MANIFEST_READERS = 16  # manifests of one plan read at once
# a topic found not tiered is asked again after this long (it may be switched on; as
# Kafka clients refresh metadata every metadata.max.age.ms)
_RECHECK_S = 60.0


@dataclass(frozen=True)
class SegmentObjects:
    """What a task needs of one uploaded segment: where its objects are, and their sizes."""

    base_offset: int
    end_offset: int  # last offset + 1
    log_path: str
    log_size: int
    index_path: str
    index_size: int

    @classmethod
    def of(cls, store: RemoteStore, directory: str, seg: RemoteSegment) -> SegmentObjects:
        def path(suffix: str) -> str:
            return store.object_path(directory, seg.base_offset, seg.segment_id, suffix)

        return cls(seg.base_offset, seg.end_offset, path(".log"), seg.size, path(".index"),
                   seg.files.get(".index", 0))


@dataclass(frozen=True)
class BucketRange(OffsetRange):
    """Offsets ``[start, end)`` of one partition whose part below ``bucket_end`` is in
    uploaded segments: that part is read from the bucket at ``url``, the rest through
    brokers, by the same task (a planned range stays one task, as with ``never``).
    ``segments``: those holding ``[start, bucket_end)``, in offset order; ``txn_indexes``:
    (path, size) of the ``.txnindex`` objects whose aborted transactions apply
    (read_committed only). ``bucket_end``: the upload's end, or under read_committed the
    ``committed_end`` below it."""

    url: str = ""
    segments: tuple[SegmentObjects, ...] = ()
    txn_indexes: tuple[tuple[str, int], ...] = ()
    bucket_end: int = 0


# ---------------------------------------------------------------------------- driver


class BucketPlanner:
    """The driver's view of the bucket for one source: which topics are tiered, and each
    read's manifests."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._tiered: set[str] = set()
        self._not_tiered: dict[str, float] = {}  # topic -> when it was found not tiered
        self._url: str | None = options.storage_url
        # partition dir -> (its last uploaded segment's id, committed_end): an uploaded
        # snapshot never changes, so it is read once per segment
        self._committed_ends: dict[str, tuple[str, int]] = {}

    def route(
        self, offsets: OffsetReader, wanted: Iterable[TopicPartitionKey]
    ) -> Callable[[OffsetRange], list[OffsetRange]] | None:
        """The ``plan_tasks`` hook for a read of ``wanted`` (None: everything from brokers)."""
        if self.options.storage_reads == "never":
            return None
        wanted = list(wanted)
        try:
            topic_ids = self._tiered_topics(offsets, {t for t, _ in wanted})
            if not topic_ids:
                return None
            store = self._store(offsets)
            if store is None:
                return None
        except Exception:
            log.warning("no bucket reads for this plan: the tier is unknown", exc_info=True)
            return None
        tps = [tp for tp in wanted if tp[0] in topic_ids]
        dirs = {tp: store.partition_dir(tp[0], topic_ids[tp[0]], tp[1]) for tp in tps}
        read_committed = self.options.isolation_level == "read_committed"

        def bucket_part(tp: TopicPartitionKey) -> tuple[PartitionManifest, int] | None:
            """The partition's manifest and where its bucket part ends (None: brokers)."""
            m = _manifest(store, dirs[tp], tp)
            if m is None or not m.segments:
                return None
            end = self._committed_end(store, dirs[tp], m) if read_committed else m.end_offset
            return None if end is None else (m, end)

        with ThreadPoolExecutor(max(1, min(_MANIFEST_READERS, len(tps)))) as pool:
            found = dict(zip(tps, pool.map(bucket_part, tps), strict=True))
        parts = {tp: part for tp, part in found.items() if part is not None}
        if not parts:
            return None
        url = self._url
        assert url is not None

        def route(r: OffsetRange) -> list[OffsetRange]:
            key = (r.topic, r.partition)
            part = parts.get(key)
            if part is None or r.start < part[0].log_start_offset:
                return [r]
            return split_at_upload(r, *part, store, dirs[key], url, read_committed)

        return route

    def _committed_end(self, store: RemoteStore, directory: str,
                       m: PartitionManifest) -> int | None:
        """``committed_end``, read once per last uploaded segment (a failure is asked again
        at the next plan)."""
        last = m.segments[-1].segment_id
        known = self._committed_ends.get(directory)
        if known is not None and known[0] == last:
            return known[1]
        end = committed_end(store, directory, m)
        if end is not None:
            self._committed_ends[directory] = (last, end)
        return end

    def _tiered_topics(self, offsets: OffsetReader, topics: set[str]) -> dict[str, bytes]:
        """The topic id of each tiered topic among ``topics``."""
        if not topics:
            return {}
        now = time.monotonic()
        for t in sorted(topics - self._tiered):
            if now - self._not_tiered.get(t, -_RECHECK_S) < _RECHECK_S:
                continue
            entry = offsets.admin.describe_configs(t, keys=["remote.storage.enable"]).get(
                "remote.storage.enable"
            )
            if entry is not None and (entry.value or "").lower() == "true":
                self._tiered.add(t)
                self._not_tiered.pop(t, None)
            else:
                self._not_tiered[t] = now
        tiered = sorted(topics & self._tiered)
        if not tiered:
            return {}
        metas = offsets.admin.describe_topics(tiered)
        return {t: metas[t].topic_id for t in tiered}

    def _store(self, offsets: OffsetReader) -> RemoteStore | None:
        """The bucket: 'storage.url', else the URL a broker reports for its tier."""
        if self._url is None:
            brokers = offsets.admin.describe_cluster().brokers
            if not brokers:
                return None
            entry = offsets.admin.describe_configs(
                str(brokers[0].node_id), "broker", keys=["remote.log.storage.url"]
            ).get("remote.log.storage.url")
            if entry is None or not entry.value:
                log.info("tiered topics, but no 'storage.url' and no broker URL: reading "
                         "them through brokers")
                return None
            self._url = entry.value
        return _reader_store(self._url, tuple(sorted(self.options.storage_options.items())))


def _manifest(store: RemoteStore, directory: str, tp: TopicPartitionKey
              ) -> PartitionManifest | None:
    try:
        return read_manifest(store, f"{directory}/{MANIFEST}")
    except RemoteStorageError:
        log.warning("%s-%d: manifest unreadable, read through brokers", tp[0], tp[1],
                    exc_info=True)
        return None


def committed_end(store: RemoteStore, directory: str, m: PartitionManifest) -> int | None:
    """Where read_committed may read ``m``'s segments from the bucket alone: the upload's
    end, or the first offset of the earliest transaction still open there (named by the
    producer snapshot uploaded with the last segment). None when that snapshot is missing
    or unreadable: which transactions are open is unknown."""
    last = m.segments[-1]
    size = last.files.get(SNAPSHOT_SUFFIX)
    if size is None:
        return None
    path = store.object_path(directory, last.base_offset, last.segment_id, SNAPSHOT_SUFFIX)
    try:
        producers = parse_snapshot(store.read_range(path, 0, size))
    except (FileNotFoundError, RemoteStorageError, CorruptRecordError) as exc:
        log.warning("%s cannot be read (%s): read_committed reads of %s go to the brokers",
                    path, exc, directory)
        return None
    return min([last.end_offset, *(e.current_txn_first_offset for e in producers.values()
                                   if e.current_txn_first_offset >= 0)])


def split_at_upload(r: OffsetRange, m: PartitionManifest, end: int, store: RemoteStore,
                    directory: str, url: str, read_committed: bool) -> list[OffsetRange]:
    """``r`` as a ``BucketRange`` reading ``[r.start, end)`` from ``m``'s segments when it
    starts below ``end`` (the upload's end or ``committed_end``), else as it was."""
    cut = min(r.end, end)
    if cut <= r.start:
        return [r]
    held = [s for s in m.segments if s.end_offset > r.start and s.base_offset < cut]
    txn: tuple[tuple[str, int], ...] = ()
    if read_committed:
        later = [s for s in m.segments if s.end_offset > r.start]
        txn = tuple((store.object_path(directory, s.base_offset, s.segment_id, ".txnindex"),
                     s.files[".txnindex"]) for s in later if ".txnindex" in s.files)
    return [BucketRange(r.topic, r.partition, r.start, r.end, r.host, url,
                        tuple(SegmentObjects.of(store, directory, s) for s in held), txn, cut)]


# ---------------------------------------------------------------------------- executors


@lru_cache(maxsize=8)
def _reader_store(url: str, options: tuple[tuple[str, str], ...]) -> RemoteStore:
    """One store per bucket and options per process (fsspec filesystems are thread-safe)."""
    return RemoteStore.from_url(url, dict(options), create=False)


def aborted_transactions(
    store: RemoteStore, txn_indexes: Sequence[tuple[str, int]], start: int, end: int
) -> list[tuple[int, int, int]]:
    """(producer id, first offset, marker offset) of every transaction aborted in
    ``[start, end)``, from ``.txnindex`` objects in Kafka's layout, in first-offset order.
    A read from offset X passes ``decode_fetched`` those whose marker is at or after X
    (``overlapping``): what a Fetch response from X lists."""
    out: list[tuple[int, int, int]] = []
    for path, size in txn_indexes:
        data = store.read_range(path, 0, size) if size else b""
        for off in range(0, len(data) - _TXN_ENTRY.size + 1, _TXN_ENTRY.size):
            _version, pid, first, last, _lso = _TXN_ENTRY.unpack_from(data, off)
            if first < end and last >= start:
                out.append((pid, first, last))
    out.sort(key=lambda a: a[1])
    return out


def overlapping(aborted: Sequence[tuple[int, int, int]], offset: int) -> list[tuple[int, int]]:
    """(producer id, first offset) of the ``aborted`` transactions a read from ``offset``
    must drop: those whose ABORT marker is at or after it. One whose marker lies before
    ``offset`` ended there: listing it would drop its producer's later records (its next,
    committed, transaction) with no marker in the read to end it."""
    return [(pid, first) for pid, first, last in aborted if last >= offset]


def read_planned(
    ranges: Sequence[OffsetRange], options: SourceOptions, target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The rows of one task's ranges: bucket ranges first (a partition's bucket part is below
    its broker part), then the rest through brokers (``read_ranges``)."""
    brokers = [r for r in ranges if not isinstance(r, BucketRange)]
    for r in ranges:
        if isinstance(r, BucketRange):
            rest = yield from _read_bucket_range(r, options, target)
            if rest is not None:
                brokers.append(rest)
    if brokers:
        yield from read_ranges(brokers, options, target)


def _read_bucket_range(
    r: BucketRange, options: SourceOptions, target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """Yield the rows of ``r``'s uploaded part from the bucket; returns the part left to
    brokers (None: nothing)."""
    from sparklog.client.core import conf_bool

    store = _reader_store(r.url, tuple(sorted(options.storage_options.items())))
    read_committed = options.isolation_level == "read_committed"
    end = min(r.end, r.bucket_end)
    aborted = (aborted_transactions(store, r.txn_indexes, r.start, end)
               if read_committed else [])
    verify_crc = conf_bool(options.client_config, "check.crcs", True)
    pos = r.start
    for seg in r.segments:
        if seg.end_offset <= pos:
            continue
        try:
            for batch in _one_ahead(_read_segment(store, seg, r, pos, end, options,
                                                  read_committed, aborted, verify_crc)):
                pos = batch.column("offset")[batch.num_rows - 1].as_py() + 1
                yield batch if batch.schema == target else batch.cast(target)
        except (FileNotFoundError, RemoteStorageError) as exc:
            log.warning("%s cannot be read (%s): %s-%d [%d, %d) goes to the brokers",
                        seg.log_path, exc, r.topic, r.partition, pos, r.end)
            break
        pos = max(pos, min(seg.end_offset, end))
        if pos >= end:
            break
    return OffsetRange(r.topic, r.partition, pos, r.end, r.host) if pos < r.end else None


def _read_segment(
    store: RemoteStore,
    seg: SegmentObjects,
    r: BucketRange,
    start: int,
    end: int,
    options: SourceOptions,
    read_committed: bool,
    aborted: list[tuple[int, int, int]],
    verify_crc: bool,
) -> Iterator[pa.RecordBatch]:
    """Rows of ``seg`` with ``start`` <= offset < ``end``, one batch per window read."""
    from sparklog.client import TopicPartition
    from sparklog.client.arrow_decode import decode_fetched
    from sparklog.client.arrow_fetch import batch_sizes, record_rows

    position = 0
    if start > seg.base_offset and seg.index_size:
        index = parse_offset_index(store.read_range(seg.index_path, 0, seg.index_size))
        position = index_floor(index, start - seg.base_offset)
    tp = TopicPartition(r.topic, r.partition)

    def rows(buf: bytes | memoryview) -> tuple[int, pa.RecordBatch | None, bool]:
        """(bytes of the whole batches at the start of ``buf``, their rows, whether they
        reach ``end``); decoded on their own, like one Fetch response from their first
        batch."""
        complete = batch_sizes(buf)
        if not complete:
            return 0, None, False
        used = sum(size for _base, _next, size in complete)
        dec = decode_fetched(buf[:used], start_offset=start, end_offset=end,
                             read_committed=read_committed,
                             aborted=overlapping(aborted, complete[0][0]),
                             verify_crc=verify_crc)
        out = (record_rows(dec.batch, (tp,), (dec.batch.num_rows,), options.include_headers)
               if dec.batch.num_rows else None)
        return used, out, complete[-1][1] >= end

    carry = b""  # the start of a batch the last window cut
    for window in _windows(store, seg.log_path, position, seg.log_size,
                           options.storage_read_bytes):
        view = memoryview(window)
        if carry:
            # that batch is completed with this window's head: a copy of one batch, not of
            # the window
            if len(carry) + len(view) < LOG_OVERHEAD:
                carry += window
                continue
            if len(carry) < LOG_OVERHEAD:  # the header's length field is cut too
                size = batch_size(carry + view[: LOG_OVERHEAD - len(carry)])
            else:
                size = batch_size(carry)
            if size < BATCH_HEADER_SIZE:
                raise CorruptRecordError(f"{seg.log_path}: a batch of {size} bytes")
            need = size - len(carry)
            if need > len(view):  # a batch longer than the window
                carry += window
                continue
            _used, out, done = rows(carry + view[:need])
            if out is not None:
                yield out
            if done:
                return
            view = view[need:]
            carry = b""
        used, out, done = rows(view)
        if out is not None:
            yield out
        if done:
            return
        carry = bytes(view[used:])


def _one_ahead(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches``, each one made on a thread while the caller (Spark's worker, writing the
    last batch to the JVM without the GIL) takes the one before: what the broker path gets
    from the client's loop thread."""
    with ThreadPoolExecutor(1) as pool:
        ahead = pool.submit(next, batches, None)
        while (batch := ahead.result()) is not None:
            ahead = pool.submit(next, batches, None)
            yield batch


def _windows(store: RemoteStore, path: str, position: int, size: int,
             window: int) -> Iterator[bytes]:
    """The object's bytes from ``position`` to ``size`` in ``window``-sized ranged reads,
    each read on a thread while the caller works on the one before."""
    with ThreadPoolExecutor(1) as pool:

        def read(pos: int) -> bytes:
            return store.read_range(path, pos, min(window, size - pos))

        ahead = pool.submit(read, position) if position < size else None
        while ahead is not None:
            data = ahead.result()
            position += len(data)
            ahead = pool.submit(read, position) if data and position < size else None
            yield data
