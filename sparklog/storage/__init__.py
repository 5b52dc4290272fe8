"""Kafka-format partition logs on disk: segments, indexes, recovery, retention, compaction,
producer state, leader epochs, and the LogManager that runs them (see docs/architecture.md,
"On-disk layout"). Knows record batches, nothing of brokers or sockets."""

from .backend import FileSlice
from .log_config import LogConfig
from .log_info import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendInfo,
    FetchDataInfo,
    TimestampAndOffset,
)
from .log_manager import LogManager
from .partition_log import PartitionLog

__all__ = [
    "AppendInfo",
    "FetchDataInfo",
    "FileSlice",
    "LogConfig",
    "LogManager",
    "PartitionLog",
    "TimestampAndOffset",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
]
