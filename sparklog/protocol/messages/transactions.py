"""Idempotent and transactional producers: InitProducerId (22), AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27), TxnOffsetCommit (28), and the
admin side: DescribeTransactions (65), ListTransactions (66).
"""

from sparklog.protocol.schema import api, f, schema

# InitProducerId (KIP-98)
#   v0  transactional id (null = idempotent only) and transaction timeout -> id + epoch
#   v1  same layout (throttling after the response)
#   v2  flexible
#   v3  producer_id/producer_epoch of the caller, to bump its epoch after errors (KIP-360)
#   v4  same layout (PRODUCER_FENCED may be returned, KIP-588)
#   v5  same layout (TRANSACTION_ABORTABLE may be returned, KIP-890)
#   v6  enable_2pc and keep_prepared_txn; the response names the transaction kept open
#       (KIP-939 two-phase commit)
INIT_PRODUCER_ID = api(
    22, "InitProducerId", versions=(0, 6), flexible=2,
    request=schema("InitProducerIdRequest", [
        f("transactional_id", "string", nullable="0+"),
        f("transaction_timeout_ms", "int32"),
        f("producer_id", "int64", "3+", default=-1),
        f("producer_epoch", "int16", "3+", default=-1),
        f("enable_2pc", "bool", "6+", default=False),
        f("keep_prepared_txn", "bool", "6+", default=False),
    ]),
    response=schema("InitProducerIdResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("producer_id", "int64", default=-1),
        f("producer_epoch", "int16"),
        f("ongoing_txn_producer_id", "int64", "6+", default=-1),
        f("ongoing_txn_producer_epoch", "int16", "6+", default=-1),
    ]),
)
InitProducerIdRequest = INIT_PRODUCER_ID.request
InitProducerIdResponse = INIT_PRODUCER_ID.response


# AddPartitionsToTxn (v0-v3 fields carry the v3_and_below_ prefix Kafka gave them in KIP-890)
#   v0  transactional id, producer id/epoch, topics with partitions
#   v1  same layout (throttling after the response)
#   v2  same layout (PRODUCER_FENCED semantics, KIP-588)
#   v3  flexible
#   v4  batched by transaction (broker to broker), with verify_only (KIP-890); results
#       per transaction and a top-level error_code
#   v5  same layout (TRANSACTION_ABORTABLE may be returned, KIP-890)
ADD_PARTITIONS_TO_TXN = api(
    24, "AddPartitionsToTxn", versions=(0, 5), flexible=3,
    request=schema("AddPartitionsToTxnRequest", [
        f("transactions", "[]AddPartitionsToTxnTransaction", "4+", fields=[
            f("transactional_id", "string", "4+"),
            f("producer_id", "int64", "4+"),
            f("producer_epoch", "int16", "4+"),
            f("verify_only", "bool", "4+", default=True),
            f("topics", "[]AddPartitionsToTxnTopic", "4+"),
        ]),
        f("v3_and_below_transactional_id", "string", "0-3"),
        f("v3_and_below_producer_id", "int64", "0-3"),
        f("v3_and_below_producer_epoch", "int16", "0-3"),
        f("v3_and_below_topics", "[]AddPartitionsToTxnTopic", "0-3"),
    ], structs={
        "AddPartitionsToTxnTopic": [
            f("name", "string"),
            f("partitions", "[]int32"),
        ],
    }),
    response=schema("AddPartitionsToTxnResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16", "4+"),
        f("results_by_transaction", "[]AddPartitionsToTxnResult", "4+", fields=[
            f("transactional_id", "string", "4+"),
            f("topic_results", "[]AddPartitionsToTxnTopicResult", "4+"),
        ]),
        f("results_by_topic_v3_and_below", "[]AddPartitionsToTxnTopicResult", "0-3"),
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
#   v4  same layout (TRANSACTION_ABORTABLE may be returned, KIP-890)
ADD_OFFSETS_TO_TXN = api(
    25, "AddOffsetsToTxn", versions=(0, 4), flexible=3,
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
#   v4  same layout (TRANSACTION_ABORTABLE may be returned, KIP-890)
#   v5  response returns producer_id/producer_epoch: the epoch is bumped on every
#       transaction (KIP-890 part 2)
END_TXN = api(
    26, "EndTxn", versions=(0, 5), flexible=3,
    request=schema("EndTxnRequest", [
        f("transactional_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("committed", "bool"),
    ]),
    response=schema("EndTxnResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("producer_id", "int64", "5+", default=-1),
        f("producer_epoch", "int16", "5+", default=-1),
    ]),
)
EndTxnRequest = END_TXN.request
EndTxnResponse = END_TXN.response


# TxnOffsetCommit
#   v0  offsets committed inside a transaction
#   v1  same layout (throttling after the response)
#   v2  committed_leader_epoch per partition (KIP-320)
#   v3  flexible; generation_id, member_id, group_instance_id for fencing (KIP-447)
#   v4  same layout (TRANSACTION_ABORTABLE may be returned, KIP-890)
#   v5  same layout (the group is added to the transaction implicitly, KIP-890 part 2)
TXN_OFFSET_COMMIT = api(
    28, "TxnOffsetCommit", versions=(0, 5), flexible=3,
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
#   v2  transaction_version per marker (KIP-1228)
WRITE_TXN_MARKERS = api(
    27, "WriteTxnMarkers", versions=(0, 2), flexible=1,
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
            f("transaction_version", "int8", "2+"),
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


# DescribeTransactions (KIP-664)
#   v0  flexible
DESCRIBE_TRANSACTIONS = api(
    65, "DescribeTransactions", versions=(0, 0), flexible=0,
    request=schema("DescribeTransactionsRequest", [
        f("transactional_ids", "[]string"),
    ]),
    response=schema("DescribeTransactionsResponse", [
        f("throttle_time_ms", "int32"),
        f("transaction_states", "[]TransactionState", fields=[
            f("error_code", "int16"),
            f("transactional_id", "string"),
            f("transaction_state", "string"),
            f("transaction_timeout_ms", "int32"),
            f("transaction_start_time_ms", "int64"),
            f("producer_id", "int64"),
            f("producer_epoch", "int16"),
            f("topics", "[]TopicData", fields=[
                f("topic", "string"),
                f("partitions", "[]int32"),
            ]),
        ]),
    ]),
)
DescribeTransactionsRequest = DESCRIBE_TRANSACTIONS.request
DescribeTransactionsResponse = DESCRIBE_TRANSACTIONS.response


# ListTransactions (KIP-664)
#   v0  flexible; filters by state and producer id
#   v1  duration_filter: only transactions running longer than this (KIP-994)
#   v2  transactional_id_pattern: only ids the regular expression matches (KIP-1152)
LIST_TRANSACTIONS = api(
    66, "ListTransactions", versions=(0, 2), flexible=0,
    request=schema("ListTransactionsRequest", [
        f("state_filters", "[]string"),
        f("producer_id_filters", "[]int64"),
        f("duration_filter", "int64", "1+", default=-1),
        f("transactional_id_pattern", "string", "2+", nullable="2+", default=None),
    ]),
    response=schema("ListTransactionsResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("unknown_state_filters", "[]string"),
        f("transaction_states", "[]TransactionState", fields=[
            f("transactional_id", "string"),
            f("producer_id", "int64"),
            f("transaction_state", "string"),
        ]),
    ]),
)
ListTransactionsRequest = LIST_TRANSACTIONS.request
ListTransactionsResponse = LIST_TRANSACTIONS.response
