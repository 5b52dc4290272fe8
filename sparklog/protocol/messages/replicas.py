"""Leadership and replica administration (Kafka's Admin APIs behind
kafka-leader-election.sh and kafka-reassign-partitions.sh): ElectLeaders (43),
AlterPartitionReassignments (45), ListPartitionReassignments (46).

Brokers take them from clients and the controller decides; field layouts are Kafka's
(clients/src/main/resources/common/message/*.json).
"""

from sparklog.protocol.schema import api, f, schema

# ElectLeaders (KIP-460)
#   v0  preferred-replica election only (KIP-183's API)
#   v1  election_type (0 preferred, 1 unclean); top-level error_code in the response
#   v2  flexible
ELECT_LEADERS = api(
    43, "ElectLeaders", versions=(0, 2), flexible=2,
    request=schema("ElectLeadersRequest", [
        f("election_type", "int8", "1+"),
        f("topic_partitions", "[]TopicPartitions", nullable="0+", fields=[
            f("topic", "string"),
            f("partitions", "[]int32"),
        ]),
        f("timeout_ms", "int32", default=60000),
    ]),
    response=schema("ElectLeadersResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16", "1+"),
        f("replica_election_results", "[]ReplicaElectionResult", fields=[
            f("topic", "string"),
            f("partition_result", "[]PartitionResult", fields=[
                f("partition_id", "int32"),
                f("error_code", "int16"),
                f("error_message", "string", nullable="0+", default=None),
            ]),
        ]),
    ]),
)
ElectLeadersRequest = ELECT_LEADERS.request
ElectLeadersResponse = ELECT_LEADERS.response


# AlterPartitionReassignments (KIP-455; flexible from v0). Replicas null cancels the
# partition's ongoing reassignment.
ALTER_PARTITION_REASSIGNMENTS = api(
    45, "AlterPartitionReassignments", versions=(0, 0), flexible=0,
    request=schema("AlterPartitionReassignmentsRequest", [
        f("timeout_ms", "int32", default=60000),
        f("topics", "[]ReassignableTopic", fields=[
            f("name", "string"),
            f("partitions", "[]ReassignablePartition", fields=[
                f("partition_index", "int32"),
                f("replicas", "[]int32", nullable="0+", default=None),
            ]),
        ]),
    ]),
    response=schema("AlterPartitionReassignmentsResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("responses", "[]ReassignableTopicResponse", fields=[
            f("name", "string"),
            f("partitions", "[]ReassignablePartitionResponse", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("error_message", "string", nullable="0+", default=None),
            ]),
        ]),
    ]),
)
AlterPartitionReassignmentsRequest = ALTER_PARTITION_REASSIGNMENTS.request
AlterPartitionReassignmentsResponse = ALTER_PARTITION_REASSIGNMENTS.response


# ListPartitionReassignments (KIP-455; flexible from v0). Topics null lists every ongoing
# reassignment.
LIST_PARTITION_REASSIGNMENTS = api(
    46, "ListPartitionReassignments", versions=(0, 0), flexible=0,
    request=schema("ListPartitionReassignmentsRequest", [
        f("timeout_ms", "int32", default=60000),
        f("topics", "[]ListPartitionReassignmentsTopics", nullable="0+", default=None, fields=[
            f("name", "string"),
            f("partition_indexes", "[]int32"),
        ]),
    ]),
    response=schema("ListPartitionReassignmentsResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None),
        f("topics", "[]OngoingTopicReassignment", fields=[
            f("name", "string"),
            f("partitions", "[]OngoingPartitionReassignment", fields=[
                f("partition_index", "int32"),
                f("replicas", "[]int32"),
                f("adding_replicas", "[]int32"),
                f("removing_replicas", "[]int32"),
            ]),
        ]),
    ]),
)
ListPartitionReassignmentsRequest = LIST_PARTITION_REASSIGNMENTS.request
ListPartitionReassignmentsResponse = LIST_PARTITION_REASSIGNMENTS.response
