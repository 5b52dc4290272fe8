"""``storageReads``: ranges in uploaded segments are read from the bucket by the tasks
themselves, and the rows are exactly those the brokers give (``storageReads=never``): every
column, every offset, per-partition order, batch and streaming (AvailableNow, and a query
restarted from its checkpoint mid-way), on a ``file://`` tier and on moto's S3; under
read_committed, also when a transaction begun in uploaded segments is aborted in the local tail.

The module's broker has a ``file://`` tier; the S3 case starts its own broker."""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path

import fsspec
import pytest

from sparklog.cluster.embedded import EmbeddedCluster
from sparklog.spark.options import parse_source_options
from sparklog.spark.planning import OffsetRange, RangeGroup
from sparklog.spark.reader import SparklogBatchReader
from sparklog.spark.schema import arrow_schema, source_schema
from sparklog.spark.segment_reads import BucketRange, read_planned
from tests.helpers.kafka_clients import ck_produce, ck_txn_producer, make_messages
from tests.helpers.polling import wait_for
from tests.helpers.spark import source

TIER = {"remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": "200"}
TOPIC = {"remote.storage.enable": "true", "segment.bytes": "8192",
         "local.retention.bytes": "0", "retention.ms": "-1"}
COLUMNS = ("partition", "offset", "key", "value", "timestamp", "timestampType", "headers")
# executors read every micro-batch (the driver's own small reads go through brokers)
STREAM = {"driverReadMaxOffsets": 0}


@pytest.fixture(scope="module")
def bucket_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bucket")


@pytest.fixture(scope="module")
def broker_config(bucket_root: Path) -> dict[str, str]:
    return {"group.initial.rebalance.delay.ms": "0", "num.partitions": "1",
            "offsets.topic.num.partitions": "4", **TIER,
            "remote.log.storage.url": f"file://{bucket_root}"}


def _uploaded_end(fs: fsspec.AbstractFileSystem, root: str, topic: str, partition: int) -> int:
    """The end offset the partition's manifest lists (0: none yet)."""
    fs.invalidate_cache()
    found = [p for p in fs.find(root) if f"/{topic}-" in p
             and p.endswith(f"/{partition}/manifest.json")]
    if not found:
        return 0
    segments = json.loads(fs.cat_file(found[0]))["segments"]
    return segments[-1]["end_offset"] if segments else 0


def _tiered_topic(admin, bootstrap: str, fs, root: str, partitions: int, n: int) -> str:  # noqa: ANN001
    from sparklog.client import NewTopic

    t = f"t-{uuid.uuid4().hex[:10]}"
    admin.create_topics([NewTopic(t, num_partitions=partitions, config=TOPIC)])
    wait_for(lambda: t in admin.list_topics(), 10, f"topic {t}")
    ck_produce(bootstrap, t, make_messages(n, partitions, headers=True, tag=t),
               **{"batch.size": 2048})
    for p in range(partitions):
        wait_for(lambda p=p: _uploaded_end(fs, root, t, p) > n // partitions // 2, 30,
                 f"{t}-{p} mostly uploaded")
    return t


def _rows(rows) -> list[tuple]:  # noqa: ANN001
    out = [tuple(r[c] for c in COLUMNS) for r in rows]
    for p in {r[0] for r in out}:  # each partition in offset order, every offset once
        offsets = [r[1] for r in out if r[0] == p]
        assert offsets == sorted(set(offsets)), f"partition {p} out of order"
    return out


def _headers_as_tuples(rows: list[tuple]) -> list[tuple]:
    return sorted(r[:-1] + (tuple((h.key, h.value) for h in r[-1]),) for r in rows)


def _tasks(bootstrap: str, topic: str, **extra: str) -> list[OffsetRange | RangeGroup]:
    """The tasks a batch read of ``topic`` plans (the driver side, no Spark)."""
    opts = parse_source_options({"bootstrap.servers": bootstrap, "subscribe": topic,
                                 "minRecordsPerPartition": "1", **extra}, streaming=False)
    return SparklogBatchReader(opts, source_schema(True)).partitions()


def _bucket_tasks(bootstrap: str, topic: str, **extra: str) -> list[BucketRange]:
    """The bucket ranges a batch read of ``topic`` plans."""
    tasks = _tasks(bootstrap, topic, **extra)
    ranges = [r for t in tasks for r in (t.ranges if isinstance(t, RangeGroup) else (t,))]
    return [r for r in ranges if isinstance(r, BucketRange)]


def _batch(spark, bootstrap: str, topic: str, mode: str, **extra: object) -> list[tuple]:  # noqa: ANN001
    df = source(spark, bootstrap, stream=False, subscribe=topic, includeHeaders="true",
                storageReads=mode, minRecordsPerPartition=1, **extra)
    return _rows(df.collect())


def test_batch_reads_from_the_bucket_give_the_brokers_rows(spark, bootstrap, admin,
                                                           bucket_root):
    fs = fsspec.filesystem("file")
    t = _tiered_topic(admin, bootstrap, fs, str(bucket_root), 2, 3000)
    planned = _bucket_tasks(bootstrap, t)
    assert {(r.topic, r.partition) for r in planned} == {(t, 0), (t, 1)}
    assert all(r.start == 0 and r.segments for r in planned)
    assert _bucket_tasks(bootstrap, t, storageReads="never") == []
    # the local tails are read by the bucket ranges' tasks: as many tasks as with never
    assert len(_tasks(bootstrap, t)) == len(_tasks(bootstrap, t, storageReads="never")) == 2

    never = _batch(spark, bootstrap, t, "never")
    auto = _batch(spark, bootstrap, t, "auto")
    assert len(never) == 3000
    assert _headers_as_tuples(auto) == _headers_as_tuples(never)
    # a bounded read inside segments, split into several tasks per partition
    bounds = json.dumps({t: {"0": 17, "1": 301}})
    ends = json.dumps({t: {"0": 900, "1": 1200}})
    never = _batch(spark, bootstrap, t, "never", startingOffsets=bounds, endingOffsets=ends)
    auto = _batch(spark, bootstrap, t, "auto", startingOffsets=bounds, endingOffsets=ends,
                  maxRecordsPerPartition=250)
    assert len(never) == 883 + 899
    assert _headers_as_tuples(auto) == _headers_as_tuples(never)


def _stream(spark, bootstrap: str, topic: str, mode: str, out: Path, ckpt: Path, *,  # noqa: ANN001
            available_now: bool = True, **extra: str):  # noqa: ANN202
    df = source(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                includeHeaders="true", storageReads=mode, maxOffsetsPerTrigger=700,
                minRecordsPerPartition=1, **STREAM, **extra)
    w = (df.selectExpr(*COLUMNS).writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(ckpt)))
    w = w.trigger(availableNow=True) if available_now else w.trigger(processingTime="0 seconds")
    return w.start()


def _parquet_rows(spark, out: Path) -> list[tuple]:  # noqa: ANN001
    """A file sink's rows (in no particular order) sorted by partition and offset."""
    rows = spark.read.parquet(str(out)).collect()
    return _headers_as_tuples(_rows(sorted(rows, key=lambda r: (r.partition, r.offset))))


def test_streaming_reads_from_the_bucket_and_restarts_from_the_checkpoint(
        spark, bootstrap, admin, bucket_root, tmp_path):
    fs = fsspec.filesystem("file")
    t = _tiered_topic(admin, bootstrap, fs, str(bucket_root), 2, 2400)
    results = {}
    for mode in ("never", "auto"):
        q = _stream(spark, bootstrap, t, mode, tmp_path / mode, tmp_path / f"ckpt-{mode}")
        assert q.awaitTermination(300) and q.exception() is None
        results[mode] = _parquet_rows(spark, tmp_path / mode)
    assert len(results["never"]) == 2400
    assert results["auto"] == results["never"]

    # stopped after two micro-batches, restarted from the checkpoint: the same rows, once
    out, ckpt = tmp_path / "restart", tmp_path / "ckpt-restart"
    q = _stream(spark, bootstrap, t, "auto", out, ckpt, available_now=False)
    wait_for(lambda: q.lastProgress is not None and q.lastProgress["batchId"] >= 1, 240,
             "two micro-batches", interval=0.2)
    q.stop()
    assert 0 < spark.read.parquet(str(out)).count() < 2400
    q = _stream(spark, bootstrap, t, "auto", out, ckpt)
    assert q.awaitTermination(300) and q.exception() is None
    assert _parquet_rows(spark, out) == results["never"]


def test_reads_from_moto_s3_give_the_brokers_rows(spark, moto_s3, tmp_path):
    from sparklog.client import AdminClient

    name = f"b-{uuid.uuid4().hex[:12]}"
    moto_s3.create_bucket(name)
    settings = {f"remote.log.storage.options.{k}": v for k, v in moto_s3.options.items()}
    config = {**TIER, "remote.log.storage.url": f"s3://{name}/tier", **settings}
    storage = {f"storage.options.{k}": v for k, v in moto_s3.options.items()}
    with EmbeddedCluster(tmp_path / "data", config=config) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        try:
            t = _tiered_topic(admin, bs, moto_s3.filesystem(), f"{name}/tier", 1, 1500)
        finally:
            admin.close()
        (planned,) = _bucket_tasks(bs, t, **storage)
        never = _batch(spark, bs, t, "never")
        auto = _batch(spark, bs, t, "auto", **storage)
        assert len(never) == 1500
        assert _headers_as_tuples(auto) == _headers_as_tuples(never)
    # the bucket part needs no broker at all
    assert 0 < planned.bucket_end < planned.end == 1500
    uploaded = dataclasses.replace(planned, end=planned.bucket_end)
    opts = parse_source_options({"bootstrap.servers": bs, "subscribe": t, "includeHeaders":
                                 "true", **storage}, streaming=False)
    target = arrow_schema(source_schema(True))
    got = [row for b in read_planned([uploaded], opts, target) for row in b.to_pylist()]
    assert [r["offset"] for r in got] == list(range(uploaded.end))
    assert [(r["key"], r["value"]) for r in got] == [(r[2], r[3]) for r in never[: uploaded.end]]


def _read_tasks(tasks: list[OffsetRange | RangeGroup], opts) -> list[tuple[int, bytes]]:  # noqa: ANN001
    """(offset, value) of every row the planned tasks read, as executors would (no Spark)."""
    target = arrow_schema(source_schema(False))
    ranges = [list(t.ranges) if isinstance(t, RangeGroup) else [t] for t in tasks]
    return [(row["offset"], row["value"]) for rs in ranges
            for b in read_planned(rs, opts, target) for row in b.to_pylist()]


def test_read_committed_skips_a_transaction_begun_in_the_bucket_and_aborted_locally(
        bootstrap, admin, bucket_root):
    """A transaction begins, plain records upload the segments past its first offset, then
    it is aborted: its ABORT marker (and the .txnindex entry) is only in the local tail, so
    the bucket part stops where it began and the brokers, which know it aborted, serve the
    rest: the rows are those of ``never``, committed ones only."""
    from confluent_kafka import Producer

    from sparklog.client import NewTopic

    t = f"txn-{uuid.uuid4().hex[:10]}"
    admin.create_topics([NewTopic(t, num_partitions=1, config=TOPIC)])
    wait_for(lambda: t in admin.list_topics(), 10, f"topic {t}")
    txn = ck_txn_producer(bootstrap, f"{t}-id", **{"batch.size": 2048})
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 2048})

    def produce(p: Producer, prefix: str, n: int) -> list[bytes]:  # noqa: ANN001
        values = [f"{prefix}-{i}".encode() + b"." * 150 for i in range(n)]
        for v in values:
            p.produce(t, value=v, partition=0)
        p.flush(30)
        return values

    txn.begin_transaction()
    want = produce(txn, "committed", 60)
    txn.commit_transaction(30)
    txn.begin_transaction()
    aborted = produce(txn, "aborted", 60)
    want += produce(plain, "filler", 150)
    txn.abort_transaction(30)  # its marker goes to the active segment, which stays local
    aborted_from = 61  # after the 60 committed records and their marker
    fs = fsspec.filesystem("file")
    wait_for(lambda: _uploaded_end(fs, str(bucket_root), t, 0) > aborted_from + 60, 30,
             "the aborted records uploaded")
    marker = 61 + 60 + 150
    assert _uploaded_end(fs, str(bucket_root), t, 0) <= marker  # the marker is local

    committed = {"isolation.level": "read_committed"}
    opts = parse_source_options({"bootstrap.servers": bootstrap, "subscribe": t, **committed},
                                streaming=False)
    never = _read_tasks(_tasks(bootstrap, t, storageReads="never", **committed), opts)
    (planned,) = _bucket_tasks(bootstrap, t, **committed)
    assert planned.bucket_end == aborted_from  # the bucket part ends where the txn began
    auto = _read_tasks(_tasks(bootstrap, t, **committed), opts)
    assert [v for _, v in never] == want
    assert auto == never
    assert not {v for _, v in auto} & set(aborted)
    # read_uncommitted: no transaction matters, the bucket part is the whole upload
    (uncommitted,) = _bucket_tasks(bootstrap, t, **{"isolation.level": "read_uncommitted"})
    assert uncommitted.bucket_end == _uploaded_end(fs, str(bucket_root), t, 0)


def test_spark_reads_transactions_from_the_bucket_as_the_brokers_give_them(
        spark, bootstrap, admin, bucket_root, tmp_path):
    """Committed and aborted transactions over two partitions, each followed by plain
    records, most of them in uploaded segments and the rest in the local tails: batch reads
    under read_committed and read_uncommitted, and an AvailableNow stream under
    read_committed, give with ``storageReads=auto`` exactly the rows of ``never`` (no aborted
    record under read_committed, every record under read_uncommitted)."""
    from confluent_kafka import Producer

    from sparklog.client import NewTopic

    t = f"txns-{uuid.uuid4().hex[:10]}"
    admin.create_topics([NewTopic(t, num_partitions=2, config=TOPIC)])
    wait_for(lambda: t in admin.list_topics(), 10, f"topic {t}")
    txn = ck_txn_producer(bootstrap, f"{t}-id", **{"batch.size": 2048})
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 2048})
    committed: set[bytes] = set()
    aborted: set[bytes] = set()
    for i in range(9):
        txn.begin_transaction()
        values = [f"txn{i}-{j}".encode() + b"." * 150 for j in range(40)]
        for j, v in enumerate(values):
            txn.produce(t, value=v, partition=j % 2)
        txn.flush(30)
        for k in range(20):
            plain.produce(t, value=f"plain{i}-{k}".encode() + b"." * 150, partition=k % 2)
        assert plain.flush(30) == 0
        if i % 3 == 1:
            txn.abort_transaction(30)
            aborted.update(values)
        else:
            txn.commit_transaction(30)
            committed.update(values)
    fs = fsspec.filesystem("file")
    for p in (0, 1):  # 9 x 31 offsets per partition (records and markers); most uploaded
        wait_for(lambda p=p: _uploaded_end(fs, str(bucket_root), t, p) > 180, 30,
                 f"{t}-{p} mostly uploaded")
    assert {(r.topic, r.partition) for r in _bucket_tasks(bootstrap, t)} == {(t, 0), (t, 1)}

    for level in ("read_committed", "read_uncommitted"):
        never = _batch(spark, bootstrap, t, "never", **{"isolation.level": level})
        auto = _batch(spark, bootstrap, t, "auto", **{"isolation.level": level})
        assert _headers_as_tuples(auto) == _headers_as_tuples(never)
        values = {r[3] for r in never}
        assert committed <= values
        if level == "read_committed":
            assert not values & aborted and len(never) == len(committed) + 9 * 20
        else:
            assert aborted <= values and len(never) == 9 * 60

    results = {}
    for mode in ("never", "auto"):
        q = _stream(spark, bootstrap, t, mode, tmp_path / mode, tmp_path / f"ckpt-{mode}",
                    **{"isolation.level": "read_committed"})
        assert q.awaitTermination(300) and q.exception() is None
        results[mode] = _parquet_rows(spark, tmp_path / mode)
    assert len(results["never"]) == len(committed) + 9 * 20
    assert results["auto"] == results["never"]
