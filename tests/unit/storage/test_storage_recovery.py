"""Recovery after an unclean shutdown, seeded: torn tails at every byte of the last batch,
single flipped bytes, junk appended to indexes. Exactly the batches before the damage must
survive, indexes must be rebuilt, and appends must continue at the right offset."""

from __future__ import annotations

import os
import random
import shutil

import pytest

from sparklog.protocol.batch_header import iter_batch_views
from sparklog.storage import LogConfig, PartitionLog
from tests.helpers.batches import make_batch

CFG = LogConfig(segment_bytes=350, index_interval_bytes=100)
N_BATCHES = 9


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """A closed log of N_BATCHES batches over several segments, plus the batch bytes."""
    root = tmp_path_factory.mktemp("orig")
    d = str(root / "t-0")
    log = PartitionLog(d, CFG)
    rng = random.Random(7)
    for i in range(N_BATCHES):
        log.append_as_leader(make_batch(rng.randint(1, 4), ts=1000 + i * 10,
                                        value_size=rng.randint(5, 60)), 1)
    assert log.num_segments >= 3
    batches = [bytes(v.raw()) for v in iter_batch_views(log.read(0, 1 << 20).read_bytes())]
    last_seg = log.segments[-1].log_path
    log.close()
    assert len(batches) == N_BATCHES
    return d, batches, os.path.basename(last_seg)


def _copy(original, tmp_path, name):
    d, batches, last_seg = original
    dst = str(tmp_path / name / "t-0")
    shutil.copytree(d, dst)
    return dst, batches, os.path.join(dst, last_seg)


def _check_survivors(d, batches, survivors, clean=False):
    log = PartitionLog(d, CFG, recovery_point=0 if not clean else 10**9, clean_shutdown=clean)
    try:
        expect = batches[:survivors]
        leo = (next(iter_batch_views(expect[-1])).next_offset) if expect else 0
        assert log.log_end_offset == leo
        got = [bytes(v.raw()) for v in iter_batch_views(log.read(0, 1 << 20).read_bytes())] if leo else []
        assert got == expect
        # indexes rebuilt: every offset is found through them
        for o in range(leo):
            v = next(iter_batch_views(log.read(o, 1).read_bytes()))
            assert v.base_offset <= o <= v.last_offset
        for seg in log.segments:
            assert seg.offset_index.entries == 0 or seg.offset_index.entry(-1)[1] < seg.size
        info = log.append_as_leader(make_batch(2, ts=5000), 1)
        assert info.first_offset == leo
        assert next(iter_batch_views(log.read(leo, 1000).read_bytes())).base_offset == leo
    finally:
        log.close()
    # and the repaired files reopen cleanly with the same content
    log = PartitionLog(d, CFG, recovery_point=0)
    assert log.log_end_offset == leo + 2
    log.close()


def _last_batch_span(path, batches):
    size = os.path.getsize(path)
    return size - len(batches[-1]), size


def test_truncate_at_every_byte_of_last_batch(original, tmp_path):
    d0, batches, last0 = original
    start, end = _last_batch_span(os.path.join(d0, last0), batches)
    assert end - start > 60
    for cut in range(start, end):
        d, _, last = _copy(original, tmp_path, f"cut{cut}")
        os.truncate(last, cut)
        _check_survivors(d, batches, N_BATCHES - 1)
        shutil.rmtree(os.path.dirname(d))


# partitionLeaderEpoch (12..15) and baseOffset (0..7) lie outside the CRC in Kafka's format;
# a flipped baseOffset is caught only when it breaks offset order, so those bytes are not drawn
_UNPROTECTED = set(range(0, 8)) | set(range(12, 16))


def test_flip_one_random_byte_in_last_batch(original, tmp_path):
    d0, batches, last0 = original
    start, end = _last_batch_span(os.path.join(d0, last0), batches)
    rng = random.Random(2024)
    positions = [p for p in range(start, end) if p - start not in _UNPROTECTED]
    for case in range(100):
        d, _, last = _copy(original, tmp_path, f"flip{case}")
        pos = rng.choice(positions)
        with open(last, "r+b") as f:
            f.seek(pos)
            b = f.read(1)[0]
            f.seek(pos)
            f.write(bytes([b ^ (1 << rng.randrange(8))]))
        _check_survivors(d, batches, N_BATCHES - 1)
        shutil.rmtree(os.path.dirname(d))


@pytest.mark.parametrize("clean", [False, True])
def test_junk_appended_to_indexes(original, tmp_path, clean):
    d0, batches, _ = original
    rng = random.Random(99 + clean)
    for case in range(25):
        d, _, _ = _copy(original, tmp_path, f"junk{case}")
        idx = sorted(n for n in os.listdir(d) if n.endswith((".index", ".timeindex")))
        for name in rng.sample(idx, k=rng.randint(1, len(idx))):
            with open(os.path.join(d, name), "ab") as f:
                f.write(rng.randbytes(rng.randint(1, 40)))
        _check_survivors(d, batches, N_BATCHES, clean=clean)
        shutil.rmtree(os.path.dirname(d))


def test_corrupt_sealed_segment_is_reported_not_served(original, tmp_path):
    d, batches, _ = _copy(original, tmp_path, "sealed")
    first_seg = os.path.join(d, "00000000000000000000.log")
    size = os.path.getsize(first_seg)
    with open(first_seg, "r+b") as f:
        f.seek(size - 3)
        f.write(b"\xff\xff\xff")
    log = PartitionLog(d, CFG)
    try:
        ranges = log.corrupt_ranges
        assert len(ranges) == 1
        lo, hi = ranges[0]
        assert log.log_end_offset == next(iter_batch_views(batches[-1])).next_offset
        from sparklog.protocol.errors import KafkaStorageError
        with pytest.raises(KafkaStorageError):
            log.read(lo, 1000)
        # data before the bad batch and after the segment are still served
        if lo > 0:
            assert log.read(0, 1 << 20).next_offset <= lo
        assert next(iter_batch_views(log.read(hi, 1000).read_bytes())).base_offset == hi
    finally:
        log.close()


def test_scrub_finds_bit_rot_below_the_recovery_point(original, tmp_path):
    """A sealed, flushed segment is trusted on a clean start; the scrub still catches a
    flipped byte and the range is refused instead of served."""
    from sparklog.protocol.errors import KafkaStorageError

    d, batches, _ = _copy(original, tmp_path, "scrub")
    seg0 = os.path.join(d, "00000000000000000000.log")
    with open(seg0, "r+b") as f:
        f.seek(40)  # inside the first batch, CRC-covered
        b = f.read(1)[0]
        f.seek(40)
        f.write(bytes([b ^ 0x10]))
    log = PartitionLog(d, CFG, recovery_point=10**9, clean_shutdown=True)
    try:
        assert log.corrupt_ranges == []
        ranges = log.verify_segments()
        second_base = log.segments[1].base_offset
        assert ranges == [(0, second_base)]
        with pytest.raises(KafkaStorageError):
            log.read(0, 1000)
        # the later segments are still served
        info = log.read(second_base, 1 << 20)
        assert next(iter_batch_views(info.read_bytes())).base_offset == second_base
    finally:
        log.close()
