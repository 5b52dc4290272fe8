"""Cluster metadata: Metadata (key 3) and DescribeCluster (key 60).
"""

from sparklog.protocol.schema import api, f, schema

# Metadata
#   v1  null topic list = all topics, empty = none; brokers get a rack, topics is_internal,
#       the response names the controller
#   v2  response adds cluster_id
#   v3  response adds throttle_time_ms
#   v4  request adds allow_auto_topic_creation (KIP-204)
#   v5  partitions list offline_replicas
#   v6  same layout (throttling happens after the response)
#   v7  partitions carry leader_epoch (KIP-320)
#   v8  authorized-operations bitfields on request (flags) and response (KIP-430)
#   v9  flexible
#   v10 topic ids (KIP-516)
#   v11 cluster authorized operations move to DescribeCluster and leave this API
#   v12 topic name may be null in the response when a topic is addressed by id
#   v13 response adds a top-level error_code (KIP-1102)
METADATA = api(
    3, "Metadata", versions=(1, 13), flexible=9,
    request=schema("MetadataRequest", [
        f("topics", "[]MetadataRequestTopic", nullable="1+", fields=[
            f("topic_id", "uuid", "10+"),
            f("name", "string", nullable="10+"),
        ]),
        f("allow_auto_topic_creation", "bool", "4+", default=True),
        f("include_cluster_authorized_operations", "bool", "8-10"),
        f("include_topic_authorized_operations", "bool", "8+"),
    ]),
    response=schema("MetadataResponse", [
        f("throttle_time_ms", "int32", "3+"),
        f("brokers", "[]MetadataResponseBroker", fields=[
            f("node_id", "int32"),
            f("host", "string"),
            f("port", "int32"),
            f("rack", "string", "1+", nullable="1+", default=None),
        ]),
        f("cluster_id", "string", "2+", nullable="2+", default=None),
        f("controller_id", "int32", "1+", default=-1),
        f("topics", "[]MetadataResponseTopic", fields=[
            f("error_code", "int16"),
            f("name", "string", nullable="12+"),
            f("topic_id", "uuid", "10+"),
            f("is_internal", "bool", "1+"),
            f("partitions", "[]MetadataResponsePartition", fields=[
                f("error_code", "int16"),
                f("partition_index", "int32"),
                f("leader_id", "int32"),
                f("leader_epoch", "int32", "7+", default=-1),
                f("replica_nodes", "[]int32"),
                f("isr_nodes", "[]int32"),
                f("offline_replicas", "[]int32", "5+"),
            ]),
            f("topic_authorized_operations", "int32", "8+", default=-2147483648),
        ]),
        f("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
        f("error_code", "int16", "13+"),
    ]),
)
MetadataRequest = METADATA.request
MetadataResponse = METADATA.response


# DescribeCluster (flexible from v0; KIP-700)
#   v0  cluster id, controller, brokers, cluster authorized operations
#   v1  endpoint_type in request and response (brokers vs. controllers, KIP-919)
#   v2  include_fenced_brokers in the request, is_fenced per broker (KIP-1073)
DESCRIBE_CLUSTER = api(
    60, "DescribeCluster", versions=(0, 2), flexible=0,
    request=schema("DescribeClusterRequest", [
        f("include_cluster_authorized_operations", "bool"),
        f("endpoint_type", "int8", "1+", default=1),
        f("include_fenced_brokers", "bool", "2+"),
    ]),
    response=schema("DescribeClusterResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("endpoint_type", "int8", "1+", default=1),
        f("cluster_id", "string"),
        f("controller_id", "int32", default=-1),
        f("brokers", "[]DescribeClusterBroker", fields=[
            f("broker_id", "int32"),
            f("host", "string"),
            f("port", "int32"),
            f("rack", "string", nullable="0+", default=None),
            f("is_fenced", "bool", "2+"),
        ]),
        f("cluster_authorized_operations", "int32", default=-2147483648),
    ]),
)
DescribeClusterRequest = DESCRIBE_CLUSTER.request
DescribeClusterResponse = DESCRIBE_CLUSTER.response
