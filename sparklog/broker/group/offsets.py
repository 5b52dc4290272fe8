"""Committed offsets: OffsetCommit, TxnOffsetCommit and OffsetFetch, tombstones for deleted
topics and groups, and retention (KIP-211).

An offset is acknowledged only once its record is in the group's ``__consumer_offsets``
partition; a write that fails leaves memory as it was and answers COORDINATOR_NOT_AVAILABLE
for the partitions it carried (as Kafka does). Removals write their tombstones first too.
Offsets committed in a transaction are written as that producer's transactional records and
held in ``Group.pending_txn_offsets`` (OffsetFetch does not see them) until the
transaction's marker reaches the partition (``complete_txn``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from sparklog.broker.group.membership import Membership
from sparklog.broker.group.model import Group, GroupState, TimerHandle
from sparklog.broker.group.records import OffsetAndMetadata
from sparklog.broker.group.registry import GroupRegistry
from sparklog.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class OffsetManager:
    """The offsets of the groups in ``registry``; a member's commit also renews its session."""

    def __init__(self, registry: GroupRegistry, membership: Membership) -> None:
        self._registry = registry
        self._membership = membership
        self.groups = registry.groups
        self.config = registry.config
        self.clock = registry.clock
        self._retention_timer: TimerHandle | None = None

    # ------------------------------------------------------------------ commit / fetch

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       group_instance_id: str | None,
                       offsets: dict[TopicPartition, OffsetAndMetadata],
                       retention_time_ms: int = -1) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit. Generation -1 with an empty member id is a standalone commit."""

        def all_(err: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return {tp: err for tp in offsets}

        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # The group is not known, so its generation cannot be either.
                return all_(ErrorCode.ILLEGAL_GENERATION)
            group = self._registry.create(group_id)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return all_(ErrorCode.FENCED_INSTANCE_ID)
        if not (generation_id < 0 and group.is_(GroupState.EMPTY)):
            if not group.has_member(member_id):
                return all_(ErrorCode.UNKNOWN_MEMBER_ID)
            if generation_id != group.generation_id:
                return all_(ErrorCode.ILLEGAL_GENERATION)
            if group.is_(GroupState.COMPLETING_REBALANCE):
                return all_(ErrorCode.REBALANCE_IN_PROGRESS)
            self._membership.schedule_session_timeout(group, group.members[member_id])
        return self._store_offsets(group, offsets, retention_time_ms)

    def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                           generation_id: int, member_id: str, group_instance_id: str | None,
                           offsets: dict[TopicPartition, OffsetAndMetadata]
                           ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: ``offsets`` join the producer's transaction. A request naming a
        member (KIP-447) is checked like OffsetCommit; one without is not."""
        group = self.groups.get(group_id) or self._registry.create(group_id)
        if generation_id >= 0 or member_id or group_instance_id is not None:
            err = ErrorCode.NONE
            if group.is_static_member_fenced(member_id, group_instance_id):
                err = ErrorCode.FENCED_INSTANCE_ID
            elif not group.has_member(member_id):
                err = ErrorCode.UNKNOWN_MEMBER_ID
            elif generation_id != group.generation_id:
                err = ErrorCode.ILLEGAL_GENERATION
            if err != ErrorCode.NONE:
                return {tp: err for tp in offsets}
        return self._store_offsets(group, offsets, -1, (producer_id, producer_epoch))

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """The producer's marker reached offsets partition ``partition``: its pending
        offsets there become the groups' committed offsets, or are dropped."""
        for g in self.groups.values():
            if producer_id in g.pending_txn_offsets and \
                    self._registry.store.partition_for(g.group_id) == partition:
                done = g.pending_txn_offsets.pop(producer_id)
                if commit:
                    g.offsets.update(done)

    def _store_offsets(self, group: Group, offsets: dict[TopicPartition, OffsetAndMetadata],
                       retention_time_ms: int, producer: tuple[int, int] | None = None
                       ) -> dict[TopicPartition, ErrorCode]:
        now = self.clock.now_ms()
        result: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        expire = now + retention_time_ms if retention_time_ms > 0 else None
        for tp, om in offsets.items():
            if len(om.metadata.encode()) > self.config.offset_metadata_max_bytes:
                result[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            accepted[tp] = OffsetAndMetadata(om.offset, om.leader_epoch, om.metadata or "",
                                             now, expire)
            result[tp] = ErrorCode.NONE
        if accepted:
            try:
                self._registry.store.store_offsets(group.group_id, accepted, now, producer)
            except KafkaError as exc:  # e.g. a fenced producer's epoch, refused by the log
                for tp in accepted:
                    result[tp] = exc.error_code
                return result
            except Exception:  # noqa: BLE001 - reported per partition, as Kafka does
                log.exception("group %s: writing offsets failed", group.group_id)
                for tp in accepted:
                    result[tp] = ErrorCode.COORDINATOR_NOT_AVAILABLE
                return result
            if producer is None:
                group.offsets.update(accepted)
            else:
                group.pending_txn_offsets.setdefault(producer[0], {}).update(accepted)
        return result

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """OffsetFetch. ``partitions=None`` means every partition the group committed."""
        group = self.groups.get(group_id)
        offsets = {} if group is None else group.offsets
        if partitions is None:
            return dict(sorted(offsets.items()))
        return {tp: offsets.get(tp) for tp in partitions}

    # ------------------------------------------------------------------ removal

    def remove(self, group: Group, partitions: list[TopicPartition], *, drop_group: bool,
               why: str) -> bool:
        """Tombstone ``partitions`` of ``group`` (and the group itself with ``drop_group``),
        then forget them; False, with nothing forgotten, when the write failed."""
        try:
            self._registry.store.delete_offsets(group.group_id, partitions, self.clock.now_ms(),
                                                delete_group=drop_group)
        except Exception:  # noqa: BLE001 - the caller answers or retries on its next pass
            log.exception("group %s: writing %s tombstones failed", group.group_id, why)
            return False
        for tp in partitions:
            del group.offsets[tp]
        if drop_group:
            self._registry.drop(group)
        return True

    def remove_topic_offsets(self, topics: Iterable[str]) -> int:
        """Forget committed offsets of deleted topics (tombstoned, as Kafka does), so a
        topic re-created under the same name does not inherit stale positions."""
        gone = set(topics)
        total = 0
        for g in list(self.groups.values()):
            dead = [tp for tp in g.offsets if tp[0] in gone]
            if not dead:
                continue
            drop_group = (g.is_(GroupState.EMPTY) and not g.members
                          and len(dead) == len(g.offsets))
            # a failure is retried implicitly by the next deletion or expiry
            if self.remove(g, dead, drop_group=drop_group, why="deleted-topic"):
                total += len(dead)
        if total:
            log.info("removed %d committed offsets of deleted topics %s", total, sorted(gone))
        return total

    # ------------------------------------------------------------------ retention

    def start_retention(self) -> None:
        """Check for expired offsets every ``offsets.retention.check.interval.ms``."""
        if self._retention_timer is not None or self._registry.closed:
            return
        try:
            self._retention_timer = self.clock.call_later(
                self.config.offsets_retention_check_interval_ms, self._on_retention_timer)
        except RuntimeError:  # no running loop (synchronous load in a tool)
            self._retention_timer = None

    def stop_retention(self) -> None:
        if self._retention_timer is not None:
            self._retention_timer.cancel()
            self._retention_timer = None

    def _on_retention_timer(self) -> None:
        self._retention_timer = None
        try:
            self.expire_offsets()
        finally:
            self.start_retention()

    def expire_offsets(self) -> int:
        """Drop offsets past ``offsets.retention.minutes`` (KIP-211); returns how many.

        A consumer group's offsets age from the moment it became Empty; a group that never
        had members (standalone commits) ages each offset from its own commit time.  Groups
        left Empty with no offsets die and their metadata is tombstoned.
        """
        now = self.clock.now_ms()
        retention = self.config.offsets_retention_ms
        total = 0
        for g in list(self.groups.values()):
            if not g.is_(GroupState.EMPTY):
                continue
            expired = []
            for tp, om in g.offsets.items():
                if om.expire_timestamp is not None:
                    deadline = om.expire_timestamp
                elif g.protocol_type is not None and g.state_timestamp_ms is not None:
                    deadline = max(g.state_timestamp_ms, 0) + retention
                else:
                    deadline = om.commit_timestamp + retention
                if deadline <= now:
                    expired.append(tp)
            drop_group = len(expired) == len(g.offsets)
            if not expired and not drop_group:
                continue
            if self.remove(g, expired, drop_group=drop_group, why="expiry"):
                total += len(expired)
        if total:
            log.info("expired %d committed offsets", total)
        return total
