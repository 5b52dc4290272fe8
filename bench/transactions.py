"""Benchmark: what transactions cost, in the same run (issue 15).

1. The Spark sink: ``readStream.format("sparklog")`` -> ``writeStream.format("sparklog")``
   topic to topic over N records (16-byte key, 100-byte value), Trigger.AvailableNow with
   ``--per-batch`` rows per micro-batch, ``exactlyOnce=true`` (a prepared transaction per
   task, the driver's commit record and commits) against ``exactlyOnce=false`` (the
   idempotent at-least-once producer). rows/s over the query's wall time, and "busy" rows/s
   over the summed micro-batch durations (no query start-up). Rounds alternate which mode
   goes first; the last round counts.
2. confluent-kafka (librdkafka): a transactional producer committing every 100 ms against a
   non-transactional (idempotent) one, each producing the same records as fast as it can,
   in alternating rounds (the last counts).

The broker runs in its own process (``sparklog server``, two-phase commit allowed).
Target: exactly-once sink >= 0.8x the at-least-once sink's rows/s.

    python bench/transactions.py                                   # 2 M records
    python bench/transactions.py --records 500000 --per-batch 100000 --ck-records 300000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import numpy as np  # noqa: E402
from _net import free_port, wait_listening  # noqa: E402
from spark_source import (  # noqa: E402
    KEY_BYTES,
    VALUE_BYTES,
    fixed_binary,
    spark_session,
    sparklog_stream,
)


def sink_run(spark, bootstrap: str, src: str, out: str, ckpt: str, per_batch: int,  # noqa: ANN001
             exactly_once: bool) -> tuple[int, float, float]:
    """(rows, wall seconds, busy seconds) of one topic -> topic copy."""
    df = sparklog_stream(spark, bootstrap, src, per_batch).select("key", "value")
    t0 = time.monotonic()
    q = (
        df.writeStream.format("sparklog")
        .option("bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("exactlyOnce", str(exactly_once).lower())
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    wall = time.monotonic() - t0
    if q.exception() is not None:
        raise RuntimeError(q.exception())
    progress = [p for p in q.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    return rows, wall, busy


def ck_run(bootstrap: str, topic: str, n: int, transactional: bool) -> float:
    """Seconds for confluent-kafka to deliver ``n`` records (committing every 100 ms when
    ``transactional``)."""
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
    if transactional:
        conf["transactional.id"] = f"bench-{topic}"
    p = Producer(conf)
    value = b"v" * VALUE_BYTES
    t0 = time.monotonic()
    if transactional:
        p.init_transactions(30)
        p.begin_transaction()
    last_commit = time.monotonic()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, key=b"%016d" % i)
                break
            except BufferError:
                p.poll(0.01)
        if transactional and time.monotonic() - last_commit >= 0.1:
            p.commit_transaction(30)
            p.begin_transaction()
            last_commit = time.monotonic()
        elif i % 1000 == 0:
            p.poll(0)
    if transactional:
        p.commit_transaction(30)
    assert p.flush(60) == 0
    return time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    from sparklog.client import AdminClient, NewTopic, Producer

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--per-batch", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ck-records", type=int, default=1_000_000)
    ap.add_argument("--driver-memory", default="4g")
    args = ap.parse_args(argv)
    n = args.records
    work = tempfile.mkdtemp(prefix="sparklog-bench-txn-")
    port = free_port()
    broker = subprocess.Popen(
        [sys.executable, "-m", "sparklog.cli.main", "server", "--data-dir",
         os.path.join(work, "broker"), "--port", str(port),
         "--set", "transaction.two.phase.commit.enable=true"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    bootstrap = f"127.0.0.1:{port}"
    try:
        wait_listening(port)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        modes = (True, False)
        admin.create_topics([
            NewTopic("src", num_partitions=args.partitions),
            *(NewTopic(f"out-{m}-{r}", num_partitions=args.partitions)
              for m in modes for r in range(args.rounds)),
            *(NewTopic(f"ck-{m}-{r}", 2) for m in modes for r in range(args.rounds)),
        ])
        rng = np.random.default_rng(1)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": "5"})
        t0 = time.monotonic()
        for first in range(0, n, 100_000):
            m = min(100_000, n - first)
            producer.produce_arrow("src", fixed_binary(rng, m, VALUE_BYTES),
                                   keys=fixed_binary(rng, m, KEY_BYTES))
        assert producer.flush(600) == 0
        producer.close()
        print(f"loaded {n:,} records ({KEY_BYTES} B key, {VALUE_BYTES} B value) in "
              f"{time.monotonic() - t0:.1f} s", flush=True)

        spark = spark_session(args.driver_memory)
        spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()  # warm-up
        results: dict[bool, tuple[int, float, float]] = {}
        for rnd in range(args.rounds):
            for eos in modes[rnd % 2:] + modes[: rnd % 2]:
                res = sink_run(spark, bootstrap, "src", f"out-{eos}-{rnd}",
                               os.path.join(work, f"c-{eos}-{rnd}"), args.per_batch, eos)
                print(f"  round {rnd + 1}/{args.rounds} exactlyOnce={str(eos).lower():<5} "
                      f"{res[0]:>10,} rows {res[1]:7.2f} s {res[0] / res[1]:>10,.0f} rows/s "
                      f"(busy {res[0] / res[2]:>10,.0f} rows/s)", flush=True)
                results[eos] = res
        spark.stop()
        eos_rate = results[True][0] / results[True][1]
        alo_rate = results[False][0] / results[False][1]
        eos_busy = results[True][0] / results[True][2]
        alo_busy = results[False][0] / results[False][2]
        print(f"Spark sink exactlyOnce=true  {eos_rate:>10,.0f} rows/s (busy {eos_busy:,.0f})")
        print(f"Spark sink exactlyOnce=false {alo_rate:>10,.0f} rows/s (busy {alo_busy:,.0f})")
        print(f"ratio exactly-once / at-least-once: {eos_rate / alo_rate:.2f}x "
              f"(busy {eos_busy / alo_busy:.2f}x; target >= 0.8x)")

        ck_n = args.ck_records
        secs: dict[bool, float] = {}
        for rnd in range(args.rounds):  # alternating, the last round counts
            for txnl in modes[rnd % 2:] + modes[: rnd % 2]:
                secs[txnl] = ck_run(bootstrap, f"ck-{txnl}-{rnd}", ck_n, txnl)
                print(f"  round {rnd + 1}/{args.rounds} confluent-kafka transactional="
                      f"{str(txnl).lower():<5} {ck_n / secs[txnl]:>10,.0f} rec/s", flush=True)
        plain, txn = secs[False], secs[True]
        print(f"confluent-kafka non-transactional  {ck_n / plain:>10,.0f} rec/s")
        print(f"confluent-kafka commit every 100 ms {ck_n / txn:>10,.0f} rec/s")
        print(f"ratio transactional / non-transactional: {plain / txn:.2f}x")
        return 0
    finally:
        broker.terminate()
        broker.wait(30)


if __name__ == "__main__":
    sys.exit(main())
