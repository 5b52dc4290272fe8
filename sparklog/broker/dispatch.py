"""Request dispatch: frame -> header -> decoded request -> handler -> encoded response.

Handlers register per API key with the version range they serve::

    @register(ApiKey.METADATA, 1, 5)
    async def handle_metadata(ctx: RequestContext, request: TopLevel) -> TopLevel | None: ...

ApiVersions advertises exactly the registered ranges (librdkafka starts calling whatever
is advertised, so advertising more than we serve breaks real clients).

Bad input follows Kafka: a frame whose header cannot be parsed, an unknown API key or a
version we do not serve (other than ApiVersions) is logged once and the connection closed;
ApiVersions with a version above ours, or a body that does not parse, gets a v0-shaped
UNSUPPORTED_VERSION reply carrying the full list so the client can retry (KIP-511). Any
other body that does not decode drops the connection, as in Kafka. A handler's
``KafkaError`` becomes a response carrying its code at the top level where the response
has one at that version; otherwise the connection is closed. Any other exception is the
connection's to handle (it logs and closes).
"""

from __future__ import annotations

import importlib
import logging
import struct
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparklog.broker.server import CloseConnection, Connection
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode, KafkaError, MalformedFrameError
from sparklog.protocol.messages import API_BY_KEY, ApiSpec
from sparklog.protocol.primitives import Reader, Writer
from sparklog.protocol.schema import Message, TopLevel

if TYPE_CHECKING:
    from sparklog.broker.acks import Park
    from sparklog.broker.broker import Broker

log = logging.getLogger(__name__)

__all__ = [
    "RequestHeader",
    "RequestContext",
    "Handler",
    "HandlerSpec",
    "register",
    "registered",
    "supported_versions",
    "api_spec",
    "Dispatcher",
    "encode_response",
    "error_response",
]


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    tagged_fields: dict[int, bytes] | None = None


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    connection_id: int
    broker: Broker
    connection: Connection | None = None
    received_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    @property
    def park(self) -> Park | None:
        """How this request waits (``acks.wait_replicated``): on its connection."""
        return None if self.connection is None else self.connection.park

    def log_once(self, key: str, level: int, msg: str, *args: Any) -> None:
        if self.connection is not None:
            self.connection.server.log_once(key, level, msg, *args)
        else:
            log.log(level, msg, *args)


Handler = Callable[[RequestContext, TopLevel], Awaitable[TopLevel | None]]


@dataclass(slots=True)
class HandlerSpec:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler


_HANDLERS: dict[int, HandlerSpec] = {}

HANDLER_MODULES = (
    "sparklog.broker.handlers.api_versions",
    "sparklog.broker.handlers.metadata",
    "sparklog.broker.handlers.produce",
    "sparklog.broker.handlers.fetch",
    "sparklog.broker.handlers.list_offsets",
    "sparklog.broker.handlers.topics",
    "sparklog.broker.handlers.configs",
    "sparklog.broker.handlers.records",
    "sparklog.broker.handlers.producer_id",
    "sparklog.broker.handlers.cluster",
    "sparklog.broker.handlers.replicas",
    "sparklog.broker.handlers.groups",
    "sparklog.broker.handlers.transactions",
)


def register(api_key: int, min_version: int, max_version: int) -> Callable[[Handler], Handler]:
    """Register ``handler`` for ``api_key`` versions ``min_version..max_version``."""

    def deco(handler: Handler) -> Handler:
        spec = API_BY_KEY.get(api_key)
        if spec is not None and not (
            spec.min_version <= min_version and max_version <= spec.max_version
        ):
            raise ValueError(
                f"handler range {min_version}-{max_version} for key {api_key} is outside "
                f"the declared message versions {spec.min_version}-{spec.max_version}"
            )
        _HANDLERS[api_key] = HandlerSpec(api_key, min_version, max_version, handler)
        return handler

    return deco


def registered() -> dict[int, HandlerSpec]:
    return dict(_HANDLERS)


def supported_versions(handlers: Mapping[int, HandlerSpec] = _HANDLERS) -> list[tuple[int, int, int]]:
    """(api_key, min_version, max_version) of every handler, by key."""
    return [(k, s.min_version, s.max_version) for k, s in sorted(handlers.items())]


def api_spec(api_key: int) -> ApiSpec:
    """The protocol declaration of ``api_key`` (every registered key has one)."""
    return API_BY_KEY[api_key]


def load_handlers() -> None:
    """Import every handler module so its ``register`` calls run."""
    for mod in HANDLER_MODULES:
        importlib.import_module(mod)


_HDR = struct.Struct(">hhi")


class Dispatcher:
    """Turns one request frame into response chunks for ``Connection``.

    ``handlers`` defaults to every registered handler (``load_handlers``); a test may
    serve its own table."""

    def __init__(self, broker: Broker, handlers: Mapping[int, HandlerSpec] | None = None) -> None:
        self.broker = broker
        if handlers is None:
            load_handlers()
            handlers = _HANDLERS
        self.handlers = handlers
        # (api_key, api_version) -> requests served; cheap, and tells operators and tests
        # which versions real clients actually use
        self.usage: Counter[tuple[int, int]] = Counter()

    async def process(self, conn: Connection, frame: bytearray) -> list[Any] | None:
        if len(frame) < 10:
            conn.server.log_once("short-header", logging.WARNING,
                                 "closing connection %s from %s: %d-byte request has no header",
                                 conn.connection_id, conn.client_host, len(frame))
            raise CloseConnection()
        api_key, api_version, correlation_id = _HDR.unpack_from(frame, 0)
        hspec = self.handlers.get(api_key)
        spec = API_BY_KEY.get(api_key) if hspec is not None else None
        if hspec is None or spec is None:
            conn.server.log_once(f"unknown-api-{api_key}", logging.WARNING,
                                 "closing connection %s from %s: unknown API key %d",
                                 conn.connection_id, conn.client_host, api_key)
            raise CloseConnection()
        r = Reader(frame, 8)
        try:
            client_id = r.nullable_string()
            tags = r.tagged_fields() if spec.is_flexible(api_version) else None
        except MalformedFrameError:
            conn.server.log_once("bad-header", logging.WARNING,
                                 "closing connection %s from %s: malformed request header",
                                 conn.connection_id, conn.client_host)
            raise CloseConnection() from None
        header = RequestHeader(api_key, api_version, correlation_id, client_id, tags)
        if not hspec.min_version <= api_version <= hspec.max_version:
            if api_key == ApiKey.API_VERSIONS:
                return self._api_versions_unsupported(correlation_id)
            conn.server.log_once(
                f"unsupported-{api_key}-{api_version}", logging.WARNING,
                "closing connection %s from %s (client %s): %s v%d not supported (serving v%d-v%d)",
                conn.connection_id, conn.client_host, client_id, spec.name, api_version,
                hspec.min_version, hspec.max_version)
            raise CloseConnection()
        try:
            request = spec.request.decode(frame, api_version, r.pos)
        except MalformedFrameError as exc:
            if api_key == ApiKey.API_VERSIONS:
                # KIP-511: a v3+ request from a newer client may not parse; the reply
                # must still tell the client what we speak.
                return self._api_versions_unsupported(correlation_id)
            conn.server.log_once(
                f"malformed-{api_key}", logging.WARNING,
                "closing connection %s from %s: malformed %s v%d request: %s",
                conn.connection_id, conn.client_host, spec.name, api_version, exc)
            raise CloseConnection() from None
        self.usage[(api_key, api_version)] += 1
        ctx = RequestContext(header, api_key, api_version, correlation_id, client_id,
                             conn.client_host, conn.connection_id, self.broker, conn)
        try:
            response = await hspec.handler(ctx, request)
        except KafkaError as exc:
            response = error_response(spec, api_version, exc.error_code, str(exc))
            if response is None:
                log.warning("%s v%d from %s failed: %s; closing the connection", spec.name,
                            api_version, conn.client_host, exc)
                raise CloseConnection() from None
        if response is None:
            return None
        return encode_response(spec, api_version, correlation_id, response)

    def _api_versions_unsupported(self, correlation_id: int) -> list[Any]:
        spec = api_spec(ApiKey.API_VERSIONS)
        resp = spec.response(error_code=int(ErrorCode.UNSUPPORTED_VERSION),
                             api_keys=api_versions_list(spec, self.handlers))
        return encode_response(spec, 0, correlation_id, resp)


def api_versions_list(spec: ApiSpec, handlers: Mapping[int, HandlerSpec] = _HANDLERS
                      ) -> list[Message]:
    """ApiVersions' ``api_keys`` entries: what ``handlers`` serve."""
    entry = spec.response.ApiVersion
    return [entry(api_key=k, min_version=lo, max_version=hi)
            for k, lo, hi in supported_versions(handlers)]


def encode_response(spec: ApiSpec, version: int, correlation_id: int,
                    response: TopLevel) -> list[Any]:
    w = Writer()
    w.int32(correlation_id)
    if spec.response_header_version(version) >= 1:
        w.buf.append(0)  # empty tag section of response header v1
    response.write(w, version)
    return w.chunks()


def error_response(spec: ApiSpec, version: int, code: ErrorCode, message: str
                    ) -> TopLevel | None:
    """A response carrying ``code`` at the top level, where this version's response has one."""
    cls = spec.response
    if not any(f.name == "error_code" and version in f.versions for f in cls._spec):
        return None
    resp = cls()
    resp.error_code = int(code)
    if "error_message" in cls._fields:
        resp.error_message = message or None
    return resp
