"""Registry of every declared API, and the frame-level encode/decode entry points.

Both the broker and sparklog's own client go through these functions:

    frame = <int32 size> <header> <body>

``decode_request_header``/``decode_request``/``decode_response`` take a frame WITHOUT its
size prefix (the connection has already read it); ``encode_request``/``encode_response``
produce the frame WITH its size prefix, ready for the socket.  ``encode_response`` returns
chunks: byte buffers and the external record payloads (e.g. file slices for
``os.sendfile``) the message carries, in wire order, so fetch data is never copied.
"""

from __future__ import annotations

import struct
from typing import Any

from sparklog.protocol.errors import MalformedFrameError, UnsupportedVersionError
from sparklog.protocol.headers import (
    RequestHeader,
    peek_api_key_version,
    read_request_header,
    read_response_header,
    write_request_header,
    write_response_header,
)
from sparklog.protocol.messages import (
    admin,
    api_versions,
    controller,
    fetch,
    groups,
    metadata,
    offsets,
    produce,
    replicas,
    transactions,
)
from sparklog.protocol.primitives import Reader, Writer
from sparklog.protocol.schema import ApiSpec, TopLevel

__all__ = [
    "API_BY_KEY",
    "API_BY_NAME",
    "ApiSpec",
    "RequestHeader",
    "decode_request_header",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_bytes",
    "request_class",
    "response_class",
]

_ALL: list[ApiSpec] = [
    produce.PRODUCE,
    fetch.FETCH,
    fetch.LIST_OFFSETS,
    metadata.METADATA,
    offsets.OFFSET_COMMIT,
    offsets.OFFSET_FETCH,
    groups.FIND_COORDINATOR,
    groups.JOIN_GROUP,
    groups.HEARTBEAT,
    groups.LEAVE_GROUP,
    groups.SYNC_GROUP,
    groups.DESCRIBE_GROUPS,
    groups.LIST_GROUPS,
    api_versions.API_VERSIONS,
    admin.CREATE_TOPICS,
    admin.DELETE_TOPICS,
    admin.DELETE_RECORDS,
    transactions.INIT_PRODUCER_ID,
    fetch.OFFSET_FOR_LEADER_EPOCH,
    transactions.ADD_PARTITIONS_TO_TXN,
    transactions.ADD_OFFSETS_TO_TXN,
    transactions.END_TXN,
    transactions.WRITE_TXN_MARKERS,
    transactions.TXN_OFFSET_COMMIT,
    admin.DESCRIBE_CONFIGS,
    admin.ALTER_CONFIGS,
    admin.INCREMENTAL_ALTER_CONFIGS,
    admin.CREATE_PARTITIONS,
    groups.DELETE_GROUPS,
    replicas.ELECT_LEADERS,
    replicas.ALTER_PARTITION_REASSIGNMENTS,
    replicas.LIST_PARTITION_REASSIGNMENTS,
    metadata.DESCRIBE_CLUSTER,
    controller.ALTER_PARTITION,
    controller.BROKER_REGISTRATION,
    controller.BROKER_HEARTBEAT,
    controller.ALLOCATE_PRODUCER_IDS,
    transactions.DESCRIBE_TRANSACTIONS,
    transactions.LIST_TRANSACTIONS,
]

_HEADER_V1 = struct.Struct(">hhih")

API_BY_KEY: dict[int, ApiSpec] = {spec.key: spec for spec in sorted(_ALL, key=lambda s: s.key)}
API_BY_NAME: dict[str, ApiSpec] = {spec.name: spec for spec in API_BY_KEY.values()}


def _spec(api_key: int, api_version: int) -> ApiSpec:
    spec = API_BY_KEY.get(api_key)
    if spec is None:
        raise UnsupportedVersionError(f"unknown API key {api_key}")
    if not spec.min_version <= api_version <= spec.max_version:
        raise UnsupportedVersionError(
            f"{spec.name} v{api_version} not supported (v{spec.min_version}-v{spec.max_version})"
        )
    return spec


def request_class(api_key: int) -> type[TopLevel]:
    return API_BY_KEY[api_key].request


def response_class(api_key: int) -> type[TopLevel]:
    return API_BY_KEY[api_key].response


def decode_request_header(buf: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Parse the header of a request frame -> (header, position of the body).

    Works for unknown APIs and unsupported versions too (the header format is chosen from
    Kafka's first flexible version of the API, which we know even for versions we do not
    serve; an unknown API is read as header v1), so the broker can always answer.
    """
    n = len(buf)
    if n < 10:
        # too short for header v1; header v0 (8 bytes) is only ever used by APIs we
        # do not declare, so let the generic reader produce the precise error
        peek_api_key_version(buf)
        return read_request_header(Reader(buf), 1), 0
    api_key, api_version, correlation_id, client_len = _HEADER_V1.unpack_from(buf, 0)
    pos = 10
    if client_len >= 0:
        if pos + client_len > n:
            raise MalformedFrameError("truncated client_id in the request header")
        try:
            client_id: str | None = str(buf[10:10 + client_len], "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedFrameError("client_id is not valid UTF-8") from exc
        pos += client_len
    elif client_len == -1:
        client_id = None
    else:
        raise MalformedFrameError(f"invalid client_id length {client_len}")
    tags = None
    spec = API_BY_KEY.get(api_key)
    if spec is not None and spec.flexible is not None and api_version >= spec.flexible:
        if pos < n and buf[pos] == 0:
            pos += 1
        else:
            r = Reader(buf, pos)
            tags = dict(r.tagged_fields())
            pos = r.pos
    return RequestHeader(api_key, api_version, correlation_id, client_id, tags), pos


def decode_request(api_key: int, api_version: int, buf: bytes | bytearray | memoryview,
                   pos: int = 0) -> Any:
    """Decode a request body starting at ``pos`` (trailing bytes are tolerated)."""
    return _spec(api_key, api_version).request.decode(buf, api_version, pos)


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   message: TopLevel) -> bytes:
    """A complete request frame (size prefix included)."""
    spec = _spec(api_key, api_version)
    w = Writer()
    w.begin_frame()
    write_request_header(w, RequestHeader(api_key, api_version, correlation_id, client_id),
                         spec.request_header_version(api_version))
    message.write(w, api_version)
    w.end_frame()
    return w.getvalue()


def encode_response(api_key: int, api_version: int, correlation_id: int,
                    message: TopLevel) -> list[Any]:
    """A complete response frame as chunks: byte buffers and external record payloads."""
    spec = _spec(api_key, api_version)
    w = Writer()
    w.begin_frame()
    write_response_header(w, correlation_id, spec.response_header_version(api_version))
    message.write(w, api_version)
    w.end_frame()
    return w.chunks()


def encode_response_bytes(api_key: int, api_version: int, correlation_id: int,
                          message: TopLevel) -> bytes:
    """Like ``encode_response`` for messages without external payloads."""
    spec = _spec(api_key, api_version)
    w = Writer()
    w.begin_frame()
    write_response_header(w, correlation_id, spec.response_header_version(api_version))
    message.write(w, api_version)
    w.end_frame()
    return w.getvalue()


def decode_response(api_key: int, api_version: int, buf: bytes | bytearray | memoryview,
                    pos: int = 0) -> tuple[int, Any]:
    """Decode a response frame (without size prefix) -> (correlation_id, message)."""
    spec = _spec(api_key, api_version)
    r = Reader(buf, pos)
    correlation_id = read_response_header(r, spec.response_header_version(api_version))
    return correlation_id, spec.response.read(r, api_version)
