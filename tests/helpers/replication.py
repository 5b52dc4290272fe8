"""Checking what a replicated cluster acknowledged: a confluent-kafka producer that records
every acknowledged record, and the count of acknowledged records lost, duplicated and
reordered per partition in what a consumer reads back (each must be 0)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from tests.helpers.kafka_clients import DEADLINE_S, Msg, ck_consume

__all__ = ["AckedProducer", "Damage", "damage"]


class AckedProducer:
    """confluent-kafka with acks=all and idempotence; ``acked[partition]`` lists the values
    the cluster acknowledged, in offset order."""

    def __init__(self, bootstrap: str, topic: str, **conf: Any) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.acked: dict[int, list[tuple[int, bytes]]] = {}
        self.errors: list[Any] = []
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "enable.idempotence": True, "linger.ms": 5, **conf})

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.setdefault(msg.partition(), []).append((msg.offset(), msg.value()))

    def send(self, values: list[bytes], partition: int = 0) -> None:
        for v in values:
            self._producer.produce(self.topic, value=v, partition=partition,
                                   on_delivery=self._on_delivery)
            self._producer.poll(0)
        left = self._producer.flush(DEADLINE_S)
        assert left == 0, f"{left} records never answered"

    def acked_values(self, partition: int) -> list[bytes]:
        return [v for _, v in sorted(self.acked.get(partition, []))]


@dataclass
class Damage:
    lost: dict[int, int] = field(default_factory=dict)
    duplicated: dict[int, int] = field(default_factory=dict)
    reordered: dict[int, int] = field(default_factory=dict)

    @property
    def none(self) -> bool:
        return not any(self.lost.values()) and not any(self.duplicated.values()) \
            and not any(self.reordered.values())


def damage(bootstrap: str, topic: str, partitions: int, producer: AckedProducer,
           expected_total: int) -> tuple[Damage, list[Msg]]:
    """Read every partition from the start and count, per partition, acknowledged values
    missing (lost), read more than once (duplicated), or read out of acknowledgement order
    (reordered)."""
    got = ck_consume(bootstrap, topic, partitions, expected_total)
    out = Damage()
    for part in range(partitions):
        read = [m.value for m in sorted(got, key=lambda m: m.offset) if m.partition == part]
        acked = producer.acked_values(part)
        counts = Counter(read)
        out.lost[part] = sum(1 for v in acked if counts[v] == 0)
        out.duplicated[part] = sum(n - 1 for n in counts.values() if n > 1)
        first = {}
        for i, v in enumerate(read):
            first.setdefault(v, i)
        positions = [first[v] for v in acked if v in first]
        out.reordered[part] = sum(1 for a, b in pairwise(positions) if b < a)
    return out, got
