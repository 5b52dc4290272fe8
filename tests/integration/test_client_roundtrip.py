"""sparklog.client against a real broker: codecs, Arrow vs per-record, partitioner parity
with confluent-kafka, admin operations."""

from __future__ import annotations

import random
import uuid

import pyarrow as pa
import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer

from sparklog.client import (
    AdminClient,
    ArrowFetcher,
    Consumer,
    DeliveryError,
    FetchRange,
    NewTopic,
    Producer,
    TopicPartition,
)
from sparklog.client.partitioner import partition_for_key
from sparklog.protocol.errors import (
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from tests.helpers.polling import collect, wait_until


def _topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def admin(cluster):
    a = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    yield a
    a.close()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume_round_trip_every_codec(cluster, admin, codec):
    topic = _topic(codec)
    admin.create_topics([NewTopic(topic, 2)])
    rng = random.Random(codec)
    sent = [(f"k{i}".encode(), rng.randbytes(rng.randint(0, 500)),
             [("h", str(i).encode())] if i % 3 == 0 else []) for i in range(400)]
    reports = []
    with Producer({"bootstrap.servers": cluster.bootstrap_servers,
                   "compression.type": codec, "linger.ms": 2}) as p:
        for k, v, h in sent:
            p.produce(topic, v, key=k, headers=h or None,
                      on_delivery=lambda err, md: reports.append((err, md)))
        assert p.flush(30) == 0
    assert len(reports) == 400 and all(err is None for err, _ in reports)
    assert all(md.offset >= 0 for _, md in reports)
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers})
    c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    c.seek_to_beginning()
    got = collect(lambda: c.consume(1000, 0.5), 400, 20)
    c.close()
    assert len(got) == 400
    by_key = {r.key: r for r in got}
    for k, v, h in sent:
        r = by_key[k]
        assert r.value == v and r.headers == h
        assert r.partition == partition_for_key(k, 2)
    # per partition, offsets are dense and in produce order
    for p in (0, 1):
        offs = [r.offset for r in got if r.partition == p]
        assert offs == list(range(len(offs)))


def test_arrow_path_equals_per_record_path(cluster, admin):
    topic = _topic("arrow")
    admin.create_topics([NewTopic(topic, 1)])
    tp = TopicPartition(topic, 0)
    hdr_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    n = 3000
    values = pa.array([None if i % 50 == 0 else f"value-{i}".encode() * (i % 7 + 1)
                       for i in range(n)], pa.binary())
    keys = pa.array([None if i % 3 == 0 else f"key-{i}".encode() for i in range(n)], pa.binary())
    headers = pa.array([[{"key": "a", "value": str(i).encode()}] if i % 4 == 0 else []
                        for i in range(n)], hdr_type)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as p:
        assert p.produce_arrow(topic, values, keys=keys, partitions=pa.array([0] * n, pa.int32()),
                               headers=headers) == n
        for i in range(200):  # and a per-record tail with explicit timestamps
            p.produce(topic, f"tail-{i}", key=None, partition=0, timestamp=1_700_000_000_000 + i)
        assert p.flush(30) == 0
    f = ArrowFetcher({"bootstrap.servers": cluster.bootstrap_servers})
    batches, pos = [], 0
    while pos < n + 200:
        b = f.fetch(tp, pos, n + 200, max_bytes=64 * 1024).batch
        assert b.num_rows > 0
        batches.append(b)
        pos = b.column("offset")[b.num_rows - 1].as_py() + 1
    table = pa.Table.from_batches(batches)
    assert table.column("offset").to_pylist() == list(range(n + 200))
    assert table.column("value").to_pylist()[:n] == values.to_pylist()
    assert table.column("key").to_pylist()[:n] == keys.to_pylist()
    assert table.schema.names == ["key", "value", "topic", "partition", "offset", "timestamp",
                                  "timestampType", "headers"]
    f.close()
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers})
    c.assign([tp])
    c.seek(tp, 0)
    recs = collect(lambda: c.consume(1000, 0.5), n + 200, 20)
    c.close()
    assert [r.value for r in recs] == table.column("value").to_pylist()
    assert [r.key for r in recs] == table.column("key").to_pylist()
    assert [r.timestamp * 1000 for r in recs] == \
        table.column("timestamp").cast(pa.int64()).to_pylist()  # Spark's microseconds
    assert [[{"key": k, "value": v} for k, v in r.headers] for r in recs] == \
        table.column("headers").to_pylist()
    assert recs[-1].timestamp == 1_700_000_000_199
    # a sub-range, and the fetch past the end
    sub = ArrowFetcher({"bootstrap.servers": cluster.bootstrap_servers})
    part = sub.fetch(tp, 100, 110, include_headers=False).batch
    assert part.column("offset").to_pylist() == list(range(100, 110))
    assert "headers" not in part.schema.names
    empty = sub.fetch(tp, n + 200, timeout_ms=2000)
    assert empty.batch.num_rows == 0 and empty.next_offset == empty.high_watermark == n + 200
    sizes = sub.batch_sizes(tp, 0)
    assert sizes and sizes[-1][0] == n + 200 and all(s > 61 for _, s in sizes)
    sub.close()


def test_arrow_fetch_below_log_start_raises_out_of_range(cluster, admin):
    topic = _topic("oor")
    admin.create_topics([NewTopic(topic, 1)])
    tp = TopicPartition(topic, 0)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as p:
        p.produce_arrow(topic, pa.array([b"x"] * 50))
        assert p.flush(10) == 0
    assert admin.delete_records({tp: 20}) == {tp: 20}
    c = ArrowFetcher({"bootstrap.servers": cluster.bootstrap_servers})
    with pytest.raises(OffsetOutOfRangeError) as ei:
        c.fetch(tp, 5)
    assert ei.value.log_start_offset == 20
    assert c.fetch(tp, 20).batch.num_rows == 30
    c.close()


def test_arrow_fetch_many_partitions_in_one_request_per_broker(cluster, admin):
    topic = _topic("many")
    admin.create_topics([NewTopic(topic, 3)])
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as p:
        for part in range(3):
            p.produce_arrow(topic, pa.array([b"p%d-%d" % (part, i) for i in range(40)]),
                            partitions=pa.array([part] * 40, pa.int32()))
        assert p.flush(10) == 0
    tps = [TopicPartition(topic, part) for part in range(3)]
    assert admin.delete_records({tps[2]: 10}) == {tps[2]: 10}
    c = ArrowFetcher({"bootstrap.servers": cluster.bootstrap_servers})
    got = c.fetch_many([FetchRange(tps[0], 5, 15), FetchRange(tps[1], 0), FetchRange(tps[2], 3)],
                       include_headers=False)
    assert got[tps[0]].batch.column("offset").to_pylist() == list(range(5, 15))
    assert got[tps[1]].batch.column("value").to_pylist() == [b"p1-%d" % i for i in range(40)]
    assert got[tps[1]].batch.column("partition").to_pylist() == [1] * 40
    # one partition's lost offsets do not fail the others: its error comes back instead
    assert isinstance(got[tps[2]], OffsetOutOfRangeError)
    assert got[tps[2]].log_start_offset == 10
    # a tight budget: the broker serves the first partitions, the rest come back empty
    tight = c.fetch_many([FetchRange(tp, 10) for tp in tps], max_bytes=1, include_headers=False)
    assert tight[tps[0]].batch.num_rows == 30
    assert tight[tps[1]].batch.num_rows == 0 and tight[tps[1]].next_offset == 10
    c.close()


def test_arrow_fetch_many_per_partition_max_bytes(cluster, admin):
    """A range's ``max_bytes`` bounds what the broker returns for it (whole batches; the
    first partition of a request always gets one), leaving the budget to the others."""
    topic = _topic("limits")
    admin.create_topics([NewTopic(topic, 2)])
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as p:
        for part in range(2):
            for _ in range(4):  # four batches of 10 records per partition
                p.produce_arrow(topic, pa.array([b"x" * 100] * 10),
                                partitions=pa.array([part] * 10, pa.int32()))
                assert p.flush(10) == 0
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = ArrowFetcher({"bootstrap.servers": cluster.bootstrap_servers})
    got = c.fetch_many([FetchRange(tp0, 0, max_bytes=1), FetchRange(tp1, 0)],
                       include_headers=False)
    assert got[tp0].batch.column("offset").to_pylist() == list(range(10))
    assert got[tp1].batch.num_rows == 40
    got = c.fetch_many([FetchRange(tp1, 0), FetchRange(tp0, 0, max_bytes=1)],
                       include_headers=False)
    assert got[tp1].batch.num_rows == 40 and got[tp0].batch.num_rows == 0
    c.close()


def test_partitioner_matches_confluent_kafka_murmur2_random(cluster, admin):
    topic = _topic("parity")
    admin.create_topics([NewTopic(topic, 7)])
    rng = random.Random(11)
    keys = [rng.randbytes(rng.randint(1, 24)) for _ in range(10_000)]
    ck = CKProducer({"bootstrap.servers": cluster.bootstrap_servers,
                     "partitioner": "murmur2_random", "linger.ms": 20})
    for i, k in enumerate(keys):
        ck.produce(topic, value=str(i).encode(), key=k)
    assert ck.flush(60) == 0
    where = {}
    c = ArrowFetcher({"bootstrap.servers": cluster.bootstrap_servers})
    for p in range(7):
        pos = 0
        while True:
            b = c.fetch(TopicPartition(topic, p), pos, max_bytes=4 * 1024 * 1024).batch
            if b.num_rows == 0:
                break
            for k in b.column("key").to_pylist():
                where[k] = p
            pos = b.column("offset")[b.num_rows - 1].as_py() + 1
    c.close()
    assert len(where) == len(set(keys))
    mismatched = [k for k in keys if where[k] != partition_for_key(k, 7)]
    assert mismatched == []
    # and our producer puts every key on the same partition as confluent-kafka did
    mine = _topic("parity2")
    admin.create_topics([NewTopic(mine, 7)])
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as p:
        p.produce_arrow(mine, pa.array([b"v"] * len(keys)), keys=pa.array(keys, pa.binary()))
        assert p.flush(30) == 0
    ckc = CKConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": _topic("g"),
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
    ckc.subscribe([mine])
    seen = {}

    def every_key_seen() -> bool:
        for m in ckc.consume(1000, 1.0):
            if m.error() is None:
                seen[m.key()] = m.partition()
        return len(seen) >= len(set(keys))

    wait_until(every_key_seen, 60, interval=0)
    ckc.close()
    assert seen == where


def test_admin_topics_configs_partitions_and_errors(cluster, admin):
    topic = _topic("adm")
    admin.create_topics([NewTopic(topic, 2, config={"retention.ms": "3600000"})])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(topic, 2)])
    md = admin.list_topics()[topic]
    assert sorted(md.partitions) == [0, 1]
    assert all(pm.leader == 1 and pm.replicas == [1] and pm.isr == [1]
               for pm in md.partitions.values())
    cfg = admin.describe_configs(topic)
    assert cfg["retention.ms"].value == "3600000"
    assert cfg["retention.ms"].source == "DYNAMIC_TOPIC_CONFIG"
    admin.alter_configs(topic, {"cleanup.policy": "compact"})
    cfg = admin.describe_configs(topic)
    assert cfg["cleanup.policy"].value == "compact" and cfg["retention.ms"].value == "3600000"
    admin.create_partitions({topic: 4})
    assert sorted(admin.describe_topics([topic])[topic].partitions) == [0, 1, 2, 3]
    admin.delete_topics([topic])
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_topics([topic])
    desc = admin.describe_cluster()
    assert [b.node_id for b in desc.brokers] == [1] and desc.controller_id == 1


def test_produce_to_missing_partition_and_failed_delivery_surface(cluster, admin):
    topic = _topic("fail")
    admin.create_topics([NewTopic(topic, 1)])
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as p:
        with pytest.raises(UnknownTopicOrPartitionError):
            p.produce(topic, b"x", partition=5)
        # bigger than max.message.bytes: the broker refuses it, flush() says so
        p.produce_arrow(topic, pa.array([b"x" * 2_000_000]))
        with pytest.raises(DeliveryError):
            p.flush(30)


def test_send_futures_interceptors_and_sticky_null_keys(cluster, admin):
    from sparklog.client import ProducerInterceptor

    topic = _topic("icpt")
    admin.create_topics([NewTopic(topic, 4)])

    class Stamp(ProducerInterceptor):
        def __init__(self):
            self.sent, self.acked = 0, []

        def on_send(self, topic, partition, key, value, headers):
            self.sent += 1
            return key, value + b"!", (headers or []) + [("icpt", b"1")]

        def on_acknowledgement(self, metadata, error):
            self.acked.append((metadata.offset if metadata else None, error))

    ic = Stamp()
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "interceptors": [ic],
                   "linger.ms": 50}) as p:
        futs = [p.send(topic, f"v{i}".encode(), timestamp=1_600_000_000_000 + i)
                for i in range(50)]
        mds = [f.result(30) for f in futs]
    assert ic.sent == 50 and len(ic.acked) == 50 and all(e is None for _, e in ic.acked)
    # null keys stick to one partition per batch (KIP-480): all 50 fit one batch
    assert len({md.partition for md in mds}) == 1
    assert [md.offset for md in mds] == list(range(50))
    assert [md.timestamp for md in mds] == [1_600_000_000_000 + i for i in range(50)]
    c = ArrowFetcher({"bootstrap.servers": cluster.bootstrap_servers})
    b = c.fetch(TopicPartition(topic, mds[0].partition), 0).batch
    c.close()
    assert b.column("value").to_pylist()[:2] == [b"v0!", b"v1!"]
    assert b.column("headers").to_pylist()[0] == [{"key": "icpt", "value": b"1"}]
