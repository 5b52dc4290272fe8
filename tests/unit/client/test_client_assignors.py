"""Assignors: Java-compatible results and the consumer-protocol byte formats."""

from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.protocol.old.consumer_protocol import ConsumerProtocolMemberAssignment_v0

from sparklog.client.assignors import (
    Subscription,
    assign,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from sparklog.protocol.topic_partition import TopicPartition as TP


def _members(n, topics, owned=None):
    return {f"m{i}": Subscription(list(topics), None, (owned or {}).get(f"m{i}", []), 1)
            for i in range(n)}


def test_range_gives_first_members_the_extra_partitions():
    plan = assign("range", _members(3, ["a", "b"]), {"a": 7, "b": 2})
    assert plan["m0"] == [TP("a", 0), TP("a", 1), TP("a", 2), TP("b", 0)]
    assert plan["m1"] == [TP("a", 3), TP("a", 4), TP("b", 1)]
    assert plan["m2"] == [TP("a", 5), TP("a", 6)]


def test_roundrobin_interleaves_all_partitions():
    plan = assign("roundrobin", _members(3, ["a", "b"]), {"a": 4, "b": 3})
    assert plan["m0"] == [TP("a", 0), TP("a", 3), TP("b", 2)]
    assert plan["m1"] == [TP("a", 1), TP("b", 0)]
    assert plan["m2"] == [TP("a", 2), TP("b", 1)]


class _Cluster:
    def __init__(self, counts):
        self.counts = counts

    def partitions_for_topic(self, t):
        return set(range(self.counts[t])) if t in self.counts else None


def test_range_and_roundrobin_match_kafka_python():
    counts = {"a": 5, "b": 3, "c": 8}
    members = {f"consumer-{i}": Subscription(["a", "b", "c"]) for i in range(3)}
    for name, kp in (("range", RangePartitionAssignor), ("roundrobin",
                                                         RoundRobinPartitionAssignor)):
        ours = assign(name, members, counts)
        kp_members = [_KPMember(m, s.topics) for m, s in members.items()]
        theirs = kp.assign(_Cluster(counts), kp_members)
        for m, a in theirs.items():
            tps = sorted(TP(t, p) for t, ps in a.assigned_partitions for p in ps)
            assert sorted(ours[m]) == tps, (name, m)


class _KPMember:
    def __init__(self, member_id, topics):
        self.member_id = member_id
        self.group_instance_id = None
        self.metadata = type("Meta", (), {"topics": topics, "user_data": None})()


def test_cooperative_sticky_keeps_owners_and_withholds_moves():
    counts = {"t": 6}
    # m0 owned everything; m1 and m2 join
    owned = {"m0": [TP("t", p) for p in range(6)]}
    first = assign("cooperative-sticky", _members(3, ["t"], owned), counts)
    assert set(first["m0"]) <= set(owned["m0"]) and len(first["m0"]) == 2
    assert first["m1"] == [] and first["m2"] == []  # moving partitions are withheld
    # second round: m0 has revoked; the rest are handed out, balanced
    owned2 = {"m0": first["m0"]}
    second = assign("cooperative-sticky", _members(3, ["t"], owned2), counts)
    assert second["m0"] == first["m0"]
    assert sorted(len(v) for v in second.values()) == [2, 2, 2]
    assert sorted(tp for v in second.values() for tp in v) == [TP("t", p) for p in range(6)]


def test_subscription_and_assignment_bytes_round_trip_and_interop():
    sub = Subscription(["b", "a"], b"ud", [TP("a", 1), TP("a", 0), TP("b", 3)], 4)
    back = decode_subscription(encode_subscription(sub, 2))
    assert back.topics == ["b", "a"] and back.user_data == b"ud" and back.generation == 4
    assert sorted(back.owned) == sorted(sub.owned)
    raw = encode_assignment([TP("x", 2), TP("x", 0), TP("y", 1)])
    assert sorted(decode_assignment(raw)) == [TP("x", 0), TP("x", 2), TP("y", 1)]
    kp = ConsumerProtocolMemberAssignment_v0.decode(raw)
    assert sorted((t, sorted(ps)) for t, ps in kp.assigned_partitions) == [("x", [0, 2]), ("y", [1])]
    assert decode_assignment(b"") == []
