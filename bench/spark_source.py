"""Benchmark: the sparklog Spark source against Spark's own sources, in the same run.

Throughput (rows/s, wall time from query start to termination, noop sink):
  1. sparklog: ``readStream.format("sparklog")`` + Trigger.AvailableNow over N records
     (16-byte key, 100-byte value) held by a sparklog broker in its own process,
     ``--per-batch`` rows per micro-batch (maxOffsetsPerTrigger),
  2. the same rows as Parquet files read by Spark's file-stream source, the same rows per
     micro-batch (maxFilesPerTrigger),
  3. a Python data source that serves the same seven columns from Arrow batches built in
     memory (``spark_ceiling_source.py``): the ceiling of pyspark's Python DataSource path,
     so the gap between it and sparklog is sparklog's own cost,
  4. Spark's ``rate-micro-batch`` source with the same rows per batch (the engine's ceiling).
"busy" rows/s divide by the summed micro-batch durations only (no query start-up).
Latency: records produced at ``--rate`` records/s by a separate process while a query with
the default trigger runs; produce -> visible in ``foreachBatch`` p50/p99, beside the duration
of a 1-row micro-batch of the ``rate-micro-batch`` source (the engine's per-batch floor).

Targets (issue 6): sparklog >= 1.0x the Parquet file stream; latency p50 <= 1.5x the floor.

``--partitions-sweep 2,20,200,1000`` measures instead how the source scales with the
partition count (issue 19): the same rows in topics of each size, read once each with
AvailableNow (after one warm-up read), rows/s and the ratio to the first count; then the
produce -> foreachBatch latency at the largest count beside the empty-batch floor. Targets:
200 partitions >= 0.9x the 2-partition rows/s; latency at 1 000 partitions <= 1.5x the floor.

    python bench/spark_source.py                       # 10 M records (~10 minutes)
    python bench/spark_source.py --records 2000000 --latency-seconds 10 --latency-rounds 1
    python bench/spark_source.py --records 2000000 --per-batch 500000 \
        --partitions-sweep 2,20,200,1000 --latency-seconds 10 --latency-rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Spark's Python processes (workers and the streaming runner) import spark_ceiling_source
_HERE = os.path.dirname(os.path.abspath(__file__))
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (_HERE, os.environ.get("PYTHONPATH")) if p
)

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from _net import free_port, wait_listening  # noqa: E402

KEY_BYTES, VALUE_BYTES = 16, 100


def fixed_binary(rng: np.random.Generator, n: int, width: int) -> pa.Array:
    data = rng.integers(32, 127, n * width, dtype=np.uint8)
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def spark_session(driver_memory: str, java_options: str = ""):  # noqa: ANN201
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if java_options:  # local mode: the driver JVM runs the tasks too
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    spark = (
        builder.master("local[2]")
        .appName("sparklog-bench")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def sparklog_stream(spark, bootstrap: str, topic: str, per_batch: int):  # noqa: ANN001, ANN201
    """``topic`` from the start through the sparklog source, ``per_batch`` rows per
    micro-batch."""
    return (
        spark.readStream.format("sparklog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(per_batch))
        .load()
    )


def run_query(df, ckpt: str, *, available_now: bool = True, stop_after_rows: int | None = None,  # noqa: ANN001
              progress_out: list | None = None):
    """(rows, wall seconds, batches, busy seconds) of ``df`` into the noop sink; the
    query's progress reports are appended to ``progress_out`` when given."""
    w = df.writeStream.format("noop").option("checkpointLocation", ckpt)
    w = w.trigger(availableNow=True) if available_now else w.trigger(processingTime="0 seconds")
    t0 = time.monotonic()
    q = w.start()
    if available_now:
        q.awaitTermination()
        wall = time.monotonic() - t0
    else:
        while True:
            time.sleep(0.05)
            done = sum(p["numInputRows"] for p in q.recentProgress)
            if done >= (stop_after_rows or 0):
                wall = time.monotonic() - t0
                break
        q.stop()
    progress = [p for p in q.recentProgress if p["numInputRows"]]
    if progress_out is not None:
        progress_out.extend(q.recentProgress)
    rows = sum(p["numInputRows"] for p in progress)
    busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    return rows, wall, len(progress), busy


def main(argv: list[str] | None = None) -> int:
    from sparklog.client import AdminClient, NewTopic, Producer

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--per-batch", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--rate", type=int, default=1000, help="records/s for the latency run")
    ap.add_argument("--latency-seconds", type=float, default=20.0)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--rounds", type=int, default=2,
                    help="read the data set this many times per source; the last round counts "
                         "(with --partitions-sweep: interleaved reads per count, all counted)")
    ap.add_argument(
        "--java-options", default="",
        help="extra driver JVM options, e.g. '-Darrow.enable_unsafe_memory_access=true' "
        "(Arrow's bounds checks cost Python sources ~25%% of their JVM time per row)",
    )
    ap.add_argument("--latency-rounds", type=int, default=2,
                    help="latency + floor measurements, alternating; the last one counts "
                         "(with --partitions-sweep: the median of the rounds' ratios)")
    ap.add_argument("--partitions-sweep", default=None, metavar="N,N,...",
                    help="read the same rows from topics of these partition counts instead")
    ap.add_argument("--produce-to", nargs=2, metavar=("BOOTSTRAP", "TOPIC"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.produce_to:  # the latency run's producer, in its own process
        return produce_timestamps(*args.produce_to, args.rate, args.latency_seconds)
    n, per_batch = args.records, args.per_batch
    work = tempfile.mkdtemp(prefix="sparklog-bench-")
    rng = np.random.default_rng(1)

    # The broker runs in its own process, as in a deployment: in-process it would share the
    # GIL with the Spark driver's Python side.
    port = free_port()
    broker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sparklog.cli.main",
            "server",
            "--data-dir",
            os.path.join(work, "broker"),
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    bootstrap = f"127.0.0.1:{port}"
    try:
        wait_listening(port)
        if args.partitions_sweep:
            counts = [int(c) for c in args.partitions_sweep.split(",")]
            return partitions_sweep(bootstrap, counts, args, rng, work)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics(
            [
                NewTopic("bench", num_partitions=args.partitions),
                *(NewTopic(f"latency-{i}", num_partitions=1) for i in range(args.latency_rounds)),
            ]
        )
        parquet_dir = os.path.join(work, "parquet")
        os.makedirs(parquet_dir)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": "5"})
        chunk = 100_000
        t0 = time.monotonic()
        for i, first in enumerate(range(0, n, chunk)):
            m = min(chunk, n - first)
            keys, values = fixed_binary(rng, m, KEY_BYTES), fixed_binary(rng, m, VALUE_BYTES)
            producer.produce_arrow("bench", values, keys=keys)
            # the same rows the source yields: Kafka's seven columns
            table = pa.table(
                {
                    "key": keys,
                    "value": values,
                    "topic": pa.array(["bench"] * m, pa.string()),
                    "partition": pa.array(np.arange(m, dtype=np.int32) % args.partitions),
                    "offset": pa.array(np.arange(first, first + m, dtype=np.int64)),
                    "timestamp": pa.array(
                        np.full(m, int(time.time() * 1e6), dtype=np.int64),
                        pa.timestamp("us", tz="UTC"),
                    ),
                    "timestampType": pa.array(np.zeros(m, dtype=np.int32)),
                }
            )
            pq.write_table(table, os.path.join(parquet_dir, f"part-{i:05d}.parquet"))
        assert producer.flush(600) == 0
        load_s = time.monotonic() - t0
        print(
            f"loaded {n:,} records ({KEY_BYTES} B key, {VALUE_BYTES} B value) into the "
            f"broker and {len(os.listdir(parquet_dir))} Parquet files in {load_s:.1f} s "
            f"({n / load_s:,.0f} rec/s)",
            flush=True,
        )

        spark = spark_session(args.driver_memory, args.java_options)
        if args.java_options:
            print(f"driver JVM options: {args.java_options}", flush=True)
        from spark_ceiling_source import CeilingSource

        spark.dataSource.register(CeilingSource)
        # warm-up: JVM + Python workers, so the first measured query does not pay for them
        spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()

        def sparklog_df():  # noqa: ANN202
            return sparklog_stream(spark, bootstrap, "bench", per_batch)

        files_per_batch = max(1, per_batch // chunk)
        schema = (
            "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
            "timestamp TIMESTAMP, timestampType INT"
        )

        def parquet_df():  # noqa: ANN202
            return (
                spark.readStream.format("parquet")
                .schema(schema)
                .option("maxFilesPerTrigger", str(files_per_batch))
                .load(parquet_dir)
            )

        def ceiling_df():  # noqa: ANN202
            return (
                spark.readStream.format("sparklog_ceiling")
                .option("rows", str(n))
                .option("rowsPerBatch", str(per_batch))
                .option("partitions", str(args.partitions))
                .load()
            )

        # Each round reads the whole data set with every source, rotating which goes first;
        # the figures come from the last round, so no source is charged for cold JVM code
        # paths or Python worker start-up that another one then reuses.
        results = {}
        sources = [("sparklog", sparklog_df), ("parquet", parquet_df), ("ceiling", ceiling_df)]
        for rnd in range(args.rounds):
            for name, make in sources[rnd % 3 :] + sources[: rnd % 3]:
                res = run_query(make(), os.path.join(work, f"c-{name}-{rnd}"))
                print(
                    f"  round {rnd + 1}/{args.rounds} {name:<9} {res[0]:>11,} rows "
                    f"{res[1]:7.2f} s {res[0] / res[1]:>12,.0f} rows/s",
                    flush=True,
                )
                results[name] = res

        df = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", str(per_batch))
            .option("numPartitions", "2")
            .load()
        )
        results["rate"] = run_query(
            df, os.path.join(work, "c-rate"), available_now=False, stop_after_rows=n
        )

        print()
        print(f"throughput, {n:,} rows, {per_batch:,} rows/micro-batch, noop sink, local[2]")
        labels = {
            "sparklog": "sparklog (AvailableNow)",
            "parquet": "Parquet file stream",
            "ceiling": "Python source, no work",
            "rate": "rate-micro-batch",
        }
        for key, label in labels.items():
            rows, wall, batches, busy = results[key]
            print(
                f"  {label:<24} {rows:>11,} rows {wall:7.2f} s {rows / wall:>11,.0f} rows/s "
                f"busy {rows / busy:>11,.0f} rows/s ({batches} batches, "
                f"{wall - busy:5.2f} s outside batches)"
            )
        rate = {k: v[0] / v[1] for k, v in results.items()}
        busy_rate = {k: v[0] / v[3] for k, v in results.items()}
        print(
            f"  ratio sparklog / Parquet file stream = {rate['sparklog'] / rate['parquet']:.2f}x "
            f"(target >= 1.0x); busy {busy_rate['sparklog'] / busy_rate['parquet']:.2f}x"
        )
        print(
            f"  ratio Python no-work source / Parquet = {rate['ceiling'] / rate['parquet']:.2f}x; "
            f"sparklog / Python no-work source = {rate['sparklog'] / rate['ceiling']:.2f}x"
        )
        print(f"  ratio sparklog / rate source          = {rate['sparklog'] / rate['rate']:.2f}x")
        if results["sparklog"][0] != n:
            print(f"  WARNING: sparklog read {results['sparklog'][0]} rows, expected {n}")

        # Latency and floor alternate; the last pair counts (the first one warms the JVM's
        # streaming code paths, which cost both sides several hundred ms per batch when cold).
        for rnd in range(args.latency_rounds):
            (p50, p99), lat_phases = latency(
                spark, bootstrap, f"latency-{rnd}", args.rate, args.latency_seconds, work
            )
            floor, floor_phases = empty_batch_floor(spark, os.path.join(work, f"floor-{rnd}"))
            print(
                f"  latency round {rnd + 1}/{args.latency_rounds}: p50 {p50:.1f} ms, "
                f"p99 {p99:.1f} ms, floor {floor:.1f} ms",
                flush=True,
            )
        print()
        print(f"latency at {args.rate} records/s, default trigger (produce -> foreachBatch)")
        print(f"  sparklog p50 {p50:7.1f} ms   p99 {p99:7.1f} ms")
        print(f"  1-row micro-batch floor (rate-micro-batch, median) {floor:7.1f} ms")
        print(f"  ratio p50 / floor = {p50 / floor:.2f}x (target <= 1.5x)")
        print(f"  median phases, sparklog batches: {lat_phases}")
        print(f"  median phases, floor batches:    {floor_phases}")
        producer.close()
        spark.stop()
        return 0
    finally:
        broker.terminate()
        broker.wait(30)


def produce_timestamps(bootstrap: str, topic: str, rate: int, seconds: float) -> int:
    """Produce ``rate`` records/s to ``topic`` for ``seconds``; each value is its
    produce time in ns. Runs in its own process so it does not share the GIL of the driver,
    whose Python runs the foreachBatch callbacks being timed."""
    from sparklog.client import Producer

    # linger.ms stays at its default (5 ms, as in Kafka 4): at 1 000 records/s, 0 would mean
    # a Produce request per record, and the producer and broker would take CPU from Spark
    producer = Producer({"bootstrap.servers": bootstrap})
    interval = 1.0 / rate
    next_t = time.monotonic()
    end = next_t + seconds
    while time.monotonic() < end:
        producer.produce(topic, value=str(time.time_ns()).encode())
        next_t += interval
        delay = next_t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    ok = producer.flush(30) == 0
    producer.close()
    return 0 if ok else 1


def partitions_sweep(bootstrap: str, counts: list[int], args: argparse.Namespace,
                     rng: np.random.Generator, work: str) -> int:
    """The same ``args.records`` rows in one topic per partition count, read with
    AvailableNow; then latency at the largest count beside the empty-batch floor."""
    from sparklog.client import AdminClient, NewTopic, Producer

    n, per_batch = args.records, args.per_batch
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(f"sweep-{c}", num_partitions=c) for c in counts]
                        + [NewTopic(f"sweep-latency-{r}", num_partitions=max(counts))
                           for r in range(args.latency_rounds)])
    admin.close()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": "5"})
    chunk = 100_000
    for first in range(0, n, chunk):
        m = min(chunk, n - first)
        # random keys: the default partitioner spreads the rows evenly over any count
        keys, values = fixed_binary(rng, m, KEY_BYTES), fixed_binary(rng, m, VALUE_BYTES)
        for c in counts:
            producer.produce_arrow(f"sweep-{c}", values, keys=keys)
    assert producer.flush(600) == 0
    producer.close()
    spark = spark_session(args.driver_memory, args.java_options)
    spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()

    def read(topic: str, ckpt: str) -> tuple[int, float, int, float]:
        return run_query(sparklog_stream(spark, bootstrap, topic, per_batch),
                         os.path.join(work, ckpt))

    read(f"sweep-{counts[0]}", "c-warm")  # JVM code paths and Python workers
    # A read takes 2-4 s, and what else the 2 cores do moves one read by 10%: every count is
    # read --rounds times, the rounds interleaved (2, 200, 1000, 2, 200, 1000), and its rows/s
    # is all its rows over all its wall time.
    walls: dict[int, list[float]] = {c: [] for c in counts}
    print(f"partition sweep, {n:,} rows, {per_batch:,} rows/micro-batch, noop sink, local[2], "
          f"{args.rounds} interleaved reads per count")
    for rnd in range(args.rounds):
        for c in counts:
            rows, wall, batches, busy = read(f"sweep-{c}", f"c-sweep-{c}-{rnd}")
            walls[c].append(wall)
            warn = "" if rows == n else f"  WARNING: read {rows:,} rows, expected {n:,}"
            print(f"    round {rnd + 1}: {c:>5} partitions {rows:>11,} rows {wall:7.2f} s "
                  f"({batches} batches){warn}", flush=True)
    rates = {c: n * len(w) / sum(w) for c, w in walls.items()}
    for c in counts:
        print(f"  {c:>5} partitions {rates[c]:>11,.0f} rows/s "
              f"({rates[c] / rates[counts[0]]:.2f}x of {counts[0]} partitions)", flush=True)
    # the sink: the same number of rows written to a fresh topic of each size
    sink_rates = {}
    for c in counts:
        sink_rates[c] = write_rate(spark, bootstrap, f"sink-{c}", c, n)
        print(f"  sink {c:>5} partitions {n:>11,} rows {sink_rates[c]:>11,.0f} rows/s "
              f"({sink_rates[c] / sink_rates[counts[0]]:.2f}x of {counts[0]} partitions)",
              flush=True)
    # pyspark's own cost per Python source task: the no-work source, one task per partition
    # and micro-batch, at the smallest and the largest count
    from spark_ceiling_source import CeilingSource

    spark.dataSource.register(CeilingSource)
    walls = {}
    many = min(counts[-1], 200)  # 1 000 tasks per micro-batch would take minutes
    for i, c in enumerate((counts[0], counts[0], many)):  # the first read warms up workers
        df = (spark.readStream.format("sparklog_ceiling").option("rows", str(n))
              .option("rowsPerBatch", str(per_batch)).option("partitions", str(c)).load())
        rows, walls[c], batches, _busy = run_query(df, os.path.join(work, f"c-ceil-{i}"))
    extra_tasks = (many - counts[0]) * batches
    print(f"  no-work Python source: {counts[0]} partitions {walls[counts[0]]:.2f} s, "
          f"{many} partitions {walls[many]:.2f} s: "
          f"{1000 * (walls[many] - walls[counts[0]]) / extra_tasks:.1f} ms per extra task "
          "(pyspark's fixed cost per Python source task)", flush=True)
    # Latency and floor alternate, one pair per round (a micro-batch takes ~100 ms, so a
    # round's p50 moves by 10-20% with what else the 2 cores do): every round is printed and
    # the median of the rounds' ratios is the figure.
    ratios = []
    for rnd in range(args.latency_rounds):
        (p50, p99), phases = latency(spark, bootstrap, f"sweep-latency-{rnd}", args.rate,
                                     args.latency_seconds, work)
        floor, floor_phases = empty_batch_floor(spark, os.path.join(work, f"floor-sweep-{rnd}"))
        ratios.append(p50 / floor)
        print(f"  latency round {rnd + 1}/{args.latency_rounds} over {max(counts)} partitions: "
              f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, floor {floor:.1f} ms, ratio {ratios[-1]:.2f}x",
              flush=True)
        print(f"    median phases, sparklog batches: {phases}")
        print(f"    median phases, floor batches:    {floor_phases}", flush=True)
    if ratios:
        print(f"latency at {args.rate} records/s over {max(counts)} partitions (produce -> "
              f"foreachBatch) / 1-row micro-batch floor: median of {len(ratios)} rounds "
              f"{statistics.median(ratios):.2f}x (target <= 1.5x)")
    spark.stop()
    return 0


def write_rate(spark, bootstrap: str, topic: str, partitions: int, n: int) -> float:  # noqa: ANN001
    """rows/s of ``df.write.format("sparklog")`` of ``n`` keyed rows (16 B key, 100 B value)
    into a new topic of ``partitions`` partitions."""
    from sparklog.client import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])
    admin.close()
    df = spark.range(n, numPartitions=2).selectExpr(
        f"CAST(lpad(CAST(id AS STRING), {KEY_BYTES}, '0') AS BINARY) AS key",
        f"CAST(repeat('v', {VALUE_BYTES}) AS BINARY) AS value",
    )
    t0 = time.monotonic()
    (df.write.format("sparklog").option("bootstrap.servers", bootstrap)
     .option("topic", topic).mode("append").save())
    return n / (time.monotonic() - t0)


def _median_phases(progress: list[dict]) -> dict[str, float]:
    keys = ("latestOffset", "walCommit", "queryPlanning", "addBatch", "commitOffsets",
            "triggerExecution")
    return {k: statistics.median(p["durationMs"].get(k, 0) for p in progress)
            for k in keys} if progress else {}


def _last_batch_id(q) -> int:  # noqa: ANN001
    last = q.lastProgress
    return -1 if last is None else last["batchId"]


def latency(spark, bootstrap, topic, rate, seconds, work):  # noqa: ANN001, ANN201
    """Produce-to-foreachBatch latency (p50, p99) in ms, and the median batch phases."""
    seen: list[float] = []

    def on_batch(batch_df, batch_id):  # noqa: ANN001
        now = time.time_ns()
        for row in batch_df.select("value").collect():
            seen.append((now - int(bytes(row.value))) / 1e6)

    df = (
        spark.readStream.format("sparklog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    q = (
        df.writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", os.path.join(work, f"c-{topic}"))
        .start()
    )
    time.sleep(5)  # let the query start and settle on "latest"
    warm = 10.0  # the first seconds of data pay for worker start-up and JIT; not counted
    producer = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--produce-to", bootstrap, topic,
         "--rate", str(rate), "--latency-seconds", str(warm + seconds)]
    )
    time.sleep(warm)
    # Spark keeps the last 100 progress reports only: the window is by batch id, not index
    seen_before, first_batch = len(seen), _last_batch_id(q)
    time.sleep(seconds)
    seen_after, last_batch = len(seen), _last_batch_id(q)
    producer.wait(60)
    time.sleep(2)
    q.stop()
    samples = sorted(seen[seen_before:seen_after])
    phases = _median_phases([p for p in q.recentProgress
                             if first_batch < p["batchId"] <= last_batch and p["numInputRows"]])
    if not samples:
        return (float("nan"), float("nan")), phases
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    return (statistics.median(samples), p99), phases


def empty_batch_floor(spark, work):  # noqa: ANN001, ANN201
    df = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", "1").load()

    def on_batch(batch_df, batch_id):  # noqa: ANN001 - the same work as the latency run
        batch_df.select("value").collect()

    q = (
        df.writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", os.path.join(work, "c-floor"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    time.sleep(12)
    q.stop()
    progress = q.recentProgress[3:]
    durations = [p["durationMs"]["triggerExecution"] for p in progress]
    return (statistics.median(durations) if durations else float("nan")), _median_phases(progress)


if __name__ == "__main__":
    sys.exit(main())
