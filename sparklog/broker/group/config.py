"""The broker settings the group coordinator reads, with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields

from sparklog.broker.config import BrokerConfig


@dataclass
class CoordinatorConfig:
    """One field per broker key: ``group.max.size`` is ``group_max_size``."""

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2147483647
    offsets_topic_num_partitions: int = 50
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096

    @classmethod
    def from_broker_config(cls, cfg: BrokerConfig) -> CoordinatorConfig:
        return cls(**{f.name: int(cfg.get(f.name.replace("_", "."))) for f in fields(cls)})

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
