"""The coordinator's marker channel: each partition's marker goes to the leader the metadata
names (none live: NOT_LEADER_OR_FOLLOWER; topic gone: nothing to write), and markers for
one broker asked while a request to it is in flight go together in its next request. The
other brokers are a stand-in for ``InterBrokerClients`` that answers each WriteTxnMarkers
when the test says so."""

from __future__ import annotations

import asyncio

from sparklog.broker.metadata_cache import MetadataCache, PartitionInfo, unfence_record
from sparklog.broker.txn.marker_channel import MarkerChannel
from sparklog.broker.txn.markers import LocalMarkerWriter
from sparklog.client.connection import KafkaConnectionError
from sparklog.protocol.errors import ErrorCode as E
from sparklog.protocol.messages.transactions import WriteTxnMarkersResponse
from sparklog.protocol.schema import TopLevel
from tests.helpers.clock import in_loop, settle

NODE = 1


class Brokers:
    """The other brokers: every WriteTxnMarkers sent waits for ``answer`` (all written) or
    ``fail`` (the connection broke)."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, TopLevel]] = []
        self._replies: list[asyncio.Future[bool]] = []

    async def send(self, node_id: int, request: TopLevel, version: int) -> TopLevel:
        self.sent.append((node_id, request))
        reply: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._replies.append(reply)
        if not await reply:
            raise KafkaConnectionError(f"broker {node_id} went away")
        R = WriteTxnMarkersResponse
        return R(markers=[R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            R.WritableTxnMarkerTopicResult(name=t.name, partitions=[
                R.WritableTxnMarkerPartitionResult(partition_index=p, error_code=0)
                for p in t.partition_indexes]) for t in m.topics]) for m in request.markers])

    def answer(self, ok: bool = True) -> None:
        reply = self._replies.pop(0)
        reply.set_result(ok)


def _metadata(leaders: dict[int, int]) -> MetadataCache:
    md = MetadataCache()
    records = [{"type": "broker", "node_id": n, "host": "127.0.0.1", "port": 9090 + n}
               for n in (1, 2, 3)]
    records += [unfence_record(n) for n in (1, 2, 3)]
    records.append({"type": "topic", "name": "t", "topic_id": "00" * 16, "configs": {}})
    records += [PartitionInfo("t", p, [1, 2, 3], [1, 2, 3], leader).to_record()
                for p, leader in leaders.items()]
    md.apply(records)
    return md


async def _no_park(waiters: object, timeout_s: float) -> bool:
    return False


@in_loop
async def test_markers_go_to_each_leader_batched_per_destination() -> None:
    brokers = Brokers()
    md = _metadata({0: 2, 1: 3, 2: 2, 3: -1})
    channel = MarkerChannel(NODE, md, LocalMarkerWriter(None, lambda *a: None),  # type: ignore[arg-type]
                            brokers, _no_park, 1000)  # type: ignore[arg-type]
    first = asyncio.ensure_future(channel.write(7, 0, True, 4, [("t", 0), ("t", 1), ("t", 3),
                                                                 ("gone", 0)]))
    await settle()
    # one request per destination broker; no live leader and a deleted topic need none
    assert sorted(n for n, _r in brokers.sent) == [2, 3]
    # two more transactions for broker 2 while its request is in flight: they wait
    second = asyncio.ensure_future(channel.write(8, 1, False, 4, [("t", 2)]))
    third = asyncio.ensure_future(channel.write(9, 0, True, 4, [("t", 0), ("t", 2)]))
    await settle()
    assert len(brokers.sent) == 2
    brokers.answer()
    brokers.answer()
    assert await first == {("t", 0): E.NONE, ("t", 1): E.NONE,
                           ("t", 3): E.NOT_LEADER_OR_FOLLOWER, ("gone", 0): E.NONE}
    await settle()
    node, batched = brokers.sent[2]
    assert node == 2 and [(m.producer_id, m.transaction_result, m.coordinator_epoch)
                          for m in batched.markers] == [(8, False, 4), (9, True, 4)]
    brokers.answer(ok=False)  # the connection broke: retry later
    assert await second == {("t", 2): E.NETWORK_EXCEPTION}
    assert await third == {("t", 0): E.NETWORK_EXCEPTION, ("t", 2): E.NETWORK_EXCEPTION}
    channel.close()
