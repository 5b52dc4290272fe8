"""Reading partitions: Fetch (key 1), ListOffsets (key 2), OffsetForLeaderEpoch (key 23).

The ``records`` field of a Fetch response may hold any object with an integer ``size``
(e.g. a file slice); ``Writer.chunks()`` keeps it out of the byte buffer so the server can
``os.sendfile`` it.
"""

from sparklog.protocol.schema import api, f, schema

# Fetch
#   v4  isolation_level; partitions report last_stable_offset and aborted_transactions
#       (exactly-once, KIP-98); record sets are RecordBatch v2 from here on
#   v5  log_start_offset in request (followers) and response (KIP-107)
#   v6  same layout (KAFKA_STORAGE_ERROR may be returned)
#   v7  incremental fetch sessions: session id/epoch, forgotten topics (KIP-227);
#       sparklog always answers session_id 0 (no session)
#   v8  same layout (quota throttling after the response)
#   v9  current_leader_epoch per partition for fencing (KIP-320)
#   v10 same layout (ZSTD record sets allowed, KIP-110)
#   v11 rack_id; response names a preferred_read_replica (KIP-392)
#   v12 flexible; last_fetched_epoch (truncation detection, KIP-595); tagged diverging
#       epoch / current leader / snapshot id in the response
#   v13 topics addressed by topic_id instead of name (KIP-516)
#   v14 same layout (OFFSET_MOVED_TO_TIERED_STORAGE may be returned, KIP-405)
#   v15 followers identify through the tagged replica_state (id + broker epoch), replacing
#       replica_id (KIP-903)
#   v16 same request; the response may list node_endpoints of new leaders (KIP-951)
FETCH = api(
    1, "Fetch", versions=(4, 16), flexible=12,
    request=schema("FetchRequest", [
        f("cluster_id", "string", "12+", nullable="12+", default=None, tag=0),
        f("replica_id", "int32", "0-14", default=-1),
        f("replica_state", "ReplicaState", "15+", tag=1, fields=[
            f("replica_id", "int32", "15+", default=-1),
            f("replica_epoch", "int64", "15+", default=-1),
        ]),
        f("max_wait_ms", "int32"),
        f("min_bytes", "int32"),
        f("max_bytes", "int32", "3+", default=0x7fffffff),
        f("isolation_level", "int8", "4+"),
        f("session_id", "int32", "7+"),
        f("session_epoch", "int32", "7+", default=-1),
        f("topics", "[]FetchTopic", fields=[
            f("topic", "string", "0-12"),
            f("topic_id", "uuid", "13+"),
            f("partitions", "[]FetchPartition", fields=[
                f("partition", "int32"),
                f("current_leader_epoch", "int32", "9+", default=-1),
                f("fetch_offset", "int64"),
                f("last_fetched_epoch", "int32", "12+", default=-1),
                f("log_start_offset", "int64", "5+", default=-1),
                f("partition_max_bytes", "int32"),
            ]),
        ]),
        f("forgotten_topics_data", "[]ForgottenTopic", "7+", fields=[
            f("topic", "string", "7-12"),
            f("topic_id", "uuid", "13+"),
            f("partitions", "[]int32", "7+"),
        ]),
        f("rack_id", "string", "11+"),
    ]),
    response=schema("FetchResponse", [
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16", "7+"),
        f("session_id", "int32", "7+"),
        f("responses", "[]FetchableTopicResponse", fields=[
            f("topic", "string", "0-12"),
            f("topic_id", "uuid", "13+"),
            f("partitions", "[]PartitionData", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("high_watermark", "int64"),
                f("last_stable_offset", "int64", "4+", default=-1),
                f("log_start_offset", "int64", "5+", default=-1),
                f("diverging_epoch", "EpochEndOffset", "12+", tag=0, fields=[
                    f("epoch", "int32", "12+", default=-1),
                    f("end_offset", "int64", "12+", default=-1),
                ]),
                f("current_leader", "LeaderIdAndEpoch", "12+", tag=1, fields=[
                    f("leader_id", "int32", "12+", default=-1),
                    f("leader_epoch", "int32", "12+", default=-1),
                ]),
                f("snapshot_id", "SnapshotId", "12+", tag=2, fields=[
                    f("end_offset", "int64", default=-1),
                    f("epoch", "int32", default=-1),
                ]),
                f("aborted_transactions", "[]AbortedTransaction", "4+", nullable="4+", fields=[
                    f("producer_id", "int64", "4+"),
                    f("first_offset", "int64", "4+"),
                ]),
                f("preferred_read_replica", "int32", "11+", default=-1),
                # never null: librdkafka rejects a null record set (empty is fine)
                f("records", "records", nullable="0+", default=b""),
            ]),
        ]),
        f("node_endpoints", "[]NodeEndpoint", "16+", tag=0, fields=[
            f("node_id", "int32", "16+"),
            f("host", "string", "16+"),
            f("port", "int32", "16+"),
            f("rack", "string", "16+", nullable="16+", default=None),
        ]),
    ]),
)
FetchRequest = FETCH.request
FetchResponse = FETCH.response


# ListOffsets (timestamps: -1 latest, -2 earliest, -3 max timestamp from v7)
#   v1  one (timestamp, offset) answer per partition instead of an offset list
#   v2  isolation_level in the request; throttle_time_ms in the response
#   v3  same layout (throttling after the response)
#   v4  current_leader_epoch in the request, leader_epoch in the response (KIP-320)
#   v5  same layout (OFFSET_NOT_AVAILABLE may be returned)
#   v6  flexible
#   v7  same layout; accepts timestamp -3 = offset of the max timestamp (KIP-734)
#   v8  accepts timestamp -4 = earliest offset still in local storage (KIP-405)
#   v9  accepts timestamp -5 = latest tiered offset (KIP-1005)
LIST_OFFSETS = api(
    2, "ListOffsets", versions=(1, 9), flexible=6,
    request=schema("ListOffsetsRequest", [
        f("replica_id", "int32"),
        f("isolation_level", "int8", "2+"),
        f("topics", "[]ListOffsetsTopic", fields=[
            f("name", "string"),
            f("partitions", "[]ListOffsetsPartition", fields=[
                f("partition_index", "int32"),
                f("current_leader_epoch", "int32", "4+", default=-1),
                f("timestamp", "int64"),
            ]),
        ]),
    ]),
    response=schema("ListOffsetsResponse", [
        f("throttle_time_ms", "int32", "2+"),
        f("topics", "[]ListOffsetsTopicResponse", fields=[
            f("name", "string"),
            f("partitions", "[]ListOffsetsPartitionResponse", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("timestamp", "int64", "1+", default=-1),
                f("offset", "int64", "1+", default=-1),
                f("leader_epoch", "int32", "4+", default=-1),
            ]),
        ]),
    ]),
)
ListOffsetsRequest = LIST_OFFSETS.request
ListOffsetsResponse = LIST_OFFSETS.response


# OffsetForLeaderEpoch (end offset of a leader epoch: log truncation detection)
#   v0  partition + leader_epoch -> end_offset
#   v1  response also returns the leader_epoch the end offset belongs to (KIP-279)
#   v2  current_leader_epoch for fencing (KIP-320); response throttle_time_ms
#   v3  replica_id (-1 = consumer, -2 = debug; followers send their id)
#   v4  flexible
OFFSET_FOR_LEADER_EPOCH = api(
    23, "OffsetForLeaderEpoch", versions=(0, 4), flexible=4,
    request=schema("OffsetForLeaderEpochRequest", [
        f("replica_id", "int32", "3+", default=-2),
        f("topics", "[]OffsetForLeaderTopic", fields=[
            f("topic", "string"),
            f("partitions", "[]OffsetForLeaderPartition", fields=[
                f("partition", "int32"),
                f("current_leader_epoch", "int32", "2+", default=-1),
                f("leader_epoch", "int32"),
            ]),
        ]),
    ]),
    response=schema("OffsetForLeaderEpochResponse", [
        f("throttle_time_ms", "int32", "2+"),
        f("topics", "[]OffsetForLeaderTopicResult", fields=[
            f("topic", "string"),
            f("partitions", "[]EpochEndOffset", fields=[
                f("error_code", "int16"),
                f("partition", "int32"),
                f("leader_epoch", "int32", "1+", default=-1),
                f("end_offset", "int64", default=-1),
            ]),
        ]),
    ]),
)
OffsetForLeaderEpochRequest = OFFSET_FOR_LEADER_EPOCH.request
OffsetForLeaderEpochResponse = OFFSET_FOR_LEADER_EPOCH.response
