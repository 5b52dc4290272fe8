"""Consumer-group coordination (classic protocol): FindCoordinator (10), JoinGroup (11),
Heartbeat (12), LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16),
DeleteGroups (42).
"""

from sparklog.protocol.schema import api, f, schema

# FindCoordinator
#   v0  group coordinator by group id
#   v1  key_type (0 group, 1 transaction); response gets throttle_time_ms, error_message
#   v2  same layout (throttling after the response)
#   v3  flexible
#   v4  batched: coordinator_keys in, a coordinators list out (KIP-699)
#   v5  same layout (TRANSACTION_ABORTABLE may be returned, KIP-890)
#   v6  same layout (key_type 2 = share group, KIP-932)
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
FIND_COORDINATOR = api(
    10, "FindCoordinator", versions=(0, 6), flexible=3,
    request=schema("FindCoordinatorRequest", [
        f("key", "string", "0-3"),
        f("key_type", "int8", "1+"),
        f("coordinator_keys", "[]string", "4+"),
    ]),
    response=schema("FindCoordinatorResponse", [
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16", "0-3"),
        f("error_message", "string", "1-3", nullable="1-3"),
        f("node_id", "int32", "0-3"),
        f("host", "string", "0-3"),
        f("port", "int32", "0-3"),
        f("coordinators", "[]Coordinator", "4+", fields=[
            f("key", "string", "4+"),
            f("node_id", "int32", "4+"),
            f("host", "string", "4+"),
            f("port", "int32", "4+"),
            f("error_code", "int16", "4+"),
            f("error_message", "string", "4+", nullable="4+"),
        ]),
    ]),
)
FindCoordinatorRequest = FIND_COORDINATOR.request
FindCoordinatorResponse = FIND_COORDINATOR.response


# JoinGroup
#   v0  session timeout only
#   v1  rebalance_timeout_ms
#   v2  response throttle_time_ms
#   v3  same layout (throttling after the response)
#   v4  same layout; an empty member id gets MEMBER_ID_REQUIRED plus an id (KIP-394)
#   v5  group_instance_id for static membership (KIP-345)
#   v6  flexible
#   v7  response names the protocol_type (KIP-559)
#   v8  reason in the request (KIP-800)
#   v9  response skip_assignment (the leader need not assign, KIP-814)
JOIN_GROUP = api(
    11, "JoinGroup", versions=(0, 9), flexible=6,
    request=schema("JoinGroupRequest", [
        f("group_id", "string"),
        f("session_timeout_ms", "int32"),
        f("rebalance_timeout_ms", "int32", "1+", default=-1),
        f("member_id", "string"),
        f("group_instance_id", "string", "5+", nullable="5+", default=None),
        f("protocol_type", "string"),
        f("protocols", "[]JoinGroupRequestProtocol", fields=[
            f("name", "string"),
            f("metadata", "bytes"),
        ]),
        f("reason", "string", "8+", nullable="8+", default=None),
    ]),
    response=schema("JoinGroupResponse", [
        f("throttle_time_ms", "int32", "2+"),
        f("error_code", "int16"),
        f("generation_id", "int32", default=-1),
        f("protocol_type", "string", "7+", nullable="7+", default=None),
        f("protocol_name", "string", nullable="7+"),
        f("leader", "string"),
        f("skip_assignment", "bool", "9+"),
        f("member_id", "string"),
        f("members", "[]JoinGroupResponseMember", fields=[
            f("member_id", "string"),
            f("group_instance_id", "string", "5+", nullable="5+", default=None),
            f("metadata", "bytes"),
        ]),
    ]),
)
JoinGroupRequest = JOIN_GROUP.request
JoinGroupResponse = JOIN_GROUP.response


# SyncGroup
#   v1  response throttle_time_ms
#   v2  same layout (throttling after the response)
#   v3  group_instance_id (KIP-345)
#   v4  flexible
#   v5  protocol_type / protocol_name in request and response (KIP-559)
SYNC_GROUP = api(
    14, "SyncGroup", versions=(0, 5), flexible=4,
    request=schema("SyncGroupRequest", [
        f("group_id", "string"),
        f("generation_id", "int32"),
        f("member_id", "string"),
        f("group_instance_id", "string", "3+", nullable="3+", default=None),
        f("protocol_type", "string", "5+", nullable="5+", default=None),
        f("protocol_name", "string", "5+", nullable="5+", default=None),
        f("assignments", "[]SyncGroupRequestAssignment", fields=[
            f("member_id", "string"),
            f("assignment", "bytes"),
        ]),
    ]),
    response=schema("SyncGroupResponse", [
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16"),
        f("protocol_type", "string", "5+", nullable="5+", default=None),
        f("protocol_name", "string", "5+", nullable="5+", default=None),
        f("assignment", "bytes"),
    ]),
)
SyncGroupRequest = SYNC_GROUP.request
SyncGroupResponse = SYNC_GROUP.response


# Heartbeat
#   v1  response throttle_time_ms
#   v2  same layout (throttling after the response)
#   v3  group_instance_id (KIP-345)
#   v4  flexible
HEARTBEAT = api(
    12, "Heartbeat", versions=(0, 4), flexible=4,
    request=schema("HeartbeatRequest", [
        f("group_id", "string"),
        f("generation_id", "int32"),
        f("member_id", "string"),
        f("group_instance_id", "string", "3+", nullable="3+", default=None),
    ]),
    response=schema("HeartbeatResponse", [
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16"),
    ]),
)
HeartbeatRequest = HEARTBEAT.request
HeartbeatResponse = HEARTBEAT.response


# LeaveGroup
#   v1  response throttle_time_ms
#   v2  same layout (throttling after the response)
#   v3  batched: a list of members (member id + group instance id) leaves at once (KIP-345)
#   v4  flexible
#   v5  per-member reason (KIP-800)
LEAVE_GROUP = api(
    13, "LeaveGroup", versions=(0, 5), flexible=4,
    request=schema("LeaveGroupRequest", [
        f("group_id", "string"),
        f("member_id", "string", "0-2"),
        f("members", "[]MemberIdentity", "3+", fields=[
            f("member_id", "string", "3+"),
            f("group_instance_id", "string", "3+", nullable="3+", default=None),
            f("reason", "string", "5+", nullable="5+", default=None),
        ]),
    ]),
    response=schema("LeaveGroupResponse", [
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16"),
        f("members", "[]MemberResponse", "3+", fields=[
            f("member_id", "string", "3+"),
            f("group_instance_id", "string", "3+", nullable="3+"),
            f("error_code", "int16", "3+"),
        ]),
    ]),
)
LeaveGroupRequest = LEAVE_GROUP.request
LeaveGroupResponse = LEAVE_GROUP.response


# ListGroups
#   v1  response throttle_time_ms
#   v2  same layout (throttling after the response)
#   v3  flexible
#   v4  states_filter in the request, group_state in the response (KIP-518)
#   v5  types_filter in the request, group_type in the response (KIP-848)
LIST_GROUPS = api(
    16, "ListGroups", versions=(0, 5), flexible=3,
    request=schema("ListGroupsRequest", [
        f("states_filter", "[]string", "4+"),
        f("types_filter", "[]string", "5+"),
    ]),
    response=schema("ListGroupsResponse", [
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16"),
        f("groups", "[]ListedGroup", fields=[
            f("group_id", "string"),
            f("protocol_type", "string"),
            f("group_state", "string", "4+"),
            f("group_type", "string", "5+"),
        ]),
    ]),
)
ListGroupsRequest = LIST_GROUPS.request
ListGroupsResponse = LIST_GROUPS.response


# DescribeGroups
#   v1  response throttle_time_ms
#   v2  same layout (throttling after the response)
#   v3  include_authorized_operations; groups carry authorized_operations (KIP-430)
#   v4  members carry group_instance_id (KIP-345)
#   v5  flexible
#   v6  groups carry an error_message; unknown groups get GROUP_ID_NOT_FOUND (KIP-1043)
DESCRIBE_GROUPS = api(
    15, "DescribeGroups", versions=(0, 6), flexible=5,
    request=schema("DescribeGroupsRequest", [
        f("groups", "[]string"),
        f("include_authorized_operations", "bool", "3+"),
    ]),
    response=schema("DescribeGroupsResponse", [
        f("throttle_time_ms", "int32", "1+"),
        f("groups", "[]DescribedGroup", fields=[
            f("error_code", "int16"),
            f("error_message", "string", "6+", nullable="6+", default=None),
            f("group_id", "string"),
            f("group_state", "string"),
            f("protocol_type", "string"),
            f("protocol_data", "string"),
            f("members", "[]DescribedGroupMember", fields=[
                f("member_id", "string"),
                f("group_instance_id", "string", "4+", nullable="4+", default=None),
                f("client_id", "string"),
                f("client_host", "string"),
                f("member_metadata", "bytes"),
                f("member_assignment", "bytes"),
            ]),
            f("authorized_operations", "int32", "3+", default=-2147483648),
        ]),
    ]),
)
DescribeGroupsRequest = DESCRIBE_GROUPS.request
DescribeGroupsResponse = DESCRIBE_GROUPS.response


# DeleteGroups
#   v0  group ids -> per-group error
#   v1  same layout (throttling after the response)
#   v2  flexible
DELETE_GROUPS = api(
    42, "DeleteGroups", versions=(0, 2), flexible=2,
    request=schema("DeleteGroupsRequest", [
        f("groups_names", "[]string"),
    ]),
    response=schema("DeleteGroupsResponse", [
        f("throttle_time_ms", "int32"),
        f("results", "[]DeletableGroupResult", fields=[
            f("group_id", "string"),
            f("error_code", "int16"),
        ]),
    ]),
)
DeleteGroupsRequest = DELETE_GROUPS.request
DeleteGroupsResponse = DELETE_GROUPS.response
