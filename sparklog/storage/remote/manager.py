"""The broker's tier: uploads sealed segments, applies local and remote retention, restores
partitions whose local disk is empty, and cleans the bucket when partitions are deleted
(Kafka's ``RemoteLogManager``).

One background thread runs ``run_once`` every ``remote.log.manager.task.interval.ms``. Per
tiered log (topic config ``remote.storage.enable``), in this order:

1. read the manifest (a follower or a new leader learns what the last leader uploaded);
2. as leader (``leader_epoch_of`` says so and gives the epoch): upload every sealed segment
   that ends at or below the last stable offset and after the manifest's end, oldest first;
   then total retention (``retention.ms`` / ``retention.bytes`` over the whole log,
   DeleteRecords' log start) drops remote segments: manifest first, then the log start,
   then the objects, so no reader is sent to a deleted object;
3. local retention (``local.retention.ms`` / ``.bytes``, -2 = the total's) deletes local
   segments, but only those the manifest lists.

Nothing here runs on the append path: a slow or failing store delays uploads (and so local
deletion), never produce. Failed steps are logged and retried on the next run; a failed
upload leaves no listed segment (``RemoteLog.upload_segment``). Directories of deleted
topics are removed from the bucket by the same thread, and now and then a
leader deletes objects of its partition that no manifest lists (an upload the broker died
in) once they are older than any upload could take.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from sparklog.protocol.topic_partition import TopicPartition

from ..background import BackgroundThread
from ..segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from .chunk_cache import ChunkCache
from .manifest import RemoteSegment
from .remote_log import RemoteLog
from .store import RemoteStorageError, RemoteStore

if TYPE_CHECKING:
    from ..partition_log import PartitionLog

__all__ = ["RemoteLogManager"]

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
# (topic, partition) -> the leader epoch while this broker leads the partition, else None
LeaderEpochOf = Callable[[str, int], "int | None"]


class RemoteLogManager:
    def __init__(self, store: RemoteStore, leader_epoch_of: LeaderEpochOf, *,
                 task_interval_ms: int = 30_000, cache_bytes: int = 64 << 20,
                 orphan_sweep_interval_ms: int = 3_600_000, orphan_grace_ms: int = 3_600_000,
                 manifest_interval_ms: int = 1000,
                 time_ms: Callable[[], int] | None = None) -> None:
        """``orphan_*``: how often a leader lists its partition's bucket directory for
        objects no manifest lists, and how old they must be to go;
        ``manifest_interval_ms``: how long uploaded segments may wait to be listed while
        the ones after them upload (``copy_segments``)."""
        self.store = store
        self.leader_epoch_of = leader_epoch_of
        self.task_interval_ms = task_interval_ms
        self.orphan_sweep_interval_ms = orphan_sweep_interval_ms
        self.orphan_grace_ms = orphan_grace_ms
        self.manifest_interval_ms = manifest_interval_ms
        self.cache = ChunkCache(store.read_range, max_bytes=cache_bytes)
        self._time_ms = time_ms or (lambda: int(time.time() * 1000))
        self._lock = threading.Lock()
        self._remote_logs: dict[TopicPartition, RemoteLog] = {}
        self._pending_dir_deletes: list[str] = []
        self._logs: Callable[[], dict[TopicPartition, PartitionLog]] = dict
        self._task = BackgroundThread("sparklog-remote-log-manager", self._run)

    # ------------------------------------------------------------------ partitions
    def remote_log(self, topic: str, partition: int, topic_id: bytes | str) -> RemoteLog:
        tp = TopicPartition(topic, partition)
        with self._lock:
            rl = self._remote_logs.get(tp)
            if rl is None:
                rl = RemoteLog(self.store, self.cache, topic, partition, topic_id)
                self._remote_logs[tp] = rl
            return rl

    def restore(self, directory: str, topic: str, partition: int,
                topic_id: bytes | str) -> int | None:
        """An empty local ``directory`` of a tiered partition: the offset the bucket ends
        at (where the log continues), with the producer state there placed in
        ``directory`` as its snapshot; None when nothing was uploaded. Raises
        RemoteStorageError when the store cannot tell: an empty log must not start at 0
        over offsets the bucket holds."""
        rl = self.remote_log(topic, partition, topic_id)
        m = rl.load_manifest()
        if not m.segments:
            # retention may have emptied the bucket: the log still starts where it ended
            return m.log_start_offset or None
        end = m.segments[-1].end_offset
        last = m.segments[-1]
        snapshot = os.path.join(directory, f"{end:020d}{SNAPSHOT_SUFFIX}")
        if not rl.download(last, SNAPSHOT_SUFFIX, snapshot):
            log.warning("%s-%d: no producer snapshot in the bucket at %d; idempotent "
                        "producers start over", topic, partition, end)
        log.info("%s-%d: restored from the bucket: log start %d, continuing at %d",
                 topic, partition, m.log_start_offset, end)
        return end

    def attach(self, plog: PartitionLog, log_start_offset: int | None = None) -> bool:
        """Tier ``plog`` if its topic is tiered (reads its manifest); False when it is not,
        or when the store cannot be read now (the task tries again)."""
        if not plog.config.remote_storage_enable or plog.remote is not None:
            return False
        if plog.topic_id is None:
            log.error("%s-%d has no topic id; it cannot be tiered", plog.topic, plog.partition)
            return False
        rl = self.remote_log(plog.topic, plog.partition, plog.topic_id)
        try:
            rl.load_manifest()
        except RemoteStorageError as exc:
            log.warning("%s-%d: remote manifest unreadable, tiering later: %s", plog.topic,
                        plog.partition, exc)
            return False
        plog.attach_remote(rl, log_start_offset)
        return True

    def delete_topic(self, topic: str, topic_id: bytes | str) -> None:
        """The topic was deleted: its bucket directory goes (in the background). Only topic
        deletion empties the bucket; a replica leaving this broker leaves it alone."""
        with self._lock:
            for tp in [tp for tp in self._remote_logs if tp.topic == topic]:
                del self._remote_logs[tp]
            self._pending_dir_deletes.append(self.store.topic_dir(topic, topic_id))

    # ------------------------------------------------------------------ the task
    def start(self, logs: Callable[[], dict[TopicPartition, PartitionLog]]) -> None:
        self._logs = logs
        self._task.start()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the task; bucket directories of deleted topics still queued are
        removed now (best effort: a store that fails leaves them)."""
        self._task.stop(timeout_s)
        self.cache.close()
        self.store.close()
        self._delete_dirs()

    def _run(self) -> None:
        while not self._task.stopping.wait(self.task_interval_ms / 1000):
            try:
                self.run_once()
            except Exception:
                log.exception("remote log manager task failed")

    def run_once(self) -> None:
        for plog in self._logs().values():
            if self._task.stopping.is_set():
                return
            if plog.closed or not plog.config.remote_storage_enable:
                continue
            if plog.remote is None and not self.attach(plog):
                continue
            try:
                self.run_for(plog)
            except RemoteStorageError as exc:
                log.warning("%s-%d: tier work failed, retrying in %d ms: %s", plog.topic,
                            plog.partition, self.task_interval_ms, exc)
        self._delete_dirs()

    def run_for(self, plog: PartitionLog) -> None:
        """One round of the task for one tiered log."""
        rl = plog.remote
        if rl is None:
            return
        rl.delete_orphans()
        m = rl.load_manifest()
        if m.segments and m.log_start_offset > plog.log_start_offset:
            # the leader's retention or DeleteRecords moved the start (this broker may have
            # been a follower then): offsets below it are gone from the bucket
            plog.delete_records(min(m.log_start_offset, plog.high_watermark))
        epoch = self.leader_epoch_of(plog.topic, plog.partition)
        if epoch is not None:
            self.copy_segments(plog, rl, epoch)
            self.apply_remote_retention(plog, rl, epoch)
            now = self._time_ms()
            if now - rl.last_sweep_ms >= self.orphan_sweep_interval_ms:
                rl.last_sweep_ms = now
                rl.sweep_unlisted(self.orphan_grace_ms, now)
        self.apply_local_retention(plog, rl)

    def copy_segments(self, plog: PartitionLog, rl: RemoteLog, leader_epoch: int) -> int:
        """Upload sealed segments after the manifest's end, up to the last stable offset,
        oldest first; returns how many were listed.

        Segments are listed in one manifest write per ``manifest_interval_ms`` of uploading
        (and at the end of the pass), not one each: a manifest write costs a read, a write
        and a rename (or a conditional PUT), which on a fast store is a good part of a small
        segment's upload. An upload that fails lists those before it, then raises."""
        pending: list[RemoteSegment] = []
        listed = 0
        last_listing = time.monotonic()

        def flush() -> bool:
            """List the pending segments; False when the manifest refused them."""
            nonlocal listed, last_listing
            segs = list(pending)
            pending.clear()
            last_listing = time.monotonic()
            if not segs:
                return True
            if not rl.list_segments(segs, leader_epoch, plog.log_start_offset):
                return False
            listed += len(segs)
            for s in segs:
                log.info("%s-%d: uploaded segment [%d, %d) (%d bytes) as %s", plog.topic,
                         plog.partition, s.base_offset, s.end_offset, s.size, s.segment_id)
            return True

        segs = plog.segments
        try:
            for seg, nxt in zip(segs, segs[1:], strict=False):
                m = rl.manifest
                uploaded_to = m.log_start_offset if m.end_offset is None else m.end_offset
                if pending:
                    uploaded_to = pending[-1].end_offset
                end = seg.next_offset
                if seg.size == 0 or end <= uploaded_to:
                    continue
                if end > plog.last_stable_offset:
                    break
                try:
                    done = rl.upload_segment(
                        self._segment_files(plog, seg.log_path, nxt.base_offset),
                        base_offset=seg.base_offset, end_offset=end,
                        max_timestamp=seg.max_timestamp,
                        leader_epochs=plog.leader_epoch_cache.entries(),
                        leader_epoch=leader_epoch)
                except FileNotFoundError as exc:
                    # deleted meanwhile (DeleteRecords): the next run sees that
                    log.info("%s-%d: segment %d went during its upload: %s", plog.topic,
                             plog.partition, seg.base_offset, exc)
                    break
                if done is None:
                    break
                pending.append(done)
                if time.monotonic() - last_listing >= self.manifest_interval_ms / 1000:
                    if not flush():
                        return listed
        except BaseException:
            try:
                flush()  # what was uploaded before the failure is listed
            except RemoteStorageError as exc:
                log.warning("%s-%d: could not list uploaded segments: %s", plog.topic,
                            plog.partition, exc)
            raise
        flush()
        return listed

    @staticmethod
    def _segment_files(plog: PartitionLog, log_path: str, next_base: int) -> dict[str, str]:
        """Suffix -> local path of a sealed segment's files: indexes without entries have
        no file, a transaction index exists only once transactions do, and the producer
        snapshot at its end may have been cleaned up."""
        prefix = log_path[: -len(LOG_SUFFIX)]
        files = {LOG_SUFFIX: log_path}
        for suffix, path in ((INDEX_SUFFIX, prefix + INDEX_SUFFIX),
                             (TIME_INDEX_SUFFIX, prefix + TIME_INDEX_SUFFIX),
                             (TXN_INDEX_SUFFIX, prefix + TXN_INDEX_SUFFIX),
                             (SNAPSHOT_SUFFIX, os.path.join(
                                 plog.directory, f"{next_base:020d}{SNAPSHOT_SUFFIX}"))):
            if os.path.exists(path):
                files[suffix] = path
        return files

    def apply_remote_retention(self, plog: PartitionLog, rl: RemoteLog,
                               leader_epoch: int) -> int:
        """Total retention over the remote segments; returns how many went."""
        m = rl.manifest
        if not m.segments:
            return 0
        cfg = plog.config
        now = self._time_ms()
        start = plog.log_start_offset
        uploaded_to = m.end_offset or 0
        total = m.size_bytes + sum(s.size for s in plog.segments if s.base_offset >= uploaded_to)
        new_start = start
        for s in m.segments:
            if s.end_offset <= start:
                continue
            by_time = (cfg.retention_ms >= 0 and s.max_timestamp >= 0
                       and now - s.max_timestamp > cfg.retention_ms)
            by_size = cfg.retention_bytes >= 0 and total - s.size >= cfg.retention_bytes
            if not (by_time or by_size):
                break
            total -= s.size
            new_start = s.end_offset
        if new_start <= m.log_start_offset:
            return 0
        new = m.without_segments_below(new_start, leader_epoch)
        if not rl.replace_manifest(m, new, leader_epoch):
            return 0
        if new_start > plog.log_start_offset:
            plog.delete_records(min(new_start, plog.high_watermark))
        gone = [s for s in m.segments if s not in new.segments]
        rl.delete_segments(gone)
        if gone:
            log.info("%s-%d: deleted %d remote segments below %d", plog.topic, plog.partition,
                     len(gone), new_start)
        return len(gone)

    def apply_local_retention(self, plog: PartitionLog, rl: RemoteLog) -> int:
        """Delete uploaded local segments past local retention; returns how many went."""
        uploaded_to = rl.manifest.end_offset
        if uploaded_to is None:
            return 0
        cfg = plog.config
        keep_ms = cfg.retention_ms if cfg.local_retention_ms == -2 else cfg.local_retention_ms
        keep_bytes = (cfg.retention_bytes if cfg.local_retention_bytes == -2
                      else cfg.local_retention_bytes)
        now = self._time_ms()
        segs = plog.segments
        total = sum(s.size for s in segs)
        below = None
        for seg, nxt in zip(segs, segs[1:], strict=False):
            if seg.next_offset > uploaded_to:
                break
            by_time = keep_ms >= 0 and now - seg.retention_timestamp(now) > keep_ms
            by_size = keep_bytes >= 0 and total - seg.size >= keep_bytes
            if not (by_time or by_size):
                break
            total -= seg.size
            below = nxt.base_offset
        return 0 if below is None else plog.delete_local_segments_below(below)

    def _delete_dirs(self) -> None:
        with self._lock:
            dirs, self._pending_dir_deletes = self._pending_dir_deletes, []
        for i, d in enumerate(dirs):
            try:
                self.store.delete_dir(d)
                log.info("deleted %s from the bucket", d)
            except RemoteStorageError as exc:
                log.warning("could not delete %s from the bucket, retrying: %s", d, exc)
                with self._lock:
                    self._pending_dir_deletes.extend(dirs[i:])
                return
