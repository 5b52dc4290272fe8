"""Group APIs on the wire, at every version the broker advertises (clients only exercise
their favourite version): the join handshake per version, generations, error codes and
the version-specific fields (null topics, AuthorizedOperations, key types)."""

from __future__ import annotations

from typing import Any

import pytest

from sparklog.cluster.embedded import EmbeddedCluster
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode as E
from sparklog.protocol.messages import groups as g
from sparklog.protocol.messages import offsets as o
from tests.helpers.groups import GROUP_BROKER_CONFIG
from tests.helpers.kafka_clients import create_topic

TOPIC = "wire-groups"
INT32_MIN = -(1 << 31)


@pytest.fixture(scope="module")
def broker_config() -> dict[str, str]:
    return dict(GROUP_BROKER_CONFIG, **{"group.initial.rebalance.delay.ms": "0"})


@pytest.fixture(scope="module")
def wire_cluster(cluster: EmbeddedCluster) -> EmbeddedCluster:
    """The module's cluster, with ``TOPIC`` (2 partitions) created."""
    create_topic(cluster.bootstrap_servers, TOPIC, 2)
    return cluster


def join_req(version: int, group: str, member_id: str = "", instance: str | None = None) -> Any:
    return g.JoinGroupRequest(
        group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
        member_id=member_id, group_instance_id=instance, protocol_type="consumer",
        protocols=[g.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")])


def join(w: Any, version: int, group: str, instance: str | None = None) -> Any:
    r = w.call(ApiKey.JOIN_GROUP, version, join_req(version, group, instance=instance))
    if version >= 4 and instance is None:
        assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id
        assert r.generation_id == -1
        r = w.call(ApiKey.JOIN_GROUP, version, join_req(version, group, r.member_id))
    assert r.error_code == E.NONE, E(r.error_code)
    return r


@pytest.mark.parametrize("version", range(8))
def test_join_sync_heartbeat_commit_leave_each_version(wire_cluster: EmbeddedCluster,
                                                       kafka_wire: Any, version: int) -> None:
    """JoinGroup v<version> with the other APIs at matching versions (up to their max)."""
    w = kafka_wire(wire_cluster.bootstrap_servers)
    group = f"wire-v{version}"
    static = version >= 5
    fc = w.call(ApiKey.FIND_COORDINATOR, min(version, 3), g.FindCoordinatorRequest(key=group))
    assert (fc.error_code, fc.node_id, fc.port) == (E.NONE, 1, wire_cluster.port)

    r = join(w, version, group, instance="inst" if static else None)
    assert r.generation_id == 1 and r.leader == r.member_id
    assert [m.member_id for m in r.members] == [r.member_id]
    assert r.members[0].metadata == b"\x00\x01" and r.protocol_name == "range"
    if static:
        assert r.members[0].group_instance_id == "inst"
    if version >= 7:
        assert r.protocol_type == "consumer"
    mid = r.member_id

    sv = min(version, 5)
    s = w.call(ApiKey.SYNC_GROUP, sv, g.SyncGroupRequest(
        group_id=group, generation_id=1, member_id=mid,
        group_instance_id="inst" if sv >= 3 and static else None,
        protocol_type="consumer" if sv >= 5 else None,
        protocol_name="range" if sv >= 5 else None,
        assignments=[g.SyncGroupRequest.SyncGroupRequestAssignment(member_id=mid,
                                                                    assignment=b"ASSIGN")]))
    assert (s.error_code, s.assignment) == (E.NONE, b"ASSIGN")
    if sv >= 5:
        assert (s.protocol_type, s.protocol_name) == ("consumer", "range")
        wrong = w.call(ApiKey.SYNC_GROUP, sv, g.SyncGroupRequest(
            group_id=group, generation_id=1, member_id=mid, group_instance_id="inst",
            protocol_type="consumer", protocol_name="roundrobin"))
        assert wrong.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    if static:
        d = w.call(ApiKey.DESCRIBE_GROUPS, 4, g.DescribeGroupsRequest(groups=[group]))
        assert [(m.member_id, m.group_instance_id) for m in d.groups[0].members] == [(mid, "inst")]

    hv = min(version, 4)
    inst = "inst" if hv >= 3 and static else None
    hb = w.call(ApiKey.HEARTBEAT, hv, g.HeartbeatRequest(
        group_id=group, generation_id=1, member_id=mid, group_instance_id=inst))
    assert hb.error_code == E.NONE
    hb = w.call(ApiKey.HEARTBEAT, hv, g.HeartbeatRequest(
        group_id=group, generation_id=2, member_id=mid, group_instance_id=inst))
    assert hb.error_code == E.ILLEGAL_GENERATION
    hb = w.call(ApiKey.HEARTBEAT, hv, g.HeartbeatRequest(
        group_id=group, generation_id=1, member_id="nobody"))
    assert hb.error_code == E.UNKNOWN_MEMBER_ID
    if hv >= 3 and static:
        hb = w.call(ApiKey.HEARTBEAT, hv, g.HeartbeatRequest(
            group_id=group, generation_id=1, member_id="impostor", group_instance_id="inst"))
        assert hb.error_code == E.FENCED_INSTANCE_ID

    cv = min(2 + version, 8)
    P = o.OffsetCommitRequest.OffsetCommitRequestPartition
    T = o.OffsetCommitRequest.OffsetCommitRequestTopic
    oc = w.call(ApiKey.OFFSET_COMMIT, cv, o.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=1, member_id=mid, retention_time_ms=-1,
        group_instance_id="inst" if cv >= 7 and static else None,
        topics=[T(name=TOPIC, partitions=[P(partition_index=1, committed_offset=17,
                                            committed_leader_epoch=4,
                                            committed_metadata="m")]),
                T(name="no-such-topic", partitions=[P(partition_index=0, committed_offset=1)])]))
    errs = {(t.name, p.partition_index): p.error_code for t in oc.topics for p in t.partitions}
    assert errs == {(TOPIC, 1): E.NONE, ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    if cv >= 7 and static:
        fenced = w.call(ApiKey.OFFSET_COMMIT, cv, o.OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=1, member_id="impostor",
            group_instance_id="inst",
            topics=[T(name=TOPIC, partitions=[P(partition_index=1, committed_offset=18)])]))
        assert fenced.topics[0].partitions[0].error_code == E.FENCED_INSTANCE_ID
    fv = min(version + 1, 7)
    FT = o.OffsetFetchRequest.OffsetFetchRequestTopic
    of = w.call(ApiKey.OFFSET_FETCH, fv, o.OffsetFetchRequest(
        group_id=group, topics=[FT(name=TOPIC, partition_indexes=[1])]))
    (p1,) = of.topics[0].partitions
    assert (p1.committed_offset, p1.metadata) == (17, "m")
    if fv >= 5:
        assert p1.committed_leader_epoch == (4 if cv >= 6 else -1)

    lv = min(version, 4)
    if lv < 3:
        lreq = g.LeaveGroupRequest(group_id=group, member_id=mid)
    else:
        MI = g.LeaveGroupRequest.MemberIdentity
        if static:  # KIP-345: an operator removes a static member by its instance id
            lreq = g.LeaveGroupRequest(group_id=group, members=[
                MI(member_id="impostor", group_instance_id="inst")])
            lv_resp = w.call(ApiKey.LEAVE_GROUP, lv, lreq)
            assert [m.error_code for m in lv_resp.members] == [E.FENCED_INSTANCE_ID]
            lreq = g.LeaveGroupRequest(group_id=group, members=[
                MI(member_id="", group_instance_id="inst")])
        else:
            lreq = g.LeaveGroupRequest(group_id=group, members=[MI(member_id=mid)])
    lv_resp = w.call(ApiKey.LEAVE_GROUP, lv, lreq)
    assert lv_resp.error_code == E.NONE
    if lv >= 3:
        assert [m.error_code for m in lv_resp.members] == [E.NONE]
    again = w.call(ApiKey.LEAVE_GROUP, lv, lreq)
    if lv < 3:
        assert again.error_code == E.UNKNOWN_MEMBER_ID
    else:
        assert [m.error_code for m in again.members] == [E.UNKNOWN_MEMBER_ID]
    d = w.call(ApiKey.DESCRIBE_GROUPS, 0, g.DescribeGroupsRequest(groups=[group]))
    assert d.groups[0].group_state == "Empty"


@pytest.mark.parametrize("version", range(1, 8))
def test_offset_fetch_versions(wire_cluster: EmbeddedCluster, kafka_wire: Any,
                               version: int) -> None:
    w = kafka_wire(wire_cluster.bootstrap_servers)
    group = f"fetch-v{version}"
    P = o.OffsetCommitRequest.OffsetCommitRequestPartition
    T = o.OffsetCommitRequest.OffsetCommitRequestTopic
    oc = w.call(ApiKey.OFFSET_COMMIT, 2, o.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
        topics=[T(name=TOPIC, partitions=[P(partition_index=0, committed_offset=5,
                                            committed_metadata=None)])]))
    assert oc.topics[0].partitions[0].error_code == E.NONE
    FT = o.OffsetFetchRequest.OffsetFetchRequestTopic
    r = w.call(ApiKey.OFFSET_FETCH, version, o.OffsetFetchRequest(
        group_id=group, topics=[FT(name=TOPIC, partition_indexes=[0, 1])],
        require_stable=version >= 7))
    got = {p.partition_index: (p.committed_offset, p.metadata, p.error_code)
           for t in r.topics for p in t.partitions}
    assert got == {0: (5, "", E.NONE), 1: (-1, "", E.NONE)}
    if version >= 2:
        assert r.error_code == E.NONE
        everything = w.call(ApiKey.OFFSET_FETCH, version,
                            o.OffsetFetchRequest(group_id=group, topics=None))
        assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
                for t in everything.topics] == [(TOPIC, [(0, 5)])]


def test_two_members_rebalance_on_the_wire(wire_cluster: EmbeddedCluster, kafka_wire: Any) -> None:
    """v5 joins: a second member makes the first one's heartbeat say REBALANCE_IN_PROGRESS;
    both JoinGroups complete together with generation 2; commits by the stale generation
    fail."""
    a, b = kafka_wire(wire_cluster.bootstrap_servers), kafka_wire(wire_cluster.bootstrap_servers)
    group = "wire-rebalance"
    r1 = join(a, 5, group)
    s = a.call(ApiKey.SYNC_GROUP, 3, g.SyncGroupRequest(group_id=group, generation_id=1,
                                                        member_id=r1.member_id, assignments=[]))
    assert s.error_code == E.NONE
    first = b.call(ApiKey.JOIN_GROUP, 5, join_req(5, group))
    assert first.error_code == E.MEMBER_ID_REQUIRED
    b.request(ApiKey.JOIN_GROUP, 5, join_req(5, group, first.member_id))  # parks
    hb = a.call(ApiKey.HEARTBEAT, 3, g.HeartbeatRequest(group_id=group, generation_id=1,
                                                        member_id=r1.member_id))
    assert hb.error_code == E.REBALANCE_IN_PROGRESS
    r1b = a.call(ApiKey.JOIN_GROUP, 5, join_req(5, group, r1.member_id))
    r2 = b.response(ApiKey.JOIN_GROUP, 5)
    assert r1b.generation_id == r2.generation_id == 2
    assert r1b.leader == r2.leader == r1.member_id
    assert {m.member_id for m in r1b.members} == {r1.member_id, first.member_id}
    assert r2.members == []
    P = o.OffsetCommitRequest.OffsetCommitRequestPartition
    T = o.OffsetCommitRequest.OffsetCommitRequestTopic
    oc = a.call(ApiKey.OFFSET_COMMIT, 3, o.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=1, member_id=r1.member_id,
        topics=[T(name=TOPIC, partitions=[P(partition_index=0, committed_offset=1)])]))
    assert oc.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION
    # The follower's SyncGroup parks until the leader's arrives with the assignments.
    b.request(ApiKey.SYNC_GROUP, 3, g.SyncGroupRequest(
        group_id=group, generation_id=2, member_id=r2.member_id, assignments=[]))
    SA = g.SyncGroupRequest.SyncGroupRequestAssignment
    s1 = a.call(ApiKey.SYNC_GROUP, 3, g.SyncGroupRequest(
        group_id=group, generation_id=2, member_id=r1.member_id,
        assignments=[SA(member_id=r1.member_id, assignment=b"one"),
                     SA(member_id=r2.member_id, assignment=b"two")]))
    s2 = b.response(ApiKey.SYNC_GROUP, 3)
    assert (s1.assignment, s2.assignment) == (b"one", b"two")


def test_admin_apis_on_the_wire(wire_cluster: EmbeddedCluster, kafka_wire: Any) -> None:
    w = kafka_wire(wire_cluster.bootstrap_servers)
    r = join(w, 5, "wire-admin")
    w.call(ApiKey.SYNC_GROUP, 3, g.SyncGroupRequest(
        group_id="wire-admin", generation_id=1, member_id=r.member_id,
        assignments=[g.SyncGroupRequest.SyncGroupRequestAssignment(member_id=r.member_id,
                                                                    assignment=b"A")]))
    for v in range(6):
        d = w.call(ApiKey.DESCRIBE_GROUPS, v, g.DescribeGroupsRequest(
            groups=["wire-admin", "missing"], include_authorized_operations=v >= 3))
        live, missing = d.groups
        assert (live.error_code, live.group_state, live.protocol_type, live.protocol_data) == (
            E.NONE, "Stable", "consumer", "range")
        (m,) = live.members
        assert (m.member_id, m.client_id, m.client_host) == (r.member_id, "wire-test", "/127.0.0.1")
        assert (m.member_metadata, m.member_assignment) == (b"\x00\x01", b"A")
        assert (missing.error_code, missing.group_state, missing.members) == (E.NONE, "Dead", [])
        if v >= 3:
            assert live.authorized_operations == INT32_MIN
        if v >= 4:
            assert m.group_instance_id is None
    for v in range(5):
        lg = w.call(ApiKey.LIST_GROUPS, v, g.ListGroupsRequest(
            states_filter=["Stable"] if v >= 4 else []))
        listed = {x.group_id: x for x in lg.groups}
        assert listed["wire-admin"].protocol_type == "consumer"
        if v >= 4:
            assert all(x.group_state == "Stable" for x in lg.groups)
    for v in range(3):
        name = f"del-{v}"
        P = o.OffsetCommitRequest.OffsetCommitRequestPartition
        T = o.OffsetCommitRequest.OffsetCommitRequestTopic
        w.call(ApiKey.OFFSET_COMMIT, 2, o.OffsetCommitRequest(
            group_id=name, generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
            topics=[T(name=TOPIC, partitions=[P(partition_index=0, committed_offset=1)])]))
        dg = w.call(ApiKey.DELETE_GROUPS, v, g.DeleteGroupsRequest(
            groups_names=[name, "wire-admin", "ghost"]))
        assert {x.group_id: x.error_code for x in dg.results} == {
            name: E.NONE, "wire-admin": E.NON_EMPTY_GROUP, "ghost": E.GROUP_ID_NOT_FOUND}


@pytest.mark.parametrize("version", [1, 2, 3])
def test_find_coordinator_key_types(wire_cluster: EmbeddedCluster, kafka_wire: Any,
                                    version: int) -> None:
    w = kafka_wire(wire_cluster.bootstrap_servers)
    txn = w.call(ApiKey.FIND_COORDINATOR, version,
                 g.FindCoordinatorRequest(key="tx-1", key_type=1))
    assert (txn.error_code, txn.node_id, txn.host) == (E.NONE, 1, "127.0.0.1")
    bad = w.call(ApiKey.FIND_COORDINATOR, version, g.FindCoordinatorRequest(key="x", key_type=7))
    assert bad.error_code == E.INVALID_REQUEST and bad.error_message


def test_join_errors_on_the_wire(wire_cluster: EmbeddedCluster, kafka_wire: Any) -> None:
    w = kafka_wire(wire_cluster.bootstrap_servers)
    bad_session = join_req(5, "wire-errors")
    bad_session.session_timeout_ms = 10
    assert w.call(ApiKey.JOIN_GROUP, 5, bad_session).error_code == E.INVALID_SESSION_TIMEOUT
    no_group = join_req(5, "")
    assert w.call(ApiKey.JOIN_GROUP, 5, no_group).error_code == E.INVALID_GROUP_ID
    stranger = join_req(5, "wire-errors", member_id="made-up")
    assert w.call(ApiKey.JOIN_GROUP, 5, stranger).error_code == E.UNKNOWN_MEMBER_ID
    r = join(w, 5, "wire-errors")
    other = join_req(5, "wire-errors")
    other.protocols = [g.JoinGroupRequest.JoinGroupRequestProtocol(name="sticky", metadata=b"")]
    assert w.call(ApiKey.JOIN_GROUP, 5, other).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    s = w.call(ApiKey.SYNC_GROUP, 3, g.SyncGroupRequest(group_id="wire-errors", generation_id=9,
                                                        member_id=r.member_id))
    assert s.error_code == E.ILLEGAL_GENERATION
