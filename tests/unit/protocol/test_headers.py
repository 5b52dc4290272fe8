"""Request/response headers and the frame-level registry functions."""

import struct

import pytest

from sparklog.protocol.errors import MalformedFrameError, UnsupportedVersionError
from sparklog.protocol.headers import (
    RequestHeader,
    read_request_header,
    read_response_header,
    write_request_header,
    write_response_header,
)
from sparklog.protocol.messages import (
    API_BY_KEY,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    encode_response_bytes,
)
from sparklog.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from sparklog.protocol.messages.fetch import FetchResponse
from sparklog.protocol.messages.metadata import MetadataRequest
from sparklog.protocol.messages.produce import ProduceRequest
from sparklog.protocol.primitives import Reader, Writer


@pytest.mark.parametrize("version", [0, 1, 2])
def test_request_header_versions_round_trip(version):
    h = RequestHeader(3, 12, 77, "client-é" if version else None, {4: b"x"} if version == 2 else None)
    w = Writer()
    write_request_header(w, h, version)
    data = w.getvalue()
    assert data[:8] == struct.pack(">hhi", 3, 12, 77)
    assert len(data) == {0: 8, 1: 8 + 2 + len("client-é".encode()), 2: 8 + 11 + 4}[version]
    assert read_request_header(Reader(data), version) == h
    for cut in range(len(data)):
        with pytest.raises(MalformedFrameError):
            read_request_header(Reader(data[:cut]), version)


def test_client_id_stays_int16_string_in_header_v2():
    w = Writer()
    write_request_header(w, RequestHeader(18, 3, 1, "abc"), 2)
    assert w.getvalue() == struct.pack(">hhih", 18, 3, 1, 3) + b"abc" + b"\x00"


@pytest.mark.parametrize("version", [0, 1])
def test_response_header_round_trip(version):
    w = Writer()
    write_response_header(w, 123456, version)
    data = w.getvalue()
    assert data == struct.pack(">i", 123456) + (b"\x00" if version else b"")
    assert read_response_header(Reader(data), version) == 123456


def _unframe(frame):
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    return frame[4:]


def test_request_frame_round_trip_flexible_and_not():
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")])
    for version, header_len in ((5, 8 + 2 + 3), (12, 8 + 2 + 3 + 1)):
        frame = encode_request(3, version, 9, "cli", req)
        body = _unframe(frame)
        header, pos = decode_request_header(body)
        assert (header.api_key, header.api_version, header.correlation_id) == (3, version, 9)
        assert header.client_id == "cli" and pos == header_len
        assert decode_request(3, version, body, pos) == req
        for cut in range(pos):
            with pytest.raises(MalformedFrameError):
                decode_request_header(body[:cut])


def test_api_versions_response_header_is_always_v0():
    resp = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=0, max_version=7)])
    frame = encode_response_bytes(18, 3, 5, resp)
    body = _unframe(frame)
    # correlation id, then straight into the v3 body: no header tag buffer
    assert body[:4] == struct.pack(">i", 5)
    assert ApiVersionsResponse.decode(body, 3, 4) == resp
    assert decode_response(18, 3, body) == (5, resp)
    # a flexible request of ApiVersions still uses request header v2
    frame = encode_request(18, 3, 1, "c", ApiVersionsRequest(client_software_name="x"))
    header, pos = decode_request_header(_unframe(frame))
    assert pos == 8 + 3 + 1


def test_unsupported_and_unknown_requests_still_yield_a_header():
    # ApiVersions v5 (not declared) is flexible in Kafka: header v2 is read correctly.
    w = Writer()
    write_request_header(w, RequestHeader(18, 5, 42, "librdkafka"), 2)
    w.compact_string("librdkafka")
    body = w.getvalue()
    header, pos = decode_request_header(body)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 5, 42)
    with pytest.raises(UnsupportedVersionError):
        decode_request(18, 5, body, pos)
    # Unknown API key: header v1 is assumed.
    w = Writer()
    write_request_header(w, RequestHeader(999, 0, 7, None), 1)
    header, _ = decode_request_header(w.getvalue())
    assert header.api_key == 999 and header.correlation_id == 7
    with pytest.raises(UnsupportedVersionError):
        decode_request(999, 0, w.getvalue(), 10)
    with pytest.raises(MalformedFrameError):
        decode_request_header(b"\x00\x03\x00")


class FileSlice:
    def __init__(self, data):
        self.data = data
        self.size = len(data)


@pytest.mark.parametrize("version", [4, 11, 12, 13])
def test_fetch_response_chunks_keep_file_slices_external(version):
    slices = [FileSlice(bytes([i]) * (100 + i)) for i in range(3)]
    P = FetchResponse.PartitionData
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", topic_id=b"\x01" * 16,
        partitions=[P(partition_index=i, high_watermark=10, records=s) for i, s in enumerate(slices)]
        + [P(partition_index=9, records=b"")],
    )])
    chunks = encode_response(1, version, 3, resp)
    assert [c for c in chunks if isinstance(c, FileSlice)] == slices
    flat = b"".join(c.data if isinstance(c, FileSlice) else bytes(c) for c in chunks)
    cid, back = decode_response(1, version, _unframe(flat))
    assert cid == 3
    parts = back.responses[0].partitions
    assert [bytes(p.records) for p in parts] == [s.data for s in slices] + [b""]
    with pytest.raises(ValueError):
        encode_response_bytes(1, version, 3, resp)


def test_kafka_python_frames_decode_with_our_header_and_body():
    pytest.importorskip("kafka.protocol.producer")
    from kafka.protocol.metadata import MetadataRequest as KMetadataRequest
    from kafka.protocol.producer import ProduceRequest as KProduceRequest

    for version in (3, 7, 9, 10):
        k = KProduceRequest(
            transactional_id=None, acks=-1, timeout_ms=1500,
            topic_data=[KProduceRequest.TopicProduceData(
                name="topic-a",
                partition_data=[KProduceRequest.TopicProduceData.PartitionProduceData(
                    index=2, records=b"\x00" * 70)])],
            version=version,
        )
        k.with_header(correlation_id=31, client_id="kp")
        body = _unframe(bytes(k.encode(header=True, framed=True)))
        header, pos = decode_request_header(body)
        assert (header.api_key, header.api_version, header.correlation_id) == (0, version, 31)
        assert header.client_id == "kp"
        req = decode_request(0, version, body, pos)
        assert isinstance(req, ProduceRequest)
        assert (req.acks, req.timeout_ms) == (-1, 1500)
        part = req.topic_data[0].partition_data[0]
        assert req.topic_data[0].name == "topic-a" and part.index == 2
        assert bytes(part.records) == b"\x00" * 70
    k = KMetadataRequest(topics=None, allow_auto_topic_creation=False, version=12)
    k.with_header(correlation_id=2, client_id=None)
    body = _unframe(bytes(k.encode(header=True, framed=True)))
    header, pos = decode_request_header(body)
    req = decode_request(3, 12, body, pos)
    assert header.client_id is None and req.topics is None
    assert req.allow_auto_topic_creation is False


def test_registry_ranges():
    assert API_BY_KEY[18].min_version == 0 and API_BY_KEY[18].max_version >= 3
    assert API_BY_KEY[0].min_version == 0 and API_BY_KEY[0].max_version >= 7
    for spec in API_BY_KEY.values():
        assert spec.request.API_KEY == spec.key == spec.response.API_KEY
