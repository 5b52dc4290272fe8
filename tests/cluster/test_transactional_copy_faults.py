"""A Jepsen-style transactional copy: a copier process reads topic A and writes topic B,
committing its consumed offsets in the same transaction, and is SIGKILLed mid-stream three
times (each restart fences the previous instance by transactional id and resumes from the
committed offsets); on a 3-broker cluster, a leader of B is SIGKILLed mid-copy instead. A
read_committed reader of B must see every record of A exactly once, in A's order per
partition: lost 0, duplicated 0, reordered 0."""

from __future__ import annotations

from pathlib import Path

from sparklog.cluster.embedded import EmbeddedCluster
from tests.helpers.cluster import ClusterProcesses, Delivery, delivery_report, partition_states
from tests.helpers.kafka_clients import (
    READ_COMMITTED,
    Msg,
    ck_produce,
    create_topic,
    kcat_consume,
)
from tests.helpers.polling import wait_for
from tests.helpers.txn_copier import Copier

PARTS = 3
N = 3000


def read_b(bs: str) -> list[Msg]:
    return sorted(kcat_consume(bs, "copy-b", PARTS, 0, isolation=READ_COMMITTED),
                  key=lambda m: (m.partition, m.offset))


def _source(bs: str) -> list[Msg]:
    """Topic A's records (produced now), 1000 per partition."""
    source = [Msg(i % PARTS, f"k{i}".encode(), f"v{i}".encode(), 1_700_000_000_000 + i)
              for i in range(N)]
    ck_produce(bs, "copy-a", source)
    return source


def _assert_copied_exactly_once(bs: str, source: list[Msg]) -> None:
    got = read_b(bs)
    report = delivery_report(source, got)
    assert all(d == Delivery(0, 0, 0) for d in report.values()), report
    assert len(got) == N


def test_copier_killed_three_times_copies_exactly_once(cluster: EmbeddedCluster,
                                                       tmp_path: Path) -> None:
    bs = cluster.bootstrap_servers
    create_topic(bs, "copy-a", PARTS)
    create_topic(bs, "copy-b", PARTS)
    source = _source(bs)
    copiers: list[Copier] = []
    try:
        for instance in range(3):
            # paused 100 ms per 50-record transaction: 6 s for the whole source, so each
            # copier is still copying when it is killed
            c = Copier(bs, tmp_path / "copier", instance, pause_s=0.1)
            copiers.append(c)
            # let it commit some transactions, then kill it mid-stream
            wait_for(lambda c=c: c.committed() >= 200, 40, f"copier {instance} progress")
            c.kill()
        last = Copier(bs, tmp_path / "copier", 3)
        copiers.append(last)
        wait_for(lambda: len(read_b(bs)) >= N, 50, "the copy to finish")
    finally:
        for c in copiers:
            c.kill()
    _assert_copied_exactly_once(bs, source)


def test_copy_through_a_killed_partition_leader(fault_cluster: ClusterProcesses,
                                                tmp_path: Path) -> None:
    """On a 3-broker cluster (RF 3, min.insync.replicas 2), the leader of one of B's
    partitions is SIGKILLed mid-copy: its transactions' markers and produces go to the new
    leader (a copier that gave up is replaced, fencing it), and B = A exactly once."""
    bs = fault_cluster.bootstrap_servers
    for topic in ("copy-a", "copy-b"):
        create_topic(bs, topic, PARTS, 3, {"min.insync.replicas": "2"})
        wait_for(lambda t=topic: all(leader > 0 and len(isr) == 3 for leader, isr
                                     in partition_states(bs, t).values()),
                 20, f"{topic} led with 3 in sync")
    source = _source(bs)
    copiers = [Copier(bs, tmp_path / "copier", 0)]
    try:
        wait_for(lambda: copiers[0].committed() >= 300, 40, "copier progress")
        fault_cluster.brokers[partition_states(bs, "copy-b")[0][0]].kill()
        live = fault_cluster.bootstrap_servers

        def copied() -> bool:
            if not copiers[-1].alive():
                copiers.append(Copier(live, tmp_path / "copier", len(copiers)))
            return len(read_b(live)) >= N

        wait_for(copied, 50, "the copy to finish")
    finally:
        for c in copiers:
            c.kill()
    _assert_copied_exactly_once(live, source)
