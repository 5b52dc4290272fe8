"""BrokerConfig: Kafka names and defaults, properties parsing, derived values; the shipped
conf/server.properties parses and matches the defaults it documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparklog.broker.config import (
    BROKER_CONFIGS,
    BrokerConfig,
    ConfigSource,
    apply_config_ops,
    check_dynamic_broker_configs,
    parse_properties,
    validate_topic_configs,
)
from sparklog.protocol.errors import InvalidConfigError, InvalidRequestError

CONF = Path(__file__).resolve().parents[3] / "conf" / "server.properties"


def test_defaults_are_kafkas():
    c = BrokerConfig()
    assert c.get("num.partitions") == 1
    assert c.get("auto.create.topics.enable") is True
    assert c.get("socket.request.max.bytes") == 104857600
    assert c.get("message.max.bytes") == 1048588
    assert c.get("offsets.topic.num.partitions") == 50
    assert c.get("group.initial.rebalance.delay.ms") == 3000
    assert c.retention_ms == 168 * 3600 * 1000
    assert c.node_id == 1
    assert c.listener() == ("127.0.0.1", 9092)


def test_precedence_and_derived():
    c = BrokerConfig({"log.retention.minutes": "5", "log.retention.hours": "1",
                      "broker.id": "7", "listeners": "PLAINTEXT://0.0.0.0:0",
                      "log.dirs": "/a,/b"})
    assert c.retention_ms == 5 * 60_000
    assert c.node_id == 7
    assert c.advertised_listener(bound_port=4242) == ("127.0.0.1", 4242)
    assert c.log_dirs == ["/a", "/b"]
    with pytest.raises(InvalidConfigError):
        BrokerConfig({"num.partitions": "many"})


def test_properties_syntax():
    props = parse_properties("# c\n! c2\na=1\nb : two\nc=x\\\n  y\n\nempty=\n")
    assert props == {"a": "1", "b": "two", "c": "xy", "empty": ""}


def test_shipped_server_properties_document_the_defaults():
    props = parse_properties(CONF.read_text())
    assert props, "conf/server.properties is empty"
    for key, value in props.items():
        spec = BROKER_CONFIGS.get(key)
        assert spec is not None, f"{key} is not a known broker config"
        if key == "log.dirs":
            continue
        assert value == spec.default, f"{key}: file says {value}, default is {spec.default}"
    BrokerConfig(props)


def test_topic_config_validation():
    assert validate_topic_configs({"retention.ms": "-1", "cleanup.policy": "compact,delete"}) == {
        "retention.ms": "-1", "cleanup.policy": "compact,delete"}
    for bad in ({"nope": "1"}, {"retention.ms": "x"}, {"cleanup.policy": "shred"},
                {"segment.bytes": "1"}, {"message.timestamp.type": "Whenever"}):
        with pytest.raises(InvalidConfigError):
            validate_topic_configs(bad)


def test_dynamic_layers_precedence_and_sources():
    static = BrokerConfig({"log.segment.bytes": "1000", "log.retention.hours": "5"})
    c = static.with_dynamic({"log.segment.bytes": "2000", "log.retention.ms": "60000"},
                            {"log.segment.bytes": "3000"})
    assert c.get("log.segment.bytes") == 3000 and c.retention_ms == 60000
    assert c.layers("log.segment.bytes") == [
        (ConfigSource.DYNAMIC_BROKER_CONFIG, "3000"),
        (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, "2000"),
        (ConfigSource.STATIC_BROKER_CONFIG, "1000"),
        (ConfigSource.DEFAULT_CONFIG, "1073741824")]
    assert c.layers("log.retention.ms") == [(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, "60000")]
    assert c.topic_defaults()["segment.bytes"] == "3000"
    assert c.log_props() == {"log.segment.bytes": "3000", "log.retention.hours": "5",
                             "log.retention.ms": "60000"}
    assert c.with_overrides({"num.partitions": "4"}).get("log.segment.bytes") == 3000
    back = c.with_dynamic({}, {})
    assert back.get("log.segment.bytes") == 1000 and back.dynamic(default=True) == {}
    with pytest.raises(InvalidConfigError):
        static.with_dynamic({}, {"log.segment.bytes": "big"})


def test_only_dynamic_keys_change_at_run_time():
    check_dynamic_broker_configs(["log.retention.ms", "message.max.bytes", "custom.key"])
    with pytest.raises(InvalidConfigError,
                       match=r"Cannot update these configs dynamically: Set\(listeners, log.dirs\)"):
        check_dynamic_broker_configs(["log.dirs", "log.segment.bytes", "listeners"])


def test_incremental_ops():
    current = {"cleanup.policy": "compact", "retention.ms": "5"}
    defaults = {"cleanup.policy": "delete"}
    lists = {"cleanup.policy"}
    assert apply_config_ops(current, [("retention.ms", 1, None), ("segment.ms", 0, "9")],
                            defaults, lists) == {"cleanup.policy": "compact", "segment.ms": "9"}
    assert apply_config_ops({}, [("cleanup.policy", 2, "compact,delete")], defaults,
                            lists) == {"cleanup.policy": "delete,compact"}
    assert apply_config_ops(current, [("cleanup.policy", 3, "compact")], defaults,
                            lists) == {"cleanup.policy": "", "retention.ms": "5"}
    with pytest.raises(InvalidConfigError, match="append is not allowed for config key: x"):
        apply_config_ops({}, [("x", 2, "1")], defaults, lists)
    with pytest.raises(InvalidRequestError, match="duplicate config keys"):
        apply_config_ops({}, [("x", 0, "1"), ("x", 1, None)], defaults, lists)
    with pytest.raises(InvalidRequestError):
        apply_config_ops({}, [("x", 9, "1")], defaults, lists)
    with pytest.raises(InvalidRequestError):
        apply_config_ops({}, [("x", 0, None)], defaults, lists)


def test_roles_and_the_controller_voter():
    c = BrokerConfig()
    assert c.roles == {"broker", "controller"}
    assert c.controller_voter() is None
    assert c.get("broker.heartbeat.interval.ms") == 2000
    assert c.get("broker.session.timeout.ms") == 9000
    assert c.get("unclean.leader.election.enable") is False
    b = BrokerConfig({"process.roles": "broker", "node.id": "3",
                      "controller.quorum.voters": "0@127.0.0.1:9093"})
    assert b.roles == {"broker"} and b.node_id == 3
    assert b.controller_voter() == (0, "127.0.0.1", 9093)
    with pytest.raises(InvalidConfigError, match="exactly one"):
        BrokerConfig({"controller.quorum.voters": "0@h:1,1@h:2"}).controller_voter()
    for bad in ("h:1", "x@h:1", "0@h"):
        with pytest.raises(InvalidConfigError, match="ID@HOST:PORT"):
            BrokerConfig({"controller.quorum.voters": bad}).controller_voter()
    with pytest.raises(InvalidConfigError, match="process.roles"):
        _ = BrokerConfig({"process.roles": "broker,zookeeper"}).roles
