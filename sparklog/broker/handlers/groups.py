"""Group APIs: FindCoordinator, Join/Sync/Heartbeat/LeaveGroup, OffsetCommit/Fetch, admin.

Thin translations between wire messages and ``GroupCoordinator`` calls; all semantics
live in the coordinator (``sparklog.broker.group``). While the broker has no coordinator
(not started, or stopping) every request is answered COORDINATOR_NOT_AVAILABLE: by
``_coordinator`` raising it where the response has one top-level error code (the dispatcher
answers it with the schema's defaults elsewhere, as Kafka's ``getErrorResponse`` does), per
group or partition where the response has no other place for it. Version
ranges are the ones confluent-kafka, kafka-python, aiokafka and kcat were measured to use
(tests/integration exercises each of them).
"""

from __future__ import annotations

from sparklog.broker.acks import wait_replicated
from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.broker.group.coordinator import GroupCoordinator
from sparklog.broker.group.records import NO_LEADER_EPOCH, OffsetAndMetadata
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import CoordinatorNotAvailableError, ErrorCode, KafkaError
from sparklog.protocol.messages.groups import KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION
from sparklog.protocol.schema import Message, TopLevel

INT32_MIN = -(1 << 31)


def _host(ctx: RequestContext) -> str:
    host = ctx.client_host or ""
    return host if host.startswith("/") else "/" + host


def _resp(api_key: int) -> type[TopLevel]:
    return api_spec(api_key).response


def _coordinator(ctx: RequestContext) -> GroupCoordinator:
    """The broker's group coordinator, or COORDINATOR_NOT_AVAILABLE while it has none."""
    gc = ctx.broker.group_coordinator
    if gc is None:
        raise CoordinatorNotAvailableError("this broker has no group coordinator running")
    return gc


# --------------------------------------------------------------------------- FindCoordinator


# v3 is flexible; v4 (batched keys) is not served.
@register(ApiKey.FIND_COORDINATOR, 0, 3)
async def handle_find_coordinator(ctx: RequestContext, request: TopLevel) -> TopLevel:
    cls = _resp(ApiKey.FIND_COORDINATOR)
    key_type = request.key_type
    if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
        return cls(error_code=int(ErrorCode.INVALID_REQUEST),
                   error_message=f"unknown coordinator key type {key_type}",
                   node_id=-1, host="", port=-1)
    broker = ctx.broker
    # a group's coordinator leads its offsets partition, a transactional id's the id's
    # __transaction_state partition
    try:
        node_id = (broker.group_coordinator_node(request.key) if key_type == KEY_TYPE_GROUP
                   else broker.txn_coordinator_node(request.key, create_topic=True))
    except KafkaError:
        node_id = None  # the topic could not be created now: the client retries
    if node_id is None:
        return cls(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), error_message=None,
                   node_id=-1, host="", port=-1)
    host, port = None, None
    for b in broker.metadata.live_broker_list():
        if b.node_id == node_id:
            host, port = b.host, b.port
    if host is None:
        host, port = broker.config.advertised_listener(broker.port)
    return cls(error_code=int(ErrorCode.NONE), error_message=None, node_id=node_id,
               host=host, port=port)


# --------------------------------------------------------------------------- membership


# v4+ two-step join (MEMBER_ID_REQUIRED), v5 group.instance.id, v6 flexible, v7 protocol type.
@register(ApiKey.JOIN_GROUP, 0, 7)
async def handle_join_group(ctx: RequestContext, request: TopLevel) -> TopLevel:
    cls = _resp(ApiKey.JOIN_GROUP)
    gc = ctx.broker.group_coordinator
    if gc is None:
        return cls(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), generation_id=-1,
                   protocol_name="", leader="", member_id=request.member_id)
    rebalance_timeout = request.rebalance_timeout_ms if ctx.api_version >= 1 else -1
    res = await gc.join_group(
        request.group_id, request.member_id or "", request.group_instance_id,
        ctx.client_id or "", _host(ctx), rebalance_timeout, request.session_timeout_ms,
        request.protocol_type, [(p.name, p.metadata) for p in request.protocols],
        require_known_member_id=ctx.api_version >= 4,
    )
    if res.error == ErrorCode.NONE and request.group_instance_id is not None:
        # a static member that replaced its old member id in a stable group had the group
        # stored with the new id (Kafka's updateStaticMember): on the whole ISR before the
        # member is told its id, as a SyncGroup's assignment is
        failed = await _group_write_replicated(ctx, request.group_id)
        if failed is not None:
            return cls(error_code=int(failed), generation_id=-1, protocol_name="",
                       leader="", member_id=request.member_id)
    Member = cls.JoinGroupResponseMember
    return cls(
        throttle_time_ms=0,
        error_code=int(res.error),
        generation_id=res.generation_id,
        protocol_type=res.protocol_type,
        protocol_name=res.protocol_name or ("" if ctx.api_version < 7 else None),
        leader=res.leader_id,
        member_id=res.member_id,
        members=[Member(member_id=m.member_id, group_instance_id=m.group_instance_id,
                        metadata=m.metadata) for m in res.members],
    )


# v3 group.instance.id, v4 flexible, v5 protocol type/name checked and echoed.
@register(ApiKey.SYNC_GROUP, 0, 5)
async def handle_sync_group(ctx: RequestContext, request: TopLevel) -> TopLevel:
    cls = _resp(ApiKey.SYNC_GROUP)
    gc = _coordinator(ctx)
    res = await gc.sync_group(
        request.group_id, request.generation_id, request.member_id, request.group_instance_id,
        {a.member_id: bytes(a.assignment) for a in request.assignments},
        protocol_type=request.protocol_type, protocol_name=request.protocol_name,
    )
    if res.error == ErrorCode.NONE:
        # the assignment is handed out once the group's metadata record (written when the
        # leader's SyncGroup arrived) is on every in-sync replica, as Kafka's storeGroup
        # does: a coordinator failover then finds the group the members were told about
        failed = await _group_write_replicated(ctx, request.group_id)
        if failed is not None:
            return cls(throttle_time_ms=0, error_code=int(failed),
                       protocol_type=res.protocol_type, protocol_name=res.protocol_name,
                       assignment=b"")
    return cls(throttle_time_ms=0, error_code=int(res.error),
               protocol_type=res.protocol_type, protocol_name=res.protocol_name,
               assignment=res.assignment)


@register(ApiKey.HEARTBEAT, 0, 4)
async def handle_heartbeat(ctx: RequestContext, request: TopLevel) -> TopLevel:
    cls = _resp(ApiKey.HEARTBEAT)
    gc = _coordinator(ctx)
    err = gc.heartbeat(request.group_id, request.generation_id, request.member_id,
                       request.group_instance_id)
    return cls(throttle_time_ms=0, error_code=int(err))


# v3+ leaves several members at once, by member id or group.instance.id (KIP-345).
@register(ApiKey.LEAVE_GROUP, 0, 4)
async def handle_leave_group(ctx: RequestContext, request: TopLevel) -> TopLevel:
    cls = _resp(ApiKey.LEAVE_GROUP)
    gc = _coordinator(ctx)
    if ctx.api_version < 3:
        members: list[tuple[str, str | None]] = [(request.member_id, None)]
    else:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    err, errors = gc.leave_group(request.group_id, members)
    if ctx.api_version < 3:
        # One member: its own error is the response's error.
        return cls(throttle_time_ms=0, error_code=int(err if err != ErrorCode.NONE else errors[0]))
    Resp = cls.MemberResponse
    return cls(throttle_time_ms=0, error_code=int(err), members=[
        Resp(member_id=mid, group_instance_id=iid, error_code=int(e))
        for (mid, iid), e in zip(members, errors, strict=False)])


# --------------------------------------------------------------------------- offsets


def _partition_exists(ctx: RequestContext, topic: str, partition: int) -> bool:
    info = ctx.broker.metadata.topic(topic)
    return info is not None and partition in info.partitions


# v5 drops retention, v6 leader epoch, v7 group.instance.id fencing, v8 flexible.
@register(ApiKey.OFFSET_COMMIT, 2, 8)
async def handle_offset_commit(ctx: RequestContext, request: TopLevel) -> TopLevel:
    cls = _resp(ApiKey.OFFSET_COMMIT)
    RT, RP = cls.OffsetCommitResponseTopic, cls.OffsetCommitResponsePartition
    gc = ctx.broker.group_coordinator
    results: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    order: list[tuple[str, int]] = []
    for t in request.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            order.append(tp)
            if gc is None:
                results[tp] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            elif not _partition_exists(ctx, t.name, p.partition_index):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch,
                                                p.committed_metadata or "")
    if gc is not None and offsets:
        retention = request.retention_time_ms if 2 <= ctx.api_version <= 4 else -1
        results.update(gc.commit_offsets(
            request.group_id, request.generation_id_or_member_epoch, request.member_id or "",
            request.group_instance_id, offsets, retention))
        if ErrorCode.NONE in results.values():
            # acknowledged once every in-sync replica of the offsets partition has it
            code = await _group_write_replicated(ctx, request.group_id)
            if code is not None:
                for tp, c in results.items():
                    if c == ErrorCode.NONE:
                        results[tp] = code
    topics: dict[str, list[Message]] = {}
    for tp in order:
        topics.setdefault(tp[0], []).append(RP(partition_index=tp[1], error_code=int(results[tp])))
    return cls(throttle_time_ms=0, topics=[RT(name=n, partitions=ps) for n, ps in topics.items()])


# Kafka's answer to a group write (commit or group metadata) that failed to replicate
# (GroupMetadataManager): the coordinator moved (NOT_COORDINATOR) or cannot make it durable
# now (COORDINATOR_NOT_AVAILABLE)
_GROUP_WRITE_ERRORS = {ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
                       ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR}


async def _group_write_replicated(ctx: RequestContext, group_id: str) -> ErrorCode | None:
    """Wait until every write to ``group_id``'s offsets partition so far is on its whole
    ISR (``offsets.commit.timeout.ms`` at most); None when it is, else the error a group
    request answers with."""
    wait = ctx.broker.group_write_wait(group_id)
    if wait is None:
        return None
    timeout_ms = int(ctx.broker.config.get("offsets.commit.timeout.ms"))
    failed = await wait_replicated(ctx.park, [wait], timeout_ms)
    if not failed:
        return None
    return _GROUP_WRITE_ERRORS.get(next(iter(failed.values())), ErrorCode.COORDINATOR_NOT_AVAILABLE)


# v5 leader epoch, v6 flexible, v7 require_stable (no pending transactional offsets yet).
@register(ApiKey.OFFSET_FETCH, 1, 7)
async def handle_offset_fetch(ctx: RequestContext, request: TopLevel) -> TopLevel:
    cls = _resp(ApiKey.OFFSET_FETCH)
    RT, RP = cls.OffsetFetchResponseTopic, cls.OffsetFetchResponsePartition
    gc = ctx.broker.group_coordinator
    wanted = None if request.topics is None else [
        (t.name, p) for t in request.topics for p in t.partition_indexes]
    if gc is None:
        err = ErrorCode.COORDINATOR_NOT_AVAILABLE
        found: dict[tuple[str, int], OffsetAndMetadata | None] = {tp: None for tp in wanted or []}
    else:
        err, found = gc.fetch_offsets(request.group_id, wanted)
    part_err = err if ctx.api_version < 2 else ErrorCode.NONE
    topics: dict[str, list[Message]] = {}
    for (topic, partition), om in found.items():
        topics.setdefault(topic, []).append(RP(
            partition_index=partition,
            committed_offset=-1 if om is None else om.offset,
            committed_leader_epoch=NO_LEADER_EPOCH if om is None else om.leader_epoch,
            metadata="" if om is None else om.metadata,
            error_code=int(part_err)))
    return cls(throttle_time_ms=0, error_code=int(err),
               topics=[RT(name=n, partitions=ps) for n, ps in topics.items()])


# --------------------------------------------------------------------------- admin


# v3+ is flexible, v4 adds the state (filter): confluent-kafka and kafka-python admins
# report group states only from v4 on.
@register(ApiKey.LIST_GROUPS, 0, 4)
async def handle_list_groups(ctx: RequestContext, request: TopLevel) -> TopLevel:
    cls = _resp(ApiKey.LIST_GROUPS)
    gc = _coordinator(ctx)
    states = request.states_filter or None
    Listed = cls.ListedGroup
    return cls(throttle_time_ms=0, error_code=int(ErrorCode.NONE), groups=[
        Listed(group_id=g, protocol_type=pt, group_state=st)
        for g, pt, st in gc.list_groups(states)])


# v4 adds members' group.instance.id (static membership), v5 is flexible.
@register(ApiKey.DESCRIBE_GROUPS, 0, 5)
async def handle_describe_groups(ctx: RequestContext, request: TopLevel) -> TopLevel:
    cls = _resp(ApiKey.DESCRIBE_GROUPS)
    DG, DM = cls.DescribedGroup, cls.DescribedGroupMember
    gc = ctx.broker.group_coordinator
    out = []
    for gid in request.groups:
        if gc is None:
            out.append(DG(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), group_id=gid,
                          group_state="", protocol_type="", protocol_data="", members=[],
                          authorized_operations=INT32_MIN))
            continue
        d = gc.describe_group(gid)
        out.append(DG(
            error_code=int(d.error), group_id=gid, group_state=d.state,
            protocol_type=d.protocol_type, protocol_data=d.protocol,
            members=[DM(member_id=m.member_id, group_instance_id=m.group_instance_id,
                        client_id=m.client_id, client_host=m.client_host,
                        member_metadata=m.metadata, member_assignment=m.assignment)
                     for m in d.members],
            # Not computed (no ACLs): the schema's "unknown" sentinel, never -1 (which
            # kafka-python decodes as an operation bit set and crashes on).
            authorized_operations=INT32_MIN))
    return cls(throttle_time_ms=0, groups=out)


@register(ApiKey.DELETE_GROUPS, 0, 2)
async def handle_delete_groups(ctx: RequestContext, request: TopLevel) -> TopLevel:
    cls = _resp(ApiKey.DELETE_GROUPS)
    R = cls.DeletableGroupResult
    gc = ctx.broker.group_coordinator
    if gc is None:
        results = {g: ErrorCode.COORDINATOR_NOT_AVAILABLE for g in request.groups_names}
    else:
        results = gc.delete_groups(list(request.groups_names))
    return cls(throttle_time_ms=0, results=[
        R(group_id=g, error_code=int(results[g])) for g in request.groups_names])
