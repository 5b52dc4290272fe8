"""Transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
WriteTxnMarkers, DescribeTransactions, ListTransactions (InitProducerId is in
``producer_id``).

Thin translations between wire messages and ``TransactionCoordinator`` /
``GroupCoordinator`` calls; all semantics live in ``sparklog.broker.txn``. While the
broker has no coordinator (not started, or stopping) requests get
COORDINATOR_NOT_AVAILABLE. PRODUCER_FENCED exists from KIP-588's versions on (InitProducerId
v4, AddPartitionsToTxn/AddOffsetsToTxn/EndTxn v2, TxnOffsetCommit v3); older versions get
INVALID_PRODUCER_EPOCH, which their clients treat as fencing.

Versions: the client forms of each API up to the last one whose meaning sparklog serves
(KIP-890 part 2's epoch bump per transaction, EndTxn v5 / TxnOffsetCommit v5, is not);
AddPartitionsToTxn v4-v5 is the broker-to-broker verify form of KIP-890 part 1.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from sparklog.broker.acks import AcksAllWait, wait_replicated
from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.broker.group.records import OffsetAndMetadata
from sparklog.broker.txn.coordinator import TransactionCoordinator
from sparklog.broker.txn.records import TopicPartition
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.internal_topics import CONSUMER_OFFSETS
from sparklog.protocol.schema import Message, TopLevel

E = ErrorCode


def fenced_code(err: ErrorCode, version: int, first_fenced_version: int) -> ErrorCode:
    """PRODUCER_FENCED as the request's version knows it (KIP-588)."""
    if err == E.PRODUCER_FENCED and version < first_fenced_version:
        return E.INVALID_PRODUCER_EPOCH
    return err


def _coordinator(ctx: RequestContext) -> TransactionCoordinator | None:
    return ctx.broker.txn_coordinator


def _by_topic(results: dict[TopicPartition, ErrorCode], topic_cls: type[Message],
              part_cls: type[Message]) -> list[Message]:
    topics: dict[str, list[Message]] = {}
    for (topic, p), err in results.items():
        topics.setdefault(topic, []).append(part_cls(partition_index=p,
                                                     partition_error_code=int(err)))
    return [topic_cls(name=t, results_by_partition=ps) for t, ps in topics.items()]


async def _add_partitions(ctx: RequestContext, tc: TransactionCoordinator | None,
                    transactional_id: str, producer_id: int, producer_epoch: int,
                    partitions: list[TopicPartition], verify_only: bool
                    ) -> dict[TopicPartition, ErrorCode]:
    """One transaction's AddPartitionsToTxn: every partition gets the outcome, unknown
    partitions UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED then."""
    if tc is None:
        return dict.fromkeys(partitions, E.COORDINATOR_NOT_AVAILABLE)
    if verify_only:
        return tc.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
    md = ctx.broker.metadata
    unknown = {tp for tp in partitions
               if (info := md.topic(tp[0])) is None or tp[1] not in info.partitions}
    if unknown:
        return {tp: E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED
                for tp in partitions}
    err = await tc.add_partitions(transactional_id, producer_id, producer_epoch, partitions)
    return dict.fromkeys(partitions, fenced_code(err, ctx.api_version, 2))


@register(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5)
async def handle_add_partitions_to_txn(ctx: RequestContext, request: TopLevel) -> TopLevel:
    cls = api_spec(ApiKey.ADD_PARTITIONS_TO_TXN).response
    TR, PR = cls.AddPartitionsToTxnTopicResult, cls.AddPartitionsToTxnPartitionResult
    tc = _coordinator(ctx)
    if ctx.api_version <= 3:
        parts = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
        res = await _add_partitions(ctx, tc, request.v3_and_below_transactional_id,
                                    request.v3_and_below_producer_id,
                                    request.v3_and_below_producer_epoch, parts,
                                    verify_only=False)
        return cls(throttle_time_ms=0, results_by_topic_v3_and_below=_by_topic(res, TR, PR))
    out = []
    for txn in request.transactions:
        parts = [(t.name, p) for t in txn.topics for p in t.partitions]
        res = await _add_partitions(ctx, tc, txn.transactional_id, txn.producer_id,
                                    txn.producer_epoch, parts, verify_only=txn.verify_only)
        out.append(cls.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                topic_results=_by_topic(res, TR, PR)))
    return cls(throttle_time_ms=0, error_code=0, results_by_transaction=out)


async def _one_error(ctx: RequestContext,
                     call: Callable[[TransactionCoordinator], Awaitable[ErrorCode]]) -> TopLevel:
    """The response of an API whose answer is one error code (fenced per KIP-588 from v2)."""
    tc = _coordinator(ctx)
    err = (E.COORDINATOR_NOT_AVAILABLE if tc is None
           else fenced_code(await call(tc), ctx.api_version, 2))
    return api_spec(ctx.api_key).response(throttle_time_ms=0, error_code=int(err))


@register(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4)
async def handle_add_offsets_to_txn(ctx: RequestContext, request: TopLevel) -> TopLevel:
    return await _one_error(ctx, lambda tc: tc.add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch,
        request.group_id))


@register(ApiKey.END_TXN, 0, 4)
async def handle_end_txn(ctx: RequestContext, request: TopLevel) -> TopLevel:
    return await _one_error(ctx, lambda tc: tc.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch,
        request.committed))


@register(ApiKey.TXN_OFFSET_COMMIT, 0, 4)
async def handle_txn_offset_commit(ctx: RequestContext, request: TopLevel) -> TopLevel:
    cls = api_spec(ApiKey.TXN_OFFSET_COMMIT).response
    RT, RP = cls.TxnOffsetCommitResponseTopic, cls.TxnOffsetCommitResponsePartition
    offsets = {(t.name, p.partition_index): OffsetAndMetadata(
                   p.committed_offset, p.committed_leader_epoch, p.committed_metadata or "")
               for t in request.topics for p in t.partitions}
    gc = ctx.broker.group_coordinator
    if gc is None:
        results = dict.fromkeys(offsets, E.COORDINATOR_NOT_AVAILABLE)
    elif (err := await ctx.broker.txn_verifier.verify_guarded(
            request.transactional_id, request.producer_id, request.producer_epoch,
            (CONSUMER_OFFSETS, gc.store.partition_for(request.group_id)))) != E.NONE:
        # KIP-890: offsets only into a transaction that has the group's partition (after
        # AddOffsetsToTxn), else no marker would ever settle them; asked of the id's
        # coordinator wherever it is (COORDINATOR_NOT_AVAILABLE while it cannot answer,
        # as Kafka answers an offsets write short of replicas)
        code = E.COORDINATOR_NOT_AVAILABLE if err == E.NOT_ENOUGH_REPLICAS else err
        results = dict.fromkeys(offsets, fenced_code(code, ctx.api_version, 3))
    else:
        v3 = ctx.api_version >= 3
        results = gc.txn_commit_offsets(
            request.group_id, request.producer_id, request.producer_epoch,
            request.generation_id if v3 else -1, (request.member_id or "") if v3 else "",
            request.group_instance_id if v3 else None, offsets)
    topics: dict[str, list[Message]] = {}
    for (topic, p), err in results.items():
        topics.setdefault(topic, []).append(RP(partition_index=p, error_code=int(err)))
    return cls(throttle_time_ms=0, topics=[RT(name=n, partitions=ps) for n, ps in topics.items()])


@register(ApiKey.WRITE_TXN_MARKERS, 0, 1)
async def handle_write_txn_markers(ctx: RequestContext, request: TopLevel) -> TopLevel:
    """A coordinator's markers: appended where this broker leads the partition (elsewhere
    NOT_LEADER_OR_FOLLOWER: the coordinator asks the new leader), answered once every
    in-sync replica has them (Kafka appends markers with required acks -1)."""
    cls = api_spec(ApiKey.WRITE_TXN_MARKERS).response
    MR, TR, PR = (cls.WritableTxnMarkerResult, cls.WritableTxnMarkerTopicResult,
                  cls.WritableTxnMarkerPartitionResult)
    writer = ctx.broker.txn_markers
    results: list[dict[TopicPartition, ErrorCode]] = []
    waits: list[AcksAllWait] = []
    for m in request.markers:
        parts = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        res, appended = writer.write(m.producer_id, m.producer_epoch, m.transaction_result,
                                     m.coordinator_epoch, parts)
        results.append(res)
        waits += appended
    failed = await wait_replicated(ctx.park, waits, ctx.broker.request_timeout_ms)
    out = []
    for m, res in zip(request.markers, results, strict=True):
        topics: dict[str, list[Message]] = {}
        for tp, err in res.items():
            code = failed.get(tp, err) if err is E.NONE else err
            topics.setdefault(tp[0], []).append(PR(partition_index=tp[1], error_code=int(code)))
        out.append(MR(producer_id=m.producer_id,
                      topics=[TR(name=n, partitions=ps) for n, ps in topics.items()]))
    return cls(markers=out)


@register(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)
async def handle_describe_transactions(ctx: RequestContext, request: TopLevel) -> TopLevel:
    cls = api_spec(ApiKey.DESCRIBE_TRANSACTIONS).response
    TS, TD = cls.TransactionState, cls.TopicData
    tc = _coordinator(ctx)
    out = []
    for tid in request.transactional_ids:
        err, m = (E.COORDINATOR_NOT_AVAILABLE, None) if tc is None else tc.describe(tid)
        if m is None:
            out.append(TS(error_code=int(err), transactional_id=tid, transaction_state="",
                          transaction_timeout_ms=0, transaction_start_time_ms=-1,
                          producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        topics: dict[str, list[int]] = {}
        for topic, p in sorted(m.partitions):
            topics.setdefault(topic, []).append(p)
        out.append(TS(error_code=0, transactional_id=tid,
                      transaction_state=m.state.kafka_name,
                      transaction_timeout_ms=m.timeout_ms,
                      transaction_start_time_ms=m.start_ms, producer_id=m.producer_id,
                      producer_epoch=m.producer_epoch,
                      topics=[TD(topic=t, partitions=ps) for t, ps in topics.items()]))
    return cls(throttle_time_ms=0, transaction_states=out)


@register(ApiKey.LIST_TRANSACTIONS, 0, 2)
async def handle_list_transactions(ctx: RequestContext, request: TopLevel) -> TopLevel:
    cls = api_spec(ApiKey.LIST_TRANSACTIONS).response
    tc = _coordinator(ctx)
    if tc is None:
        return cls(throttle_time_ms=0, error_code=int(E.COORDINATOR_NOT_AVAILABLE),
                   unknown_state_filters=[], transaction_states=[])
    try:
        found = tc.list_transactions(
            request.state_filters, request.producer_id_filters,
            request.duration_filter if ctx.api_version >= 1 else -1,
            request.transactional_id_pattern if ctx.api_version >= 2 else None)
    except re.error:
        return cls(throttle_time_ms=0, error_code=int(E.INVALID_REGULAR_EXPRESSION),
                   unknown_state_filters=[], transaction_states=[])
    return cls(throttle_time_ms=0, error_code=0, unknown_state_filters=found.unknown_states,
               transaction_states=[
                   cls.TransactionState(transactional_id=m.transactional_id,
                                        producer_id=m.producer_id,
                                        transaction_state=m.state.kafka_name)
                   for m in found.transactions])
