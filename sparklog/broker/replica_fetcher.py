"""Replica fetchers: a follower copies its leaders' logs with the Fetch API, as Kafka does.

One fetcher task per source broker (the leader of the partitions it fetches), on the
broker's event loop, through sparklog's own client connection code. Each round sends one
Fetch with ``replica_id`` = this broker's node id, every partition at its LEO, its current
leader epoch (the leader fences stale ones) and the epoch of its last batch (KIP-595: the
leader answers with a diverging epoch when our log has gone another way). Fetched batches
are appended exactly as the leader wrote them (``PartitionLog.append_as_follower``: offsets
and epochs as stamped, no re-encode; producer state, leader-epoch cache and indexes follow
the batches), and the follower's HW becomes the leader's, capped by its own LEO.

A partition that just became a follower (new leader, or new leader epoch) first asks the
leader where its latest epoch ends (OffsetForLeaderEpoch) and truncates there
(KIP-101/279: never blindly to the HW), so a replica that led with an unreplicated tail
drops exactly the tail the new leader does not have. OFFSET_OUT_OF_RANGE (our LEO past the
leader's, or below its log start) truncates to the leader's end or starts over at its
start; OFFSET_MOVED_TO_TIERED_STORAGE (below the leader's local log start of a tiered
partition) restarts the log from the bucket's state (KIP-405) after the last uploaded
segment the leader no longer holds locally. Leader-epoch and leadership errors wait for the metadata to move the partition; every
error backs the partition (or, for a broken connection, the whole fetcher) off for
``replica.fetch.backoff.ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from sparklog.broker.config import BrokerConfig
from sparklog.broker.metadata_cache import MetadataCache
from sparklog.broker.partition import Partition
from sparklog.client.connection import (
    BrokerConnection,
    KafkaConnectionError,
    KafkaTimeoutError,
    send_request,
)
from sparklog.protocol.errors import ErrorCode, KafkaError
from sparklog.protocol.messages.fetch import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
)
from sparklog.storage.remote.follower import tier_start
from sparklog.storage.remote.store import RemoteStorageError

log = logging.getLogger(__name__)

__all__ = ["FetcherConfig", "ReplicaFetcherManager"]

FETCH_VERSION = 12  # topic names, current and last fetched epochs, diverging epoch
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 7
EARLIEST, LATEST, EARLIEST_LOCAL = -2, -1, -4

# errors after which the partition waits for the metadata (or the leader) to catch up
_WAIT_ERRORS = {ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
                ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ErrorCode.KAFKA_STORAGE_ERROR}


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """Kafka's ``replica.*`` keys the fetchers use."""

    max_bytes: int = 1 << 20  # replica.fetch.max.bytes (per partition)
    response_max_bytes: int = 10 << 20
    wait_max_ms: int = 500
    min_bytes: int = 1
    backoff_ms: int = 1000
    request_timeout_ms: int = 30_000

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> FetcherConfig:
        return cls(max_bytes=int(config.get("replica.fetch.max.bytes")),
                   response_max_bytes=int(config.get("replica.fetch.response.max.bytes")),
                   wait_max_ms=int(config.get("replica.fetch.wait.max.ms")),
                   min_bytes=int(config.get("replica.fetch.min.bytes")),
                   backoff_ms=int(config.get("replica.fetch.backoff.ms")),
                   request_timeout_ms=int(config.get("replica.socket.timeout.ms")))


class _FetchState:
    """One partition a fetcher copies: truncate first, then fetch; ``delayed_until`` (loop
    time) after an error."""

    __slots__ = ("partition", "leader_epoch", "truncating", "delayed_until")

    def __init__(self, p: Partition) -> None:
        self.partition = p
        self.leader_epoch = p.leader_epoch  # the epoch this follower state belongs to
        self.truncating = True
        self.delayed_until = 0.0

    @property
    def current(self) -> bool:
        """Still the follower state of its partition (no newer epoch, not leader)."""
        p = self.partition
        return not p.is_leader and p.leader_epoch == self.leader_epoch and not p.log.closed


class _Fetcher:
    """The partitions followed from one leader, and the task fetching them."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.states: dict[tuple[str, int], _FetchState] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._failing = False  # the last round failed to reach the leader
        self._conn: BrokerConnection | None = None

    def add(self, p: Partition) -> None:
        self.states[(p.topic, p.partition)] = _FetchState(p)
        self._changed.set()

    def remove(self, p: Partition) -> None:
        self.states.pop((p.topic, p.partition), None)

    def start(self) -> None:
        if self._task is None:
            self._stopping = False
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"replica-fetcher-{self.manager.node_id}-from-{self.leader_id}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            # the flag too: a cancellation that races a completing wait can be lost (3.11)
            self._stopping = True
            self._changed.set()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._close()

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _connection(self) -> BrokerConnection:
        if self._conn is not None and self._conn.connected:
            return self._conn
        await self._close()
        broker = self.manager.metadata.image.brokers.get(self.leader_id)
        if broker is None:
            raise KafkaConnectionError(f"leader {self.leader_id} is not in the metadata")
        cfg = self.manager.config
        conn = BrokerConnection(broker.host, broker.port,
                                client_id=f"replica-fetcher-{self.manager.node_id}",
                                node_id=self.leader_id,
                                request_timeout_ms=cfg.request_timeout_ms)
        await conn.connect()
        self._conn = conn
        return conn

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        cfg = self.manager.config
        while not self._stopping:
            now = loop.time()
            ready = [s for s in self.states.values() if s.delayed_until <= now and s.current]
            if not ready:
                delays = [s.delayed_until for s in self.states.values()]
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.01, min(delays, default=now + 1) - now)):
                        await self._changed.wait()
                continue
            try:
                conn = await self._connection()
                truncating = [s for s in ready if s.truncating]
                if truncating:
                    await self._truncate(conn, truncating)
                    continue
                await self._fetch(conn, ready)
                self._failing = False
            except (KafkaConnectionError, KafkaTimeoutError, OSError) as exc:
                # said once per outage: a dead leader fails every backoff until it is replaced
                log.log(logging.DEBUG if self._failing else logging.INFO,
                        "replica fetcher %d <- %d: %s; retrying every %d ms",
                        self.manager.node_id, self.leader_id, exc, cfg.backoff_ms)
                self._failing = True
            except Exception:  # noqa: BLE001 - a dead fetcher would stop replication silently
                log.exception("replica fetcher %d <- %d failed; retrying in %d ms",
                              self.manager.node_id, self.leader_id, cfg.backoff_ms)
            else:
                continue
            await self._close()
            await asyncio.sleep(cfg.backoff_ms / 1000)

    def _delay(self, s: _FetchState, code: int, what: str) -> None:
        p = s.partition
        log.info("replica fetcher %d: %s of %s-%d from %d: %s", self.manager.node_id, what,
                 p.topic, p.partition, self.leader_id, ErrorCode.for_code(code).name)
        s.delayed_until = asyncio.get_running_loop().time() + self.manager.config.backoff_ms / 1000

    # -- truncation (KIP-101/279) ----------------------------------------------------------

    async def _truncate(self, conn: BrokerConnection, states: list[_FetchState]) -> None:
        """Ask the leader where our latest epoch ends; truncate every partition there."""
        req_cls = OffsetForLeaderEpochRequest
        by_topic: dict[str, list[OffsetForLeaderEpochRequest.OffsetForLeaderPartition]] = {}
        for s in states:
            p = s.partition
            by_topic.setdefault(p.topic, []).append(req_cls.OffsetForLeaderPartition(
                partition=p.partition, current_leader_epoch=s.leader_epoch,
                leader_epoch=p.log.latest_epoch))
        req = req_cls(replica_id=self.manager.node_id, topics=[
            req_cls.OffsetForLeaderTopic(topic=t, partitions=parts) for t, parts in by_topic.items()])
        resp = await send_request(conn, req, OFFSET_FOR_LEADER_EPOCH_VERSION)
        for t in resp.topics:
            for r in t.partitions:
                s = self.states.get((t.topic, r.partition))
                if s is None or s not in states or not s.current:
                    continue
                if r.error_code:
                    self._delay(s, r.error_code, "OffsetForLeaderEpoch")
                    continue
                plog = s.partition.log
                target = plog.truncation_offset_for(r.leader_epoch, r.end_offset)
                if plog.truncate_to(target):
                    log.info("%s-%d: follower %d truncated to %d (leader %d: epoch %d ends at %d)",
                             t.topic, r.partition, self.manager.node_id, target, self.leader_id,
                             r.leader_epoch, r.end_offset)
                s.truncating = False

    # -- fetching ---------------------------------------------------------------------------

    async def _fetch(self, conn: BrokerConnection, states: list[_FetchState]) -> None:
        cfg = self.manager.config
        by_topic: dict[str, list[FetchRequest.FetchPartition]] = {}
        sent: dict[tuple[str, int], tuple[_FetchState, int]] = {}
        for s in states:
            p = s.partition
            plog = p.log
            offset = plog.log_end_offset
            sent[(p.topic, p.partition)] = (s, offset)
            by_topic.setdefault(p.topic, []).append(FetchRequest.FetchPartition(
                partition=p.partition, current_leader_epoch=s.leader_epoch, fetch_offset=offset,
                last_fetched_epoch=plog.latest_epoch, log_start_offset=plog.log_start_offset,
                partition_max_bytes=cfg.max_bytes))
        req = FetchRequest(replica_id=self.manager.node_id, max_wait_ms=cfg.wait_max_ms,
                           min_bytes=cfg.min_bytes, max_bytes=cfg.response_max_bytes,
                           isolation_level=0, session_id=0, session_epoch=-1,
                           topics=[FetchRequest.FetchTopic(topic=t, partitions=parts)
                                   for t, parts in by_topic.items()],
                           forgotten_topics_data=[], rack_id="")
        resp: FetchResponse = await send_request(
            conn, req, FETCH_VERSION, timeout_ms=cfg.request_timeout_ms + cfg.wait_max_ms)
        for t in resp.responses:
            for r in t.partitions:
                entry = sent.get((t.topic, r.partition_index))
                if entry is None:
                    continue
                s, offset = entry
                if self.states.get((t.topic, r.partition_index)) is not s or not s.current:
                    continue  # removed or moved on while the fetch was in flight
                await self._apply(conn, s, offset, r)

    async def _apply(self, conn: BrokerConnection, s: _FetchState, offset: int,
                     r: FetchResponse.PartitionData) -> None:
        plog = s.partition.log
        code = r.error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._out_of_range(conn, s)
            return
        if code == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE:
            await self._start_from_tier(conn, s)
            return
        if code:
            self._delay(s, code, "fetch")
            return
        div = r.diverging_epoch
        if div.epoch >= 0 or div.end_offset >= 0:
            target = plog.truncation_offset_for(div.epoch, div.end_offset)
            log.info("%s-%d: follower %d diverged from leader %d at epoch %d (ends at %d): "
                     "truncating to %d", plog.topic, plog.partition, self.manager.node_id,
                     self.leader_id, div.epoch, div.end_offset, target)
            plog.truncate_to(target)
            return
        if plog.log_end_offset != offset:
            return  # truncated meanwhile: the next round fetches from the new end
        try:
            if r.records is not None and len(r.records):
                plog.append_as_follower(r.records)
            plog.update_high_watermark(min(r.high_watermark, plog.log_end_offset))
            start = r.log_start_offset
            if plog.log_start_offset < start <= plog.high_watermark:
                plog.delete_records(start)  # the leader's retention or DeleteRecords
        except KafkaError as exc:
            self._delay(s, int(exc.error_code), f"append ({exc})")

    async def _list_offset(self, conn: BrokerConnection, s: _FetchState,
                           timestamp: int) -> int | None:
        """The leader's ListOffsets answer for ``timestamp`` (None: failed, backed off)."""
        p = s.partition
        req_cls = ListOffsetsRequest
        req = req_cls(replica_id=self.manager.node_id, isolation_level=0, topics=[
            req_cls.ListOffsetsTopic(name=p.topic, partitions=[
                req_cls.ListOffsetsPartition(
                    partition_index=p.partition, current_leader_epoch=s.leader_epoch,
                    timestamp=timestamp)])])
        resp = await send_request(conn, req, LIST_OFFSETS_VERSION)
        part = resp.topics[0].partitions[0]
        if part.error_code:
            self._delay(s, part.error_code, "ListOffsets")
            return None
        return int(part.offset)

    async def _out_of_range(self, conn: BrokerConnection, s: _FetchState) -> None:
        """Our LEO is beyond the leader's end (truncate to it) or below its start (start
        over there)."""
        p = s.partition
        plog = p.log
        leader_start = await self._list_offset(conn, s, EARLIEST)
        leader_end = None if leader_start is None else await self._list_offset(conn, s, LATEST)
        if leader_start is None or leader_end is None or not s.current:
            return  # backed off, or the partition moved on while we asked
        if plog.log_end_offset > leader_end:
            log.warning("%s-%d: follower %d is past the leader's end %d: truncating to it",
                        p.topic, p.partition, self.manager.node_id, leader_end)
            plog.truncate_to(leader_end)
        elif plog.log_end_offset < leader_start:
            log.info("%s-%d: follower %d is below the leader's log start %d: starting over",
                     p.topic, p.partition, self.manager.node_id, leader_start)
            plog.truncate_fully_and_start_at(leader_start)
        else:  # in range again (the leader's log moved meanwhile): retry after a pause
            self._delay(s, ErrorCode.OFFSET_OUT_OF_RANGE, "fetch")

    async def _start_from_tier(self, conn: BrokerConnection, s: _FetchState) -> None:
        """KIP-405: our LEO is below the leader's local log start, in offsets only the
        bucket holds. Restart our log after the uploaded segment holding the offset before
        the leader's local start, with its leader epochs and producer state
        (``storage.remote.follower``), and fetch the rest from the leader."""
        p = s.partition
        plog = p.log
        remote = plog.remote
        if remote is None:  # our tier has not attached the log yet (or is off)
            self._delay(s, ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE, "fetch (no tier here)")
            return
        local_start = await self._list_offset(conn, s, EARLIEST_LOCAL)
        if local_start is None:
            return
        try:
            start = await asyncio.to_thread(tier_start, remote, local_start)
        except RemoteStorageError as exc:
            self._delay(s, ErrorCode.KAFKA_STORAGE_ERROR, f"reading the bucket ({exc})")
            return
        if start is None:
            self._delay(s, ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE, "fetch (not uploaded yet)")
            return
        if not s.current:
            return  # the partition moved on while we read the bucket
        log.info("%s-%d: follower %d is below leader %d's local log start %d: continuing at "
                 "%d from the bucket (log start %d)", p.topic, p.partition,
                 self.manager.node_id, self.leader_id, local_start, start.offset,
                 start.log_start_offset)
        plog.truncate_fully_and_start_at(start.offset, start.log_start_offset, start.epochs,
                                         start.producer_snapshot)


class ReplicaFetcherManager:
    """The fetchers of one broker, one per leader it follows partitions of. It is the
    replica manager's role listener: a partition that became a follower is (re)added to its
    leader's fetcher, truncation first; one that became leader or went away is dropped."""

    def __init__(self, node_id: int, metadata: MetadataCache, config: FetcherConfig) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.config = config
        self._fetchers: dict[int, _Fetcher] = {}
        self._running = False

    def on_role_change(self, p: Partition, hosted: bool) -> None:
        for fetcher in self._fetchers.values():
            fetcher.remove(p)
        if not hosted or p.is_leader or p.leader_id < 0:
            return
        fetcher = self._fetchers.get(p.leader_id)
        if fetcher is None:
            fetcher = self._fetchers[p.leader_id] = _Fetcher(self, p.leader_id)
        fetcher.add(p)
        if self._running:
            fetcher.start()

    def start(self) -> None:
        """Start fetching (on the running loop) for every partition followed so far."""
        self._running = True
        for fetcher in self._fetchers.values():
            if fetcher.states:
                fetcher.start()

    async def stop(self) -> None:
        """Stop every fetcher (what they follow is kept: ``start`` resumes it, truncation
        first)."""
        self._running = False
        for fetcher in list(self._fetchers.values()):
            await fetcher.stop()
            for s in fetcher.states.values():
                s.truncating = True
