"""Idempotent producers (KIP-98): duplicates answered with the original offsets, gaps and
stale epochs rejected, state surviving restart (clean and unclean) via snapshots."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparklog.protocol.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from sparklog.storage import LogConfig, PartitionLog
from sparklog.storage.producer_state import ProducerStateManager
from tests.helpers.batches import make_batch

PID = 4242


def idem(seq: int, n: int = 2, epoch: int = 0, pid: int = PID) -> bytes:
    return make_batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_duplicate_returns_original_offsets_and_writes_nothing(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    a = log.append_as_leader(idem(0), 0)
    b = log.append_as_leader(idem(2), 0)
    log.append_as_leader(make_batch(3), 0)  # a non-idempotent batch in between
    size, leo = log.size_bytes, log.log_end_offset
    dup = log.append_as_leader(idem(0), 0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (a.first_offset, a.last_offset)
    dup = log.append_as_leader(idem(2), 0)
    assert (dup.first_offset, dup.last_offset) == (b.first_offset, b.last_offset)
    assert log.size_bytes == size and log.log_end_offset == leo
    # the next in-sequence batch is accepted
    c = log.append_as_leader(idem(4), 0)
    assert c.first_offset == leo and not c.duplicate
    log.close()


def test_sequence_gap_and_epoch_rules(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"))
    log.append_as_leader(idem(0), 0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idem(5), 0)  # gap: expected 2
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idem(3, epoch=1), 0)  # new epoch must start at 0
    log.append_as_leader(idem(0, epoch=1), 0)  # bump epoch
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(idem(2, epoch=0), 0)  # fenced old epoch
    assert log.log_end_offset == 4
    # sequence wrap-around from INT32_MAX to 0
    log.append_as_leader(make_batch(1, producer_id=7, producer_epoch=0, base_sequence=2**31 - 1), 0)
    log.append_as_leader(make_batch(1, producer_id=7, producer_epoch=0, base_sequence=0), 0)
    assert log.log_end_offset == 6
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_producer_state_survives_restart(tmp_path, clean):
    d = str(tmp_path / "t-0")
    cfg = LogConfig(segment_bytes=400)
    log = PartitionLog(d, cfg)
    infos = [log.append_as_leader(idem(2 * i), 0) for i in range(10)]
    assert log.num_segments > 1
    leo = log.log_end_offset
    if clean:
        log.close()
        assert os.path.exists(os.path.join(d, f"{leo:020d}.snapshot"))
    else:
        # crash: no close, so the newest snapshot is from the last roll; recovery replays
        # the batches after it
        assert not os.path.exists(os.path.join(d, f"{leo:020d}.snapshot"))
    log2 = PartitionLog(d, cfg, recovery_point=leo if clean else 0, clean_shutdown=clean)
    dup = log2.append_as_leader(idem(18), 0)
    assert dup.duplicate and dup.first_offset == infos[-1].first_offset
    with pytest.raises(OutOfOrderSequenceError):
        log2.append_as_leader(idem(30), 0)
    assert log2.append_as_leader(idem(20), 0).first_offset == leo
    log2.close()


def test_snapshot_file_format_round_trip(tmp_path):
    psm = ProducerStateManager(str(tmp_path))
    from sparklog.storage.producer_state import ProducerBatch

    psm.replay(ProducerBatch(1, 3, 10, 14, 100, 104, 5555))
    psm.replay(ProducerBatch(2, 0, 0, 0, 105, 105, 6666))
    path = psm.take_snapshot(106)
    data = Path(path).read_bytes()
    assert len(data) == 2 + 4 + 4 + 2 * 46 and data[:2] == b"\x00\x01"
    again = ProducerStateManager(str(tmp_path))
    assert again.truncate_and_reload(0, 106) == 106
    e = again.producers[1]
    assert (e.producer_epoch, e.last_seq, e.last_offset, e.batches[-1].first_seq) == (3, 14, 104, 10)
    # a corrupt snapshot is dropped, not trusted
    with open(path, "r+b") as f:
        f.seek(20)
        f.write(b"\xff")
    assert ProducerStateManager(str(tmp_path)).truncate_and_reload(0, 106) is None


def test_expiration(tmp_path):
    now = [10_000_000]
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(producer_id_expiration_ms=1000),
                       time_ms=lambda: now[0])
    log.append_as_leader(make_batch(1, producer_id=1, producer_epoch=0, base_sequence=0,
                                    ts=now[0]), 0)
    assert log.remove_expired_producers() == 0
    now[0] += 5000
    assert log.remove_expired_producers() == 1
    # after expiry any sequence is accepted again (unknown producer)
    log.append_as_leader(make_batch(1, producer_id=1, producer_epoch=0, base_sequence=9,
                                    ts=now[0]), 0)
    log.close()
