"""The partitions this broker hosts (``broker.partition.Partition``), keyed by topic and
partition, and the replication work that spans them.

The controller's partition records arrive through ``apply_partition_state`` (in commit
order); each makes the hosted replica leader or follower (``Partition.apply``) and tells the
role listeners (the replica fetchers, the group coordinator) when a leadership or leader
epoch changed. Only a leader accepts produce and consumer fetches; followers' Fetch requests
(replica id >= 0) report their LEO here (``record_follower_fetch``), which moves the HW and
may bring the follower back into the ISR.

ISR changes go to the controller with ``alter_partition`` (AlterPartition): a follower that
has not caught up for ``replica.lag.time.max.ms`` is dropped (``maybe_shrink_isr``, run
periodically by the broker), one that caught up is added back. While a change is in flight
(``Partition.pending_isr``, one per partition) the HW respects both ISRs; the change takes
effect when the committed record comes back (a refused one is retried on the next check).
A controller in another process answers through a future: the answer is handled on the
broker's loop when it arrives, so a slow or unreachable controller never stalls the
clients this broker serves (an in-process controller answers at once).
Clients that send a leader epoch are checked against ours (FENCED_LEADER_EPOCH when theirs
is older, UNKNOWN_LEADER_EPOCH when newer), exactly as Kafka does. Internal topics refuse
client produce; the broker's own coordinators write them with ``append_internal``.

The invariants (HW <= every ISR member's LEO; the HW never goes back on a leader; an acked
acks=all record is on every ISR member; a leader epoch is never reused) are stated and kept
in ``broker.partition``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sparklog.broker.acks import AcksAllWait
from sparklog.broker.controller_channel import AlterPartitionAnswer
from sparklog.broker.metadata_cache import PartitionInfo
from sparklog.broker.partition import Partition, Transition
from sparklog.protocol.errors import (
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from sparklog.storage.partition_log import PartitionLog

log = logging.getLogger(__name__)

__all__ = ["AlterPartition", "AppendResult", "Logs", "ReplicaManager", "RoleListener"]

Records = bytes | bytearray | memoryview

RoleListener = Callable[[Partition, bool], None]
"""Called with (partition, still hosted) when a hosted partition's leader or leader epoch
changed (it became leader or follower) and, with False, when it stops being hosted here."""

# a refused or failed AlterPartition is tried again after this long at the earliest
ISR_RETRY_MS = 500


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(slots=True)
class AppendResult:
    error: KafkaError | None = None
    base_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    leader_epoch: int = -1  # the epoch the batch was appended in (acks=all waits under it)


class Logs(Protocol):
    """Where hosted replicas' logs come from (the broker: it knows each topic's config)."""

    def open_log(self, topic: str, partition: int, topic_id: bytes) -> PartitionLog: ...

    def close_log(self, topic: str, partition: int, *, delete: bool) -> None: ...


class AlterPartition(Protocol):
    """The controller write that changes an ISR (the broker's ``ControllerChannel``)."""

    def alter_partition(self, node_id: int, broker_epoch: int, topic: str, partition: int,
                        leader_epoch: int, partition_epoch: int,
                        isr: list[int]) -> AlterPartitionAnswer: ...


class ReplicaManager:
    """The partitions this broker hosts, keyed by (topic, partition).

    ``isr_channel`` None means ISR changes are never proposed (tools, unit tests)."""

    def __init__(self, node_id: int, logs: Logs, isr_channel: AlterPartition | None = None, *,
                 replica_lag_time_max_ms: int = 30_000,
                 time_ms: Callable[[], int] = _monotonic_ms) -> None:
        self.node_id = node_id
        self._logs = logs
        self._isr_channel = isr_channel
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._time_ms = time_ms
        # given by the controller at registration; sent with every AlterPartition
        self.broker_epoch = -1
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._by_topic: dict[str, dict[int, Partition]] = {}
        # partitions whose log could not be opened -> why (clients get KAFKA_STORAGE_ERROR)
        self._offline: dict[tuple[str, int], str] = {}
        self._role_listeners: list[RoleListener] = []
        self._isr_retry_at: dict[tuple[str, int], int] = {}

    def add_role_listener(self, fn: RoleListener) -> None:
        self._role_listeners.append(fn)

    def _roles_changed(self, p: Partition, hosted: bool) -> None:
        for fn in self._role_listeners:
            fn(p, hosted)

    # -- lookups ------------------------------------------------------------------------

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def get(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def leader_partition(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Partition:
        """The partition if this broker leads it; typed Kafka errors otherwise."""
        p = self._partitions.get((topic, partition))
        if p is None:
            raise self._not_hosted(topic, partition)
        if not p.is_leader:
            raise NotLeaderOrFollowerError(f"{topic}-{partition}: this broker is not the leader")
        p.check_epoch(current_leader_epoch)
        return p

    def hosted_partition(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Partition:
        p = self._partitions.get((topic, partition))
        if p is None:
            raise self._not_hosted(topic, partition)
        p.check_epoch(current_leader_epoch)
        return p

    def _not_hosted(self, topic: str, partition: int) -> KafkaError:
        offline = self._offline.get((topic, partition))
        if offline is not None:
            return KafkaStorageError(f"{topic}-{partition} is offline: {offline}")
        return UnknownTopicOrPartitionError(f"{topic}-{partition} is not hosted here")

    # -- metadata -----------------------------------------------------------------------

    def apply_partition_state(self, topic: str, topic_id: bytes, partition: int, leader: int,
                              leader_epoch: int, partition_epoch: int, replicas: list[int],
                              isr: list[int], *, internal: bool = False) -> Partition | None:
        """Become leader or follower for a partition as the metadata says (creating its log)."""
        if self.node_id not in replicas:
            self.remove(topic, partition, delete=True)
            return None
        key = (topic, partition)
        p = self._partitions.get(key)
        if p is None:
            try:
                plog = self._logs.open_log(topic, partition, topic_id)
            except KafkaStorageError as exc:
                # damage storage could not repair: this partition stays offline, the rest serve
                log.error("%s-%d is offline: %s", topic, partition, exc)
                self._offline[key] = str(exc)
                return None
            self._offline.pop(key, None)
            p = Partition(topic, partition, topic_id, plog, self.node_id, internal=internal)
            self._partitions[key] = p
            self._by_topic.setdefault(topic, {})[partition] = p
        change = p.apply(leader, leader_epoch, partition_epoch, replicas, isr, self._time_ms())
        if change in (Transition.LEADER, Transition.FOLLOWER):
            self._isr_retry_at.pop(key, None)
            self._roles_changed(p, True)
        return p

    def remove(self, topic: str, partition: int, *, delete: bool) -> None:
        p = self._partitions.pop((topic, partition), None)
        if self._offline.pop((topic, partition), None) is not None:
            self._logs.close_log(topic, partition, delete=delete)
        if p is None:
            return
        self._isr_retry_at.pop((topic, partition), None)
        parts = self._by_topic.get(topic)
        if parts is not None:
            parts.pop(partition, None)
            if not parts:
                del self._by_topic[topic]
        self._roles_changed(p, False)
        p.waiters.wake()
        self._logs.close_log(topic, partition, delete=delete)

    def remove_topic(self, topic: str) -> None:
        for partition in list(self._by_topic.get(topic, {})):
            self.remove(topic, partition, delete=True)

    # -- produce ------------------------------------------------------------------------

    def append(self, topic: str, partition: int, records: Records, *, acks: int) -> AppendResult:
        """Append one client produce entry as leader; errors are returned, never raised."""
        try:
            p = self._partitions.get((topic, partition))
            if p is None:
                raise self._not_hosted(topic, partition)
            if p.internal:
                raise InvalidTopicError(f"cannot append to internal topic {topic}")
            if not p.is_leader:
                raise NotLeaderOrFollowerError(f"{topic}-{partition}: this broker is not the leader")
            if acks == -1:
                # the log's config tracks the topic's overrides (AlterConfigs updates it)
                min_isr = p.log.config.min_insync_replicas
                if len(p.isr) < min_isr:
                    raise NotEnoughReplicasError(
                        f"{topic}-{partition}: ISR size {len(p.isr)} < min.insync.replicas {min_isr}"
                    )
            info = p.log.append_as_leader(records, p.leader_epoch)
            p.maybe_advance_hw()
            p.waiters.wake()
            return AppendResult(None, info.first_offset, info.last_offset, info.log_append_time,
                                p.log.log_start_offset, p.leader_epoch)
        except KafkaError as exc:
            return AppendResult(exc)

    def append_internal(self, topic: str, partition: int, batch: Records) -> AcksAllWait:
        """Append a batch this broker built (a coordinator's records) as leader; raises.
        Returns what to wait on until the ISR has it (coordinators write with acks=all).

        No client checks: the writer sets keys and timestamps itself, so the log does not
        decode the batch again. Only ``max.message.bytes`` still applies, as it does in
        Kafka."""
        p = self.leader_partition(topic, partition)
        limit = p.log.config.max_message_bytes
        if len(batch) > limit:
            raise RecordTooLargeError(
                f"{topic}-{partition}: batch of {len(batch)} bytes exceeds max.message.bytes {limit}")
        info = p.log.append_as_leader(batch, p.leader_epoch, origin="coordinator")
        p.maybe_advance_hw()
        p.waiters.wake()
        return AcksAllWait(p, info.last_offset, p.leader_epoch)

    # -- leader side of replication -----------------------------------------------------

    def record_follower_fetch(self, p: Partition, replica_id: int, fetch_offset: int) -> None:
        """A follower of ``p`` (led here) fetches from ``fetch_offset``: its LEO. The HW may
        move (parked acks=all produces and consumer fetches wake) and a follower that caught
        up is proposed back into the ISR."""
        if p.follower_fetched(replica_id, fetch_offset, self._time_ms()):
            p.waiters.wake()
        if p.can_join_isr(replica_id):
            self._alter_isr(p, p.isr + [replica_id])

    def maybe_shrink_isr(self) -> None:
        """Drop followers that have not caught up for ``replica.lag.time.max.ms`` from the
        ISR of every partition led here (the broker runs this periodically)."""
        now = self._time_ms()
        for p in list(self._partitions.values()):
            if not p.is_leader or len(p.isr) <= 1:
                continue
            out = p.out_of_sync_replicas(now, self.replica_lag_time_max_ms)
            if out:
                log.info("%s-%d: replicas %s fell behind for more than %d ms, leaving the ISR",
                         p.topic, p.partition, out, self.replica_lag_time_max_ms)
                self._alter_isr(p, [r for r in p.isr if r not in out])

    def _alter_isr(self, p: Partition, isr: list[int]) -> None:
        """Propose ``isr`` to the controller: one change in flight per partition; a refused
        one is retried by the next check after ``ISR_RETRY_MS``."""
        key = (p.topic, p.partition)
        if self._isr_channel is None or p.pending_isr is not None \
                or self._time_ms() < self._isr_retry_at.get(key, 0):
            return
        p.pending_isr = isr
        try:
            answer = self._isr_channel.alter_partition(self.node_id, self.broker_epoch, p.topic,
                                                       p.partition, p.leader_epoch,
                                                       p.partition_epoch, isr)
        except KafkaError as exc:
            self._isr_refused(p, isr, exc)
            return
        if isinstance(answer, concurrent.futures.Future):
            loop = asyncio.get_running_loop()
            answer.add_done_callback(
                lambda fut: loop.call_soon_threadsafe(self._isr_answered, p, isr, fut))
        else:
            self._isr_committed(p, isr, answer)

    def _isr_answered(self, p: Partition, isr: list[int],
                      fut: concurrent.futures.Future[PartitionInfo]) -> None:
        """The controller's later answer to proposing ``isr`` (on the broker's loop)."""
        try:
            info = fut.result()
        except KafkaError as exc:
            self._isr_refused(p, isr, exc)
        except (Exception, concurrent.futures.CancelledError) as exc:  # the channel closed
            log.warning("%s-%d: ISR change to %s failed: %r", p.topic, p.partition, isr, exc)
            self._isr_refused(p, isr, None)
        else:
            self._isr_committed(p, isr, info)

    def _isr_refused(self, p: Partition, isr: list[int], exc: KafkaError | None) -> None:
        if exc is not None:
            log.info("%s-%d: ISR change to %s refused: %s (%s)", p.topic, p.partition, isr,
                     exc.error_code.name, exc)
        self._isr_retry_at[(p.topic, p.partition)] = self._time_ms() + ISR_RETRY_MS
        if p.pending_isr is isr:
            p.pending_isr = None

    def _isr_committed(self, p: Partition, isr: list[int], info: PartitionInfo) -> None:
        if p.pending_isr is isr:
            p.pending_isr = None
        if self._partitions.get((p.topic, p.partition)) is p:
            # the committed record (the metadata feed brings it too; applying twice is a no-op)
            self.apply_partition_state(p.topic, p.topic_id, p.partition, info.leader,
                                       info.leader_epoch, info.partition_epoch, info.replicas,
                                       info.isr, internal=p.internal)
