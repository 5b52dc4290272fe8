"""Metadata: brokers, controller, topics with their partitions, leaders and epochs."""

from __future__ import annotations

from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode, KafkaError
from sparklog.protocol.schema import Message, TopLevel

_ZERO_UUID = bytes(16)


@register(ApiKey.METADATA, 1, 12)
async def handle_metadata(ctx: RequestContext, request: TopLevel) -> TopLevel:
    broker = ctx.broker
    resp_cls = api_spec(ApiKey.METADATA).response
    TopicResp, PartResp, BrokerResp = (resp_cls.MetadataResponseTopic,
                                       resp_cls.MetadataResponsePartition,
                                       resp_cls.MetadataResponseBroker)
    md = broker.metadata
    # v1-v3 have no allow_auto_topic_creation field: Kafka auto-creates for them
    allow_auto = ctx.api_version < 4 or bool(request.allow_auto_topic_creation)

    def describe(name: str | None, topic_id: bytes = _ZERO_UUID) -> Message:
        info = md.topic(name) if name is not None else md.topic_by_id(topic_id)
        if info is None and name is not None:
            if allow_auto:
                try:
                    info = broker.auto_create_topic(name)
                except KafkaError as exc:
                    return TopicResp(error_code=int(exc.error_code), name=name,
                                     topic_id=_ZERO_UUID)
            if info is None:
                return TopicResp(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), name=name,
                                 topic_id=_ZERO_UUID)
        if info is None:
            return TopicResp(error_code=int(ErrorCode.UNKNOWN_TOPIC_ID), name=None, topic_id=topic_id)
        parts = []
        for p in sorted(info.partitions.values(), key=lambda x: x.partition):
            live = p.leader in md.live_brokers
            parts.append(PartResp(
                error_code=int(ErrorCode.NONE if live else ErrorCode.LEADER_NOT_AVAILABLE),
                partition_index=p.partition,
                leader_id=p.leader if live else -1,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                offline_replicas=[r for r in p.replicas if r not in md.live_brokers],
            ))
        return TopicResp(error_code=int(ErrorCode.NONE), name=info.name, topic_id=info.topic_id,
                         is_internal=info.internal, partitions=parts)

    if request.topics is None:
        topics = [describe(name) for name in sorted(md.topics())]
    else:
        topics = [describe(t.name, t.topic_id) for t in request.topics]
    brokers = [BrokerResp(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
               for b in md.live_broker_list()]
    return resp_cls(throttle_time_ms=0, brokers=brokers, cluster_id=md.cluster_id,
                    controller_id=broker.controller_node_id, topics=topics)
