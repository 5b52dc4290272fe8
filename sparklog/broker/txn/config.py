"""The broker settings the transaction coordinator reads, with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields

from sparklog.broker.config import BrokerConfig


@dataclass
class TxnConfig:
    """One field per broker key: ``transaction.max.timeout.ms`` is
    ``transaction_max_timeout_ms``."""

    transaction_max_timeout_ms: int = 900000
    transactional_id_expiration_ms: int = 604800000
    transaction_state_log_num_partitions: int = 50
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3600000
    transaction_two_phase_commit_enable: bool = False

    @classmethod
    def from_broker_config(cls, cfg: BrokerConfig) -> TxnConfig:
        """Every field from its key's typed value (``BrokerConfig.get``)."""
        return cls(**{f.name: cfg.get(f.name.replace("_", ".")) for f in fields(cls)})
