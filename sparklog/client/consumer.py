"""The consumer: assign/seek or subscribe with a group, poll, commit.

Fetching is pipelined: while the application works through what ``poll`` returned, the next
Fetch per leader is already in flight on the I/O thread. Records are decoded per fetch
response in one vectorised pass (``arrow_decode``); the per-record API then hands out
``ConsumerRecord`` objects built from those columns. (Reading offset ranges as Arrow, with
no position or group, is ``arrow_fetch.ArrowFetcher``.)

Group membership follows the Java client's model: heartbeats run on the I/O thread, but
rebalances (JoinGroup/SyncGroup and the ``on_revoke``/``on_assign`` callbacks) happen inside
``poll()`` on the caller's thread, so callbacks may call ``commit()`` safely. The protocol
side of the membership is ``group_member.GroupMember``; this module applies what it returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from sparklog.client.arrow_decode import decode_fetched
from sparklog.client.connection import KafkaConnectionError, KafkaTimeoutError
from sparklog.client.core import STALE_METADATA, conf_bool, conf_int, parse_isolation
from sparklog.client.group_member import GroupConfig, GroupMember
from sparklog.client.group_rpc import commit_offsets, fetch_committed
from sparklog.client.list_offsets import EARLIEST, LATEST, list_offsets
from sparklog.client.sync_client import SyncClient
from sparklog.protocol.errors import (
    ErrorCode,
    KafkaError,
    OffsetOutOfRangeError,
    SparklogError,
    error_for_code,
)
from sparklog.protocol.messages.fetch import FetchRequest
from sparklog.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

__all__ = ["Consumer", "ConsumerRecord"]


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


class Consumer(SyncClient):
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
        self.isolation_level = parse_isolation(conf.get("isolation.level"))
        self.fetch_min_bytes = conf_int(conf, "fetch.min.bytes", 1)
        self.fetch_max_bytes = conf_int(conf, "fetch.max.bytes", 52428800)
        self.fetch_max_wait_ms = conf_int(conf, "fetch.max.wait.ms", 500)
        self.max_partition_fetch_bytes = conf_int(conf, "max.partition.fetch.bytes", 1048576)
        self.max_poll_records = conf_int(conf, "max.poll.records", 500)
        self.check_crcs = conf_bool(conf, "check.crcs", True)
        group_config = GroupConfig.from_conf(conf)
        super().__init__(conf, "sparklog-consumer")
        self._assignment: dict[TopicPartition, _PartState] = {}
        self._subscription: list[str] = []
        self._on_assign: Callable | None = None
        self._on_revoke: Callable | None = None
        self._on_lost: Callable | None = None
        self._fetch_future: concurrent.futures.Future | None = None
        self._last_commit = time.monotonic()
        self._group = GroupMember(self._client, self._thread, group_config,
                                  lambda: not self._closed and bool(self._subscription))
        self._join_future: concurrent.futures.Future | None = None

    # ------------------------------------------------------------------ helpers

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
        self._group.need_rejoin = True

    def subscription(self) -> list[str]:
        return list(self._subscription)

    def unsubscribe(self) -> None:
        if self._subscription and self._group.generation >= 0:
            self._revoke(list(self._assignment))
            self._run(self._group.leave())
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
            conn = await self._group.coordinator()
            return await fetch_committed(self._client, conn, self._group.config.group_id, tps)

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
        group = self._group
        conn = await group.coordinator()
        gen = group.generation if self._subscription else -1
        member = group.member_id if self._subscription else ""
        try:
            await commit_offsets(self._client, conn, group.config.group_id, offs, generation=gen,
                                 member_id=member, group_instance_id=group.config.group_instance_id)
        except KafkaError as e:
            group.on_commit_error(e.error_code)
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
        self._group.last_poll = time.monotonic()
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
                # fresh: a fetch error invalidated the cache, so a dead leader is not
                # asked again without a metadata refresh
                leader = await self._client.leader_id(tp, fresh=True)
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
        dec = decode_fetched(p.records, start_offset=st.fetch_offset,
                             read_committed=self.isolation_level == 1, aborted=aborted,
                             verify_crc=self.check_crcs)
        st.records.extend(_to_records(dec.batch, tp))
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
            conn = await self._group.coordinator()
            committed = await fetch_committed(self._client, conn, self._group.config.group_id, tps)
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

    def _ensure_group(self, deadline: float | None) -> None:
        """Join/sync runs on the I/O thread; this waits for it only until ``deadline`` (a
        poll returns empty while the group is still forming) and applies the result with
        the callbacks on the caller's thread."""
        group = self._group
        if group.heartbeat_error is not None:
            err, group.heartbeat_error = group.heartbeat_error, None
            log.info("group %s: %s; rejoining", self.group_id, err)
            group.need_rejoin = True
        while True:
            if self._join_future is None:
                if not group.need_rejoin and group.generation >= 0:
                    return
                owned = self._pre_join()
                self._join_future = self._thread.submit(
                    group.join_and_sync(self._subscription, owned))
            fut = self._join_future
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                assigned, protocol = fut.result(timeout=left)
            except concurrent.futures.TimeoutError:
                return  # still joining; the next poll keeps waiting
            except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as e:
                self._join_future = None
                group.end_join()
                group.need_rejoin = True
                if not getattr(e, "retriable", False) and getattr(e, "error_code", None) not in (
                        ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                        ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.MEMBER_ID_REQUIRED):
                    raise
                log.debug("join of group %s failed, retrying: %s", self.group_id, e)
                group.forget_coordinator()
                if deadline is not None and time.monotonic() >= deadline:
                    return
                time.sleep(self._client.config.retry_backoff_ms / 1000)
                continue
            self._join_future = None
            group.end_join()
            self._apply_assignment(assigned, protocol)

    def _cooperative(self) -> bool:
        return self._group.protocol == "cooperative-sticky"

    def _pre_join(self) -> list[TopicPartition]:
        """What to report as owned when joining; the eager protocol revokes everything
        first (committing positions), the cooperative one keeps its partitions."""
        self._group.begin_join()
        owned = list(self._assignment)
        if not self._cooperative() and owned and self._group.generation >= 0:
            self._maybe_auto_commit(force=True)
            self._revoke(owned)
            owned = []
        self._group.need_rejoin = False
        return owned

    def _apply_assignment(self, assigned: list[TopicPartition], protocol: str) -> None:
        self._group.protocol = protocol
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
            self._group.need_rejoin = True  # hand the revoked partitions over in a second round
        self._group.start_heartbeat()

    def _revoke(self, tps: list[TopicPartition]) -> None:
        if self._on_revoke is not None and tps:
            try:
                self._on_revoke(self, tps)
            except Exception:
                log.exception("on_revoke callback failed")
        for tp in tps:
            self._assignment.pop(tp, None)
        self._discard_inflight()

    # ------------------------------------------------------------------ misc

    def list_topics(self, topic: str | None = None, timeout: float | None = None) -> dict:
        return self._run(self._client.refresh_metadata(None if topic is None else [topic],
                                                       allow_auto_create=False))

    @property
    def member_id(self) -> str:
        return self._group.member_id

    def close(self) -> None:
        if self._closed:
            return
        if self._join_future is not None:
            self._join_future.cancel()
            self._join_future = None
        try:
            if self._subscription:
                if self._group.generation >= 0:
                    self._maybe_auto_commit(force=True)
                    self._revoke(list(self._assignment))
                # mid-join too: the coordinator has known the member id since the first
                # JoinGroup, and would keep it until the session times out
                self._run(self._group.leave(), timeout=10)
            elif self.group_id and self.enable_auto_commit and self._assignment:
                self._maybe_auto_commit(force=True)
        except Exception as e:
            log.debug("close: %s", e)
        finally:
            self._discard_inflight()
            super().close()


def _log_async_commit(fut: concurrent.futures.Future) -> None:
    if fut.cancelled():
        return
    exc = fut.exception()
    if exc is not None:
        log.warning("offset commit failed: %s", exc)


def _to_records(batch: pa.RecordBatch, tp: TopicPartition) -> list[ConsumerRecord]:
    """Rows of ``record_arrow.arrow_schema()`` (int64 ms timestamps) as records."""
    if batch.num_rows == 0:
        return []
    topic, part = tp
    keys, vals, offs, ts, tst = (batch.column(i).to_pylist() for i in range(5))
    hcol = batch.column(5)
    if hcol.offsets[-1].as_py() == 0:
        return [ConsumerRecord(topic, part, o, t, y, k, v, [])
                for k, v, o, t, y in zip(keys, vals, offs, ts, tst, strict=True)]
    hs = [[(h["key"], h["value"]) for h in row] for row in hcol.to_pylist()]
    return [ConsumerRecord(topic, part, o, t, y, k, v, h)
            for k, v, o, t, y, h in zip(keys, vals, offs, ts, tst, hs, strict=True)]
