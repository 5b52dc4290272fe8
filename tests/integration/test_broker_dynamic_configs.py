"""Dynamic broker configs with real admin clients: AlterConfigs and IncrementalAlterConfigs
on BROKER resources (this broker's id, or the empty name for the cluster-wide default),
refused for read-only keys, stored in the cluster metadata (they survive a restart),
applied to existing logs at once, and reported by DescribeConfigs with their source and
synonyms, for brokers and for the topics whose defaults they give."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

from sparklog.cluster.embedded import EmbeddedCluster
from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.messages import API_BY_KEY
from tests.helpers.kafka_clients import ck_produce, create_topic, make_messages
from tests.helpers.servers import ServerProcess
from tests.helpers.wire import KafkaWire

BROKER = ConfigResource.Type.BROKER
TOPIC = ConfigResource.Type.TOPIC


@pytest.fixture(scope="module")
def broker_config() -> dict[str, str]:
    return {"group.initial.rebalance.delay.ms": "0", "log.retention.hours": "100"}


class Admin(AdminClient):
    """confluent-kafka's admin client that remembers where it connects (for the wire)."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__({"bootstrap.servers": bootstrap})
        self.bootstrap = bootstrap


@pytest.fixture
def admin(cluster: EmbeddedCluster) -> Iterator[Admin]:
    yield Admin(cluster.bootstrap_servers)
    # every test starts from no dynamic configs
    for entity in ("", "1"):
        cluster.call(cluster.broker.set_broker_configs, entity, {})


def alter(admin: Admin, kind: Any, name: str, *entries: ConfigEntry,
          validate_only: bool = False) -> None:
    """IncrementalAlterConfigs through confluent-kafka (which has no name for the cluster
    default: librdkafka refuses an empty resource name, so that goes over the wire)."""
    if name == "":
        code, msg = wire_alter(admin.bootstrap, name, *entries, validate_only=validate_only)
        if code:
            raise KafkaException(KafkaError(code, msg))
        return
    res = admin.incremental_alter_configs([ConfigResource(kind, name,
                                                          incremental_configs=list(entries))],
                                          validate_only=validate_only)
    list(res.values())[0].result(20)


def wire_alter(bootstrap: str, name: str, *entries: ConfigEntry,
               validate_only: bool = False) -> tuple[int, str | None]:
    cls = API_BY_KEY[44].request
    wire = KafkaWire(bootstrap)
    try:
        res = wire.call(44, 1, cls(validate_only=validate_only, resources=[
            cls.AlterConfigsResource(resource_type=4, resource_name=name, configs=[
                cls.AlterableConfig(name=e.name, config_operation=e.incremental_operation.value,
                                    value=e.value) for e in entries])])).responses[0]
    finally:
        wire.close()
    return res.error_code, res.error_message


def describe(admin: Admin, kind: Any, name: str) -> dict[str, Any]:
    fut = admin.describe_configs([ConfigResource(kind, name)])
    return list(fut.values())[0].result(20)


def op(name: str, value: str | None, kind: AlterConfigOpType = AlterConfigOpType.SET
       ) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=kind)


def test_per_broker_beats_cluster_default_beats_static(cluster: EmbeddedCluster,
                                                       admin: Admin) -> None:
    create_topic(cluster.bootstrap_servers, "dyn-src", 1)
    alter(admin, BROKER, "", op("log.retention.ms", "7200000"),
          op("log.segment.bytes", "2000000"))
    alter(admin, BROKER, "1", op("log.segment.bytes", "3000000"))

    b = describe(admin, BROKER, "1")
    seg = b["log.segment.bytes"]
    assert (seg.value, seg.source) == ("3000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    ret = b["log.retention.ms"]
    assert (ret.value, ret.source) == ("7200000",
                                       ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert not ret.is_read_only and b["log.dirs"].is_read_only
    hours = b["log.retention.hours"]
    assert (hours.value, hours.source) == ("100", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert b["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value

    cls = API_BY_KEY[32].request
    wire = KafkaWire(cluster.bootstrap_servers)
    try:
        default = wire.call(32, 4, cls(resources=[cls.DescribeConfigsResource(
            resource_type=4, resource_name="", configuration_keys=None)],
            include_synonyms=False)).results[0]
    finally:
        wire.close()
    assert [(c.name, c.value, c.config_source) for c in default.configs] == [
        ("log.retention.ms", "7200000", 3), ("log.segment.bytes", "2000000", 3)]

    t = describe(admin, TOPIC, "dyn-src")
    assert (t["segment.bytes"].value, t["segment.bytes"].source) == (
        "3000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert (t["retention.ms"].value, t["retention.ms"].source) == (
        "7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert t["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value


def test_synonyms_list_every_layer_in_precedence_order(cluster: EmbeddedCluster) -> None:
    """The wire view of the same thing: DescribeConfigs v4 with include_synonyms."""
    cluster.call(cluster.broker.set_broker_configs, "", {"log.segment.bytes": "2000000"})
    cluster.call(cluster.broker.set_broker_configs, "1", {"log.segment.bytes": "3000000"})
    create_topic(cluster.bootstrap_servers, "dyn-syn", 1)
    cls = API_BY_KEY[32].request
    wire = KafkaWire(cluster.bootstrap_servers)
    try:
        resp = wire.call(32, 4, cls(resources=[
            cls.DescribeConfigsResource(resource_type=4, resource_name="1",
                                        configuration_keys=["log.segment.bytes"]),
            cls.DescribeConfigsResource(resource_type=2, resource_name="dyn-syn",
                                        configuration_keys=["segment.bytes", "retention.ms"])],
            include_synonyms=True))
    finally:
        wire.close()
    cluster.call(cluster.broker.set_broker_configs, "", {})
    cluster.call(cluster.broker.set_broker_configs, "1", {})
    (entry,) = resp.results[0].configs
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("log.segment.bytes", "3000000", 2), ("log.segment.bytes", "2000000", 3),
        ("log.segment.bytes", "1073741824", 5)]
    by_name = {c.name: c for c in resp.results[1].configs}
    assert [(s.name, s.source) for s in by_name["segment.bytes"].synonyms] == [
        ("log.segment.bytes", 2), ("log.segment.bytes", 3), ("log.segment.bytes", 5)]
    assert [(s.name, s.value, s.source) for s in by_name["retention.ms"].synonyms] == [
        ("log.retention.hours", "100", 4), ("log.retention.hours", "168", 5)]
    assert by_name["retention.ms"].value == str(100 * 3_600_000)


def test_incremental_ops_and_refusals(cluster: EmbeddedCluster, admin: Admin) -> None:
    broker = cluster.broker
    alter(admin, BROKER, "1", op("log.cleanup.policy", "compact", AlterConfigOpType.APPEND),
          op("log.roll.ms", "60000"))
    assert broker.metadata.broker_configs("1") == {"log.cleanup.policy": "delete,compact",
                                                     "log.roll.ms": "60000"}
    alter(admin, BROKER, "1", op("log.cleanup.policy", "delete", AlterConfigOpType.SUBTRACT),
          op("log.roll.ms", None, AlterConfigOpType.DELETE))
    assert broker.metadata.broker_configs("1") == {"log.cleanup.policy": "compact"}
    alter(admin, BROKER, "1", op("log.roll.ms", "1000"), validate_only=True)
    assert broker.metadata.broker_configs("1") == {"log.cleanup.policy": "compact"}

    with pytest.raises(KafkaException) as exc:
        alter(admin, BROKER, "1", op("log.dirs", "/elsewhere"))
    err = exc.value.args[0]
    assert err.code() == ErrorCode.INVALID_CONFIG
    assert "Cannot update these configs dynamically: Set(log.dirs)" in err.str()
    with pytest.raises(KafkaException) as exc:
        alter(admin, BROKER, "", op("log.segment.bytes", "10"))  # below segment.bytes' minimum
    assert exc.value.args[0].code() == ErrorCode.INVALID_CONFIG
    with pytest.raises(KafkaException) as exc:
        alter(admin, BROKER, "1", op("message.max.bytes", "lots"))
    assert exc.value.args[0].code() == ErrorCode.INVALID_CONFIG
    assert broker.metadata.broker_configs("1") == {"log.cleanup.policy": "compact"}
    assert broker.metadata.broker_configs("") == {}


def test_legacy_alter_configs_on_a_broker(cluster: EmbeddedCluster) -> None:
    """librdkafka's admin test: AlterConfigs on a BROKER resource with a key sparklog does
    not use (Kafka stores unknown keys as given) beside a dynamic one; another broker id is
    not this broker's to answer for."""
    cls = API_BY_KEY[33].request
    wire = KafkaWire(cluster.bootstrap_servers)
    try:
        def call(name: str, **configs: str) -> Any:
            return wire.call(33, 1, cls(validate_only=False, resources=[
                cls.AlterConfigsResource(resource_type=4, resource_name=name, configs=[
                    cls.AlterableConfig(name=k.replace("_", "."), value=v)
                    for k, v in configs.items()])])).responses[0]

        ok = call("1", sasl_kerberos_min_time_before_relogin="58000", log_retention_bytes="5")
        assert (ok.error_code, ok.error_message) == (0, None)
        assert cluster.broker.metadata.broker_configs("1") == {
            "sasl.kerberos.min.time.before.relogin": "58000", "log.retention.bytes": "5"}
        other = call("7", log_retention_bytes="5")
        assert other.error_code == ErrorCode.INVALID_REQUEST
        assert other.error_message == "Unexpected broker id, expected 1 or empty string, but received 7"
    finally:
        wire.close()


def test_new_values_apply_to_existing_logs(cluster: EmbeddedCluster, admin: Admin) -> None:
    bs = cluster.bootstrap_servers
    create_topic(bs, "dyn-live", 1)
    plog = cluster.broker.replica_manager.get("dyn-live", 0).log
    assert plog.config.segment_bytes == 1073741824
    alter(admin, BROKER, "", op("log.segment.bytes", "2000"), op("log.retention.ms", "3600000"))
    assert plog.config.segment_bytes == 2000 and plog.config.retention_ms == 3600000
    for i in range(4):  # one batch each, larger than a segment
        ck_produce(bs, "dyn-live", make_messages(50, 1, tag=f"live{i}"))
    assert len(plog.segments) >= 4, "the log rolls by the new segment size"
    # a topic override still wins over the broker's dynamic default
    alter(admin, TOPIC, "dyn-live", op("segment.bytes", "50000"))
    assert plog.config.segment_bytes == 50000
    alter(admin, BROKER, "", op("log.segment.bytes", None, AlterConfigOpType.DELETE),
          op("log.retention.ms", None, AlterConfigOpType.DELETE))
    assert plog.config.segment_bytes == 50000 and plog.config.retention_ms == 100 * 3_600_000


def test_dynamic_configs_survive_a_restart(server_factory: Callable[..., ServerProcess]) -> None:
    s = server_factory().start()
    a = Admin(s.bootstrap_servers)
    alter(a, BROKER, "", op("log.retention.ms", "7200000"))
    alter(a, BROKER, "1", op("message.max.bytes", "2000000"))
    s.stop()
    s.start()
    a = Admin(s.bootstrap_servers)
    b = describe(a, BROKER, "1")
    assert (b["log.retention.ms"].value, b["log.retention.ms"].source) == (
        "7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert (b["message.max.bytes"].value, b["message.max.bytes"].source) == (
        "2000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    s.stop()
