"""How the handlers map failures to error codes, in each API's own shape: a real Broker on a
temporary directory (started on port 0 where the case needs logs), requests through its
dispatcher as a connection would send them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sparklog.broker.broker import Broker
from sparklog.cluster.single_node import build_single_node
from sparklog.controller import Controller
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode as E
from sparklog.protocol.internal_topics import CONSUMER_OFFSETS
from sparklog.protocol.messages import API_BY_KEY
from sparklog.protocol.records import Record, encode_batch
from sparklog.protocol.schema import TopLevel
from tests.helpers.broker import roundtrip

TOPIC = "t"


def req(api: int, /, **fields: Any) -> TopLevel:
    return API_BY_KEY[api].request(**fields)


async def call(broker: Broker, key: int, version: int, request: TopLevel) -> Any:
    return await roundtrip(broker.dispatcher, key, version, request)


def with_broker(tmp_path: Path, body: Callable[[Broker], Awaitable[None]], *,
                start: bool = True) -> None:
    async def main() -> None:
        broker = build_single_node({"log.dirs": str(tmp_path),
                                    "listeners": "PLAINTEXT://127.0.0.1:0",
                                    "auto.create.topics.enable": "false",
                                    "offsets.topic.num.partitions": "3"}).broker
        if not start:
            await body(broker)
            return
        await broker.start()
        try:
            broker.create_topic(TOPIC, 1, 1)
            await body(broker)
        finally:
            await broker.shutdown()

    asyncio.run(main())


def test_group_requests_without_a_coordinator(tmp_path: Path) -> None:
    """A broker that is not running has no coordinator: every group API says so."""
    R = API_BY_KEY

    async def body(b: Broker) -> None:
        assert b.group_coordinator is None
        fc = await call(b, ApiKey.FIND_COORDINATOR, 3, req(ApiKey.FIND_COORDINATOR, key="g"))
        assert (fc.error_code, fc.node_id) == (E.COORDINATOR_NOT_AVAILABLE, -1)
        proto = R[ApiKey.JOIN_GROUP].request.JoinGroupRequestProtocol(name="range", metadata=b"")
        jg = await call(b, ApiKey.JOIN_GROUP, 7, req(
            ApiKey.JOIN_GROUP, group_id="g", session_timeout_ms=10_000, member_id="m",
            protocol_type="consumer", protocols=[proto]))
        assert (jg.error_code, jg.member_id, jg.generation_id) == (E.COORDINATOR_NOT_AVAILABLE,
                                                                   "m", -1)
        for key, version, fields in [
            (ApiKey.SYNC_GROUP, 5, {"group_id": "g", "member_id": "m"}),
            (ApiKey.HEARTBEAT, 4, {"group_id": "g", "member_id": "m"}),
            (ApiKey.LEAVE_GROUP, 4, {"group_id": "g"}),
            (ApiKey.LIST_GROUPS, 4, {}),
        ]:
            resp = await call(b, key, version, req(key, **fields))
            assert resp.error_code == E.COORDINATOR_NOT_AVAILABLE, key
        oc_req = R[ApiKey.OFFSET_COMMIT].request
        oc = await call(b, ApiKey.OFFSET_COMMIT, 8, req(
            ApiKey.OFFSET_COMMIT, group_id="g", generation_id_or_member_epoch=-1, topics=[
                oc_req.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                    oc_req.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]))
        assert oc.topics[0].partitions[0].error_code == E.COORDINATOR_NOT_AVAILABLE
        of_req = R[ApiKey.OFFSET_FETCH].request
        of = await call(b, ApiKey.OFFSET_FETCH, 1, req(ApiKey.OFFSET_FETCH, group_id="g", topics=[
            of_req.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])]))
        # v1 has no top-level error code: it is reported per partition
        assert [(p.partition_index, p.committed_offset, p.error_code)
                for p in of.topics[0].partitions] == [(0, -1, E.COORDINATOR_NOT_AVAILABLE)]
        dg = await call(b, ApiKey.DESCRIBE_GROUPS, 5, req(ApiKey.DESCRIBE_GROUPS, groups=["g"]))
        assert dg.groups[0].error_code == E.COORDINATOR_NOT_AVAILABLE
        dl = await call(b, ApiKey.DELETE_GROUPS, 2, req(ApiKey.DELETE_GROUPS, groups_names=["g"]))
        assert dl.results[0].error_code == E.COORDINATOR_NOT_AVAILABLE

    with_broker(tmp_path, body, start=False)


def test_group_requests_the_coordinator_refuses(tmp_path: Path) -> None:
    async def body(b: Broker) -> None:
        assert b.group_coordinator is not None
        fc = await call(b, ApiKey.FIND_COORDINATOR, 3,
                        req(ApiKey.FIND_COORDINATOR, key="g", key_type=2))
        assert fc.error_code == E.INVALID_REQUEST
        gc = b.group_coordinator
        gc.unload_partition(gc.store.partition_for("g"))
        fc = await call(b, ApiKey.FIND_COORDINATOR, 3, req(ApiKey.FIND_COORDINATOR, key="g"))
        assert fc.error_code == E.COORDINATOR_NOT_AVAILABLE  # nobody else could either
        hb = await call(b, ApiKey.HEARTBEAT, 4, req(ApiKey.HEARTBEAT, group_id="g",
                                                    generation_id=1, member_id="m"))
        assert hb.error_code == E.NOT_COORDINATOR
        solo = next(g for g in ("a", "b", "c", "d") if gc.serves(g))
        oc_req = API_BY_KEY[ApiKey.OFFSET_COMMIT].request
        oc = await call(b, ApiKey.OFFSET_COMMIT, 8, req(
            ApiKey.OFFSET_COMMIT, group_id=solo, generation_id_or_member_epoch=-1, topics=[
                oc_req.OffsetCommitRequestTopic(name=name, partitions=[
                    oc_req.OffsetCommitRequestPartition(partition_index=p, committed_offset=1)
                    for p in parts])
                for name, parts in [(TOPIC, [0, 5]), ("missing", [0])]]))
        assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                for t in oc.topics] == [
            (TOPIC, [(0, E.NONE), (5, E.UNKNOWN_TOPIC_OR_PARTITION)]),
            ("missing", [(0, E.UNKNOWN_TOPIC_OR_PARTITION)])]

    with_broker(tmp_path, body)


def test_partition_requests_report_per_partition_errors(tmp_path: Path) -> None:
    async def body(b: Broker) -> None:
        rm = b.replica_manager
        assert isinstance(b.channel, Controller)  # the single node's in-process channel
        b.channel.change_leader(TOPIC, 0, b.node_id)  # epoch 1: older ones are fenced
        p = rm.leader_partition(TOPIC, 0)
        assert p.leader_epoch == 1
        assert rm.append(TOPIC, 0, encode_batch([Record(value=b"v")] * 3), acks=1).error is None
        b.ensure_offsets_topic()
        lo = API_BY_KEY[ApiKey.LIST_OFFSETS].request
        resp = await call(b, ApiKey.LIST_OFFSETS, 7, req(ApiKey.LIST_OFFSETS, replica_id=-1, topics=[
            lo.ListOffsetsTopic(name=name, partitions=[
                lo.ListOffsetsPartition(partition_index=part, timestamp=ts,
                                        current_leader_epoch=epoch)])
            for name, part, ts, epoch in [(TOPIC, 0, -1, -1), (TOPIC, 0, -7, -1),
                                          (TOPIC, 3, -1, -1), (TOPIC, 0, -1, p.leader_epoch + 1)]]))
        assert [(t.partitions[0].error_code, t.partitions[0].offset) for t in resp.topics] == [
            (E.NONE, 3), (E.INVALID_REQUEST, -1), (E.UNKNOWN_TOPIC_OR_PARTITION, -1),
            (E.UNKNOWN_LEADER_EPOCH, -1)]
        dr = API_BY_KEY[ApiKey.DELETE_RECORDS].request
        resp = await call(b, ApiKey.DELETE_RECORDS, 2, req(ApiKey.DELETE_RECORDS, timeout_ms=1000,
                                                           topics=[
            dr.DeleteRecordsTopic(name=name, partitions=[
                dr.DeleteRecordsPartition(partition_index=0, offset=off)])
            for name, off in [(TOPIC, 2), (TOPIC, 9), (CONSUMER_OFFSETS, 0), ("missing", 0)]]))
        assert [(t.partitions[0].error_code, t.partitions[0].low_watermark)
                for t in resp.topics] == [
            (E.NONE, 2), (E.OFFSET_OUT_OF_RANGE, -1), (E.INVALID_TOPIC_EXCEPTION, -1),
            (E.UNKNOWN_TOPIC_OR_PARTITION, -1)]
        ole = API_BY_KEY[ApiKey.OFFSET_FOR_LEADER_EPOCH].request
        resp = await call(b, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, req(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, topics=[ole.OffsetForLeaderTopic(topic=name, partitions=[
                ole.OffsetForLeaderPartition(partition=0, leader_epoch=0,
                                             current_leader_epoch=epoch)])
                for name, epoch in [(TOPIC, -1), (TOPIC, p.leader_epoch - 1), ("missing", -1)]]))
        assert [t.partitions[0].error_code for t in resp.topics] == [
            E.NONE, E.FENCED_LEADER_EPOCH, E.UNKNOWN_TOPIC_OR_PARTITION]

    with_broker(tmp_path, body)


def test_admin_requests_report_per_resource_errors(tmp_path: Path) -> None:
    async def body(b: Broker) -> None:
        md = API_BY_KEY[ApiKey.METADATA].request
        resp = await call(b, ApiKey.METADATA, 12, req(ApiKey.METADATA, topics=[
            md.MetadataRequestTopic(name="missing"), md.MetadataRequestTopic(name="bad name!"),
            md.MetadataRequestTopic(name=None, topic_id=b"\x01" * 16)]))
        assert [t.error_code for t in resp.topics] == [
            E.UNKNOWN_TOPIC_OR_PARTITION, E.INVALID_TOPIC_EXCEPTION, E.UNKNOWN_TOPIC_ID]
        ct = API_BY_KEY[ApiKey.CREATE_TOPICS].request
        resp = await call(b, ApiKey.CREATE_TOPICS, 5, req(ApiKey.CREATE_TOPICS, topics=[
            ct.CreatableTopic(name=name, num_partitions=1, replication_factor=1, configs=[
                ct.CreatableTopicConfig(name=k, value=v) for k, v in configs])
            for name, configs in [("twice", []), ("twice", []), (TOPIC, []),
                                  ("badcfg", [("retention.ms", "soon")])]]))
        assert [t.error_code for t in resp.topics] == [
            E.INVALID_REQUEST, E.INVALID_REQUEST, E.TOPIC_ALREADY_EXISTS, E.INVALID_CONFIG]
        dc = API_BY_KEY[ApiKey.DESCRIBE_CONFIGS].request
        resp = await call(b, ApiKey.DESCRIBE_CONFIGS, 4, req(ApiKey.DESCRIBE_CONFIGS, resources=[
            dc.DescribeConfigsResource(resource_type=rtype, resource_name=name,
                                       configuration_keys=None)
            for rtype, name in [(2, "missing"), (4, "42"), (3, "x")]]))
        assert [r.error_code for r in resp.results] == [
            E.UNKNOWN_TOPIC_OR_PARTITION, E.INVALID_REQUEST, E.INVALID_REQUEST]
        dcl = await call(b, ApiKey.DESCRIBE_CLUSTER, 1,
                         req(ApiKey.DESCRIBE_CLUSTER, endpoint_type=2))
        assert dcl.error_code == E.UNSUPPORTED_ENDPOINT_TYPE
        ip = await call(b, ApiKey.INIT_PRODUCER_ID, 4, req(
            ApiKey.INIT_PRODUCER_ID, transactional_id="tx", transaction_timeout_ms=900001))
        assert (ip.error_code, ip.producer_id) == (E.INVALID_TRANSACTION_TIMEOUT, -1)

    with_broker(tmp_path, body)


async def _open_transaction(b: Broker, txn_id: str) -> tuple[int, int]:
    """InitProducerId for ``txn_id`` (once the state topic has loaded) and TOPIC-0 added."""
    from sparklog.protocol.messages import transactions as tx

    while True:
        init = await call(b, ApiKey.INIT_PRODUCER_ID, 4, tx.InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout_ms=60_000))
        if init.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE):
            break
        await asyncio.sleep(0.05)
    assert init.error_code == E.NONE
    add = tx.AddPartitionsToTxnRequest
    added = await call(b, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=init.producer_id,
        v3_and_below_producer_epoch=init.producer_epoch,
        v3_and_below_topics=[add.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])]))
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0] \
        .partition_error_code == E.NONE
    return init.producer_id, init.producer_epoch


async def _verified_then_aborted(b: Broker, txn_id: str, pid: int, epoch: int,
                                 write: Awaitable[Any], marked: tuple[str, int]) -> Any:
    """Run ``write`` with the coordinator's yes held on the wire (a gate after the real
    verification) until EndTxn(abort) has put its marker in ``marked``; its answer."""
    from sparklog.protocol.messages import transactions as tx

    verifier = b.txn_verifier
    real = verifier.verify_partition
    answered, delivered = asyncio.Event(), asyncio.Event()

    async def answer_on_the_wire(*args: Any) -> E:
        code = await real(*args)  # the coordinator: in the transaction
        answered.set()
        await delivered.wait()  # ... and the answer still on its way back
        return code

    verifier.verify_partition = answer_on_the_wire  # type: ignore[method-assign]
    task = asyncio.ensure_future(write)
    await answered.wait()
    plog = b.replica_manager.get(*marked).log
    before = plog.log_end_offset
    assert (await call(b, ApiKey.END_TXN, 3, tx.EndTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
        committed=False))).error_code == E.NONE
    for _ in range(200):  # the ABORT marker, written by the coordinator
        if plog.log_end_offset > before:
            break
        await asyncio.sleep(0.01)
    assert plog.log_end_offset == before + 1
    delivered.set()
    return await task


def test_a_batch_verified_before_its_transactions_marker_is_refused_after_it(
        tmp_path: Path) -> None:
    """KIP-890's VerificationGuard: the coordinator answers that the batch's partition is in
    the transaction, and before that answer is acted on the client aborts the transaction
    and its marker lands. Appended then, the batch would open a transaction no coordinator
    knows and hold the partition's LSO forever; it gets INVALID_TXN_STATE and the log holds
    only the marker."""
    from tests.helpers.batches import make_batch
    from tests.helpers.requests import produce_request

    async def body(b: Broker) -> None:
        pid, epoch = await _open_transaction(b, "race")
        batch = make_batch(3, producer_id=pid, producer_epoch=epoch, base_sequence=0,
                           is_transactional=True, ts=None)
        resp = await _verified_then_aborted(b, "race", pid, epoch, call(
            b, ApiKey.PRODUCE, 8, produce_request(TOPIC, 0, batch, transactional_id="race")),
            (TOPIC, 0))
        assert resp.responses[0].partition_responses[0].error_code == E.INVALID_TXN_STATE
        plog = b.replica_manager.get(TOPIC, 0).log
        assert plog.log_end_offset == 1  # the marker alone
        assert plog.last_stable_offset == plog.high_watermark == 1  # nothing left open

    with_broker(tmp_path, body)


def test_offsets_verified_before_their_transactions_marker_are_refused_after_it(
        tmp_path: Path) -> None:
    """The same race for TxnOffsetCommit: offsets verified before the ABORT marker reached
    the group's offsets partition would stay pending in the group for good (no marker
    would ever settle them); they get INVALID_TXN_STATE and nothing is pending."""
    from sparklog.protocol.messages import transactions as tx

    async def body(b: Broker) -> None:
        pid, epoch = await _open_transaction(b, "race-offsets")
        gc = b.group_coordinator
        assert gc is not None
        group = next(g for g in (f"g{i}" for i in range(20)) if gc.serves(g))
        # the group committed before (the offsets topic is created by its first write)
        oc_req = API_BY_KEY[ApiKey.OFFSET_COMMIT].request
        oc = await call(b, ApiKey.OFFSET_COMMIT, 8, req(
            ApiKey.OFFSET_COMMIT, group_id=group, generation_id_or_member_epoch=-1, topics=[
                oc_req.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                    oc_req.OffsetCommitRequestPartition(partition_index=0,
                                                        committed_offset=0)])]))
        assert oc.topics[0].partitions[0].error_code == E.NONE
        assert (await call(b, ApiKey.ADD_OFFSETS_TO_TXN, 3, tx.AddOffsetsToTxnRequest(
            transactional_id="race-offsets", producer_id=pid, producer_epoch=epoch,
            group_id=group))).error_code == E.NONE
        toc = tx.TxnOffsetCommitRequest
        commit = call(b, ApiKey.TXN_OFFSET_COMMIT, 3, toc(
            transactional_id="race-offsets", group_id=group, producer_id=pid,
            producer_epoch=epoch, member_id="", topics=[toc.TxnOffsetCommitRequestTopic(
                name=TOPIC, partitions=[toc.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_metadata="")])]))
        resp = await _verified_then_aborted(b, "race-offsets", pid, epoch, commit,
                                            (CONSUMER_OFFSETS, gc.store.partition_for(group)))
        assert resp.topics[0].partitions[0].error_code == E.INVALID_TXN_STATE
        g = gc.groups.get(group)
        assert g is None or pid not in g.pending_txn_offsets

    with_broker(tmp_path, body)
