"""A sparklog cluster hosted by Spark: the driver runs the controller and a stable
bootstrap address, each executor one broker (``sparklog cluster spark``, here with Spark's
``local-cluster[3,1,1024]``: three executor JVMs on this machine).

The example starts a Structured Streaming query that reads a topic through the bootstrap
address, writes half the topic's records with confluent-kafka, kills one executor JVM
(SIGKILL) under the running query, writes the other half, and shows the query still running
with every record read. Meanwhile the lost broker is fenced and Spark's replacement
executor registers as a new broker and takes over the lost broker's replicas
(``broker.replacement.timeout.ms``, 5 s here) until every partition is back on three
in-sync replicas; a batch read then finds the whole topic again. The topic has replication
factor 3 and min.insync.replicas 2, so the lost broker's leaderships move to the other
replicas at once.

    python examples/spark_cluster.py          # Linux (it finds the executor by /proc)
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

N = 300


def broker_executors(data_dir: Path) -> dict[int, int]:
    """node.id -> the pid of the executor JVM running that broker (its parent process), for
    the brokers with their data under ``data_dir`` (this application's, not any other
    sparklog broker on the machine)."""
    mine = os.fsencode(data_dir)
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if b"process.roles=broker" in cmd and any(a.startswith(mine) for a in cmd):
            node = next(int(a.split(b"=")[1]) for a in cmd if a.startswith(b"node.id="))
            out[node] = int(stat[stat.rindex(")") + 2:].split()[1])
    return out


def produce(bootstrap: str, topic: str, first: int, end: int) -> None:
    """Records ``first`` .. ``end - 1``, acks=all and idempotent: each is acknowledged once
    every in-sync replica has it."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                         "enable.idempotence": True})
    for i in range(first, end):
        producer.produce(topic, key=f"k{i % 7}", value=f"{topic}-{i}")
    if producer.flush(60) != 0:
        raise SystemExit("not every record was delivered")
    print(f"  wrote records {first}..{end - 1} of '{topic}'")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait(what: str, check: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting: {what}")
        time.sleep(0.5)
    print(f"  ok: {what}")


def main() -> int:
    from _common import LOG4J2_CONF, local_spark

    from sparklog.client.admin import AdminClient, NewTopic
    from sparklog.cluster.spark_hosted import SparkHostedCluster

    with tempfile.TemporaryDirectory(prefix="sparklog-spark-cluster-") as tmp, \
            open(Path(tmp) / "spark.log", "w") as log:
        cluster = SparkHostedCluster(
            "local-cluster[3,1,1024]", port=free_port(), data_dir=Path(tmp) / "data",
            conf={"spark.ui.enabled": "false",
                  "spark.driver.extraJavaOptions":
                      f"-Dlog4j2.configurationFile={LOG4J2_CONF.as_uri()}"},
            server={"broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500",
                    "broker.replacement.timeout.ms": "5000"},
            stderr=log.fileno())
        try:
            cluster.start()
            line = cluster.readline()
            if line is None or not line.startswith("bootstrap.servers="):
                raise SystemExit(f"the cluster did not start; see {log.name}")
            bootstrap = line.split("=", 1)[1]
            print(f"Spark-hosted cluster up: {line}")
            def states() -> dict[int, str]:
                with AdminClient({"bootstrap.servers": bootstrap}) as admin:
                    desc = admin.describe_cluster(include_fenced=True)
                return {b.node_id: "fenced" if b.node_id in desc.fenced else "live"
                        for b in desc.brokers}

            def create(topic: str) -> None:
                with AdminClient({"bootstrap.servers": bootstrap}) as admin:
                    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3,
                                                  config={"min.insync.replicas": "2"})])

            def replicated_without(topic: str, gone: int) -> bool:
                """Every partition on 3 in-sync replicas, none of them ``gone``."""
                from confluent_kafka.admin import AdminClient as CkAdmin

                parts = (CkAdmin({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
                         .topics[topic].partitions.values())
                return all(len(p.replicas) == 3 and gone not in p.replicas
                           and sorted(p.isrs) == sorted(p.replicas) for p in parts)

            print(f"brokers: {states()}")
            create("events")
            spark = local_spark("sparklog-spark-cluster")
            query = (spark.readStream.format("sparklog")
                     .option("bootstrap.servers", bootstrap).option("subscribe", "events")
                     .option("startingOffsets", "earliest").load()
                     .writeStream.format("memory").queryName("events_rows")
                     .trigger(processingTime="1 second").start())

            def streamed() -> int:
                if query.exception() is not None:
                    raise SystemExit(f"the stream failed: {query.exception()}")
                return spark.sql("SELECT count(DISTINCT value) n FROM events_rows").first().n

            produce(bootstrap, "events", 0, N // 2)
            wait(f"the stream read the first {N // 2} records", lambda: streamed() == N // 2)

            executors = broker_executors(Path(tmp) / "data")
            victim = min(executors)
            print(f"SIGKILL the executor JVM (pid {executors[victim]}) of broker {victim}, "
                  "under the running stream")
            os.kill(executors[victim], signal.SIGKILL)
            produce(bootstrap, "events", N // 2, N)  # the producer follows the new leaders
            wait(f"the stream, still running, read all {N} records",
                 lambda: streamed() == N and query.isActive)
            wait(f"broker {victim} fenced", lambda: states().get(victim) == "fenced")
            wait("Spark's replacement executor registered as a new broker",
                 lambda: any(n > max(executors) and s == "live" for n, s in states().items()))
            print(f"brokers: {states()}")
            wait(f"broker {victim}'s replicas moved: 'events' on 3 in-sync replicas again",
                 lambda: replicated_without("events", victim))
            again = (spark.read.format("sparklog").option("bootstrap.servers", bootstrap)
                     .option("subscribe", "events").load().count())
            print(f"a batch read found {again} of {N} records after the loss")
            got = streamed()
            query.stop()
            spark.stop()
            return 0 if got == N and again == N else 1
        finally:
            cluster.stop()
            print("Spark application stopped")


if __name__ == "__main__":
    sys.exit(main())
