"""The RPC ``ControllerChannel`` against a controller process (``process.roles=controller``):
each write comes back as the error the in-process controller raises or as records the
listener has before the call returns, and a controller restart is a reload the listener's
cache follows to the controller's new picture."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from sparklog.broker.config import BrokerConfig
from sparklog.broker.controller_rpc import RpcControllerChannel
from sparklog.broker.metadata_cache import MetadataCache, MetadataRecord
from sparklog.broker.metadata_wire import decode_metadata_batches
from sparklog.protocol.errors import (
    ErrorCode,
    InvalidReplicationFactorError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from tests.helpers.net import free_port
from tests.helpers.servers import ServerProcess

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def controller(tmp_path: Path):
    proc = ServerProcess(tmp_path / "controller", free_port(), [
        "--set", "process.roles=controller", "--set", "node.id=0",
        "--set", "broker.session.timeout.ms=3000"])
    try:
        yield proc.start()
    finally:
        proc.stop()
        proc.kill()


def _channel(controller: ServerProcess, node_id: int = 1) -> RpcControllerChannel:
    return RpcControllerChannel(BrokerConfig({
        "process.roles": "broker", "node.id": str(node_id),
        "controller.quorum.voters": f"0@127.0.0.1:{controller.port}",
        "broker.heartbeat.interval.ms": "200"}))


def _on_loop(body: Callable[[RpcControllerChannel, MetadataCache, list[list[MetadataRecord]]],
                            Coroutine[Any, Any, None]], channel: RpcControllerChannel) -> None:
    """Run ``body`` on an event loop the way the broker uses the channel: opened on the
    loop, the cache loaded from ``metadata_records`` and fed by the listener."""
    async def main() -> None:
        channel.open()
        cache = MetadataCache()
        batches: list[list[MetadataRecord]] = []
        try:
            cache.load(channel.metadata_records())

            def listener(records: list[MetadataRecord]) -> None:
                batches.append(records)
                cache.apply(records)

            channel.add_listener(listener)
            await body(channel, cache, batches)
        finally:
            channel.close()

    asyncio.run(main())


async def _until(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def test_writes_answer_with_their_records_or_the_controllers_error(controller):
    async def body(ch: RpcControllerChannel, cache: MetadataCache, batches) -> None:
        assert cache.cluster_id
        assert ch.register_broker(1, "127.0.0.1", 1111) == 1
        assert cache.live_brokers == {1}  # delivered before register_broker returned
        info = ch.create_topic("t", 3, 1, {"retention.ms": "1000"})
        assert [p.replicas for p in info.partitions.values()] == [[1], [1], [1]]
        assert cache.topic("t").topic_id == info.topic_id
        assert cache.topic("t").configs == {"retention.ms": "1000"}
        with pytest.raises(TopicAlreadyExistsError):
            ch.create_topic("t", 1, 1)
        with pytest.raises(InvalidReplicationFactorError):
            ch.create_topic("rf2", 1, 2)
        shape = ch.create_topic("v", 4, 1, validate_only=True)
        assert len(shape.partitions) == 4 and cache.topic("v") is None
        assert len(ch.create_partitions("t", 5).partitions) == 5
        ch.set_topic_configs("t", {"cleanup.policy": "compact"})
        assert cache.topic("t").configs == {"cleanup.policy": "compact"}
        ch.set_broker_configs("", {"log.retention.ms": "5000"})
        assert cache.broker_configs("") == {"log.retention.ms": "5000"}
        first, n = ch.allocate_producer_ids()
        second, _ = ch.allocate_producer_ids()
        assert n == 1000 and second == first + n
        ch.delete_topic("t")
        assert cache.topic("t") is None
        with pytest.raises(UnknownTopicOrPartitionError):
            ch.delete_topic("t")
        # every record came once, in order: a fresh load gives the same picture
        fresh = MetadataCache()
        fresh.load(ch.metadata_records())
        assert fresh.topics().keys() == cache.topics().keys()

    _on_loop(body, _channel(controller))


def test_a_restarted_controller_is_reloaded_and_heartbeats_go_on(controller):
    async def body(ch: RpcControllerChannel, cache: MetadataCache, batches) -> None:
        epoch = ch.register_broker(1, "127.0.0.1", 1111)
        ch.create_topic("kept", 2, 1)
        controller.kill()
        # a write while the controller is gone fails soon, as a retriable timeout, instead
        # of holding the broker's loop (heartbeats every 200 ms: about 2 s)
        started = time.monotonic()
        with pytest.raises(RequestTimedOutError):
            ch.create_topic("lost", 1, 1)
        assert time.monotonic() - started < 6
        controller.start()
        # the channel reads the new controller's stream from its start; its heartbeats
        # (same broker epoch, durable in the metadata log) make the broker live again
        await _until(lambda: any(r.get("type") == "cluster" for b in batches for r in b))
        await _until(lambda: cache.live_brokers == {1})
        assert ch.broker_epoch == epoch
        ch.create_topic("after", 1, 1)
        assert set(cache.topics()) == {"kept", "after"}
        assert cache.topic("kept").partitions[1].leader == 1

    _on_loop(body, _channel(controller))


def test_alter_partition_answers_later_and_the_loop_goes_on_meanwhile(controller):
    async def body(ch: RpcControllerChannel, cache: MetadataCache, batches) -> None:
        ch.register_broker(1, "127.0.0.1", 1111)
        p = ch.create_topic("isr", 1, 1).partitions[0]
        got = await asyncio.wrap_future(ch.alter_partition(
            1, ch.broker_epoch, "isr", 0, p.leader_epoch, p.partition_epoch, [1]))
        assert (got.leader, got.isr, got.replicas) == (1, [1], [1])
        # the committed record was scheduled on this loop before the answer
        await _until(lambda: cache.topic("isr").partitions[0].partition_epoch
                     == got.partition_epoch)
        controller.kill()
        # the controller is gone: the proposal fails as a retriable timeout, and this loop
        # serves on while it waits (a blocking write would stall it for seconds)
        answer = ch.alter_partition(1, ch.broker_epoch, "isr", 0, got.leader_epoch,
                                    got.partition_epoch, [1])
        started, ticks = time.monotonic(), 0
        while not answer.done():
            assert time.monotonic() - started < 10
            ticks += 1
            await asyncio.sleep(0.01)
        assert time.monotonic() - started > 1 and ticks > 50
        with pytest.raises(RequestTimedOutError):
            answer.result()

    _on_loop(body, _channel(controller))


def test_controller_apis_on_the_wire(controller, kafka_wire):
    """The controller process's own answers, request by request: registration epochs,
    heartbeats of a stale registration, AlterPartition's checks that come before the
    partition's (a stale broker epoch for the whole request, an unknown topic id per
    partition), and that it serves no broker API (Produce closes the connection)."""
    from sparklog.protocol.api_keys import ApiKey
    from sparklog.protocol.messages import API_BY_KEY

    w = kafka_wire(controller.bootstrap_servers)
    reg = API_BY_KEY[ApiKey.BROKER_REGISTRATION].request
    listener = reg.Listener(name="PLAINTEXT", host="127.0.0.1", port=9999)
    first = w.call(ApiKey.BROKER_REGISTRATION, 0, reg(broker_id=7, listeners=[listener]))
    second = w.call(ApiKey.BROKER_REGISTRATION, 4, reg(broker_id=7, listeners=[listener]))
    assert (first.error_code, second.error_code) == (0, 0)
    assert second.broker_epoch > first.broker_epoch
    wrong = w.call(ApiKey.BROKER_REGISTRATION, 1, reg(broker_id=8, cluster_id="not-this-one",
                                                      listeners=[listener]))
    assert wrong.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID

    hb = API_BY_KEY[ApiKey.BROKER_HEARTBEAT].request
    stale = w.call(ApiKey.BROKER_HEARTBEAT, 1, hb(broker_id=7, broker_epoch=first.broker_epoch))
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    ok_hb = w.call(ApiKey.BROKER_HEARTBEAT, 0, hb(broker_id=7, broker_epoch=second.broker_epoch))
    assert (ok_hb.error_code, ok_hb.is_fenced, ok_hb.should_shut_down) == (0, False, False)

    ap = API_BY_KEY[ApiKey.ALTER_PARTITION].request
    part = ap.TopicData.PartitionData(partition_index=0, new_isr_with_epochs=[
        ap.TopicData.PartitionData.BrokerState(broker_id=7)])
    resp = w.call(ApiKey.ALTER_PARTITION, 3, ap(
        broker_id=7, broker_epoch=first.broker_epoch,
        topics=[ap.TopicData(topic_id=b"\x01" * 16, partitions=[part])]))
    assert resp.error_code == ErrorCode.STALE_BROKER_EPOCH
    resp = w.call(ApiKey.ALTER_PARTITION, 3, ap(
        broker_id=7, broker_epoch=second.broker_epoch,
        topics=[ap.TopicData(topic_id=b"\x01" * 16, partitions=[part])]))
    assert resp.error_code == 0
    assert resp.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID

    ids = API_BY_KEY[ApiKey.ALLOCATE_PRODUCER_IDS].request
    block = w.call(ApiKey.ALLOCATE_PRODUCER_IDS, 0,
                   ids(broker_id=7, broker_epoch=second.broker_epoch))
    assert (block.error_code, block.producer_id_len) == (0, 1000)

    # the metadata stream: whole batches from an offset, its end as the high watermark, the
    # controller epoch on every batch; a fetch at the end long-polls, one with another
    # epoch (a broker still on a previous controller's stream) is answered at once
    fetch = API_BY_KEY[ApiKey.FETCH].request

    def fetch_at(offset: int, epoch: int, wait_ms: int) -> Any:
        topic = fetch.FetchTopic(topic="__cluster_metadata", partitions=[
            fetch.FetchTopic.FetchPartition(partition=0, fetch_offset=offset,
                                            current_leader_epoch=epoch,
                                            partition_max_bytes=1 << 20)])
        return w.call(ApiKey.FETCH, 12, fetch(max_wait_ms=wait_ms, min_bytes=1,
                                              topics=[topic])).responses[0].partitions[0]

    whole = fetch_at(0, -1, 0)
    records, end, epoch = decode_metadata_batches(whole.records, 0)
    assert whole.error_code == 0 and end == whole.high_watermark and epoch >= 1
    assert {"type": "unfence_broker", "node_id": 7} in records
    started = time.monotonic()
    assert fetch_at(end, epoch, 600).records in (None, b"")
    assert time.monotonic() - started >= 0.5
    started = time.monotonic()
    assert fetch_at(end, epoch - 1, 5000).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert fetch_at(end + 5, epoch, 5000).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert time.monotonic() - started < 2

    produce = API_BY_KEY[ApiKey.PRODUCE].request
    w.request(ApiKey.PRODUCE, 9, produce(acks=1, timeout_ms=1000))
    assert w.is_closed()
