"""Compaction: latest value per key (checked against a dict model under hypothesis),
offsets kept, tombstones dropped after delete.retention.ms, active segment untouched, and
crash safety of the .cleaned -> .swap -> live sequence."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparklog.protocol.errors import InvalidRecordError
from sparklog.storage import LogConfig, PartitionLog
from sparklog.storage.cleaner import SimulatedCrash, clean_log
from tests.helpers.batches import make_batch, read_all, read_records

CFG = LogConfig(cleanup_policy="compact", segment_bytes=400, file_delete_delay_ms=0,
                delete_retention_ms=1_000, min_cleanable_dirty_ratio=0.0)

KEYS = [b"a", b"b", b"c", b"d", b"e"]


def _write(log, ops):
    """ops: list of batches, each a list of (key index, value or None)."""
    history = []  # (offset, key, value)
    for batch in ops:
        keys = [KEYS[k] for k, _ in batch]
        values = [v for _, v in batch]
        info = log.append_as_leader(make_batch(len(batch), keys=keys, values=values, ts=1000), 0)
        for i, (k, v) in enumerate(zip(keys, values, strict=True)):
            history.append((info.first_offset + i, k, v))
    log.update_high_watermark(log.log_end_offset)
    return history


def _check(log, history, tombstones_dropped: bool, compacted: bool = True):
    records = [(r.offset, r.key, r.value) for r in read_records(log)]
    latest = {}
    for off, k, v in history:
        latest[k] = (off, v)
    # every surviving record is an original one, unchanged, at its original offset
    original = {off: (k, v) for off, k, v in history}
    for off, k, v in records:
        assert original[off] == (k, v)
    # reading the log gives the model's latest value for every key
    seen = {}
    for _off, k, v in records:
        seen[k] = v
    for k, (off, v) in latest.items():
        if v is None and tombstones_dropped and off < log.active_segment.base_offset:
            assert k not in seen or seen[k] is None
        else:
            assert seen.get(k, "absent") == v, k
    if not compacted:
        return
    # in the cleaned part (sealed segments) a key appears at most once, and only as its
    # latest record there (like Kafka, the offset map covers the sealed segments only)
    cleaned_end = log.active_segment.base_offset
    latest_sealed = {k: off for off, k, _ in history if off < cleaned_end}
    cleaned = [(off, k) for off, k, _ in records if off < cleaned_end]
    assert len({k for _, k in cleaned}) == len(cleaned)
    for off, k in cleaned:
        assert latest_sealed[k] == off
    # offsets only ever increase, and the active segment was not touched
    offs = [o for o, _, _ in records]
    assert offs == sorted(offs)
    assert [o for o, _, _ in history if o >= cleaned_end] == [o for o in offs if o >= cleaned_end]


ops_strategy = st.lists(
    st.lists(st.tuples(st.integers(0, len(KEYS) - 1),
                       st.one_of(st.none(), st.binary(min_size=0, max_size=30))),
             min_size=1, max_size=6),
    min_size=1, max_size=25)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops_strategy)
def test_compaction_matches_dict_model(ops):
    d = tempfile.mkdtemp()
    try:
        now = [10_000]
        log = PartitionLog(os.path.join(d, "c-0"), CFG, time_ms=lambda: now[0])
        history = _write(log, ops)
        clean_log(log, force=True)
        _check(log, history, tombstones_dropped=False)
        # after delete.retention.ms a second pass drops the tombstones it stamped
        now[0] += 2_000
        clean_log(log, force=True)
        _check(log, history, tombstones_dropped=True)
        # and it all survives a restart
        log.close()
        log = PartitionLog(os.path.join(d, "c-0"), CFG, time_ms=lambda: now[0])
        _check(log, history, tombstones_dropped=True)
        log.close()
    finally:
        shutil.rmtree(d)


def _build(tmp_path, name="c-0"):
    log = PartitionLog(str(tmp_path / name), CFG, time_ms=lambda: 10_000)
    ops = [[(i % 3, b"v%d" % i), ((i + 1) % 5, b"w%d" % i)] for i in range(30)]
    history = _write(log, ops)
    assert log.num_segments > 3
    return log, history


def test_compaction_shrinks_and_keeps_active_segment(tmp_path):
    log, history = _build(tmp_path)
    active_before = log.active_segment
    active_bytes = Path(active_before.log_path).read_bytes()
    before = log.size_bytes
    res = clean_log(log, force=True)
    assert res is not None and res.records_removed > 0 and log.size_bytes < before
    assert log.active_segment is active_before
    assert Path(active_before.log_path).read_bytes() == active_bytes
    _check(log, history, tombstones_dropped=False)
    assert not [n for n in os.listdir(log.directory) if n.endswith((".cleaned", ".swap", ".deleted"))]
    log.close()


@pytest.mark.parametrize("crash_at", ["cleaned", "swap", "deleted"])
def test_compaction_survives_crash_mid_swap(tmp_path, crash_at):
    log, history = _build(tmp_path)
    # one cleaning group spanning every sealed segment, so the swap replaces several
    big = CFG.with_values({"segment_bytes": 100_000})
    log.config = big
    with pytest.raises(SimulatedCrash):
        clean_log(log, force=True, crash_at=crash_at)
    leftovers = os.listdir(log.directory)
    if crash_at == "cleaned":
        assert any(n.endswith(".log.cleaned") for n in leftovers)
    else:
        assert any(n.endswith(".log.swap") for n in leftovers)
    # the process dies here: reopen from the files as they are (unclean)
    log2 = PartitionLog(log.directory, big, time_ms=lambda: 10_000)
    assert not [n for n in os.listdir(log2.directory)
                if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert log2.log_end_offset == history[-1][0] + 1
    # the swap under way is completed (.swap existed) or discarded (.cleaned) as a whole
    _check(log2, history, tombstones_dropped=False, compacted=crash_at != "cleaned")
    n_records = len(read_records(log2))
    assert (n_records == len(history)) == (crash_at == "cleaned")
    # every offset is still found through the rebuilt indexes
    for off, _k, _v in history:
        try:
            b = read_all(log2, start=off)[0]
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(off) from exc
        assert b.last_offset >= off
    # and a later pass completes the job
    log2.update_high_watermark(log2.log_end_offset)
    clean_log(log2, force=True)
    _check(log2, history, tombstones_dropped=False)
    log2.close()


def test_compacted_topic_requires_keys(tmp_path):
    log = PartitionLog(str(tmp_path / "c-0"), CFG)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(make_batch(2, keys=[b"k", None]), 0)
    log.close()
