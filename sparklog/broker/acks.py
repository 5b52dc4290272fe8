"""Waiting for the ISR: an acks=all produce, or a coordinator's write, is answered once
every in-sync replica has its batch (the high watermark passed it) under the leader epoch
it was appended in (``Partition.acks_all_state``).

The wait parks (``delayed.py``) on the connection that sent the request, or, for what a
coordinator writes on its own (transaction markers and states), in the purgatory with no
owner (``Broker.park``): it ends when the batches are replicated, when one fails (NOT_LEADER_OR_FOLLOWER after a leadership change,
NOT_ENOUGH_REPLICAS_AFTER_APPEND after the ISR shrank below ``min.insync.replicas``), at the
timeout (REQUEST_TIMED_OUT; the records stay appended, as in Kafka), or with the
connection. Without a way to park (``park`` None) the state is looked at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection

from sparklog.broker.delayed import Waiters
from sparklog.broker.partition import Partition
from sparklog.protocol.errors import ErrorCode

__all__ = ["AcksAllWait", "Park", "wait_replicated"]

# parks until one of the waiters wakes (True) or the timeout in seconds passes (False):
# ``Connection.park``, or ``Broker.park`` for a wait no request owns
Park = Callable[[Collection[Waiters], float], Awaitable[bool]]


class AcksAllWait:
    """One partition an acks=all request wrote: where its batch ended, under which epoch."""

    __slots__ = ("partition", "last_offset", "leader_epoch")

    def __init__(self, p: Partition, last_offset: int, leader_epoch: int) -> None:
        self.partition, self.last_offset, self.leader_epoch = p, last_offset, leader_epoch

    def state(self) -> ErrorCode | None:
        p = self.partition
        return p.acks_all_state(self.last_offset, self.leader_epoch,
                                p.log.config.min_insync_replicas)


async def wait_replicated(park: Park | None, waits: list[AcksAllWait],
                          timeout_ms: int) -> dict[tuple[str, int], ErrorCode]:
    """Park until every partition's ISR has its batch; the errors of those that failed or
    are still short (REQUEST_TIMED_OUT)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    errors: dict[tuple[str, int], ErrorCode] = {}
    pending = waits
    while True:
        still = []
        for w in pending:
            code = w.state()
            if code is None:
                still.append(w)
            elif code != ErrorCode.NONE:
                errors[(w.partition.topic, w.partition.partition)] = code
        pending = still
        if not pending or park is None:
            break
        if not await park([w.partition.waiters for w in pending], deadline - loop.time()):
            break
    for w in pending:
        code = w.state()
        if code != ErrorCode.NONE:
            errors[(w.partition.topic, w.partition.partition)] = code or ErrorCode.REQUEST_TIMED_OUT
    return errors
