"""``sparklog cluster spark`` with Spark's ``local-cluster[3,1,1024]`` (real executor JVMs):
the driver runs the controller and the bootstrap address, each executor a broker; Kafka
clients produce and consume through the bootstrap address; a SIGKILLed executor's broker is
fenced and Spark's replacement executor registers as a new broker, which takes over the lost
broker's replicas (``broker.replacement.timeout.ms``) while clients produce; another Spark
application's stream through the bootstrap address runs on across that loss; SIGTERM on
the launcher leaves no process (checked by pid). With the object-storage tier on, the
replacement broker of a tiered topic copies only the tail after the bucket from the leader
(KIP-405's follower path), and the old records are still served from the bucket."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparklog.client.admin import AdminClient, NewTopic
from tests.cluster.conftest import CLUSTER_CONFIG
from tests.helpers.cli import ok, run
from tests.helpers.kafka_clients import ck_consume, ck_produce, create_topic, make_messages
from tests.helpers.net import free_port
from tests.helpers.polling import wait_for
from tests.helpers.procs import Proc, alive, children, session
from tests.helpers.replication import ProducerLoad, damage, fully_replicated_without
from tests.helpers.servers import REPO
from tests.helpers.spark import make_spark_session

pytestmark = [pytest.mark.spark_cluster, pytest.mark.timeout(180)]

_BROKER_LINE = re.compile(r"broker (\d+) \S+ (live|fenced)")
# a lost executor's broker is replaced this long after it was fenced
REPLACEMENT_MS = 5000


@dataclass
class Launched:
    proc: subprocess.Popen[str]
    bootstrap: str

    @property
    def app(self) -> list[Proc]:
        """The Spark application's processes (spark-submit's session)."""
        return [p for c in children(self.proc.pid) for p in session(c.pid)]

    def brokers(self) -> dict[int, Proc]:
        return {int(m[1]): p for p in self.app
                if (m := re.search(r"process\.roles=broker .*node\.id=(\d+)", p.cmdline))}

    def states(self) -> dict[int, str]:
        out = ok(run("cluster", "describe", "--bootstrap-server", self.bootstrap))
        return {int(m[1]): m[2] for m in _BROKER_LINE.finditer(out)}


@contextlib.contextmanager
def _launch(tmp_path: Path, **more: str) -> Iterator[Launched]:
    """``sparklog cluster spark`` on ``local-cluster[3,1,1024]`` with the cluster's test
    config and ``more`` (broker keys with "_" for "."), stopped with SIGTERM at the end."""
    port = free_port()
    config = {**CLUSTER_CONFIG, "broker.replacement.timeout.ms": str(REPLACEMENT_MS),
              **{k.replace("_", "."): v for k, v in more.items()}}
    sets = [a for k, v in config.items() for a in ("--set", f"{k}={v}")]
    with open(tmp_path / "spark.log", "w") as log, subprocess.Popen(
        [sys.executable, "-m", "sparklog.cli.main", "cluster", "spark",
         "--master", "local-cluster[3,1,1024]", "--data-dir", str(tmp_path / "data"),
         "--port", str(port), "--conf", "spark.ui.enabled=false", *sets],
        stdout=subprocess.PIPE, stderr=log, cwd=str(REPO), text=True) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            assert re.fullmatch(rf"bootstrap\.servers=\S+:{port}", line), (
                line, (tmp_path / "spark.log").read_text()[-3000:])
            launched = Launched(proc, line.split("=", 1)[1])
            for n, broker in launched.brokers().items():
                # a broker logs to its executor's stderr, in the executor's working directory:
                # linked beside spark.log, its tail ends a failed test's report (conftest)
                work = Path(os.readlink(f"/proc/{broker.ppid}/cwd"))
                (tmp_path / f"executor-broker-{n}.log").symlink_to(work / "stderr")
            yield launched
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            proc.wait(120)


@pytest.fixture
def spark_cluster(tmp_path) -> Iterator[Launched]:
    with _launch(tmp_path) as launched:
        yield launched


def test_three_executor_brokers_serve_kafka_clients_and_sigterm_leaves_nothing(spark_cluster,
                                                                                tmp_path):
    c = spark_cluster
    brokers = c.brokers()
    assert sorted(brokers) == [1, 2, 3]
    assert c.states() == {1: "live", 2: "live", 3: "live"}
    for b in brokers.values():  # one broker per executor JVM, its child
        assert "CoarseGrainedExecutorBackend" in next(
            p.cmdline for p in c.app if p.pid == b.ppid)

    create_topic(c.bootstrap, "spark-hosted", partitions=6)
    msgs = make_messages(60, 6)
    ck_produce(c.bootstrap, "spark-hosted", msgs)
    assert sorted(m.value for m in ck_consume(c.bootstrap, "spark-hosted", 6, len(msgs))) == \
        sorted(m.value for m in msgs)

    pids = [p.pid for p in c.app]
    assert len(pids) >= 8  # spark-submit, the driver app, the controller, 3 executors, 3 brokers
    c.proc.send_signal(signal.SIGTERM)
    assert c.proc.wait(120) == 0
    assert [pid for pid in pids if alive(pid)] == []
    # the controller (its log is the driver's) saw each broker's controlled shutdown
    log = (tmp_path / "spark.log").read_text()
    assert sorted(int(n) for n in re.findall(r"broker (\d+) fenced \(controlled shutdown\)", log)) \
        == [1, 2, 3]


def test_a_killed_executor_is_replaced_and_replication_restored(spark_cluster):
    """SIGKILL on an executor JVM while confluent-kafka (acks=all, idempotent) produces to
    an RF 3 topic (min.insync.replicas 2): its broker is fenced, Spark's replacement
    executor registers as a new broker, takes over the lost broker's replicas once
    ``broker.replacement.timeout.ms`` passed, and every partition is back to 3 in-sync
    replicas; no acknowledged record lost, duplicated or reordered."""
    c = spark_cluster
    brokers = c.brokers()
    assert sorted(brokers) == [1, 2, 3]
    partitions = 3
    with AdminClient({"bootstrap.servers": c.bootstrap}) as admin:
        admin.create_topics([NewTopic("kill", num_partitions=partitions, replication_factor=3,
                                      config={"min.insync.replicas": "2"})])
    with ProducerLoad(c.bootstrap, "kill", partitions) as producer:
        wait_for(lambda: producer.acked_count() >= 300, timeout=30,
                 what="records acknowledged before the kill")
        victim = brokers[2]
        os.kill(victim.ppid, signal.SIGKILL)  # the executor JVM
        wait_for(lambda: not alive(victim.pid), timeout=30, what="the broker stops with its JVM")
        wait_for(lambda: c.states().get(2) == "fenced", timeout=30, what="broker 2 fenced")
        # Spark's replacement executor gets a new id, so a new node.id
        wait_for(lambda: any(s == "live" for n, s in c.states().items() if n > 3),
                 timeout=90, what="the replacement executor's broker registered")
        wait_for(lambda: fully_replicated_without(c.bootstrap, "kill", partitions, 3, 2),
                 timeout=REPLACEMENT_MS / 1000 + 30,
                 what="every partition on 3 in-sync replicas without the lost broker")
    assert producer.errors == []
    dmg, _ = damage(c.bootstrap, "kill", partitions, producer, producer.acked_count())
    assert dmg.none, dmg
    assert c.proc.poll() is None


def test_another_spark_application_streams_through_the_bootstrap_address_across_a_kill(
        spark_cluster, tmp_path):
    """readStream/writeStream format("sparklog") of a second application on RF 3 topics
    (min.insync.replicas 2), an executor killed mid-stream: its broker's leaderships move
    to the other replicas and the output holds every input record."""
    c = spark_cluster
    replicated = {"min.insync.replicas": "2"}
    with AdminClient({"bootstrap.servers": c.bootstrap}) as admin:
        admin.create_topics([NewTopic(t, num_partitions=2, replication_factor=3, config=replicated)
                             for t in ("in", "out")])
    spark = make_spark_session("sparklog-second-app")
    try:
        query = (spark.readStream.format("sparklog").option("bootstrap.servers", c.bootstrap)
                 .option("subscribe", "in").option("startingOffsets", "earliest").load()
                 .selectExpr("key", "value")
                 .writeStream.format("sparklog").option("bootstrap.servers", c.bootstrap)
                 .option("topic", "out").option("checkpointLocation", str(tmp_path / "ckpt"))
                 .trigger(processingTime="500 milliseconds").start())
        before, after = make_messages(40, 2, tag="before"), make_messages(40, 2, tag="after")
        ck_produce(c.bootstrap, "in", before)
        # the query's own exception says why it wrote too little, if it did
        assert len(ck_consume(c.bootstrap, "out", 2, len(before))) >= len(before), \
            query.exception()
        victim = c.brokers()[1]
        os.kill(victim.ppid, signal.SIGKILL)
        wait_for(lambda: c.states().get(1) == "fenced", timeout=30, what="broker 1 fenced")
        ck_produce(c.bootstrap, "in", after)
        out = ck_consume(c.bootstrap, "out", 2, len(before) + len(after))
        assert query.exception() is None
        assert {m.value for m in out} == {m.value for m in before + after}  # at least once
        query.stop()
    finally:
        spark.stop()


def test_a_replacement_executor_copies_only_the_tail_of_a_tiered_topic(tmp_path):
    """A tiered RF 3 topic (``file://`` bucket) under an acks=all load: once its sealed
    segments are uploaded and dropped locally, replicas keep what they copy from then on
    (``local.retention.bytes=-2``); an executor is SIGKILLed, and Spark's replacement
    broker, empty, restarts its replica after an uploaded segment instead of copying the log
    from offset 0, rejoins the ISR, and every acknowledged record is read back once and in
    order (the old ones from the bucket)."""
    bucket = tmp_path / "bucket"
    data = tmp_path / "data"
    with _launch(tmp_path, remote_log_storage_system_enable="true",
                 remote_log_storage_url=f"file://{bucket}",
                 remote_log_manager_task_interval_ms="200") as c:
        brokers = c.brokers()
        assert sorted(brokers) == [1, 2, 3]
        with AdminClient({"bootstrap.servers": c.bootstrap}) as admin:
            admin.create_topics([NewTopic("tiered", num_partitions=1, replication_factor=3, config={
                "min.insync.replicas": "2", "remote.storage.enable": "true",
                "segment.bytes": "16384", "local.retention.bytes": "0", "retention.ms": "-1"})])

        def manifest() -> dict:
            found = list(bucket.glob("tiered-*/0/manifest.json"))
            return json.loads(found[0].read_text()) if found else {"segments": []}

        def local_start(node: int) -> int:
            logs = sorted((data / f"node-{node}" / "tiered-0").glob("*.log"))
            return int(logs[0].name[:20]) if logs else 0

        with ProducerLoad(c.bootstrap, "tiered", 1, rate=2000) as producer:
            wait_for(lambda: len(manifest()["segments"]) >= 4
                     and all(local_start(n) > 0 for n in brokers), timeout=60,
                     what="segments uploaded and dropped from every replica's disk")
            ok(run("configs", "--bootstrap-server", c.bootstrap, "--entity-type", "topics",
                   "--entity-name", "tiered", "--alter", "--add-config",
                   "local.retention.bytes=-2"))
            victim = brokers[2]
            os.kill(victim.ppid, signal.SIGKILL)  # the executor JVM
            wait_for(lambda: c.states().get(2) == "fenced", timeout=30, what="broker 2 fenced")
            wait_for(lambda: any(s == "live" for n, s in c.states().items() if n > 3),
                     timeout=90, what="the replacement executor's broker registered")
            wait_for(lambda: fully_replicated_without(c.bootstrap, "tiered", 1, 3, 2),
                     timeout=REPLACEMENT_MS / 1000 + 30,
                     what="the partition on 3 in-sync replicas without the lost broker")
        assert producer.errors == []
        dmg, _ = damage(c.bootstrap, "tiered", 1, producer, producer.acked_count())
        assert dmg.none, dmg
        (new,) = [n for n in c.states() if n > 3]
        # the replacement's log begins right after an uploaded segment, not at offset 0
        start = local_start(new)
        assert start > 0 and start in {s["end_offset"] for s in manifest()["segments"]}, start
