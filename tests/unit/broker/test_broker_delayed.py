"""Delayed operations (long-poll fetch, acks=all): parking, waking, expiry, cancellation by
the owner, the broker-wide bound; and read-result normalisation."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from sparklog.broker.acks import AcksAllWait, wait_replicated
from sparklog.broker.delayed import ParkedOperations, Purgatory, Waiters
from sparklog.broker.fileslice import SliceChain, as_records
from sparklog.broker.partition import Partition
from sparklog.broker.server import Connection, KafkaServer
from sparklog.protocol.errors import ErrorCode
from sparklog.storage import FetchDataInfo, FileSlice, PartitionLog
from tests.helpers.batches import make_batch


def _empty(purgatory: Purgatory, *rest: Waiters | ParkedOperations) -> bool:
    return len(purgatory) == 0 and all(len(x) == 0 for x in rest)


async def _parked(pg: Purgatory, owner: ParkedOperations, w: Waiters) -> asyncio.Task[bool]:
    """A task that parked on ``w`` for an hour, once it has."""
    task = asyncio.get_running_loop().create_task(pg.park(owner, [w], 3600))
    await asyncio.sleep(0)
    return task


def test_park_wakes_on_first_and_cleans_up():
    async def main():
        pg, owner = Purgatory(10), ParkedOperations()
        a, b = Waiters(), Waiters()
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, b.wake)
        t0 = time.monotonic()
        assert await pg.park(owner, [a, b], 5.0) is True
        assert time.monotonic() - t0 < 2.0
        assert _empty(pg, a, b, owner)  # nothing left registered anywhere
        t0 = time.monotonic()
        assert await pg.park(owner, [a, b], 0.05) is False
        assert 0.04 <= time.monotonic() - t0 < 2.0
        assert _empty(pg, a, b, owner)
        assert await pg.park(owner, [a], 0) is False
        assert await pg.park(owner, [], 5.0) is False
        assert await pg.park(None, [a], 0.01) is False  # no owner: only time ends it

    asyncio.run(main())


def test_owner_cancel_unwinds_the_parked_handler():
    async def main():
        pg, owner, w = Purgatory(10), ParkedOperations(), Waiters()
        task = await _parked(pg, owner, w)
        assert len(pg) == len(owner) == len(w) == 1
        owner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert _empty(pg, w, owner)

    asyncio.run(main())


def test_owner_expire_answers_now_and_parks_nothing_more():
    async def main():
        pg, owner, w = Purgatory(10), ParkedOperations(), Waiters()
        task = await _parked(pg, owner, w)
        owner.expire()
        assert await asyncio.wait_for(task, 5) is False
        assert await asyncio.wait_for(pg.park(owner, [w], 3600), 5) is False
        assert _empty(pg, w, owner)
        # another owner still parks
        other = await _parked(pg, ParkedOperations(), w)
        w.wake()
        assert await asyncio.wait_for(other, 5) is True

    asyncio.run(main())


def test_full_purgatory_answers_at_once_and_says_so(caplog):
    caplog.set_level(logging.WARNING, logger="sparklog.broker.delayed")

    async def main():
        pg, w = Purgatory(3), Waiters()
        loop = asyncio.get_running_loop()
        parked = [loop.create_task(pg.park(ParkedOperations(), [w], 3600)) for _ in range(3)]
        await asyncio.sleep(0)
        assert len(pg) == 3
        for _ in range(5):
            assert await asyncio.wait_for(pg.park(ParkedOperations(), [w], 3600), 1) is False
        warnings = [r for r in caplog.records if "purgatory.max.requests" in r.getMessage()]
        assert len(warnings) == 1  # once, not once per refused request
        w.wake()
        assert await asyncio.gather(*parked) == [True] * 3
        assert _empty(pg, w)
        loop.call_later(0.01, w.wake)
        assert await pg.park(ParkedOperations(), [w], 5) is True  # room again

    asyncio.run(main())


def test_close_expires_everything_and_refuses_new_parks():
    async def main():
        pg, w = Purgatory(10), Waiters()
        loop = asyncio.get_running_loop()
        parked = [loop.create_task(pg.park(ParkedOperations(), [w], 3600)) for _ in range(4)]
        await asyncio.sleep(0)
        pg.close()
        assert await asyncio.wait_for(asyncio.gather(*parked), 5) == [False] * 4
        assert await asyncio.wait_for(pg.park(None, [w], 3600), 5) is False
        assert _empty(pg, w)

    asyncio.run(main())


def test_acks_all_parks_on_its_connection_until_replicated(tmp_path):
    async def main():

        srv = KafkaServer(_no_process)
        conn = Connection(srv)
        plog = PartitionLog(str(tmp_path / "t-0"))
        p = Partition("t", 0, bytes(16), plog, 1)
        p.apply(1, 0, 0, [1, 2], [1, 2], 0)
        plog.append_as_leader(make_batch(1), 0)
        loop = asyncio.get_running_loop()

        def replicate() -> None:
            p.follower_fetched(2, 1, 0)  # the follower has offset 0: the HW moves to 1
            p.waiters.wake()

        loop.call_later(0.02, p.waiters.wake)  # a wake that changes nothing: waits on
        loop.call_later(0.05, replicate)
        assert await asyncio.wait_for(wait_replicated(conn.park, [AcksAllWait(p, 0, 0)], 5000),
                                      5) == {}
        timed_out = await wait_replicated(conn.park, [AcksAllWait(p, 1, 0)], 30)
        assert timed_out == {("t", 0): ErrorCode.REQUEST_TIMED_OUT}
        # a wait under an epoch that is not the leader's is never acknowledged
        assert await wait_replicated(conn.park, [AcksAllWait(p, 0, 7)], 30) == {
            ("t", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}
        waiting = loop.create_task(wait_replicated(conn.park, [AcksAllWait(p, 1, 0)], 3_600_000))
        await asyncio.sleep(0)
        assert len(srv.purgatory) == 1
        conn.close()  # the connection going away cancels the wait
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert len(srv.purgatory) == 0 and len(p.waiters) == 0
        plog.close()

    asyncio.run(main())


async def _no_process(conn: Connection, frame: bytearray) -> None:
    return None


def test_as_records_shapes(tmp_path):
    p = str(tmp_path / "f")
    with open(p, "wb") as f:
        f.write(b"0123456789")
    one = FileSlice(p, 2, 3)

    def info(slices):
        return FetchDataInfo(0, 0, slices)

    assert as_records(info([])) == (b"", 0)
    assert as_records(info([FileSlice(p, 5, 0)])) == (b"", 0)
    assert as_records(info([one])) == (one, 3)
    chain, size = as_records(info([one, FileSlice(p, 7, 2)]))
    assert isinstance(chain, SliceChain) and size == 5 and chain.read_bytes() == b"23478"
