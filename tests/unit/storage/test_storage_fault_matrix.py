"""Issue 13's fault matrix on a LogManager: {clean shutdown, crash} x {damage to one file of a
partition} -> reopen -> append -> read from 0.

The invariant: every offset acknowledged and not inside the damaged range is served with the
bytes that were acknowledged; the new append is acknowledged at the offset that follows the
last servable batch (offsets stay dense) and is served there; and all of it survives one more
restart. "Damaged range" per fault, precisely:

* tail damage of the active segment (garbage, torn or bit-flipped last batch, zeroed
  preallocated space): the bad bytes are truncated; a damaged last batch is lost (it is
  inside the range) and the new append reuses its base offset;
* a flipped byte inside a batch of a sealed middle segment: that batch up to the end of its
  segment is never served (KAFKA_STORAGE_ERROR, found at load or by the scrub); later
  segments are;
* damaged or missing indexes, leader-epoch checkpoint, producer snapshots, recovery-point
  checkpoint: nothing is lost; each is rebuilt from the log.

A crash here is what a killed process leaves: the written bytes (the page cache keeps
them), checkpoints as of the last ``write_checkpoints``, no clean-shutdown marker, and the
log-dir lock dropped.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparklog.protocol.batch_header import BATCH_HEADER_SIZE, iter_batch_views
from sparklog.protocol.errors import KafkaStorageError
from sparklog.storage import LogConfig, LogManager, PartitionLog
from sparklog.storage.checkpoints import RECOVERY_POINT_CHECKPOINT
from sparklog.storage.dir_lock import LogDirLocks
from tests.helpers.batches import make_batch
from tests.helpers.log_faults import (
    FAULTS,
    Damage,
    corrupt_recovery_point,
    flip,
    garbage_tail,
    last_batch_span,
    segment_files,
)

CFG = LogConfig(segment_bytes=1200, index_interval_bytes=150)
PID = 4242  # one idempotent producer writes every batch: producer state must survive too
N_BATCHES = 16
EPOCH_AT = {0: 1, 6: 3, 11: 4}  # batch index -> the leader epoch it starts
# batch index -> a new segment starts there: four segments, the active one holding three
# batches (< 700 bytes), so 300 bytes of garbage plus the next append still fit in it: an
# append landing behind the garbage is what the test must catch
ROLL_AT = (4, 8, 13)


@dataclass
class Written:
    """What was acknowledged: each batch's bytes as stored, by base offset."""

    batches: list[bytes]
    epochs: list[tuple[int, int]]
    next_seq: int

    @property
    def leo(self) -> int:
        return next(iter_batch_views(self.batches[-1])).next_offset


def _views(raw: bytes):
    return list(iter_batch_views(raw))


def _write(d: str, crash: bool, rng: random.Random) -> Written:
    locks = LogDirLocks([d])
    lm = LogManager([d], CFG, dir_locks=locks)
    log = lm.get_or_create_log("t", 0)
    epoch, seq = 0, 0
    for i in range(N_BATCHES):
        epoch = EPOCH_AT.get(i, epoch)
        if i in ROLL_AT:
            log.roll()
        n = rng.randint(1, 3)
        log.append_as_leader(make_batch(n, ts=10_000 + 100 * i, value_size=rng.randint(5, 30),
                                        producer_id=PID, producer_epoch=0, base_sequence=seq),
                             epoch)
        seq += n
        log.update_high_watermark(log.log_end_offset)
        if i == N_BATCHES // 2:  # a crash recovers from here
            log.flush()
            lm.write_checkpoints()
    assert log.num_segments == len(ROLL_AT) + 1
    written = Written([bytes(v.raw()) for v in _views(log.read(0, 1 << 20).read_bytes())],
                      log.leader_epoch_cache.entries(), seq)
    if crash:
        log.active_segment.offset_index.flush()  # as the OS may have written some of it
    else:
        lm.shutdown()
    locks.release()
    return written


# ---------------------------------------------------------------- the check


def _served(log: PartitionLog, start: int, end: int) -> list[bytes]:
    """Batches read from ``start`` until ``end`` (exclusive), batch by batch."""
    out: list[bytes] = []
    offset = start
    while offset < end:
        views = _views(log.read(offset, 1 << 20, max_offset=end).read_bytes())
        assert views, f"nothing served at {offset} (end {end})"
        out += [bytes(v.raw()) for v in views]
        offset = views[-1].next_offset
    return out


def _check(log: PartitionLog, w: Written, damage: Damage) -> int:
    """Everything the module docstring promises; returns the LEO after the new append."""
    if damage.unserved is not None:
        log.verify_segments()  # the scrub: bit rot below the recovery point is found here
        lo, hi = damage.unserved
        assert log.corrupt_ranges == [(lo, hi)]
        with pytest.raises(KafkaStorageError):
            log.read(lo, 1 << 20)
    kept_end = w.leo if damage.lost_from is None else damage.lost_from
    assert log.log_end_offset == kept_end
    expect = [b for b in w.batches if next(iter_batch_views(b)).base_offset < kept_end]
    if damage.unserved is None:
        assert _served(log, 0, kept_end) == expect
    else:
        lo, hi = damage.unserved
        below = [b for b in expect if next(iter_batch_views(b)).base_offset < lo]
        above = [b for b in expect if next(iter_batch_views(b)).base_offset >= hi]
        assert _served(log, 0, lo) == [b for b in below if next(iter_batch_views(b)).next_offset <= lo]
        assert _served(log, hi, kept_end) == above
    # the producer continues where its last kept batch ended (state rebuilt from the log)
    seq = sum(v.last_offset - v.base_offset + 1 for b in expect for v in _views(b))
    info = log.append_as_leader(make_batch(2, ts=90_000, producer_id=PID, producer_epoch=0,
                                           base_sequence=seq), 4)
    assert info.first_offset == kept_end and not info.duplicate
    got = _views(log.read(kept_end, 1 << 20).read_bytes())
    assert [(v.base_offset, v.last_offset) for v in got] == [(kept_end, kept_end + 1)]
    # the leader epochs of the kept batches, whatever happened to their checkpoint
    epochs = [(e, s) for e, s in w.epochs if s < kept_end]
    assert log.leader_epoch_cache.entries() == epochs
    # indexes answer for every kept offset and timestamp
    for b in expect:
        v = next(iter_batch_views(b))
        if damage.unserved is not None and damage.unserved[0] <= v.base_offset < damage.unserved[1]:
            continue
        found = log.offset_for_timestamp(v.base_timestamp)
        assert found is not None and found.offset == v.base_offset
    return log.log_end_offset


@pytest.mark.parametrize("fault", [*FAULTS, "corrupt_recovery_point"])
@pytest.mark.parametrize("shutdown", ["clean", "crash"])
def test_fault_matrix(tmp_path, caplog, shutdown, fault):
    d = str(tmp_path / "d")
    w = _write(d, shutdown == "crash", random.Random(fault))
    part = os.path.join(d, "t-0")
    damage = FAULTS.get(fault, corrupt_recovery_point)(part)
    with caplog.at_level("WARNING"):
        lm = LogManager([d], CFG)
    log = lm.get_log("t", 0)
    assert log is not None
    leo = _check(log, w, damage)
    if fault != "missing_producer_snapshots":  # no snapshot is not damage: none may exist
        # every repair says what it did, naming the file
        assert any(r.levelname in ("WARNING", "ERROR") and "t-0" in r.getMessage()
                   or RECOVERY_POINT_CHECKPOINT in r.getMessage() for r in caplog.records), \
            [r.getMessage() for r in caplog.records]
    lm.shutdown()
    # the repair is on disk: the next start serves the same, without further repairs
    lm = LogManager([d], CFG)
    log = lm.get_log("t", 0)
    assert log is not None and log.log_end_offset == leo
    assert _views(log.read(leo - 2, 1 << 20).read_bytes())[-1].next_offset == leo
    lm.shutdown()


def test_tail_damage_log_line_names_file_position_and_bytes(tmp_path, caplog):
    d = str(tmp_path / "d")
    _write(d, False, random.Random(3))
    part = os.path.join(d, "t-0")
    garbage_tail(part)
    path = segment_files(part, ".log")[-1]
    size = os.path.getsize(path)
    with caplog.at_level("ERROR"):
        lm = LogManager([d], CFG)
    lines = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any(path in m and "truncating 300 bytes at position" in m and str(size - 300) in m
               for m in lines), lines
    lm.shutdown()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(crash=st.booleans(), tail=st.binary(min_size=1, max_size=200),
       flip_at=st.none() | st.floats(min_value=0, max_value=1, exclude_max=True),
       cut=st.none() | st.integers(min_value=1, max_value=400))
def test_any_tail_damage_keeps_offsets_dense(tmp_path_factory, crash, tail, flip_at, cut):
    """Random bytes after the active segment, maybe a flipped byte in its last batch, maybe
    a cut into it: the kept prefix is served and the next append follows it densely."""
    d = str(tmp_path_factory.mktemp("prop") / "d")
    w = _write(d, crash, random.Random(11))
    path, pos, size, base = last_batch_span(os.path.join(d, "t-0"))
    lost_from = None
    kept = size
    if cut is not None and cut < size:
        kept = size - cut
        with open(path, "rb") as f:
            f.seek(pos + kept)
            first_cut = f.read(1)[0]
        os.truncate(path, pos + kept)
        lost_from = base
        if tail[0] == first_cut:  # the tail would put the batch back together
            tail = bytes([first_cut ^ 1]) + tail[1:]
    if flip_at is not None and kept > BATCH_HEADER_SIZE:
        # from the CRC-covered header fields (attributes on) to what the cut left
        at = BATCH_HEADER_SIZE - 40 + int(flip_at * (kept - BATCH_HEADER_SIZE + 40))
        flip(path, pos + at)
        lost_from = base
    with open(path, "ab") as f:
        f.write(tail)
    lm = LogManager([d], CFG)
    log = lm.get_log("t", 0)
    assert log is not None
    _check(log, w, Damage(lost_from=lost_from))
    lm.shutdown()
