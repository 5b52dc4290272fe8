"""A lost broker is replaced by itself (``broker.replacement.timeout.ms``), with real
processes: a controller and three brokers, an RF 3 topic with min.insync.replicas 2, a
broker SIGKILLed while confluent-kafka (acks=all, idempotent) produces; a new broker (a new
node.id, as Spark's replacement executor) registers, the controller reassigns the lost
broker's replicas to it, they catch up, and every partition is back to 3 replicas, all in
the ISR, with no acknowledged record lost, duplicated or reordered."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.cluster.conftest import CLUSTER_CONFIG, SESSION_MS
from tests.helpers.cluster import ClusterProcesses
from tests.helpers.polling import wait_for
from tests.helpers.replication import ProducerLoad, damage, fully_replicated_without

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 3
REPLACEMENT_MS = 5000
VICTIM, NEWCOMER = 2, 4


def test_a_lost_broker_is_replaced_and_replication_restored(tmp_path: Path):
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = ClusterProcesses(tmp_path, brokers=4, config={
        **CLUSTER_CONFIG, "broker.replacement.timeout.ms": str(REPLACEMENT_MS)})
    try:
        cluster.start(brokers=(1, 2, 3))  # broker 4 comes later, as a replacement
        bs = cluster.brokers[1].bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic("rep", PARTITIONS, 3, config={
                "min.insync.replicas": "2"})]).values():
            f.result(30)
        with ProducerLoad(f"{bs},{cluster.brokers[3].bootstrap_servers}", "rep", PARTITIONS) as producer:
            wait_for(lambda: producer.acked_count() >= 300, timeout=30,
                     what="records acknowledged before the kill")
            killed_at = time.monotonic()
            cluster.brokers[VICTIM].kill()
            cluster.brokers[NEWCOMER].start()  # registers as a new, empty broker
            wait_for(lambda: fully_replicated_without(bs, "rep", PARTITIONS, 3, VICTIM),
                     timeout=(SESSION_MS + REPLACEMENT_MS) / 1000 + 40,
                     what="every partition on 3 in-sync replicas without the lost broker")
            restored_after = time.monotonic() - killed_at
        assert producer.errors == []
        # not before the lost broker was fenced and its replacement timeout passed
        assert restored_after >= REPLACEMENT_MS / 1000, restored_after
        parts = admin.list_topics("rep", timeout=10).topics["rep"].partitions.values()
        assert all(NEWCOMER in p.replicas for p in parts)
        dmg, _ = damage(bs, "rep", PARTITIONS, producer, producer.acked_count())
        assert dmg.none, dmg
        assert f"replacing lost broker(s) [{VICTIM}]" in cluster.controller.log_path.read_text()
    finally:
        cluster.stop()
