"""DeleteRecords and OffsetForLeaderEpoch: log-start and epoch queries on led partitions."""

from __future__ import annotations

from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.broker.handlers.per_partition import answer_partitions
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import InvalidTopicError, OffsetOutOfRangeError
from sparklog.protocol.schema import Message, TopLevel


@register(ApiKey.DELETE_RECORDS, 0, 2)
async def handle_delete_records(ctx: RequestContext, request: TopLevel) -> TopLevel:
    resp_cls = api_spec(ApiKey.DELETE_RECORDS).response
    TopicResult, PartResult = resp_cls.DeleteRecordsTopicResult, resp_cls.DeleteRecordsPartitionResult
    rm = ctx.broker.replica_manager

    def answer(t: Message, r: Message) -> Message:
        p = rm.leader_partition(t.name, r.partition_index)
        if p.internal:
            raise InvalidTopicError(f"records of internal topic {t.name} cannot be deleted")
        hw = p.log.high_watermark
        offset = hw if r.offset == -1 else r.offset
        if offset < 0 or offset > hw:
            raise OffsetOutOfRangeError(
                f"{t.name}-{r.partition_index}: {offset} is beyond the high watermark {hw}"
            )
        low = p.log.delete_records(offset)
        return PartResult(partition_index=r.partition_index, low_watermark=low, error_code=0)

    return resp_cls(throttle_time_ms=0, topics=answer_partitions(
        request.topics, answer,
        lambda r, exc: PartResult(partition_index=r.partition_index, low_watermark=-1,
                                  error_code=int(exc.error_code)),
        lambda t, parts: TopicResult(name=t.name, partitions=parts)))


@register(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4)
async def handle_offset_for_leader_epoch(ctx: RequestContext, request: TopLevel) -> TopLevel:
    resp_cls = api_spec(ApiKey.OFFSET_FOR_LEADER_EPOCH).response
    TopicResult, PartResult = resp_cls.OffsetForLeaderTopicResult, resp_cls.EpochEndOffset
    rm = ctx.broker.replica_manager
    get = rm.hosted_partition if request.replica_id >= 0 else rm.leader_partition

    def answer(t: Message, r: Message) -> Message:
        p = get(t.topic, r.partition, r.current_leader_epoch)
        epoch, end = p.log.end_offset_for_epoch(r.leader_epoch)
        return PartResult(error_code=0, partition=r.partition, leader_epoch=epoch, end_offset=end)

    return resp_cls(throttle_time_ms=0, topics=answer_partitions(
        request.topics, answer,
        lambda r, exc: PartResult(error_code=int(exc.error_code), partition=r.partition),
        lambda t, parts: TopicResult(topic=t.topic, partitions=parts)))
