"""A sparklog cluster hosted by Spark: the driver runs the controller and a stable
bootstrap address, each executor one broker (``sparklog cluster spark``, here with Spark's
``local-cluster[3,1,1024]``: three executor JVMs on this machine).

The example writes a topic with confluent-kafka and reads it with Spark through the
bootstrap address, kills one executor JVM (SIGKILL), watches its broker get fenced and
Spark's replacement executor register as a new broker and take over the lost broker's
replicas (``broker.replacement.timeout.ms``, 5 s here) until every partition is back on
three in-sync replicas, reads the first topic again in full, then writes and streams a
second topic through the same address. The topics have replication factor 3 and
min.insync.replicas 2, so the lost broker's leaderships move to the other replicas at once.

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


def produce(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(N):
        producer.produce(topic, key=f"k{i % 7}", value=f"{topic}-{i}")
    assert producer.flush(60) == 0, "not every record was delivered"


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
            create("before")
            produce(bootstrap, "before")
            spark = local_spark("sparklog-spark-cluster")
            read = (spark.read.format("sparklog").option("bootstrap.servers", bootstrap)
                    .option("subscribe", "before").load())
            print(f"Spark read {read.count()} of {N} records from 'before'")

            executors = broker_executors(Path(tmp) / "data")
            victim = min(executors)
            print(f"SIGKILL the executor JVM (pid {executors[victim]}) of broker {victim}")
            os.kill(executors[victim], signal.SIGKILL)
            wait(f"broker {victim} fenced", lambda: states().get(victim) == "fenced")
            wait("Spark's replacement executor registered as a new broker",
                 lambda: any(n > max(executors) and s == "live" for n, s in states().items()))
            print(f"brokers: {states()}")
            wait(f"broker {victim}'s replicas moved: 'before' on 3 in-sync replicas again",
                 lambda: replicated_without("before", victim))
            again = read.count()
            print(f"Spark read {again} of {N} records from 'before' after the loss")

            create("after")
            produce(bootstrap, "after")
            query = (spark.readStream.format("sparklog")
                     .option("bootstrap.servers", bootstrap).option("subscribe", "after")
                     .option("startingOffsets", "earliest").load()
                     .writeStream.format("memory").queryName("after_rows")
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            streamed = spark.sql("SELECT count(*) n FROM after_rows").first().n
            print(f"a Spark stream read {streamed} of {N} records from 'after' through the "
                  "same bootstrap address")
            spark.stop()
            return 0 if streamed == N and again == N else 1
        finally:
            cluster.stop()
            print("Spark application stopped")


if __name__ == "__main__":
    sys.exit(main())
