"""The object-storage tier in a real ``sparklog server`` with real Kafka clients, against a
``file://`` bucket and moto's S3 server: sealed segments are uploaded and dropped locally,
confluent-kafka / kafka-python / kcat read everything from offset 0 (the bytes a fetch
returns are the uploaded objects' bytes), a restart with empty partition directories
continues from the bucket, retention deletes remote segments, topic deletion empties the
bucket, and read_committed consumers reading from the bucket skip aborted transactions."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import fsspec
import pytest

from sparklog.protocol.records import decode_batches
from tests.helpers.kafka_clients import (
    READ_COMMITTED,
    ck_consume,
    ck_produce,
    ck_txn_producer,
    comparable,
    kcat_consume,
    kp_consume,
    make_messages,
)
from tests.helpers.polling import wait_for
from tests.helpers.requests import fetch_request

TOPIC_CONFIGS = {"remote.storage.enable": "true", "segment.bytes": "8192",
                 "local.retention.bytes": "0", "retention.ms": "-1"}
# many batches per segment (librdkafka would otherwise send one batch as large as a segment)
SMALL_BATCHES = {"batch.size": 2048}


class Bucket:
    """Where a server's tier lives, and a filesystem to look into it."""

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str, settings: list[str]) -> None:
        self.fs = fs
        self.root = root
        self.settings = ["--set", "remote.log.storage.system.enable=true",
                         "--set", "remote.log.manager.task.interval.ms=200", *settings]

    def find(self) -> list[str]:
        self.fs.invalidate_cache()  # s3fs keeps listings: the broker changed the bucket
        return self.fs.find(self.root)

    def manifest(self, topic: str, partition: int) -> dict | None:
        found = [p for p in self.find() if p.endswith(f"/{partition}/manifest.json")
                 and f"/{topic}-" in p]
        return json.loads(self.fs.cat_file(found[0])) if found else None

    def segment_bytes(self, topic: str, partition: int) -> bytes:
        m = self.manifest(topic, partition)
        assert m is not None
        found = [p for p in self.find() if f"/{topic}-" in p and f"/{partition}/" in p]
        out = []
        for seg in m["segments"]:
            name = f"{seg['base_offset']:020d}-{seg['segment_id']}.log"
            (path,) = [p for p in found if p.endswith("/" + name)]
            out.append(self.fs.cat_file(path))
        return b"".join(out)

    def objects(self, topic: str) -> list[str]:
        return [p for p in self.find() if f"/{topic}-" in p]


@pytest.fixture(params=["file", "s3"])
def bucket(request, tmp_path) -> Bucket:
    if request.param == "file":
        root = tmp_path / "bucket"
        root.mkdir()
        return Bucket(fsspec.filesystem("file"), str(root),
                      ["--set", f"remote.log.storage.url=file://{root}"])
    moto = request.getfixturevalue("moto_s3")
    name = f"b-{uuid.uuid4().hex[:12]}"
    moto.create_bucket(name)
    return Bucket(moto.filesystem(), f"{name}/tier", moto.broker_settings(name))


def _create(bs: str, topic: str, partitions: int, **extra: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, partitions, 1, config={**TOPIC_CONFIGS, **extra})]
                        )[topic].result(30)


def _local_start(data: Path, topic: str, partition: int) -> int:
    logs = sorted((data / f"{topic}-{partition}").glob("*.log"))
    return int(logs[0].name[:20]) if logs else 0


def _tiered(bucket: Bucket, data: Path, topic: str, partition: int) -> bool:
    """Every sealed segment uploaded and gone locally: only the active one is left there."""
    m = bucket.manifest(topic, partition)
    local = list((data / f"{topic}-{partition}").glob("*.log"))
    return (m is not None and bool(m["segments"]) and len(local) == 1
            and _local_start(data, topic, partition) == m["segments"][-1]["end_offset"] > 0)


def _fetch_all(w, topic: str, partition: int) -> bytes:
    """Every batch from offset 0 to the high watermark, fetch by fetch, as raw bytes."""
    out, offset = [], 0
    while True:
        part = w.call(1, 11, fetch_request(topic, [(partition, offset)],
                                           partition_max_bytes=5000)).responses[0].partitions[0]
        assert part.error_code == 0, part.error_code
        if offset >= part.high_watermark:
            return b"".join(out)
        data = bytes(part.records)
        assert data, f"no progress at {offset}"
        out.append(data)
        offset = decode_batches(data)[-1].last_offset + 1


def test_every_client_reads_a_tiered_topic_from_the_bucket(server_factory, tmp_path, bucket,
                                                           kafka_wire):
    srv = server_factory(tmp_path / "data", extra=bucket.settings).start()
    bs = srv.bootstrap_servers
    _create(bs, "tiered", 2)
    msgs = make_messages(4000, 2, headers=True, tag="tier")
    ck_produce(bs, "tiered", msgs, **SMALL_BATCHES)
    for p in range(2):
        wait_for(lambda p=p: _tiered(bucket, tmp_path / "data", "tiered", p), 30,
                 f"partition {p} uploaded and deleted locally")
    assert comparable(ck_consume(bs, "tiered", 2, len(msgs))) == comparable(msgs)
    assert comparable(kp_consume(bs, "tiered", 2, len(msgs))) == comparable(msgs)
    plain = [m._replace(headers=()) for m in msgs]
    got = [m._replace(headers=()) for m in kcat_consume(bs, "tiered", 2, len(msgs))]
    assert comparable(got) == comparable(plain)
    # the bytes a fetch returns below the local log start are the uploaded objects' bytes
    w = kafka_wire(bs)
    fetched = _fetch_all(w, "tiered", 0)
    remote = bucket.segment_bytes("tiered", 0)
    assert fetched[: len(remote)] == remote
    local = b"".join(p.read_bytes() for p in sorted((tmp_path / "data" / "tiered-0").glob("*.log")))
    assert fetched[len(remote):] == local
    # as in Kafka, a tiered topic cannot go back to local storage only
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(ConfigResource.Type.TOPIC, "tiered", incremental_configs=[
        ConfigEntry("remote.storage.enable", "false",
                    incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="Disabling remote storage"):
        admin.incremental_alter_configs([res])[res].result(30)
    assert srv.stop() == 0


def test_a_broker_without_the_tier_refuses_tiered_topics(cluster):
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException, match="Tiered Storage functionality is disabled"):
        _create(cluster.bootstrap_servers, "not-here", 1)


def test_restart_with_empty_partition_dirs_continues_from_the_bucket(server_factory, tmp_path,
                                                                     bucket):
    data = tmp_path / "data"
    srv = server_factory(data, extra=bucket.settings).start()
    bs = srv.bootstrap_servers
    _create(bs, "phoenix", 2)
    msgs = make_messages(3000, 2, tag="phoenix")
    ck_produce(bs, "phoenix", msgs, **SMALL_BATCHES)
    for p in range(2):
        wait_for(lambda p=p: _tiered(bucket, data, "phoenix", p), 30, f"partition {p} tiered")
    ends = {p: bucket.manifest("phoenix", p)["segments"][-1]["end_offset"] for p in range(2)}
    assert srv.stop() == 0
    for p in range(2):
        shutil.rmtree(data / f"phoenix-{p}")  # the disk of these partitions is gone

    srv = server_factory(data, port=srv.port, extra=bucket.settings).start()
    expected = [m for p in range(2) for m in [x for x in msgs if x.partition == p][: ends[p]]]
    got = ck_consume(bs, "phoenix", 2, len(expected))
    assert comparable(got) == comparable(expected)
    # appends continue after the last uploaded offset, with the producer's idempotence state
    more = make_messages(200, 2, tag="after")
    ck_produce(bs, "phoenix", more)
    got = ck_consume(bs, "phoenix", 2, len(expected) + len(more))
    assert comparable(got) == comparable(expected + more)
    assert {p: min(m.offset for m in got if m.partition == p and m.key.startswith(b"after"))
            for p in range(2)} == ends
    assert srv.stop() == 0


def test_retention_and_topic_deletion_clean_the_bucket(server_factory, tmp_path, bucket):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    data = tmp_path / "data"
    srv = server_factory(data, extra=bucket.settings).start()
    bs = srv.bootstrap_servers
    _create(bs, "shrinking", 1, **{"retention.bytes": "30000"})
    msgs = make_messages(3000, 1, tag="shrink")
    ck_produce(bs, "shrinking", msgs, **SMALL_BATCHES)

    def retained() -> bool:
        # every sealed segment uploaded, and the log (bucket + local) is within
        # retention.bytes but for its oldest segment, which no retention could drop
        m = bucket.manifest("shrinking", 0)
        if m is None or not m["segments"] or m["log_start_offset"] == 0:
            return False
        try:  # the broker deletes local segments meanwhile: ask again on the next poll
            local_bytes = sum(p.stat().st_size for p in (data / "shrinking-0").glob("*.log"))
        except FileNotFoundError:
            return False
        total = sum(s["files"][".log"] for s in m["segments"]) + local_bytes
        return (_tiered(bucket, data, "shrinking", 0)
                and total - m["segments"][0]["files"][".log"] < 30000)

    wait_for(retained, 30, "remote retention to move the log start")
    m = bucket.manifest("shrinking", 0)
    c = Consumer({"bootstrap.servers": bs, "group.id": "shrink"})
    try:
        low, _high = c.get_watermark_offsets(TopicPartition("shrinking", 0), timeout=10)
    finally:
        c.close()
    assert low >= m["log_start_offset"] > 0
    got = ck_consume(bs, "shrinking", 1, len(msgs) - low, start=low)
    assert [x.value for x in got] == [x.value for x in msgs[low:]]

    assert bucket.objects("shrinking")
    admin = AdminClient({"bootstrap.servers": bs})
    admin.delete_topics(["shrinking"])["shrinking"].result(30)
    wait_for(lambda: not [p for p in bucket.objects("shrinking") if not p.endswith("/0")
                          and "." in p.rsplit("/", 1)[-1]], 30, "the bucket to be emptied")
    assert srv.stop() == 0


def test_read_committed_from_the_bucket_skips_aborted_transactions(server_factory, tmp_path,
                                                                   bucket):
    """One aborted transaction wholly in uploaded segments, another begun in them whose
    ABORT marker is in the local tail: read_committed consumers reading from offset 0
    (served from the bucket) see only the committed records."""
    from confluent_kafka import Producer

    srv = server_factory(tmp_path / "data", extra=bucket.settings).start()
    bs = srv.bootstrap_servers
    _create(bs, "tiered-txn", 1)
    p = ck_txn_producer(bs, "tiered-txn-id", **SMALL_BATCHES)
    plain = Producer({"bootstrap.servers": bs, "linger.ms": 5, **SMALL_BATCHES})

    def txn(prefix: str, commit: bool | None) -> list[bytes]:
        values = [f"{prefix}-{i}".encode() + b"." * 100 for i in range(60)]
        p.begin_transaction()
        for v in values:
            p.produce("tiered-txn", value=v, partition=0)
        p.flush(30)
        if commit is not None:
            (p.commit_transaction if commit else p.abort_transaction)(30)
        return values

    want = txn("committed", True)
    txn("aborted", False)
    txn("open", None)
    filler = [f"filler-{i}".encode() + b"." * 200 for i in range(100)]
    for v in filler:
        plain.produce("tiered-txn", value=v, partition=0)
    plain.flush(30)
    want += filler
    p.abort_transaction(30)  # its marker goes to the active segment, which stays local
    data = tmp_path / "data"
    wait_for(lambda: _tiered(bucket, data, "tiered-txn", 0), 30, "the sealed segments tiered")
    last = sorted((data / "tiered-txn-0").glob("*.txnindex"))
    assert last and last[0].name[:20] == f"{_local_start(data, 'tiered-txn', 0):020d}"
    got = kcat_consume(bs, "tiered-txn", 1, 0, isolation=READ_COMMITTED)
    assert [m.value for m in got] == want
    got = ck_consume(bs, "tiered-txn", 1, len(want), isolation=READ_COMMITTED)
    assert [m.value for m in got] == want
    assert len(kcat_consume(bs, "tiered-txn", 1, 0)) == len(want) + 120
    assert srv.stop() == 0
