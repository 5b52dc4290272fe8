"""The exactly-once sink end to end: Spark writes, confluent-kafka reads with read_committed.

The streaming copy's driver is a child process SIGKILLed twice mid-stream and restarted from
its checkpoint, and one task attempt fails: the output holds every input record exactly once
(missing 0, extra 0) and no transaction of the query is left open.
"""

import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.kafka_clients import ck_read_to_end
from tests.helpers.polling import wait_for
from tests.helpers.servers import REPO
from tests.helpers.spark import eos_copy_query, produce, source


def _batches(ckpt: str, log: str = "commits") -> int:
    """How many batches the checkpoint's ``log`` (commits: done; offsets: started) has."""
    d = Path(ckpt) / log
    return len([p for p in d.iterdir() if p.name.isdigit()]) if d.is_dir() else 0


def _in_flight(ckpt: str, done: int) -> bool:
    """At least ``done`` batches committed and a later one started, not committed."""
    committed = _batches(ckpt)
    return committed >= done and _batches(ckpt, "offsets") > committed


def _run_child_until(args: list[str], ckpt: str, batches: int) -> None:
    """Run the child driver until the checkpoint has ``batches`` committed batches and the
    next one is in flight, then SIGKILL its process group (driver JVM, Python workers)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.spark.spark_sink_eos_child", *args],
        cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: _in_flight(ckpt, batches), 150,
                 what=f"{batches} committed batches in the child", interval=0.05)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)
    assert child.returncode == -signal.SIGKILL


def _open_txns(admin, prefix: str = "sparklog-") -> list[str]:
    return [t.transactional_id for t in admin.list_transactions(states=["Ongoing"])
            if t.transactional_id.startswith(prefix)]


def _assert_exactly_once(got: list[bytes], expected: list[bytes]) -> None:
    have, want = Counter(got), Counter(expected)
    missing, extra = want - have, have - want
    assert (sum(missing.values()), sum(extra.values())) == (0, 0), (missing, extra)


def _failing_write(spark, start: int, end: int, tasks: int, bs: str, topic: str,
                   **options: str) -> None:
    """``df.write`` of the values start..end-1 in ``tasks`` tasks, whose last task fails on
    its last row ("deliberate failure"), after it has written (some of) its rows."""
    from pyspark.sql.functions import udf

    last = str(end - 1)

    def fail_last(v: str) -> str:
        if v == last:
            raise RuntimeError("deliberate failure")
        return v

    bad = spark.range(start, end, numPartitions=tasks).selectExpr("CAST(id AS STRING) AS v")
    writer = bad.select(udf(fail_last, "string")("v").alias("value")).write.format(
        "sparklog").option("bootstrap.servers", bs).option("topic", topic)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


def test_stream_copy_exactly_once_through_two_driver_kills_and_a_failed_task(
        spark, bootstrap, topic_factory, admin, tmp_path):
    src, out = topic_factory(partitions=2), topic_factory(partitions=2)
    values = [b"v%d" % i for i in range(400)]
    produce(bootstrap, src, values)
    ckpt, marker = str(tmp_path / "ckpt"), str(tmp_path / "failed-once")
    args = [bootstrap, src, out, ckpt, marker]
    _run_child_until(args, ckpt, 1)
    _run_child_until(args, ckpt, _batches(ckpt) + 1)
    assert os.path.exists(marker)  # the deliberate failure happened (and was retried)
    q = eos_copy_query(spark, bootstrap, src, out, ckpt, marker, available_now=True,
                       max_offsets=1000)
    assert q.awaitTermination(60) and q.exception() is None
    _assert_exactly_once([m.value for m in ck_read_to_end(bootstrap, out, 2)], values)
    assert _open_txns(admin) == []


def test_exactly_once_false_keeps_the_at_least_once_path(spark, bootstrap, topic_factory,
                                                         admin, tmp_path):
    src, out = topic_factory(), topic_factory()
    values = [b"%d" % i for i in range(50)]
    produce(bootstrap, src, values)
    q = (
        source(spark, bootstrap, subscribe=src, startingOffsets="earliest")
        .select("value").writeStream.format("sparklog")
        .option("bootstrap.servers", bootstrap).option("topic", out)
        .option("exactlyOnce", "false")
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True).start()
    )
    assert q.awaitTermination(60) and q.exception() is None
    _assert_exactly_once([m.value for m in ck_read_to_end(bootstrap, out, 1)], values)
    # written without transactions: even a read_uncommitted read sees no control batch
    offsets = [m.offset for m in ck_read_to_end(bootstrap, out, 1, "read_uncommitted")]
    assert offsets == list(range(50))


def test_batch_write_is_exactly_once_and_a_failed_job_leaves_nothing(
        spark, bootstrap, topic_factory, admin):

    t = topic_factory(partitions=2)
    df = spark.range(0, 100, numPartitions=2).selectExpr("CAST(id AS STRING) AS value")
    df.write.format("sparklog").option("bootstrap.servers", bootstrap).option(
        "topic", t).mode("append").save()
    got = ck_read_to_end(bootstrap, t, 2)
    _assert_exactly_once([m.value for m in got], [b"%d" % i for i in range(100)])

    # partition 1's last row: the task has written (some of) its rows
    with pytest.raises(Exception, match="deliberate failure"):
        _failing_write(spark, 100, 200, 2, bootstrap, t)
    # the aborted write's rows are not visible, not even those of its finished task
    _assert_exactly_once([m.value for m in ck_read_to_end(bootstrap, t, 2)],
                         [b"%d" % i for i in range(100)])
    assert _open_txns(admin, "sparklog-write-") == []


def test_read_committed_source_skips_an_aborted_transaction(spark, bootstrap, topic_factory,
                                                            tmp_path):
    from confluent_kafka import Producer as CkProducer

    t = topic_factory()
    p = CkProducer({"bootstrap.servers": bootstrap, "transactional.id": f"ck-{uuid.uuid4()}"})
    p.init_transactions(30)
    for outcome, vals in (("commit", [b"c1", b"c2"]), ("abort", [b"a1", b"a2", b"a3"]),
                          ("commit", [b"c3"])):
        p.begin_transaction()
        for v in vals:
            p.produce(t, v)
        p.flush(30)
        (p.commit_transaction if outcome == "commit" else p.abort_transaction)(30)
    # batch read, default isolation (read_committed): markers and the aborted range dropped
    rows = source(spark, bootstrap, stream=False, subscribe=t).select("value", "offset").collect()
    assert [bytes(r.value) for r in rows] == [b"c1", b"c2", b"c3"]
    assert [r.offset for r in rows] == [0, 1, 7]  # c1 c2 | marker | a1-a3 | marker | c3
    everything = source(spark, bootstrap, stream=False, subscribe=t,
                        **{"isolation.level": "read_uncommitted"}).count()
    assert everything == 6
    # a stream stops at the last stable offset (an open transaction's first), and its
    # checkpointed offsets resume past the markers exactly once that transaction commits
    p.begin_transaction()
    p.produce(t, b"late")
    p.flush(30)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")

    def run() -> list[str]:
        q = (source(spark, bootstrap, subscribe=t, startingOffsets="earliest")
             .selectExpr("CAST(value AS STRING) AS v").writeStream.format("parquet")
             .option("path", out).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        assert q.awaitTermination(60) and q.exception() is None
        return sorted(r.v for r in spark.read.parquet(out).collect())

    assert run() == ["c1", "c2", "c3"]
    p.commit_transaction(30)
    assert run() == ["c1", "c2", "c3", "late"]


def test_batch_write_is_exactly_once_on_a_replicated_cluster(spark, tmp_path):
    """The sink on a controller and three broker processes that allow two-phase commit,
    topic RF 3 with min.insync.replicas 2: each task's prepared transaction, the driver's
    commit record and the commits go through brokers that mostly do not coordinate them
    (KIP-890 verification broker to broker), and a read_committed reader sees every row
    once; a failed job leaves nothing visible and no transaction open."""

    from sparklog.client import AdminClient
    from tests.cluster.conftest import CLUSTER_CONFIG, cluster_of
    from tests.helpers.cluster import partition_states
    from tests.helpers.kafka_clients import create_topic

    nodes = cluster_of(tmp_path, {**CLUSTER_CONFIG, "transaction.two.phase.commit.enable": "true"})
    cluster = next(nodes)
    try:
        bs, t = cluster.bootstrap_servers, "eos-rf3"
        create_topic(bs, t, 3, 3, {"min.insync.replicas": "2"})
        wait_for(lambda: all(leader > 0 and len(isr) == 3
                             for leader, isr in partition_states(bs, t).values()),
                 20, "every partition led with 3 in sync")
        df = spark.range(0, 300, numPartitions=3).selectExpr("CAST(id AS STRING) AS value")
        df.write.format("sparklog").option("bootstrap.servers", bs).option("topic", t) \
            .option("exactlyOnce", "true").mode("append").save()
        want = [b"%d" % i for i in range(300)]
        _assert_exactly_once([m.value for m in ck_read_to_end(bs, t, 3)], want)

        with pytest.raises(Exception, match="deliberate failure"):
            _failing_write(spark, 300, 600, 3, bs, t, exactlyOnce="true")
        _assert_exactly_once([m.value for m in ck_read_to_end(bs, t, 3)], want)
        with AdminClient({"bootstrap.servers": bs}) as admin:
            assert _open_txns(admin, "sparklog-write-") == []
    finally:
        nodes.close()  # stops the cluster
