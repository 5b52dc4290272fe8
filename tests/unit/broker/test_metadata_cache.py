"""The broker's metadata cache: fed only by the records the controller publishes, it ends up
where the controller's image is, live brokers included."""

from __future__ import annotations

from pathlib import Path

from sparklog.broker.metadata_cache import MetadataCache
from sparklog.controller import Controller


def test_cache_follows_the_controller(tmp_path: Path) -> None:
    c = Controller(str(tmp_path), 1)
    c.open()
    cache = MetadataCache()
    cache.load(c.metadata_records())
    c.add_listener(cache.apply)
    assert cache.cluster_id and cache.cluster_id == c.image.cluster_id
    assert cache.live_broker_list() == []

    c.register_broker(1, "127.0.0.1", 9092)
    c.register_broker(2, "127.0.0.1", 9093)
    t = c.create_topic("orders", 2, 2, {"retention.ms": "1000"})
    c.create_partitions("orders", 3)
    c.set_topic_configs("orders", {"cleanup.policy": "compact"})
    c.change_leader("orders", 0, 2)
    c.create_topic("gone", 1, 1)
    c.delete_topic("gone")
    c.unregister_broker(2)

    assert [b.node_id for b in cache.live_broker_list()] == [1]
    assert cache.live_brokers == c.live_brokers
    assert set(cache.topics()) == {"orders"}
    got = cache.topic_by_id(t.topic_id)
    assert got is cache.topic("orders") and got is not c.image.topics["orders"]
    assert got.configs == {"cleanup.policy": "compact"}
    assert got.partitions == c.image.topics["orders"].partitions
    assert got.partitions[0].leader == 2 and got.partitions[0].leader_epoch == 1

    fresh = MetadataCache()  # a broker starting now loads the same state in one go
    fresh.load(c.metadata_records())
    assert fresh.live_brokers == {1}
    assert fresh.topic("orders").partitions == got.partitions
    c.close()
