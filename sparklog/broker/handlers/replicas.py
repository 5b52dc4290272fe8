"""ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments: leadership and
replica moves, decided by the controller.

The broker forwards elections and reassignments through its ``ControllerChannel`` (as a
KRaft broker forwards them to the active controller) and answers per partition; ongoing
reassignments it lists from its metadata cache, which has the controller's records. The
controller process answers the same requests with the same helpers.
"""

from __future__ import annotations

from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.broker.metadata_cache import PartitionInfo
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import KafkaError
from sparklog.protocol.schema import TopLevel

__all__ = ["election_response", "listed_partitions", "reassignment_response",
           "reassignment_targets", "reassignments_listed", "requested_partitions"]


def requested_partitions(request: TopLevel) -> dict[str, list[int]] | None:
    """The partitions an ElectLeaders request names (None: every partition)."""
    if request.topic_partitions is None:
        return None
    wanted: dict[str, list[int]] = {}
    for t in request.topic_partitions:
        wanted.setdefault(t.topic, []).extend(t.partitions)
    return wanted


def election_response(results: dict[tuple[str, int], KafkaError | None]) -> TopLevel:
    """An ElectLeaders response: per topic, each partition's outcome."""
    resp = api_spec(ApiKey.ELECT_LEADERS).response
    by_topic: dict[str, list[TopLevel]] = {}
    for (topic, partition), error in sorted(results.items()):
        by_topic.setdefault(topic, []).append(resp.ReplicaElectionResult.PartitionResult(
            partition_id=partition, error_code=int(error.error_code) if error else 0,
            error_message=(str(error) or error.error_code.name) if error else None))
    return resp(throttle_time_ms=0, error_code=0, replica_election_results=[
        resp.ReplicaElectionResult(topic=topic, partition_result=parts)
        for topic, parts in by_topic.items()])


@register(ApiKey.ELECT_LEADERS, 0, 2)
async def handle_elect_leaders(ctx: RequestContext, request: TopLevel) -> TopLevel:
    # v0 has no election type: it is a preferred-replica election
    election_type = request.election_type if ctx.api_version >= 1 else 0
    return election_response(ctx.broker.channel.elect_leaders(
        election_type, requested_partitions(request)))


def reassignment_targets(request: TopLevel) -> dict[tuple[str, int], list[int] | None]:
    """An AlterPartitionReassignments request's target replicas by partition (None:
    cancel)."""
    return {(t.name, p.partition_index): None if p.replicas is None else list(p.replicas)
            for t in request.topics for p in t.partitions}


def reassignment_response(results: dict[tuple[str, int], KafkaError | None]) -> TopLevel:
    resp = api_spec(ApiKey.ALTER_PARTITION_REASSIGNMENTS).response
    by_topic: dict[str, list[TopLevel]] = {}
    for (topic, partition), error in sorted(results.items()):
        by_topic.setdefault(topic, []).append(resp.ReassignableTopicResponse
                                              .ReassignablePartitionResponse(
            partition_index=partition, error_code=int(error.error_code) if error else 0,
            error_message=(str(error) or error.error_code.name) if error else None))
    return resp(throttle_time_ms=0, error_code=0, responses=[
        resp.ReassignableTopicResponse(name=topic, partitions=parts)
        for topic, parts in by_topic.items()])


def reassignments_listed(ongoing: list[PartitionInfo]) -> TopLevel:
    """A ListPartitionReassignments response with the ``ongoing`` reassignments."""
    resp = api_spec(ApiKey.LIST_PARTITION_REASSIGNMENTS).response
    topic_cls = resp.OngoingTopicReassignment
    by_topic: dict[str, list[TopLevel]] = {}
    for p in ongoing:
        by_topic.setdefault(p.topic, []).append(topic_cls.OngoingPartitionReassignment(
            partition_index=p.partition, replicas=list(p.replicas),
            adding_replicas=list(p.adding_replicas),
            removing_replicas=list(p.removing_replicas)))
    return resp(throttle_time_ms=0, error_code=0, topics=[
        topic_cls(name=topic, partitions=parts) for topic, parts in by_topic.items()])


def listed_partitions(request: TopLevel) -> dict[str, list[int]] | None:
    """The partitions a ListPartitionReassignments request asks about (None: all)."""
    if request.topics is None:
        return None
    return {t.name: list(t.partition_indexes) for t in request.topics}


@register(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0)
async def handle_alter_partition_reassignments(ctx: RequestContext,
                                               request: TopLevel) -> TopLevel:
    return reassignment_response(ctx.broker.channel.alter_partition_reassignments(
        reassignment_targets(request)))


@register(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0)
async def handle_list_partition_reassignments(ctx: RequestContext,
                                              request: TopLevel) -> TopLevel:
    return reassignments_listed(ctx.broker.metadata.image.reassigning(
        listed_partitions(request)))
