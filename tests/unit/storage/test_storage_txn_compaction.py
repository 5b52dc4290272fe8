"""Compaction keeps transactional semantics (Kafka's cleaner, KIP-98 + KIP-534): aborted
records go first, their ABORT marker stays with its ``.txnindex`` entry while any of them
is left, then gets a delete horizon and goes in a pass after it; a COMMIT marker goes once
no record of its transaction is left; a marker that is its producer's last entry stays;
aborted records are recognised even when their marker lies past the cleaned range; and
producer state rebuilt from the compacted log (no snapshot) has no transaction left open."""

from __future__ import annotations

import os

from sparklog.protocol.control_records import parse_control_record_key
from sparklog.storage import LogConfig, PartitionLog
from sparklog.storage.cleaner import clean_log
from tests.helpers.batches import (
    append_committed,
    append_marker,
    make_batch,
    read_all,
    read_records,
    txn_batch,
)

A, B = 1001, 1002
RETENTION_MS = 1_000
CFG = LogConfig(cleanup_policy="compact", delete_retention_ms=RETENTION_MS,
                min_cleanable_dirty_ratio=0.5, file_delete_delay_ms=0)


def plain(log: PartitionLog, key: bytes, value: bytes) -> int:
    return append_committed(log, make_batch(1, keys=[key], values=[value], ts=None))


def markers(log: PartitionLog) -> dict[int, tuple[int, bool]]:
    """marker offset -> (record type, has a delete horizon)."""
    return {b.base_offset: (parse_control_record_key(b.records[0].key)[1], b.has_delete_horizon)
            for b in read_all(log) if b.is_control and b.records}


def committed_view(log: PartitionLog) -> dict[bytes, bytes | None]:
    """What a read_committed reader of the whole log ends with, key -> last value."""
    aborted = log.aborted_transactions(log.log_start_offset, log.log_end_offset)
    out: dict[bytes, bytes | None] = {}
    for b in read_all(log):
        if b.is_control:
            continue
        if b.is_transactional and any(t.producer_id == b.producer_id
                                      and t.first_offset <= b.base_offset < t.last_offset
                                      for t in aborted):
            continue
        for r in b.records:
            out[bytes(r.key)] = None if r.value is None else bytes(r.value)
    return out


def reopened_after_crash(log: PartitionLog) -> PartitionLog:
    """The log as a restart after a crash finds it: no snapshot at the end, and the latest
    one lost too, so producer state comes from older snapshots or the whole log."""
    hw = log.high_watermark
    for seg in log.segments:
        seg.close_fd_only()
    snaps = log.producer_state.snapshot_offsets()
    if snaps:
        os.remove(os.path.join(log.directory, f"{snaps[-1]:020d}.snapshot"))
    return PartitionLog(log.directory, log.config, high_watermark=hw)


def test_aborted_marker_goes_after_its_records_and_the_delete_horizon(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), CFG)
    plain(log, b"k", b"good")
    append_committed(log, txn_batch(A, 0, n=1, keys=[b"k"], values=[b"bad"]))
    log.roll()  # a snapshot here names A's transaction open
    abort = append_marker(log, A, commit=False)
    append_committed(log, txn_batch(A, 1, n=1, keys=[b"j"], values=[b"j1"]))
    commit = append_marker(log, A, commit=True)
    plain(log, b"x", b"x1")
    log.roll()
    plain(log, b"y", b"y1")
    early_snapshot = os.path.join(log.directory, f"{abort:020d}.snapshot")
    assert os.path.exists(early_snapshot)

    # pass 1: the aborted record goes; its marker and index entry stay
    assert clean_log(log, 10_000, force=True).records_removed == 1
    assert [t.last_offset for t in log.aborted_transactions(0, log.log_end_offset)] == [abort]
    assert markers(log) == {abort: (0, False), commit: (1, False)}
    assert committed_view(log)[b"k"] == b"good"
    # pass 2: nothing of the aborted transaction is left: the entry goes, the marker gets
    # its delete horizon; the commit marker still has its record after it
    assert clean_log(log, 20_000, force=True) is not None
    assert log.aborted_transactions(0, log.log_end_offset) == []
    assert markers(log) == {abort: (0, True), commit: (1, False)}
    assert log.cleaner_next_horizon_ms == 20_000 + RETENTION_MS
    # not dirty, horizon ahead: no pass; once it passed, the pass is due and drops the marker
    assert clean_log(log, 20_000 + RETENTION_MS - 1) is None
    assert clean_log(log, 20_000 + RETENTION_MS).records_removed == 1
    assert markers(log) == {commit: (1, False)}
    assert not os.path.exists(early_snapshot)
    assert committed_view(log) == {b"k": b"good", b"j": b"j1", b"x": b"x1", b"y": b"y1"}
    assert log.last_stable_offset == log.high_watermark

    log = reopened_after_crash(log)
    assert log.producer_state.ongoing == {}
    assert log.last_stable_offset == log.high_watermark == log.log_end_offset
    assert committed_view(log)[b"k"] == b"good"
    log.close()


def test_commit_marker_goes_once_its_records_are_compacted_away(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), CFG)
    append_committed(log, txn_batch(A, 0, n=1, keys=[b"k"], values=[b"v1"]))
    commit = append_marker(log, A, commit=True)
    plain(log, b"k", b"v2")
    log.roll()
    # A's later transaction: the first one's batch is no longer A's last
    append_committed(log, txn_batch(A, 1, n=1, keys=[b"j"], values=[b"j1"]))
    append_marker(log, A, commit=True)
    assert clean_log(log, 10_000, force=True).records_removed == 1
    assert commit in markers(log)  # a pass met its transaction's batch
    clean_log(log, 20_000, force=True)
    assert markers(log)[commit] == (1, True)
    clean_log(log, 20_000 + RETENTION_MS, force=True)
    assert commit not in markers(log)
    assert committed_view(log) == {b"k": b"v2", b"j": b"j1"}
    log = reopened_after_crash(log)
    assert log.last_stable_offset == log.log_end_offset
    log.close()


def test_a_producers_last_marker_stays_for_its_epoch(tmp_path):
    """A transaction aborted by a fence (epoch bumped): the marker is all producer state
    has of the new epoch, so it outlives its delete horizon."""
    log = PartitionLog(str(tmp_path / "t-0"), CFG)
    append_committed(log, txn_batch(A, 0, n=1, keys=[b"k"], values=[b"bad"]))
    abort = append_marker(log, A, commit=False, epoch=1)
    plain(log, b"z", b"z1")
    log.roll()
    plain(log, b"w", b"w1")
    for now in (10_000, 20_000, 20_000 + RETENTION_MS, 40_000):
        clean_log(log, now, force=True)
    assert markers(log) == {abort: (0, True)}
    assert b"k" not in committed_view(log)
    log = reopened_after_crash(log)
    assert log.producer_state.last_entry(A).producer_epoch == 1
    log.close()


def test_aborted_records_go_when_their_marker_lies_past_the_range(tmp_path):
    """The ABORT marker is in the active segment, beyond what is cleaned: the aborted
    record must still lose to nothing (before, it won the key and the committed value was
    compacted away, leaving read_committed readers without the key)."""
    log = PartitionLog(str(tmp_path / "t-0"), CFG)
    plain(log, b"k", b"good")
    append_committed(log, txn_batch(B, 0, n=1, keys=[b"k"], values=[b"bad"]))
    log.roll()
    append_marker(log, B, commit=False)
    plain(log, b"x", b"x1")
    assert clean_log(log, 10_000, force=True).records_removed == 1
    assert [(r.key, r.value) for r in read_records(log) if r.key == b"k"] == [(b"k", b"good")]
    assert committed_view(log)[b"k"] == b"good"
    log.close()
