"""Broker configuration under Apache Kafka's names and defaults.

Operators bring ``server.properties`` files and muscle memory from Kafka, so every key here
is Kafka's key with Kafka's default (``conf/server.properties`` documents them). Unknown
keys are kept (and logged once) rather than rejected: a Kafka properties file full of keys
we do not implement yet must still start a broker.

Topic-level configs (``retention.ms``, ``cleanup.policy`` ...) default to a broker key
(``log.retention.ms`` ...); ``TOPIC_CONFIGS`` holds that mapping, which DescribeConfigs and
topic creation both use.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any

from sparklog.protocol.errors import InvalidConfigError, InvalidRequestError
from sparklog.protocol.internal_topics import CONSUMER_OFFSETS, TRANSACTION_STATE
from sparklog.storage.log_config import BROKER_LOG_KEYS

log = logging.getLogger(__name__)

PROCESS_ROLES = frozenset({"broker", "controller"})

__all__ = [
    "PROCESS_ROLES",
    "BrokerConfig",
    "ConfigDef",
    "BROKER_CONFIGS",
    "ConfigSource",
    "DYNAMIC_BROKER_KEYS",
    "TOPIC_CONFIGS",
    "TOPIC_CONFIG_SYNONYMS",
    "apply_config_ops",
    "check_dynamic_broker_configs",
    "parse_properties",
    "validate_topic_configs",
]


def _to_bool(value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _to_list(value: str) -> list[str]:
    return [p.strip() for p in value.split(",") if p.strip()]


_PARSERS: dict[str, Callable[[str], Any]] = {
    "int": int,
    "long": int,
    "double": float,
    "boolean": _to_bool,
    "string": str,
    "list": _to_list,
    "password": str,
}


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str  # int | long | double | boolean | string | list | password
    default: str | None
    doc: str = ""
    read_only: bool = True

    def parse(self, raw: str) -> Any:
        try:
            return _PARSERS[self.type](raw)
        except (ValueError, TypeError) as exc:
            raise InvalidConfigError(f"invalid value {raw!r} for {self.name}: {exc}") from None


def _defs(*items: tuple[str, str, str | None, str]) -> dict[str, ConfigDef]:
    return {name: ConfigDef(name, typ, default, doc) for name, typ, default, doc in items}


BROKER_CONFIGS: dict[str, ConfigDef] = _defs(
    ("process.roles", "list", "broker,controller",
     "broker, controller, or both (one process: today's single node)."),
    ("node.id", "int", "1", "Id of this node (KRaft name)."),
    ("controller.quorum.voters", "list", None,
     "ID@HOST:PORT of the controller (exactly one voter); a broker-only node needs it."),
    ("broker.heartbeat.interval.ms", "int", "2000", "How often a broker heartbeats the controller."),
    ("broker.session.timeout.ms", "int", "9000",
     "A broker with no heartbeat for this long is fenced (its leaderships move)."),
    ("broker.replacement.timeout.ms", "int", "60000",
     "A broker fenced for this long has its replicas reassigned to live brokers (sparklog's "
     "own: Kafka leaves it to operators)."),
    ("broker.id", "int", "-1", "Legacy broker id; used when set and node.id is not."),
    ("listeners", "list", "PLAINTEXT://127.0.0.1:9092", "Addresses the broker binds."),
    ("advertised.listeners", "list", None, "Addresses clients are told; defaults to listeners."),
    ("log.dirs", "list", None, "Data directories; defaults to log.dir."),
    ("log.dir", "string", "./sparklog-data", "Data directory when log.dirs is unset."),
    ("num.partitions", "int", "1", "Partitions of an auto-created topic."),
    ("default.replication.factor", "int", "1", "Replication factor of auto-created topics."),
    ("auto.create.topics.enable", "boolean", "true", "Create unknown topics on Metadata/Produce."),
    ("delete.topic.enable", "boolean", "true", "Allow DeleteTopics."),
    ("socket.request.max.bytes", "int", "104857600", "Largest request frame accepted."),
    ("socket.send.buffer.bytes", "int", "102400", "SO_SNDBUF (-1 = OS default)."),
    ("socket.receive.buffer.bytes", "int", "102400", "SO_RCVBUF (-1 = OS default)."),
    ("queued.max.requests", "int", "500", "Requests in flight per connection; more are not read."),
    ("connections.max.idle.ms", "long", "600000", "Idle connections are closed after this."),
    ("purgatory.max.requests", "int", "10000",
     "Requests parked broker-wide (long polls, acks=all); sparklog's own key, Kafka has none."),
    ("message.max.bytes", "int", "1048588", "Largest record batch (topic: max.message.bytes)."),
    ("replica.fetch.max.bytes", "int", "1048576", "Follower fetch size per partition."),
    ("fetch.max.bytes", "int", "57671680", "Upper bound on one fetch response."),
    ("min.insync.replicas", "int", "1", "Replicas that must ack an acks=all produce."),
    ("unclean.leader.election.enable", "boolean", "false", "Elect out-of-sync replicas."),
    ("offsets.topic.num.partitions", "int", "50", f"Partitions of {CONSUMER_OFFSETS}."),
    ("offsets.topic.replication.factor", "int", "3", f"Replication of {CONSUMER_OFFSETS} (capped by live brokers)."),
    ("offsets.topic.segment.bytes", "int", "104857600", f"Segment size of {CONSUMER_OFFSETS}."),
    ("offsets.retention.minutes", "int", "10080", "Committed offsets of empty groups expire after this."),
    ("offsets.retention.check.interval.ms", "long", "600000", "How often expired offsets are purged."),
    ("offsets.commit.timeout.ms", "int", "5000", "Wait for an offset commit to be durable."),
    ("group.min.session.timeout.ms", "int", "6000", "Smallest session timeout a member may ask."),
    ("group.max.session.timeout.ms", "int", "1800000", "Largest session timeout a member may ask."),
    ("group.initial.rebalance.delay.ms", "int", "3000", "Wait for more members of a new group."),
    ("group.max.size", "int", "2147483647", "Most members in one group."),
    ("offset.metadata.max.bytes", "int", "4096", "Longest metadata string an offset commit may carry."),
    ("transactional.id.expiration.ms", "int", "604800000", "Idle transactional ids expire."),
    ("producer.id.expiration.ms", "int", "86400000", "Idle idempotent producer state expires."),
    ("transaction.max.timeout.ms", "int", "900000", "Largest transaction timeout a producer may ask."),
    ("transaction.state.log.num.partitions", "int", "50", f"Partitions of {TRANSACTION_STATE}."),
    ("transaction.state.log.replication.factor", "int", "3",
     f"Replication of {TRANSACTION_STATE} (capped by live brokers)."),
    ("transaction.state.log.min.isr", "int", "2",
     f"min.insync.replicas of {TRANSACTION_STATE} (capped by its replication factor)."),
    ("transaction.state.log.segment.bytes", "int", "104857600", f"Segment size of {TRANSACTION_STATE}."),
    ("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", "10000",
     "How often transactions past their timeout are looked for and aborted."),
    ("transaction.remove.expired.transaction.cleanup.interval.ms", "int", "3600000",
     "How often expired transactional ids are looked for and removed."),
    ("transaction.two.phase.commit.enable", "boolean", "false",
     "Allow producers to ask for two-phase commit (KIP-939: no timeout, kept prepared)."),
    ("log.segment.bytes", "int", "1073741824", "Segment size (topic: segment.bytes)."),
    ("log.roll.ms", "long", None, "Roll a segment after this (topic: segment.ms)."),
    ("log.roll.hours", "int", "168", "Roll a segment after this many hours."),
    ("log.retention.ms", "long", None, "Keep data this long (topic: retention.ms)."),
    ("log.retention.minutes", "int", None, "Retention in minutes when log.retention.ms is unset."),
    ("log.retention.hours", "int", "168", "Retention in hours when ms/minutes are unset."),
    ("log.retention.bytes", "long", "-1", "Keep this many bytes per partition (-1 = no limit)."),
    ("log.retention.check.interval.ms", "long", "300000", "How often retention runs."),
    ("log.cleanup.policy", "list", "delete", "delete and/or compact (topic: cleanup.policy)."),
    ("log.cleaner.enable", "boolean", "true", "Run the compactor."),
    ("log.cleaner.backoff.ms", "long", "15000", "How often the compactor looks for work."),
    ("log.cleaner.delete.retention.ms", "long", "86400000", "Tombstones kept this long after compaction."),
    ("log.cleaner.min.cleanable.ratio", "double", "0.5", "Dirty ratio that triggers compaction."),
    ("log.cleaner.min.compaction.lag.ms", "long", "0", "Records younger than this are not compacted."),
    ("log.cleaner.max.compaction.lag.ms", "long", "9223372036854775807", "Compact records at the latest after this."),
    ("log.index.interval.bytes", "int", "4096", "Bytes between offset-index entries."),
    ("log.index.size.max.bytes", "int", "10485760", "Largest index file; a full index rolls."),
    ("log.flush.interval.messages", "long", "9223372036854775807", "fsync after this many messages."),
    ("log.flush.interval.ms", "long", None, "fsync after this many ms (unset = never by time)."),
    ("log.flush.scheduler.interval.ms", "long", "9223372036854775807", "How often the flusher checks."),
    ("log.flush.offset.checkpoint.interval.ms", "int", "60000", "Recovery-point checkpoint interval."),
    ("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime."),
    ("log.message.timestamp.before.max.ms", "long", "9223372036854775807", "Reject timestamps older than this."),
    ("log.message.timestamp.after.max.ms", "long", "3600000", "Reject timestamps further in the future."),
    ("log.preallocate", "boolean", "false", "Preallocate segment files."),
    ("compression.type", "string", "producer", "Broker-side compression (only 'producer' is served)."),
    ("replica.lag.time.max.ms", "long", "30000", "A follower this far behind leaves the ISR."),
    ("replica.fetch.wait.max.ms", "int", "500", "Longest a follower fetch waits at the leader."),
    ("replica.fetch.min.bytes", "int", "1", "Bytes a follower fetch waits for at the leader."),
    ("replica.fetch.response.max.bytes", "int", "10485760", "Upper bound on one follower fetch."),
    ("replica.fetch.backoff.ms", "int", "1000", "Follower pause after a failed fetch."),
    ("replica.socket.timeout.ms", "int", "30000", "Follower request timeout."),
    ("request.timeout.ms", "int", "30000",
     "How long a coordinator's own writes wait for the ISR, and its requests to other brokers."),
    ("num.network.threads", "int", "3", "Accepted for compatibility; asyncio uses one loop."),
    ("num.io.threads", "int", "8", "Accepted for compatibility; asyncio uses one loop."),
    ("controlled.shutdown.enable", "boolean", "true",
     "On SIGTERM a broker-only node asks the controller to move its leaderships first."),
    ("auto.leader.rebalance.enable", "boolean", "true",
     "Move leadership back to the preferred (first) replica when it is in the ISR."),
    ("leader.imbalance.check.interval.seconds", "long", "300", "How often that check runs."),
    ("leader.imbalance.per.broker.percentage", "int", "10",
     "Rebalance a broker's leaderships when more than this share of them is elsewhere."),
    ("log.local.retention.ms", "long", "-2",
     "Tiered topics keep uploaded segments locally this long (-2 = log.retention.ms)."),
    ("log.local.retention.bytes", "long", "-2",
     "Tiered topics keep this many bytes locally (-2 = log.retention.bytes)."),
    ("remote.log.storage.system.enable", "boolean", "false",
     "Enable the object-storage tier (KIP-405) on this broker."),
    ("remote.log.manager.task.interval.ms", "long", "30000",
     "How often sealed segments are uploaded and tier retention runs."),
    ("remote.log.storage.url", "string", None,
     "fsspec URL of the tier (sparklog's key), e.g. s3://bucket/prefix or file:///path; "
     "remote.log.storage.options.<key> are passed to the filesystem."),
    ("remote.log.storage.cache.bytes", "long", "67108864",
     "Bytes of recently read remote chunks kept in memory (sparklog's key)."),
    ("remote.log.reader.threads", "int", "10",
     "Threads reading the bucket for fetches below a tiered log's local start."),
    ("remote.log.reader.max.pending.tasks", "int", "100",
     "Bucket reads that may wait for a thread; a fetch needing more gets "
     "KAFKA_STORAGE_ERROR (retriable)."),
    ("remote.fetch.max.wait.ms", "int", "500",
     "How long a fetch waits for its bucket reads (KIP-1018); partitions whose read is not "
     "done are answered empty and the client fetches again."),
)

# topic config -> (type, broker key whose value is the default, fallback default)
TOPIC_CONFIGS: dict[str, tuple[str, str | None, str | None]] = {
    "cleanup.policy": ("list", "log.cleanup.policy", "delete"),
    "compression.type": ("string", "compression.type", "producer"),
    "delete.retention.ms": ("long", "log.cleaner.delete.retention.ms", "86400000"),
    "file.delete.delay.ms": ("long", None, "60000"),
    "flush.messages": ("long", "log.flush.interval.messages", "9223372036854775807"),
    "flush.ms": ("long", "log.flush.interval.ms", "9223372036854775807"),
    "index.interval.bytes": ("int", "log.index.interval.bytes", "4096"),
    "max.compaction.lag.ms": ("long", "log.cleaner.max.compaction.lag.ms", "9223372036854775807"),
    "max.message.bytes": ("int", "message.max.bytes", "1048588"),
    "message.timestamp.type": ("string", "log.message.timestamp.type", "CreateTime"),
    "message.timestamp.before.max.ms": ("long", "log.message.timestamp.before.max.ms", "9223372036854775807"),
    "message.timestamp.after.max.ms": ("long", "log.message.timestamp.after.max.ms", "3600000"),
    "min.cleanable.dirty.ratio": ("double", "log.cleaner.min.cleanable.ratio", "0.5"),
    "min.compaction.lag.ms": ("long", "log.cleaner.min.compaction.lag.ms", "0"),
    "min.insync.replicas": ("int", "min.insync.replicas", "1"),
    "local.retention.bytes": ("long", "log.local.retention.bytes", "-2"),
    "local.retention.ms": ("long", "log.local.retention.ms", "-2"),
    "preallocate": ("boolean", "log.preallocate", "false"),
    "remote.storage.enable": ("boolean", None, "false"),
    "retention.bytes": ("long", "log.retention.bytes", "-1"),
    "retention.ms": ("long", None, "604800000"),
    "segment.bytes": ("int", "log.segment.bytes", "1073741824"),
    "segment.index.bytes": ("int", "log.index.size.max.bytes", "10485760"),
    "segment.jitter.ms": ("long", None, "0"),
    "segment.ms": ("long", None, "604800000"),
    "unclean.leader.election.enable": ("boolean", "unclean.leader.election.enable", "false"),
}

# -1 means "no limit"; local.retention.* also take -2 ("the same as retention.*")
_SIGNED_TOPIC_KEYS = frozenset({"retention.ms", "retention.bytes", "local.retention.ms",
                                "local.retention.bytes"})

_TOPIC_VALIDATORS: dict[str, Callable[[str], None]] = {}


def _check_enum(name: str, allowed: set[str]) -> Callable[[str], None]:
    def check(value: str) -> None:
        parts = _to_list(value) if name == "cleanup.policy" else [value]
        if not parts or any(p not in allowed for p in parts):
            raise InvalidConfigError(f"invalid value {value!r} for {name}; allowed: {sorted(allowed)}")

    return check


_TOPIC_VALIDATORS["cleanup.policy"] = _check_enum("cleanup.policy", {"delete", "compact"})
_TOPIC_VALIDATORS["message.timestamp.type"] = _check_enum(
    "message.timestamp.type", {"CreateTime", "LogAppendTime"}
)
_TOPIC_VALIDATORS["compression.type"] = _check_enum(
    "compression.type", {"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}
)


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check names and values of topic configs; raise InvalidConfigError on the first bad one.

    ``None`` values mean "reset to default" and are dropped from the result.
    """
    out: dict[str, str] = {}
    for name, value in configs.items():
        spec = TOPIC_CONFIGS.get(name)
        if spec is None:
            raise InvalidConfigError(f"unknown topic config {name!r}")
        if value is None:
            continue
        typ = spec[0]
        try:
            parsed = _PARSERS[typ](value)
        except (ValueError, TypeError):
            raise InvalidConfigError(f"invalid value {value!r} for {name} (expects {typ})") from None
        if typ in ("int", "long") and name not in _SIGNED_TOPIC_KEYS and parsed < 0:
            raise InvalidConfigError(f"{name} must be >= 0, got {value}")
        if name in ("local.retention.ms", "local.retention.bytes") and parsed < -2:
            raise InvalidConfigError(f"{name} must be >= -2, got {value}")
        if name in ("retention.ms", "retention.bytes") and parsed < -1:
            raise InvalidConfigError(f"{name} must be >= -1, got {value}")
        if name == "segment.bytes" and parsed < 14:
            raise InvalidConfigError(f"segment.bytes must be >= 14, got {value}")
        if name == "min.insync.replicas" and parsed < 1:
            raise InvalidConfigError("min.insync.replicas must be >= 1")
        check = _TOPIC_VALIDATORS.get(name)
        if check is not None:
            check(value)
        out[name] = value
    return out


class ConfigSource(IntEnum):
    """Where a config value comes from (Kafka's DescribeConfigs ConfigSource ids)."""
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


# Broker keys an operator may change at run time, per broker or cluster-wide (Kafka's
# DynamicLogConfig set: the broker spellings of topic configs). They feed every log's
# config, so a change reaches existing logs at once. Kafka's other dynamic keys (thread
# pools, listeners, SSL, quotas) have no counterpart in sparklog.
DYNAMIC_BROKER_KEYS: frozenset[str] = BROKER_LOG_KEYS

# topic config -> the broker keys that give its default, highest precedence first
TOPIC_CONFIG_SYNONYMS: dict[str, tuple[str, ...]] = {
    **{name: (broker_key,) for name, (_t, broker_key, _f) in TOPIC_CONFIGS.items()
       if broker_key is not None},
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
}


def check_dynamic_broker_configs(names: Collection[str]) -> None:
    """Refuse known broker keys that cannot change at run time, as Kafka does (keys it does
    not know are stored as given: Kafka accepts custom configs)."""
    static = sorted(n for n in names if n in BROKER_CONFIGS and n not in DYNAMIC_BROKER_KEYS)
    if static:
        raise InvalidConfigError(
            f"Cannot update these configs dynamically: Set({', '.join(static)})")


# IncrementalAlterConfigs' operations (Kafka's AlterConfigOp.OpType ids)
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def apply_config_ops(current: Mapping[str, str],
                     ops: Sequence[tuple[str, int, str | None]],
                     defaults: Mapping[str, str], list_keys: Collection[str]) -> dict[str, str]:
    """A resource's overrides after IncrementalAlterConfigs' (name, operation, value) edits.

    As Kafka: a key may appear once per resource; APPEND/SUBTRACT work on list keys only and
    start from the override, else the default (APPEND skips values already there); DELETE
    drops the override. The result is not validated here (the caller validates the set).
    """
    names = [name for name, _op, _value in ops]
    if len(set(names)) != len(names):
        raise InvalidRequestError("Error due to duplicate config keys")
    out = dict(current)
    for name, op, value in ops:
        if op == OP_DELETE:
            out.pop(name, None)
            continue
        if op not in (OP_SET, OP_APPEND, OP_SUBTRACT):
            raise InvalidRequestError(f"Unknown config operation {op} for {name}")
        if value is None:
            raise InvalidRequestError(f"Null value not supported for : {name}")
        if op == OP_SET:
            out[name] = value
            continue
        verb = "append" if op == OP_APPEND else "subtract"
        if name not in list_keys:
            raise InvalidConfigError(f"Config value {verb} is not allowed for config key: {name}")
        base = _to_list(out.get(name, defaults.get(name, "")))
        given = _to_list(value)
        if op == OP_APPEND:
            merged = base + [v for v in given if v not in base]
        else:
            merged = [v for v in base if v not in given]
        out[name] = ",".join(merged)
    return out


def parse_properties(text: str) -> dict[str, str]:
    """Java-properties subset: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments,
    trailing-backslash continuations."""
    props: dict[str, str] = {}
    pending = ""
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line = pending + line
        pending = ""
        for i, ch in enumerate(line):
            if ch in "=:":
                key, value = line[:i].strip(), line[i + 1 :].strip()
                break
        else:
            key, value = line, ""
        if key:
            props[key] = value
    return props


class BrokerConfig:
    """Immutable view of the broker's settings; typed values by Kafka key.

    Three layers, highest precedence first (Kafka's order): the broker's own dynamic
    configs, the cluster-wide dynamic defaults (both set at run time, stored in the cluster
    metadata) and the static ``server.properties``; a key none of them sets has its
    default. ``layers`` says which layer gave what (DescribeConfigs' sources and synonyms).
    """

    def __init__(self, props: Mapping[str, str] | None = None, *,
                 dynamic_default: Mapping[str, str] | None = None,
                 dynamic_broker: Mapping[str, str] | None = None) -> None:
        self._static: dict[str, str] = {k: str(v) for k, v in (props or {}).items()}
        self._dynamic_default = dict(dynamic_default or {})
        self._dynamic_broker = dict(dynamic_broker or {})
        self._raw = {**self._static, **self._dynamic_default, **self._dynamic_broker}
        self._values: dict[str, Any] = {}
        for name, spec in BROKER_CONFIGS.items():
            raw = self._raw.get(name, spec.default)
            self._values[name] = None if raw is None else spec.parse(raw)
        if dynamic_default is None and dynamic_broker is None:
            unknown = sorted(k for k in self._raw if k not in BROKER_CONFIGS)
            if unknown:
                log.info("config keys not used by sparklog (kept as given): %s",
                         ", ".join(unknown))

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> BrokerConfig:
        return cls(props)

    @classmethod
    def from_file(cls, path: str | Path, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        props = parse_properties(Path(path).read_text(encoding="utf-8"))
        props.update(overrides or {})
        return cls(props)

    def get(self, name: str) -> Any:
        """Typed value of a known key, the raw string of an unknown one, else None."""
        if name in self._values:
            return self._values[name]
        return self._raw.get(name)

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def is_set(self, name: str) -> bool:
        return name in self._raw

    def with_overrides(self, overrides: Mapping[str, str]) -> BrokerConfig:
        """These static settings changed (the dynamic layers stay)."""
        merged = dict(self._static)
        merged.update({k: str(v) for k, v in overrides.items()})
        return BrokerConfig(merged, dynamic_default=self._dynamic_default,
                            dynamic_broker=self._dynamic_broker)

    def with_dynamic(self, default: Mapping[str, str], broker: Mapping[str, str]) -> BrokerConfig:
        """The same static settings under these dynamic layers (values are checked)."""
        return BrokerConfig(self._static, dynamic_default=default, dynamic_broker=broker)

    def dynamic(self, *, default: bool) -> dict[str, str]:
        """The cluster-wide dynamic defaults, or this broker's own dynamic configs."""
        return dict(self._dynamic_default if default else self._dynamic_broker)

    def layers(self, name: str) -> list[tuple[ConfigSource, str | None]]:
        """(source, raw value) of every layer that has ``name``, highest precedence first,
        ending with Kafka's default when sparklog knows one."""
        out: list[tuple[ConfigSource, str | None]] = []
        for source, layer in ((ConfigSource.DYNAMIC_BROKER_CONFIG, self._dynamic_broker),
                              (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self._dynamic_default),
                              (ConfigSource.STATIC_BROKER_CONFIG, self._static)):
            if name in layer:
                out.append((source, layer[name]))
        spec = BROKER_CONFIGS.get(name)
        if spec is not None and spec.default is not None:
            out.append((ConfigSource.DEFAULT_CONFIG, spec.default))
        return out

    def items(self) -> list[tuple[str, Any]]:
        return sorted(self._values.items())

    def raw(self) -> dict[str, str]:
        return dict(self._raw)

    def log_props(self) -> dict[str, str]:
        """The settings every log's config is derived from (``LogConfig.from_broker_props``)."""
        return {k: v for k, v in self._raw.items() if k in BROKER_LOG_KEYS}

    # -- derived values Kafka computes from several keys ---------------------------------

    @property
    def node_id(self) -> int:
        if not self.is_set("node.id") and self.is_set("broker.id") and self.get("broker.id") >= 0:
            return int(self.get("broker.id"))
        return int(self.get("node.id"))

    @property
    def roles(self) -> frozenset[str]:
        """``process.roles``: {"broker"}, {"controller"} or both (the single node)."""
        roles = frozenset(self.get("process.roles") or ())
        if not roles or roles - PROCESS_ROLES:
            raise InvalidConfigError(
                f"process.roles must be broker, controller or broker,controller, got "
                f"{','.join(self.get('process.roles') or ())!r}")
        return roles

    def controller_voter(self) -> tuple[int, str, int] | None:
        """(node id, host, port) of ``controller.quorum.voters``, None when unset. sparklog
        runs one active controller and no quorum, so more than one voter is refused."""
        voters = self.get("controller.quorum.voters")
        if not voters:
            return None
        if len(voters) != 1:
            raise InvalidConfigError(
                f"controller.quorum.voters lists {len(voters)} voters; sparklog runs exactly one "
                "controller, so give exactly one ID@HOST:PORT")
        node, sep, address = voters[0].partition("@")
        try:
            host, port = parse_listener(address)
            if not sep or not host:
                raise ValueError
            return int(node), host, port
        except (ValueError, InvalidConfigError):
            raise InvalidConfigError(
                f"invalid controller.quorum.voters {voters[0]!r}: expected ID@HOST:PORT") from None

    def check_roles(self) -> None:
        """``process.roles`` and ``controller.quorum.voters`` make a node that can start:
        valid roles, at most one voter, and a voter for a broker-only node."""
        if self.roles == {"broker"} and self.controller_voter() is None:
            raise InvalidConfigError(
                "process.roles=broker needs controller.quorum.voters=ID@HOST:PORT "
                "(the controller this broker registers with)")
        self.controller_voter()

    @property
    def log_dirs(self) -> list[str]:
        dirs = self.get("log.dirs")
        return list(dirs) if dirs else [self.get("log.dir")]

    @property
    def retention_ms(self) -> int:
        if self.get("log.retention.ms") is not None:
            return int(self.get("log.retention.ms"))
        if self.get("log.retention.minutes") is not None:
            return int(self.get("log.retention.minutes")) * 60_000
        return int(self.get("log.retention.hours")) * 3_600_000

    @property
    def segment_ms(self) -> int:
        if self.get("log.roll.ms") is not None:
            return int(self.get("log.roll.ms"))
        return int(self.get("log.roll.hours")) * 3_600_000

    def listener(self) -> tuple[str, int]:
        """(host, port) of the first listener."""
        return parse_listener(self.get("listeners")[0])

    def advertised_listener(self, bound_port: int | None = None) -> tuple[str, int]:
        """What Metadata tells clients; port 0 in a listener means 'whatever was bound'."""
        adv = self.get("advertised.listeners")
        host, port = parse_listener(adv[0]) if adv else self.listener()
        if port == 0 and bound_port is not None:
            port = bound_port
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        return host, port

    def topic_defaults(self) -> dict[str, str]:
        """Effective default of every topic config, derived from broker keys."""
        out: dict[str, str] = {}
        for name, (_typ, broker_key, fallback) in TOPIC_CONFIGS.items():
            value: str | None = None
            if name == "retention.ms":
                value = str(self.retention_ms)
            elif name == "segment.ms":
                value = str(self.segment_ms)
            elif broker_key is not None:
                raw = self._raw.get(broker_key, BROKER_CONFIGS[broker_key].default)
                value = raw
            if value is None:
                value = fallback
            out[name] = "" if value is None else value
        return out


def parse_listener(listener: str) -> tuple[str, int]:
    """'PLAINTEXT://host:port' or 'host:port' -> (host, port)."""
    spec = listener.split("://", 1)[1] if "://" in listener else listener
    host, _, port = spec.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return host, int(port)
    except ValueError:
        raise InvalidConfigError(f"invalid listener {listener!r}") from None
