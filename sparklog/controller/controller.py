"""The controller: owns cluster metadata changes, their validation, broker liveness and
leader elections.

Every topic/partition/config/registration change goes through here, is appended to the
metadata log (durably) and only then published to listeners (each broker's metadata cache,
or a controller process's metadata stream), so a broker never serves a partition the
metadata could forget. Which brokers are live (unfenced) is durable too, as Kafka's
Fence/UnfenceBrokerRecords are: a restarted controller and its brokers keep the picture
they had, and only brokers that then miss a session are fenced.

Invariants:
- a leader epoch is never reused: it grows by one on every leadership change, and the
  partition epoch by one on every change of the partition record (both durable);
- a broker epoch is never reused: every registration gets one larger than any before;
- a partition's leader is a member of its ISR or -1, and the ISR is never empty, so the
  next leader is chosen among replicas that had every acknowledged record (an unclean
  election, only when enabled, is the logged exception);
- a fenced broker leads nothing and is in no ISR it shares with another member;
- a reassignment keeps the old replicas until every target replica is in the ISR.

A broker fenced longer than ``broker.replacement.timeout.ms`` (since the wall-clock time in
its fence record, so a controller restart keeps counting) is lost for good: its replicas
are reassigned to live brokers (``replace_lost_brokers``); never fewer replicas than before.

Broker sessions exist for brokers in other processes (``heartbeat``/``check_sessions``);
the embedded broker lives and dies with the controller's process and has none.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence

from sparklog.broker.config import BrokerConfig
from sparklog.broker.controller_channel import MetadataListener
from sparklog.broker.metadata_cache import (
    MetadataImage,
    MetadataRecord,
    PartitionInfo,
    TopicInfo,
    fence_record,
    unfence_record,
)
from sparklog.controller import reassignment
from sparklog.controller.election import (
    PREFERRED_ELECTION,
    UNCLEAN_ELECTION,
    preferred_election,
    unclean_election,
    with_returning_broker,
    without_broker,
)
from sparklog.controller.metadata import (
    METADATA_DIR_NAME,
    MetadataLog,
    new_cluster_id,
    new_topic_id,
)
from sparklog.protocol.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    InvalidUpdateVersionError,
    KafkaError,
    StaleBrokerEpochError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from sparklog.protocol.topic_names import validate_topic_name
from sparklog.storage.checkpoints import topic_id_to_str

log = logging.getLogger(__name__)

__all__ = ["Controller"]

# Kafka has no hard cap, but one request must not be able to make the controller build
# billions of partition records (a flipped bit in num_partitions would): far above any
# real topic, far below what would exhaust memory.
MAX_PARTITIONS_PER_TOPIC = 100_000


def _unify(name: str) -> str:
    return name.replace(".", "_")


def _warn_unclean(p: PartitionInfo, leader: int) -> None:
    log.warning("unclean leader election for %s-%d: broker %d leads from outside the ISR %s; "
                "records only the old ISR had are lost", p.topic, p.partition, leader, p.isr)


class Controller:
    """Metadata owner of a cluster. On the single node it is also the in-process form of
    the broker's ``ControllerChannel`` (the broker gets it from
    ``sparklog.cluster.single_node`` and never imports this module); in a controller
    process ``ControllerServer`` serves it to brokers over the network."""

    def __init__(
        self,
        metadata_dir: str,
        node_id: int,
        *,
        default_partitions: int = 1,
        default_replication_factor: int = 1,
        session_timeout_ms: int = 9000,
        replacement_timeout_ms: int = 60000,
        unclean_leader_election: bool = False,
        embedded: bool = True,
    ) -> None:
        self.node_id = node_id
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self.session_timeout_s = session_timeout_ms / 1000
        self.replacement_timeout_ms = replacement_timeout_ms
        self.unclean_leader_election = unclean_leader_election
        # embedded: the controller shares its process (and node id) with a broker, which
        # places partitions on node_id until it has registered; a controller-only process
        # has no broker of its own and refuses placement with no live broker
        self.embedded = embedded
        self.metadata_dir = metadata_dir
        self._log = MetadataLog(metadata_dir)
        self._listeners: list[MetadataListener] = []
        # node id -> monotonic deadline of its session, for brokers that heartbeat (the
        # embedded broker does not: it lives and dies with this process)
        self._sessions: dict[int, float] = {}
        # wall-clock ms the metadata was opened: the fencing time of a broker whose fence
        # record has none (written before the field)
        self._opened_ms = 0
        # lost brokers no partition targets any more (re-checked after a restart)
        self._replaced: set[int] = set()
        # partitions already logged as having no live broker to move a lost replica to
        self._unplaceable: set[tuple[str, int]] = set()

    @classmethod
    def for_config(cls, config: BrokerConfig, *, embedded: bool) -> Controller:
        """The node's controller: its metadata log in ``<first log dir>/__sparklog_metadata``
        (where existing data dirs have it), defaults and liveness settings from ``config``."""
        return cls(
            os.path.join(os.path.abspath(config.log_dirs[0]), METADATA_DIR_NAME),
            config.node_id,
            default_partitions=int(config.get("num.partitions")),
            default_replication_factor=int(config.get("default.replication.factor")),
            session_timeout_ms=int(config.get("broker.session.timeout.ms")),
            replacement_timeout_ms=int(config.get("broker.replacement.timeout.ms")),
            unclean_leader_election=bool(config.get("unclean.leader.election.enable")),
            embedded=embedded,
        )

    # -- lifecycle ----------------------------------------------------------------------

    def open(self) -> None:
        self._opened_ms = int(time.time() * 1000)
        if self._log.open().cluster_id is None:
            self._log.append({"type": "cluster", "cluster_id": new_cluster_id()})

    def close(self) -> None:
        self._log.close()

    @property
    def image(self) -> MetadataImage:
        return self._log.image

    @property
    def live_brokers(self) -> set[int]:
        """The registered brokers that are not fenced."""
        return self.image.live_brokers

    def metadata_records(self) -> list[MetadataRecord]:
        return self.image.records()

    def add_listener(self, fn: MetadataListener) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: MetadataListener) -> None:
        """A broker sharing this controller in-process stops (``cluster.in_process``)."""
        self._listeners.remove(fn)

    def _commit(self, records: list[MetadataRecord]) -> None:
        """Append ``records`` durably, then publish them as one batch."""
        if not records:
            return
        self._log.append(*records)
        self._publish(records)
        # a partition change may finish a reassignment (its targets all in the ISR now)
        finished = []
        for rec in records:
            if rec.get("type") == "partition" and (rec.get("adding_replicas")
                                                   or rec.get("removing_replicas")):
                p = self.image.topics[rec["topic"]].partitions[rec["partition"]]
                done = reassignment.complete(p, self.live_brokers)
                if done is not None:
                    log.info("reassignment of %s-%d done: replicas %s", p.topic, p.partition,
                             done.replicas)
                    finished.append(done.to_record())
        if finished:
            self._commit(finished)

    def _publish(self, records: list[MetadataRecord]) -> None:
        for fn in self._listeners:
            fn(records)

    # -- brokers ------------------------------------------------------------------------

    def register_broker(self, node_id: int, host: str, port: int, rack: str | None = None) -> int:
        """The broker serves at host:port from now on and is live (unfenced); returns its
        new broker epoch, larger than any broker epoch handed out before (durable, so a
        restarted controller keeps fencing requests of the broker's earlier lives)."""
        epoch = 1 + max((b.epoch for b in self.image.brokers.values()), default=0)
        self._commit([{"type": "broker", "node_id": node_id, "host": host, "port": port,
                       "rack": rack, "epoch": epoch}])
        log.info("broker %d registered at %s:%d (broker epoch %d)", node_id, host, port, epoch)
        self._unfence(node_id)
        return epoch

    def unregister_broker(self, node_id: int) -> None:
        """The embedded broker stops with this process: it is no longer live (its partition
        records stay as they are; it leads them again when the process restarts)."""
        if node_id in self.live_brokers:
            self._commit([fence_record(node_id, int(time.time() * 1000))])

    # -- liveness (brokers in other processes) ------------------------------------------

    def expect_heartbeats(self, now: float) -> None:
        """A controller starting over: every broker live in its metadata has one session
        timeout from ``now`` to heartbeat; one that does not is fenced then."""
        for node_id in self.live_brokers:
            self._sessions.setdefault(node_id, now + self.session_timeout_s)

    def heartbeat(self, node_id: int, broker_epoch: int, now: float, *,
                  want_shut_down: bool = False) -> bool:
        """A broker's heartbeat at ``now`` (monotonic seconds): it stays (or becomes again)
        live. With ``want_shut_down`` its leaderships move to other ISR members and it is
        fenced (controlled shutdown). Returns whether the broker is fenced now."""
        self._check_broker_epoch(node_id, broker_epoch)
        if want_shut_down:
            self.fence_broker(node_id, "controlled shutdown")
            return True
        self._sessions[node_id] = now + self.session_timeout_s
        if node_id not in self.live_brokers:
            self._unfence(node_id)
        return False

    def _check_broker_epoch(self, node_id: int, broker_epoch: int) -> None:
        info = self.image.brokers.get(node_id)
        if info is None or info.epoch != broker_epoch:
            raise StaleBrokerEpochError(
                f"broker {node_id} epoch {broker_epoch} is not its current registration's "
                f"({info.epoch if info is not None else 'none'})")

    def check_sessions(self, now: float) -> list[int]:
        """Fence every broker whose session ended before ``now``; returns their ids."""
        expired = [n for n, deadline in self._sessions.items() if deadline < now]
        for node_id in expired:
            log.warning("broker %d sent no heartbeat for broker.session.timeout.ms (%d ms): "
                        "fenced", node_id, int(self.session_timeout_s * 1000))
            self.fence_broker(node_id, "session expired")
        return expired

    def fence_broker(self, node_id: int, reason: str) -> None:
        """``node_id`` is no longer live: it leaves the ISR of its partitions and those it
        led elect a new leader from the remaining ISR (or none: leader -1)."""
        self._sessions.pop(node_id, None)
        was_live = node_id in self.live_brokers
        live = self.live_brokers - {node_id}
        changes = self._elect(lambda p, unclean: without_broker(p, node_id, live,
                                                                unclean=unclean))
        self._commit(([fence_record(node_id, int(time.time() * 1000))] if was_live else [])
                     + changes)
        if was_live or changes:
            log.info("broker %d fenced (%s): %d partition(s) changed", node_id, reason,
                     len(changes))

    def replace_lost_brokers(self, now_ms: int) -> int:
        """Reassign the replicas of every broker fenced for ``broker.replacement.timeout.ms``
        before ``now_ms`` (wall clock) to live brokers outside the partition's replica set,
        each to the one holding fewest replicas (so they spread); the reassignment adds
        them, they catch up, and only then is the lost broker dropped. A partition with no
        live candidate keeps its replicas (logged once). Returns how many partitions
        started moving."""
        lost = {n for n, at in self.image.fenced_since.items()
                if n not in self._replaced
                and (self._opened_ms if at is None else at) + self.replacement_timeout_ms
                <= now_ms}
        if not lost:
            return 0
        live = self.live_brokers
        load = dict.fromkeys(live, 0)
        for topic in self.image.topics.values():
            for p in topic.partitions.values():
                for r in p.target_replicas:
                    if r in load:
                        load[r] += 1
        records: list[MetadataRecord] = []
        pending: set[int] = set()
        for topic in self.image.topics.values():
            for p in topic.partitions.values():
                target = p.target_replicas
                gone = [r for r in target if r in lost]
                if not gone:
                    continue
                new_target = list(target)
                for r in gone:
                    spare = [b for b in load if b not in new_target]
                    if not spare:
                        pending.add(r)
                        continue
                    pick = min(spare, key=lambda b: (load[b], b))
                    load[pick] += 1
                    new_target[new_target.index(r)] = pick
                if new_target == target:
                    if (p.topic, p.partition) not in self._unplaceable:
                        self._unplaceable.add((p.topic, p.partition))
                        log.warning("%s-%d keeps lost broker(s) %s in its replicas %s: no live "
                                    "broker outside them to move to", p.topic, p.partition,
                                    gone, target)
                    continue
                self._unplaceable.discard((p.topic, p.partition))
                log.info("%s-%d: replacing lost broker(s) %s, reassigning to %s", p.topic,
                         p.partition, gone, new_target)
                records.append(reassignment.start(p, new_target, live).to_record())
        self._replaced |= lost - pending
        self._commit(records)
        return len(records)

    def _unfence(self, node_id: int) -> None:
        """``node_id`` is live again; leaderless partitions it can lead elect it."""
        was_live = node_id in self.live_brokers
        changes = self._elect(lambda p, unclean: with_returning_broker(p, node_id,
                                                                       unclean=unclean))
        self._replaced.discard(node_id)
        self._commit(([] if was_live else [unfence_record(node_id)]) + changes)

    def _elect(self, decide: Callable[[PartitionInfo, bool], tuple[PartitionInfo | None, bool]]
               ) -> list[MetadataRecord]:
        """The partition records ``decide`` changes, over every partition (warning about
        each unclean election)."""
        out: list[MetadataRecord] = []
        for topic in self.image.topics.values():
            unclean = self._unclean_allowed(topic)
            for p in topic.partitions.values():
                new, was_unclean = decide(p, unclean)
                if new is None:
                    continue
                if was_unclean:
                    _warn_unclean(p, new.leader)
                out.append(new.to_record())
        return out

    # -- elections on demand and leader balance -------------------------------------------

    def elect_leaders(self, election_type: int,
                      partitions: Mapping[str, Sequence[int]] | None = None
                      ) -> dict[tuple[str, int], KafkaError | None]:
        """ElectLeaders: ``election_type`` 0 (preferred replica) or 1 (unclean: only for
        partitions without a leader). ``partitions`` None means every partition; then the
        answer leaves out those that needed no election, as Kafka does. Returns each
        partition's error (None: elected)."""
        if election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
            raise InvalidRequestError(f"unknown election type {election_type}")
        every = partitions is None
        wanted = ({t.name: sorted(t.partitions) for t in self.image.topics.values()}
                  if partitions is None else partitions)
        results: dict[tuple[str, int], KafkaError | None] = {}
        records: list[MetadataRecord] = []
        for name, indexes in wanted.items():
            topic = self.image.topics.get(name)
            for index in indexes:
                p = topic.partitions.get(index) if topic is not None else None
                if p is None:
                    results[(name, index)] = UnknownTopicOrPartitionError(
                        f"{name}-{index} does not exist")
                    continue
                if election_type == PREFERRED_ELECTION:
                    outcome = preferred_election(p, self.live_brokers)
                else:
                    outcome, unclean = unclean_election(p, self.live_brokers)
                    if unclean and isinstance(outcome, PartitionInfo):
                        _warn_unclean(p, outcome.leader)
                if isinstance(outcome, PartitionInfo):
                    records.append(outcome.to_record())
                    results[(name, index)] = None
                elif not (every and outcome == ErrorCode.ELECTION_NOT_NEEDED):
                    results[(name, index)] = error_for_code(outcome, f"{name}-{index}: "
                                                            f"{outcome.name}")
        self._commit(records)
        return results

    def rebalance_leaders(self, imbalance_percentage: int) -> int:
        """``auto.leader.rebalance.enable``: for every broker whose share of partitions it
        prefers (is first replica of) but does not lead exceeds ``imbalance_percentage``,
        move those leaderships back to it where it is live and in the ISR. Returns how
        many partitions moved."""
        preferred: dict[int, list[PartitionInfo]] = {}
        for topic in self.image.topics.values():
            for p in topic.partitions.values():
                preferred.setdefault(p.replicas[0], []).append(p)
        records: list[MetadataRecord] = []
        for broker, parts in preferred.items():
            if broker not in self.live_brokers:
                continue
            off = [p for p in parts if p.leader != broker]
            if not off or 100 * len(off) <= imbalance_percentage * len(parts):
                continue
            for p in off:
                outcome = preferred_election(p, self.live_brokers)
                if isinstance(outcome, PartitionInfo):
                    records.append(outcome.to_record())
        if records:
            log.info("leader rebalance: %d partition(s) back on their preferred replica",
                     len(records))
        self._commit(records)
        return len(records)

    # -- reassignment ---------------------------------------------------------------------

    def alter_partition_reassignments(
            self, targets: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[tuple[str, int], KafkaError | None]:
        """AlterPartitionReassignments: move each partition to its target replicas, or
        (None) cancel its ongoing reassignment. Each partition's error, None when accepted."""
        results: dict[tuple[str, int], KafkaError | None] = {}
        records: list[MetadataRecord] = []
        for (name, index), target in targets.items():
            topic = self.image.topics.get(name)
            p = topic.partitions.get(index) if topic is not None else None
            try:
                if p is None:
                    raise UnknownTopicOrPartitionError(f"{name}-{index} does not exist")
                if target is None:
                    if not (p.adding_replicas or p.removing_replicas):
                        raise error_for_code(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                             f"no reassignment of {name}-{index} to cancel")
                    new = reassignment.cancel(p, self.live_brokers)
                else:
                    self._check_reassignment_target(target)
                    new = reassignment.start(p, target, self.live_brokers)
            except KafkaError as exc:
                results[(name, index)] = exc
                continue
            records.append(new.to_record())
            results[(name, index)] = None
            log.info("reassignment of %s-%d: %s", name, index,
                     "cancelled" if target is None else f"to {list(target)}")
        self._commit(records)
        return results

    def _check_reassignment_target(self, target: Sequence[int]) -> None:
        if not target or len(set(target)) != len(target):
            raise InvalidReplicaAssignmentError(f"invalid replica list {list(target)}")
        unknown = [b for b in target if b not in self.image.brokers]
        if unknown:
            raise InvalidReplicaAssignmentError(f"unknown broker ids {unknown}")

    def _unclean_allowed(self, topic: TopicInfo) -> bool:
        """``unclean.leader.election.enable`` for ``topic``: its override, else the
        cluster-wide dynamic default, else the static config."""
        key = "unclean.leader.election.enable"
        value = topic.configs.get(key, self.image.broker_configs.get("", {}).get(key))
        if value is None:
            return self.unclean_leader_election
        return value.strip().lower() == "true"

    # -- topics -------------------------------------------------------------------------

    def _check_new_topic(self, name: str) -> None:
        validate_topic_name(name)
        if name in self.image.topics:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        unified = _unify(name)
        for other in self.image.topics:
            if _unify(other) == unified:
                raise InvalidTopicError(
                    f"topic {name!r} collides with existing topic {other!r} "
                    "('.' and '_' are interchangeable in metric names)"
                )

    def _assign(self, start: int, count: int, rf: int, shift: int = 0) -> list[list[int]]:
        """Replica lists for partitions ``start..start+count-1``: round-robin over the live
        brokers, partition p led by the (p + shift)-th, so leaders spread over brokers (and,
        with ``shift``, over topics)."""
        brokers = sorted(self.live_brokers) or ([self.node_id] if self.embedded else [])
        if rf > len(brokers):
            raise InvalidReplicationFactorError(
                f"replication factor {rf} is larger than the {len(brokers)} available broker(s)"
            )
        n = len(brokers)
        return [[brokers[(p + shift + i) % n] for i in range(rf)]
                for p in range(start, start + count)]

    def _check_assignment(self, assignment: Sequence[Sequence[int]]) -> list[list[int]]:
        out = []
        for replicas in assignment:
            reps = list(replicas)
            if not reps or len(set(reps)) != len(reps):
                raise InvalidReplicaAssignmentError(f"invalid replica list {reps}")
            unknown = [b for b in reps if b not in self.live_brokers]
            if unknown:
                raise InvalidReplicaAssignmentError(f"unknown broker ids {unknown}")
            out.append(reps)
        return out

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        assignments: Mapping[int, Sequence[int]] | None = None,
        internal: bool = False,
        validate_only: bool = False,
    ) -> TopicInfo:
        self._check_new_topic(name)
        if assignments:
            if num_partitions not in (-1, len(assignments)) or replication_factor != -1:
                raise InvalidRequestError(
                    "both a replica assignment and num_partitions/replication_factor were given"
                )
            keys = sorted(assignments)
            if keys != list(range(len(keys))):
                raise InvalidReplicaAssignmentError("partition ids must be 0..N-1")
            replica_lists = self._check_assignment([assignments[k] for k in keys])
        else:
            if num_partitions == -1:
                num_partitions = self.default_partitions
            if replication_factor == -1:
                replication_factor = self.default_replication_factor
            if num_partitions <= 0:
                raise InvalidPartitionsError(f"number of partitions must be larger than 0, got {num_partitions}")
            if num_partitions > MAX_PARTITIONS_PER_TOPIC:
                raise InvalidPartitionsError(
                    f"{num_partitions} partitions exceed the limit of {MAX_PARTITIONS_PER_TOPIC}")
            if replication_factor <= 0:
                raise InvalidReplicationFactorError(
                    f"replication factor must be larger than 0, got {replication_factor}"
                )
            replica_lists = self._assign(0, num_partitions, replication_factor,
                                         shift=len(self.image.topics))
        info = TopicInfo(name, new_topic_id(), dict(configs or {}), internal)
        for p, replicas in enumerate(replica_lists):
            info.partitions[p] = PartitionInfo(name, p, replicas, list(replicas), replicas[0], 0, 0)
        if validate_only:
            return info
        records = [info.to_record()] + [pi.to_record() for pi in info.partitions.values()]
        self._commit(records)
        log.info("created topic %s (%d partitions, id %s)", name, len(replica_lists),
                 topic_id_to_str(info.topic_id))
        return self.image.topics[name]

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.image.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        if info.internal:
            raise InvalidRequestError(f"internal topic {name!r} cannot be deleted")
        self._commit([{"type": "remove_topic", "name": name, "topic_id": info.topic_id.hex()}])
        log.info("deleted topic %s", name)
        return info

    def create_partitions(
        self,
        name: str,
        total: int,
        assignments: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        info = self.image.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        current = len(info.partitions)
        if total <= current:
            raise InvalidPartitionsError(
                f"topic {name!r} has {current} partitions; the new count must be larger, got {total}"
            )
        if total > MAX_PARTITIONS_PER_TOPIC:
            raise InvalidPartitionsError(
                f"{total} partitions exceed the limit of {MAX_PARTITIONS_PER_TOPIC}")
        rf = len(info.partitions[0].replicas) if info.partitions else 1
        if assignments:
            if len(assignments) != total - current:
                raise InvalidReplicaAssignmentError(
                    f"{len(assignments)} assignments given for {total - current} new partitions"
                )
            replica_lists = self._check_assignment(assignments)
        else:
            replica_lists = self._assign(current, total - current, rf)
        new = [PartitionInfo(name, current + i, reps, list(reps), reps[0], 0, 0)
               for i, reps in enumerate(replica_lists)]
        if not validate_only:
            self._commit([p.to_record() for p in new])
            log.info("topic %s now has %d partitions", name, total)
        return self.image.topics[name]

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's config overrides with ``configs``."""
        info = self.image.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        self._commit([{"type": "config", "topic": name, "configs": dict(configs)}])

    def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        """Replace the dynamic configs of ``entity`` (a broker id, or "" for the default)."""
        self._commit([{"type": "broker_config", "entity": entity, "configs": dict(configs)}])

    def allocate_producer_ids(self, count: int = 1000) -> tuple[int, int]:
        """Reserve a block of producer ids (KIP-730 style): (first id, count). The block is
        durable before it is used, so ids are never reused across restarts."""
        start = self.image.next_producer_id
        self._commit([{"type": "producer_ids", "next": start + count}])
        return start, count

    def change_leader(self, name: str, partition: int, leader: int, isr: list[int] | None = None) -> PartitionInfo:
        """Move leadership; bumps the leader epoch (what fences the old leader)."""
        info = self.image.topics.get(name)
        if info is None or partition not in info.partitions:
            raise UnknownTopicOrPartitionError(f"{name}-{partition} does not exist")
        p = info.partitions[partition]
        rec = p.to_record()
        rec.update(leader=leader, leader_epoch=p.leader_epoch + 1,
                   partition_epoch=p.partition_epoch + 1,
                   isr=list(isr) if isr is not None else p.isr)
        self._commit([rec])
        return info.partitions[partition]

    def alter_partition(self, node_id: int, broker_epoch: int, topic: str, partition: int,
                        leader_epoch: int, partition_epoch: int,
                        isr: list[int]) -> PartitionInfo:
        """An ISR change from the partition's leader (AlterPartition, KIP-497/841): checked
        against the leader's registration (STALE_BROKER_EPOCH) and the current record,
        committed with partition epoch + 1 and the same leader epoch."""
        self._check_broker_epoch(node_id, broker_epoch)
        info = self.image.topics.get(topic)
        if info is None or partition not in info.partitions:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition} does not exist")
        p = info.partitions[partition]
        if leader_epoch != p.leader_epoch:
            raise FencedLeaderEpochError(
                f"{topic}-{partition}: leader epoch {leader_epoch}, current {p.leader_epoch}")
        if node_id != p.leader:
            raise InvalidRequestError(
                f"{topic}-{partition}: broker {node_id} is not the leader ({p.leader})")
        if partition_epoch != p.partition_epoch:
            raise InvalidUpdateVersionError(
                f"{topic}-{partition}: partition epoch {partition_epoch}, current "
                f"{p.partition_epoch}")
        new_isr = list(dict.fromkeys(isr))
        if p.leader not in new_isr:
            raise InvalidRequestError(f"{topic}-{partition}: the ISR {isr} must hold the leader")
        ineligible = [r for r in new_isr if r not in p.replicas or r not in self.live_brokers]
        if ineligible:
            raise IneligibleReplicaError(
                f"{topic}-{partition}: {ineligible} are not live replicas of {p.replicas}")
        rec = p.to_record()
        rec.update(isr=new_isr, partition_epoch=p.partition_epoch + 1)
        self._commit([rec])
        log.info("%s-%d: ISR %s -> %s (partition epoch %d)", topic, partition, p.isr, new_isr,
                 p.partition_epoch + 1)
        return info.partitions[partition]
