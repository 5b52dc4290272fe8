"""What a producer's send answers: the delivery report (``RecordMetadata``, also what
``send()``'s future resolves to), the failure ``flush`` raises for records without a callback
(``DeliveryError``), and the interceptor hooks that see a record on send and its report on
acknowledgement (``ProducerInterceptor``, Kafka's). Kept apart from ``producer`` because
callers and interceptors use these types without the sender's machinery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparklog.protocol.errors import SparklogError

__all__ = ["DeliveryError", "ProducerInterceptor", "RecordMetadata"]


@dataclass(slots=True)
class RecordMetadata:
    """What a delivery report carries (and what ``send()``'s future resolves to)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None = None
    value: bytes | None = None

    # confluent-kafka Message-style accessors, so callbacks written for it work unchanged
    def error(self) -> None:
        return None


class DeliveryError(SparklogError):
    """Records could not be delivered (raised by ``flush`` for records without a callback)."""


class ProducerInterceptor:
    """Base class for ``interceptors``: seen on send and on acknowledgement (Kafka's
    ProducerInterceptor). ``on_send`` may return replacement (key, value, headers)."""

    def on_send(self, topic: str, partition: int | None, key: bytes | None,
                value: bytes | None, headers: list | None) -> Any:
        return None

    def on_acknowledgement(self, metadata: RecordMetadata | None, error: Exception | None) -> None:
        return None
