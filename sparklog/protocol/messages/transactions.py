"""Idempotent and transactional producers: InitProducerId (22), AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27), TxnOffsetCommit (28).
"""

from sparklog.protocol.schema import api, f, schema

# InitProducerId (KIP-98)
#   v0  transactional id (null = idempotent only) and transaction timeout -> id + epoch
#   v1  same layout (throttling after the response)
#   v2  flexible
#   v3  producer_id/producer_epoch of the caller, to bump its epoch after errors (KIP-360)
#   v4  same layout (PRODUCER_FENCED may be returned, KIP-588)
INIT_PRODUCER_ID = api(
    22, "InitProducerId", versions=(0, 4), flexible=2,
    request=schema("InitProducerIdRequest", [
        f("transactional_id", "string", nullable="0+"),
        f("transaction_timeout_ms", "int32"),
        f("producer_id", "int64", "3+", default=-1),
        f("producer_epoch", "int16", "3+", default=-1),
    ]),
    response=schema("InitProducerIdResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("producer_id", "int64", default=-1),
        f("producer_epoch", "int16"),
    ]),
)
InitProducerIdRequest = INIT_PRODUCER_ID.request
InitProducerIdResponse = INIT_PRODUCER_ID.response


# AddPartitionsToTxn (field names as Kafka spells them since KIP-890 made v4+ batched)
#   v0  transactional id, producer id/epoch, topics with partitions
#   v1  same layout (throttling after the response)
#   v2  same layout (PRODUCER_FENCED semantics, KIP-588)
#   v3  flexible
ADD_PARTITIONS_TO_TXN = api(
    24, "AddPartitionsToTxn", versions=(0, 3), flexible=3,
    request=schema("AddPartitionsToTxnRequest", [
        f("v3_and_below_transactional_id", "string"),
        f("v3_and_below_producer_id", "int64"),
        f("v3_and_below_producer_epoch", "int16"),
        f("v3_and_below_topics", "[]AddPartitionsToTxnTopic"),
    ], structs={
        "AddPartitionsToTxnTopic": [
            f("name", "string"),
            f("partitions", "[]int32"),
        ],
    }),
    response=schema("AddPartitionsToTxnResponse", [
        f("throttle_time_ms", "int32"),
        f("results_by_topic_v3_and_below", "[]AddPartitionsToTxnTopicResult"),
    ], structs={
        "AddPartitionsToTxnTopicResult": [
            f("name", "string"),
            f("results_by_partition", "[]AddPartitionsToTxnPartitionResult"),
        ],
        "AddPartitionsToTxnPartitionResult": [
            f("partition_index", "int32"),
            f("partition_error_code", "int16"),
        ],
    }),
)
AddPartitionsToTxnRequest = ADD_PARTITIONS_TO_TXN.request
AddPartitionsToTxnResponse = ADD_PARTITIONS_TO_TXN.response


# AddOffsetsToTxn
#   v0  adds a group's offsets partition to the transaction
#   v1  same layout (throttling after the response)
#   v2  same layout (PRODUCER_FENCED semantics, KIP-588)
#   v3  flexible
ADD_OFFSETS_TO_TXN = api(
    25, "AddOffsetsToTxn", versions=(0, 3), flexible=3,
    request=schema("AddOffsetsToTxnRequest", [
        f("transactional_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("group_id", "string"),
    ]),
    response=schema("AddOffsetsToTxnResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
    ]),
)
AddOffsetsToTxnRequest = ADD_OFFSETS_TO_TXN.request
AddOffsetsToTxnResponse = ADD_OFFSETS_TO_TXN.response


# EndTxn
#   v0  committed true = commit, false = abort
#   v1  same layout (throttling after the response)
#   v2  same layout (PRODUCER_FENCED semantics, KIP-588)
#   v3  flexible
END_TXN = api(
    26, "EndTxn", versions=(0, 3), flexible=3,
    request=schema("EndTxnRequest", [
        f("transactional_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("committed", "bool"),
    ]),
    response=schema("EndTxnResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
    ]),
)
EndTxnRequest = END_TXN.request
EndTxnResponse = END_TXN.response


# TxnOffsetCommit
#   v0  offsets committed inside a transaction
#   v1  same layout (throttling after the response)
#   v2  committed_leader_epoch per partition (KIP-320)
#   v3  flexible; generation_id, member_id, group_instance_id for fencing (KIP-447)
TXN_OFFSET_COMMIT = api(
    28, "TxnOffsetCommit", versions=(0, 3), flexible=3,
    request=schema("TxnOffsetCommitRequest", [
        f("transactional_id", "string"),
        f("group_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("generation_id", "int32", "3+", default=-1),
        f("member_id", "string", "3+"),
        f("group_instance_id", "string", "3+", nullable="3+", default=None),
        f("topics", "[]TxnOffsetCommitRequestTopic", fields=[
            f("name", "string"),
            f("partitions", "[]TxnOffsetCommitRequestPartition", fields=[
                f("partition_index", "int32"),
                f("committed_offset", "int64"),
                f("committed_leader_epoch", "int32", "2+", default=-1),
                f("committed_metadata", "string", nullable="0+"),
            ]),
        ]),
    ]),
    response=schema("TxnOffsetCommitResponse", [
        f("throttle_time_ms", "int32"),
        f("topics", "[]TxnOffsetCommitResponseTopic", fields=[
            f("name", "string"),
            f("partitions", "[]TxnOffsetCommitResponsePartition", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
            ]),
        ]),
    ]),
)
TxnOffsetCommitRequest = TXN_OFFSET_COMMIT.request
TxnOffsetCommitResponse = TXN_OFFSET_COMMIT.response


# WriteTxnMarkers (coordinator -> partition leaders: write COMMIT/ABORT control batches)
#   v0  markers per producer with topics/partitions and the coordinator epoch
#   v1  flexible
WRITE_TXN_MARKERS = api(
    27, "WriteTxnMarkers", versions=(0, 1), flexible=1,
    request=schema("WriteTxnMarkersRequest", [
        f("markers", "[]WritableTxnMarker", fields=[
            f("producer_id", "int64"),
            f("producer_epoch", "int16"),
            f("transaction_result", "bool"),
            f("topics", "[]WritableTxnMarkerTopic", fields=[
                f("name", "string"),
                f("partition_indexes", "[]int32"),
            ]),
            f("coordinator_epoch", "int32"),
        ]),
    ]),
    response=schema("WriteTxnMarkersResponse", [
        f("markers", "[]WritableTxnMarkerResult", fields=[
            f("producer_id", "int64"),
            f("topics", "[]WritableTxnMarkerTopicResult", fields=[
                f("name", "string"),
                f("partitions", "[]WritableTxnMarkerPartitionResult", fields=[
                    f("partition_index", "int32"),
                    f("error_code", "int16"),
                ]),
            ]),
        ]),
    ]),
)
WriteTxnMarkersRequest = WRITE_TXN_MARKERS.request
WriteTxnMarkersResponse = WRITE_TXN_MARKERS.response
