"""Topic-level log configuration, with Kafka's topic config names and defaults.

Kafka keeps two spellings of most settings: the broker default (``log.segment.bytes``) and
the per-topic override (``segment.bytes``). ``LogConfig`` holds the topic-level names;
``BROKER_DEFAULT_KEYS`` maps the broker spellings so a broker can build its default
``LogConfig`` from ``server.properties``. Values are validated the way Kafka's ``ConfigDef``
does (type, lower bound, allowed strings) and failures raise ``InvalidConfigError`` with
the key and the bad value, which the broker maps to INVALID_CONFIG.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sparklog.protocol.errors import InvalidConfigError

__all__ = ["LogConfig", "BROKER_DEFAULT_KEYS", "BROKER_LOG_KEYS", "LONG_MAX", "TOPIC_CONFIG_KEYS"]

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647


def _parse_bool(s: str) -> bool:
    v = s.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise ValueError("expected true or false")


def _parse_policy(s: str) -> str:
    parts = [p.strip().lower() for p in s.split(",") if p.strip()]
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError("expected delete, compact or compact,delete")
    return ",".join(sorted(set(parts)))


def _parse_ts_type(s: str) -> str:
    if s not in ("CreateTime", "LogAppendTime"):
        raise ValueError("expected CreateTime or LogAppendTime")
    return s


def _parse_compression(s: str) -> str:
    v = s.strip().lower()
    if v not in ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"):
        raise ValueError("expected uncompressed, zstd, lz4, snappy, gzip or producer")
    return v


# kafka name -> (attribute, parser, lower bound or None, default)
_SPEC: dict[str, tuple[str, Callable[[str], Any], int | None, Any]] = {
    "segment.bytes": ("segment_bytes", int, 14, 1073741824),
    "segment.ms": ("segment_ms", int, 1, 604800000),
    "segment.jitter.ms": ("segment_jitter_ms", int, 0, 0),
    "segment.index.bytes": ("segment_index_bytes", int, 4, 10485760),
    "index.interval.bytes": ("index_interval_bytes", int, 0, 4096),
    "max.message.bytes": ("max_message_bytes", int, 0, 1048588),
    "retention.ms": ("retention_ms", int, -1, 604800000),
    "retention.bytes": ("retention_bytes", int, None, -1),
    "cleanup.policy": ("cleanup_policy", _parse_policy, None, "delete"),
    "delete.retention.ms": ("delete_retention_ms", int, 0, 86400000),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", int, 0, 0),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", int, 1, LONG_MAX),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", float, 0, 0.5),
    "flush.messages": ("flush_messages", int, 1, LONG_MAX),
    "flush.ms": ("flush_ms", int, 0, LONG_MAX),
    "message.timestamp.type": ("message_timestamp_type", _parse_ts_type, None, "CreateTime"),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", int, 0, LONG_MAX),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", int, 0, 3600000),
    "min.insync.replicas": ("min_insync_replicas", int, 1, 1),
    "file.delete.delay.ms": ("file_delete_delay_ms", int, 0, 60000),
    "producer.id.expiration.ms": ("producer_id_expiration_ms", int, 1, 86400000),
    "compression.type": ("compression_type", _parse_compression, None, "producer"),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _parse_bool, None, False),
    "preallocate": ("preallocate", _parse_bool, None, False),
    "remote.storage.enable": ("remote_storage_enable", _parse_bool, None, False),
    "local.retention.ms": ("local_retention_ms", int, -2, -2),
    "local.retention.bytes": ("local_retention_bytes", int, -2, -2),
}

TOPIC_CONFIG_KEYS: tuple[str, ...] = tuple(_SPEC)

# broker-level default spelling -> topic-level name (server.properties -> LogConfig)
BROKER_DEFAULT_KEYS: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "message.max.bytes": "max.message.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "min.insync.replicas": "min.insync.replicas",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "producer.id.expiration.ms": "producer.id.expiration.ms",
    "compression.type": "compression.type",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "log.preallocate": "preallocate",
    "log.local.retention.ms": "local.retention.ms",
    "log.local.retention.bytes": "local.retention.bytes",
}
# Kafka's coarser broker spellings, applied only when the precise one is absent.
_BROKER_COARSE = {
    "log.roll.hours": ("segment.ms", 3600000),
    "log.roll.jitter.hours": ("segment.jitter.ms", 3600000),
    "log.retention.minutes": ("retention.ms", 60000),
    "log.retention.hours": ("retention.ms", 3600000),
}
# Every broker key ``from_broker_props`` reads.
BROKER_LOG_KEYS: frozenset[str] = frozenset(BROKER_DEFAULT_KEYS) | frozenset(_BROKER_COARSE)


@dataclass(frozen=True)
class LogConfig:
    """Immutable per-topic settings; build variants with ``with_overrides``."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    retention_ms: int = 604800000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    min_insync_replicas: int = 1
    file_delete_delay_ms: int = 60000
    producer_id_expiration_ms: int = 86400000
    compression_type: str = "producer"
    unclean_leader_election_enable: bool = False
    preallocate: bool = False
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2

    # -- derived
    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_index_entries(self) -> int:
        """Offset-index entries per segment (8 bytes each), which bounds a segment like Kafka."""
        return max(1, self.segment_index_bytes // 8)

    # -- construction
    @classmethod
    def from_props(cls, props: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Parse topic-level ``props`` (Kafka names, string values) over ``base``.

        Unknown keys raise InvalidConfigError, as Kafka's CreateTopics/AlterConfigs do."""
        values: dict[str, Any] = {}
        for key, raw in props.items():
            spec = _SPEC.get(key)
            if spec is None:
                raise InvalidConfigError(f"Unknown topic config name: {key}")
            attr, parser, lower, _default = spec
            values[attr] = _parse_value(key, raw, parser, lower)
        return (base or cls()).with_values(values)

    @classmethod
    def from_broker_props(cls, props: Mapping[str, str]) -> LogConfig:
        """The broker's default LogConfig from ``server.properties`` spellings; keys that are
        not log settings are ignored (the broker owns those)."""
        topic: dict[str, str] = {}
        for key, (name, unit) in _BROKER_COARSE.items():
            if key in props:
                try:
                    topic[name] = str(int(props[key]) * unit)
                except ValueError as exc:
                    raise InvalidConfigError(f"Invalid value {props[key]} for {key}") from exc
        for key, name in BROKER_DEFAULT_KEYS.items():
            if key in props:
                topic[name] = props[key]
        return cls.from_props(topic)

    def with_overrides(self, props: Mapping[str, str]) -> LogConfig:
        return LogConfig.from_props(props, base=self)

    def with_values(self, values: Mapping[str, Any]) -> LogConfig:
        cfg = dataclasses.replace(self, **values)
        cfg._check()
        return cfg

    def to_props(self) -> dict[str, str]:
        """Kafka names -> string values (DescribeConfigs)."""
        out: dict[str, str] = {}
        for key, (attr, _p, _l, _d) in _SPEC.items():
            v = getattr(self, attr)
            out[key] = ("true" if v else "false") if isinstance(v, bool) else str(v)
        return out

    @staticmethod
    def default_for(key: str) -> str:
        spec = _SPEC.get(key)
        if spec is None:
            raise InvalidConfigError(f"Unknown topic config name: {key}")
        v = spec[3]
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    def _check(self) -> None:
        if self.segment_bytes > INT_MAX:
            raise InvalidConfigError(f"Invalid value {self.segment_bytes} for segment.bytes")
        if self.max_message_bytes > INT_MAX:
            raise InvalidConfigError(
                f"Invalid value {self.max_message_bytes} for max.message.bytes"
            )
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise InvalidConfigError(
                f"Invalid value {self.min_cleanable_dirty_ratio} for min.cleanable.dirty.ratio"
            )
        if self.remote_storage_enable and self.compact:
            # Kafka's rule: the tier keeps segments as written, which compaction rewrites
            raise InvalidConfigError(
                "Remote log storage is only supported for topics with cleanup.policy=delete")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(
                "min.compaction.lag.ms must not exceed max.compaction.lag.ms"
            )


def _parse_value(key: str, raw: Any, parser: Callable[[str], Any], lower: int | None) -> Any:
    try:
        value = parser(str(raw).strip()) if parser is not float else float(str(raw).strip())
    except (ValueError, TypeError) as exc:
        raise InvalidConfigError(f"Invalid value {raw} for configuration {key}: {exc}") from exc
    if lower is not None and isinstance(value, int | float) and not isinstance(value, bool):
        if value < lower:
            raise InvalidConfigError(
                f"Invalid value {raw} for configuration {key}: Value must be at least {lower}"
            )
    if isinstance(value, int) and not isinstance(value, bool) and value > LONG_MAX:
        raise InvalidConfigError(f"Invalid value {raw} for configuration {key}: too large")
    return value
