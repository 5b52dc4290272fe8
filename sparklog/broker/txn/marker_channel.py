"""The transaction coordinator's markers on a cluster (Kafka's
``TransactionMarkerChannelManager``): each partition's marker goes to the partition's
current leader, as the metadata cache names it when the marker is sent.

Partitions led here are written by ``LocalMarkerWriter`` and waited on until their ISR has
the marker; the others go to their leaders as WriteTxnMarkers requests, through one sender
per destination broker: markers asked for while a request to that broker is in flight
wait and go together in its next request (one request per round trip, whatever the number
of transactions completing). One call is one attempt per partition: the coordinator
retries what did not succeed, so a partition whose leader moved is sent again to the new
leader from the refreshed metadata.

Per partition: NONE when written (or not needed: the topic is gone), else the error to
retry on (NOT_LEADER_OR_FOLLOWER while it has no live leader, NETWORK_EXCEPTION when its
leader could not be reached, or what that leader answered).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass

from sparklog.broker.acks import Park
from sparklog.broker.inter_broker import InterBrokerClients
from sparklog.broker.metadata_cache import MetadataCache
from sparklog.broker.txn.markers import LocalMarkerWriter, write_replicated
from sparklog.broker.txn.records import TopicPartition
from sparklog.client.connection import KafkaConnectionError, KafkaTimeoutError
from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.messages.transactions import WriteTxnMarkersRequest

log = logging.getLogger(__name__)

__all__ = ["MarkerChannel"]

WRITE_TXN_MARKERS_VERSION = 1  # flexible; v2's transaction_version is KIP-890 part 2's


@dataclass(frozen=True, slots=True)
class _Marker:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


_Results = dict[TopicPartition, ErrorCode]


class _DestinationSender:
    """The markers bound for one broker: queued, and sent together one request at a time."""

    def __init__(self, node_id: int, clients: InterBrokerClients) -> None:
        self.node_id = node_id
        self._clients = clients
        self._queue: list[tuple[_Marker, asyncio.Future[_Results]]] = []
        self._task: asyncio.Task[None] | None = None
        self._failing = False  # the last request could not reach the broker

    def send(self, marker: _Marker) -> Awaitable[_Results]:
        fut: asyncio.Future[_Results] = asyncio.get_running_loop().create_future()
        self._queue.append((marker, fut))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._drain(), name=f"txn-markers-to-{self.node_id}")
        return fut

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                results = await self._request([m for m, _f in batch])
            except BaseException:
                for _m, fut in batch:
                    fut.cancel()
                raise
            for (_marker, fut), res in zip(batch, results, strict=True):
                if not fut.done():
                    fut.set_result(res)

    async def _request(self, markers: list[_Marker]) -> list[_Results]:
        req = WriteTxnMarkersRequest(markers=[
            WriteTxnMarkersRequest.WritableTxnMarker(
                producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                transaction_result=m.commit, coordinator_epoch=m.coordinator_epoch,
                topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                        for t, ps in _by_topic(m.partitions).items()])
            for m in markers])
        try:
            resp = await self._clients.send(self.node_id, req, WRITE_TXN_MARKERS_VERSION)
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as exc:
            # said once per outage: the markers are retried every 100 ms until it is fenced
            log.log(logging.DEBUG if self._failing else logging.INFO,
                    "transaction markers to broker %d not sent: %s", self.node_id, exc)
            self._failing = True
            return [dict.fromkeys(m.partitions, ErrorCode.NETWORK_EXCEPTION) for m in markers]
        self._failing = False
        out: list[_Results] = []
        for m, mr in zip(markers, resp.markers, strict=False):
            got = {(t.name, p.partition_index): ErrorCode.for_code(p.error_code)
                   for t in mr.topics for p in t.partitions}
            out.append({tp: got.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in m.partitions})
        # a response shorter than the request (it never is from a sane broker): retry the rest
        out += [dict.fromkeys(m.partitions, ErrorCode.UNKNOWN_SERVER_ERROR)
                for m in markers[len(out):]]
        return out

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for _m, fut in self._queue:
            fut.cancel()
        self._queue = []


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, p in partitions:
        out.setdefault(topic, []).append(p)
    return out


class MarkerChannel:
    """``MarkerWriter`` of a broker in a cluster: markers routed to each partition's leader.

    ``park`` is how local marker writes wait for their ISR (the broker's purgatory, no
    request owning the wait), up to ``timeout_ms``."""

    def __init__(self, node_id: int, metadata: MetadataCache, local: LocalMarkerWriter,
                 clients: InterBrokerClients, park: Park, timeout_ms: int) -> None:
        self.node_id = node_id
        self._metadata = metadata
        self._local = local
        self._clients = clients
        self._park = park
        self._timeout_ms = timeout_ms
        self._senders: dict[int, _DestinationSender] = {}

    async def write(self, producer_id: int, producer_epoch: int, commit: bool,
                    coordinator_epoch: int, partitions: Iterable[TopicPartition]
                    ) -> dict[TopicPartition, ErrorCode]:
        out: _Results = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        live = self._metadata.live_brokers
        for tp in partitions:
            info = self._metadata.topic(tp[0])
            p = None if info is None else info.partitions.get(tp[1])
            if p is None:
                out[tp] = ErrorCode.NONE  # deleted: no marker needed, as in Kafka
            elif p.leader < 0 or (p.leader != self.node_id and p.leader not in live):
                out[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                by_leader.setdefault(p.leader, []).append(tp)
        waits: list[Awaitable[_Results]] = []
        for leader, tps in by_leader.items():
            if leader == self.node_id:
                waits.append(write_replicated(self._local, self._park, self._timeout_ms,
                                              producer_id, producer_epoch, commit,
                                              coordinator_epoch, tps))
            else:
                sender = self._senders.get(leader)
                if sender is None:
                    sender = self._senders[leader] = _DestinationSender(leader, self._clients)
                waits.append(sender.send(_Marker(producer_id, producer_epoch, commit,
                                                 coordinator_epoch, tuple(tps))))
        for res in await asyncio.gather(*waits):
            out.update(res)
        return out

    def close(self) -> None:
        for s in self._senders.values():
            s.cancel()
        self._senders.clear()
