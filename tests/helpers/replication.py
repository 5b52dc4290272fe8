"""Checking what a replicated cluster acknowledged: a confluent-kafka producer that records
every acknowledged record (``AckedProducer`` for a fixed list, ``ProducerLoad`` for a steady
load on a thread while faults happen), the count of acknowledged records lost,
duplicated and reordered per partition in what a consumer reads back (each must be 0), and
whether a topic is fully replicated again after a broker's loss."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from tests.helpers.kafka_clients import DEADLINE_S, Msg, ck_consume

__all__ = ["AckedProducer", "Damage", "ProducerLoad", "damage", "fully_replicated_without",
           "records_to_end"]


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

    def acked_count(self) -> int:
        return sum(len(a) for a in self.acked.values())


class ProducerLoad(AckedProducer):
    """A steady acks=all load on a thread (``with ProducerLoad(...) as load:``): values
    ``<prefix><n>`` round-robin over the partitions, ``rate`` records a second at most, each
    acknowledged one recorded; leaving the block stops producing and waits for every
    answer. ``errors`` holds the delivery errors (a retriable one is retried by the client
    until ``message.timeout.ms``, so any that arrives is final)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int = 1000,
                 prefix: bytes = b"", **conf: Any) -> None:
        super().__init__(bootstrap, topic, **conf)
        self.partitions = partitions
        self._prefix = prefix
        self._interval = 50 / rate  # seconds per round of 50 records
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"load-{topic}", daemon=True)
        self.sent = 0

    def __enter__(self) -> ProducerLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            for _ in range(50):
                self._producer.produce(self.topic, value=b"%s%d" % (self._prefix, self.sent),
                                       partition=self.sent % self.partitions,
                                       on_delivery=self._on_delivery)
                self.sent += 1
            self._producer.poll(0)
            self._stop.wait(self._interval)

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(10)
        left = self._producer.flush(DEADLINE_S)
        assert left == 0, f"{left} records never answered"


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
           expected_total: int | None = None) -> tuple[Damage, list[Msg]]:
    """Read every partition from the start (``expected_total`` records; None: up to the
    high watermarks) and count, per partition, acknowledged values missing (lost), read
    more than once (duplicated), or read out of acknowledgement order (reordered)."""
    if expected_total is None:
        expected_total = records_to_end(bootstrap, topic, partitions)
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


def records_to_end(bootstrap: str, topic: str, partitions: int) -> int:
    """How many records ``topic`` holds below each partition's high watermark now, records
    written but never acknowledged included."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    def watermarks(c: Consumer, p: int) -> tuple[int, int]:
        # right after a leader moves, librdkafka may time out once on stale metadata
        for attempt in range(3):
            try:
                return c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            except KafkaException:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"records-to-end-{topic}"})
    try:
        return sum(hi - lo for lo, hi in (watermarks(c, p) for p in range(partitions)))
    finally:
        c.close()


def fully_replicated_without(bootstrap: str, topic: str, partitions: int, rf: int,
                             gone: int) -> bool:
    """Whether each of the topic's ``partitions`` partitions is on ``rf`` replicas, all in
    the ISR, none of them broker ``gone`` (as confluent-kafka's metadata says)."""
    from confluent_kafka.admin import AdminClient

    parts = list(AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
                 .topics[topic].partitions.values())
    return len(parts) == partitions and all(
        len(p.replicas) == rf and gone not in p.replicas and sorted(p.isrs) == sorted(p.replicas)
        for p in parts)
