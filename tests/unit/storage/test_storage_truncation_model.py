"""Seeded random appends, follower truncations, rolls and reopens against a list model:
after every step the log holds exactly the model's batches and every offset is findable."""

from __future__ import annotations

import random

from sparklog.protocol.batch_header import iter_batch_views
from sparklog.storage import LogConfig, PartitionLog
from tests.helpers.batches import make_batch

CFG = LogConfig(segment_bytes=400, index_interval_bytes=90)


def _batches(log):
    if log.log_end_offset == log.log_start_offset:
        return []
    return [(v.base_offset, v.last_offset) for v in
            iter_batch_views(log.read(log.log_start_offset, 1 << 24).read_bytes())]


def test_random_appends_truncations_reopens(tmp_path):
    rng = random.Random(1234)
    d = str(tmp_path / "m-0")
    log = PartitionLog(d, CFG)
    model: list[tuple[int, int]] = []
    for step in range(250):
        op = rng.random()
        if op < 0.6:
            n = rng.randint(1, 5)
            info = log.append_as_leader(make_batch(n, value_size=rng.randint(1, 50)), 0)
            assert info.first_offset == (model[-1][1] + 1 if model else 0)
            model.append((info.first_offset, info.last_offset))
        elif op < 0.8 and model:
            # followers truncate at batch boundaries (the leader's epoch end offsets)
            cut = rng.randrange(len(model) + 1)
            target = model[cut][0] if cut < len(model) else model[-1][1] + 1
            log.truncate_to(target)
            del model[cut:]
        elif op < 0.9:
            log.roll()
        else:
            log.close()
            log = PartitionLog(d, CFG, recovery_point=0 if rng.random() < 0.5 else 10**9,
                               clean_shutdown=rng.random() < 0.5)
        assert _batches(log) == model, step
        assert log.log_end_offset == (model[-1][1] + 1 if model else 0)
        if model and step % 10 == 0:
            for base, last in model:
                o = rng.randint(base, last)
                v = next(iter_batch_views(log.read(o, 1).read_bytes()))
                assert (v.base_offset, v.last_offset) == (base, last)
    log.close()
