"""Fetch: long-poll reads capped at the high watermark (LSO for read_committed), returned as
file slices the connection sends with ``os.sendfile``.

Sessions (KIP-227): we never create one and always answer ``session_id=0``, which every
client treats as "sessionless" and answers with full fetches. A request that tries to
continue a session (id != 0) gets FETCH_SESSION_ID_NOT_FOUND, so it starts over.
Follower fetches (replica_id >= 0) go to the leader like consumer fetches, read up to the
log end offset and report the follower's position to the replica manager, which is where
the HW of a replicated partition moves and a caught-up follower rejoins the ISR. A follower
whose last fetched epoch diverges from ours gets the diverging epoch (KIP-595) and is not
counted as having anything; one fetching below the local log start of a tiered partition
gets OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405: it restarts from the bucket, not from us).

A fetch that found fewer than ``min_bytes`` parks on its connection (``delayed.py``) and
reads again whenever one of its partitions changes, until it has enough, ``max_wait_ms``
passed, or the connection ends: a closed connection cancels it, a half-closed one or a
full purgatory has it answered at once with what it read.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Literal

from sparklog.broker.dispatch import RequestContext, register
from sparklog.broker.fileslice import as_records
from sparklog.broker.partition import Partition
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import (
    ErrorCode,
    KafkaError,
    KafkaStorageError,
    OffsetMovedToTieredStorageError,
    OffsetOutOfRangeError,
)
from sparklog.protocol.messages.fetch import FetchRequest, FetchResponse
from sparklog.storage.partition_log import PartitionLog

log = logging.getLogger(__name__)

READ_COMMITTED = 1


class _PartitionFetch:
    """One partition of the request, its response, the partition it read last pass, and
    what became of its bucket read (``remote``: None, or "pending": still running, answer
    no records; "busy": refused a thread, answer KAFKA_STORAGE_ERROR)."""

    __slots__ = ("topic", "req", "resp", "partition", "remote")

    def __init__(self, topic: str, req: FetchRequest.FetchPartition,
                 resp: FetchResponse.PartitionData) -> None:
        self.topic = topic
        self.req = req
        self.resp = resp
        self.partition: Partition | None = None
        self.remote: Literal["pending", "busy"] | None = None


def _read_pass(ctx: RequestContext, entries: list[_PartitionFetch], request: FetchRequest,
               follower: bool) -> tuple[int, bool]:
    """Fill every entry's response; returns (bytes read, any error)."""
    rm = ctx.broker.replica_manager
    read_committed = request.isolation_level == READ_COMMITTED
    budget = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    total = 0
    any_error = False
    min_one = True
    for e in entries:
        r, resp = e.req, e.resp
        resp.records = b""
        try:
            # looked up on every pass: a long poll must notice deletion, leadership moves
            # and epoch bumps that happened while it waited
            p = rm.leader_partition(e.topic, r.partition, r.current_leader_epoch)
            e.partition = p
            plog = p.log
            hw = plog.high_watermark
            lso = plog.last_stable_offset
            leo = plog.log_end_offset
            start = plog.log_start_offset
            resp.error_code = 0
            resp.high_watermark = hw
            resp.last_stable_offset = lso
            resp.log_start_offset = start
            resp.aborted_transactions = [] if read_committed else None
            max_offset = leo if follower else (lso if read_committed else hw)
            if r.fetch_offset < start or r.fetch_offset > leo:
                raise OffsetOutOfRangeError(
                    f"{e.topic}-{r.partition}: offset {r.fetch_offset} outside [{start}, {leo}]"
                )
            last_epoch = r.last_fetched_epoch
            if last_epoch >= 0:
                # KIP-320/595: the fetcher's log may have diverged from ours at an epoch end
                epoch, end = plog.end_offset_for_epoch(last_epoch)
                if epoch != last_epoch or end < r.fetch_offset:
                    resp.diverging_epoch = FetchResponse.EpochEndOffset(epoch=epoch, end_offset=end)
                    continue
            if follower and plog.remote is not None and r.fetch_offset < plog.local_log_start_offset:
                raise OffsetMovedToTieredStorageError(
                    f"{e.topic}-{r.partition}: offset {r.fetch_offset} is below the local log "
                    f"start {plog.local_log_start_offset}: it is in the remote tier")
            if follower:
                rm.record_follower_fetch(p, request.replica_id, r.fetch_offset)
                resp.high_watermark = plog.high_watermark  # it may just have moved
            if r.fetch_offset >= max_offset or budget <= 0:
                continue
            if e.remote == "busy":
                raise KafkaStorageError(f"{e.topic}-{r.partition}: too many reads of remote "
                                        f"storage are waiting; retry later")
            if e.remote == "pending":
                continue  # its bucket read goes on: never read the store on the event loop
            limit = min(r.partition_max_bytes, budget)
            if limit <= 0 and not min_one:
                continue
            data = plog.read(r.fetch_offset, max(limit, 0), max_offset=max_offset,
                             min_one_message=min_one)
            records, size = as_records(data)
            if size:
                resp.records = records
                total += size
                budget -= size
                min_one = False
                if read_committed and not follower:
                    resp.aborted_transactions = _aborted(plog, r.fetch_offset, data.next_offset)
        except KafkaError as exc:
            resp.error_code = int(exc.error_code)
            resp.records = b""
            any_error = True
            ctx.log_once(f"fetch-{exc.error_code.name}", logging.INFO,
                         "fetch %s-%d from %s: %s", e.topic, r.partition, ctx.client_host, exc)
    return total, any_error


def _aborted(plog: PartitionLog, fetch_offset: int, end_offset: int
             ) -> list[FetchResponse.AbortedTransaction]:
    """The aborted transactions a read_committed consumer needs to drop what it got: those
    overlapping [fetch_offset, end_offset), the end of the returned batches."""
    return [FetchResponse.AbortedTransaction(producer_id=t.producer_id,
                                             first_offset=t.first_offset)
            for t in plog.aborted_transactions(fetch_offset, end_offset)]


@register(ApiKey.FETCH, 4, 13)
async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    if ctx.api_version >= 7 and request.session_id != 0:
        return FetchResponse(throttle_time_ms=0,
                             error_code=int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
                             session_id=0, responses=[])
    follower = request.replica_id >= 0
    by_id = ctx.api_version >= 13  # topics are named by id from v13 on
    md = ctx.broker.metadata
    entries: list[_PartitionFetch] = []
    responses = []
    for t in request.topics:
        name = t.topic
        if by_id:
            info = md.topic_by_id(t.topic_id)
            name = info.name if info is not None else None
        parts = []
        for r in t.partitions:
            pr = FetchResponse.PartitionData(partition_index=r.partition, error_code=0,
                                             high_watermark=-1, last_stable_offset=-1,
                                             log_start_offset=-1, records=b"")
            parts.append(pr)
            if name is None:
                pr.error_code = int(ErrorCode.UNKNOWN_TOPIC_ID)
                continue
            entries.append(_PartitionFetch(name, r, pr))
        responses.append(FetchResponse.FetchableTopicResponse(topic=name or "",
                                                              topic_id=t.topic_id,
                                                              partitions=parts))

    remote_reads = ctx.broker.remote_fetches
    pending = False
    # offsets below a local log start: the bucket (a follower is sent there instead)
    if remote_reads is not None and not follower:
        waiting, busy = await remote_reads.prefetch(
            ctx.broker.replica_manager,
            [(e.topic, e.req.partition, e.req.fetch_offset, e.req.partition_max_bytes)
             for e in entries],
            request.isolation_level == READ_COMMITTED)
        for e in entries:
            tp = (e.topic, e.req.partition)
            e.remote = "pending" if tp in waiting else "busy" if tp in busy else None
        pending = bool(waiting)
    total, any_error = _read_pass(ctx, entries, request, follower)
    conn = ctx.connection
    # a fetch whose bucket read outlived remote.fetch.max.wait.ms is answered now, as
    # Kafka's DelayedRemoteFetch is on expiry: it has waited its time already
    if (total < request.min_bytes and not any_error and not pending
            and request.max_wait_ms > 0 and entries and conn is not None):
        # Long poll: parked until a partition changes, max_wait_ms passes, or the
        # connection ends (which cancels this handler where it awaits).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.max_wait_ms / 1000
        while True:
            waiters = [e.partition.waiters for e in entries if e.partition is not None]
            if not await conn.park(waiters, deadline - loop.time()):
                break
            total, any_error = _read_pass(ctx, entries, request, follower)
            if total >= request.min_bytes or any_error:
                break
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=responses)
