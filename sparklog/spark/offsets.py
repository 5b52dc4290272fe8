"""The source's offsets as Spark checkpoints them: ``{"topic": {"0": 42, "1": 17}}``.

Each number is the *next* offset to read (so an end offset is exclusive), the convention of
``KafkaConsumer.position()`` and Spark's ``KafkaSourceOffset``: a batch covers
``[start[tp], end[tp])`` and the next batch starts where this one ended, with no +1/-1
arithmetic anywhere. Partition numbers are JSON object keys and therefore strings in the
checkpoint; inside the code offsets are ``dict[(topic, partition), int]`` (sparklog.client's
``TopicPartition`` is a NamedTuple, so it compares and hashes like the plain tuple).
"""

from __future__ import annotations

from collections.abc import Mapping

TopicPartitionKey = tuple[str, int]
PartitionOffsets = dict[TopicPartitionKey, int]

__all__ = ["PartitionOffsets", "TopicPartitionKey", "to_json_dict", "from_json_dict"]


def to_json_dict(offsets: Mapping[TopicPartitionKey, int]) -> dict[str, dict[str, int]]:
    """Offsets -> the checkpoint dict; topics and partitions sorted so equal offsets are equal
    JSON (Spark compares serialized offsets)."""
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets, key=lambda tp: (tp[0], tp[1])):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def from_json_dict(data: Mapping[str, Mapping[str, int]] | None) -> PartitionOffsets:
    """The checkpoint dict -> offsets. Raises ValueError on anything that is not the format."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ValueError(f"offset JSON must be an object of topics, got {data!r}")
    out: PartitionOffsets = {}
    for topic, parts in data.items():
        if not isinstance(parts, Mapping):
            raise ValueError(f"offsets of topic {topic!r} must be an object, got {parts!r}")
        for p, off in parts.items():
            if isinstance(off, bool) or not isinstance(off, int):
                raise ValueError(f"offset of {topic}-{p} must be an integer, got {off!r}")
            out[(str(topic), int(p))] = off
    return out
