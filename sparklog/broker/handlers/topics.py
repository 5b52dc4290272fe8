"""CreateTopics, DeleteTopics, CreatePartitions: validated by the controller, per-topic errors."""

from __future__ import annotations

import logging
from collections import Counter

from sparklog.broker.config import validate_topic_configs
from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode, KafkaError
from sparklog.protocol.schema import Message, TopLevel

log = logging.getLogger(__name__)


def _error(exc: KafkaError) -> tuple[int, str]:
    return int(exc.error_code), str(exc) or exc.error_code.name


_REPEATED_TOPIC = {"error_code": int(ErrorCode.INVALID_REQUEST),
                   "error_message": "topic appears more than once in the request"}


def _repeated_names(topics: list[Message]) -> set[str]:
    """Every copy of a name given twice is refused, not just the later ones: which copy
    should win would be arbitrary."""
    counts = Counter(t.name for t in topics)
    return {name for name, n in counts.items() if n > 1}


@register(ApiKey.CREATE_TOPICS, 2, 5)
async def handle_create_topics(ctx: RequestContext, request: TopLevel) -> TopLevel:
    resp_cls = api_spec(ApiKey.CREATE_TOPICS).response
    Result = resp_cls.CreatableTopicResult
    broker = ctx.broker
    repeated = _repeated_names(request.topics)
    results = []
    for t in request.topics:
        if t.name in repeated:
            results.append(Result(name=t.name, **_REPEATED_TOPIC))
            continue
        try:
            configs = validate_topic_configs({c.name: c.value for c in t.configs})
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            info = broker.create_topic(t.name, t.num_partitions, t.replication_factor, configs,
                                       assignments=assignments or None,
                                       validate_only=bool(request.validate_only))
        except KafkaError as exc:
            code, msg = _error(exc)
            results.append(Result(name=t.name, error_code=code, error_message=msg))
            continue
        rf = len(info.partitions[0].replicas) if info.partitions else -1
        results.append(Result(name=t.name, error_code=0, error_message=None,
                              num_partitions=len(info.partitions), replication_factor=rf,
                              configs=[]))
    return resp_cls(throttle_time_ms=0, topics=results)


@register(ApiKey.DELETE_TOPICS, 1, 4)
async def handle_delete_topics(ctx: RequestContext, request: TopLevel) -> TopLevel:
    resp_cls = api_spec(ApiKey.DELETE_TOPICS).response
    Result = resp_cls.DeletableTopicResult
    broker = ctx.broker
    results = []
    for name in request.topic_names:
        try:
            await broker.delete_topic(name)
            results.append(Result(name=name, error_code=0))
        except KafkaError as exc:
            results.append(Result(name=name, error_code=int(exc.error_code)))
    return resp_cls(throttle_time_ms=0, responses=results)


@register(ApiKey.CREATE_PARTITIONS, 0, 3)
async def handle_create_partitions(ctx: RequestContext, request: TopLevel) -> TopLevel:
    resp_cls = api_spec(ApiKey.CREATE_PARTITIONS).response
    Result = resp_cls.CreatePartitionsTopicResult
    broker = ctx.broker
    repeated = _repeated_names(request.topics)
    results = []
    for t in request.topics:
        if t.name in repeated:
            results.append(Result(name=t.name, **_REPEATED_TOPIC))
            continue
        try:
            assignments = ([list(a.broker_ids) for a in t.assignments]
                           if t.assignments is not None else None)
            broker.create_partitions(t.name, t.count, assignments,
                                     validate_only=bool(request.validate_only))
            results.append(Result(name=t.name, error_code=0, error_message=None))
        except KafkaError as exc:
            code, msg = _error(exc)
            results.append(Result(name=t.name, error_code=code, error_message=msg))
    return resp_cls(throttle_time_ms=0, results=results)
