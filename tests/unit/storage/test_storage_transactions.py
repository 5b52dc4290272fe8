"""Transactions in one partition log (KIP-98): open transactions hold the last stable
offset back, markers close them, aborted ones go to the segment's ``.txnindex`` in Kafka's
byte format, and all of it survives restarts (clean, unclean, without the index file),
truncation and compaction."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from sparklog.storage import LogConfig, PartitionLog
from sparklog.storage.cleaner import clean_log
from sparklog.storage.txn_index import AbortedTxn, TransactionIndex
from tests.helpers.batches import (
    append_committed,
    append_marker,
    make_batch,
    read_records,
    txn_batch,
)

A, B = 1001, 1002


def test_lso_follows_open_transactions(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    append_committed(log, make_batch(3, ts=None))
    assert log.last_stable_offset == log.high_watermark == 3
    a0 = append_committed(log, txn_batch(A, 0))
    b0 = append_committed(log, txn_batch(B, 0))
    append_committed(log, make_batch(1, ts=None))
    assert (a0, b0) == (3, 5)
    assert log.last_stable_offset == 3 and log.high_watermark == 8
    append_committed(log, txn_batch(A, 2))  # same transaction: its first offset stays
    m_a = append_marker(log, A, commit=True)
    assert log.last_stable_offset == b0
    m_b = append_marker(log, B, commit=False)
    assert log.last_stable_offset == log.high_watermark == m_b + 1
    assert log.aborted_transactions(0, log.last_stable_offset) == [
        AbortedTxn(B, b0, m_b, m_b + 1)]
    assert log.aborted_transactions(m_b + 1, log.log_end_offset) == []
    assert m_a < m_b
    # a new transaction of A after its marker opens again
    a1 = append_committed(log, txn_batch(A, 4))
    assert log.last_stable_offset == a1
    log.close()


def test_txnindex_bytes_are_kafkas(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    first = append_committed(log, txn_batch(A, 0))
    m = append_marker(log, A, commit=False)
    path = os.path.join(log.directory, f"{0:020d}.txnindex")
    data = Path(path).read_bytes()
    assert data == struct.pack(">hqqqq", 0, A, first, m, m + 1)
    assert TransactionIndex(path).entries == [AbortedTxn(A, first, m, m + 1)]
    log.close()


def test_committed_transactions_leave_no_index(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    append_committed(log, txn_batch(A, 0))
    append_marker(log, A, commit=True)
    assert not os.path.exists(os.path.join(log.directory, f"{0:020d}.txnindex"))
    log.close()


def test_open_transaction_and_index_survive_restart(tmp_path):
    d = str(tmp_path / "t-0")
    log = PartitionLog(d)
    b0 = append_committed(log, txn_batch(B, 0))
    mb = append_marker(log, B, commit=False)
    a0 = append_committed(log, txn_batch(A, 0))
    log.close()
    log = PartitionLog(d, clean_shutdown=True, high_watermark=log.log_end_offset)
    assert log.last_stable_offset == a0
    assert log.aborted_transactions(0, a0) == [AbortedTxn(B, b0, mb, mb + 1)]
    append_marker(log, A, commit=False)
    assert log.last_stable_offset == log.log_end_offset
    log.close()


def test_index_rebuilt_after_a_crash(tmp_path):
    """No snapshot at the end (a crash) and the index file lost: replay writes it again."""
    d = str(tmp_path / "t-0")
    log = PartitionLog(d)
    a0 = append_committed(log, txn_batch(A, 0))
    b0 = append_committed(log, txn_batch(B, 0))
    ma = append_marker(log, A, commit=False)
    mb = append_marker(log, B, commit=False)
    for seg in log.segments:
        seg.close_fd_only()
    for name in os.listdir(d):
        if name.endswith((".txnindex", ".snapshot")):
            os.remove(os.path.join(d, name))
    log = PartitionLog(d, high_watermark=mb + 1)
    assert log.aborted_transactions(0, mb + 1) == [AbortedTxn(A, a0, ma, b0),
                                                   AbortedTxn(B, b0, mb, mb + 1)]
    assert log.last_stable_offset == mb + 1
    log.close()


def test_truncation_drops_entries_and_reopens_transactions(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    a0 = append_committed(log, txn_batch(A, 0))
    m = append_marker(log, A, commit=False)
    assert log.aborted_transactions(0, m + 1)
    log.truncate_to(m)  # the marker goes: the transaction is open again
    assert log.aborted_transactions(0, m) == []
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == a0
    log.close()


def test_segments_roll_and_retention_keep_entries(tmp_path):
    cfg = LogConfig(segment_bytes=300)
    log = PartitionLog(str(tmp_path / "t-0"), cfg)
    aborted = []
    seq = 0
    for i in range(6):
        first = append_committed(log, txn_batch(A, seq))
        seq += 2
        m = append_marker(log, A, commit=i % 2 == 0)
        if i % 2:
            aborted.append((first, m))
    assert log.num_segments > 2
    got = log.aborted_transactions(0, log.log_end_offset)
    assert [(t.first_offset, t.last_offset) for t in got] == aborted
    # a fetch from the middle sees only what overlaps it
    mid = aborted[1][0]
    assert [(t.first_offset, t.last_offset) for t in log.aborted_transactions(mid, log.log_end_offset)] == aborted[1:]
    log.close()


def test_compaction_drops_aborted_records_and_keeps_markers(tmp_path):
    cfg = LogConfig(segment_bytes=250, cleanup_policy="compact")
    log = PartitionLog(str(tmp_path / "t-0"), cfg)
    append_committed(log, make_batch(1, keys=[b"k"], values=[b"committed"], ts=None))
    append_committed(log, txn_batch(A, 0, n=1, keys=[b"k"], values=[b"aborted"]))
    m = append_marker(log, A, commit=False)
    for i in range(4):  # later segments so the above becomes cleanable
        append_committed(log, make_batch(1, keys=[b"x%d" % i], values=[b"v"], ts=None))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert clean_log(log, force=True) is not None
    values = {bytes(r.key): bytes(r.value) for r in read_records(log) if r.key is not None
              and r.key[:1] != b"\x00"}
    assert values[b"k"] == b"committed"
    assert log.aborted_transactions(0, log.log_end_offset)[0].last_offset == m
    log.close()


def test_lso_never_falls_below_the_log_start(tmp_path):
    """DeleteRecords (or retention) past an open transaction's first records: the LSO is
    the new log start, as Kafka clamps it, so read_committed readers are never sent below
    it."""
    log = PartitionLog(str(tmp_path / "t-0"))
    a0 = append_committed(log, txn_batch(A, 0, n=4))
    append_committed(log, make_batch(3, ts=None))
    assert log.last_stable_offset == a0 == 0
    assert log.delete_records(2) == 2
    assert log.last_stable_offset == 2
    append_marker(log, A, commit=False)
    assert log.last_stable_offset == log.high_watermark
    log.close()


def test_open_transactions_come_back_from_a_snapshot_and_the_replayed_tail(tmp_path):
    """A crash (no snapshot at the end) with two transactions open: A's began before the
    last roll (the roll's snapshot has it open), B's after it (only the replay of the tail
    finds it). The recovered LSO is A's first offset, and stays at the oldest open
    transaction until each marker; without any snapshot the whole replay agrees."""
    d = str(tmp_path / "t-0")
    log = PartitionLog(d, LogConfig(segment_bytes=1 << 20))
    append_committed(log, make_batch(2, ts=None))
    a0 = append_committed(log, txn_batch(A, 0))
    append_committed(log, make_batch(2, ts=None))
    log.roll()
    b0 = append_committed(log, txn_batch(B, 0))
    append_committed(log, txn_batch(A, 2))
    append_committed(log, make_batch(2, ts=None))
    assert log.last_stable_offset == a0 and log.producer_state.snapshot_offsets() == [b0]
    hw = log.high_watermark

    for lose_snapshots in (False, True):
        for seg in log.segments:
            seg.close_fd_only()
        if lose_snapshots:
            os.remove(os.path.join(d, f"{b0:020d}.snapshot"))
        log = PartitionLog(d, LogConfig(segment_bytes=1 << 20), high_watermark=hw)
        assert log.producer_state.ongoing == {A: a0, B: b0}
        assert log.last_stable_offset == a0
    append_marker(log, B, commit=False)
    assert log.last_stable_offset == a0
    append_marker(log, A, commit=True)
    assert log.last_stable_offset == log.high_watermark == log.log_end_offset
    log.close()
