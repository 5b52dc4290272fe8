"""CreateTopics, DeleteTopics, CreatePartitions: validated by the controller, per-topic errors."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from sparklog.broker.config import validate_topic_configs
from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode, KafkaError
from sparklog.protocol.schema import Message, TopLevel

log = logging.getLogger(__name__)


_REPEATED_TOPIC = {"error_code": int(ErrorCode.INVALID_REQUEST),
                   "error_message": "topic appears more than once in the request"}


def per_topic_results(topics: list[Message], result: type[Message],
               action: Callable[[Message], dict[str, Any]]) -> list[Message]:
    """One ``result`` per requested topic: the fields ``action`` returns, or the error of
    the ``KafkaError`` it raised. Every copy of a name given twice is refused, not just the
    later ones: which copy should win would be arbitrary."""
    counts = Counter(t.name for t in topics)
    results = []
    for t in topics:
        if counts[t.name] > 1:
            fields = _REPEATED_TOPIC
        else:
            try:
                fields = action(t)
            except KafkaError as exc:
                fields = {"error_code": int(exc.error_code),
                          "error_message": str(exc) or exc.error_code.name}
        results.append(result(name=t.name, **fields))
    return results


@register(ApiKey.CREATE_TOPICS, 2, 5)
async def handle_create_topics(ctx: RequestContext, request: TopLevel) -> TopLevel:
    resp_cls = api_spec(ApiKey.CREATE_TOPICS).response

    def create(t: Message) -> dict[str, Any]:
        configs = validate_topic_configs({c.name: c.value for c in t.configs})
        assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
        info = ctx.broker.create_topic(t.name, t.num_partitions, t.replication_factor, configs,
                                       assignments=assignments or None,
                                       validate_only=bool(request.validate_only))
        rf = len(info.partitions[0].replicas) if info.partitions else -1
        return {"error_code": 0, "error_message": None, "num_partitions": len(info.partitions),
                "replication_factor": rf, "configs": []}

    return resp_cls(throttle_time_ms=0, topics=per_topic_results(
        request.topics, resp_cls.CreatableTopicResult, create))


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

    def add(t: Message) -> dict[str, Any]:
        assignments = ([list(a.broker_ids) for a in t.assignments]
                       if t.assignments is not None else None)
        ctx.broker.create_partitions(t.name, t.count, assignments,
                                     validate_only=bool(request.validate_only))
        return {"error_code": 0, "error_message": None}

    return resp_cls(throttle_time_ms=0, results=per_topic_results(
        request.topics, resp_cls.CreatePartitionsTopicResult, add))
