"""All partition logs of one broker across its ``log.dirs``, and the background work on them.

Per log dir (formats in ``checkpoints``): ``meta.properties``, ``recovery-point-offset-checkpoint``,
``replication-offset-checkpoint`` (high watermarks), ``log-start-offset-checkpoint``,
``cleaner-offset-checkpoint``, and ``.kafka_cleanshutdown`` while the broker is stopped
cleanly (its presence at start means sealed segments need no recovery), and ``.lock``
(``dir_lock``: one owner per directory, taken before anything else in it is read). An
unreadable checkpoint is logged and read as empty (an unreadable recovery point: every log of
the dir is recovered from its start). Partition directories are ``<topic>-<partition>``; a
deleted partition is renamed ``<topic>-<partition>.<id>-delete`` and removed in the
background. A partition whose directory fails to load is *offline*: logged, left as it is,
and refused by ``get_or_create_log`` (KAFKA_STORAGE_ERROR) so nothing is written past damage
recovery could not repair, while the other partitions serve.

One scheduler thread runs, each on its own interval: retention (``log.retention.check.interval.ms``),
compaction (``log.cleaner.backoff.ms``), flush of sealed segments and ``flush.ms``
(``log.flush.scheduler.interval.ms``), checkpoints (``log.flush.offset.checkpoint.interval.ms``
etc.), delayed file deletion, producer-id expiration, and (when ``scrub_interval_ms`` is set)
a CRC scrub of sealed segments that marks damaged ranges unservable. ``shutdown()`` stops it (bounded join),
flushes with fsync, writes every checkpoint and the clean-shutdown marker.

Thread-safety: all methods are thread-safe (a manager lock guards the log table; each log
guards itself). A task that fails is logged and retried on its next interval; it never kills
the scheduler.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable

from sparklog.protocol.errors import KafkaStorageError
from sparklog.protocol.topic_partition import TopicPartition

from .background import BackgroundThread
from .checkpoints import (
    CLEAN_SHUTDOWN_MARKER,
    CLEANER_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    atomic_write,
    read_meta_properties,
    read_offset_checkpoint,
    topic_id_to_str,
    write_meta_properties,
    write_offset_checkpoint,
)
from .dir_lock import LogDirLocks
from .log_config import LogConfig
from .log_loader import parse_topic_partition
from .partition_log import PartitionLog
from .remote.manager import RemoteLogManager

__all__ = ["LogManager"]

log = logging.getLogger(__name__)

class LogManager:
    def __init__(
        self,
        log_dirs: list[str],
        default_config: LogConfig | None = None,
        *,
        cluster_id: str | None = None,
        node_id: int | None = None,
        topic_configs: dict[str, LogConfig] | None = None,
        retention_check_interval_ms: int = 300_000,
        cleaner_backoff_ms: int = 15_000,
        flush_check_interval_ms: int = 1_000,
        checkpoint_interval_ms: int = 60_000,
        replication_checkpoint_interval_ms: int = 5_000,
        producer_expiration_check_interval_ms: int = 600_000,
        cleaner_enable: bool = True,
        scrub_interval_ms: int | None = None,
        time_ms: Callable[[], int] | None = None,
        dir_locks: LogDirLocks | None = None,
        tier: RemoteLogManager | None = None,
    ) -> None:
        """Lock ``log_dirs`` (``dir_lock``) and open every partition found there
        (recovering those not shut down cleanly). ``start()`` then starts the background
        scheduler; ``shutdown()`` releases the locks. ``dir_locks``: the caller holds them
        already (it works in the directories before and after the log manager does) and
        releases them itself. ``tier``: the object-storage tier for topics with
        ``remote.storage.enable`` (it uploads, applies their retention, restores them)."""
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        if dir_locks is not None and dir_locks.dirs != self.log_dirs:
            raise ValueError(f"dir_locks hold {dir_locks.dirs}, not {self.log_dirs}")
        # the locks this manager took (and releases); None when the caller holds them
        self._own_locks = None if dir_locks is not None else LogDirLocks(self.log_dirs)
        self.default_config = default_config or LogConfig()
        self.topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.cleaner_enable = cleaner_enable
        self.tier = tier
        self._time_ms = time_ms or (lambda: int(time.time() * 1000))
        self._intervals = {
            "retention": retention_check_interval_ms,
            "cleaner": cleaner_backoff_ms,
            "flush": flush_check_interval_ms,
            "checkpoint": checkpoint_interval_ms,
            "hw_checkpoint": replication_checkpoint_interval_ms,
            "producer_expiration": producer_expiration_check_interval_ms,
            "delete_files": 1_000,
        }
        if scrub_interval_ms is not None:
            # CRC-check sealed segments now and then: bit rot below the recovery point is
            # otherwise found only by consumers (off by default: it reads every byte)
            self._intervals["scrub"] = scrub_interval_ms
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._log_dir_of: dict[TopicPartition, str] = {}
        # partitions whose directory could not be loaded -> why: never opened, never
        # recreated (nothing may be written past damage no one repaired)
        self._offline: dict[TopicPartition, str] = {}
        self._pending_dir_deletes: list[str] = []
        self._scheduler = BackgroundThread("sparklog-log-manager", self._run)
        self._shut_down = False
        self._new_dirs: set[str] = set()  # no meta.properties yet: nothing to recover
        try:
            for d in self.log_dirs:
                self._check_meta_properties(d)
            self._load_logs()
        except BaseException:
            for plog in self._logs.values():
                plog.close()
            self._release_locks()
            raise

    # ------------------------------------------------------------------ startup
    def _check_meta_properties(self, d: str) -> None:
        path = os.path.join(d, META_PROPERTIES)
        props = read_meta_properties(path)
        if props is None:
            self._new_dirs.add(d)
            props = {"version": "1",
                     "directory.id": topic_id_to_str(uuid.uuid4().bytes)}
            if self.cluster_id is not None:
                props["cluster.id"] = self.cluster_id
            if self.node_id is not None:
                props["node.id"] = str(self.node_id)
            write_meta_properties(path, props)
            return
        if self.cluster_id is not None and props.get("cluster.id", self.cluster_id) != self.cluster_id:
            raise KafkaStorageError(
                f"{path} has cluster.id {props.get('cluster.id')}, expected {self.cluster_id}")
        if self.node_id is not None and props.get("node.id", str(self.node_id)) != str(self.node_id):
            raise KafkaStorageError(
                f"{path} has node.id {props.get('node.id')}, expected {self.node_id}")
        self.cluster_id = self.cluster_id or props.get("cluster.id")

    def _load_logs(self) -> None:
        for d in self.log_dirs:
            marker = os.path.join(d, CLEAN_SHUTDOWN_MARKER)
            clean = os.path.exists(marker)
            # an unreadable recovery point checkpoint (empty here) means every log of the
            # directory is recovered from its start: ``clean`` needs the log's entry
            recovery = _read_checkpoint(d, RECOVERY_POINT_CHECKPOINT,
                                        "every log in the directory is recovered from its start")
            starts = _read_checkpoint(d, LOG_START_OFFSET_CHECKPOINT,
                                      "log start offsets fall back to the first segments")
            hws = _read_checkpoint(d, REPLICATION_CHECKPOINT, "high watermarks start at 0")
            cleaned = _read_checkpoint(d, CLEANER_CHECKPOINT, "compaction starts over")
            t0 = time.monotonic()
            for name in sorted(os.listdir(d)):
                path = os.path.join(d, name)
                if not os.path.isdir(path):
                    continue
                if name.endswith("-delete"):
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                try:
                    tp = parse_topic_partition(name)
                except ValueError:
                    continue
                if tp in self._log_dir_of:
                    raise KafkaStorageError(
                        f"duplicate log directories for {tp}: {path} and {self._log_dir_of[tp]}")
                self._log_dir_of[tp] = d
                try:
                    plog = PartitionLog(
                        path, self._config_for(tp[0]), topic=tp[0], partition=tp[1],
                        recovery_point=recovery.get(tp, 0), log_start_offset=starts.get(tp),
                        high_watermark=hws.get(tp), clean_shutdown=clean and tp in recovery,
                        time_ms=self._time_ms)
                except (KafkaStorageError, OSError, ValueError) as exc:
                    log.error("partition %s-%d in %s cannot be loaded, it is offline until "
                              "repaired: %s", tp[0], tp[1], path, exc)
                    self._offline[tp] = f"{path} cannot be loaded: {exc}"
                    continue
                plog.cleaner_checkpoint = cleaned.get(tp, 0)
                if self.tier is not None:
                    self.tier.attach(plog, starts.get(tp))
                self._logs[tp] = plog
            if clean:
                os.remove(marker)
            log.info("loaded %d logs from %s in %.0f ms (%s)",
                     sum(1 for v in self._log_dir_of.values() if v == d), d,
                     (time.monotonic() - t0) * 1000,
                     "new log directory" if d in self._new_dirs else f"clean shutdown: {clean}")

    def _config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_config)

    # ------------------------------------------------------------------ log table
    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        with self._lock:
            return self._logs.get(TopicPartition(topic, partition))

    def logs(self) -> dict[TopicPartition, PartitionLog]:
        with self._lock:
            return dict(self._logs)

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                          topic_id: bytes | str | None = None) -> PartitionLog:
        """The log of ``topic``-``partition``, created in the log dir holding the fewest
        partitions when absent. ``config`` (when given) becomes the topic's config."""
        with self._lock:
            if self._shut_down:
                raise KafkaStorageError("log manager is shut down")
            if config is not None:
                self.topic_configs[topic] = config
            tp = TopicPartition(topic, partition)
            if tp in self._offline:
                raise KafkaStorageError(f"partition {topic}-{partition} is offline: "
                                        f"{self._offline[tp]}")
            existing = self._logs.get(tp)
            if existing is not None:
                if config is not None and existing.config != config:
                    existing.config = config
                return existing
            counts = {d: 0 for d in self.log_dirs}
            for d in self._log_dir_of.values():
                counts[d] += 1
            d = min(self.log_dirs, key=lambda x: (counts[x], self.log_dirs.index(x)))
            path = os.path.join(d, f"{topic}-{partition}")
            cfg = self._config_for(topic)
            # a tiered partition with no local directory continues where the bucket ends
            restored = None
            if (self.tier is not None and cfg.remote_storage_enable and topic_id is not None
                    and not os.path.exists(path)):
                os.makedirs(path)
                try:
                    restored = self.tier.restore(path, topic, partition, topic_id)
                except BaseException:
                    shutil.rmtree(path, ignore_errors=True)  # the next try restores again
                    raise
            plog = PartitionLog(path, cfg, topic=topic, partition=partition, topic_id=topic_id,
                                log_start_offset=restored, recovery_point=restored or 0,
                                high_watermark=restored, time_ms=self._time_ms)
            if self.tier is not None:
                self.tier.attach(plog)
            self._logs[tp] = plog
            self._log_dir_of[tp] = d
            return plog

    def update_config(self, topic: str, config: LogConfig) -> None:
        """AlterConfigs: new settings apply to the topic's logs from now on."""
        with self._lock:
            self.topic_configs[topic] = config
            logs = [plog for (t, _p), plog in self._logs.items() if t == topic]
            for plog in logs:
                plog.config = config
        if self.tier is not None:
            for plog in logs:
                self.tier.attach(plog)  # remote.storage.enable may have been set

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close the log and remove its directory (renamed ``...-delete`` first, so a crash
        mid-removal leaves nothing that loads as a partition). False when absent."""
        with self._lock:
            tp = TopicPartition(topic, partition)
            plog = self._logs.pop(tp, None)
            offline = self._offline.pop(tp, None)
            d = self._log_dir_of.pop(tp, None)
        if (plog is None and offline is None) or d is None:
            return False
        if plog is not None:
            plog.close()
        directory = os.path.join(d, f"{topic}-{partition}")
        target = os.path.join(d, f"{topic}-{partition}.{uuid.uuid4().hex}-delete")
        try:
            os.replace(directory, target)
        except OSError as exc:
            raise KafkaStorageError(f"cannot delete {directory}: {exc}") from exc
        with self._lock:
            self._pending_dir_deletes.append(target)
        if self._scheduler.thread is None:
            self._delete_dirs()
        return True

    def offline_partitions(self) -> dict[TopicPartition, str]:
        """Partitions that failed to load (``get_or_create_log`` refuses them) -> why."""
        with self._lock:
            return dict(self._offline)

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        with self._lock:
            return self._log_dir_of.get(TopicPartition(topic, partition))

    # ------------------------------------------------------------------ scheduler
    def start(self) -> None:
        with self._lock:
            if self._scheduler.thread is not None:
                return
            self._scheduler.start()
        if self.tier is not None:
            self.tier.start(self.logs)

    def _run(self) -> None:
        now = self._time_ms()
        due = {name: now + interval for name, interval in self._intervals.items()}
        tasks = {
            "retention": self.run_retention,
            "cleaner": self.run_cleaner,
            "flush": self.run_flush,
            "checkpoint": self.write_checkpoints,
            "hw_checkpoint": self.write_hw_checkpoints,
            "producer_expiration": self.run_producer_expiration,
            "delete_files": self.run_file_deletion,
            "scrub": self.run_scrub,
        }
        tasks = {k: v for k, v in tasks.items() if k in self._intervals}
        stopping = self._scheduler.stopping
        while not stopping.is_set():
            now = self._time_ms()
            for name, fn in tasks.items():
                if stopping.is_set():
                    break
                if now >= due[name]:
                    try:
                        fn()
                    except Exception:
                        log.exception("log manager task %s failed", name)
                    due[name] = self._time_ms() + self._intervals[name]
            wait_ms = max(10, min(due.values()) - self._time_ms())
            stopping.wait(min(wait_ms, 500) / 1000)

    def run_retention(self) -> int:
        deleted = 0
        for plog in self.logs().values():
            if plog.closed or (self.tier is not None and plog.config.remote_storage_enable):
                continue  # the tier applies a tiered log's retention
            deleted += plog.delete_old_segments()
        if deleted:
            self.write_log_start_checkpoints()
        return deleted

    def run_cleaner(self) -> int:
        if not self.cleaner_enable:
            return 0
        from .cleaner import clean_log

        n = 0
        for plog in self.logs().values():
            if plog.closed or not plog.config.compact:
                continue
            if clean_log(plog) is not None:
                n += 1
        if n:
            self.write_cleaner_checkpoints()
        return n

    def run_flush(self) -> int:
        n = 0
        for plog in self.logs().values():
            if not plog.closed and plog.flush_if_due():
                n += 1
        return n

    def run_producer_expiration(self) -> int:
        return sum(p.remove_expired_producers() for p in self.logs().values() if not p.closed)

    def run_scrub(self) -> int:
        """Verify sealed segments of every log; returns how many corrupt ranges are known."""
        return sum(len(p.verify_segments()) for p in self.logs().values() if not p.closed)

    def run_file_deletion(self) -> int:
        n = sum(p.delete_pending_files() for p in self.logs().values())
        self._delete_dirs()
        return n

    def _delete_dirs(self) -> None:
        with self._lock:
            dirs, self._pending_dir_deletes = self._pending_dir_deletes, []
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)

    # ------------------------------------------------------------------ checkpoints
    def _write_checkpoint(self, name: str, value: Callable[[PartitionLog], int]) -> None:
        """Write checkpoint file ``name`` in every log dir: ``value`` of each of its logs."""
        per_dir: dict[str, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
        with self._lock:
            items = [(tp, p, self._log_dir_of[tp]) for tp, p in self._logs.items()]
        for tp, plog, d in items:
            per_dir[d][tp] = value(plog)
        for d, entries in per_dir.items():
            write_offset_checkpoint(os.path.join(d, name), entries)

    def write_checkpoints(self) -> None:
        self.write_recovery_checkpoints()
        self.write_log_start_checkpoints()
        self.write_hw_checkpoints()
        self.write_cleaner_checkpoints()

    def write_recovery_checkpoints(self) -> None:
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, lambda p: p.recovery_point)

    def write_log_start_checkpoints(self) -> None:
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda p: p.log_start_offset)

    def write_hw_checkpoints(self) -> None:
        self._write_checkpoint(REPLICATION_CHECKPOINT, lambda p: p.high_watermark)

    def write_cleaner_checkpoints(self) -> None:
        self._write_checkpoint(CLEANER_CHECKPOINT, lambda p: p.cleaner_checkpoint)

    # ------------------------------------------------------------------ shutdown
    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop the scheduler, fsync every log, write checkpoints and the clean-shutdown
        marker, close the logs. Idempotent."""
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
        self._scheduler.stopping.set()  # it stops while the tier does
        if self.tier is not None:
            self.tier.shutdown(timeout_s)
        if not self._scheduler.stop(timeout_s):
            log.error("log manager scheduler did not stop within %.0f s", timeout_s)
        try:
            clean = True
            for plog in self.logs().values():
                try:
                    plog.flush()
                except KafkaStorageError:
                    log.exception("flush of %s failed at shutdown", plog)
                    clean = False
            self.write_checkpoints()
            for plog in self.logs().values():
                plog.close()
            self._delete_dirs()
            if clean:
                for d in self.log_dirs:
                    atomic_write(os.path.join(d, CLEAN_SHUTDOWN_MARKER), b"")
        finally:
            self._release_locks()

    def _release_locks(self) -> None:
        if self._own_locks is not None:
            self._own_locks.release()

    close = shutdown


def _read_checkpoint(directory: str, name: str, consequence: str) -> dict[TopicPartition, int]:
    """Checkpoint ``name`` of a log dir; an unreadable one is logged (with what follows from
    ignoring it) and read as empty, like a missing one: start-up goes on."""
    path = os.path.join(directory, name)
    try:
        return read_offset_checkpoint(path)
    except KafkaStorageError as exc:
        log.error("%s; ignoring %s: %s", exc, path, consequence)
        return {}
