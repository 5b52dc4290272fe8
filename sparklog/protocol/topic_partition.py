"""``TopicPartition``: the name of one partition, shared by every layer.

A NamedTuple on purpose: it hashes, compares, sorts and unpacks exactly like the plain
``(topic, partition)`` tuple, so dictionaries keyed by either find each other's entries,
``for (topic, partition), x in d.items()`` keeps working and offsets JSON, checkpoints and
assignments sort it in (topic, partition) order.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition"]


class TopicPartition(NamedTuple):
    topic: str
    partition: int
