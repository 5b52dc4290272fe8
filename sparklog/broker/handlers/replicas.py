"""ElectLeaders: preferred or unclean leader elections, decided by the controller.

The broker forwards the request through its ``ControllerChannel`` (as a KRaft broker
forwards it to the active controller) and answers per partition; the controller process
answers the same request with the same two helpers.
"""

from __future__ import annotations

from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import KafkaError
from sparklog.protocol.schema import TopLevel

__all__ = ["election_response", "requested_partitions"]


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
