"""The consumer: assign/seek or subscribe with a group, poll, commit; plus the Arrow path.

Fetching is pipelined: while the application works through what ``poll`` returned, the next
Fetch per leader is already in flight on the I/O thread. Records are decoded per fetch
response in one vectorised pass (``arrow_decode``); the per-record API then hands out
``ConsumerRecord`` objects built from those columns, while ``fetch_arrow`` returns the
columns themselves.

Group membership follows the Java client's model: heartbeats run on the I/O thread, but
rebalances (JoinGroup/SyncGroup and the ``on_revoke``/``on_assign`` callbacks) happen inside
``poll()`` on the caller's thread, so callbacks may call ``commit()`` safely.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from sparklog.client.arrow_decode import batch_sizes, decode_fetched
from sparklog.client.assignors import (
    Subscription,
    assign,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from sparklog.client.connection import (
    BrokerConnection,
    EventLoopThread,
    KafkaConnectionError,
    KafkaTimeoutError,
)
from sparklog.client.core import STALE_METADATA, AsyncClient, conf_bool, conf_int
from sparklog.protocol.errors import (
    ErrorCode,
    KafkaError,
    OffsetOutOfRangeError,
    SparklogError,
    error_for_code,
)
from sparklog.protocol.messages.fetch import FetchRequest, ListOffsetsRequest
from sparklog.protocol.messages.groups import (
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from sparklog.protocol.messages.offsets import OffsetCommitRequest, OffsetFetchRequest
from sparklog.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["Consumer", "ConsumerRecord", "find_coordinator", "commit_offsets",
           "fetch_committed", "list_offsets"]

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


@dataclass(slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


class _PartState:
    __slots__ = ("position", "fetch_offset", "paused", "records", "high_watermark",
                 "log_start", "last_stable")

    def __init__(self) -> None:
        self.position: int | None = None  # next offset poll() hands out
        self.fetch_offset: int | None = None  # next offset to fetch
        self.paused = False
        self.records: deque[ConsumerRecord] = deque()
        self.high_watermark = -1
        self.log_start = -1
        self.last_stable = -1


def _isolation(v: Any) -> int:
    s = str(v or "read_uncommitted").lower()
    if s not in ("read_uncommitted", "read_committed"):
        raise ValueError(f"isolation.level must be read_uncommitted or read_committed, got {v!r}")
    return 1 if s == "read_committed" else 0


# --------------------------------------------------------------------------- shared helpers


async def find_coordinator(client: AsyncClient, group: str, key_type: int = 0) -> BrokerConnection:
    """The group coordinator's connection (FindCoordinator, retried while it loads)."""
    deadline = time.monotonic() + client.config.request_timeout_ms / 1000
    delay = client.config.retry_backoff_ms / 1000
    while True:
        resp = await client.send_any(FindCoordinatorRequest(key=group, key_type=key_type))
        if resp.error_code == 0:
            node = resp.node_id
            if node not in client.metadata.brokers:
                await client.refresh_metadata([])
            if node in client.metadata.brokers:
                return await client.connection(node)
            conn = BrokerConnection(resp.host, resp.port, client_id=client.config.client_id,
                                    node_id=node)
            await conn.connect()
            await client._negotiate(conn)
            client._conns[node] = conn
            return conn
        err = error_for_code(resp.error_code, resp.error_message)
        if not err.retriable or time.monotonic() + delay > deadline:
            raise err
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


async def list_offsets(client: AsyncClient, specs: dict[TopicPartition, int],
                       isolation_level: int = 0) -> dict[TopicPartition, tuple[int, int]]:
    """ListOffsets grouped per leader -> {tp: (offset, timestamp)}; retries stale leaders."""
    result: dict[TopicPartition, tuple[int, int]] = {}
    todo = dict(specs)
    deadline = time.monotonic() + client.config.request_timeout_ms / 1000
    delay = client.config.retry_backoff_ms / 1000
    while todo:
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in todo:
            by_leader.setdefault(await client.leader_id(tp), []).append(tp)
        retry: dict[TopicPartition, int] = {}
        last_err: KafkaError | None = None
        for leader, tps in by_leader.items():
            topics: dict[str, list] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=tp.partition, timestamp=todo[tp]))
            req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps)
                for t, ps in topics.items()])
            resp = await client.send_node(leader, req)
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code == 0:
                        result[tp] = (p.offset, p.timestamp)
                        continue
                    err = error_for_code(p.error_code, f"ListOffsets {tp.topic}-{tp.partition}")
                    if err.retriable:
                        retry[tp] = todo[tp]
                        last_err = err
                    else:
                        raise err
        if retry:
            if time.monotonic() + delay > deadline:
                assert last_err is not None
                raise last_err
            client.invalidate()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
        todo = retry
    return result


async def commit_offsets(client: AsyncClient, conn: BrokerConnection, group: str,
                         offsets: dict[TopicPartition, int], *, generation: int = -1,
                         member_id: str = "", group_instance_id: str | None = None,
                         metadata: str = "") -> None:
    topics: dict[str, list] = {}
    for tp, off in offsets.items():
        topics.setdefault(tp.topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=tp.partition, committed_offset=off, committed_metadata=metadata))
    req = OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=group_instance_id,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                for t, ps in topics.items()])
    resp = await client.send(conn, req)
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code:
                raise error_for_code(p.error_code,
                                     f"commit {t.name}-{p.partition_index} for group {group!r}: "
                                     f"{ErrorCode.for_code(p.error_code).name}")


async def fetch_committed(client: AsyncClient, conn: BrokerConnection, group: str,
                          tps: Iterable[TopicPartition] | None) -> dict[TopicPartition, int]:
    """Committed offsets (-1 = none); ``tps`` None = every partition the group has."""
    if tps is None:
        topics = None
    else:
        by: dict[str, list[int]] = {}
        for tp in tps:
            by.setdefault(tp.topic, []).append(tp.partition)
        topics = [OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                  for t, ps in by.items()]
    resp = await client.send(conn, OffsetFetchRequest(group_id=group, topics=topics))
    if getattr(resp, "error_code", 0):
        raise error_for_code(resp.error_code, f"OffsetFetch for group {group!r}")
    out: dict[TopicPartition, int] = {}
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code and p.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise error_for_code(p.error_code, f"OffsetFetch {t.name}-{p.partition_index}")
            out[TopicPartition(t.name, p.partition_index)] = p.committed_offset
    return out


# --------------------------------------------------------------------------- consumer


class Consumer:
    """Kafka consumer with Kafka's config names (sync facade)."""

    def __init__(self, config: dict[str, Any]) -> None:
        conf = dict(config)
        self.group_id: str | None = conf.get("group.id") or None
        self.auto_offset_reset = str(conf.get("auto.offset.reset", "latest")).lower()
        if self.auto_offset_reset in ("smallest", "beginning"):
            self.auto_offset_reset = "earliest"
        if self.auto_offset_reset in ("largest", "end"):
            self.auto_offset_reset = "latest"
        if self.auto_offset_reset not in ("earliest", "latest", "none", "error"):
            raise ValueError(f"auto.offset.reset: {self.auto_offset_reset!r}")
        self.enable_auto_commit = conf_bool(conf, "enable.auto.commit", True)
        self.auto_commit_interval_ms = conf_int(conf, "auto.commit.interval.ms", 5000)
        self.isolation_level = _isolation(conf.get("isolation.level"))
        self.fetch_min_bytes = conf_int(conf, "fetch.min.bytes", 1)
        self.fetch_max_bytes = conf_int(conf, "fetch.max.bytes", 52428800)
        self.fetch_max_wait_ms = conf_int(conf, "fetch.max.wait.ms", 500)
        self.max_partition_fetch_bytes = conf_int(conf, "max.partition.fetch.bytes", 1048576)
        self.max_poll_records = conf_int(conf, "max.poll.records", 500)
        self.session_timeout_ms = conf_int(conf, "session.timeout.ms", 45000)
        self.heartbeat_interval_ms = conf_int(conf, "heartbeat.interval.ms", 3000)
        self.max_poll_interval_ms = conf_int(conf, "max.poll.interval.ms", 300000)
        self.check_crcs = conf_bool(conf, "check.crcs", True)
        self.group_instance_id = conf.get("group.instance.id") or None
        strategies = conf.get("partition.assignment.strategy", "range,cooperative-sticky")
        if isinstance(strategies, str):
            strategies = [s.strip() for s in strategies.split(",") if s.strip()]
        self.strategies = [_strategy_name(s) for s in strategies]
        client_conf = {k: v for k, v in conf.items() if isinstance(v, str | int | float | bool)}
        self._client = AsyncClient(client_conf)
        self._thread = EventLoopThread("sparklog-consumer")
        self._assignment: dict[TopicPartition, _PartState] = {}
        self._subscription: list[str] = []
        self._on_assign: Callable | None = None
        self._on_revoke: Callable | None = None
        self._on_lost: Callable | None = None
        self._fetch_future: concurrent.futures.Future | None = None
        self._closed = False
        self._last_commit = time.monotonic()
        # group state
        self._member_id = ""
        self._generation = -1
        self._protocol: str | None = None
        self._coordinator: BrokerConnection | None = None
        self._need_rejoin = False
        # bumped whenever a join starts; True while it runs (see _heartbeat_loop)
        self._join_epoch = 0
        self._joining = False
        self._hb_task: concurrent.futures.Future | None = None
        self._join_future: concurrent.futures.Future | None = None
        self._hb_error: BaseException | None = None
        self._last_poll = time.monotonic()

    # ------------------------------------------------------------------ helpers

    def _run(self, coro: Any, timeout_ms: int | None = None) -> Any:
        t = None if timeout_ms is None else timeout_ms / 1000 + 5
        return self._thread.run(coro, timeout=t)

    @property
    def _timeout_ms(self) -> int:
        return self._client.config.request_timeout_ms

    # ------------------------------------------------------------------ assignment

    def assign(self, partitions: Iterable[TopicPartition | tuple]) -> None:
        """Manual assignment (no group membership). Offsets may be given as
        (topic, partition, offset) tuples."""
        if self._subscription:
            raise SparklogError("assign() after subscribe(): call unsubscribe() first")
        new: dict[TopicPartition, _PartState] = {}
        for item in partitions:
            tp = TopicPartition(item[0], item[1])
            st = self._assignment.get(tp) or _PartState()
            if len(item) > 2 and item[2] is not None and item[2] >= 0:
                st.position = st.fetch_offset = int(item[2])
                st.records.clear()
            new[tp] = st
        self._assignment = new
        self._discard_inflight()

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def subscribe(self, topics: Iterable[str], on_assign: Callable | None = None,
                  on_revoke: Callable | None = None, on_lost: Callable | None = None) -> None:
        """Join ``group.id`` for ``topics``; callbacks get (consumer, [TopicPartition])."""
        if not self.group_id:
            raise SparklogError("subscribe() needs group.id")
        self._subscription = sorted(set(topics))
        self._on_assign, self._on_revoke, self._on_lost = on_assign, on_revoke, on_lost
        self._need_rejoin = True

    def subscription(self) -> list[str]:
        return list(self._subscription)

    def unsubscribe(self) -> None:
        if self._subscription and self._generation >= 0:
            self._revoke(list(self._assignment))
            self._run(self._leave_group())
        self._subscription = []
        self._assignment = {}
        self._discard_inflight()

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            st = self._assignment.get(TopicPartition(*tp[:2]))
            if st is not None:
                st.paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            st = self._assignment.get(TopicPartition(*tp[:2]))
            if st is not None:
                st.paused = False

    def paused(self) -> list[TopicPartition]:
        return [tp for tp, st in self._assignment.items() if st.paused]

    def seek(self, tp: TopicPartition | tuple, offset: int | None = None) -> None:
        if offset is None:  # confluent style: TopicPartition-like with .offset
            tp, offset = TopicPartition(tp[0], tp[1]), int(tp[2])
        tp = TopicPartition(tp[0], tp[1])
        st = self._assignment.get(tp)
        if st is None:
            raise SparklogError(f"{tp.topic}-{tp.partition} is not assigned")
        if offset < 0:
            spec = EARLIEST if offset == EARLIEST else LATEST
            offset = self._run(list_offsets(self._client, {tp: spec}, self.isolation_level))[tp][0]
        st.position = st.fetch_offset = offset
        st.records.clear()
        self._discard_inflight()

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for tp in list(partitions or self._assignment):
            self.seek(tp, EARLIEST)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        for tp in list(partitions or self._assignment):
            self.seek(tp, LATEST)

    def position(self, tp: TopicPartition | tuple) -> int | None:
        tp = TopicPartition(tp[0], tp[1])
        st = self._assignment.get(tp)
        if st is None:
            raise SparklogError(f"{tp.topic}-{tp.partition} is not assigned")
        if st.position is None:
            self._run(self._init_positions([tp]))
        return st.position

    # ------------------------------------------------------------------ offsets API

    def get_watermark_offsets(self, tp: TopicPartition | tuple, timeout: float | None = None,
                              cached: bool = False) -> tuple[int, int]:
        tp = TopicPartition(tp[0], tp[1])
        if cached:
            st = self._assignment.get(tp)
            return (st.log_start, st.high_watermark) if st else (-1, -1)
        res = self._run(self._watermarks(tp))
        return res

    async def _watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        lo = await list_offsets(self._client, {tp: EARLIEST}, self.isolation_level)
        hi = await list_offsets(self._client, {tp: LATEST}, self.isolation_level)
        return lo[tp][0], hi[tp][0]

    def offsets_for_times(self, specs: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        res = self._run(list_offsets(self._client, {TopicPartition(*tp[:2]): ts
                                                    for tp, ts in specs.items()},
                                     self.isolation_level))
        return {tp: off for tp, (off, _ts) in res.items()}

    def committed(self, partitions: Iterable[TopicPartition], timeout: float | None = None
                  ) -> dict[TopicPartition, int]:
        if not self.group_id:
            raise SparklogError("committed() needs group.id")
        tps = [TopicPartition(*tp[:2]) for tp in partitions]

        async def go() -> dict[TopicPartition, int]:
            conn = await self._coord()
            return await fetch_committed(self._client, conn, self.group_id, tps)  # type: ignore[arg-type]

        return self._run(go())

    def commit(self, offsets: dict[TopicPartition, int] | Iterable | None = None,
               asynchronous: bool = False) -> None:
        """Commit ``offsets`` (next offsets to read) or the current positions."""
        if not self.group_id:
            raise SparklogError("commit() needs group.id")
        if offsets is None:
            offs = {tp: st.position for tp, st in self._assignment.items()
                    if st.position is not None}
        elif isinstance(offsets, dict):
            offs = {TopicPartition(*tp[:2]): int(o) for tp, o in offsets.items()}
        else:
            offs = {TopicPartition(t[0], t[1]): int(t[2]) for t in offsets}
        if not offs:
            return
        fut = self._thread.submit(self._commit(offs))
        if not asynchronous:
            fut.result(self._timeout_ms / 1000 + 5)
        else:
            fut.add_done_callback(_log_async_commit)

    async def _commit(self, offs: dict[TopicPartition, int]) -> None:
        conn = await self._coord()
        gen = self._generation if self._subscription else -1
        member = self._member_id if self._subscription else ""
        try:
            await commit_offsets(self._client, conn, self.group_id, offs,  # type: ignore[arg-type]
                                 generation=gen, member_id=member,
                                 group_instance_id=self.group_instance_id)
        except KafkaError as e:
            if e.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self._coordinator = None
            if e.error_code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION,
                                ErrorCode.UNKNOWN_MEMBER_ID):
                self._need_rejoin = True
            raise

    # ------------------------------------------------------------------ poll

    def poll(self, timeout: float | None = None) -> ConsumerRecord | None:
        """One record, or None when none arrived within ``timeout`` seconds."""
        recs = self.consume(1, timeout)
        return recs[0] if recs else None

    def consume(self, num_messages: int = 1, timeout: float | None = None) -> list[ConsumerRecord]:
        """Up to ``num_messages`` records; returns early with what is there once any
        arrived, or empty after ``timeout`` seconds (None = wait indefinitely)."""
        if self._closed:
            raise SparklogError("consumer is closed")
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0)
        self._last_poll = time.monotonic()
        while True:
            if self._subscription:
                self._ensure_group(deadline)
            out = self._take(num_messages)
            if out:
                self._prefetch()
                self._maybe_auto_commit()
                return out
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                self._maybe_auto_commit()
                return []
            self._fetch_wait(left)

    def _take(self, n: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        for st in self._assignment.values():
            if st.paused or not st.records:
                continue
            recs = st.records
            while recs and len(out) < n:
                r = recs.popleft()
                out.append(r)
                st.position = r.offset + 1
            if len(out) >= n:
                break
        return out

    def _discard_inflight(self) -> None:
        fut = self._fetch_future
        self._fetch_future = None
        if fut is not None and not fut.done():
            fut.cancel()
        for st in self._assignment.values():
            if not st.records:
                st.fetch_offset = st.position

    def _prefetch(self) -> None:
        if self._fetch_future is None and self._assignment:
            self._fetch_future = self._thread.submit(self._fetch_round())

    def _fetch_wait(self, left: float | None) -> None:
        if self._fetch_future is None:
            if not self._assignment:
                time.sleep(min(left if left is not None else 0.1, 0.1))
                return
            self._fetch_future = self._thread.submit(self._fetch_round())
        fut = self._fetch_future
        try:
            fut.result(timeout=left if left is None else max(left, 0.001))
        except concurrent.futures.TimeoutError:
            return
        except concurrent.futures.CancelledError:
            self._fetch_future = None
            return
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            log.debug("fetch failed, retrying: %s", e)
        except KafkaError as e:
            if not e.retriable:
                raise
            log.debug("fetch failed, retrying: %s", e)
        finally:
            if fut.done():
                self._fetch_future = None

    async def _fetch_round(self) -> None:
        """One Fetch per leader for every fetchable partition without buffered records."""
        # the caller's thread may rebalance meanwhile: work on a snapshot
        assignment = dict(self._assignment)
        tps = [tp for tp, st in assignment.items() if not st.paused and not st.records]
        if not tps:
            await asyncio.sleep(0.01)
            return
        await self._init_positions([tp for tp in tps if assignment[tp].fetch_offset is None])
        tps = [tp for tp in tps if assignment[tp].fetch_offset is not None]
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            try:
                leader = await self._client.leader_id(tp)
            except KafkaError as e:  # skipped this round; the next poll asks again
                log.debug("no leader for %s: %s", tp, e)
                continue
            by_leader.setdefault(leader, []).append(tp)
        if not by_leader:
            await asyncio.sleep(self._client.config.retry_backoff_ms / 1000)
            return
        await asyncio.gather(*(self._fetch_leader(node, ps) for node, ps in by_leader.items()))

    async def _fetch_leader(self, node: int, tps: list[TopicPartition]) -> None:
        states = {tp: self._assignment.get(tp) for tp in tps}
        tps = [tp for tp in tps if states[tp] is not None]
        offsets = {tp: states[tp].fetch_offset for tp in tps}  # type: ignore[union-attr]
        topics: dict[str, list] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(FetchRequest.FetchPartition(
                partition=tp.partition, fetch_offset=offsets[tp],
                partition_max_bytes=self.max_partition_fetch_bytes))
        req = FetchRequest(
            replica_id=-1, max_wait_ms=self.fetch_max_wait_ms, min_bytes=self.fetch_min_bytes,
            max_bytes=self.fetch_max_bytes, isolation_level=self.isolation_level,
            session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()])
        try:
            resp = await self._client.send_node(
                node, req, timeout_ms=self._timeout_ms + self.fetch_max_wait_ms)
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            log.debug("fetch from node %d failed: %s", node, e)
            self._client.invalidate()
            await asyncio.sleep(self._client.config.retry_backoff_ms / 1000)
            return
        for t in resp.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                st = self._assignment.get(tp)
                if st is None or st is not states.get(tp) or st.fetch_offset != offsets.get(tp):
                    continue  # reassigned or seeked meanwhile
                await self._handle_partition(tp, st, p)

    async def _handle_partition(self, tp: TopicPartition, st: _PartState, p: Any) -> None:
        if p.error_code:
            code = ErrorCode.for_code(p.error_code)
            if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                if self.auto_offset_reset in ("earliest", "latest"):
                    log.info("%s-%d: offset %s out of range, resetting to %s", tp.topic,
                             tp.partition, st.fetch_offset, self.auto_offset_reset)
                    st.fetch_offset = None
                    await self._init_positions([tp], use_committed=False)
                    return
                raise OffsetOutOfRangeError(
                    f"{tp.topic}-{tp.partition}: offset {st.fetch_offset} is out of range "
                    f"[{p.log_start_offset}, {p.high_watermark})")
            if code in STALE_METADATA or ErrorCode.for_code(code).retriable:
                self._client.invalidate()
                return
            raise error_for_code(code, f"fetch {tp.topic}-{tp.partition}")
        st.high_watermark = p.high_watermark
        st.log_start = p.log_start_offset
        st.last_stable = p.last_stable_offset
        aborted = [(a.producer_id, a.first_offset) for a in (p.aborted_transactions or [])]
        dec = decode_fetched(p.records, topic=tp.topic, partition=tp.partition,
                             start_offset=st.fetch_offset, read_committed=self.isolation_level == 1,
                             aborted=aborted, include_headers=True, verify_crc=self.check_crcs)
        st.records.extend(_to_records(dec.batch))
        if dec.next_offset > st.fetch_offset:  # type: ignore[operator]
            st.fetch_offset = dec.next_offset

    async def _init_positions(self, tps: list[TopicPartition], use_committed: bool = True) -> None:
        """Committed offset (group) else auto.offset.reset, for partitions without one."""
        states = {tp: self._assignment.get(tp) for tp in tps}
        tps = [tp for tp in tps if states[tp] is not None]
        if not tps:
            return
        committed: dict[TopicPartition, int] = {}
        if use_committed and self.group_id:
            conn = await self._coord()
            committed = await fetch_committed(self._client, conn, self.group_id, tps)
        reset: dict[TopicPartition, int] = {}
        for tp in tps:
            off = committed.get(tp, -1)
            st = states[tp]
            assert st is not None
            if off is not None and off >= 0:
                st.position = st.fetch_offset = off
            else:
                if self.auto_offset_reset not in ("earliest", "latest"):
                    raise OffsetOutOfRangeError(
                        f"{tp.topic}-{tp.partition}: no committed offset and "
                        f"auto.offset.reset={self.auto_offset_reset}")
                reset[tp] = EARLIEST if self.auto_offset_reset == "earliest" else LATEST
        if reset:
            res = await list_offsets(self._client, reset, self.isolation_level)
            for tp, (off, _ts) in res.items():
                st = states.get(tp)
                if st is not None and st.fetch_offset is None:
                    st.position = st.fetch_offset = off

    def _maybe_auto_commit(self, force: bool = False) -> None:
        if not (self.group_id and self.enable_auto_commit and self._assignment):
            return
        now = time.monotonic()
        if not force and (now - self._last_commit) * 1000 < self.auto_commit_interval_ms:
            return
        self._last_commit = now
        offs = {tp: st.position for tp, st in self._assignment.items() if st.position is not None}
        if not offs:
            return
        fut = self._thread.submit(self._commit(offs))
        if force:
            try:
                fut.result(self._timeout_ms / 1000)
            except Exception as e:
                log.warning("auto-commit failed: %s", e)
        else:
            fut.add_done_callback(_log_async_commit)

    # ------------------------------------------------------------------ group membership

    async def _coord(self) -> BrokerConnection:
        if self._coordinator is None or not self._coordinator.connected:
            self._coordinator = await find_coordinator(self._client, self.group_id)  # type: ignore[arg-type]
        return self._coordinator

    def _ensure_group(self, deadline: float | None) -> None:
        """Join/sync runs on the I/O thread; this waits for it only until ``deadline`` (a
        poll returns empty while the group is still forming) and applies the result with
        the callbacks on the caller's thread."""
        if self._hb_error is not None:
            err, self._hb_error = self._hb_error, None
            log.info("group %s: %s; rejoining", self.group_id, err)
            self._need_rejoin = True
        while True:
            if self._join_future is None:
                if not self._need_rejoin and self._generation >= 0:
                    return
                self._join_future = self._thread.submit(self._join_and_sync(self._pre_join()))
            fut = self._join_future
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                assigned, protocol = fut.result(timeout=left)
            except concurrent.futures.TimeoutError:
                return  # still joining; the next poll keeps waiting
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as e:
                self._join_future = None
                self._joining = False
                self._need_rejoin = True
                if not getattr(e, "retriable", False) and getattr(e, "error_code", None) not in (
                        ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                        ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.MEMBER_ID_REQUIRED):
                    raise
                log.debug("join of group %s failed, retrying: %s", self.group_id, e)
                self._coordinator = None
                if deadline is not None and time.monotonic() >= deadline:
                    return
                time.sleep(self._client.config.retry_backoff_ms / 1000)
                continue
            self._join_future = None
            self._joining = False
            self._apply_assignment(assigned, protocol)

    def _cooperative(self) -> bool:
        return self._protocol == "cooperative-sticky"

    def _pre_join(self) -> list[TopicPartition]:
        """What to report as owned when joining; the eager protocol revokes everything
        first (committing positions), the cooperative one keeps its partitions."""
        self._joining = True  # before the epoch bump: _heartbeat_loop reads them the other way
        self._join_epoch += 1
        owned = list(self._assignment)
        if not self._cooperative() and owned and self._generation >= 0:
            self._maybe_auto_commit(force=True)
            self._revoke(owned)
            owned = []
        self._need_rejoin = False
        return owned

    def _apply_assignment(self, assigned: list[TopicPartition], protocol: str) -> None:
        self._protocol = protocol
        current = set(self._assignment)
        new = set(assigned)
        revoked = sorted(current - new)
        added = sorted(new - current)
        if revoked:
            self._maybe_auto_commit(force=True)
            self._revoke(revoked)
        for tp in added:
            self._assignment[tp] = _PartState()
        self._discard_inflight()
        if self._on_assign is not None:
            try:
                self._on_assign(self, added if self._cooperative() else sorted(new))
            except Exception:
                log.exception("on_assign callback failed")
        if self._cooperative() and revoked:
            self._need_rejoin = True  # hand the revoked partitions over in a second round
        self._start_heartbeat()

    def _revoke(self, tps: list[TopicPartition]) -> None:
        if self._on_revoke is not None and tps:
            try:
                self._on_revoke(self, tps)
            except Exception:
                log.exception("on_revoke callback failed")
        for tp in tps:
            self._assignment.pop(tp, None)
        self._discard_inflight()

    async def _join_and_sync(self, owned: list[TopicPartition]) -> tuple[list[TopicPartition], str]:
        conn = await self._coord()
        topics = self._subscription
        await self._client.refresh_metadata(topics)
        sub = Subscription(list(topics), None, owned, self._generation)
        protocols = [JoinGroupRequest.JoinGroupRequestProtocol(
            name=s, metadata=encode_subscription(sub, 1)) for s in self.strategies]
        while True:
            req = JoinGroupRequest(
                group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.max_poll_interval_ms, member_id=self._member_id,
                group_instance_id=self.group_instance_id, protocol_type="consumer",
                protocols=protocols)
            resp = await self._client.send(conn, req,
                                           timeout_ms=self.max_poll_interval_ms + 5000)
            if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self._member_id = resp.member_id
                continue
            if resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                self._member_id = ""
            if resp.error_code:
                if resp.error_code in (ErrorCode.NOT_COORDINATOR,
                                       ErrorCode.COORDINATOR_NOT_AVAILABLE):
                    self._coordinator = None
                raise error_for_code(resp.error_code, f"JoinGroup {self.group_id!r}")
            break
        self._member_id = resp.member_id
        self._generation = resp.generation_id
        protocol = resp.protocol_name
        assignments = []
        if resp.leader == resp.member_id:
            members = {m.member_id: decode_subscription(m.metadata) for m in resp.members}
            all_topics = sorted({t for s in members.values() for t in s.topics})
            await self._client.refresh_metadata(all_topics)
            counts = {t: self._client.metadata.partition_count(t) or 0 for t in all_topics}
            plan = assign(protocol, members, counts)
            assignments = [SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=m, assignment=encode_assignment(tps)) for m, tps in plan.items()]
        sreq = SyncGroupRequest(group_id=self.group_id, generation_id=self._generation,
                                member_id=self._member_id,
                                group_instance_id=self.group_instance_id,
                                protocol_type="consumer", protocol_name=protocol,
                                assignments=assignments)
        sresp = await self._client.send(conn, sreq, timeout_ms=self.max_poll_interval_ms + 5000)
        if sresp.error_code:
            if sresp.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                self._member_id = "" if sresp.error_code == ErrorCode.UNKNOWN_MEMBER_ID \
                    else self._member_id
            raise error_for_code(sresp.error_code, f"SyncGroup {self.group_id!r}")
        return decode_assignment(sresp.assignment), protocol

    def _start_heartbeat(self) -> None:
        if self._hb_task is None or self._hb_task.done():
            self._hb_task = self._thread.submit(self._heartbeat_loop())

    async def _heartbeat_loop(self) -> None:
        """Heartbeats of the current generation only. While a join runs, the old
        generation's heartbeats can only say REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION;
        acting on such an answer after the join completed would rejoin a stable group (our
        subscription carries the generation, so the coordinator sees new metadata and
        rebalances again), and the members would keep rebalancing each other forever.
        So none are sent during a join (the coordinator keeps members blocked in
        JoinGroup/SyncGroup alive), and an answer to one sent before a join started is
        dropped, as the Java client drops heartbeat errors of a stale generation."""
        while not self._closed and self._subscription:
            await asyncio.sleep(self.heartbeat_interval_ms / 1000)
            epoch = self._join_epoch
            if self._generation < 0 or self._need_rejoin or self._joining:
                continue
            if (time.monotonic() - self._last_poll) * 1000 > self.max_poll_interval_ms:
                log.warning("max.poll.interval.ms exceeded: leaving group %s", self.group_id)
                await self._leave_group()
                self._hb_error = KafkaError("max.poll.interval.ms exceeded")
                continue
            try:
                conn = await self._coord()
                resp = await self._client.send(conn, HeartbeatRequest(
                    group_id=self.group_id, generation_id=self._generation,
                    member_id=self._member_id, group_instance_id=self.group_instance_id))
            except (KafkaConnectionError, KafkaTimeoutError, KafkaError) as e:
                self._coordinator = None
                log.debug("heartbeat failed: %s", e)
                continue
            code = resp.error_code
            if code == 0:
                continue
            if self._joining or epoch != self._join_epoch:
                log.debug("group %s: ignoring %s from a heartbeat sent before the last join",
                          self.group_id, ErrorCode.for_code(code).name)
                continue
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                self._need_rejoin = True
            elif code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                          ErrorCode.FENCED_INSTANCE_ID):
                if code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self._member_id = ""
                self._generation = -1
                self._hb_error = error_for_code(code, "heartbeat")
            elif code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self._coordinator = None

    async def _leave_group(self) -> None:
        if not self._member_id or self.group_instance_id:
            return
        try:
            conn = await self._coord()
            await self._client.send(conn, LeaveGroupRequest(
                group_id=self.group_id, member_id=self._member_id,
                members=[LeaveGroupRequest.MemberIdentity(member_id=self._member_id)]))
        except (KafkaConnectionError, KafkaTimeoutError, KafkaError) as e:
            log.debug("LeaveGroup failed: %s", e)
        self._member_id = ""
        self._generation = -1

    # ------------------------------------------------------------------ Arrow path

    def fetch_arrow(self, tp: TopicPartition, start_offset: int, end_offset: int | None = None,
                    *, max_bytes: int = 50 * 2**20, isolation_level: str = "read_uncommitted",
                    timeout_ms: int = 30000, include_headers: bool = True) -> pa.RecordBatch:
        """Records start_offset <= offset < end_offset of one partition from ONE Fetch, as
        Arrow columns (key, value, topic, partition, offset, timestamp, timestampType,
        headers). May return fewer rows than asked: loop on the last offset + 1. Schema
        metadata ``next_offset`` says how far the fetched batches reached (useful when
        only control/aborted batches came back)."""
        return self._run(self._fetch_arrow(
            TopicPartition(tp[0], tp[1]), start_offset, end_offset, max_bytes,
            _isolation(isolation_level), timeout_ms, include_headers), timeout_ms)

    async def _fetch_partition_raw(self, tp: TopicPartition, start: int, max_bytes: int,
                                   isolation: int, timeout_ms: int, max_wait_ms: int) -> Any:
        deadline = time.monotonic() + timeout_ms / 1000
        delay = self._client.config.retry_backoff_ms / 1000
        while True:
            try:
                conn = await self._client.leader_connection(tp)
                req = FetchRequest(
                    replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                    isolation_level=isolation, session_id=0, session_epoch=-1,
                    topics=[FetchRequest.FetchTopic(topic=tp.topic, partitions=[
                        FetchRequest.FetchPartition(partition=tp.partition, fetch_offset=start,
                                                    partition_max_bytes=max_bytes)])])
                resp = await self._client.send(conn, req, timeout_ms=timeout_ms + max_wait_ms)
                p = resp.responses[0].partitions[0]
                if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    err = OffsetOutOfRangeError(
                        f"{tp.topic}-{tp.partition}: offset {start} is out of range "
                        f"[{p.log_start_offset}, {p.high_watermark})")
                    err.log_start_offset = p.log_start_offset  # type: ignore[attr-defined]
                    err.high_watermark = p.high_watermark  # type: ignore[attr-defined]
                    raise err
                if p.error_code:
                    raise error_for_code(p.error_code, f"fetch {tp.topic}-{tp.partition}: "
                                         f"{ErrorCode.for_code(p.error_code).name}")
                return p
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as e:
                if isinstance(e, OffsetOutOfRangeError) or not getattr(e, "retriable", False) \
                        or time.monotonic() + delay > deadline:
                    raise
                self._client.invalidate()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def _fetch_arrow(self, tp: TopicPartition, start: int, end: int | None,
                           max_bytes: int, isolation: int, timeout_ms: int,
                           include_headers: bool) -> pa.RecordBatch:
        p = await self._fetch_partition_raw(tp, start, max_bytes, isolation, timeout_ms,
                                            min(self.fetch_max_wait_ms, timeout_ms))
        limit = p.last_stable_offset if isolation == 1 and p.last_stable_offset >= 0 \
            else p.high_watermark
        if end is None or (limit >= 0 and end > limit):
            end = limit if limit >= 0 else end
        aborted = [(a.producer_id, a.first_offset) for a in (p.aborted_transactions or [])]
        dec = decode_fetched(p.records, topic=tp.topic, partition=tp.partition,
                             start_offset=start, end_offset=end, read_committed=isolation == 1,
                             aborted=aborted, include_headers=include_headers,
                             verify_crc=self.check_crcs)
        meta = {b"next_offset": str(dec.next_offset).encode(),
                b"high_watermark": str(p.high_watermark).encode(),
                b"log_start_offset": str(p.log_start_offset).encode(),
                b"last_stable_offset": str(p.last_stable_offset).encode()}
        return dec.batch.replace_schema_metadata(meta)

    def fetch_batch_sizes(self, tp: TopicPartition, start_offset: int, *,
                          max_bytes: int = 50 * 2**20, timeout_ms: int = 30000,
                          isolation_level: str = "read_uncommitted") -> list[tuple[int, int]]:
        """(next_offset, size in bytes) of the whole batches one Fetch returns from
        ``start_offset`` (batch headers only, nothing decoded)."""
        tp = TopicPartition(tp[0], tp[1])

        async def go() -> list[tuple[int, int]]:
            p = await self._fetch_partition_raw(tp, start_offset, max_bytes,
                                                _isolation(isolation_level), timeout_ms, 0)
            return [(nxt, size) for _base, nxt, size in batch_sizes(p.records or b"")
                    if nxt > start_offset]

        return self._run(go(), timeout_ms)

    # ------------------------------------------------------------------ misc

    def list_topics(self, topic: str | None = None, timeout: float | None = None) -> dict:
        return self._run(self._client.refresh_metadata(None if topic is None else [topic],
                                                       allow_auto_create=False))

    @property
    def member_id(self) -> str:
        return self._member_id

    def close(self) -> None:
        if self._closed:
            return
        if self._join_future is not None:
            self._join_future.cancel()
            self._join_future = None
        try:
            if self._subscription:
                if self._generation >= 0:
                    self._maybe_auto_commit(force=True)
                    self._revoke(list(self._assignment))
                # mid-join too: the coordinator has known the member id since the first
                # JoinGroup, and would keep it until the session times out
                self._run(self._leave_group(), timeout_ms=5000)
            elif self.group_id and self.enable_auto_commit and self._assignment:
                self._maybe_auto_commit(force=True)
        except Exception as e:
            log.debug("close: %s", e)
        finally:
            self._closed = True
            self._discard_inflight()
            try:
                self._thread.run(self._client.close(), timeout=5)
            except Exception:
                pass
            self._thread.stop()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _strategy_name(s: str) -> str:
    s = s.strip()
    low = s.lower()
    if "cooperativesticky" in low or low == "cooperative-sticky":
        return "cooperative-sticky"
    if "roundrobin" in low:
        return "roundrobin"
    if "range" in low:
        return "range"
    if "sticky" in low:
        return "sticky"
    raise ValueError(f"unknown partition.assignment.strategy {s!r}")


def _log_async_commit(fut: concurrent.futures.Future) -> None:
    if fut.cancelled():
        return
    exc = fut.exception()
    if exc is not None:
        log.warning("offset commit failed: %s", exc)


def _to_records(batch: pa.RecordBatch) -> list[ConsumerRecord]:
    n = batch.num_rows
    if n == 0:
        return []
    topic = batch.column(2)[0].as_py()
    part = batch.column(3)[0].as_py()
    keys = batch.column(0).to_pylist()
    vals = batch.column(1).to_pylist()
    offs = batch.column(4).to_pylist()
    ts = batch.column(5).cast(pa.int64()).to_pylist()
    tst = batch.column(6).to_pylist()
    hcol = batch.column(7)
    if hcol.offsets[-1].as_py() == 0:
        return [ConsumerRecord(topic, part, o, t, y, k, v, [])
                for k, v, o, t, y in zip(keys, vals, offs, ts, tst, strict=True)]
    hs = [[(h["key"], h["value"]) for h in row] for row in hcol.to_pylist()]
    return [ConsumerRecord(topic, part, o, t, y, k, v, h)
            for k, v, o, t, y, h in zip(keys, vals, offs, ts, tst, hs, strict=True)]


_ = uuid  # member ids come from the coordinator (KIP-394)
