"""Partition assignors run by the group leader, and the consumer protocol's byte formats.

Same names and results as the Java client's RangeAssignor ("range"), RoundRobinAssignor
("roundrobin") and CooperativeStickyAssignor ("cooperative-sticky"), so a sparklog consumer
can share a group with Java/librdkafka consumers. The cooperative assignor never moves a
partition straight from one member to another within one rebalance: it withholds it, the
old owner revokes it and rejoins, and the next round hands it over (KIP-429).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from sparklog.protocol.primitives import Reader, Writer
from sparklog.protocol.topic_partition import TopicPartition

__all__ = [
    "Subscription",
    "encode_subscription",
    "decode_subscription",
    "encode_assignment",
    "decode_assignment",
    "ASSIGNORS",
    "assign",
]


@dataclass
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned: list[TopicPartition] = field(default_factory=list)
    generation: int = -1


def _group_tps(tps: list[TopicPartition]) -> list[tuple[str, list[int]]]:
    by: dict[str, list[int]] = defaultdict(list)
    for t, p in tps:
        by[t].append(p)
    return [(t, sorted(ps)) for t, ps in sorted(by.items())]


def encode_subscription(sub: Subscription, version: int = 1) -> bytes:
    w = Writer()
    w.int16(version)
    w.array(sub.topics, lambda w, t: w.string(t))
    w.nullable_bytes(sub.user_data)
    if version >= 1:
        w.array(_group_tps(sub.owned), _write_tp_group)
    if version >= 2:
        w.int32(sub.generation)
    return w.getvalue()


def _write_tp_group(w: Writer, item: tuple[str, list[int]]) -> None:
    w.string(item[0])
    w.array(item[1], lambda w, p: w.int32(p))


def _read_tp_group(r: Reader) -> tuple[str, list[int]]:
    t = r.string()
    ps = r.array(lambda r: r.int32())
    return t, ps or []


def decode_subscription(raw: bytes | memoryview) -> Subscription:
    r = Reader(raw)
    version = r.int16()
    topics = r.array(lambda r: r.string()) or []
    user_data = r.nullable_bytes() if r.remaining() else None
    owned: list[TopicPartition] = []
    generation = -1
    if version >= 1 and r.remaining():
        for t, ps in r.array(_read_tp_group) or []:
            owned.extend(TopicPartition(t, p) for p in ps)
    if version >= 2 and r.remaining() >= 4:
        generation = r.int32()
    return Subscription(list(topics), None if user_data is None else bytes(user_data), owned,
                        generation)


def encode_assignment(tps: list[TopicPartition], user_data: bytes | None = None) -> bytes:
    w = Writer()
    w.int16(1)
    w.array(_group_tps(tps), _write_tp_group)
    w.nullable_bytes(user_data)
    return w.getvalue()


def decode_assignment(raw: bytes | memoryview | None) -> list[TopicPartition]:
    if not raw:
        return []
    r = Reader(raw)
    r.int16()
    out = []
    for t, ps in r.array(_read_tp_group) or []:
        out.extend(TopicPartition(t, p) for p in ps)
    return out


# --------------------------------------------------------------------------- assignors


def range_assign(members: dict[str, Subscription],
                 partitions: dict[str, int]) -> dict[str, list[TopicPartition]]:
    out: dict[str, list[TopicPartition]] = {m: [] for m in members}
    by_topic: dict[str, list[str]] = defaultdict(list)
    for m, sub in members.items():
        for t in sub.topics:
            by_topic[t].append(m)
    for t, ms in sorted(by_topic.items()):
        n = partitions.get(t)
        if not n:
            continue
        ms = sorted(ms)
        per, extra = divmod(n, len(ms))
        start = 0
        for i, m in enumerate(ms):
            cnt = per + (1 if i < extra else 0)
            out[m].extend(TopicPartition(t, p) for p in range(start, start + cnt))
            start += cnt
    return out


def roundrobin_assign(members: dict[str, Subscription],
                      partitions: dict[str, int]) -> dict[str, list[TopicPartition]]:
    out: dict[str, list[TopicPartition]] = {m: [] for m in members}
    ms = sorted(members)
    if not ms:
        return out
    topics = sorted({t for s in members.values() for t in s.topics if partitions.get(t)})
    i = 0
    for t in topics:
        for p in range(partitions[t]):
            for _ in range(len(ms)):
                m = ms[i % len(ms)]
                i += 1
                if t in members[m].topics:
                    out[m].append(TopicPartition(t, p))
                    break
    return out


def sticky_assign(members: dict[str, Subscription],
                  partitions: dict[str, int]) -> dict[str, list[TopicPartition]]:
    """Balanced, and keeps each member's owned partitions where balance allows."""
    ms = sorted(members)
    out: dict[str, list[TopicPartition]] = {m: [] for m in ms}
    if not ms:
        return out
    all_tps = [TopicPartition(t, p) for t in sorted({t for s in members.values() for t in s.topics})
               for p in range(partitions.get(t, 0))]
    valid = set(all_tps)
    taken: set[TopicPartition] = set()
    # keep current ownership (highest generation wins a conflicting claim)
    for m in sorted(ms, key=lambda m: -members[m].generation):
        for tp in members[m].owned:
            if tp in valid and tp not in taken and tp.topic in members[m].topics:
                out[m].append(tp)
                taken.add(tp)
    total = len(all_tps)
    # a balanced assignment: everyone within one partition of the others (when eligible)
    floor = total // len(ms)
    ceil_count = total % len(ms)  # how many members may hold floor + 1
    # the members holding most keep the floor+1 slots; everyone over quota gives back
    order = sorted(ms, key=lambda m: (-len(out[m]), m))
    quota = {m: floor + (1 if i < ceil_count else 0) for i, m in enumerate(order)}
    for m in ms:
        while len(out[m]) > quota[m]:
            taken.discard(out[m].pop())
    unassigned = [tp for tp in all_tps if tp not in taken]
    for tp in unassigned:
        eligible = [m for m in ms if tp.topic in members[m].topics]
        if not eligible:
            continue
        m = min(eligible, key=lambda m: (len(out[m]), m))
        out[m].append(tp)
    for m in ms:
        out[m].sort()
    return out


def cooperative_sticky_assign(members: dict[str, Subscription],
                              partitions: dict[str, int]) -> dict[str, list[TopicPartition]]:
    target = sticky_assign(members, partitions)
    owner: dict[TopicPartition, str] = {}
    for m, sub in members.items():
        for tp in sub.owned:
            owner.setdefault(tp, m)
    # withhold partitions still owned by someone else: they move in the next round
    return {m: [tp for tp in tps if owner.get(tp, m) == m] for m, tps in target.items()}


ASSIGNORS = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "cooperative-sticky": cooperative_sticky_assign,
    "sticky": sticky_assign,
}


def assign(name: str, members: dict[str, Subscription],
           partitions: dict[str, int]) -> dict[str, list[TopicPartition]]:
    try:
        fn = ASSIGNORS[name]
    except KeyError:
        raise ValueError(f"unknown partition.assignment.strategy {name!r}") from None
    return fn(members, partitions)
