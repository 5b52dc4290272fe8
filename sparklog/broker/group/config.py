"""The broker settings the group coordinator reads.

Their defaults are Kafka's, declared once with the keys in ``broker.config.BROKER_CONFIGS``;
a ``CoordinatorConfig`` is always read from a ``BrokerConfig``, so it has none of its own."""

from __future__ import annotations

from dataclasses import dataclass, fields

from sparklog.broker.config import BrokerConfig


@dataclass
class CoordinatorConfig:
    """One field per broker key: ``group.max.size`` is ``group_max_size``."""

    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_initial_rebalance_delay_ms: int
    group_max_size: int
    offsets_topic_num_partitions: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    offset_metadata_max_bytes: int

    @classmethod
    def from_broker_config(cls, cfg: BrokerConfig) -> CoordinatorConfig:
        """The coordinator's keys of ``cfg`` (their defaults where it does not set them)."""
        return cls(**{f.name: int(cfg.get(f.name.replace("_", "."))) for f in fields(cls)})

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
