"""``sparklog perf produce|consume``: load generators like Kafka's perf-test tools.

Both print a progress line every 5 s and a final summary: records/s, MB/s and latency
(avg, max, p50/p95/p99/p99.9 in ms). Producer latency is send -> acknowledgement, sampled
on a subset of records so that measuring does not dominate the cost; consumer latency is
end to end (receive time - record timestamp).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any

import numpy as np

from sparklog.cli.client_common import CliError, add_common, client_config, parse_kv, wrap

__all__ = ["add_parser", "summary_line"]

REPORT_INTERVAL_S = 5.0
MB = 1024 * 1024


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("perf", help="producer / consumer load tests",
                              description="Load tests (like kafka-producer-perf-test.sh and "
                                          "kafka-consumer-perf-test.sh).")
    sub = p.add_subparsers(dest="perf_action", metavar="ACTION")
    sub.required = True

    pp = sub.add_parser("produce", help="producer load test")
    add_common(pp)
    pp.add_argument("--topic", required=True)
    pp.add_argument("--num-records", type=int, required=True)
    pp.add_argument("--record-size", type=int, required=True)
    pp.add_argument("--throughput", type=float, default=-1,
                    help="max records/s (-1 = unthrottled)")
    pp.add_argument("--acks", default="1", choices=["all", "-1", "0", "1"])
    pp.add_argument("--compression", default="none",
                    choices=["none", "gzip", "snappy", "lz4", "zstd"])
    pp.add_argument("--producer-props", nargs="*", default=[], metavar="KEY=VALUE")
    pp.add_argument("--arrow", action="store_true",
                    help="use the bulk produce_arrow API (chunks of --arrow-chunk records)")
    pp.add_argument("--arrow-chunk", type=int, default=100_000)
    pp.set_defaults(func=wrap(_produce))

    pc = sub.add_parser("consume", help="consumer load test")
    add_common(pc)
    pc.add_argument("--topic", required=True)
    pc.add_argument("--messages", type=int, required=True)
    pc.add_argument("--timeout-ms", type=int, default=10000,
                    help="stop when no record arrived for this long")
    pc.add_argument("--per-record", action="store_true",
                    help="use Consumer.consume instead of the Arrow fetch path")
    pc.add_argument("--from-latest", action="store_true")
    pc.set_defaults(func=wrap(_consume))
    return p


class _Stats:
    def __init__(self, unit: str) -> None:
        self.unit = unit
        self.start = time.monotonic()
        self.window_start = self.start
        self.window_count = 0
        self.window_bytes = 0
        self.window_lat: list[float] = []
        self.lat: list[np.ndarray] = []

    def add_latencies(self, lat_ms: np.ndarray | list[float]) -> None:
        arr = np.asarray(lat_ms, dtype=np.float64)
        if len(arr):
            self.lat.append(arr)
            self.window_lat.extend(arr.tolist()[:10000])

    def window(self, count: int, nbytes: int, force: bool = False) -> None:
        self.window_count += count
        self.window_bytes += nbytes
        now = time.monotonic()
        if not force and now - self.window_start < REPORT_INTERVAL_S:
            return
        dt = max(now - self.window_start, 1e-9)
        lat = self.window_lat
        avg = sum(lat) / len(lat) if lat else 0.0
        mx = max(lat) if lat else 0.0
        print(f"{self.window_count} records {self.unit}, {self.window_count / dt:.1f} records/sec "
              f"({self.window_bytes / dt / MB:.2f} MB/sec), {avg:.1f} ms avg latency, "
              f"{mx:.1f} ms max latency.", flush=True)
        self.window_start, self.window_count, self.window_bytes, self.window_lat = now, 0, 0, []


def summary_line(count: int, nbytes: int, seconds: float, lat: np.ndarray, unit: str) -> str:
    seconds = max(seconds, 1e-9)
    if len(lat):
        p50, p95, p99, p999 = np.percentile(lat, [50, 95, 99, 99.9])
        avg, mx = float(lat.mean()), float(lat.max())
    else:
        p50 = p95 = p99 = p999 = avg = mx = 0.0
    return (f"{count} records {unit}, {count / seconds:.1f} records/sec "
            f"({nbytes / seconds / MB:.2f} MB/sec), {avg:.2f} ms avg latency, "
            f"{mx:.2f} ms max latency, {p50:.0f} ms 50th, {p95:.0f} ms 95th, "
            f"{p99:.0f} ms 99th, {p999:.0f} ms 99.9th.")


def _payload(size: int) -> bytes:
    rng = random.Random(42)
    return bytes(rng.randrange(65, 91) for _ in range(size))  # 'A'..'Z', as Kafka's tool


def _produce(args: argparse.Namespace) -> int:
    from sparklog.client import Producer

    if args.num_records <= 0 or args.record_size < 0:
        raise CliError("--num-records must be > 0 and --record-size >= 0")
    conf = client_config(args, **{"acks": args.acks, "compression.type": args.compression})
    conf.update(parse_kv(args.producer_props, "--producer-props"))
    producer = Producer(conf)
    payload = _payload(args.record_size)
    n, topic = args.num_records, args.topic
    stats = _Stats("sent")
    sample_every = max(1, n // 200_000)
    lat: list[float] = []

    def sampler(t0: float) -> Any:
        def cb(err: Any, _md: Any) -> None:
            if err is None:
                lat.append((time.monotonic() - t0) * 1000)
        return cb

    start = time.monotonic()
    acked_reported = 0
    lat_reported = 0
    try:
        if args.arrow:
            import pyarrow as pa

            chunk = max(1, args.arrow_chunk)
            col = pa.array([payload] * min(chunk, n), pa.binary())
            sent = 0
            while sent < n:
                k = min(chunk, n - sent)
                t0 = time.monotonic()
                producer.produce_arrow(topic, col if k == len(col) else col.slice(0, k))
                producer.produce(topic, payload, on_delivery=sampler(t0))  # latency probe
                sent += k + 1
                _throttle(args.throughput, sent, start)
                acked = sent - len(producer)
                stats.add_latencies(lat[lat_reported:])
                lat_reported = len(lat)
                stats.window(acked - acked_reported, (acked - acked_reported) * len(payload))
                acked_reported = acked
            n = sent
        else:
            produce = producer.produce
            for i in range(n):
                if i % sample_every == 0:
                    produce(topic, payload, on_delivery=sampler(time.monotonic()))
                else:
                    produce(topic, payload)
                if i & 1023 == 0:
                    _throttle(args.throughput, i, start)
                    acked = i + 1 - len(producer)
                    stats.add_latencies(lat[lat_reported:])
                    lat_reported = len(lat)
                    stats.window(acked - acked_reported, (acked - acked_reported) * len(payload))
                    acked_reported = acked
        left = producer.flush(max(60.0, n / 10_000))
    finally:
        producer.close(5)
    elapsed = time.monotonic() - start
    if left:
        raise CliError(f"{left} records were not acknowledged")
    stats.add_latencies(lat[lat_reported:])
    stats.window(n - acked_reported, (n - acked_reported) * len(payload), force=True)
    all_lat = np.concatenate(stats.lat) if stats.lat else np.zeros(0)
    print(summary_line(n, n * len(payload), elapsed, all_lat, "sent"), flush=True)
    return 0


def _throttle(rate: float, done: int, start: float) -> None:
    if rate is None or rate <= 0:
        return
    ahead = done / rate - (time.monotonic() - start)
    if ahead > 0:
        time.sleep(ahead)


def _consume(args: argparse.Namespace) -> int:
    from sparklog.client import AdminClient, Consumer, TopicPartition

    conf = client_config(args)
    with AdminClient(conf) as admin:
        md = admin.describe_topics([args.topic])[args.topic]
        tps = [TopicPartition(args.topic, p) for p in sorted(md.partitions)]
        spec = -1 if args.from_latest else -2
        pos = {tp: v[0] for tp, v in admin.list_offsets({tp: spec for tp in tps}).items()}
    consumer = Consumer(conf)
    stats = _Stats("received")
    total = nbytes = 0
    start = time.monotonic()
    last_data = start
    try:
        if args.per_record:
            consumer.assign([(tp.topic, tp.partition, pos[tp]) for tp in tps])
            while total < args.messages:
                recs = consumer.consume(min(500, args.messages - total), 0.5)
                now_ms = time.time() * 1000
                if not recs:
                    if (time.monotonic() - last_data) * 1000 > args.timeout_ms:
                        break
                    continue
                last_data = time.monotonic()
                b = sum(len(r.value or b"") + len(r.key or b"") for r in recs)
                stats.add_latencies([now_ms - r.timestamp for r in recs])
                total += len(recs)
                nbytes += b
                stats.window(len(recs), b)
        else:
            idle_rounds = 0
            while total < args.messages:
                got = 0
                for tp in tps:
                    if total >= args.messages:
                        break
                    batch = consumer.fetch_arrow(tp, pos[tp], max_bytes=8 * MB,
                                                 include_headers=False,
                                                 timeout_ms=args.timeout_ms)
                    k = batch.num_rows
                    if not k:
                        nxt = int((batch.schema.metadata or {}).get(b"next_offset", pos[tp]))
                        pos[tp] = max(pos[tp], nxt)
                        continue
                    k = min(k, args.messages - total)
                    batch = batch.slice(0, k)
                    now_ms = time.time() * 1000
                    ts = batch.column("timestamp").cast("int64").to_numpy()
                    stats.add_latencies(now_ms - ts)
                    b = (batch.column("value").nbytes + batch.column("key").nbytes)
                    pos[tp] = int(batch.column("offset")[k - 1].as_py()) + 1
                    total += k
                    nbytes += b
                    got += k
                    stats.window(k, b)
                if got:
                    last_data = time.monotonic()
                    idle_rounds = 0
                else:
                    idle_rounds += 1
                    if (time.monotonic() - last_data) * 1000 > args.timeout_ms:
                        break
    finally:
        consumer.close()
    elapsed = time.monotonic() - start
    stats.window(0, 0, force=True)
    all_lat = np.concatenate(stats.lat) if stats.lat else np.zeros(0)
    print(summary_line(total, nbytes, elapsed, all_lat, "received"), flush=True)
    if total < args.messages:
        print(f"WARNING: only {total} of {args.messages} records arrived within "
              f"--timeout-ms {args.timeout_ms}", file=sys.stderr)
    return 0
