"""Transaction markers: the COMMIT or ABORT control batch that ends a producer's
transaction in each partition it wrote (what WriteTxnMarkers does in Kafka).

``LocalMarkerWriter`` appends them to the partitions this broker leads (a partition led
elsewhere gets NOT_LEADER_OR_FOLLOWER: markers are only ever appended by the leader),
through the replica manager as a coordinator append (no client rules; the producer epoch
is still checked, so a marker older than the producer's epoch is refused). A marker that
lands in a ``__consumer_offsets`` partition also settles the group coordinator's offsets
pending in that transaction. ``write_replicated`` then waits until each partition's ISR
has its marker, as Kafka appends markers with required acks -1: the transaction
coordinator (for its local partitions, ``marker_channel``) and the WriteTxnMarkers handler
(a remote coordinator's request) both write this way.

Outcome per partition: NONE when the marker is in the log of every in-sync replica, when
the partition no longer exists (a deleted topic needs no marker, as in Kafka) or when the
partition has seen a newer epoch of the producer; TRANSACTION_COORDINATOR_FENCED when a
marker of a later coordinator epoch (the ``__transaction_state`` partition's leader epoch)
already marked this producer here: the sender has been deposed and stops; any other error
means "not written, retry" (a marker written twice is harmless: the second closes no
transaction).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from sparklog.broker.acks import AcksAllWait, Park, wait_replicated
from sparklog.broker.txn.records import TopicPartition
from sparklog.protocol.control_records import encode_control_batch
from sparklog.protocol.errors import ErrorCode, KafkaError
from sparklog.protocol.internal_topics import CONSUMER_OFFSETS

if TYPE_CHECKING:
    from sparklog.broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

__all__ = ["MarkerWriter", "LocalMarkerWriter", "write_replicated"]

# errors after which no marker is needed: the partition is gone, or the producer already
# has a newer epoch there (a later marker superseded this one)
_SETTLED = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_PRODUCER_EPOCH})


class MarkerWriter(Protocol):
    """What the transaction coordinator writes markers with: one attempt per partition,
    its outcome (NONE: written and replicated, or not needed)."""

    async def write(self, producer_id: int, producer_epoch: int, commit: bool,
                    coordinator_epoch: int, partitions: Iterable[TopicPartition]
                    ) -> dict[TopicPartition, ErrorCode]: ...


class LocalMarkerWriter:
    """Markers into this broker's partition logs; ``on_offsets_marker(partition,
    producer_id, commit)`` runs for each ``__consumer_offsets`` partition marked."""

    def __init__(self, replicas: ReplicaManager,
                 on_offsets_marker: Callable[[int, int, bool], None]) -> None:
        self._replicas = replicas
        self._on_offsets_marker = on_offsets_marker

    def write(self, producer_id: int, producer_epoch: int, commit: bool,
              coordinator_epoch: int, partitions: Iterable[TopicPartition]
              ) -> tuple[dict[TopicPartition, ErrorCode], list[AcksAllWait]]:
        """Append the markers; their outcomes, and the appends to wait on for the ISR."""
        batch = encode_control_batch(commit, producer_id=producer_id,
                                     producer_epoch=producer_epoch,
                                     coordinator_epoch=coordinator_epoch,
                                     timestamp=int(time.time() * 1000))
        out: dict[TopicPartition, ErrorCode] = {}
        waits: list[AcksAllWait] = []
        for topic, partition in partitions:
            if self._fenced(topic, partition, producer_id, coordinator_epoch):
                out[(topic, partition)] = ErrorCode.TRANSACTION_COORDINATOR_FENCED
                continue
            try:
                written = self._replicas.append_internal(topic, partition, batch)
            except KafkaError as exc:
                code = exc.error_code
                if code in _SETTLED:
                    out[(topic, partition)] = ErrorCode.NONE
                    continue
                log.warning("%s marker of producer %d for %s-%d not written: %s",
                            "COMMIT" if commit else "ABORT", producer_id, topic, partition, exc)
                out[(topic, partition)] = code
                continue
            out[(topic, partition)] = ErrorCode.NONE
            waits.append(written)
            marked = self._replicas.get(topic, partition)
            if marked is not None:
                marked.end_verification(producer_id)  # batches verified before it: refused
            if topic == CONSUMER_OFFSETS:
                self._on_offsets_marker(partition, producer_id, commit)
        return out, waits

    def _fenced(self, topic: str, partition: int, producer_id: int,
                coordinator_epoch: int) -> bool:
        """A marker from a coordinator older than the last one that marked this producer
        here (a deposed coordinator still completing what its successor took over)."""
        p = self._replicas.get(topic, partition)
        entry = None if p is None else p.log.producer_state.last_entry(producer_id)
        return entry is not None and coordinator_epoch < entry.coordinator_epoch


async def write_replicated(writer: LocalMarkerWriter, park: Park | None, timeout_ms: int,
                           producer_id: int, producer_epoch: int, commit: bool,
                           coordinator_epoch: int, partitions: Iterable[TopicPartition]
                           ) -> dict[TopicPartition, ErrorCode]:
    """``writer.write``, each written marker then waited on until the partition's ISR has
    it (or its wait failed: that partition's error)."""
    out, waits = writer.write(producer_id, producer_epoch, commit, coordinator_epoch, partitions)
    out.update(await wait_replicated(park, waits, timeout_ms))
    return out
