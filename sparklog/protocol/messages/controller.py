"""The controller's APIs, which brokers send to the controller (KRaft, KIP-631): AlterPartition
(56), BrokerRegistration (62), BrokerHeartbeat (63), AllocateProducerIds (67).

Field layouts are Kafka's (clients/src/main/resources/common/message/*.json); Kafka lists
these APIs only on the controller listener, and so does sparklog: a broker never serves
them, a controller-only process (``process.roles=controller``) does.
"""

from sparklog.protocol.schema import api, f, schema

# AlterPartition (KIP-497; flexible from v0)
#   v1  leader_recovery_state (KIP-704)
#   v2  topics by id instead of name (KIP-516)
#   v3  new_isr_with_epochs: each ISR member with its broker epoch (KIP-903)
ALTER_PARTITION = api(
    56, "AlterPartition", versions=(0, 3), flexible=0,
    request=schema("AlterPartitionRequest", [
        f("broker_id", "int32"),
        f("broker_epoch", "int64", default=-1),
        f("topics", "[]TopicData", fields=[
            f("topic_name", "string", "0-1"),
            f("topic_id", "uuid", "2+"),
            f("partitions", "[]PartitionData", fields=[
                f("partition_index", "int32"),
                f("leader_epoch", "int32"),
                f("new_isr", "[]int32", "0-2"),
                f("new_isr_with_epochs", "[]BrokerState", "3+", fields=[
                    f("broker_id", "int32", "3+"),
                    f("broker_epoch", "int64", "3+", default=-1),
                ]),
                f("leader_recovery_state", "int8", "1+"),
                f("partition_epoch", "int32"),
            ]),
        ]),
    ]),
    response=schema("AlterPartitionResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("topics", "[]TopicData", fields=[
            f("topic_name", "string", "0-1"),
            f("topic_id", "uuid", "2+"),
            f("partitions", "[]PartitionData", fields=[
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("leader_id", "int32"),
                f("leader_epoch", "int32"),
                f("isr", "[]int32"),
                f("leader_recovery_state", "int8", "1+"),
                f("partition_epoch", "int32"),
            ]),
        ]),
    ]),
)
AlterPartitionRequest = ALTER_PARTITION.request
AlterPartitionResponse = ALTER_PARTITION.response


# BrokerRegistration (KIP-631; flexible from v0)
#   v1  is_migrating_zk_broker (KIP-866)
#   v2  log_dirs (KIP-858)
#   v3  previous_broker_epoch (KIP-966)
#   v4  same layout (features with min version 0 are listed)
BROKER_REGISTRATION = api(
    62, "BrokerRegistration", versions=(0, 4), flexible=0,
    request=schema("BrokerRegistrationRequest", [
        f("broker_id", "int32"),
        f("cluster_id", "string"),
        f("incarnation_id", "uuid"),
        f("listeners", "[]Listener", fields=[
            f("name", "string"),
            f("host", "string"),
            f("port", "uint16"),
            f("security_protocol", "int16"),
        ]),
        f("features", "[]Feature", fields=[
            f("name", "string"),
            f("min_supported_version", "int16"),
            f("max_supported_version", "int16"),
        ]),
        f("rack", "string", nullable="0+", default=None),
        f("is_migrating_zk_broker", "bool", "1+"),
        f("log_dirs", "[]uuid", "2+"),
        f("previous_broker_epoch", "int64", "3+", default=-1),
    ]),
    response=schema("BrokerRegistrationResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("broker_epoch", "int64", default=-1),
    ]),
)
BrokerRegistrationRequest = BROKER_REGISTRATION.request
BrokerRegistrationResponse = BROKER_REGISTRATION.response


# BrokerHeartbeat (KIP-631; flexible from v0)
#   v1  offline_log_dirs, tagged (KIP-858)
BROKER_HEARTBEAT = api(
    63, "BrokerHeartbeat", versions=(0, 1), flexible=0,
    request=schema("BrokerHeartbeatRequest", [
        f("broker_id", "int32"),
        f("broker_epoch", "int64", default=-1),
        f("current_metadata_offset", "int64"),
        f("want_fence", "bool"),
        f("want_shut_down", "bool"),
        f("offline_log_dirs", "[]uuid", "1+", tag=0),
    ]),
    response=schema("BrokerHeartbeatResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("is_caught_up", "bool"),
        f("is_fenced", "bool", default=True),
        f("should_shut_down", "bool"),
    ]),
)
BrokerHeartbeatRequest = BROKER_HEARTBEAT.request
BrokerHeartbeatResponse = BROKER_HEARTBEAT.response


# AllocateProducerIds (KIP-730; flexible from v0)
ALLOCATE_PRODUCER_IDS = api(
    67, "AllocateProducerIds", versions=(0, 0), flexible=0,
    request=schema("AllocateProducerIdsRequest", [
        f("broker_id", "int32"),
        f("broker_epoch", "int64", default=-1),
    ]),
    response=schema("AllocateProducerIdsResponse", [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("producer_id_start", "int64"),
        f("producer_id_len", "int32"),
    ]),
)
AllocateProducerIdsRequest = ALLOCATE_PRODUCER_IDS.request
AllocateProducerIdsResponse = ALLOCATE_PRODUCER_IDS.response
