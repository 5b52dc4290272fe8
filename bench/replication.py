"""Replication cost: RF1 acks=1 vs RF3 acks=all (min.insync.replicas=2) on one 3-broker
cluster, same run, same client (confluent-kafka), 100-byte records.

The cluster (``sparklog.cluster.InProcessCluster``: a controller and three brokers whose
followers replicate over real sockets) runs in a child process so the client does not share
its interpreter. For each mode: produce N records (linger 5 ms) to a fresh topic with P
partitions and measure records/s and the produce latency (produce() to delivery report)
p50/p99. Prints both modes and the RF3/RF1 ratios. Targets (issue 14): RF3 acks=all >=
0.5x the RF1 acks=1 throughput; p99 <= 3x RF1's.

    .venv/bin/python bench/replication.py [--n 200000] [--partitions 3] [--reps 1]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

VALUE = b"x" * 100


def serve(data_dir: str) -> None:
    """Child: run the cluster until stdin closes."""
    from sparklog.cluster import InProcessCluster

    with InProcessCluster(data_dir, brokers=3) as c:
        print(c.bootstrap_servers, flush=True)
        sys.stdin.read()


def produce(bootstrap: str, topic: str, n: int, acks: str) -> tuple[float, list[float]]:
    """(records/s, latencies in ms) for n records."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                  "batch.size": 1 << 20, "enable.idempotence": acks == "all",
                  "queue.buffering.max.messages": 1_000_000})
    latencies: list[float] = []
    errors: list[object] = []

    def delivered(err: object, _msg: object, sent: float) -> None:
        if err is not None:
            errors.append(err)
        latencies.append((time.perf_counter() - sent) * 1000)

    t0 = time.perf_counter()
    for _ in range(n):
        sent = time.perf_counter()
        while True:
            try:
                p.produce(topic, VALUE, on_delivery=lambda e, m, s=sent: delivered(e, m, s))
                break
            except BufferError:
                p.poll(0.001)
        p.poll(0)
    if p.flush(300):
        raise RuntimeError("records left unanswered")
    elapsed = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first {errors[0]}")
    return n / elapsed, latencies


def create(bootstrap: str, topic: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf, config=configs)])[topic].result(30)


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
        return
    with tempfile.TemporaryDirectory() as d:
        child = subprocess.Popen([sys.executable, __file__, "--serve", d],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None
            bootstrap = child.stdout.readline().strip()
            results: dict[str, list[tuple[float, float, float]]] = {"rf1": [], "rf3": []}
            for rep in range(args.reps):
                for mode, rf, acks, configs in (("rf1", 1, "1", {}),
                                                ("rf3", 3, "all", {"min.insync.replicas": "2"})):
                    topic = f"bench-{mode}-{rep}"
                    create(bootstrap, topic, args.partitions, rf, configs)
                    rate, lat = produce(bootstrap, topic, args.n, acks)
                    results[mode].append((rate, pct(lat, 50), pct(lat, 99)))
                    print(f"{mode} rep {rep}: {rate:,.0f} records/s, p50 {pct(lat, 50):.1f} ms, "
                          f"p99 {pct(lat, 99):.1f} ms", flush=True)
        finally:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(60)
    med = {m: tuple(statistics.median(r[i] for r in rs) for i in range(3))
           for m, rs in results.items()}
    for m, (rate, p50, p99) in med.items():
        print(f"{m}: {rate:,.0f} records/s  p50 {p50:.1f} ms  p99 {p99:.1f} ms")
    print(f"RF3 acks=all / RF1 acks=1: throughput {med['rf3'][0] / med['rf1'][0]:.2f}x "
          f"(target >= 0.5x), p99 {med['rf3'][2] / med['rf1'][2]:.2f}x (target <= 3x)")


if __name__ == "__main__":
    main()
