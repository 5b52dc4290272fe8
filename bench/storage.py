"""Storage benchmark: PartitionLog append/read vs raw sequential write()/read() of the same bytes.

Appends ``--size`` MiB (default 1024) as ~100 KiB batches (1 000 x 100 B records) and as
~1 MiB batches into a PartitionLog, and writes the same bytes with plain ``os.write`` to a
file; then reads both back (``read()`` + ``FileSlice.read_into()`` vs sequential ``os.readv`` in
1 MiB steps). Page cache only, no fsync on either side (Kafka's default). Prints MiB/s per
run (each timed run starts after ``os.sync()`` so it does not pay for the previous run's
writeback), the median of ``--reps`` runs and the ratio log/raw (target >= 0.8), then index-lookup
latency on the ~10 M-offset log the 100 KiB run produced.

    .venv/bin/python bench/storage.py [--size 1024] [--reps 4] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from sparklog.protocol.batch_header import ATTRIBUTES_OFFSET  # noqa: E402
from sparklog.protocol.records import Record, encode_batch  # noqa: E402
from sparklog.storage import LogConfig, PartitionLog  # noqa: E402

MiB = 1 << 20
READ_STEP = MiB


def make_batch(n_records: int, value_size: int = 100) -> bytes:
    rng = random.Random(n_records)
    recs = [Record(key=None, value=rng.randbytes(value_size), timestamp=1_700_000_000_000 + i)
            for i in range(n_records)]
    return encode_batch(recs)


def raw_write(path: str, batch: bytes, count: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    for _ in range(count):
        os.write(fd, batch)
    dt = time.perf_counter() - t0
    os.close(fd)
    return dt


def raw_write_crc(path: str, batch: bytes, count: int) -> float:
    """The floor for a broker that must validate: CRC-32C of each batch, then write()."""
    from crc32c import crc32c

    mv = memoryview(batch)[ATTRIBUTES_OFFSET:]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    for _ in range(count):
        crc32c(mv)
        os.write(fd, batch)
    dt = time.perf_counter() - t0
    os.close(fd)
    return dt


def log_append(d: str, batch: bytes, count: int) -> tuple[float, PartitionLog]:
    cfg = LogConfig(max_message_bytes=4 * MiB, message_timestamp_after_max_ms=2**62)
    log = PartitionLog(d, cfg)
    t0 = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(batch, 0)
    dt = time.perf_counter() - t0
    return dt, log


def raw_read(path: str) -> tuple[float, int]:
    fd = os.open(path, os.O_RDONLY)
    buf = bytearray(READ_STEP)
    total = 0
    t0 = time.perf_counter()
    while True:
        n = os.readv(fd, [buf])
        if n <= 0:
            break
        total += n
    dt = time.perf_counter() - t0
    os.close(fd)
    return dt, total


def log_read(log: PartitionLog, max_batch: int) -> tuple[float, int]:
    """Fetch-style reads of READ_STEP bytes, copied into one reused buffer (the broker would
    sendfile the slices instead; the raw side reads into a reused buffer too)."""
    total = 0
    off = 0
    leo = log.log_end_offset
    buf = bytearray(max(READ_STEP, max_batch))
    t0 = time.perf_counter()
    while off < leo:
        info = log.read(off, READ_STEP)
        pos = 0
        for s in info.slices:
            pos += s.read_into(buf, pos)
        total += pos
        off = info.next_offset
    dt = time.perf_counter() - t0
    return dt, total


def index_lookups(log: PartitionLog, n: int = 20_000) -> tuple[float, float]:
    rng = random.Random(1)
    leo = log.log_end_offset
    offs = [rng.randrange(leo) for _ in range(n)]
    seg = log.segments[-1]
    t0 = time.perf_counter()
    for o in offs:
        seg.offset_index.lookup(o)
    idx_us = (time.perf_counter() - t0) / n * 1e6
    t0 = time.perf_counter()
    for o in offs:
        log.read(o, 1)
    read_us = (time.perf_counter() - t0) / n * 1e6
    return idx_us, read_us


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1024, help="MiB per run (default 1024)")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--dir", default=None, help="scratch directory (default: system temp)")
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="sparklog-bench-", dir=args.dir)
    print(f"scratch {scratch}, {args.size} MiB per run, {args.reps} reps, page cache, no fsync")
    results = {}
    best = {}
    floor = {}
    lookup = None
    try:
        for label, n_records in (("100KiB batches (1000 x 100 B)", 1000),
                                 ("1MiB batches (~10 000 x 100 B)", 10_000)):
            batch = make_batch(n_records)
            count = max(1, args.size * MiB // len(batch))
            if n_records == 1000:
                # --size 1024 gives exactly 10 M offsets for the index-lookup figure
                count = max(1, args.size * 10_000 // 1024)
            mib = count * len(batch) / MiB
            rw, la, rr, lr, rc = [], [], [], [], []
            for rep in range(args.reps):
                raw_path = os.path.join(scratch, "raw.bin")
                log_dir = os.path.join(scratch, f"bench-{rep}")
                order = ("raw", "log") if rep % 2 == 0 else ("log", "raw")
                for which in order:
                    # each side writes, reads back and deletes its file alone, starting
                    # after os.sync(), so neither pays for the other's writeback or cache
                    os.sync()
                    if which == "raw":
                        rw.append(mib / raw_write(raw_path, batch, count))
                        os.sync()
                        rc.append(mib / raw_write_crc(raw_path, batch, count))
                        dt, n = raw_read(raw_path)
                        assert n == count * len(batch)
                        rr.append(mib / dt)
                        os.remove(raw_path)
                    else:
                        dt, log = log_append(log_dir, batch, count)
                        la.append(mib / dt)
                        dt, n = log_read(log, len(batch))
                        assert n == count * len(batch), (n, count * len(batch))
                        lr.append(mib / dt)
                        if n_records == 1000 and rep == args.reps - 1:
                            lookup = (log.log_end_offset, log.num_segments, *index_lookups(log))
                        log.close()
                        shutil.rmtree(log_dir)
                print(f"  {label} rep {rep} ({order[0]} first): write raw {rw[-1]:7.0f} log "
                      f"{la[-1]:7.0f} MiB/s | read raw {rr[-1]:7.0f} log {lr[-1]:7.0f} MiB/s",
                      flush=True)
            best[label] = [max(x) for x in (rw, la, rr, lr)]
            floor[label] = (statistics.median(rc), max(rc))
            results[label] = [statistics.median(x) for x in (rw, la, rr, lr)]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print()
    print(f"{'medians (MiB/s)':34} {'raw write':>10} {'log append':>11} {'ratio':>6} "
          f"{'raw read':>9} {'log read':>9} {'ratio':>6}")
    for label, (rw, la, rr, lr) in results.items():
        print(f"{label:34} {rw:10.0f} {la:11.0f} {la / rw:6.2f} {rr:9.0f} {lr:9.0f} {lr / rr:6.2f}")
    print("best of reps (interference only slows a run down)")
    for label, (rw, la, rr, lr) in best.items():
        print(f"{label:34} {rw:10.0f} {la:11.0f} {la / rw:6.2f} {rr:9.0f} {lr:9.0f} {lr / rr:6.2f}")
    print("validation floor: raw write() + CRC-32C of each batch (what any validating broker pays)")
    for label, (med, top) in floor.items():
        la_med, la_best = results[label][1], best[label][1]
        print(f"{label:34} median {med:6.0f} MiB/s (log/floor {la_med / med:.2f}), "
              f"best {top:6.0f} MiB/s (log/floor {la_best / top:.2f})")
    if lookup:
        leo, nseg, idx_us, read_us = lookup
        print(f"\nindex lookups over {leo:,} offsets ({nseg} segment(s)): "
              f"OffsetIndex.lookup {idx_us:.2f} us, PartitionLog.read(offset, 1) {read_us:.1f} us")
    print("target: append >= 0.8x raw, read >= 0.8x raw")


if __name__ == "__main__":
    main()
