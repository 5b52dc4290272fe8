"""A lost broker is replaced by itself (``broker.replacement.timeout.ms``), with real
processes: a controller and three brokers, an RF 3 topic with min.insync.replicas 2, a
broker SIGKILLed while confluent-kafka (acks=all, idempotent) produces; a new broker (a new
node.id, as Spark's replacement executor) registers, the controller reassigns the lost
broker's replicas to it, they catch up, and every partition is back to 3 replicas, all in
the ISR, with no acknowledged record lost, duplicated or reordered."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.cluster.conftest import CLUSTER_CONFIG, SESSION_MS
from tests.helpers.cluster import ClusterProcesses
from tests.helpers.polling import wait_for
from tests.helpers.replication import AckedProducer, damage

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 3
REPLACEMENT_MS = 5000
VICTIM, NEWCOMER = 2, 4


def _partitions(bs: str, topic: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bs}).list_topics(topic, timeout=10) \
        .topics[topic].partitions.values()


def _fully_replicated_without(bs: str, topic: str, gone: int) -> bool:
    parts = list(_partitions(bs, topic))
    return len(parts) == PARTITIONS and all(
        len(p.replicas) == 3 and gone not in p.replicas and sorted(p.isrs) == sorted(p.replicas)
        for p in parts)


def test_a_lost_broker_is_replaced_and_replication_restored(tmp_path: Path):
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = ClusterProcesses(tmp_path, brokers=4, config={
        **CLUSTER_CONFIG, "broker.replacement.timeout.ms": str(REPLACEMENT_MS)})
    try:
        cluster.controller.start()
        for n in (1, 2, 3):  # broker 4 comes later, as a replacement
            cluster.brokers[n].start()
        bs = cluster.brokers[1].bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic("rep", PARTITIONS, 3, config={
                "min.insync.replicas": "2"})]).values():
            f.result(30)
        producer = AckedProducer(f"{bs},{cluster.brokers[3].bootstrap_servers}", "rep")
        stop = threading.Event()

        def produce() -> None:
            batch = 0
            while not stop.is_set():
                for p in range(PARTITIONS):
                    producer.send([f"{p}-{batch}-{i}".encode() for i in range(20)], partition=p)
                batch += 1

        writer = threading.Thread(target=produce)
        writer.start()
        try:
            wait_for(lambda: sum(map(len, producer.acked.values())) >= 300, timeout=30,
                     what="records acknowledged before the kill")
            killed_at = time.monotonic()
            cluster.brokers[VICTIM].kill()
            cluster.brokers[NEWCOMER].start()  # registers as a new, empty broker
            wait_for(lambda: _fully_replicated_without(bs, "rep", VICTIM),
                     timeout=(SESSION_MS + REPLACEMENT_MS) / 1000 + 40,
                     what="every partition on 3 in-sync replicas without the lost broker")
            restored_after = time.monotonic() - killed_at
        finally:
            stop.set()
            writer.join(60)
        assert not writer.is_alive()
        assert producer.errors == []
        # not before the lost broker was fenced and its replacement timeout passed
        assert restored_after >= REPLACEMENT_MS / 1000, restored_after
        assert all(NEWCOMER in p.replicas for p in _partitions(bs, "rep"))
        total = sum(map(len, producer.acked.values()))
        dmg, _ = damage(bs, "rep", PARTITIONS, producer, total)
        assert dmg.none, dmg
        log = cluster.controller.log_path.read_text()
        assert f"replacing lost broker(s) [{VICTIM}]" in log
    finally:
        cluster.stop()
