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
#   v9  same layout; usable by consumer-protocol groups, member epoch in the generation
#       field (KIP-848)
OFFSET_COMMIT = api(
    8, "OffsetCommit", versions=(2, 9), flexible=8,
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
#   v8  batched: a list of groups, each with its topics, results per group (KIP-709)
#   v9  member_id / member_epoch per group (KIP-848)
OFFSET_FETCH = api(
    9, "OffsetFetch", versions=(1, 9), flexible=6,
    request=schema("OffsetFetchRequest", [
        f("group_id", "string", "0-7"),
        f("topics", "[]OffsetFetchRequestTopic", "0-7", nullable="2-7", fields=[
            f("name", "string", "0-7"),
            f("partition_indexes", "[]int32", "0-7"),
        ]),
        f("groups", "[]OffsetFetchRequestGroup", "8+", fields=[
            f("group_id", "string", "8+"),
            f("member_id", "string", "9+", nullable="9+", default=None),
            f("member_epoch", "int32", "9+", default=-1),
            f("topics", "[]OffsetFetchRequestTopics", "8+", nullable="8+", fields=[
                f("name", "string", "8+"),
                f("partition_indexes", "[]int32", "8+"),
            ]),
        ]),
        f("require_stable", "bool", "7+"),
    ]),
    response=schema("OffsetFetchResponse", [
        f("throttle_time_ms", "int32", "3+"),
        f("topics", "[]OffsetFetchResponseTopic", "0-7", fields=[
            f("name", "string", "0-7"),
            f("partitions", "[]OffsetFetchResponsePartition", "0-7", fields=[
                f("partition_index", "int32", "0-7"),
                f("committed_offset", "int64", "0-7"),
                f("committed_leader_epoch", "int32", "5-7", default=-1),
                f("metadata", "string", "0-7", nullable="0-7"),
                f("error_code", "int16", "0-7"),
            ]),
        ]),
        f("error_code", "int16", "2-7"),
        f("groups", "[]OffsetFetchResponseGroup", "8+", fields=[
            f("group_id", "string", "8+"),
            f("topics", "[]OffsetFetchResponseTopics", "8+", fields=[
                f("name", "string", "8+"),
                f("partitions", "[]OffsetFetchResponsePartitions", "8+", fields=[
                    f("partition_index", "int32", "8+"),
                    f("committed_offset", "int64", "8+"),
                    f("committed_leader_epoch", "int32", "8+", default=-1),
                    f("metadata", "string", "8+", nullable="8+"),
                    f("error_code", "int16", "8+"),
                ]),
            ]),
            f("error_code", "int16", "8+"),
        ]),
    ]),
)
OffsetFetchRequest = OFFSET_FETCH.request
OffsetFetchResponse = OFFSET_FETCH.response
