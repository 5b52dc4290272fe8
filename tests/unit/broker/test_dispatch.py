"""Request dispatch: what a frame becomes, for bad input, unserved versions and handler errors.

A real Dispatcher with its own handler table, fed frames through ``process`` as a real
Connection would; the handlers are small functions written for each case."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from sparklog.broker.dispatch import Dispatcher, HandlerSpec, RequestContext
from sparklog.broker.server import CloseConnection, Connection
from sparklog.cluster.single_node import build_single_node
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode, NotCoordinatorError
from sparklog.protocol.messages import API_BY_KEY
from sparklog.protocol.schema import TopLevel
from tests.helpers.broker import connection, decode, request_frame

Handler = Callable[[RequestContext, TopLevel], Awaitable[TopLevel | None]]


async def heartbeat_ok(ctx: RequestContext, request: TopLevel) -> TopLevel:
    return API_BY_KEY[ApiKey.HEARTBEAT].response(error_code=0)


async def no_response(ctx: RequestContext, request: TopLevel) -> None:
    return None


def raising(exc: Exception) -> Handler:
    async def handler(ctx: RequestContext, request: TopLevel) -> TopLevel:
        raise exc
    return handler


def serve(tmp_path: Path, *specs: HandlerSpec) -> tuple[Dispatcher, Connection]:
    broker = build_single_node({"log.dirs": str(tmp_path)}).broker  # never started: the handlers do not use it
    dispatcher = Dispatcher(broker, {s.api_key: s for s in specs})
    return dispatcher, connection(dispatcher)


def frame(key: int, version: int, msg: TopLevel | None = None) -> bytearray:
    return request_frame(key, version, msg if msg is not None else API_BY_KEY[key].request())


def process(dispatcher: Dispatcher, conn: Connection, data: bytearray) -> Any:
    return asyncio.run(dispatcher.process(conn, data))


def test_a_served_request_gets_its_handlers_response(tmp_path: Path) -> None:
    d, conn = serve(tmp_path, HandlerSpec(ApiKey.HEARTBEAT, 0, 4, heartbeat_ok))
    cid, resp = decode(ApiKey.HEARTBEAT, 4, process(d, conn, frame(ApiKey.HEARTBEAT, 4)))
    assert (cid, resp.error_code) == (7, 0)
    assert d.usage == {(ApiKey.HEARTBEAT, 4): 1}


def test_no_response_for_a_handler_that_returns_none(tmp_path: Path) -> None:
    d, conn = serve(tmp_path, HandlerSpec(ApiKey.PRODUCE, 3, 10, no_response))
    produce = API_BY_KEY[ApiKey.PRODUCE].request(acks=0, timeout_ms=1000)
    assert process(d, conn, frame(ApiKey.PRODUCE, 9, produce)) is None


@pytest.mark.parametrize("data", [
    bytearray(b"\x00\x12\x00\x03\x00\x00"),  # shorter than any request header
    bytearray(struct.pack(">hhih", 999, 0, 1, -1)),  # an API key nobody declares
    bytearray(struct.pack(">hhih", ApiKey.HEARTBEAT, 0, 1, 40) + b"abc"),  # client id cut
], ids=["short-header", "unknown-key", "bad-header"])
def test_frames_without_a_usable_header_close_the_connection(tmp_path: Path,
                                                              data: bytearray) -> None:
    d, conn = serve(tmp_path, HandlerSpec(ApiKey.HEARTBEAT, 0, 4, heartbeat_ok))
    with pytest.raises(CloseConnection):
        process(d, conn, data)
    assert not d.usage


def test_a_declared_api_without_a_handler_closes_the_connection(tmp_path: Path) -> None:
    d, conn = serve(tmp_path, HandlerSpec(ApiKey.HEARTBEAT, 0, 4, heartbeat_ok))
    with pytest.raises(CloseConnection):
        process(d, conn, frame(ApiKey.SYNC_GROUP, 3))


def test_an_unserved_version_closes_the_connection(tmp_path: Path) -> None:
    d, conn = serve(tmp_path, HandlerSpec(ApiKey.HEARTBEAT, 0, 2, heartbeat_ok))
    with pytest.raises(CloseConnection):
        process(d, conn, frame(ApiKey.HEARTBEAT, 3))


def test_api_versions_above_ours_gets_unsupported_version_and_our_list(tmp_path: Path) -> None:
    d, conn = serve(tmp_path, HandlerSpec(ApiKey.API_VERSIONS, 0, 3, heartbeat_ok),
                    HandlerSpec(ApiKey.HEARTBEAT, 0, 4, heartbeat_ok))
    # v99: a flexible header (client id, then an empty tag section) and a body we cannot know
    data = bytearray(struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 5, -1) + b"\x00" + b"\xff" * 8)
    cid, resp = decode(ApiKey.API_VERSIONS, 0, process(d, conn, data))
    assert (cid, resp.error_code) == (5, ErrorCode.UNSUPPORTED_VERSION)
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [
        (ApiKey.HEARTBEAT, 0, 4), (ApiKey.API_VERSIONS, 0, 3)]


def test_a_body_that_does_not_decode_closes_the_connection(tmp_path: Path) -> None:
    d, conn = serve(tmp_path, HandlerSpec(ApiKey.HEARTBEAT, 0, 4, heartbeat_ok))
    hb = API_BY_KEY[ApiKey.HEARTBEAT].request(group_id="g", generation_id=1, member_id="m")
    whole = frame(ApiKey.HEARTBEAT, 0, hb)
    with pytest.raises(CloseConnection):
        process(d, conn, whole[:-3])  # the member id is cut short
    assert not d.usage


def test_an_api_versions_body_that_does_not_decode_still_gets_the_list(tmp_path: Path) -> None:
    d, conn = serve(tmp_path, HandlerSpec(ApiKey.API_VERSIONS, 0, 3, heartbeat_ok))
    whole = frame(ApiKey.API_VERSIONS, 3)
    cid, resp = decode(ApiKey.API_VERSIONS, 0, process(d, conn, whole[:-2]))
    assert (cid, resp.error_code) == (7, ErrorCode.UNSUPPORTED_VERSION)
    assert [k.api_key for k in resp.api_keys] == [ApiKey.API_VERSIONS]


def test_a_kafka_error_becomes_the_top_level_error_code(tmp_path: Path) -> None:
    d, conn = serve(tmp_path,
                    HandlerSpec(ApiKey.HEARTBEAT, 0, 4, raising(NotCoordinatorError("moved"))),
                    HandlerSpec(ApiKey.FIND_COORDINATOR, 0, 3,
                                raising(NotCoordinatorError("not here"))))
    _, hb = decode(ApiKey.HEARTBEAT, 4, process(d, conn, frame(ApiKey.HEARTBEAT, 4)))
    assert hb.error_code == ErrorCode.NOT_COORDINATOR
    # and the message where the response has a field for it
    _, fc = decode(ApiKey.FIND_COORDINATOR, 3,
                     process(d, conn, frame(ApiKey.FIND_COORDINATOR, 3)))
    assert (fc.error_code, fc.error_message) == (ErrorCode.NOT_COORDINATOR, "not here")


def test_a_kafka_error_without_a_top_level_error_code_closes_the_connection(
        tmp_path: Path) -> None:
    # Metadata has a top-level error_code from v13 on only
    d, conn = serve(tmp_path, HandlerSpec(ApiKey.METADATA, 1, 13,
                                          raising(NotCoordinatorError("no"))))
    with pytest.raises(CloseConnection):
        process(d, conn, frame(ApiKey.METADATA, 12))
    _, md = decode(ApiKey.METADATA, 13, process(d, conn, frame(ApiKey.METADATA, 13)))
    assert md.error_code == ErrorCode.NOT_COORDINATOR


def test_other_handler_exceptions_are_left_to_the_connection(tmp_path: Path) -> None:
    d, conn = serve(tmp_path, HandlerSpec(ApiKey.HEARTBEAT, 0, 4, raising(RuntimeError("bug"))))
    with pytest.raises(RuntimeError, match="bug"):
        process(d, conn, frame(ApiKey.HEARTBEAT, 4))
