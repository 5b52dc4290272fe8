"""Consumer groups with real clients: subscribe + commit, a second member joins mid-stream,
every record is consumed exactly once across the members, and commits land where the
members stopped.  Same scenario for confluent-kafka, kafka-python, aiokafka and kcat -G."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from groups_helpers import (
    CLIENTS,
    GROUP_BROKER_CONFIG,
    MEMBER_CLASSES,
    check_exactly_once,
    committed_offsets,
    create_topic,
    end_offsets,
    produce,
    wait_for,
)

from sparklog.cluster.embedded import EmbeddedCluster

N = 10_000
PARTITIONS = 4


@pytest.fixture(scope="module")
def group_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster(tmp_path_factory.mktemp("groups"), config=GROUP_BROKER_CONFIG)
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("client", CLIENTS)
def test_group_rebalance_consumes_every_record_once(group_cluster: EmbeddedCluster,
                                                    client: str) -> None:
    bs = group_cluster.bootstrap_servers
    topic, group = f"grp-{client}", f"group-{client}"
    create_topic(bs, topic, PARTITIONS)
    cls = MEMBER_CLASSES[client]
    two_phase = client == "kcat"  # kcat cannot be slowed down: join between two produces
    produced = produce(bs, topic, N // 2 if two_phase else N)

    a = cls(f"{client}-a", bs, group, topic)
    b = cls(f"{client}-b", bs, group, topic)
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
    first_b = {}
    for p, o, _, _ in b.records:
        first_b.setdefault(p, o)
    assert any(o > 0 for o in first_b.values()), first_b
    # Members commit as they go and on close: the group's offsets are the end offsets.
    assert committed_offsets(bs, group, topic, list(range(PARTITIONS))) == end_offsets(produced)
