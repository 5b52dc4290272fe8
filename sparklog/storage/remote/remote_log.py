"""One tiered partition's remote side: its manifest, uploads into it, and reads from it.

Reads answer a fetch below the local log start with the same batches a local read of the
segment gives: the first batch holding the fetch offset, then whole batches up to
``max_bytes`` (at least one when ``min_one_message``), none at or past the limit offset.
A read serves one remote segment at most (Kafka does the same); the client's next fetch
continues. Only segments the manifest lists are read, so nothing half-uploaded is served.

A read_committed fetch served from the bucket reports the aborted transactions overlapping
it from the uploaded ``.txnindex`` objects (``aborted_transactions``: from the segment
holding the fetch offset on, until an entry's LSO shows the search complete); the log
then goes on through its local segments, where the ABORT marker of a transaction begun
in an uploaded segment may still be (Kafka's ``RemoteLogManager`` does the same).

Store failures on the read path raise ``RemoteStorageError`` (KAFKA_STORAGE_ERROR, which
clients retry) and open a short window (``read_backoff_ms``) in which reads fail at once, so
a broker whose store is down answers fetches quickly instead of waiting on every one.

Uploads (``upload_segment``) put every file of a segment under a fresh segment id and check
the sizes the store reports; ``list_segments`` then lists one or more uploaded segments in
one new manifest. A manifest whose leader epoch is above the uploader's fences it: the
objects are deleted and nothing is listed. The manifest is replaced by compare-and-swap
where the store has one (``conditional``: S3's If-Match, a lock on local and memory
filesystems), so a fenced leader that has not yet learned of its successor cannot
overwrite a manifest it did not read.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from sys import byteorder
from typing import TypeVar, cast

from sparklog.protocol.batch_header import (
    BATCH_HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    read_header,
)
from sparklog.protocol.records import decode_batch

from ..backend import FileSlice
from ..checkpoints import atomic_write, format_epoch_checkpoint
from ..log_info import FetchDataInfo
from ..segment import INDEX_SUFFIX, TXN_INDEX_SUFFIX
from ..txn_index import AbortedTxn, collect_aborted, parse_txn_index
from .chunk_cache import ChunkCache
from .conditional import replace_if
from .manifest import PartitionManifest, RemoteSegment, parse_manifest, read_manifest
from .store import MANIFEST, RemoteStorageError, RemoteStore

__all__ = ["EPOCH_SUFFIX", "RemoteLog", "index_floor", "parse_offset_index"]

log = logging.getLogger(__name__)

EPOCH_SUFFIX = ".leader-epoch-checkpoint"
_OFFSET_LENGTH = struct.Struct(">qi")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_HEADER_PREFIX = LAST_OFFSET_DELTA_OFFSET + 4  # what a scan needs of each batch header
# what ``_parsed`` keeps: an offset index's arrays, a transaction index's entries
_Parsed = tuple[array, array] | list[AbortedTxn]
T = TypeVar("T", bound=_Parsed)
_INDEXES_KEPT = 64  # parsed index objects kept (offset and transaction indexes)


class RemoteLog:
    def __init__(self, store: RemoteStore, cache: ChunkCache, topic: str, partition: int,
                 topic_id: bytes | str, *, read_backoff_ms: int = 1000) -> None:
        self.store = store
        self.cache = cache
        self.topic, self.partition = topic, partition
        self.directory = store.partition_dir(topic, topic_id, partition)
        self.manifest_path = f"{self.directory}/{MANIFEST}"
        self.read_backoff_ms = read_backoff_ms
        self._manifest = PartitionManifest()
        self._lock = threading.Lock()  # the small state below; never held over a store call
        self._write_lock = threading.Lock()  # one manifest replacement at a time
        self._unavailable_until = 0.0  # monotonic seconds; reads fail fast before it
        # (segment id, suffix) -> a parsed index object, least recently used first
        self._indexes: OrderedDict[tuple[str, str], _Parsed] = OrderedDict()
        self._orphans: list[str] = []  # unlisted objects whose deletion failed
        self._directory_made = False
        self.last_sweep_ms = 0  # when ``sweep_unlisted`` last ran (the manager's clock)

    def __repr__(self) -> str:
        return f"RemoteLog({self.directory}, {len(self._manifest.segments)} segments)"

    # ------------------------------------------------------------------ manifest
    @property
    def manifest(self) -> PartitionManifest:
        """The manifest last read or written by this broker."""
        return self._manifest

    def load_manifest(self) -> PartitionManifest:
        self._manifest = read_manifest(self.store, self.manifest_path)
        return self._manifest

    def replace_manifest(self, expected: PartitionManifest, new: PartitionManifest,
                         leader_epoch: int) -> bool:
        """Write ``new`` if the stored manifest is still ``expected`` and no newer leader
        wrote one; False (nothing written) otherwise."""
        def decide(stored: bytes | None) -> bytes | None:
            current = self._manifest = parse_manifest(stored, self.manifest_path)
            if current.leader_epoch > leader_epoch:
                log.warning("%s-%d: leader epoch %d is fenced by %d in %s; not writing",
                            self.topic, self.partition, leader_epoch, current.leader_epoch,
                            self.manifest_path)
                return None
            if current != expected:
                log.info("%s-%d: the remote manifest changed under this writer; retrying later",
                         self.topic, self.partition)
                return None
            return new.to_bytes()

        with self._write_lock:
            if not replace_if(self.store, self.manifest_path, decide):
                return False
            self._manifest = new
            return True

    def object_path(self, seg: RemoteSegment, suffix: str) -> str:
        return self.store.object_path(self.directory, seg.base_offset, seg.segment_id, suffix)

    # ------------------------------------------------------------------ upload
    def upload_segment(self, files: Mapping[str, str], *, base_offset: int, end_offset: int,
                       max_timestamp: int, leader_epochs: list[tuple[int, int]],
                       leader_epoch: int) -> RemoteSegment | None:
        """Upload one sealed segment's objects (``files``: suffix -> local path, ``.log``
        included, and its leader-epoch checkpoint) under a fresh segment id, concurrently,
        each checked against its local size; the segment is not listed yet
        (``list_segments``). None when the manifest last read fences ``leader_epoch``. On a
        failure, what was written is deleted and the error raised."""
        if self._manifest.leader_epoch > leader_epoch:
            return None
        seg_id = self.store.new_segment_id()
        epochs = tuple((e, s) for e, s in leader_epochs if s < end_offset)
        text = format_epoch_checkpoint(list(epochs)).encode()

        def path(suffix: str) -> str:
            return self.store.object_path(self.directory, base_offset, seg_id, suffix)

        def put(suffix: str, local: str) -> Callable[[], int]:
            def call() -> int:
                want = os.path.getsize(local)
                got = self.store.put_file(local, path(suffix))
                if got != want:
                    raise RemoteStorageError(f"{path(suffix)} holds {got} bytes, not {want}")
                return got
            return call

        def put_epochs() -> int:
            self.store.put_bytes(path(EPOCH_SUFFIX), text)
            return len(text)

        if not self._directory_made:
            self.store.makedirs(self.directory)
            self._directory_made = True
        suffixes = [*files, EPOCH_SUFFIX]
        try:
            got = self.store.run_all([*(put(x, local) for x, local in files.items()),
                                      put_epochs])
        except BaseException:
            self._delete_quietly([path(x) for x in suffixes])
            raise
        return RemoteSegment(base_offset, end_offset, max_timestamp, seg_id, leader_epoch,
                             dict(zip(suffixes, got, strict=True)), epochs)

    def list_segments(self, segments: Sequence[RemoteSegment], leader_epoch: int,
                      log_start_offset: int) -> bool:
        """List uploaded ``segments`` (in offset order, after the manifest's end) in one
        manifest write after the manifest last read. False when fenced or the stored
        manifest moved since it was read (another writer, or a stale read: the next run
        reads it again); their objects are then deleted, as they are when the write fails."""
        before = self._manifest
        new = before
        for seg in segments:
            new = new.with_segment(seg, log_start_offset)
        written = [self.object_path(seg, x) for seg in segments for x in seg.files]
        try:
            listed = self.replace_manifest(before, new, leader_epoch)
        except BaseException:
            self._delete_quietly(written)
            raise
        if not listed:
            self._delete_quietly(written)
        return listed

    def _delete_quietly(self, paths: list[str]) -> None:
        """Delete objects no manifest lists; those that fail are retried by
        ``delete_orphans`` (each run of the task) instead of being forgotten."""
        for p in paths:
            try:
                self.store.delete([p])
            except RemoteStorageError as exc:
                log.warning("%s-%d: could not delete unlisted object %s, retrying later: %s",
                            self.topic, self.partition, p, exc)
                with self._lock:
                    self._orphans.append(p)

    @property
    def orphan_count(self) -> int:
        """Unlisted objects still waiting for their deletion to succeed."""
        return len(self._orphans)

    def delete_orphans(self) -> None:
        """Retry deleting objects of failed or fenced uploads."""
        with self._lock:
            paths, self._orphans = self._orphans, []
        self._delete_quietly(paths)

    def sweep_unlisted(self, older_than_ms: int, now_ms: int) -> int:
        """Delete this partition's objects that the manifest does not list (an upload the
        broker died in, a manifest temp file) once older than ``older_than_ms``; returns how
        many were found. The leader calls it between its own uploads; the age keeps the
        upload of a fenced leader still in flight out of it."""
        listed = {self.object_path(s, x) for s in self._manifest.segments for x in s.files}
        listed.add(self.manifest_path)
        doomed = [p for p in self.store.list_files(self.directory) if p not in listed
                  and now_ms - self.store.modified_ms(p) > older_than_ms]
        if doomed:
            log.info("%s-%d: deleting %d unlisted objects from the bucket", self.topic,
                     self.partition, len(doomed))
            self._delete_quietly(doomed)
        return len(doomed)

    def delete_segments(self, segments: list[RemoteSegment]) -> None:
        """Delete the objects of segments no manifest lists any more."""
        for seg in segments:
            paths = [self.object_path(seg, suffix) for suffix in seg.files]
            for p in paths:
                self.cache.invalidate(p)
            with self._lock:
                for suffix in (INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                    self._indexes.pop((seg.segment_id, suffix), None)
            self._delete_quietly(paths)

    def download(self, seg: RemoteSegment, suffix: str, local_path: str) -> bool:
        """Copy one object of ``seg`` to a local file (atomically); False when absent."""
        data = self.store.get_bytes(self.object_path(seg, suffix))
        if data is None:
            return False
        atomic_write(local_path, data)
        return True

    # ------------------------------------------------------------------ read
    def read(self, info: FetchDataInfo, offset: int, max_bytes: int, limit_offset: int,
             min_one_message: bool) -> FetchDataInfo:
        """Fill ``info`` with the batches of the remote segment holding ``offset``."""
        if time.monotonic() < self._unavailable_until:
            raise RemoteStorageError(f"remote storage of {self.topic}-{self.partition} is "
                                     f"unavailable; retry later")
        seg = self._manifest.segment_for(offset)
        if seg is None:
            raise RemoteStorageError(f"offset {offset} of {self.topic}-{self.partition} is in "
                                     f"no uploaded segment of {self.manifest_path}")
        path = self.object_path(seg, ".log")
        try:
            found = self._scan(seg, path, offset, max_bytes, limit_offset, min_one_message)
        except (RemoteStorageError, FileNotFoundError) as exc:
            self._unavailable_until = time.monotonic() + self.read_backoff_ms / 1000
            if isinstance(exc, RemoteStorageError):
                raise
            raise RemoteStorageError(f"{path} is gone: {exc}") from exc
        if found is not None:
            position, size, next_offset = found
            # objects that are local files are sent from the file (sendfile), others from
            # the chunk cache
            info.slices.append(FileSlice(path, position, size, None, None
                                         if self.store.local_files
                                         else _RemoteObject(self.cache, seg.size)))
            info.size += size
            info.next_offset = next_offset
        return info

    def prefetch(self, offset: int, max_bytes: int, read_committed: bool = False) -> None:
        """Read what a fetch at ``offset`` needs into the chunk cache (the broker calls it
        on a worker thread before the fetch reads), and for a ``read_committed`` one the
        ``.txnindex`` objects its aborted transactions come from (a read ends within the
        segment holding ``offset``); failures only open the fail-fast window. Objects
        that are local files need none: they are sent from the file."""
        if self.store.local_files:
            return
        m = self._manifest
        seg = m.segment_for(offset)
        if seg is None:
            return
        try:
            # this fetch's bytes and those after them in the object, as one request (the
            # scan then walks cached chunks): a segment no larger than the window is read
            # whole, once
            path = self.object_path(seg, ".log")
            window = max(max_bytes, self.cache.read_ahead_bytes)
            self.cache.read_ahead(path, seg.size, self._index_floor(seg, offset), window)
            info = self.read(FetchDataInfo(offset, offset), offset, max_bytes,
                             m.end_offset or offset, True)
            if info.slices:
                # the consumer's next fetches start where this one ends: fetch them meanwhile,
                # and the next segment from its start once this one ends within the window
                s = info.slices[-1]
                end = s.position + s.size
                self.cache.read_ahead(path, seg.size, end, window)
                nxt = m.segment_for(seg.end_offset)
                if end + window > seg.size and nxt is not None:
                    self.cache.read_ahead(self.object_path(nxt, ".log"), nxt.size, 0, window)
                    index_size = nxt.files.get(INDEX_SUFFIX, 0)  # for fetches past its start
                    self.cache.read_ahead(self.object_path(nxt, INDEX_SUFFIX), index_size, 0,
                                          index_size)
            if read_committed:
                self.aborted_transactions(offset, seg.end_offset)
        except (RemoteStorageError, FileNotFoundError) as exc:  # the read that follows says
            log.debug("prefetch of %s-%d at %d failed: %s", self.topic, self.partition, offset,
                      exc)

    def _scan(self, seg: RemoteSegment, path: str, offset: int, max_bytes: int,
              limit_offset: int, min_one: bool) -> tuple[int, int, int] | None:
        """(position, size, next offset) of the batches to return, None for none."""
        read = _RemoteObject(self.cache, seg.size).read_range
        pos = self._index_floor(seg, offset)
        end_of_object = seg.size
        first = -1
        end = next_offset = 0
        while pos < end_of_object:
            head = read(path, pos, _HEADER_PREFIX)
            if len(head) < _HEADER_PREFIX:
                raise RemoteStorageError(f"{path} ends inside a batch header at {pos}")
            base, length = _OFFSET_LENGTH.unpack_from(head, 0)
            last = base + _LAST_OFFSET_DELTA.unpack_from(head, LAST_OFFSET_DELTA_OFFSET)[0]
            size = length + LOG_OVERHEAD
            if first < 0:
                if last < offset:
                    pos += size
                    continue
                if base >= limit_offset:
                    return None
                first = end = pos
            elif base >= limit_offset:
                break
            if end + size - first > max_bytes and not (end == first and min_one):
                break
            end += size
            next_offset = last + 1
            pos += size
        if first < 0 or end == first:
            return None
        return first, end - first, next_offset

    def offset_for_timestamp(self, timestamp: int, log_start_offset: int) -> tuple[int, int] | None:
        """ListOffsets in the bucket: (timestamp, offset) of the first uploaded record at or
        after ``log_start_offset`` whose timestamp is >= ``timestamp``, None when there is
        none. Only segments and batches whose max timestamp qualifies are read."""
        for seg in self._manifest.segments:
            if seg.end_offset <= log_start_offset or seg.max_timestamp < timestamp:
                continue
            path = self.object_path(seg, ".log")
            obj = _RemoteObject(self.cache, seg.size)
            pos = self._index_floor(seg, max(log_start_offset, seg.base_offset))
            while pos + BATCH_HEADER_SIZE <= seg.size:
                h = read_header(obj.read_range(path, pos, BATCH_HEADER_SIZE))
                if (h.base_offset + h.last_offset_delta >= log_start_offset
                        and h.max_timestamp >= timestamp):
                    for r in decode_batch(obj.read_range(path, pos, h.size)).records:
                        ts = r.timestamp if r.timestamp is not None else -1
                        if ts >= timestamp and r.offset >= log_start_offset:
                            return ts, r.offset
                pos += h.size
        return None

    def aborted_transactions(self, fetch_offset: int, upper_bound: int
                             ) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions the uploaded ``.txnindex`` objects list overlapping
        [fetch_offset, upper_bound), and whether that is all of them (else the local
        segments hold the rest)."""
        out: list[AbortedTxn] = []
        for seg in self._manifest.segments:
            if seg.end_offset <= fetch_offset or TXN_INDEX_SUFFIX not in seg.files:
                continue
            entries = self._parsed(seg, TXN_INDEX_SUFFIX, parse_txn_index)
            found, complete = collect_aborted(entries, fetch_offset, upper_bound)
            out += found
            if complete:
                return out, True
        return out, False

    def _index_floor(self, seg: RemoteSegment, offset: int) -> int:
        """Position of the last index entry at or before ``offset`` (0 without one, or
        at the segment's base: a reader crossing into it needs no index)."""
        if offset <= seg.base_offset:
            return 0
        idx = self._parsed(seg, INDEX_SUFFIX, lambda data, _path: parse_offset_index(data))
        return index_floor(idx, offset - seg.base_offset)

    def _parsed(self, seg: RemoteSegment, suffix: str, parse: Callable[[bytes, str], T]) -> T:
        """``seg``'s ``suffix`` object, read once and parsed by ``parse`` (kept for the
        last ``_INDEXES_KEPT`` objects used)."""
        key = (seg.segment_id, suffix)
        with self._lock:
            found = self._indexes.get(key)
            if found is not None:
                self._indexes.move_to_end(key)
                return cast(T, found)
        size = seg.files.get(suffix, 0)
        path = self.object_path(seg, suffix)
        parsed = parse(self.cache.read(path, size, 0, size), path)
        with self._lock:
            self._indexes[key] = parsed
            if len(self._indexes) > _INDEXES_KEPT:
                self._indexes.popitem(last=False)
        return parsed


def parse_offset_index(data: bytes) -> tuple[array, array]:
    """An ``.index`` object's (relative offsets, positions), as two arrays (Kafka's layout:
    big-endian uint32 pairs; a partial last entry is ignored)."""
    flat = array("I", data[: len(data) - len(data) % 8])
    if byteorder == "little":
        flat.byteswap()
    return flat[0::2], flat[1::2]


def index_floor(index: tuple[array, array], relative_offset: int) -> int:
    """Position of the last entry at or before ``relative_offset`` (0 without one)."""
    rel_offsets, positions = index
    i = bisect_right(rel_offsets, relative_offset) - 1
    return positions[i] if i >= 0 else 0


class _RemoteObject:
    """One object's ranges through the chunk cache (a FileSlice's ``RangeReader``)."""

    __slots__ = ("cache", "size")

    def __init__(self, cache: ChunkCache, size: int) -> None:
        self.cache = cache
        self.size = size

    def read_range(self, path: str, position: int, size: int) -> bytes:
        return self.cache.read(path, self.size, position, size)

    def read_parts(self, path: str, position: int, size: int) -> list[memoryview]:
        return self.cache.read_parts(path, self.size, position, size)
