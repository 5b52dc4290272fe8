"""The control plane with real processes: a controller process, three broker processes,
confluent-kafka as the client. Topics spread over brokers; a killed broker is fenced within
its session and re-registers when it restarts; SIGTERM moves a broker out at once
(controlled shutdown); a restarted controller and its brokers find each other again."""

from __future__ import annotations

import re
import time

import pytest

from tests.cluster.conftest import SESSION_MS
from tests.helpers.cli import ok, run
from tests.helpers.cluster import ClusterProcesses, Delivery, delivery_report
from tests.helpers.kafka_clients import ck_consume, ck_produce, make_messages
from tests.helpers.polling import wait_for

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 6


def _admin(bs: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bs})


def _create(bs: str, topic: str, partitions: int = PARTITIONS, rf: int = 1) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bs)  # referenced until the futures are done: its handle answers them
    for f in admin.create_topics([NewTopic(topic, partitions, rf)]).values():
        f.result(30)


def _metadata(bs: str, topic: str | None = None):
    return _admin(bs).list_topics(topic, timeout=10)


def _brokers(bs: str) -> set[int]:
    return set(_metadata(bs).brokers)


def _leaders(bs: str, topic: str) -> dict[int, int]:
    return {p.id: p.leader for p in _metadata(bs, topic).topics[topic].partitions.values()}


def _controller_view(cluster: ClusterProcesses) -> tuple[set[int], frozenset[int]]:
    """(registered brokers, fenced ones) as the controller itself answers DescribeCluster."""
    from sparklog.client import AdminClient

    with AdminClient({"bootstrap.servers": cluster.controller.bootstrap_servers}) as admin:
        desc = admin.describe_cluster(include_fenced=True)
    return {b.node_id for b in desc.brokers}, desc.fenced


def _all_delivered(acked, read) -> None:
    report = delivery_report(acked, read)
    assert report and all(d == Delivery(0, 0, 0) for d in report.values()), report


def test_topics_spread_over_brokers_and_every_broker_serves_them(local_cluster: ClusterProcesses):
    bs = local_cluster.bootstrap_servers
    assert _brokers(bs) == {1, 2, 3}
    _create(bs, "spread")
    leaders = _leaders(bs, "spread")
    assert sorted(set(leaders.values())) == [1, 2, 3]  # round-robin: every broker leads some
    msgs = make_messages(600, PARTITIONS)
    ck_produce(bs, "spread", msgs)
    for b in local_cluster.brokers.values():  # each broker's metadata leads clients right
        _all_delivered(msgs, ck_consume(b.bootstrap_servers, "spread", PARTITIONS, len(msgs)))


def test_killed_broker_is_fenced_within_its_session_and_rejoins(local_cluster: ClusterProcesses):
    bs1 = local_cluster.brokers[1].bootstrap_servers
    _create(bs1, "fence")
    msgs = make_messages(300, PARTITIONS)
    ck_produce(bs1, "fence", msgs)
    led_by_2 = {p for p, leader in _leaders(bs1, "fence").items() if leader == 2}
    assert led_by_2

    killed_at = time.monotonic()
    local_cluster.brokers[2].kill()
    wait_for(lambda: 2 not in _brokers(bs1), timeout=SESSION_MS / 1000 + 10,
             what="broker 2 fenced")
    fenced_after = time.monotonic() - killed_at
    assert fenced_after < SESSION_MS / 1000 + 3, fenced_after
    # RF 1: its partitions have no other replica, so no leader until it is back
    assert all(_leaders(bs1, "fence")[p] == -1 for p in led_by_2)
    out = ok(run("topics", "describe", "--topic", "fence", "--unavailable-partitions",
                 "--bootstrap-server", bs1))
    assert sorted(int(x) for x in re.findall(r"Partition: (\d+)\tLeader: none", out)) \
        == sorted(led_by_2)
    assert len(out.splitlines()) == len(led_by_2)

    local_cluster.brokers[2].start()  # same node.id and data dir: registers again
    wait_for(lambda: _brokers(bs1) == {1, 2, 3}, timeout=20, what="broker 2 back")
    wait_for(lambda: all(_leaders(bs1, "fence")[p] == 2 for p in led_by_2), timeout=20,
             what="broker 2 leads its partitions again")
    _all_delivered(msgs, ck_consume(local_cluster.bootstrap_servers, "fence", PARTITIONS,
                                    len(msgs)))


def test_sigterm_is_a_controlled_shutdown(local_cluster: ClusterProcesses):
    bs1 = local_cluster.brokers[1].bootstrap_servers
    ok(run("topics", "create", "--topic", "leave", "--partitions", "3",
           "--replication-factor", "3", "--bootstrap-server", bs1))
    assert {len(p.replicas) for p in _metadata(bs1, "leave").topics["leave"]
            .partitions.values()} == {3}
    before = _leaders(bs1, "leave")
    assert 3 in before.values()
    started = time.monotonic()
    assert local_cluster.brokers[3].stop() == 0
    # no session timeout to wait for: the controller fenced it while it still ran
    assert 3 not in _brokers(bs1)
    assert time.monotonic() - started < SESSION_MS / 1000
    after = _metadata(bs1, "leave").topics["leave"].partitions
    for p in after.values():
        assert p.leader in (1, 2) and 3 not in p.isrs, (p.id, p.leader, p.isrs)
    out = ok(run("topics", "describe", "--topic", "leave", "--under-replicated-partitions",
                 "--bootstrap-server", bs1))
    assert len(re.findall(r"Replicas: [123],[123],[123]\tIsr: [12],[12]\tOffline: 3$", out, re.M)) == 3
    log = local_cluster.controller.log_path.read_text()
    assert "broker 3 fenced (controlled shutdown)" in log

    # back with the same node.id: live, and in the ISR again once its fetchers caught up,
    # so a preferred election (forwarded to the controller) gives it its partition back
    local_cluster.brokers[3].start()
    wait_for(lambda: 3 in _brokers(bs1), timeout=20, what="broker 3 back")
    wait_for(lambda: all(3 in p.isrs for p in _metadata(bs1, "leave").topics["leave"]
                         .partitions.values()), timeout=20, what="broker 3 back in every ISR")
    # one partition (kafka-leader-election.sh --partition): only leave-2 needed it
    res = run("topics", "elect-leaders", "--topic", "leave", "--partition", "2",
              "--bootstrap-server", bs1)
    assert res.returncode == 0, res.stdout
    assert res.stdout.strip() == \
        "Successfully completed leader election (PREFERRED) for partitions leave-2"
    assert _leaders(bs1, "leave") == before
    res = run("topics", "elect-leaders", "--topic", "leave", "--bootstrap-server", bs1)
    assert res.returncode == 0, res.stdout
    assert res.stdout.strip() == \
        "Valid replica already elected for partitions leave-0, leave-1, leave-2"


def test_controller_restart_brokers_resync(local_cluster: ClusterProcesses):
    bs = local_cluster.bootstrap_servers
    _create(bs, "before")
    msgs = make_messages(120, PARTITIONS)
    ck_produce(bs, "before", msgs)
    local_cluster.controller.kill()
    local_cluster.controller.start()
    # the new controller knows the brokers and that they are live from its log; they
    # heartbeat it with the same broker epochs and read its metadata again
    wait_for(lambda: _controller_view(local_cluster) == ({1, 2, 3}, frozenset()),
             timeout=30, what="the controller sees every broker live")
    wait_for(lambda: all(_brokers(b.bootstrap_servers) == {1, 2, 3}
                         for b in local_cluster.brokers.values()),
             timeout=30, what="every broker sees every broker again")
    _create(bs, "after")
    for b in local_cluster.brokers.values():
        wait_for(lambda b=b: "after" in _metadata(b.bootstrap_servers).topics, timeout=20,
                 what=f"broker {b.port} knows the new topic")
    _all_delivered(msgs, ck_consume(bs, "before", PARTITIONS, len(msgs)))
    more = make_messages(60, PARTITIONS, tag="after")
    ck_produce(bs, "after", more)
    _all_delivered(more, ck_consume(bs, "after", PARTITIONS, len(more)))


def test_reassignment_is_forwarded_listed_cancelled(local_cluster: ClusterProcesses):
    bs1 = local_cluster.brokers[1].bootstrap_servers
    _create(bs1, "move", partitions=1, rf=1)
    (source,) = _metadata(bs1, "move").topics["move"].partitions[0].replicas
    target = next(n for n in (2, 3) if n != source)
    # the target is registered but down, so it cannot catch up: the move stays ongoing
    local_cluster.brokers[target].kill()
    wait_for(lambda: target not in _brokers(bs1), timeout=SESSION_MS / 1000 + 10,
             what="target fenced")
    ok(run("topics", "reassign", "--topic", "move", "--partition", "0", "--replicas",
           str(target), "--bootstrap-server", bs1))
    assert ok(run("topics", "reassign", "--list", "--bootstrap-server", bs1)) == (
        "Current partition reassignments:\n"
        f"move-0: replicas: {target},{source}. adding: {target}. removing: {source}.\n")
    p = _metadata(bs1, "move").topics["move"].partitions[0]
    assert (p.replicas, p.isrs, p.leader) == ([target, source], [source], source)
    ok(run("topics", "reassign", "--topic", "move", "--partition", "0", "--cancel",
           "--bootstrap-server", bs1))
    p = _metadata(bs1, "move").topics["move"].partitions[0]
    assert (p.replicas, p.isrs, p.leader) == ([source], [source], source)

    # a new order of in-sync replicas is done at once; the leader stays where it is
    _create(bs1, "order", partitions=1, rf=2)
    before = _metadata(bs1, "order").topics["order"].partitions[0]
    ok(run("topics", "reassign", "--topic", "order", "--partition", "0", "--replicas",
           ",".join(map(str, reversed(before.replicas))), "--bootstrap-server", bs1))
    after = _metadata(bs1, "order").topics["order"].partitions[0]
    assert after.replicas == list(reversed(before.replicas)) and after.leader == before.leader


def test_admin_client_whose_controller_died_goes_to_a_live_broker(local_cluster: ClusterProcesses):
    """sparklog's AdminClient caches the broker Metadata names as controller; once that
    broker is SIGKILLed, the next admin write refreshes metadata and is served elsewhere."""
    from sparklog.client import AdminClient
    from sparklog.client.admin import NewTopic

    with AdminClient({"bootstrap.servers": local_cluster.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("before-kill", 1, 1)])
        cached = admin._client.metadata.controller_id
        assert cached in local_cluster.brokers
        local_cluster.brokers[cached].kill()
        admin.create_topics([NewTopic("after-kill", 1, 1)])
        assert "after-kill" in admin.describe_topics(["after-kill"])
