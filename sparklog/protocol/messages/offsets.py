"""Committed offsets: OffsetCommit (key 8) and OffsetFetch (key 9).
"""

from sparklog.protocol.schema import api, f, schema

# OffsetCommit (generation -1 and empty member id = standalone commit, no group members)
#   v2  retention_time_ms (ignored by modern brokers)
#   v3  response throttle_time_ms
#   v4  same layout (throttling after the response)
#   v5  retention_time_ms removed (KIP-211)
#   v6  committed_leader_epoch per partition (KIP-320)
#   v7  group_instance_id (KIP-345)
#   v8  flexible
OFFSET_COMMIT = api(
    8, "OffsetCommit", versions=(2, 8), flexible=8,
    request=schema("OffsetCommitRequest", [
        f("group_id", "string"),
        f("generation_id_or_member_epoch", "int32", "1+", default=-1),
        f("member_id", "string", "1+"),
        f("group_instance_id", "string", "7+", nullable="7+", default=None),
        f("retention_time_ms", "int64", "2-4", default=-1),
        f("topics", "[]OffsetCommitRequestTopic", fields=[
            f("name", "string"),
            f("partitions", "[]OffsetCommitRequestPartition", fields=[
                f("partition_index", "int32"),
                f("committed_offset", "int64"),
                f("committed_leader_epoch", "int32", "6+", default=-1),
                f("committed_metadata", "string", nullable="0+"),
            ]),
        ]),
    ]),
    response=schema("OffsetCommitResponse", [
        f("throttle_time_ms", "int32", "3+"),
        f("topics", "[]OffsetCommitResponseTopic", fields=[
            f("name", "string"),
            f("partitions", "[]OffsetCommitResponsePartition", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
            ]),
        ]),
    ]),
)
OffsetCommitRequest = OFFSET_COMMIT.request
OffsetCommitResponse = OFFSET_COMMIT.response


# OffsetFetch
#   v1  offsets kept by the coordinator (not ZooKeeper)
#   v2  topics may be null = every partition of the group; top-level error_code
#   v3  response throttle_time_ms
#   v4  same layout (throttling after the response)
#   v5  committed_leader_epoch per partition (KIP-320)
#   v6  flexible
#   v7  require_stable: wait for pending transactional commits (KIP-447)
OFFSET_FETCH = api(
    9, "OffsetFetch", versions=(1, 7), flexible=6,
    request=schema("OffsetFetchRequest", [
        f("group_id", "string"),
        f("topics", "[]OffsetFetchRequestTopic", nullable="2+", fields=[
            f("name", "string"),
            f("partition_indexes", "[]int32"),
        ]),
        f("require_stable", "bool", "7+"),
    ]),
    response=schema("OffsetFetchResponse", [
        f("throttle_time_ms", "int32", "3+"),
        f("topics", "[]OffsetFetchResponseTopic", fields=[
            f("name", "string"),
            f("partitions", "[]OffsetFetchResponsePartition", fields=[
                f("partition_index", "int32"),
                f("committed_offset", "int64"),
                f("committed_leader_epoch", "int32", "5+", default=-1),
                f("metadata", "string", nullable="0+"),
                f("error_code", "int16"),
            ]),
        ]),
        f("error_code", "int16", "2+"),
    ]),
)
OffsetFetchRequest = OFFSET_FETCH.request
OffsetFetchResponse = OFFSET_FETCH.response
