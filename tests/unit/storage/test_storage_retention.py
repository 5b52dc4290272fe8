"""Retention by time and bytes, DeleteRecords, and the invariants: whole sealed segments only,
never the active one, log start never past the high watermark, checkpointed start."""

from __future__ import annotations

import os

import pytest

from sparklog.protocol.errors import OffsetOutOfRangeError
from sparklog.storage import LogConfig, LogManager, PartitionLog
from tests.helpers.batches import make_batch, read_all


def _log(tmp_path, now, **cfg):
    base = dict(segment_bytes=500, file_delete_delay_ms=0)
    base.update(cfg)
    return PartitionLog(str(tmp_path / "t-0"), LogConfig(**base), time_ms=lambda: now[0])


def _fill(log, n, ts0):
    for i in range(n):
        log.append_as_leader(make_batch(2, ts=ts0 + i * 1000), 0)
    log.update_high_watermark(log.log_end_offset)


def test_retention_by_time(tmp_path):
    now = [1_000_000]
    log = _log(tmp_path, now, retention_ms=10_000)
    _fill(log, 20, ts0=now[0])  # timestamps 1_000_000 .. 1_019_000
    segs = log.segments
    assert len(segs) > 3
    now[0] = segs[0].max_timestamp + 10_000  # not yet *older* than retention.ms
    assert log.delete_old_segments() == 0
    now[0] = segs[2].max_timestamp + 10_001  # segments 0..2 are older than retention.ms
    deleted = log.delete_old_segments()
    assert deleted == 3
    assert log.log_start_offset == segs[3].base_offset
    assert read_all(log)[0].base_offset == segs[3].base_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    # far in the future: everything sealed goes, the active segment stays
    now[0] += 10**9
    log.delete_old_segments()
    assert log.num_segments == 1 and log.log_start_offset == log.active_segment.base_offset
    assert not [n for n in os.listdir(log.directory) if n.endswith(".deleted")]
    log.close()


def test_retention_by_bytes(tmp_path):
    now = [1_000_000]
    log = _log(tmp_path, now, retention_bytes=1200, retention_ms=-1)
    _fill(log, 30, ts0=now[0])
    log.delete_old_segments()
    # total after deletion within retention.bytes + one segment's worth, oldest went first
    assert log.size_bytes - log.segments[0].size < 1200
    assert log.size_bytes > 0 and log.log_start_offset == log.segments[0].base_offset
    assert read_all(log)[-1].last_offset == log.log_end_offset - 1
    log.close()


def test_start_offset_never_passes_high_watermark(tmp_path):
    now = [1_000_000]
    log = _log(tmp_path, now, retention_ms=1)
    _fill(log, 20, ts0=0)
    log.update_high_watermark(3)
    now[0] += 10**6
    log.delete_old_segments()
    assert log.log_start_offset <= 3
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(10)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_records(10) == 10
    assert read_all(log)[0].last_offset >= 10 and log.log_start_offset == 10
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, 100)
    log.close()


def test_delayed_file_deletion_keeps_open_slices_readable(tmp_path):
    now = [1_000_000]
    log = _log(tmp_path, now, retention_ms=1, file_delete_delay_ms=60_000)
    _fill(log, 10, ts0=0)
    fetched = log.read(0, 1 << 20)
    now[0] += 10**6
    assert log.delete_old_segments() > 0
    names = os.listdir(log.directory)
    assert any(n.endswith(".log.deleted") for n in names)
    assert fetched.read_bytes()  # the open descriptors still serve the bytes
    now[0] += 60_001
    assert log.delete_pending_files() > 0
    assert not any(n.endswith(".deleted") for n in os.listdir(log.directory))
    log.close()


def test_log_start_offset_checkpointed_across_restart(tmp_path):
    d = str(tmp_path / "logs")
    lm = LogManager([d], LogConfig(segment_bytes=500, file_delete_delay_ms=0))
    log = lm.get_or_create_log("t", 0)
    _fill(log, 10, ts0=0)
    log.delete_records(7)
    lm.shutdown()
    lm2 = LogManager([d], LogConfig(segment_bytes=500))
    log2 = lm2.get_log("t", 0)
    assert log2.log_start_offset == 7 and log2.high_watermark == 20
    lm2.shutdown()
