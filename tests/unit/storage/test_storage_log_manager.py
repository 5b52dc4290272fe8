"""LogManager: several log dirs, checkpoints (Kafka text format, atomic), clean-shutdown
marker, recovery from the recovery point after a crash, delete, and the background scheduler
(retention, compaction, flush) that stops cleanly."""

from __future__ import annotations

import os
import threading
import time

from sparklog.storage import LogConfig, LogManager
from sparklog.storage.checkpoints import read_offset_checkpoint
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
        props = open(os.path.join(d, "meta.properties")).read()
        assert "cluster.id=c1" in props and "node.id=3" in props and "version=1" in props
        text = open(os.path.join(d, "replication-offset-checkpoint")).read().splitlines()
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
    lm = LogManager([d], LogConfig(segment_bytes=400))
    lg = lm.get_or_create_log("t", 0)
    _fill(lg, 10)
    lg.flush()
    lm.write_checkpoints()
    _fill(lg, 3)
    seg = lg.active_segment.log_path
    # crash: no shutdown; the tail of the last append is torn
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
    worker = lm._thread
    assert worker is not None and worker.is_alive()
    t0 = time.monotonic()
    lm.shutdown()
    assert time.monotonic() - t0 < 5
    assert not worker.is_alive()  # this manager's scheduler, not a neighbour test's
    starts = read_offset_checkpoint(str(tmp_path / "d" / "log-start-offset-checkpoint"))
    assert starts[("old", 0)] == ret.log_start_offset > 0
