"""Consumer groups with real clients: subscribe + commit, a second member joins mid-stream,
every record is consumed exactly once across the members, and commits land where the
members stopped.  Same scenario for confluent-kafka, kafka-python, aiokafka and kcat -G."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient

from sparklog.cluster.embedded import EmbeddedCluster
from tests.helpers.groups import (
    GROUP_BROKER_CONFIG,
    MEMBER_CLASSES,
    Member,
    check_exactly_once,
    end_offsets,
    produce,
)
from tests.helpers.kafka_clients import committed_offsets, create_topic
from tests.helpers.polling import wait_for, wait_until

N = 10_000
PARTITIONS = 4


@pytest.fixture(scope="module")
def broker_config() -> dict[str, str]:
    return GROUP_BROKER_CONFIG


def rebalance_scenario(bs: str, topic: str, group: str, a: Member, b: Member, *,
                       two_phase: bool = False, on_both: Any = None) -> None:
    """a consumes alone (slowed down), b joins mid-stream, both finish the topic; then the
    exactly-once, hand-over and commit checks. ``on_both`` runs while both are members."""
    create_topic(bs, topic, PARTITIONS)
    produced = produce(bs, topic, N // 2 if two_phase else N)
    members = [a, b]
    try:
        if not two_phase:
            a.throttle.set()
        a.start()
        wait_for(lambda: a.assigned == set(range(PARTITIONS)), 30, "member a to own everything")
        if two_phase:
            # a's position reaches b through the commit a makes when its partitions are
            # revoked (kcat auto-commits only every few seconds)
            wait_for(lambda: len(a.records) >= N // 2, 30, "a to consume the first half")
        else:
            wait_for(lambda: len({r[0] for r in a.records}) == PARTITIONS, 30,
                     "a to consume from every partition")
        b.start()
        wait_for(lambda: b.assigned and a.assigned and not (a.assigned & b.assigned)
                 and a.assigned | b.assigned == set(range(PARTITIONS)), 60,
                 "the group to rebalance over both members")
        if on_both is not None:
            on_both()
        a.throttle.clear()
        if two_phase:
            produced.update(produce(bs, topic, N // 2, start=N // 2))
        wait_for(lambda: len(a.records) + len(b.records) >= N, 90, "all records consumed")
        time.sleep(0.5)  # a duplicate delivery would show up now
    finally:
        for m in members:
            m.stop()

    assert len(produced) == N
    check_exactly_once(produced, members)
    assert a.records and b.records, "both members consumed"
    assert any(len(s) == PARTITIONS for s in a.assignments), a.assignments
    assert any(0 < len(s) < PARTITIONS for s in b.assignments), b.assignments
    # b took over partitions a had consumed from, at the offsets a committed.
    first_b: dict[int, int] = {}
    for p, o, _, _ in b.records:
        first_b.setdefault(p, o)
    assert any(o > 0 for o in first_b.values()), first_b
    # Members commit as they go and on close: the group's offsets are the end offsets.
    assert committed_offsets(bs, group, topic, list(range(PARTITIONS))) == end_offsets(produced)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("client", list(MEMBER_CLASSES))
def test_group_rebalance_consumes_every_record_once(cluster: EmbeddedCluster,
                                                    client: str) -> None:
    bs = cluster.bootstrap_servers
    topic, group = f"grp-{client}", f"group-{client}"
    cls = MEMBER_CLASSES[client]
    rebalance_scenario(bs, topic, group, cls(f"{client}-a", bs, group, topic),
                       cls(f"{client}-b", bs, group, topic),
                       # kcat cannot be slowed down: it joins between two produces
                       two_phase=client == "kcat")


MIXED = [
    # (client a, its assignors, client b, its assignors, protocol the broker must pick)
    ("confluent", None, "kafka-python", None, "range"),
    ("kafka-python", None, "aiokafka", None, "roundrobin"),  # aiokafka: roundrobin only
    ("aiokafka", None, "confluent", None, "roundrobin"),
    ("confluent", "roundrobin,range", "kafka-python", "range,roundrobin", "roundrobin"),
    ("confluent", "cooperative-sticky", "confluent", "cooperative-sticky", "cooperative-sticky"),
    ("kafka-python", "cooperative-sticky", "kafka-python", "cooperative-sticky",
     "cooperative-sticky"),
    ("confluent", "cooperative-sticky", "kafka-python", "cooperative-sticky",
     "cooperative-sticky"),
]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("ca,sa,cb,sb,protocol", MIXED,
                         ids=[f"{m[0]}:{m[1] or 'default'}+{m[2]}:{m[3] or 'default'}"
                              for m in MIXED])
def test_mixed_clients_and_assignors_share_a_group(cluster: EmbeddedCluster, ca: str,
                                                   sa: str | None, cb: str, sb: str | None,
                                                   protocol: str) -> None:
    """Members of different clients (and assignor lists) in one group: the broker picks
    the protocol both support with the most first-choice votes and relays the leader's
    assignment in whichever client's format; cooperative rebalances hand over partitions
    incrementally."""
    bs = cluster.bootstrap_servers
    tag = f"{ca}-{sa}-{cb}-{sb}".replace(",", "_").replace("None", "d")
    topic, group = f"mix-{tag}", f"mix-group-{tag}"
    a = MEMBER_CLASSES[ca](f"{ca}-a", bs, group, topic, strategy=sa)
    b = MEMBER_CLASSES[cb](f"{cb}-b", bs, group, topic, strategy=sb)

    def check_protocol() -> None:
        admin = AdminClient({"bootstrap.servers": bs})
        # Only a Stable group reports its protocol (as Kafka); cooperative assignors run a
        # follow-up rebalance after the first one.
        d: Any = None

        def stable() -> bool:
            nonlocal d
            d = admin.describe_consumer_groups([group])[group].result(timeout=30)
            return d.state == ConsumerGroupState.STABLE

        wait_until(stable, 30, interval=0.1)
        assert d.partition_assignor == protocol
        assert {m.client_id for m in d.members} == {a.name, b.name}

    rebalance_scenario(bs, topic, group, a, b, on_both=check_protocol)
    if sa == "cooperative-sticky":
        # Incremental: a kept partitions throughout (until it closed), never revoked all.
        assert set() not in a.assignments[:-1] and a.assignments[-1] == set(), a.assignments
