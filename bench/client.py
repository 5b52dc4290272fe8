"""sparklog's client vs confluent-kafka on the same broker, in the same run.

Starts one ``sparklog server`` subprocess (its own process: broker and client do not share
a GIL), then per repetition and per phase uses a fresh topic:

  produce  sparklog Producer.produce() per record | sparklog Producer.produce_arrow() |
           confluent-kafka Producer.produce() per record        (100-byte values)
  consume  sparklog ArrowFetcher.fetch() | confluent-kafka Consumer.consume()
           (both read the topic written by confluent-kafka in that repetition)

Prints records/s (min / median / max) and the ratios the issue sets as targets:
bulk >= 1.0x, per-record >= 0.5x confluent produce; Arrow fetch >= 1.0x confluent consume.

    .venv/bin/python bench/client.py [--records 300000] [--reps 3] [--partitions 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pyarrow as pa  # noqa: E402
from _net import free_port  # noqa: E402
from confluent_kafka import Consumer as CKConsumer  # noqa: E402
from confluent_kafka import Producer as CKProducer  # noqa: E402
from confluent_kafka import TopicPartition as CKTopicPartition  # noqa: E402

from sparklog.client import (  # noqa: E402
    AdminClient,
    ArrowFetcher,
    NewTopic,
    Producer,
    TopicPartition,
)

VALUE = bytes(65 + (i * 7) % 26 for i in range(100))  # 100 bytes, like Kafka's perf tool
COMMON = {"acks": "all", "linger.ms": 5, "enable.idempotence": False}


def start_server(data: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = data / "server.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "sparklog.cli.main", "--log-level",
                                 "WARNING", "server", "--data-dir", str(data / "d"), "--port",
                                 str(port)], stdout=fh, stderr=subprocess.STDOUT, cwd=str(REPO))
    bs = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with AdminClient({"bootstrap.servers": bs, "request.timeout.ms": 2000}) as a:
                a.describe_cluster()
            return proc, bs
        except Exception:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start:\n{log.read_text()}") from None
            time.sleep(0.2)


def new_topic(bs: str, partitions: int) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": bs}) as a:
        a.create_topics([NewTopic(name, partitions)])
    return name


def sl_produce(bs: str, topic: str, n: int) -> float:
    p = Producer({"bootstrap.servers": bs, "batch.size": 1_000_000, **COMMON})
    t0 = time.perf_counter()
    produce = p.produce
    for _ in range(n):
        produce(topic, VALUE)
    left = p.flush(300)
    dt = time.perf_counter() - t0
    p.close()
    assert left == 0
    return n / dt


def sl_produce_arrow(bs: str, topic: str, n: int, chunk: int = 100_000) -> float:
    col = pa.array([VALUE] * min(n, chunk), pa.binary())
    p = Producer({"bootstrap.servers": bs, "batch.size": 1_000_000, **COMMON})
    t0 = time.perf_counter()
    done = 0
    while done < n:
        k = min(chunk, n - done)
        p.produce_arrow(topic, col if k == len(col) else col.slice(0, k))
        done += k
    left = p.flush(300)
    dt = time.perf_counter() - t0
    p.close()
    assert left == 0
    return n / dt


def ck_produce(bs: str, topic: str, n: int) -> float:
    p = CKProducer({"bootstrap.servers": bs, "queue.buffering.max.messages": 2_000_000,
                    **COMMON})
    t0 = time.perf_counter()
    produce = p.produce
    for _ in range(n):
        try:
            produce(topic, VALUE)
        except BufferError:
            p.poll(0.01)
            produce(topic, VALUE)
    left = p.flush(300)
    dt = time.perf_counter() - t0
    assert left == 0
    return n / dt


def sl_fetch_arrow(bs: str, topic: str, partitions: int, n: int) -> float:
    t0 = time.perf_counter()
    c = ArrowFetcher({"bootstrap.servers": bs})
    got = 0
    for p in range(partitions):
        tp = TopicPartition(topic, p)
        pos, end = 0, None
        while end is None or pos < end:
            # a reader knows where to stop (Spark: the planned end offset); here the high
            # watermark of the first response, so no empty long-poll ends the loop
            fetched = c.fetch(tp, pos, max_bytes=8 * 1024 * 1024, include_headers=False,
                              timeout_ms=5000)
            b = fetched.batch
            if end is None:
                end = fetched.high_watermark
            if b.num_rows == 0:
                break
            got += b.num_rows
            pos = b.column("offset")[b.num_rows - 1].as_py() + 1
    dt = time.perf_counter() - t0
    c.close()
    assert got == n, (got, n)
    return n / dt


def ck_consume(bs: str, topic: str, partitions: int, n: int) -> float:
    t0 = time.perf_counter()
    c = CKConsumer({"bootstrap.servers": bs, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                    "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    c.assign([CKTopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
    dt = time.perf_counter() - t0
    c.close()
    assert got == n, (got, n)
    return n / dt


def fmt(xs: list[float]) -> str:
    return f"{min(xs) / 1e3:8.0f}k {statistics.median(xs) / 1e3:8.0f}k {max(xs) / 1e3:8.0f}k"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=1)
    args = ap.parse_args()
    n = args.records
    tmp = Path(tempfile.mkdtemp(prefix="sparklog-bench-client-"))
    proc, bs = start_server(tmp)
    res: dict[str, list[float]] = {k: [] for k in
                                   ("sl_produce", "sl_arrow", "ck_produce", "sl_fetch_arrow",
                                    "ck_consume")}
    try:
        for rep in range(args.reps):
            order = ["ck_produce", "sl_produce", "sl_arrow"]
            if rep % 2:
                order.reverse()
            topics = {}
            for name in order:
                topics[name] = new_topic(bs, args.partitions)
                fn = {"ck_produce": ck_produce, "sl_produce": sl_produce,
                      "sl_arrow": sl_produce_arrow}[name]
                res[name].append(fn(bs, topics[name], n))
            src = topics["ck_produce"]
            cons = [("sl_fetch_arrow", sl_fetch_arrow), ("ck_consume", ck_consume)]
            if rep % 2:
                cons.reverse()
            for name, fn in cons:
                res[name].append(fn(bs, src, args.partitions, n))
            print(f"rep {rep + 1}/{args.reps}: " + ", ".join(
                f"{k}={v[-1] / 1e3:.0f}k/s" for k, v in res.items()), flush=True)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"\n{n} records x 100 B, {args.partitions} partition(s), acks=all, linger.ms=5, "
          f"reps={args.reps}; records/s min / median / max")
    labels = {"sl_produce": "sparklog produce() per record",
              "sl_arrow": "sparklog produce_arrow() bulk",
              "ck_produce": "confluent-kafka produce()",
              "sl_fetch_arrow": "sparklog ArrowFetcher.fetch()",
              "ck_consume": "confluent-kafka consume()"}
    for k, label in labels.items():
        print(f"  {label:32s} {fmt(res[k])}")
    print("\nratios (medians; target in brackets):")
    print(f"  bulk produce_arrow / confluent produce   {med['sl_arrow'] / med['ck_produce']:.2f}x"
          "  [>= 1.0]")
    print(f"  per-record produce / confluent produce   {med['sl_produce'] / med['ck_produce']:.2f}x"
          "  [>= 0.5]")
    print(f"  Arrow fetch / confluent consume          "
          f"{med['sl_fetch_arrow'] / med['ck_consume']:.2f}x  [>= 1.0]")
    print(f"(machine: {os.cpu_count()} cpus, load avg {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
