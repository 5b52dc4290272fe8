"""The loop of the requests addressed to partitions (ListOffsets, OffsetForLeaderEpoch,
DeleteRecords): every requested partition is answered on its own, so one partition's
failure (not led here, a fenced epoch, an offset out of range) is that partition's error
code and never the whole response's, as in Kafka.

Invariant: the response lists every requested topic and partition once, in request order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sparklog.protocol.errors import KafkaError
from sparklog.protocol.schema import Message

__all__ = ["answer_partitions"]


def answer_partitions(
    topics: Iterable[Message],
    answer: Callable[[Message, Message], Message],
    failed: Callable[[Message, KafkaError], Message],
    topic_result: Callable[[Message, list[Message]], Message],
) -> list[Message]:
    """``topic_result(topic, results)`` per requested topic, where ``results`` holds
    ``answer(topic, partition)`` per requested partition, or ``failed(partition, error)``
    where that raised a KafkaError."""
    out = []
    for t in topics:
        results = []
        for r in t.partitions:
            try:
                results.append(answer(t, r))
            except KafkaError as exc:
                results.append(failed(r, exc))
        out.append(topic_result(t, results))
    return out
