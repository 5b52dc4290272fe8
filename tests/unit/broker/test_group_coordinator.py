"""Group state machine: join/sync/heartbeat/leave/commit driven by a fake clock."""

from __future__ import annotations

import asyncio

import pytest

from sparklog.broker.config import BrokerConfig
from sparklog.broker.group.config import CoordinatorConfig
from sparklog.broker.group.coordinator import GroupCoordinator
from sparklog.broker.group.model import GroupState, JoinResult
from sparklog.broker.group.records import OffsetAndMetadata, partition_for_group
from sparklog.broker.group.store import GroupStore, MemoryRecordLog
from sparklog.protocol.errors import ErrorCode
from tests.helpers.clock import FakeClock, settle

E = ErrorCode


CONSUMER = "consumer"
SESSION = 10_000
REBALANCE = 30_000


def make(delay_ms: int = 0, store: GroupStore | None = None,
         clock: FakeClock | None = None) -> tuple[GroupCoordinator, FakeClock]:
    """A coordinator that has loaded every partition of ``store``, as a started broker's."""
    clock = clock or FakeClock()
    cfg = CoordinatorConfig.from_broker_config(BrokerConfig({
        "group.initial.rebalance.delay.ms": str(delay_ms), "offsets.topic.num.partitions": "5"}))
    gc = GroupCoordinator(cfg, store or GroupStore(MemoryRecordLog(), 5), clock)
    gc.serve_partitions(range(gc.store.num_partitions))
    return gc, clock


def join(gc: GroupCoordinator, member_id: str = "", *, group: str = "g",
         protocols: list[tuple[str, bytes]] | None = None, instance: str | None = None,
         require_known: bool = True, rebalance_ms: int = REBALANCE,
         session_ms: int = SESSION) -> asyncio.Task[JoinResult]:
    return asyncio.ensure_future(gc.join_group(
        group, member_id, instance, "client", "/127.0.0.1", rebalance_ms, session_ms,
        CONSUMER, protocols if protocols is not None else [("range", b"meta-" + member_id.encode())],
        require_known))


async def join_new(gc: GroupCoordinator, clock: FakeClock, **kw) -> asyncio.Task[JoinResult]:
    """Two-step KIP-394 join: returns the pending second JoinGroup."""
    first = await join(gc, **kw)
    assert first.error == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("client-") or kw.get("instance")
    return join(gc, first.member_id, **kw)


async def single_stable(gc: GroupCoordinator, clock: FakeClock, **kw) -> str:
    t = await join_new(gc, clock, **kw)
    await clock.advance(0)
    r = await t
    assert r.error == E.NONE
    s = await gc.sync_group("g", r.generation_id, r.member_id, None, {r.member_id: b"A"})
    assert s.error == E.NONE
    return r.member_id


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 5))


# --------------------------------------------------------------------------- join/sync


def test_first_join_member_id_required_then_generation_one() -> None:
    async def main() -> None:
        gc, clock = make(delay_ms=3000)
        t = await join_new(gc, clock)
        await settle()
        assert not t.done(), "initial rebalance delay holds the first join"
        assert gc.groups["g"].state is GroupState.PREPARING_REBALANCE
        await clock.advance(2999)
        assert not t.done()
        await clock.advance(1)
        r = t.result()
        assert r.error == E.NONE
        assert r.generation_id == 1
        assert r.leader_id == r.member_id
        assert r.protocol_name == "range"
        assert [m.member_id for m in r.members] == [r.member_id]
        assert gc.groups["g"].state is GroupState.COMPLETING_REBALANCE
        s = await gc.sync_group("g", 1, r.member_id, None, {r.member_id: b"assign"})
        assert (s.error, s.assignment) == (E.NONE, b"assign")
        assert gc.groups["g"].state is GroupState.STABLE
        assert gc.heartbeat("g", 1, r.member_id) == E.NONE
        # A stable follower re-syncing gets its assignment back immediately.
        s2 = await gc.sync_group("g", 1, r.member_id, None, {})
        assert s2.assignment == b"assign"

    run(main())


def test_old_join_versions_get_member_id_without_round_trip() -> None:
    async def main() -> None:
        gc, clock = make()
        t = join(gc, require_known=False)
        await clock.advance(0)
        r = await t
        assert r.error == E.NONE and r.member_id.startswith("client-") and r.generation_id == 1

    run(main())


def test_initial_delay_is_extended_while_members_keep_arriving() -> None:
    async def main() -> None:
        gc, clock = make(delay_ms=1000)
        t1 = await join_new(gc, clock)
        await clock.advance(800)
        t2 = await join_new(gc, clock)
        await clock.advance(300)  # first delay over, but a member arrived: wait again
        assert not t1.done() and not t2.done()
        await clock.advance(1000)
        r1, r2 = t1.result(), t2.result()
        assert r1.generation_id == r2.generation_id == 1
        leader = r1 if r1.leader_id == r1.member_id else r2
        assert len(leader.members) == 2
        follower = r2 if leader is r1 else r1
        assert follower.members == [] and follower.leader_id == leader.member_id

    run(main())


def test_second_member_triggers_rebalance_and_assignments_are_relayed() -> None:
    async def main() -> None:
        gc, clock = make()
        m1 = await single_stable(gc, clock)
        t2 = await join_new(gc, clock)
        await settle()
        assert gc.groups["g"].state is GroupState.PREPARING_REBALANCE
        assert gc.heartbeat("g", 1, m1) == E.REBALANCE_IN_PROGRESS
        # Eager consumers commit before rejoining; allowed during PreparingRebalance.
        assert gc.commit_offsets("g", 1, m1, None, {("t", 0): OffsetAndMetadata(5)}) == {
            ("t", 0): E.NONE}
        assert not t2.done()
        t1 = join(gc, m1)
        await settle()
        r1, r2 = t1.result(), t2.result()
        assert r1.generation_id == r2.generation_id == 2
        assert r1.leader_id == m1 and {m.member_id for m in r1.members} == {m1, r2.member_id}
        assert dict((m.member_id, m.metadata) for m in r1.members)[r2.member_id] == \
            b"meta-" + r2.member_id.encode()
        # Follower syncs first and waits for the leader's assignment.
        s2 = asyncio.ensure_future(gc.sync_group("g", 2, r2.member_id, None, {}))
        await settle()
        assert not s2.done()
        # Commits during CompletingRebalance are refused.
        assert gc.commit_offsets("g", 2, m1, None, {("t", 0): OffsetAndMetadata(6)})[
            ("t", 0)] == E.REBALANCE_IN_PROGRESS
        s1 = await gc.sync_group("g", 2, m1, None, {m1: b"p0", r2.member_id: b"p1"})
        await settle()
        assert s1.assignment == b"p0" and s2.result().assignment == b"p1"
        assert gc.heartbeat("g", 1, m1) == E.ILLEGAL_GENERATION
        assert gc.heartbeat("g", 2, "nobody") == E.UNKNOWN_MEMBER_ID
        assert gc.heartbeat("g", 2, r2.member_id) == E.NONE

    run(main())


def test_protocol_selection_by_votes_and_inconsistent_protocols() -> None:
    async def main() -> None:
        gc, clock = make(delay_ms=100)
        ta = await join_new(gc, clock, protocols=[("range", b"a"), ("roundrobin", b"a")])
        tb = await join_new(gc, clock, protocols=[("roundrobin", b"b"), ("range", b"b")])
        tc = await join_new(gc, clock, protocols=[("roundrobin", b"c"), ("cooperative-sticky", b"c")])
        bad = await join(gc, protocols=[("sticky", b"x")])
        assert bad.error == E.INCONSISTENT_GROUP_PROTOCOL
        other_type = await gc.join_group("g", "", None, "c", "h", REBALANCE, SESSION, "connect",
                                         [("range", b"")], True)
        assert other_type.error == E.INCONSISTENT_GROUP_PROTOCOL
        await clock.advance(300)
        results = [ta.result(), tb.result(), tc.result()]
        assert {r.protocol_name for r in results} == {"roundrobin"}
        leader = next(r for r in results if r.members)
        assert sorted(m.metadata for m in leader.members) == [b"a", b"b", b"c"]

    run(main())


def test_empty_protocols_rejected_and_invalid_inputs() -> None:
    async def main() -> None:
        gc, clock = make()
        assert (await join(gc, protocols=[])).error == E.INCONSISTENT_GROUP_PROTOCOL
        assert (await join(gc, group="")).error == E.INVALID_GROUP_ID
        assert (await join(gc, session_ms=10)).error == E.INVALID_SESSION_TIMEOUT
        assert (await join(gc, "who")).error == E.UNKNOWN_MEMBER_ID
        assert (await gc.sync_group("nogroup", 1, "x", None, {})).error == E.UNKNOWN_MEMBER_ID
        assert gc.heartbeat("nogroup", 1, "x") == E.UNKNOWN_MEMBER_ID
        assert "g" not in gc.groups  # failed joins leave nothing behind

    run(main())


# --------------------------------------------------------------------------- timeouts


def test_session_expiry_removes_member_and_rebalances_survivor() -> None:
    async def main() -> None:
        gc, clock = make()
        m1 = await single_stable(gc, clock)
        t2 = await join_new(gc, clock)
        t1 = join(gc, m1)
        await settle()
        r1, r2 = t1.result(), t2.result()
        s2 = asyncio.ensure_future(gc.sync_group("g", 2, r2.member_id, None, {}))
        await gc.sync_group("g", 2, m1, None, {m1: b"x", r2.member_id: b"y"})
        await settle()
        assert s2.result().assignment == b"y"
        # m1 keeps heartbeating, m2 goes silent.
        for _ in range(3):
            await clock.advance(SESSION // 2)
            assert gc.heartbeat("g", 2, m1) in (E.NONE, E.REBALANCE_IN_PROGRESS)
        assert r2.member_id not in gc.groups["g"].members
        assert gc.groups["g"].state is GroupState.PREPARING_REBALANCE
        assert gc.heartbeat("g", 2, r2.member_id) == E.UNKNOWN_MEMBER_ID
        t1 = join(gc, m1)
        await settle()
        assert t1.result().generation_id == 3 and [m.member_id for m in t1.result().members] == [m1]
        assert r1.generation_id == 2

    run(main())


def test_member_that_does_not_rejoin_is_dropped_at_rebalance_timeout() -> None:
    async def main() -> None:
        gc, clock = make()
        m1 = await single_stable(gc, clock)
        t2 = await join_new(gc, clock)
        # m1 heartbeats (learns of the rebalance) but never rejoins.
        for _ in range(REBALANCE // 5000 - 1):
            await clock.advance(5000)
            assert gc.heartbeat("g", 1, m1) == E.REBALANCE_IN_PROGRESS
        await clock.advance(4999)
        assert not t2.done()
        await clock.advance(1)
        r2 = t2.result()
        assert r2.error == E.NONE and r2.generation_id == 2 and r2.leader_id == r2.member_id
        assert m1 not in gc.groups["g"].members

    run(main())


def test_pending_member_that_never_rejoins_expires() -> None:
    async def main() -> None:
        gc, clock = make()
        m1 = await single_stable(gc, clock)
        first = await join(gc, session_ms=6000)
        assert first.error == E.MEMBER_ID_REQUIRED
        assert first.member_id in gc.groups["g"].pending_members
        await clock.advance(6000)
        assert first.member_id not in gc.groups["g"].pending_members
        assert gc.groups["g"].state is GroupState.STABLE  # a pending id never rebalances
        assert gc.heartbeat("g", 1, m1) == E.NONE
        assert (await join(gc, first.member_id)).error == E.UNKNOWN_MEMBER_ID

    run(main())


def test_leader_that_never_syncs_is_removed_after_rebalance_timeout() -> None:
    async def main() -> None:
        gc, clock = make()
        t1 = await join_new(gc, clock)
        await clock.advance(0)
        t2 = await join_new(gc, clock)
        r1 = t1.result()
        s1 = await gc.sync_group("g", 1, r1.member_id, None, {r1.member_id: b""})
        assert s1.error == E.NONE
        t1b = join(gc, r1.member_id)
        await settle()
        res = [t1b.result(), t2.result()]
        leader = next(r for r in res if r.members)
        follower = next(r for r in res if not r.members)
        sf = asyncio.ensure_future(gc.sync_group("g", 2, follower.member_id, None, {}))
        # The leader heartbeats (so its session stays alive) but never sends SyncGroup.
        for _ in range(REBALANCE // 5000 - 1):
            await clock.advance(5000)
            assert gc.heartbeat("g", 2, leader.member_id) == E.NONE
            assert not sf.done()
        await clock.advance(5000)
        assert sf.result().error == E.REBALANCE_IN_PROGRESS
        assert leader.member_id not in gc.groups["g"].members
        tf = join(gc, follower.member_id)
        await settle()
        assert tf.result().generation_id == 3 and tf.result().leader_id == follower.member_id

    run(main())


# --------------------------------------------------------------------------- leave


def test_leave_rebalances_and_last_leave_empties_group() -> None:
    async def main() -> None:
        gc, clock = make()
        m1 = await single_stable(gc, clock)
        t2 = await join_new(gc, clock)
        t1 = join(gc, m1)
        await settle()
        m2 = t2.result().member_id
        s2 = asyncio.ensure_future(gc.sync_group("g", 2, m2, None, {}))
        await gc.sync_group("g", 2, m1, None, {})
        await settle()
        assert s2.done() and t1.done()
        assert gc.leave_group("g", [(m1, None)]) == (E.NONE, [E.NONE])
        assert gc.groups["g"].state is GroupState.PREPARING_REBALANCE
        assert gc.leave_group("g", [("ghost", None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])
        t2 = join(gc, m2)
        await settle()
        r2 = t2.result()
        assert r2.generation_id == 3 and r2.leader_id == m2
        await gc.sync_group("g", 3, m2, None, {m2: b"all"})
        gc.leave_group("g", [(m2, None)])
        await clock.advance(REBALANCE)
        g = gc.groups["g"]
        assert g.state is GroupState.EMPTY and g.generation_id == 4 and not g.members
        d = gc.describe_group("g")
        assert (d.state, d.protocol_type, d.members) == ("Empty", CONSUMER, [])

    run(main())


# --------------------------------------------------------------------------- static


def test_static_member_rejoin_keeps_generation_and_fences_old_id() -> None:
    async def main() -> None:
        gc, clock = make()
        t = join(gc, instance="inst-1")
        await clock.advance(0)
        r = t.result()
        assert r.error == E.NONE and r.member_id.startswith("inst-1-")
        await gc.sync_group("g", 1, r.member_id, "inst-1", {r.member_id: b"mine"})
        # Restarted process: same instance id, no member id.
        r2 = await join(gc, instance="inst-1", protocols=[("range", b"meta-")])
        assert r2.error == E.NONE and r2.generation_id == 1 and r2.member_id != r.member_id
        assert r2.leader_id == r.member_id  # old id: it must not reassign
        assert gc.groups["g"].state is GroupState.STABLE
        s = await gc.sync_group("g", 1, r2.member_id, "inst-1", {})
        assert s.assignment == b"mine"
        assert gc.heartbeat("g", 1, r.member_id, "inst-1") == E.FENCED_INSTANCE_ID
        assert gc.heartbeat("g", 1, r2.member_id, "inst-1") == E.NONE
        fenced = await join(gc, r.member_id, instance="inst-1")
        assert fenced.error == E.FENCED_INSTANCE_ID
        assert gc.commit_offsets("g", 1, r.member_id, "inst-1",
                                 {("t", 0): OffsetAndMetadata(1)})[("t", 0)] == \
            E.FENCED_INSTANCE_ID

    run(main())


# --------------------------------------------------------------------------- offsets


def test_standalone_commit_fetch_and_member_checks() -> None:
    async def main() -> None:
        gc, clock = make()
        res = gc.commit_offsets("spark", -1, "", None, {("t", 0): OffsetAndMetadata(42, 3, "m"),
                                                        ("t", 1): OffsetAndMetadata(7)})
        assert res == {("t", 0): E.NONE, ("t", 1): E.NONE}
        err, offs = gc.fetch_offsets("spark", [("t", 0), ("t", 2)])
        assert err == E.NONE and offs[("t", 0)].offset == 42 and offs[("t", 0)].metadata == "m"
        assert offs[("t", 0)].leader_epoch == 3 and offs[("t", 2)] is None
        assert set(gc.fetch_offsets("spark", None)[1]) == {("t", 0), ("t", 1)}
        assert gc.fetch_offsets("unknown", None) == (E.NONE, {})
        assert ("spark", "", "Empty") in gc.list_groups()
        # A group with live members refuses standalone commits and foreign generations.
        m1 = await single_stable(gc, clock)
        assert gc.commit_offsets("g", -1, "", None, {("t", 0): OffsetAndMetadata(1)})[
            ("t", 0)] == E.UNKNOWN_MEMBER_ID
        assert gc.commit_offsets("g", 7, m1, None, {("t", 0): OffsetAndMetadata(1)})[
            ("t", 0)] == E.ILLEGAL_GENERATION
        assert gc.commit_offsets("nogroup", 3, "x", None, {("t", 0): OffsetAndMetadata(1)})[
            ("t", 0)] == E.ILLEGAL_GENERATION
        big = OffsetAndMetadata(1, metadata="x" * 5000)
        assert gc.commit_offsets("g", 1, m1, None, {("t", 0): big})[("t", 0)] == \
            E.OFFSET_METADATA_TOO_LARGE

    run(main())


def test_state_survives_reload_from_the_log() -> None:
    async def main() -> None:
        store = GroupStore(MemoryRecordLog(), 5)
        gc, clock = make(store=store)
        m1 = await single_stable(gc, clock)
        gc.commit_offsets("g", 1, m1, None, {("t", 0): OffsetAndMetadata(10), ("t", 1): OffsetAndMetadata(20)})
        gc.commit_offsets("g", 1, m1, None, {("t", 0): OffsetAndMetadata(11)})
        gc.commit_offsets("solo", -1, "", None, {("u", 3): OffsetAndMetadata(99, metadata="x")})
        # Restart: a new coordinator over the same records.
        gc2, _ = make(store=store, clock=clock)
        assert gc2.fetch_offsets("g", None)[1][("t", 0)].offset == 11
        assert gc2.fetch_offsets("g", None)[1][("t", 1)].offset == 20
        assert gc2.fetch_offsets("solo", [("u", 3)])[1][("u", 3)].metadata == "x"
        g = gc2.groups["g"]
        assert g.state is GroupState.STABLE and g.generation_id == 1 and m1 in g.members
        assert g.members[m1].assignment == b"A"
        # The member carries on heartbeating against the restarted coordinator.
        assert gc2.heartbeat("g", 1, m1) == E.NONE
        assert gc2.describe_group("g").members[0].assignment == b"A"

    run(main())


def test_delete_groups_writes_tombstones() -> None:
    async def main() -> None:
        store = GroupStore(MemoryRecordLog(), 5)
        gc, clock = make(store=store)
        gc.commit_offsets("solo", -1, "", None, {("u", 0): OffsetAndMetadata(1)})
        await single_stable(gc, clock)
        assert gc.delete_groups(["solo", "g", "nope"]) == {
            "solo": E.NONE, "g": E.NON_EMPTY_GROUP, "nope": E.GROUP_ID_NOT_FOUND}
        assert "solo" not in gc.groups
        assert gc.fetch_offsets("solo", None) == (E.NONE, {})
        gc2, _ = make(store=store, clock=clock)
        assert "solo" not in gc2.groups and "g" in gc2.groups

    run(main())


def test_offset_retention_expires_empty_groups_offsets() -> None:
    async def main() -> None:
        store = GroupStore(MemoryRecordLog(), 5)
        gc, clock = make(store=store)
        gc.config.offsets_retention_minutes = 1
        gc.commit_offsets("solo", -1, "", None, {("u", 0): OffsetAndMetadata(1)})
        await clock.advance(30_000)
        gc.commit_offsets("solo", -1, "", None, {("u", 1): OffsetAndMetadata(2)})
        m1 = await single_stable(gc, clock, session_ms=1_000_000)
        gc.commit_offsets("g", 1, m1, None, {("t", 0): OffsetAndMetadata(5)})
        await clock.advance(31_000)
        assert gc.offsets.expire_offsets() == 1  # only solo's first commit is older than a minute
        assert set(gc.fetch_offsets("solo", None)[1]) == {("u", 1)}
        await clock.advance(60_000)
        assert gc.offsets.expire_offsets() == 1 and "solo" not in gc.groups
        # A consumer group's offsets never expire while it has members...
        assert gc.fetch_offsets("g", None)[1]
        gc.leave_group("g", [(m1, None)])
        assert gc.groups["g"].state is GroupState.EMPTY
        await clock.advance(59_000)
        assert gc.offsets.expire_offsets() == 0  # ...and age from the moment it became Empty
        await clock.advance(1_000)
        assert gc.offsets.expire_offsets() == 1
        assert "g" not in gc.groups
        gc2, _ = make(store=store, clock=clock)
        assert gc2.groups == {}

    run(main())


def test_list_and_describe() -> None:
    async def main() -> None:
        gc, clock = make()
        m1 = await single_stable(gc, clock)
        assert gc.list_groups() == [("g", CONSUMER, "Stable")]
        assert gc.list_groups(["Empty"]) == []
        d = gc.describe_group("g")
        assert (d.error, d.state, d.protocol_type, d.protocol) == (E.NONE, "Stable", CONSUMER, "range")
        (m,) = d.members
        assert (m.member_id, m.client_id, m.client_host, m.assignment) == (m1, "client", "/127.0.0.1", b"A")
        assert m.metadata == b"meta-" + m1.encode()
        dead = gc.describe_group("missing")
        assert (dead.error, dead.state, dead.members) == (E.NONE, "Dead", [])

    run(main())


@pytest.mark.parametrize("delay", [0, 500])
def test_members_joining_together_share_generation_one(delay: int) -> None:
    async def main() -> None:
        gc, clock = make(delay_ms=delay)
        tasks = [await join_new(gc, clock) for _ in range(5)]
        await clock.advance(3 * delay)
        results = [t.result() for t in tasks]
        assert {r.error for r in results} == {E.NONE}
        assert {r.generation_id for r in results} == {1}
        assert len({r.member_id for r in results}) == 5
        (leader,) = [r for r in results if r.members]
        assert {m.member_id for m in leader.members} == {r.member_id for r in results}

    run(main())


def test_deleted_topics_lose_their_offsets() -> None:
    async def main() -> None:
        store = GroupStore(MemoryRecordLog(), 5)
        gc, clock = make(store=store)
        gc.commit_offsets("solo", -1, "", None, {("gone", 0): OffsetAndMetadata(1)})
        gc.commit_offsets("mixed", -1, "", None, {("gone", 1): OffsetAndMetadata(2),
                                                  ("kept", 0): OffsetAndMetadata(3)})
        m1 = await single_stable(gc, clock)
        gc.commit_offsets("g", 1, m1, None, {("gone", 0): OffsetAndMetadata(4)})
        assert gc.offsets.remove_topic_offsets(["gone"]) == 3
        assert "solo" not in gc.groups  # nothing left: the group is gone too
        assert gc.fetch_offsets("mixed", None)[1] == {("kept", 0): OffsetAndMetadata(
            3, commit_timestamp=clock.now)}
        assert gc.groups["g"].state is GroupState.STABLE and gc.fetch_offsets("g", None)[1] == {}
        gc2, _ = make(store=store, clock=clock)
        assert set(gc2.groups) == {"mixed", "g"}
        assert list(gc2.fetch_offsets("mixed", None)[1]) == [("kept", 0)]

    run(main())


def test_join_completes_when_the_last_pending_member_arrives() -> None:
    """A member id handed out by MEMBER_ID_REQUIRED is waited for; its second JoinGroup
    completes the rebalance at once instead of at the rebalance timeout."""
    async def main() -> None:
        gc, clock = make()
        m1 = await single_stable(gc, clock)
        pending = await join(gc)
        assert pending.error == E.MEMBER_ID_REQUIRED
        t3 = await join_new(gc, clock)  # a third member joins fully: rebalance starts
        t1 = join(gc, m1)
        await settle()
        assert not t1.done() and not t3.done(), "still waiting for the pending member"
        t2 = join(gc, pending.member_id)
        await settle()
        results = [t1.result(), t2.result(), t3.result()]
        assert {r.generation_id for r in results} == {2}
        assert {r.error for r in results} == {E.NONE}

    run(main())


def test_absent_static_member_keeps_its_place_through_a_rebalance() -> None:
    async def main() -> None:
        gc, clock = make()
        t = join(gc, instance="s1", session_ms=60_000)
        await clock.advance(0)
        s1 = t.result().member_id
        await gc.sync_group("g", 1, s1, "s1", {s1: b"A"})
        t2 = await join_new(gc, clock)  # dynamic member: rebalance; s1 is offline
        await clock.advance(REBALANCE)
        r2 = t2.result()
        assert r2.error == E.NONE and r2.generation_id == 2
        assert s1 in gc.groups["g"].members, "a static member is not dropped for not rejoining"
        assert r2.leader_id == r2.member_id  # the joined member leads
        assert {m.member_id for m in r2.members} == {s1, r2.member_id}
        await gc.sync_group("g", 2, r2.member_id, None, {r2.member_id: b"B", s1: b"A"})
        # When it comes back it learns the new generation and gets its assignment.
        assert gc.heartbeat("g", 1, s1, "s1") == E.ILLEGAL_GENERATION
        # Its session (60 s) eventually expires if it never comes back.
        for _ in range(12):
            await clock.advance(5_000)
            gc.heartbeat("g", gc.groups["g"].generation_id, r2.member_id)
        assert s1 not in gc.groups["g"].members

    run(main())


class BrokenDiskLog(MemoryRecordLog):
    """Appends fail while ``broken`` (a full or failing disk)."""

    broken = False

    def append(self, partition: int, records: list, timestamp_ms: int,
               producer: tuple[int, int] | None = None) -> None:
        if self.broken:
            raise OSError(28, "No space left on device")
        super().append(partition, records, timestamp_ms, producer)


def test_storage_failures_become_error_codes() -> None:
    async def main() -> None:
        disk = BrokenDiskLog()
        gc, clock = make(store=GroupStore(disk, 5))
        disk.broken = True
        res = gc.commit_offsets("solo", -1, "", None, {("t", 0): OffsetAndMetadata(1)})
        assert res == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
        assert gc.fetch_offsets("solo", None)[1] == {}  # nothing acknowledged, nothing kept
        t = await join_new(gc, clock)
        await clock.advance(0)
        r = t.result()
        s = await asyncio.wait_for(
            gc.sync_group("g", 1, r.member_id, None, {r.member_id: b"A"}), 1)
        assert s.error == E.COORDINATOR_NOT_AVAILABLE  # the group could not be stored
        assert gc.groups["g"].state is GroupState.PREPARING_REBALANCE
        # The last member leaving still empties the group (the failed write is logged).
        assert gc.leave_group("g", [(r.member_id, None)]) == (E.NONE, [E.NONE])
        assert gc.groups["g"].state is GroupState.EMPTY
        disk.broken = False
        assert gc.commit_offsets("solo", -1, "", None, {("t", 0): OffsetAndMetadata(2)}) == {
            ("t", 0): E.NONE}

    run(main())


def test_leave_unknown_group_reports_each_member_unknown() -> None:
    gc, _ = make()
    assert gc.leave_group("nope", [("a", None), ("", "inst")]) == (
        E.NONE, [E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID])
    assert gc.leave_group("", [("a", None)]) == (E.INVALID_GROUP_ID, [])


# --------------------------------------------------------------------------- offsets partitions


def group_in(partition: int) -> str:
    """A group id that lives in ``partition`` of the tests' 5 offsets partitions."""
    return next(g for g in (f"grp-{i}" for i in range(1000))
                if partition_for_group(g, 5) == partition)


async def stable_group(gc: GroupCoordinator, clock: FakeClock, group: str) -> str:
    first = await join(gc, group=group)
    t = join(gc, first.member_id, group=group)
    await clock.advance(0)
    r = t.result()
    s = await gc.sync_group(group, r.generation_id, r.member_id, None, {r.member_id: b"A"})
    assert s.error == E.NONE
    return r.member_id


def test_groups_of_an_unloaded_partition_are_not_coordinated_here() -> None:
    async def main() -> None:
        store = GroupStore(MemoryRecordLog(), 5)
        gc, clock = make(store=store)
        here, gone = group_in(1), group_in(3)
        m = await stable_group(gc, clock, gone)
        gc.commit_offsets(gone, 1, m, None, {("t", 0): OffsetAndMetadata(7)})
        gc.commit_offsets(here, -1, "", None, {("t", 0): OffsetAndMetadata(8)})
        assert gc.unload_partition(3) == 1
        assert gone not in gc.groups and not gc.serves(gone) and gc.serves(here)
        assert gc.heartbeat(gone, 1, m) == E.NOT_COORDINATOR
        assert (await join(gc, group=gone)).error == E.NOT_COORDINATOR
        assert (await gc.sync_group(gone, 1, m, None, {})).error == E.NOT_COORDINATOR
        assert gc.leave_group(gone, [(m, None)]) == (E.NOT_COORDINATOR, [])
        assert gc.commit_offsets(gone, -1, "", None, {("t", 0): OffsetAndMetadata(9)}) == {
            ("t", 0): E.NOT_COORDINATOR}
        assert gc.fetch_offsets(gone, None) == (E.NOT_COORDINATOR, {})
        assert gc.describe_group(gone).error == E.NOT_COORDINATOR
        assert gc.delete_groups([gone]) == {gone: E.NOT_COORDINATOR}
        assert gc.list_groups() == [(here, "", "Empty")]
        # the other partitions are untouched
        assert gc.fetch_offsets(here, None)[1][("t", 0)].offset == 8
        # loading it again rebuilds its groups from the log, members and all
        assert gc.load_partition(3) == 1
        assert gc.fetch_offsets(gone, None)[1][("t", 0)].offset == 7
        assert gc.groups[gone].state is GroupState.STABLE and gc.heartbeat(gone, 1, m) == E.NONE

    run(main())


def test_unloading_answers_blocked_requests_and_stops_the_groups_timers() -> None:
    async def main() -> None:
        gc, clock = make(delay_ms=3000)
        group = group_in(2)
        first = await join(gc, group=group)
        blocked = join(gc, first.member_id, group=group)
        await settle()
        assert not blocked.done()
        gc.unload_partition(2)
        await settle()
        assert blocked.result().error == E.NOT_COORDINATOR
        await clock.advance(60_000)  # neither the join delay nor the session fires
        assert group not in gc.groups

    run(main())


def test_loading_a_loaded_partition_changes_nothing() -> None:
    async def main() -> None:
        store = GroupStore(MemoryRecordLog(), 5)
        gc, clock = make(store=store)
        group = group_in(0)
        m = await stable_group(gc, clock, group)
        before = gc.groups[group]
        assert gc.load_partition(0) == 0
        assert gc.groups[group] is before and gc.heartbeat(group, 1, m) == E.NONE

    run(main())


class UnreadableLog(MemoryRecordLog):
    """Partition 4 cannot be read (a damaged disk)."""

    def scan(self, partition: int) -> list:
        if partition == 4:
            raise OSError(5, "Input/output error")
        return list(super().scan(partition))


def test_a_partition_that_fails_to_load_stays_unloaded() -> None:
    gc, _ = make(store=GroupStore(UnreadableLog(), 5))
    assert gc.registry.loaded == {0, 1, 2, 3}
    assert gc.heartbeat(group_in(4), 1, "m") == E.NOT_COORDINATOR
    assert gc.heartbeat(group_in(0), 1, "m") == E.UNKNOWN_MEMBER_ID


def test_shutdown_answers_blocked_joins() -> None:
    async def main() -> None:
        gc, clock = make(delay_ms=3000)
        first = await join(gc)
        blocked = join(gc, first.member_id)
        await settle()
        gc.shutdown()
        await settle()
        assert blocked.result().error == E.NOT_COORDINATOR
        assert gc.groups == {} and gc.registry.loaded == set()

    run(main())


def test_txn_offsets_are_visible_only_after_the_commit_marker() -> None:
    gc, _clock = make()
    tp = ("t", 0)
    assert gc.txn_commit_offsets("txg", 77, 0, -1, "", None,
                                 {tp: OffsetAndMetadata(9)}) == {tp: E.NONE}
    assert gc.fetch_offsets("txg", [tp]) == (E.NONE, {tp: None})
    part = partition_for_group("txg", 5)
    gc.complete_txn(part, 78, True)  # another producer's marker changes nothing
    assert gc.fetch_offsets("txg", [tp]) == (E.NONE, {tp: None})
    gc.complete_txn(part, 77, True)
    assert gc.fetch_offsets("txg", [tp])[1][tp].offset == 9
    assert gc.txn_commit_offsets("txg", 77, 0, -1, "", None,
                                 {tp: OffsetAndMetadata(10)}) == {tp: E.NONE}
    gc.complete_txn(part, 77, False)
    assert gc.fetch_offsets("txg", [tp])[1][tp].offset == 9
    # a member-qualified commit is checked like OffsetCommit
    assert gc.txn_commit_offsets("txg", 77, 0, 3, "nobody", None,
                                 {tp: OffsetAndMetadata(11)}) == {tp: E.UNKNOWN_MEMBER_ID}
