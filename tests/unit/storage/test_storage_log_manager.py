"""LogManager: several log dirs, checkpoints (Kafka text format, atomic; an unreadable one is
ignored), clean-shutdown marker, recovery from the recovery point after a crash, the log-dir
locks, delete, and the background scheduler (retention, compaction, flush) that stops
cleanly."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from sparklog.protocol.errors import KafkaStorageError
from sparklog.storage import LogConfig, LogManager
from sparklog.storage.checkpoints import RECOVERY_POINT_CHECKPOINT, read_offset_checkpoint
from sparklog.storage.dir_lock import LOCK_FILE, LogDirInUseError, LogDirLocks
from tests.helpers.batches import make_batch, read_all
from tests.helpers.polling import wait_until


def _fill(log, n, **kw):
    for _ in range(n):
        log.append_as_leader(make_batch(2, **kw), 0)
    log.update_high_watermark(log.log_end_offset)


def test_partitions_spread_over_log_dirs_and_checkpoints(tmp_path):
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    lm = LogManager(dirs, LogConfig(segment_bytes=500), cluster_id="c1", node_id=3)
    logs = [lm.get_or_create_log("t", p, topic_id=bytes(16)) for p in range(4)]
    assert {lm.log_dir_of("t", p) for p in range(4)} == set(os.path.abspath(d) for d in dirs)
    assert lm.get_or_create_log("t", 0) is logs[0]
    for lg in logs:
        _fill(lg, 5)
    lm.shutdown()
    for d in dirs:
        names = os.listdir(d)
        for f in ("meta.properties", "recovery-point-offset-checkpoint",
                  "replication-offset-checkpoint", "log-start-offset-checkpoint",
                  ".kafka_cleanshutdown"):
            assert f in names, f
        props = Path(d, "meta.properties").read_text()
        assert "cluster.id=c1" in props and "node.id=3" in props and "version=1" in props
        text = Path(d, "replication-offset-checkpoint").read_text().splitlines()
        assert text[0] == "0" and text[1] == "2" and all(ln.split()[2] == "10" for ln in text[2:])
        assert read_offset_checkpoint(os.path.join(d, "recovery-point-offset-checkpoint")) == {
            ("t", p): 10 for p in range(4) if lm.log_dir_of("t", p) == os.path.abspath(d)}
    # restart: clean marker consumed, state back
    lm2 = LogManager(dirs, LogConfig(segment_bytes=500), cluster_id="c1", node_id=3)
    assert not any(os.path.exists(os.path.join(d, ".kafka_cleanshutdown")) for d in dirs)
    assert sorted(lm2.logs()) == [("t", p) for p in range(4)]
    lg = lm2.get_log("t", 2)
    assert lg.log_end_offset == 10 and lg.high_watermark == 10 and len(read_all(lg)) == 5
    assert lm2.delete_log("t", 2)
    assert lm2.get_log("t", 2) is None
    assert not any(n.startswith("t-2") for d in dirs for n in os.listdir(d))
    lm2.shutdown()


def test_crash_recovers_from_recovery_point(tmp_path):
    d = str(tmp_path / "d")
    locks = LogDirLocks([d])  # held as a process would: a crash drops them
    lm = LogManager([d], LogConfig(segment_bytes=400), dir_locks=locks)
    lg = lm.get_or_create_log("t", 0)
    _fill(lg, 10)
    lg.flush()
    lm.write_checkpoints()
    _fill(lg, 3)
    seg = lg.active_segment.log_path
    # crash: no shutdown, the kernel drops the lock; the tail of the last append is torn
    locks.release()
    os.truncate(seg, os.path.getsize(seg) - 5)
    lm2 = LogManager([d], LogConfig(segment_bytes=400))
    lg2 = lm2.get_log("t", 0)
    assert lg2.log_end_offset == 24
    assert lg2.append_as_leader(make_batch(1), 0).first_offset == 24
    lm2.shutdown()


def test_scheduler_runs_retention_compaction_flush_and_stops(tmp_path):
    now = [1_000_000_000]
    clock_lock = threading.Lock()

    def clock():
        with clock_lock:
            return now[0]

    lm = LogManager([str(tmp_path / "d")], LogConfig(segment_bytes=400, file_delete_delay_ms=0),
                    retention_check_interval_ms=20, cleaner_backoff_ms=20,
                    flush_check_interval_ms=20, checkpoint_interval_ms=20, time_ms=clock)
    ret = lm.get_or_create_log("old", 0, config=LogConfig(segment_bytes=400, retention_ms=1000,
                                                           file_delete_delay_ms=0))
    cmp_cfg = LogConfig(segment_bytes=400, cleanup_policy="compact", file_delete_delay_ms=0,
                        min_cleanable_dirty_ratio=0.0)
    cmp = lm.get_or_create_log("__consumer_offsets", 0, config=cmp_cfg)
    _fill(ret, 20, ts=0)
    _fill(cmp, 20, keys=[b"same", b"same"], ts=now[0])
    before = cmp.size_bytes
    lm.start()

    def done_as_time_passes() -> bool:
        with clock_lock:
            now[0] += 100
        return (ret.num_segments == 1 and cmp.size_bytes < before
                and cmp.recovery_point >= cmp.active_segment.base_offset)

    wait_until(done_as_time_passes, 10, interval=0.02)
    assert ret.num_segments == 1 and ret.log_start_offset == ret.active_segment.base_offset
    assert cmp.size_bytes < before
    assert cmp.recovery_point >= cmp.active_segment.base_offset  # sealed segments flushed
    worker = lm._scheduler.thread
    assert worker is not None and worker.is_alive()
    t0 = time.monotonic()
    lm.shutdown()
    assert time.monotonic() - t0 < 5
    assert not worker.is_alive()  # this manager's scheduler, not a neighbour test's
    starts = read_offset_checkpoint(str(tmp_path / "d" / "log-start-offset-checkpoint"))
    assert starts[("old", 0)] == ret.log_start_offset > 0


def test_a_locked_log_dir_refuses_a_second_manager_until_shutdown(tmp_path):
    d1, d2 = str(tmp_path / "a"), str(tmp_path / "b")
    lm = LogManager([d1, d2])
    lm.get_or_create_log("t", 0).append_as_leader(make_batch(1), 0)
    with open(os.path.join(d2, LOCK_FILE)) as f:
        assert f.read().strip() == str(os.getpid())
    with pytest.raises(LogDirInUseError, match=rf"data directory {d2} is in use by another "
                       rf"sparklog process \(pid {os.getpid()}\)"):
        LogManager([str(tmp_path / "c"), d2])
    # the refused manager kept no lock and touched nothing: a third directory is free
    LogDirLocks([str(tmp_path / "c")]).release()
    assert not os.path.exists(os.path.join(d1, ".kafka_cleanshutdown"))
    lm.shutdown()
    lm2 = LogManager([d1, d2])
    assert lm2.get_log("t", 0).log_end_offset == 1
    lm2.shutdown()


@pytest.mark.parametrize("garbage", [b"", b"0\n5\nt 0 1\n", b"\xff\xfe garbage \x00"])
def test_unreadable_recovery_point_checkpoint_recovers_every_log(tmp_path, caplog, garbage):
    d = str(tmp_path / "d")
    lm = LogManager([d], LogConfig(segment_bytes=400))
    for p in range(2):
        _fill(lm.get_or_create_log("t", p), 6)
    lm.shutdown()
    seg = os.path.join(d, "t-1", "00000000000000000000.log")
    with open(seg, "ab") as f:
        f.write(b"\x00" * 100)  # behind a trusted recovery point, only full recovery sees it
    path = os.path.join(d, RECOVERY_POINT_CHECKPOINT)
    with open(path, "wb") as f:
        f.write(garbage)
    with caplog.at_level("ERROR"):
        lm2 = LogManager([d], LogConfig(segment_bytes=400))
    assert any(path in r.getMessage() and "recovered from its start" in r.getMessage()
               for r in caplog.records if r.levelname == "ERROR")
    # the zeros after the first segment's last batch were found, not served
    assert lm2.get_log("t", 0).corrupt_ranges == []
    first_sealed = lm2.get_log("t", 1).segments[1].base_offset
    assert lm2.get_log("t", 1).corrupt_ranges == [(first_sealed, first_sealed)]
    for p in range(2):
        lg = lm2.get_log("t", p)
        assert lg.log_end_offset == 12
        assert lg.append_as_leader(make_batch(1), 0).first_offset == 12
    lm2.shutdown()


def test_a_partition_that_cannot_be_loaded_is_offline_and_never_recreated(tmp_path, caplog):
    d = str(tmp_path / "d")
    lm = LogManager([d])
    for p in range(2):
        _fill(lm.get_or_create_log("t", p, topic_id=bytes(range(16))), 3)
    lm.shutdown()
    meta = os.path.join(d, "t-1", "partition.metadata")
    with open(meta, "w") as f:
        f.write("version: 7\n")
    files = sorted(os.listdir(os.path.join(d, "t-1")))
    with caplog.at_level("ERROR"):
        lm2 = LogManager([d])
    assert any("t-1" in r.getMessage() and "offline" in r.getMessage() for r in caplog.records)
    assert lm2.get_log("t", 0).log_end_offset == 6  # the rest is served
    assert list(lm2.offline_partitions()) == [("t", 1)]
    with pytest.raises(KafkaStorageError, match=f"t-1 is offline: .*{meta}"):
        lm2.get_or_create_log("t", 1)
    assert sorted(os.listdir(os.path.join(d, "t-1"))) == files  # nothing written there
    assert lm2.delete_log("t", 1)  # the topic's deletion still removes it
    assert not os.path.exists(os.path.join(d, "t-1"))
    lm2.shutdown()
