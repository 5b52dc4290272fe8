"""DeleteRecords and OffsetForLeaderEpoch: log-start and epoch queries on led partitions."""

from __future__ import annotations

from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import InvalidTopicError, KafkaError, OffsetOutOfRangeError
from sparklog.protocol.schema import TopLevel


@register(ApiKey.DELETE_RECORDS, 0, 2)
async def handle_delete_records(ctx: RequestContext, request: TopLevel) -> TopLevel:
    resp_cls = api_spec(ApiKey.DELETE_RECORDS).response
    TopicResult, PartResult = resp_cls.DeleteRecordsTopicResult, resp_cls.DeleteRecordsPartitionResult
    rm = ctx.broker.replica_manager
    topics = []
    for t in request.topics:
        parts = []
        for r in t.partitions:
            try:
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
                parts.append(PartResult(partition_index=r.partition_index, low_watermark=low,
                                        error_code=0))
            except KafkaError as exc:
                parts.append(PartResult(partition_index=r.partition_index, low_watermark=-1,
                                        error_code=int(exc.error_code)))
        topics.append(TopicResult(name=t.name, partitions=parts))
    return resp_cls(throttle_time_ms=0, topics=topics)


@register(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4)
async def handle_offset_for_leader_epoch(ctx: RequestContext, request: TopLevel) -> TopLevel:
    resp_cls = api_spec(ApiKey.OFFSET_FOR_LEADER_EPOCH).response
    TopicResult, PartResult = resp_cls.OffsetForLeaderTopicResult, resp_cls.EpochEndOffset
    rm = ctx.broker.replica_manager
    follower = request.replica_id >= 0
    topics = []
    for t in request.topics:
        parts = []
        for r in t.partitions:
            try:
                get = rm.hosted_partition if follower else rm.leader_partition
                p = get(t.topic, r.partition, r.current_leader_epoch)
                epoch, end = p.log.end_offset_for_epoch(r.leader_epoch)
                parts.append(PartResult(error_code=0, partition=r.partition, leader_epoch=epoch,
                                        end_offset=end))
            except KafkaError as exc:
                parts.append(PartResult(error_code=int(exc.error_code), partition=r.partition))
        topics.append(TopicResult(topic=t.topic, partitions=parts))
    return resp_cls(throttle_time_ms=0, topics=topics)
