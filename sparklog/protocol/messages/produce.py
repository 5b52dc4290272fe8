"""Produce (key 0): append record batches to partitions.

Request changelog
  v0      acks, timeout and per-partition record sets (message format v0)
  v1-v2   same layout; v1 lets the broker report throttling, v2 allows message format v1
  v3      adds transactional_id; record sets must be RecordBatch v2 (magic 2) from here on
  v4-v8   same layout (new error codes: KAFKA_STORAGE_ERROR v4, per-record errors v8, ...)
  v9      first flexible version (compact encodings, tag buffers)
  v10     same layout; the response may carry the new leader (KIP-951)
  v11     same layout (TRANSACTION_ABORTABLE may be returned, KIP-890)
  v12     same layout; a transactional produce adds its partition to the transaction
          implicitly (KIP-890 part 2)

Response changelog
  v1      adds throttle_time_ms
  v2      adds log_append_time_ms (for LogAppendTime topics)
  v5      adds log_start_offset
  v8      adds record_errors and error_message (which batch/record failed and why)
  v10     tagged: current_leader per partition, node_endpoints at the top (KIP-951)
"""

from sparklog.protocol.schema import api, f, schema

PRODUCE = api(
    0, "Produce", versions=(0, 12), flexible=9,
    request=schema("ProduceRequest", [
        f("transactional_id", "string", "3+", nullable="3+", default=None),
        f("acks", "int16"),
        f("timeout_ms", "int32"),
        f("topic_data", "[]TopicProduceData", fields=[
            f("name", "string"),
            f("partition_data", "[]PartitionProduceData", fields=[
                f("index", "int32"),
                f("records", "records", nullable="0+"),
            ]),
        ]),
    ]),
    response=schema("ProduceResponse", [
        f("responses", "[]TopicProduceResponse", fields=[
            f("name", "string"),
            f("partition_responses", "[]PartitionProduceResponse", fields=[
                f("index", "int32"),
                f("error_code", "int16"),
                f("base_offset", "int64"),
                f("log_append_time_ms", "int64", "2+", default=-1),
                f("log_start_offset", "int64", "5+", default=-1),
                f("record_errors", "[]BatchIndexAndErrorMessage", "8+", fields=[
                    f("batch_index", "int32", "8+"),
                    f("batch_index_error_message", "string", "8+", nullable="8+", default=None),
                ]),
                f("error_message", "string", "8+", nullable="8+", default=None),
                f("current_leader", "LeaderIdAndEpoch", "10+", tag=0, fields=[
                    f("leader_id", "int32", "10+", default=-1),
                    f("leader_epoch", "int32", "10+", default=-1),
                ]),
            ]),
        ]),
        f("throttle_time_ms", "int32", "1+"),
        f("node_endpoints", "[]NodeEndpoint", "10+", tag=0, fields=[
            f("node_id", "int32", "10+"),
            f("host", "string", "10+"),
            f("port", "int32", "10+"),
            f("rack", "string", "10+", nullable="10+", default=None),
        ]),
    ]),
)
ProduceRequest = PRODUCE.request
ProduceResponse = PRODUCE.response
