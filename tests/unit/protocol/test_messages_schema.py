"""The declaration DSL's behaviour, checked on real declarations with known bytes."""

import struct

import pytest

from sparklog.protocol.errors import MalformedFrameError, UnsupportedVersionError
from sparklog.protocol.messages.api_versions import ApiVersionsResponse
from sparklog.protocol.messages.fetch import FetchRequest, FetchResponse
from sparklog.protocol.messages.metadata import MetadataRequest, MetadataResponse
from sparklog.protocol.messages.produce import ProduceRequest, ProduceResponse
from sparklog.protocol.primitives import Writer
from sparklog.protocol.schema import api, f, schema


def test_construction_defaults_and_attribute_access():
    resp = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="t", partition_responses=[ProduceResponse.PartitionProduceResponse(index=3)])])
    part = resp.responses[0].partition_responses[0]
    assert (part.index, part.error_code, part.base_offset) == (3, 0, 0)
    assert part.log_append_time_ms == -1 and part.log_start_offset == -1
    assert part.error_message is None and part.record_errors == []
    assert resp.throttle_time_ms == 0
    # defaults are fresh per instance, never shared
    other = ProduceResponse()
    other.responses.append(1)
    assert ProduceResponse().responses == []
    req = FetchRequest()
    assert (req.replica_id, req.max_bytes, req.session_epoch) == (-1, 0x7FFFFFFF, -1)
    assert FetchResponse.PartitionData().records == b""
    assert MetadataRequest().allow_auto_topic_creation is True
    with pytest.raises(TypeError):
        ProduceRequest(no_such_field=1)


def test_known_bytes_produce_v3_request():
    req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="ab", partition_data=[
            ProduceRequest.PartitionProduceData(index=7, records=b"XYZ")])])
    expected = (b"\xff\xff" + struct.pack(">hi", 1, 1000) + struct.pack(">i", 1)
                + b"\x00\x02ab" + struct.pack(">i", 1) + struct.pack(">i", 7)
                + struct.pack(">i", 3) + b"XYZ")
    assert req.encode(3) == expected
    # v0-v2 have no transactional_id
    assert req.encode(2) == expected[2:]


def test_known_bytes_flexible_produce_v9():
    req = ProduceRequest(transactional_id="tx", acks=-1, timeout_ms=5, topic_data=[
        ProduceRequest.TopicProduceData(name="ab", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=None)])])
    expected = (b"\x03tx" + struct.pack(">hi", -1, 5) + b"\x02" + b"\x03ab" + b"\x02"
                + struct.pack(">i", 0) + b"\x00" + b"\x00" + b"\x00" + b"\x00")
    assert req.encode(9) == expected


def test_tagged_fields_written_only_when_not_default():
    P = ProduceResponse.PartitionProduceResponse
    plain = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="t", partition_responses=[P(index=0)])])
    tagged = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="t", partition_responses=[P(index=0, current_leader=P.LeaderIdAndEpoch(
            leader_id=2, leader_epoch=5))])])
    a, b = plain.encode(10), tagged.encode(10)
    # partition tag section: 1 tag, tag 0, 9 bytes = (leader_id, leader_epoch) and the
    # struct's own empty tag section
    assert b.replace(b"\x01\x00\x09" + struct.pack(">ii", 2, 5) + b"\x00", b"\x00", 1) == a
    assert ProduceResponse.decode(b, 10) == tagged
    # the same message at v9 has no tagged current_leader at all
    assert ProduceResponse.decode(tagged.encode(9), 9) == plain
    # a default ApiVersions v3 response writes an empty tag section
    assert ApiVersionsResponse().encode(3) == b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x00"


def test_unknown_tags_survive_a_round_trip():
    body = bytearray(ApiVersionsResponse().encode(3))
    # replace the empty tag section with one unknown tag (77) of 2 bytes
    body[-1:] = b"\x01\x4d\x02hi"
    msg = ApiVersionsResponse.decode(bytes(body), 3)
    assert msg == ApiVersionsResponse()  # known fields unaffected
    assert msg.encode(3) == bytes(body)


def test_unsupported_version_and_garbage():
    with pytest.raises(UnsupportedVersionError):
        ProduceRequest().encode(13)
    with pytest.raises(UnsupportedVersionError):
        FetchRequest.decode(b"", 3)
    # an array count far beyond the frame is rejected before allocating
    hostile = struct.pack(">i", 0) + struct.pack(">i", 0x7FFFFFFF)
    with pytest.raises(MalformedFrameError):
        MetadataResponse.decode(hostile, 1)
    with pytest.raises(MalformedFrameError):
        MetadataRequest.decode(struct.pack(">i", -2), 1)
    # out-of-order tags
    with pytest.raises(MalformedFrameError):
        ApiVersionsResponse.decode(b"\x00\x00\x01\x00\x00\x00\x00\x02\x05\x00\x01\x00", 3)


def test_decoded_records_are_views_of_the_frame():
    req = ProduceRequest(acks=1, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"B" * 100)])])
    frame = bytearray(req.encode(7))
    records = ProduceRequest.decode(frame, 7).topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.nbytes == 100
    frame[-1] = ord("Z")
    assert bytes(records[-1:]) == b"Z"


def test_a_declaration_of_our_own():
    # The DSL is not tied to Kafka's APIs: a private API with every field type.
    spec = api(
        9999, "Probe", versions=(0, 2), flexible=2,
        request=schema("ProbeRequest", [
            f("a", "int8"), f("b", "uint16"), f("c", "uint32", "1+"), f("d", "float64"),
            f("e", "bool"), f("g", "uuid"), f("h", "bytes", nullable="1+"),
            f("i", "[]int64"), f("j", "[]string", nullable="0+"),
            f("k", "Inner", fields=[f("x", "int32", default=7)]),
            f("t", "int32", "2+", tag=3, default=-1),
        ]),
        response=schema("ProbeResponse", [f("items", "[]Shared")], structs={
            "Shared": [f("name", "string")]}),
    )
    req = spec.request(a=-5, b=65535, c=1 << 31, d=2.5, e=True, g=b"\x07" * 16, h=None,
                       i=[-1, 1 << 40], j=None, t=9)
    assert req.k.x == 7
    for version in (1, 2):
        data = req.encode(version)
        back = spec.request.decode(data, version)
        assert back.encode(version) == data
        assert back.t == (9 if version == 2 else -1)
    resp = spec.response(items=[spec.response.Shared(name="n")])
    assert spec.response.decode(resp.encode(2), 2) == resp
    w = Writer()
    resp.write(w, 0)
    assert w.getvalue() == struct.pack(">i", 1) + b"\x00\x01n"


def test_generated_codec_source_is_readable():
    from sparklog.protocol.schema import codec_source

    src = codec_source(ProduceRequest, 9)
    assert "def _dec_ProduceRequest(buf, pos, end):" in src
    assert "_rcnstr" in src  # v9: compact nullable transactional_id
    assert "_rnstr" in codec_source(ProduceRequest, 3)
