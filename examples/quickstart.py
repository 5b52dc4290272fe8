"""sparklog quickstart: a streaming job from a Kafka-protocol log back into one, in one process.

What it does, end to end (about a minute on a laptop, most of it Spark starting up):

1. starts an embedded single-node sparklog broker (data in a temp dir, or --data-dir),
2. creates the topic ``events`` (3 partitions) and the topic ``event-counts``,
3. starts a Structured Streaming query:
   ``spark.readStream.format("sparklog")`` -> parse the JSON events -> count them per
   1-minute event-time window and action -> ``writeStream.format("sparklog")`` into
   ``event-counts`` (and a second query prints, per micro-batch, the events counted so far
   and the windows whose counts changed),
4. produces 100 000 events while the query runs (in 4 bursts, so you see micro-batches),
5. waits until the counts in ``event-counts`` add up to every event produced, reads that
   topic back with ``spark.read.format("sparklog")``, prints a summary, and exits 0.

Note that there is no ``spark.dataSource.register`` call: installing sparklog is enough for
``format("sparklog")`` (pyspark auto-registers the ``pyspark_sparklog`` package).

The queries' checkpoints, and the broker's data unless ``--data-dir`` is given, live in one
temporary directory that is removed when the job ends.

    python examples/quickstart.py [--data-dir ./sparklog-data] [--events 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

# Spark binds to loopback and runs its Python workers with this interpreter.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from _common import local_spark  # noqa: E402

from sparklog.client import AdminClient, NewTopic, Producer  # noqa: E402
from sparklog.cluster.embedded import EmbeddedCluster  # noqa: E402

EVENTS_TOPIC = "events"
COUNTS_TOPIC = "event-counts"
ACTIONS = ["view", "click", "buy"]
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: event time of the first event


def make_events(first: int, n: int, rng: np.random.Generator) -> tuple[pa.Array, pa.Array]:
    """JSON events spread over 10 minutes of event time (so 10 windows of 1 minute)."""
    idx = np.arange(first, first + n)
    ts = START_MS + idx * 6  # 100 000 events x 6 ms = 10 minutes
    users = rng.integers(0, 500, n)
    actions = rng.choice(len(ACTIONS), n, p=[0.7, 0.25, 0.05])
    values = [
        f'{{"user":"u{u}","action":"{ACTIONS[a]}","ts":{t}}}'.encode()
        for u, a, t in zip(users.tolist(), actions.tolist(), ts.tolist(), strict=True)
    ]
    keys = [b"u%d" % u for u in users.tolist()]
    return pa.array(values, pa.binary()), pa.array(keys, pa.binary())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", help="broker data directory (default: a temp dir)")
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds to wait for results")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="sparklog-quickstart-") as tmp:
        data_dir = args.data_dir or os.path.join(tmp, "data")
        return _run(args, data_dir, os.path.join(tmp, "checkpoints"))


def _run(args: argparse.Namespace, data_dir: str, work: str) -> int:
    print(f"[1/5] starting an embedded sparklog broker (data in {data_dir})", flush=True)
    with EmbeddedCluster(data_dir, config={"group.initial.rebalance.delay.ms": "0"}) as cluster:
        bootstrap = cluster.bootstrap_servers
        print(f"      broker listening on {bootstrap}", flush=True)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        existing = admin.list_topics()
        new = [
            NewTopic(name, num_partitions=parts)
            for name, parts in ((EVENTS_TOPIC, 3), (COUNTS_TOPIC, 1))
            if name not in existing
        ]
        if new:
            admin.create_topics(new)
        # a re-run on the same --data-dir starts after what is already there
        tps = {tp: (-1) for tp in _partitions(admin, EVENTS_TOPIC)}
        already = sum(off for off, _ in admin.list_offsets(tps).values())
        counts_start = {
            str(tp.partition): off
            for tp, (off, _) in admin.list_offsets(
                {tp: -1 for tp in _partitions(admin, COUNTS_TOPIC)}
            ).items()
        }
        print(
            f"[2/5] topics '{EVENTS_TOPIC}' (3 partitions) and '{COUNTS_TOPIC}' ready", flush=True
        )

        print("[3/5] starting Spark and the streaming query", flush=True)
        spark = local_spark("sparklog-quickstart")
        try:
            summary, produced_s, elapsed = _stream(
                spark, args, bootstrap, work, already, counts_start
            )
        finally:
            # stopped before the broker, and before their checkpoints are removed
            for q in spark.streams.active:
                q.stop()
            spark.stop()

    total = sum(c for _, _, c in summary)
    print()
    print("=" * 64)
    print(f"events produced          : {args.events:,} in {produced_s:.1f} s")
    print(f"events counted by Spark  : {total:,} (read back from '{COUNTS_TOPIC}')")
    print(f"produce -> counts visible: {elapsed:.1f} s")
    print("per window (event time)  :  " + "  ".join(f"{a:>6}" for a in ACTIONS))
    by_window: dict[str, dict[str, int]] = {}
    for window, action, count in summary:
        by_window.setdefault(window, {})[action] = count
    for window in sorted(by_window):
        row = by_window[window]
        print(f"  {window:<23}:  " + "  ".join(f"{row.get(a, 0):>6}" for a in ACTIONS))
    print("=" * 64)
    if total != args.events:
        print(f"ERROR: counted {total} events, expected {args.events}", file=sys.stderr)
        return 1
    print("quickstart OK")
    return 0


def _stream(
    spark,  # noqa: ANN001
    args: argparse.Namespace,
    bootstrap: str,
    work: str,
    already: int,
    counts_start: dict[str, int],
) -> tuple[list[tuple[str, str, int]], float, float]:
    """Run the queries while the events are produced, until the counts cover them all:
    (the counts read back, seconds producing, seconds until the counts were visible)."""
    queries = _start_queries(spark, bootstrap, work, already)
    print(f"[4/5] producing {args.events:,} events in 4 bursts", flush=True)
    t0 = time.monotonic()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": "5"})
    rng = np.random.default_rng(7)
    burst = -(-args.events // 4)
    for first in range(0, args.events, burst):
        n = min(burst, args.events - first)
        values, keys = make_events(first, n, rng)
        producer.produce_arrow(EVENTS_TOPIC, values, keys=keys)
        assert producer.flush(60) == 0, "events were not acknowledged"
        time.sleep(1.0)
    producer.close()
    produced_s = time.monotonic() - t0

    print("[5/5] waiting for the counts to cover every event", flush=True)
    summary = _wait_for_counts(spark, queries, bootstrap, counts_start, args.events, args.timeout)
    return summary, produced_s, time.monotonic() - t0


def _partitions(admin: AdminClient, topic: str) -> list:
    from sparklog.client import TopicPartition

    meta = admin.list_topics()[topic]
    return [TopicPartition(topic, p) for p in sorted(meta.partitions)]


def _start_queries(spark, bootstrap: str, work: str, skip: int) -> list:  # noqa: ANN001
    from pyspark.sql import functions as F

    events = (
        spark.readStream.format("sparklog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", EVENTS_TOPIC)
        .option("startingOffsets", "latest" if skip else "earliest")
        .option("maxOffsetsPerTrigger", "50000")
        .load()
    )
    parsed = events.select(
        F.from_json(F.col("value").cast("string"), "user STRING, action STRING, ts LONG").alias("e")
    ).select("e.action", F.timestamp_millis("e.ts").alias("event_time"))
    counts = parsed.groupBy(F.window("event_time", "1 minute"), "action").count()

    to_topic = (
        counts.select(
            F.concat_ws("|", F.col("window.start").cast("string"), "action").alias("key"),
            F.to_json(
                F.struct(
                    F.date_format("window.start", "yyyy-MM-dd HH:mm").alias("window"),
                    "action",
                    "count",
                )
            ).alias("value"),
        )
        .writeStream.format("sparklog")
        .option("bootstrap.servers", bootstrap)
        .option("topic", COUNTS_TOPIC)
        .option("checkpointLocation", os.path.join(work, "to-topic"))
        .outputMode("complete")  # Python sinks have no Update mode in Spark 4.2
        .trigger(processingTime="1 second")
        .start()
    )
    to_console = (
        counts.writeStream.foreachBatch(_Progress())
        .option("checkpointLocation", os.path.join(work, "console"))
        .outputMode("complete")
        .trigger(processingTime="2 seconds")
        .start()
    )
    return [to_topic, to_console]


class _Progress:
    """The console view of the counts: per micro-batch, the events counted so far and only
    the windows whose counts changed in it (the whole table would repeat the same rows
    every trigger), each with its counts per action and how many events it gained."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], int] = {}

    def __call__(self, batch, batch_id: int) -> None:  # noqa: ANN001 - a pyspark DataFrame
        from pyspark.sql import functions as F

        rows = batch.select(
            F.date_format("window.start", "yyyy-MM-dd HH:mm").alias("window"), "action", "count"
        ).collect()
        counts = {(r["window"], r["action"]): int(r["count"]) for r in rows}
        total, before = sum(counts.values()), sum(self.seen.values())
        changed = sorted({w for (w, a), c in counts.items() if self.seen.get((w, a)) != c})
        windows = len({w for w, _ in counts})
        print(
            f"  micro-batch {batch_id}: {total:,} events counted so far "
            f"(+{total - before:,}) in {windows} windows; changed:",
            flush=True,
        )
        for w in changed:
            now = [counts.get((w, a), 0) for a in ACTIONS]
            gained = sum(now) - sum(self.seen.get((w, a), 0) for a in ACTIONS)
            cells = "  ".join(f"{a} {n:>5}" for a, n in zip(ACTIONS, now, strict=True))
            print(f"    {w}  {cells}  (+{gained:,})", flush=True)
        self.seen = counts


def _wait_for_counts(
    spark,  # noqa: ANN001
    queries: list,
    bootstrap: str,
    start: dict[str, int],
    expected: int,
    timeout: float,
) -> list[tuple[str, str, int]]:
    """Read the counts topic back (batch read); the latest update per key is the count."""
    deadline = time.monotonic() + timeout
    summary: list[tuple[str, str, int]] = []
    while time.monotonic() < deadline:
        for q in queries:
            if q.exception() is not None:
                raise RuntimeError(f"streaming query failed: {q.exception()}")
        df = (
            spark.read.format("sparklog")
            .option("bootstrap.servers", bootstrap)
            .option("subscribe", COUNTS_TOPIC)
            .option("startingOffsets", json.dumps({COUNTS_TOPIC: start}))
            .load()
        )
        latest: dict[str, tuple[int, dict]] = {}
        for row in df.select("key", "value", "offset").collect():
            key = bytes(row.key).decode()
            if key not in latest or row.offset > latest[key][0]:
                latest[key] = (row.offset, json.loads(bytes(row.value)))
        summary = sorted((v["window"], v["action"], int(v["count"])) for _, v in latest.values())
        if sum(c for _, _, c in summary) >= expected:
            break
        time.sleep(2.0)
    return summary


if __name__ == "__main__":
    sys.exit(main())
