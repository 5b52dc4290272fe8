"""Broker parts driven in-process, without sockets: the replica manager's ``Logs`` over a
real LogManager, and requests through a ``Dispatcher`` as a connection hands them over."""

from __future__ import annotations

from typing import Any

from sparklog.broker.dispatch import Dispatcher
from sparklog.broker.server import Connection, KafkaServer
from sparklog.protocol.messages import decode_response, encode_request
from sparklog.protocol.schema import TopLevel
from sparklog.storage.log_config import LogConfig
from sparklog.storage.log_manager import LogManager
from sparklog.storage.partition_log import PartitionLog

__all__ = ["ManagedLogs", "connection", "decode", "request_frame", "roundtrip"]


class ManagedLogs:
    """The replica manager's ``Logs`` over a LogManager, one config per topic (the broker's
    is the Broker itself, which reads the configs from its metadata cache)."""

    def __init__(self, manager: LogManager, configs: dict[str, LogConfig] | None = None) -> None:
        self.manager = manager
        self.configs = configs or {}

    def open_log(self, topic: str, partition: int, topic_id: bytes) -> PartitionLog:
        return self.manager.get_or_create_log(topic, partition, self.configs.get(topic),
                                              topic_id=topic_id)

    def close_log(self, topic: str, partition: int, *, delete: bool) -> None:
        if delete:
            self.manager.delete_log(topic, partition)


def connection(dispatcher: Dispatcher) -> Connection:
    """A connection (never connected) whose server processes frames with ``dispatcher``."""
    return Connection(KafkaServer(dispatcher.process))


def request_frame(api_key: int, version: int, request: TopLevel,
                  correlation_id: int = 7) -> bytearray:
    """A request frame as the connection hands it to the dispatcher (no size prefix)."""
    return bytearray(encode_request(api_key, version, correlation_id, "test", request)[4:])


def decode(api_key: int, version: int, chunks: list[Any]) -> tuple[int, Any]:
    """(correlation id, response) from the dispatcher's response chunks."""
    return decode_response(api_key, version, b"".join(bytes(c) for c in chunks))


async def roundtrip(dispatcher: Dispatcher, api_key: int, version: int,
                    request: TopLevel) -> Any:
    """The response ``dispatcher`` gives ``request``."""
    chunks = await dispatcher.process(connection(dispatcher),
                                      request_frame(api_key, version, request))
    return decode(api_key, version, chunks)[1]
