"""Topic and config administration: DeleteRecords (21), CreateTopics (19),
DeleteTopics (20), DescribeConfigs (32), AlterConfigs (33), CreatePartitions (37),
IncrementalAlterConfigs (44).
"""

from sparklog.protocol.schema import Field, MessageSchema, api, f, schema

# CreateTopics
#   v2  (oldest Kafka 4 accepts) topics with partitions/replication or explicit
#       assignments, configs, validate_only; per-topic error_message
#   v3  same layout (throttling after the response)
#   v4  same layout; -1 partitions / replication factor = broker defaults (KIP-464)
#   v5  flexible; the response echoes partitions, replication and configs (KIP-525)
#   v6  same layout (THROTTLING_QUOTA_EXCEEDED may be returned, KIP-599)
#   v7  response carries the topic_id (KIP-516)
CREATE_TOPICS = api(
    19, "CreateTopics", versions=(2, 7), flexible=5,
    request=schema("CreateTopicsRequest", [
        f("topics", "[]CreatableTopic", fields=[
            f("name", "string"),
            f("num_partitions", "int32"),
            f("replication_factor", "int16"),
            f("assignments", "[]CreatableReplicaAssignment", fields=[
                f("partition_index", "int32"),
                f("broker_ids", "[]int32"),
            ]),
            f("configs", "[]CreatableTopicConfig", fields=[
                f("name", "string"),
                f("value", "string", nullable="0+"),
            ]),
        ]),
        f("timeout_ms", "int32", default=60000),
        f("validate_only", "bool", "1+"),
    ]),
    response=schema("CreateTopicsResponse", [
        f("throttle_time_ms", "int32", "2+"),
        f("topics", "[]CreatableTopicResult", fields=[
            f("name", "string"),
            f("topic_id", "uuid", "7+"),
            f("error_code", "int16"),
            f("error_message", "string", "1+", nullable="0+"),
            f("topic_config_error_code", "int16", "5+", tag=0),
            f("num_partitions", "int32", "5+", default=-1),
            f("replication_factor", "int16", "5+", default=-1),
            f("configs", "[]CreatableTopicConfigs", "5+", nullable="5+", fields=[
                f("name", "string", "5+"),
                f("value", "string", "5+", nullable="5+"),
                f("read_only", "bool", "5+"),
                f("config_source", "int8", "5+", default=-1),
                f("is_sensitive", "bool", "5+"),
            ]),
        ]),
    ]),
)
CreateTopicsRequest = CREATE_TOPICS.request
CreateTopicsResponse = CREATE_TOPICS.response


# DeleteTopics
#   v1  response throttle_time_ms
#   v2  same layout (throttling after the response)
#   v3  same layout (TOPIC_DELETION_DISABLED may be returned)
#   v4  flexible
#   v5  response error_message; THROTTLING_QUOTA_EXCEEDED may be returned (KIP-599)
#   v6  topics by name or id (topics list replaces topic_names; KIP-516)
DELETE_TOPICS = api(
    20, "DeleteTopics", versions=(1, 6), flexible=4,
    request=schema("DeleteTopicsRequest", [
        f("topics", "[]DeleteTopicState", "6+", fields=[
            f("name", "string", "6+", nullable="6+", default=None),
            f("topic_id", "uuid", "6+"),
        ]),
        f("topic_names", "[]string", "0-5"),
        f("timeout_ms", "int32"),
    ]),
    response=schema("DeleteTopicsResponse", [
        f("throttle_time_ms", "int32", "1+"),
        f("responses", "[]DeletableTopicResult", fields=[
            f("name", "string", nullable="6+"),
            f("topic_id", "uuid", "6+"),
            f("error_code", "int16"),
            f("error_message", "string", "5+", nullable="5+", default=None),
        ]),
    ]),
)
DeleteTopicsRequest = DELETE_TOPICS.request
DeleteTopicsResponse = DELETE_TOPICS.response


# CreatePartitions (KIP-195)
#   v0  new total count per topic, optional assignments, validate_only
#   v1  same layout (throttling after the response)
#   v2  flexible
#   v3  same layout (the controller may answer in KRaft mode)
CREATE_PARTITIONS = api(
    37, "CreatePartitions", versions=(0, 3), flexible=2,
    request=schema("CreatePartitionsRequest", [
        f("topics", "[]CreatePartitionsTopic", fields=[
            f("name", "string"),
            f("count", "int32"),
            f("assignments", "[]CreatePartitionsAssignment", nullable="0+", fields=[
                f("broker_ids", "[]int32"),
            ]),
        ]),
        f("timeout_ms", "int32"),
        f("validate_only", "bool"),
    ]),
    response=schema("CreatePartitionsResponse", [
        f("throttle_time_ms", "int32"),
        f("results", "[]CreatePartitionsTopicResult", fields=[
            f("name", "string"),
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+", default=None),
        ]),
    ]),
)
CreatePartitionsRequest = CREATE_PARTITIONS.request
CreatePartitionsResponse = CREATE_PARTITIONS.response


# DescribeConfigs (resource_type 2 = topic, 4 = broker)
#   v1  include_synonyms; configs report config_source and synonyms (KIP-226)
#   v2  same layout (throttling after the response)
#   v3  include_documentation; configs report config_type and documentation (KIP-569)
#   v4  flexible
DESCRIBE_CONFIGS = api(
    32, "DescribeConfigs", versions=(1, 4), flexible=4,
    request=schema("DescribeConfigsRequest", [
        f("resources", "[]DescribeConfigsResource", fields=[
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("configuration_keys", "[]string", nullable="0+"),
        ]),
        f("include_synonyms", "bool", "1+"),
        f("include_documentation", "bool", "3+"),
    ]),
    response=schema("DescribeConfigsResponse", [
        f("throttle_time_ms", "int32"),
        f("results", "[]DescribeConfigsResult", fields=[
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+"),
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("configs", "[]DescribeConfigsResourceResult", fields=[
                f("name", "string"),
                f("value", "string", nullable="0+"),
                f("read_only", "bool"),
                f("config_source", "int8", "1+", default=-1),
                f("is_sensitive", "bool"),
                f("synonyms", "[]DescribeConfigsSynonym", "1+", fields=[
                    f("name", "string", "1+"),
                    f("value", "string", "1+", nullable="0+"),
                    f("source", "int8", "1+"),
                ]),
                f("config_type", "int8", "3+"),
                f("documentation", "string", "3+", nullable="0+"),
            ]),
        ]),
    ]),
)
DescribeConfigsRequest = DESCRIBE_CONFIGS.request
DescribeConfigsResponse = DESCRIBE_CONFIGS.response


def _alter_configs_request(name: str, config_fields: list[Field]) -> MessageSchema:
    """AlterConfigs and IncrementalAlterConfigs name their resources the same way and
    differ only in what each config entry carries."""
    return schema(name, [
        f("resources", "[]AlterConfigsResource", fields=[
            f("resource_type", "int8"),
            f("resource_name", "string"),
            f("configs", "[]AlterableConfig", fields=config_fields),
        ]),
        f("validate_only", "bool"),
    ])


def _alter_configs_response(name: str) -> MessageSchema:
    """One (error, resource) result per resource, the same for both alter APIs."""
    return schema(name, [
        f("throttle_time_ms", "int32"),
        f("responses", "[]AlterConfigsResourceResponse", fields=[
            f("error_code", "int16"),
            f("error_message", "string", nullable="0+"),
            f("resource_type", "int8"),
            f("resource_name", "string"),
        ]),
    ])


# Kafka's ConfigResource types, the resource_type of DescribeConfigs, AlterConfigs and
# IncrementalAlterConfigs
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

# AlterConfigs (replaces every config of the resource; IncrementalAlterConfigs edits them)
#   v0  resources with (name, value) pairs, validate_only
#   v1  same layout (throttling after the response)
#   v2  flexible
ALTER_CONFIGS = api(
    33, "AlterConfigs", versions=(0, 2), flexible=2,
    request=_alter_configs_request("AlterConfigsRequest", [
        f("name", "string"),
        f("value", "string", nullable="0+"),
    ]),
    response=_alter_configs_response("AlterConfigsResponse"),
)
AlterConfigsRequest = ALTER_CONFIGS.request
AlterConfigsResponse = ALTER_CONFIGS.response


# IncrementalAlterConfigs (KIP-339: per-key SET/DELETE/APPEND/SUBTRACT, the rest untouched)
#   v0  resources with (name, operation, value) triples, validate_only
#   v1  flexible
INCREMENTAL_ALTER_CONFIGS = api(
    44, "IncrementalAlterConfigs", versions=(0, 1), flexible=1,
    request=_alter_configs_request("IncrementalAlterConfigsRequest", [
        f("name", "string"),
        f("config_operation", "int8"),
        f("value", "string", nullable="0+"),
    ]),
    response=_alter_configs_response("IncrementalAlterConfigsResponse"),
)
IncrementalAlterConfigsRequest = INCREMENTAL_ALTER_CONFIGS.request
IncrementalAlterConfigsResponse = INCREMENTAL_ALTER_CONFIGS.response


# DeleteRecords (KIP-107: move the log start offset forward)
#   v0  partition + offset -> new low watermark
#   v1  same layout (throttling after the response)
#   v2  flexible
DELETE_RECORDS = api(
    21, "DeleteRecords", versions=(0, 2), flexible=2,
    request=schema("DeleteRecordsRequest", [
        f("topics", "[]DeleteRecordsTopic", fields=[
            f("name", "string"),
            f("partitions", "[]DeleteRecordsPartition", fields=[
                f("partition_index", "int32"),
                f("offset", "int64"),
            ]),
        ]),
        f("timeout_ms", "int32"),
    ]),
    response=schema("DeleteRecordsResponse", [
        f("throttle_time_ms", "int32"),
        f("topics", "[]DeleteRecordsTopicResult", fields=[
            f("name", "string"),
            f("partitions", "[]DeleteRecordsPartitionResult", fields=[
                f("partition_index", "int32"),
                f("low_watermark", "int64"),
                f("error_code", "int16"),
            ]),
        ]),
    ]),
)
DeleteRecordsRequest = DELETE_RECORDS.request
DeleteRecordsResponse = DELETE_RECORDS.response
