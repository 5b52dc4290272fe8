"""``sparklog perf produce|consume``: load generators like Kafka's perf-test tools.

``perf produce`` prints what kafka-producer-perf-test.sh prints: a progress line every 5 s
and a final summary of records/s, MB/s and latency (avg, max, p50/p95/p99/p99.9 in ms), the
latency being send -> acknowledgement, sampled on a subset of records so that measuring does
not dominate the cost.

``perf consume`` prints what kafka-consumer-perf-test.sh prints: a header naming every
column and one line of results (``--show-detailed-stats``: one line per reporting interval
instead, and no summary, so each figure appears once). Records are read by direct partition
assignment, so ``rebalance.time.ms`` is 0 and ``fetch.time.ms`` is the whole run.
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from sparklog.cli.arguments import action_parsers, add_flags, key_value, topic_name
from sparklog.cli.client_common import add_client_command, client_config
from sparklog.cli.errors import CliError, UsageError, warn

__all__ = ["add_parser", "summary_line", "CONSUMER_COLUMNS", "CONSUMER_DETAILED_COLUMNS"]

REPORT_INTERVAL_S = 5.0
MB = 1024 * 1024
# kafka-consumer-perf-test.sh's columns, in its order
_CONSUMER_RATES = ["data.consumed.in.MB", "MB.sec", "data.consumed.in.nMsg", "nMsg.sec",
                   "rebalance.time.ms", "fetch.time.ms", "fetch.MB.sec", "fetch.nMsg.sec"]
CONSUMER_COLUMNS = ["start.time", "end.time", *_CONSUMER_RATES]
CONSUMER_DETAILED_COLUMNS = ["time", "threadId", *_CONSUMER_RATES]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p, sub = action_parsers(subparsers, "perf", help="producer / consumer load tests",
                           description="Load tests (like kafka-producer-perf-test.sh and "
                                        "kafka-consumer-perf-test.sh).")

    pp = add_client_command(sub, _produce, "produce", help="producer load test")
    pp.add_argument("--topic", required=True, type=topic_name, help="topic to write to")
    pp.add_argument("--num-records", type=int, required=True, help="records to send")
    pp.add_argument("--record-size", type=int, required=True, help="bytes per record value")
    pp.add_argument("--throughput", type=float, default=-1,
                    help="max records/s (-1 = unthrottled)")
    pp.add_argument("--acks", default="1", choices=["all", "-1", "0", "1"],
                    help="acknowledgements to wait for (default 1: the leader's)")
    pp.add_argument("--compression", default="none",
                    choices=["none", "gzip", "snappy", "lz4", "zstd"],
                    help="compression codec of the batches (default none)")
    pp.add_argument("--producer-props", nargs="*", default=[], type=key_value,
                    metavar="KEY=VALUE", help="producer config (Kafka key names)")
    pp.add_argument("--arrow", action="store_true",
                    help="use the bulk produce_arrow API (chunks of --arrow-chunk records)")
    pp.add_argument("--arrow-chunk", type=int, default=100_000,
                    help="records per produce_arrow call with --arrow (default 100000)")

    pc = add_client_command(sub, _consume, "consume", help="consumer load test")
    pc.add_argument("--topic", required=True, type=topic_name, help="topic to read")
    pc.add_argument("--messages", type=int, required=True, help="records to read")
    pc.add_argument("--timeout-ms", "--timeout", type=int, default=10000, dest="timeout_ms",
                    help="stop when no record arrived for this long (default 10000)")
    add_flags(pc, {
        "--per-record": "use Consumer.consume instead of the Arrow fetch path",
        "--from-latest": "start at the log end instead of the log start",
        "--show-detailed-stats": "one line per --reporting-interval instead of one summary",
    })
    pc.add_argument("--reporting-interval", type=int, default=5000, metavar="MS",
                    help="interval of the detailed stats (default 5000)")
    pc.add_argument("--hide-header", action="store_true", help="print no column header")
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

    def window(self, count: int, nbytes: int) -> None:
        self.window_count += count
        self.window_bytes += nbytes
        now = time.monotonic()
        if now - self.window_start < REPORT_INTERVAL_S:
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
        raise UsageError("--num-records must be > 0 and --record-size >= 0")
    conf = client_config(args, **{"acks": args.acks, "compression.type": args.compression})
    conf.update(args.producer_props)
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
    all_lat = np.concatenate(stats.lat) if stats.lat else np.zeros(0)
    print(summary_line(n, n * len(payload), elapsed, all_lat, "sent"), flush=True)
    return 0


def _throttle(rate: float, done: int, start: float) -> None:
    if rate is None or rate <= 0:
        return
    ahead = done / rate - (time.monotonic() - start)
    if ahead > 0:
        time.sleep(ahead)


@dataclass
class _ConsumerStats:
    """kafka-consumer-perf-test.sh's figures: totals since the start, rates over the run (or,
    for detailed stats, over the last interval)."""

    start_wall: float  # time.time() of the start, for the printed dates
    start: float  # time.monotonic() of the start
    messages: int = 0
    nbytes: int = 0
    last_report: float = 0.0
    last_messages: int = 0
    last_bytes: int = 0

    def add(self, messages: int, nbytes: int) -> None:
        self.messages += messages
        self.nbytes += nbytes

    def _rates(self, seconds: float, messages: int, nbytes: int) -> str:
        secs = max(seconds, 1e-9)
        mb = nbytes / MB
        return (f"{self.nbytes / MB:.4f}, {mb / secs:.4f}, {self.messages}, "
                f"{messages / secs:.4f}, 0, {seconds * 1000:.0f}, {mb / secs:.4f}, "
                f"{messages / secs:.4f}")

    def detailed_line(self, now: float) -> str:
        """The interval since the last line: ``time, threadId, ...``."""
        begin = self.last_report or self.start
        line = (f"{_date(self.start_wall + now - self.start)}, 0, "
                + self._rates(now - begin, self.messages - self.last_messages,
                              self.nbytes - self.last_bytes))
        self.last_report, self.last_messages, self.last_bytes = now, self.messages, self.nbytes
        return line

    def summary(self, end: float) -> str:
        """The whole run: ``start.time, end.time, ...``."""
        return (f"{_date(self.start_wall)}, {_date(self.start_wall + end - self.start)}, "
                + self._rates(end - self.start, self.messages, self.nbytes))


def _date(epoch_s: float) -> str:
    """Kafka's perf-test date format, yyyy-MM-dd HH:mm:ss:SSS (local time)."""
    t = datetime.fromtimestamp(epoch_s)
    return t.strftime("%Y-%m-%d %H:%M:%S:") + f"{t.microsecond // 1000:03d}"


def _consume(args: argparse.Namespace) -> int:
    from sparklog.client import AdminClient, ArrowFetcher, Consumer, TopicPartition

    if args.messages <= 0:
        raise UsageError("--messages must be > 0")
    conf = client_config(args)
    with AdminClient(conf) as admin:
        md = admin.describe_topics([args.topic])[args.topic]
        tps = [TopicPartition(args.topic, p) for p in sorted(md.partitions)]
        spec = -1 if args.from_latest else -2
        pos = {tp: v[0] for tp, v in admin.list_offsets({tp: spec for tp in tps}).items()}
    if not args.hide_header:
        print(", ".join(CONSUMER_DETAILED_COLUMNS if args.show_detailed_stats
                        else CONSUMER_COLUMNS), flush=True)
    stats = _ConsumerStats(time.time(), time.monotonic())
    interval = args.reporting_interval / 1000

    def got(messages: int, nbytes: int) -> None:
        stats.add(messages, nbytes)
        now = time.monotonic()
        if args.show_detailed_stats and now - (stats.last_report or stats.start) >= interval:
            print(stats.detailed_line(now), flush=True)

    client = Consumer(conf) if args.per_record else ArrowFetcher(conf)
    last_data = stats.start
    try:
        if isinstance(client, Consumer):
            client.assign([(tp.topic, tp.partition, pos[tp]) for tp in tps])
            while stats.messages < args.messages:
                recs = client.consume(min(500, args.messages - stats.messages), 0.5)
                if not recs:
                    if (time.monotonic() - last_data) * 1000 > args.timeout_ms:
                        break
                    continue
                last_data = time.monotonic()
                got(len(recs), sum(len(r.value or b"") + len(r.key or b"") for r in recs))
        else:
            while stats.messages < args.messages:
                before = stats.messages
                for tp in tps:
                    if stats.messages >= args.messages:
                        break
                    fetched = client.fetch(tp, pos[tp], max_bytes=8 * MB, include_headers=False,
                                           timeout_ms=args.timeout_ms)
                    batch = fetched.batch
                    k = batch.num_rows
                    if not k:
                        pos[tp] = max(pos[tp], fetched.next_offset)
                        continue
                    k = min(k, args.messages - stats.messages)
                    batch = batch.slice(0, k)
                    pos[tp] = int(batch.column("offset")[k - 1].as_py()) + 1
                    got(k, batch.column("value").nbytes + batch.column("key").nbytes)
                if stats.messages > before:
                    last_data = time.monotonic()
                elif (time.monotonic() - last_data) * 1000 > args.timeout_ms:
                    break
    finally:
        client.close()
    # the run ends with its last record: an idle --timeout-ms at the end is not reading time
    end = last_data if stats.messages else time.monotonic()
    if args.show_detailed_stats:
        if stats.messages > stats.last_messages:
            print(stats.detailed_line(end), flush=True)
    else:
        print(stats.summary(end), flush=True)
    if stats.messages < args.messages:
        warn(f"Exiting before consuming the expected number of messages: only "
             f"{stats.messages} of {args.messages} arrived, and none for --timeout-ms "
             f"{args.timeout_ms}")
    return 0
