"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and brokers.

A topic's stored map is its overrides; a broker's is its dynamic configs, per broker (its
id) or cluster-wide (the empty name), for the keys Kafka lets change at run time
(``DYNAMIC_BROKER_KEYS``). AlterConfigs replaces a resource's whole map;
IncrementalAlterConfigs edits it key by key (KIP-339) and then stores the result the same
way, so both end in one validation and one controller write per resource.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sparklog.broker.config import (
    BROKER_CONFIGS,
    DYNAMIC_BROKER_KEYS,
    TOPIC_CONFIG_SYNONYMS,
    TOPIC_CONFIGS,
    ConfigSource,
    apply_config_ops,
    validate_topic_configs,
)
from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode, InvalidRequestError, KafkaError
from sparklog.protocol.messages.admin import RESOURCE_BROKER, RESOURCE_TOPIC
from sparklog.protocol.schema import Message, TopLevel

# Kafka's ConfigType ids (DescribeConfigs v3+)
_CONFIG_TYPE = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7,
                "password": 9}

_TOPIC_LIST_KEYS = frozenset(k for k, (typ, _b, _f) in TOPIC_CONFIGS.items() if typ == "list")
_BROKER_LIST_KEYS = frozenset(k for k, spec in BROKER_CONFIGS.items() if spec.type == "list")
_BROKER_DEFAULTS = {k: spec.default for k, spec in BROKER_CONFIGS.items()
                    if spec.default is not None}


def _describe_topic(ctx: RequestContext, name: str, keys: list[str] | None, synonyms: bool,
                    entry_cls: type[Message], syn_cls: type[Message]) -> list[Message]:
    """A topic's configs: its override, else the default its broker synonyms give (the
    first layer that sets one: dynamic per broker, dynamic cluster default, static)."""
    broker = ctx.broker
    info = broker.metadata.topic(name)
    if info is None:
        raise _Unknown()
    cfg = broker.config
    defaults = cfg.topic_defaults()
    out = []
    for key in sorted(TOPIC_CONFIGS):
        if keys is not None and key not in keys:
            continue
        syns = [(bk, source, value) for bk in TOPIC_CONFIG_SYNONYMS.get(key, ())
                for source, value in cfg.layers(bk)]
        if key in info.configs:
            value, source = info.configs[key], ConfigSource.DYNAMIC_TOPIC_CONFIG
            syns.insert(0, (key, source, value))
        else:
            value = defaults[key]
            source = syns[0][1] if syns else ConfigSource.DEFAULT_CONFIG
        out.append(entry_cls(name=key, value=value, read_only=False, config_source=source,
                             is_sensitive=False,
                             synonyms=[syn_cls(name=n, value=v, source=src)
                                       for n, src, v in syns] if synonyms else [],
                             config_type=_CONFIG_TYPE.get(TOPIC_CONFIGS[key][0], 0),
                             documentation=None))
    return out


def _describe_broker(ctx: RequestContext, entity: str, keys: list[str] | None, synonyms: bool,
                     entry_cls: type[Message], syn_cls: type[Message]) -> list[Message]:
    """This broker's configs (every known key and every dynamic one, by its highest layer),
    or for the empty name, as Kafka, only the cluster-wide dynamic defaults."""
    cfg = ctx.broker.config
    defaults_only = entity == ""
    names = set(cfg.dynamic(default=True))
    if not defaults_only:
        names |= set(BROKER_CONFIGS) | set(cfg.dynamic(default=False))
    out = []
    for key in sorted(names):
        if keys is not None and key not in keys:
            continue
        spec = BROKER_CONFIGS.get(key)
        layers = cfg.layers(key)
        if defaults_only:
            layers = [(s, v) for s, v in layers if s == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        source, value = layers[0] if layers else (ConfigSource.DEFAULT_CONFIG, None)
        sensitive = spec is not None and spec.type == "password"
        syns = [syn_cls(name=key, value=None if sensitive else v, source=s) for s, v in layers]
        out.append(entry_cls(name=key, value=None if sensitive else value,
                             read_only=spec is not None and key not in DYNAMIC_BROKER_KEYS,
                             config_source=source, is_sensitive=sensitive,
                             synonyms=syns if synonyms else [],
                             config_type=_CONFIG_TYPE.get(spec.type if spec else "string", 0),
                             documentation=spec.doc or None if spec else None))
    return out


def _broker_entity(ctx: RequestContext, name: str) -> str:
    """The resource name of a BROKER resource this broker answers for: its own id, or ""
    (the cluster-wide default)."""
    own = str(ctx.broker.node_id)
    if name not in ("", own):
        raise InvalidRequestError(
            f"Unexpected broker id, expected {own} or empty string, but received {name}")
    return name


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
                configs = _describe_broker(ctx, _broker_entity(ctx, res.resource_name), keys,
                                           request.include_synonyms, Entry, Syn)
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
        except KafkaError as exc:
            results.append(Result(error_code=int(exc.error_code), error_message=str(exc),
                                  resource_type=res.resource_type, resource_name=res.resource_name))
            continue
        results.append(Result(error_code=0, error_message=None, resource_type=res.resource_type,
                              resource_name=res.resource_name, configs=configs))
    return resp_cls(throttle_time_ms=0, results=results)


class _Target:
    """One resource an alter request changes: its stored map (a topic's overrides, or a
    broker entity's dynamic configs), what APPEND/SUBTRACT start from when a key is not
    in it, and how a new whole map is checked and stored."""

    def __init__(self, ctx: RequestContext, res: Message) -> None:
        broker = ctx.broker
        self.name: str = res.resource_name
        if res.resource_type == RESOURCE_TOPIC:
            info = broker.metadata.topic(self.name)
            if info is None:
                raise _Unknown()
            self.is_topic = True
            self.current = dict(info.configs)
            self.defaults: Mapping[str, str] = broker.config.topic_defaults()
            self.list_keys = _TOPIC_LIST_KEYS
        elif res.resource_type == RESOURCE_BROKER:
            self.is_topic = False
            self.current = broker.metadata.broker_configs(_broker_entity(ctx, self.name))
            self.defaults = {**_BROKER_DEFAULTS, **broker.config.raw()}
            self.list_keys = _BROKER_LIST_KEYS
        else:
            raise InvalidRequestError(f"resource type {res.resource_type} not supported")
        self._broker = broker

    def store(self, configs: Mapping[str, str | None], validate_only: bool) -> None:
        """Make ``configs`` the whole map (None values: back to the default)."""
        if self.is_topic:
            valid = validate_topic_configs(configs)
            if not validate_only:
                self._broker.set_topic_configs(self.name, valid)
        else:
            self._broker.set_broker_configs(
                self.name, {k: v for k, v in configs.items() if v is not None},
                validate_only=validate_only)


_ConfigsOf = Callable[[_Target, Message], Mapping[str, str | None]]


def _alter_results(ctx: RequestContext, request: TopLevel, result_cls: type[Message],
                   configs_of: _ConfigsOf) -> list[Message]:
    """One result per resource: ``configs_of`` gives the resource's new whole map."""
    results = []
    for res in request.resources:
        code, msg = 0, None
        try:
            target = _Target(ctx, res)
            target.store(configs_of(target, res), request.validate_only)
        except _Unknown:
            code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            msg = f"topic {res.resource_name!r} does not exist"
        except KafkaError as exc:
            code, msg = int(exc.error_code), str(exc)
        results.append(result_cls(error_code=code, error_message=msg,
                                  resource_type=res.resource_type,
                                  resource_name=res.resource_name))
    return results


def _replaced_configs(target: _Target, res: Message) -> dict[str, str | None]:
    return {c.name: c.value for c in res.configs}


def _edited_configs(target: _Target, res: Message) -> dict[str, str]:
    return apply_config_ops(target.current,
                            [(c.name, c.config_operation, c.value) for c in res.configs],
                            target.defaults, target.list_keys)


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
