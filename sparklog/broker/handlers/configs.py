"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics (and read-only
broker configs).

AlterConfigs replaces a topic's whole override set; IncrementalAlterConfigs edits it key by
key (KIP-339) and then stores the result the same way, so both end in one validation and
one controller write per resource.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sparklog.broker.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    apply_config_ops,
    validate_topic_configs,
)
from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode, KafkaError
from sparklog.protocol.schema import Message, TopLevel

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

# Kafka's ConfigSource ids
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# Kafka's ConfigType ids (DescribeConfigs v3+)
_CONFIG_TYPE = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7,
                "password": 9}


def _describe_topic(ctx: RequestContext, name: str, keys: list[str] | None, synonyms: bool,
                    entry_cls: type[Message], syn_cls: type[Message]) -> list[Message]:
    broker = ctx.broker
    info = broker.metadata.topic(name)
    if info is None:
        raise _Unknown()
    defaults = broker.config.topic_defaults()
    out = []
    for key in sorted(TOPIC_CONFIGS):
        if keys is not None and key not in keys:
            continue
        typ, broker_key, _fallback = TOPIC_CONFIGS[key]
        broker_set = broker_key is not None and broker.config.is_set(broker_key)
        syns = []
        if key in info.configs:
            value, source = info.configs[key], DYNAMIC_TOPIC_CONFIG
            if synonyms:
                syns.append(syn_cls(name=key, value=value, source=DYNAMIC_TOPIC_CONFIG))
        else:
            value = defaults[key]
            source = STATIC_BROKER_CONFIG if broker_set else DEFAULT_CONFIG
        if synonyms and broker_key is not None:
            syns.append(syn_cls(name=broker_key, value=defaults[key],
                                source=STATIC_BROKER_CONFIG if broker_set else DEFAULT_CONFIG))
        out.append(entry_cls(name=key, value=value, read_only=False, config_source=source,
                             is_sensitive=False, synonyms=syns,
                             config_type=_CONFIG_TYPE.get(typ, 0), documentation=None))
    return out


def _describe_broker(ctx: RequestContext, keys: list[str] | None, synonyms: bool,
                     entry_cls: type[Message], syn_cls: type[Message]) -> list[Message]:
    cfg = ctx.broker.config
    out = []
    for key in sorted(BROKER_CONFIGS):
        if keys is not None and key not in keys:
            continue
        spec = BROKER_CONFIGS[key]
        raw = cfg.raw().get(key, spec.default)
        sensitive = spec.type == "password"
        source = STATIC_BROKER_CONFIG if cfg.is_set(key) else DEFAULT_CONFIG
        syns = [syn_cls(name=key, value=None if sensitive else raw, source=source)] if synonyms else []
        out.append(entry_cls(name=key, value=None if sensitive else raw, read_only=True,
                             config_source=source, is_sensitive=sensitive, synonyms=syns,
                             config_type=_CONFIG_TYPE.get(spec.type, 0),
                             documentation=spec.doc or None))
    return out


class _Unknown(Exception):
    pass


@register(ApiKey.DESCRIBE_CONFIGS, 1, 4)
async def handle_describe_configs(ctx: RequestContext, request: TopLevel) -> TopLevel:
    resp_cls = api_spec(ApiKey.DESCRIBE_CONFIGS).response
    Result, Entry, Syn = (resp_cls.DescribeConfigsResult, resp_cls.DescribeConfigsResourceResult,
                          resp_cls.DescribeConfigsSynonym)
    results = []
    for res in request.resources:
        keys = list(res.configuration_keys) if res.configuration_keys is not None else None
        try:
            if res.resource_type == RESOURCE_TOPIC:
                configs = _describe_topic(ctx, res.resource_name, keys, request.include_synonyms,
                                          Entry, Syn)
            elif res.resource_type == RESOURCE_BROKER:
                if res.resource_name not in ("", str(ctx.broker.node_id)):
                    results.append(Result(error_code=int(ErrorCode.INVALID_REQUEST),
                                          error_message=f"unknown broker {res.resource_name!r}",
                                          resource_type=res.resource_type,
                                          resource_name=res.resource_name))
                    continue
                configs = _describe_broker(ctx, keys, request.include_synonyms, Entry, Syn)
            else:
                results.append(Result(error_code=int(ErrorCode.INVALID_REQUEST),
                                      error_message=f"resource type {res.resource_type} not supported",
                                      resource_type=res.resource_type,
                                      resource_name=res.resource_name))
                continue
        except _Unknown:
            results.append(Result(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                  error_message=f"topic {res.resource_name!r} does not exist",
                                  resource_type=res.resource_type, resource_name=res.resource_name))
            continue
        results.append(Result(error_code=0, error_message=None, resource_type=res.resource_type,
                              resource_name=res.resource_name, configs=configs))
    return resp_cls(throttle_time_ms=0, results=results)


def _alter_topic(ctx: RequestContext, name: str, configs: Mapping[str, str | None],
                 validate_only: bool) -> None:
    """Make ``configs`` the topic's whole override set (None values: back to the default)."""
    broker = ctx.broker
    valid = validate_topic_configs(configs)
    if broker.metadata.topic(name) is None:
        raise _Unknown()
    if not validate_only:
        broker.set_topic_configs(name, valid)


_ConfigsOf = Callable[[RequestContext, Message], Mapping[str, str | None]]


def _alter_results(ctx: RequestContext, request: TopLevel, result_cls: type[Message],
                   configs_of: _ConfigsOf) -> list[Message]:
    """One result per resource: ``configs_of`` gives a topic's new override set."""
    results = []
    for res in request.resources:
        code, msg = 0, None
        if res.resource_type != RESOURCE_TOPIC:
            code = int(ErrorCode.INVALID_REQUEST)
            msg = "only topic configs can be altered (broker configs are static)"
        else:
            try:
                _alter_topic(ctx, res.resource_name, configs_of(ctx, res),
                             request.validate_only)
            except _Unknown:
                code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                msg = f"topic {res.resource_name!r} does not exist"
            except KafkaError as exc:
                code, msg = int(exc.error_code), str(exc)
        results.append(result_cls(error_code=code, error_message=msg,
                                  resource_type=res.resource_type,
                                  resource_name=res.resource_name))
    return results


def _replaced_configs(ctx: RequestContext, res: Message) -> dict[str, str | None]:
    return {c.name: c.value for c in res.configs}


def _edited_configs(ctx: RequestContext, res: Message) -> dict[str, str]:
    info = ctx.broker.metadata.topic(res.resource_name)
    if info is None:
        raise _Unknown()
    list_keys = {k for k, (typ, _b, _f) in TOPIC_CONFIGS.items() if typ == "list"}
    return apply_config_ops(info.configs, [(c.name, c.config_operation, c.value)
                                           for c in res.configs],
                            ctx.broker.config.topic_defaults(), list_keys)


@register(ApiKey.ALTER_CONFIGS, 0, 2)
async def handle_alter_configs(ctx: RequestContext, request: TopLevel) -> TopLevel:
    resp_cls = api_spec(ApiKey.ALTER_CONFIGS).response
    return resp_cls(throttle_time_ms=0, responses=_alter_results(
        ctx, request, resp_cls.AlterConfigsResourceResponse, _replaced_configs))


@register(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def handle_incremental_alter_configs(ctx: RequestContext, request: TopLevel) -> TopLevel:
    resp_cls = api_spec(ApiKey.INCREMENTAL_ALTER_CONFIGS).response
    return resp_cls(throttle_time_ms=0, responses=_alter_results(
        ctx, request, resp_cls.AlterConfigsResourceResponse, _edited_configs))
