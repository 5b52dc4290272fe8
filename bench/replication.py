"""Replication cost: RF1 acks=1 vs RF3 acks=all (min.insync.replicas=2) on one 3-broker
cluster, same run, same client (confluent-kafka), 100-byte records.

The cluster is a controller and three brokers, each its own process
(``sparklog.cluster.LocalCluster``, what ``sparklog cluster start`` runs), as in a
deployment; ``--cluster in-process`` runs them instead on one event loop in one child process
(``InProcessCluster``, the tests' cluster), where the leader's and both followers' work
share one interpreter. Each mode produces to a fresh topic with P partitions (linger 5 ms):

* at full speed, N records: records/s, and the produce latency (CreateTime to delivery
  report) p50/p99, which at full speed is mostly time queued in the client;
* paced at ``--rate`` records/s (below what every mode sustains), ``--paced-n`` records:
  latency p50/p99 at equal load, which is what replication adds per request.

A third mode, RF1 acks=all (idempotent, as the RF3 mode is), separates what the client's
acks=all/idempotent mode costs on its own from what replication costs. Prints every mode
and the RF3/RF1 ratios. Targets (issue 14): RF3 acks=all >= 0.5x the RF1 acks=1
throughput; p99 <= 3x RF1's.

    .venv/bin/python bench/replication.py [--n 300000] [--partitions 3] [--reps 3]
                                          [--rate 50000] [--paced-n 100000]
                                          [--cluster processes|in-process]
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from _net import free_port

if TYPE_CHECKING:
    from confluent_kafka import Message

VALUE = b"x" * 100


def serve(data_dir: str) -> None:
    """Child (``--cluster in-process``): run the cluster until stdin closes."""
    from sparklog.cluster import InProcessCluster

    with InProcessCluster(data_dir, brokers=3) as c:
        print(c.bootstrap_servers, flush=True)
        sys.stdin.read()


@contextlib.contextmanager
def cluster(kind: str, data_dir: str) -> Iterator[str]:
    """A 3-broker cluster for the run; yields its bootstrap servers."""
    if kind == "in-process":
        child = subprocess.Popen([sys.executable, __file__, "--serve", data_dir],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None
            yield child.stdout.readline().strip()
        finally:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(60)
        return
    from sparklog.cluster.local import LocalCluster

    for _attempt in range(5):  # the controller's port and the three after it must be free
        port = free_port()
        if port + 3 <= 65535 and all(_port_free(port + i) for i in range(1, 4)):
            break
    local = LocalCluster(data_dir, brokers=3, port=port).start()
    try:
        yield local.bootstrap_servers
    finally:
        local.stop()


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def produce(bootstrap: str, topic: str, n: int, acks: str,
            rate: float = 0.0) -> tuple[float, list[float]]:
    """(records/s, latencies in ms) for n records, paced at ``rate`` records/s when > 0.
    A record's latency runs from its CreateTime (stamped by produce()) to its delivery
    report: ms resolution, no per-record closure, so the client's own cost stays small."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                  "batch.size": 1 << 20, "enable.idempotence": acks == "all",
                  "queue.buffering.max.messages": 1_000_000})
    latencies: list[float] = []
    errors: list[object] = []

    def delivered(err: object, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        latencies.append(time.time() * 1000 - msg.timestamp()[1])

    # connections, metadata and (idempotent) the producer id before the clock starts
    p.produce(topic, VALUE)
    p.flush(60)
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, VALUE, on_delivery=delivered)
                break
            except BufferError:
                p.poll(0.001)
        if i % 1000 == 0:
            p.poll(0)
            if rate > 0:
                ahead = t0 + i / rate - time.perf_counter()
                if ahead > 0:
                    p.poll(ahead)  # delivery reports are served while waiting
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


def delete(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1]


MODES = (("rf1 acks=1", 1, "1", {}),
         ("rf1 acks=all", 1, "all", {}),
         ("rf3 acks=all", 3, "all", {"min.insync.replicas": "2"}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rate", type=float, default=50_000)
    ap.add_argument("--paced-n", type=int, default=100_000)
    ap.add_argument("--cluster", choices=("processes", "in-process"), default="processes",
                    help="a process per node (default), or every node in one child process")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
        return
    # mode -> [(records/s, p50, p99, paced p50, paced p99)]
    results: dict[str, list[tuple[float, ...]]] = {m[0]: [] for m in MODES}
    with tempfile.TemporaryDirectory() as d, cluster(args.cluster, d) as bootstrap:
        for rep in range(args.reps):
            for i, (mode, rf, acks, configs) in enumerate(MODES):
                topic = f"bench-{i}-{rep}"
                create(bootstrap, topic, args.partitions, rf, configs)
                rate, lat = produce(bootstrap, topic, args.n, acks)
                _, paced = produce(bootstrap, topic, args.paced_n, acks, args.rate)
                row = (rate, pct(lat, 50), pct(lat, 99), pct(paced, 50), pct(paced, 99))
                results[mode].append(row)
                # Each measured topic goes once measured, so every mode writes into the same
                # amount of page cache: on this machine's VM, memory past ~4 GiB in use is
                # fresh to the host and written ~9x slower (3 GiB/s -> 0.34 GiB/s, measured
                # with plain 512 MiB file writes to /dev/shm), which otherwise slows whichever
                # mode runs after the cluster has written a few GiB (RF3 writes 3x the bytes).
                delete(bootstrap, topic)
                print(f"{mode} rep {rep}: {rate:,.0f} records/s, p50 {row[1]:.1f} ms, "
                      f"p99 {row[2]:.1f} ms; at {args.rate:,.0f}/s p50 {row[3]:.1f} ms, "
                      f"p99 {row[4]:.1f} ms", flush=True)
    med = {m: tuple(statistics.median(r[i] for r in rows) for i in range(5))
           for m, rows in results.items()}
    print(f"medians of {args.reps} reps, {args.n:,} records full speed, {args.paced_n:,} at "
          f"{args.rate:,.0f}/s, {args.partitions} partitions:")
    for m, (rate, p50, p99, pp50, pp99) in med.items():
        print(f"  {m:13} {rate:>9,.0f} records/s  p50 {p50:7.1f} ms  p99 {p99:7.1f} ms   "
              f"paced: p50 {pp50:5.1f} ms  p99 {pp99:5.1f} ms")
    rf1, ref, rf3 = (med[m[0]] for m in MODES)
    print(f"RF3 acks=all / RF1 acks=1: throughput {rf3[0] / rf1[0]:.2f}x (target >= 0.5x), "
          f"p99 {rf3[2] / rf1[2]:.2f}x full speed, {rf3[4] / rf1[4]:.2f}x paced "
          f"(target <= 3x)")
    print(f"RF3 acks=all / RF1 acks=all: throughput {rf3[0] / ref[0]:.2f}x, "
          f"p99 paced {rf3[4] / ref[4]:.2f}x")


if __name__ == "__main__":
    main()
