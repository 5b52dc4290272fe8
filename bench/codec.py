"""Record-batch codec throughput: encode and decode, per codec, per-record vs Arrow path.

    .venv/bin/python bench/codec.py [--records 20000] [--batch 1000] [--budget 0.25]

For 100 B and 1 KiB values (16 B keys, JSON-like text, timestamps 1 ms apart) and each codec,
measures on the same buffer in the same run:

- encode: ``records.encode_batch`` from Record objects (per-record Python);
- decode, per-record: ``records.decode_batches`` (one Record object per record);
- decode, Arrow: ``record_arrow.decode_batches_to_arrow`` (vectorised, whole buffer -> one
  pyarrow.RecordBatch with key/value/offset/timestamp/timestampType/headers);
- baselines: crc32c over the uncompressed buffer, and a plain ``bytes`` copy of it.

Plus one "variable" row: 100 B +- 40 % values (no two neighbours alike), which defeats the
equal-size-run fast path and shows the general path.

Figures are records/s and MiB/s of *uncompressed* batch bytes. Each figure is the best of
repeated runs within ``--budget`` seconds, timed by CPU time of this process (the machine is
shared; wall-clock figures are printed too). Ratios: Arrow vs per-record decode, and each
decode vs the crc32c / memcpy floor. Runtime is bounded: about 30-60 s with the defaults.

Issue target: Arrow decode >= 2 M records/s for 100 B uncompressed records and >= 8x the
per-record path.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crc32c import crc32c  # noqa: E402

from sparklog.protocol import record_arrow  # noqa: E402
from sparklog.protocol.batch_header import Compression  # noqa: E402
from sparklog.protocol.records import Record, decode_batches, encode_batch  # noqa: E402

MiB = float(1 << 20)


def make_records(n: int, value_size: int, variable: bool, seed: int = 1) -> list[Record]:
    rng = random.Random(seed)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"kafka", b"spark", b"log", b"0123"]
    out = []
    for i in range(n):
        size = value_size
        if variable:
            size = max(1, int(value_size * rng.uniform(0.6, 1.4)))
        body = bytearray(b'{"id":%d,"v":"' % i)
        while len(body) < size - 2:
            body += rng.choice(words)
        value = bytes(body[: size - 2]) + b'"}'
        out.append(Record(b"key-%012d" % (i % 100_000), value, [], 1_700_000_000_000 + i))
    return out


def timed(fn: Callable[[], object], budget: float) -> tuple[float, float]:
    """Best (cpu, wall) seconds of repeated calls within ``budget`` CPU seconds."""
    best_cpu = best_wall = float("inf")
    spent = 0.0
    runs = 0
    while runs < 2 or (spent < budget and runs < 50):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        c1, w1 = time.process_time(), time.perf_counter()
        best_cpu = min(best_cpu, c1 - c0)
        best_wall = min(best_wall, w1 - w0)
        spent += c1 - c0
        runs += 1
    return max(best_cpu, 1e-9), max(best_wall, 1e-9)


def encode_all(records: list[Record], batch: int, codec: Compression) -> bytes:
    return b"".join(
        encode_batch(records[i : i + batch], base_offset=i, compression=codec)
        for i in range(0, len(records), batch)
    )


def row(label: str, n: int, nbytes: int, t: tuple[float, float], extra: str = "") -> str:
    cpu, wall = t
    return (f"  {label:<22} {n / cpu / 1e6:7.2f} M rec/s {nbytes / cpu / MiB:8.0f} MiB/s"
            f"   (wall {n / wall / 1e6:6.2f} M rec/s){extra}")


def bench_case(
    title: str, records: list[Record], batch: int, budget: float, codecs: list[Compression]
) -> dict[str, float]:
    n = len(records)
    plain = encode_all(records, batch, Compression.NONE)
    size = len(plain)
    print(f"\n== {title}: {n} records in batches of {batch}, {size / MiB:.2f} MiB uncompressed")
    t_crc = timed(lambda: crc32c(plain), budget)
    t_copy = timed(lambda: memoryview(plain).tobytes(), budget)  # one memcpy
    print(row("crc32c (floor)", n, size, t_crc))
    print(row("bytes copy (floor)", n, size, t_copy))
    summary: dict[str, float] = {}
    for codec in codecs:
        buf = encode_all(records, batch, codec)
        # correctness guard: both paths agree before anything is timed
        rb = record_arrow.decode_batches_to_arrow(buf)
        assert rb.num_rows == n
        assert rb.column("value").to_pylist()[:: max(1, n // 97)] == [
            r.value for r in records[:: max(1, n // 97)]
        ]
        t_enc = timed(lambda buf_codec=codec: encode_all(records, batch, buf_codec), budget)
        t_rec = timed(lambda b=buf: decode_batches(b), budget)
        t_arw = timed(lambda b=buf: record_arrow.decode_batches_to_arrow(b), budget)
        ratio = t_rec[0] / t_arw[0]
        print(f" {codec.name.lower()} (wire {len(buf) / MiB:.2f} MiB, ratio {size / len(buf):.1f}x)")
        print(row("encode (per-record)", n, size, t_enc))
        print(row("decode per-record", n, size, t_rec))
        print(row("decode Arrow", n, size, t_arw,
                  f"   = {ratio:.1f}x per-record, {t_arw[0] / t_crc[0]:.0f}x crc32c time,"
                  f" {t_arw[0] / t_copy[0]:.0f}x copy time"))
        summary[f"{codec.name.lower()}_arrow_mrec_s"] = n / t_arw[0] / 1e6
        summary[f"{codec.name.lower()}_ratio"] = ratio
        summary[f"{codec.name.lower()}_per_record_us"] = t_rec[0] / n * 1e6
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=1000, help="records per batch")
    ap.add_argument("--budget", type=float, default=0.25, help="CPU seconds per figure")
    args = ap.parse_args()
    t0 = time.perf_counter()
    codecs = list(Compression)
    s100 = bench_case("100 B values", make_records(args.records, 100, False), args.batch,
                      args.budget, codecs)
    bench_case("1 KiB values", make_records(max(2000, args.records // 8), 1024, False),
               args.batch, args.budget, codecs)
    svar = bench_case("100 B +-40 % values (variable sizes)",
                      make_records(args.records, 100, True), args.batch, args.budget,
                      [Compression.NONE])
    print("\n== target (issue 2): Arrow decode of 100 B uncompressed >= 2 M rec/s, >= 8x per-record")
    print(f"  fixed 100 B: {s100['none_arrow_mrec_s']:.2f} M rec/s, {s100['none_ratio']:.1f}x"
          f"   variable 100 B: {svar['none_arrow_mrec_s']:.2f} M rec/s, {svar['none_ratio']:.1f}x")
    print(f"  per-record decode in this run: {s100['none_per_record_us']:.1f} us/record"
          " (about 4 us on an idle 2-core machine: a higher figure"
          " here means the machine is loaded and every absolute figure is low by that factor)")
    print(f"  (total bench time {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
