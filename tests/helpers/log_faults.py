"""Damage done to a partition directory while its broker is stopped (issue 13's fault
matrix), shared by the storage unit test and the ``sparklog server`` integration test.

Each fault takes the partition directory (``<log dir>/<topic>-<partition>``), damages one
kind of file the way a disk, a crash or an operator might, and returns the ``Damage`` it did
in offsets, which is what a test may accept as lost or refused: everything else acknowledged
must be served. ``FAULTS`` names them; ``corrupt_recovery_point`` damages the log dir's
checkpoint (every partition in the dir) and is kept apart.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass

from sparklog.protocol.batch_header import BATCH_HEADER_SIZE, iter_batch_views
from sparklog.storage.checkpoints import RECOVERY_POINT_CHECKPOINT
from sparklog.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT
from sparklog.storage.producer_state import SNAPSHOT_SUFFIX

__all__ = ["FAULTS", "Damage", "corrupt_recovery_point", "flip", "garbage_tail",
           "last_batch_span", "segment_files"]


@dataclass
class Damage:
    """Offsets from ``lost_from`` on may be gone (truncated: the next append lands there);
    ``unserved`` = [lo, hi) may be refused (KAFKA_STORAGE_ERROR) or, where nothing checked
    it yet, served with the damaged bytes; None: nothing is lost."""

    lost_from: int | None = None
    unserved: tuple[int, int] | None = None


def segment_files(part: str, suffix: str) -> list[str]:
    """The partition's files ending in ``suffix``, oldest segment first."""
    return sorted(os.path.join(part, n) for n in os.listdir(part) if n.endswith(suffix))


def last_batch_span(part: str) -> tuple[str, int, int, int]:
    """(active segment file, position, size, base offset) of its last batch."""
    path = segment_files(part, ".log")[-1]
    with open(path, "rb") as f:
        data = f.read()
    pos, last = 0, None
    for v in iter_batch_views(data):
        last = (pos, v.size, v.base_offset)
        pos += v.size
    assert last is not None
    return (path, *last)


def flip(path: str, pos: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([b ^ 0x20]))


# ---------------------------------------------------------------- faults


def garbage_tail(part: str) -> Damage:
    with open(segment_files(part, ".log")[-1], "ab") as f:
        f.write(random.Random(1).randbytes(300))
    return Damage()


def zeroed_tail(part: str) -> Damage:
    with open(segment_files(part, ".log")[-1], "ab") as f:
        f.write(bytes(4096))  # preallocated space a crash leaves after the last write
    return Damage()


def truncated_last_batch(part: str) -> Damage:
    path, pos, size, base = last_batch_span(part)
    os.truncate(path, pos + size // 2)
    return Damage(lost_from=base)


def bit_flip_last_batch(part: str) -> Damage:
    path, pos, size, base = last_batch_span(part)
    flip(path, pos + BATCH_HEADER_SIZE + (size - BATCH_HEADER_SIZE) // 2)  # a record's bytes
    return Damage(lost_from=base)


def bit_flip_middle_segment(part: str) -> Damage:
    logs = segment_files(part, ".log")
    with open(logs[1], "rb") as f:
        views = list(iter_batch_views(f.read()))
    victim = views[len(views) // 2]
    pos = sum(v.size for v in views[: len(views) // 2])
    flip(logs[1], pos + BATCH_HEADER_SIZE + (victim.size - BATCH_HEADER_SIZE) // 2)
    next_base = int(os.path.basename(logs[2]).split(".")[0])
    return Damage(unserved=(victim.base_offset, next_base))


def _overwrite(suffix: str) -> Callable[[str], Damage]:
    def fault(part: str) -> Damage:
        rng = random.Random(suffix)
        files = segment_files(part, suffix)
        assert files
        for p in files:
            with open(p, "wb") as f:
                f.write(rng.randbytes(rng.randint(1, 60)))
        return Damage()
    fault.__name__ = f"corrupt{suffix.replace('.', '_')}"
    return fault


def _remove(suffix: str) -> Callable[[str], Damage]:
    def fault(part: str) -> Damage:
        files = segment_files(part, suffix)
        assert files
        for p in files:
            os.remove(p)
        return Damage()
    fault.__name__ = f"missing{suffix.replace('.', '_')}"
    return fault


def _garble(path_of: Callable[[str], str], remove: bool) -> Callable[[str], Damage]:
    def fault(part: str) -> Damage:
        path = path_of(part)
        assert os.path.exists(path)
        if remove:
            os.remove(path)
        else:
            with open(path, "wb") as f:
                f.write(b"0\n3\n7 zz\n\xff\xfe\n")
        return Damage()
    return fault


def _epoch_file(part: str) -> str:
    return os.path.join(part, LEADER_EPOCH_CHECKPOINT)


def _recovery_file(part: str) -> str:
    return os.path.join(os.path.dirname(part), RECOVERY_POINT_CHECKPOINT)


# the log dir's checkpoint: every partition in the dir is recovered from its start
corrupt_recovery_point = _garble(_recovery_file, remove=False)


FAULTS: dict[str, Callable[[str], Damage]] = {
    "garbage_tail": garbage_tail,
    "zeroed_tail": zeroed_tail,
    "truncated_last_batch": truncated_last_batch,
    "bit_flip_last_batch": bit_flip_last_batch,
    "bit_flip_middle_segment": bit_flip_middle_segment,
    "corrupt_index": _overwrite(".index"),
    "missing_index": _remove(".index"),
    "corrupt_timeindex": _overwrite(".timeindex"),
    "missing_timeindex": _remove(".timeindex"),
    "corrupt_leader_epochs": _garble(_epoch_file, remove=False),
    "missing_leader_epochs": _garble(_epoch_file, remove=True),
    "corrupt_producer_snapshots": _overwrite(SNAPSHOT_SUFFIX),
    "missing_producer_snapshots": _remove(SNAPSHOT_SUFFIX),
}
