"""Kafka transactions with real clients (KIP-98): confluent-kafka, kafka-python and aiokafka
transactional producers; read_committed consumers of every client (and kcat) see exactly
the committed records, in order, with the markers' offsets skipped; fencing by a second
producer with the same transactional id; consume-transform-produce with
send_offsets_to_transaction, whose offsets the group sees only at commit; and
``sparklog transactions list|describe``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sparklog.cluster.embedded import EmbeddedCluster
from tests.helpers.cli import ok, one_error, run
from tests.helpers.kafka_clients import (
    CLIENTS,
    DEADLINE_S,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ck_consume,
    ck_txn_producer,
    committed_offsets,
    create_topic,
    kcat_consume,
)

PARTS = 2


def ck_txn(p: Any, topic: str, values: list[bytes], commit: bool) -> None:
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce(topic, key=v, value=v, partition=i % PARTS)
    if commit:
        p.commit_transaction(DEADLINE_S)
    else:
        p.flush(DEADLINE_S)
        p.abort_transaction(DEADLINE_S)


def by_partition(values: list[bytes]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTS)}
    for i, v in enumerate(values):
        out[i % PARTS].append(v)
    return out


def vals(k: str, n: int) -> list[bytes]:
    return [f"{k}{i}".encode() for i in range(n)]


@pytest.fixture(scope="module")
def broker_config() -> dict[str, str]:
    return {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def committed_topic(cluster: EmbeddedCluster) -> tuple[str, list[bytes], list[bytes]]:
    """A topic with: committed c*, aborted a*, committed d* (confluent-kafka producer)."""
    bs = cluster.bootstrap_servers
    topic = "txn-mixed"
    create_topic(bs, topic, PARTS)
    p = ck_txn_producer(bs, "mixed")
    committed = vals("c", 20)
    aborted = vals("a", 20)
    ck_txn(p, topic, committed[:10], commit=True)
    ck_txn(p, topic, aborted, commit=False)
    ck_txn(p, topic, committed[10:], commit=True)
    return topic, committed, aborted


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_read_committed_sees_only_committed_records(cluster: EmbeddedCluster, committed_topic,
                                                    client: str) -> None:
    topic, committed, aborted = committed_topic
    _produce, consume = CLIENTS[client]
    got = consume(cluster.bootstrap_servers, topic, PARTS, len(committed), isolation=READ_COMMITTED)
    per_part: dict[int, list[bytes]] = {p: [] for p in range(PARTS)}
    offsets: dict[int, list[int]] = {p: [] for p in range(PARTS)}
    for m in sorted(got, key=lambda m: (m.partition, m.offset)):
        per_part[m.partition].append(m.value)
        offsets[m.partition].append(m.offset)
    want = {p: by_partition(committed[:10])[p] + by_partition(committed[10:])[p]
            for p in range(PARTS)}
    assert per_part == want
    # 5 committed, marker, 10 aborted, marker, 5 committed, marker in each partition
    for p in range(PARTS):
        assert offsets[p] == [0, 1, 2, 3, 4, 17, 18, 19, 20, 21], (client, p, offsets[p])


def test_read_uncommitted_sees_aborted_records_too(cluster: EmbeddedCluster,
                                                   committed_topic) -> None:
    topic, committed, aborted = committed_topic
    got = kcat_consume(cluster.bootstrap_servers, topic, PARTS, 40, isolation=READ_UNCOMMITTED)
    assert sorted(m.value for m in got) == sorted(committed + aborted)


def test_a_second_producer_fences_the_first(cluster: EmbeddedCluster) -> None:
    from confluent_kafka import KafkaException

    bs = cluster.bootstrap_servers
    topic = "txn-fence"
    create_topic(bs, topic, PARTS)
    zombie = ck_txn_producer(bs, "fenced-id")
    zombie.begin_transaction()
    for v in vals("z", 6):
        zombie.produce(topic, value=v, partition=0)
    zombie.flush(DEADLINE_S)
    # the new instance aborts the zombie's open transaction and takes over
    fresh = ck_txn_producer(bs, "fenced-id")
    with pytest.raises(KafkaException) as exc:
        zombie.commit_transaction(DEADLINE_S)
    err = exc.value.args[0]
    assert err.fatal() or "fenc" in err.str().lower(), err
    ck_txn(fresh, topic, vals("f", 4), commit=True)
    got = ck_consume(bs, topic, PARTS, 4, isolation=READ_COMMITTED)
    assert sorted(m.value for m in got) == vals("f", 4)


def test_consume_transform_produce_with_offsets_in_the_transaction(
        cluster: EmbeddedCluster) -> None:
    from confluent_kafka import Consumer, TopicPartition

    bs = cluster.bootstrap_servers
    src, dst, group = "ctp-in", "ctp-out", "ctp-group"
    create_topic(bs, src, PARTS)
    create_topic(bs, dst, PARTS)
    inputs = vals("in", 60)
    p = ck_txn_producer(bs, "ctp-loader")
    ck_txn(p, src, inputs, commit=True)

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": READ_COMMITTED})
    c.subscribe([src])
    out = ck_txn_producer(bs, "ctp-copier")
    copied = 0
    rounds = 0
    aborted_once = False
    try:
        while copied < len(inputs) and rounds < 200:
            rounds += 1
            batch = [m for m in c.consume(10, 1.0) if not m.error()]
            if not batch:
                continue
            out.begin_transaction()
            for m in batch:
                out.produce(dst, key=m.key(), value=b"T-" + m.value(), partition=m.partition())
            positions = c.position(c.assignment())
            out.send_offsets_to_transaction(positions, c.consumer_group_metadata(), DEADLINE_S)
            if not aborted_once:
                # mid-transaction the group still sees nothing committed
                assert committed_offsets(bs, group, src, range(PARTS)) == {0: -1001, 1: -1001}
                out.abort_transaction(DEADLINE_S)
                aborted_once = True
                # rewind to what the group committed (nothing): the batch is copied again
                for tp in c.assignment():
                    c.seek(TopicPartition(src, tp.partition, 0))
                continue
            out.commit_transaction(DEADLINE_S)
            copied += len(batch)
    finally:
        c.close()
    assert copied == len(inputs)
    got = ck_consume(bs, dst, PARTS, len(inputs), isolation=READ_COMMITTED)
    assert sorted(m.value for m in got) == sorted(b"T-" + v for v in inputs)
    # every input's offset is committed: past the last record, or past the loader's marker
    # after it when the consumer had already read that
    done = committed_offsets(bs, group, src, range(PARTS))
    for part, records in by_partition(inputs).items():
        assert len(records) <= done[part] <= len(records) + 1, (part, done)


def test_kafka_python_transactional_producer(cluster: EmbeddedCluster) -> None:
    from kafka import KafkaProducer

    bs = cluster.bootstrap_servers
    topic = "txn-kp"
    create_topic(bs, topic, PARTS)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id="kp-txn")
    try:
        p.init_transactions()
        p.begin_transaction()
        for v in vals("a", 6):
            p.send(topic, value=v, partition=0)
        p.abort_transaction()
        p.begin_transaction()
        for v in vals("k", 6):
            p.send(topic, value=v, partition=1)
        p.commit_transaction()
    finally:
        p.close(5)
    got = ck_consume(bs, topic, PARTS, 6, isolation=READ_COMMITTED)
    assert [m.value for m in sorted(got, key=lambda m: m.offset)] == vals("k", 6)


def test_aiokafka_transactional_producer(cluster: EmbeddedCluster) -> None:
    from aiokafka import AIOKafkaProducer

    bs = cluster.bootstrap_servers
    topic = "txn-ak"
    create_topic(bs, topic, PARTS)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="ak-txn")
        await p.start()
        try:
            async with p.transaction():
                for v in vals("k", 6):
                    await p.send(topic, value=v, partition=1)
            await p.begin_transaction()
            for v in vals("a", 6):
                await p.send(topic, value=v, partition=0)
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(run(), DEADLINE_S))
    got = kcat_consume(bs, topic, PARTS, 6, isolation=READ_COMMITTED)
    assert [m.value for m in sorted(got, key=lambda m: m.offset)] == vals("k", 6)


def test_cli_lists_and_describes_transactions(cluster: EmbeddedCluster) -> None:
    """``sparklog transactions list|describe`` (kafka-transactions.sh's columns), an open
    transaction found by its running time."""
    bs = cluster.bootstrap_servers
    topic = "txn-cli"
    create_topic(bs, topic, PARTS)
    p = ck_txn_producer(bs, "cli-open")
    p.begin_transaction()
    p.produce(topic, value=b"x", partition=1)
    p.flush(DEADLINE_S)
    try:
        out = ok(run("transactions", "list", "--state", "Ongoing", "--duration-ms", "0",
                     "--bootstrap-server", bs)).splitlines()
        assert out[0].split() == ["TransactionalId", "Coordinator", "ProducerId",
                                  "TransactionState"]
        rows = [ln.split() for ln in out[1:]]
        assert ["cli-open", "1"] == rows[0][:2] and rows[0][3] == "Ongoing" and len(rows) == 1
        out = ok(run("transactions", "list", "--duration-ms", "3600000",
                     "--bootstrap-server", bs)).splitlines()
        assert out[1:] == []  # nothing open that long
        out = ok(run("transactions", "list", "--transactional-id-pattern", "cli-.*",
                     "--bootstrap-server", bs)).splitlines()
        assert [ln.split()[0] for ln in out[1:]] == ["cli-open"]
        out = ok(run("transactions", "describe", "--transactional-id", "cli-open",
                     "--bootstrap-server", bs)).splitlines()
        assert out[0].split()[:5] == ["CoordinatorId", "TransactionalId", "ProducerId",
                                      "ProducerEpoch", "TransactionState"]
        cells = out[1].split()
        assert cells[1] == "cli-open" and cells[4] == "Ongoing" and cells[-1] == f"{topic}-1"
    finally:
        p.abort_transaction(DEADLINE_S)
    err = one_error(run("transactions", "describe", "--transactional-id", "nobody",
                        "--bootstrap-server", bs))
    assert "TRANSACTIONAL_ID_NOT_FOUND" in err or "nobody" in err


def test_sparklogs_consumer_and_arrow_fetcher_read_committed(cluster: EmbeddedCluster,
                                                             committed_topic) -> None:
    """sparklog's own readers: Consumer(isolation.level) and ArrowFetcher (the Spark
    source's path) drop the aborted transaction and the markers; ListOffsets latest under
    read_committed is the LSO."""
    from sparklog.client import AdminClient, ArrowFetcher, Consumer, OffsetSpec, TopicPartition

    bs = cluster.bootstrap_servers
    topic, committed, _aborted = committed_topic
    want = {p: by_partition(committed[:10])[p] + by_partition(committed[10:])[p]
            for p in range(PARTS)}
    c = Consumer({"bootstrap.servers": bs, "isolation.level": READ_COMMITTED,
                  "enable.auto.commit": False})
    try:
        c.assign([(topic, p, 0) for p in range(PARTS)])
        got: dict[int, list[bytes]] = {p: [] for p in range(PARTS)}
        n = 0
        for _ in range(100):
            for r in c.consume(100, 0.5):
                got[r.partition].append(r.value)
                n += 1
            if n >= len(committed):
                break
        assert got == want
    finally:
        c.close()
    f = ArrowFetcher({"bootstrap.servers": bs})
    try:
        for p in range(PARTS):
            rows = f.fetch(TopicPartition(topic, p), 0, isolation_level=READ_COMMITTED)
            assert rows.batch.column("value").to_pylist() == want[p]
            assert rows.next_offset == rows.last_stable_offset == 23
    finally:
        f.close()
    admin = AdminClient({"bootstrap.servers": bs})
    try:
        ends = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest()
                                   for p in range(PARTS)}, isolation_level=READ_COMMITTED)
        assert {tp.partition: o for tp, (o, _ts) in ends.items()} == {p: 23 for p in range(PARTS)}
    finally:
        admin.close()
