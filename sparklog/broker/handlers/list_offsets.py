"""ListOffsets: earliest / latest (= high watermark, or LSO for read_committed) / max
timestamp / first offset at or after a timestamp.

Every special timestamp is answered at every version (librdkafka sends -3 even at v3),
unknown special values get a per-partition error; the connection is never dropped for them.
"""

from __future__ import annotations

from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.broker.handlers.per_partition import answer_partitions
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import InvalidRequestError
from sparklog.protocol.schema import Message, TopLevel
from sparklog.storage.partition_log import PartitionLog

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1


def lookup_offset(plog: PartitionLog, timestamp: int, isolation_level: int,
                  follower: bool = False) -> tuple[int, int, int]:
    """(timestamp, offset, leader_epoch) for one ListOffsets partition entry."""
    if follower:
        limit = plog.log_end_offset
    elif isolation_level == READ_COMMITTED:
        limit = plog.last_stable_offset
    else:
        limit = plog.high_watermark
    if timestamp == LATEST:
        return -1, limit, plog.latest_epoch
    if timestamp in (EARLIEST, EARLIEST_LOCAL, LATEST_TIERED, MAX_TIMESTAMP) or timestamp >= 0:
        found = plog.offset_for_timestamp(timestamp)
        if found is None or (timestamp not in (EARLIEST, EARLIEST_LOCAL, LATEST_TIERED)
                             and found.offset >= limit):
            return -1, -1, -1
        return found.timestamp, found.offset, found.leader_epoch
    raise InvalidRequestError(f"unknown special timestamp {timestamp}")


@register(ApiKey.LIST_OFFSETS, 1, 7)
async def handle_list_offsets(ctx: RequestContext, request: TopLevel) -> TopLevel:
    resp_cls = api_spec(ApiKey.LIST_OFFSETS).response
    TopicResp, PartResp = resp_cls.ListOffsetsTopicResponse, resp_cls.ListOffsetsPartitionResponse
    rm = ctx.broker.replica_manager
    follower = request.replica_id >= 0

    def answer(t: Message, r: Message) -> Message:
        p = rm.leader_partition(t.name, r.partition_index, r.current_leader_epoch)
        ts, off, epoch = lookup_offset(p.log, r.timestamp, request.isolation_level, follower)
        return PartResp(partition_index=r.partition_index, error_code=0, timestamp=ts,
                        offset=off, leader_epoch=epoch)

    return resp_cls(throttle_time_ms=0, topics=answer_partitions(
        request.topics, answer,
        lambda r, exc: PartResp(partition_index=r.partition_index, error_code=int(exc.error_code)),
        lambda t, parts: TopicResp(name=t.name, partitions=parts)))
