"""Bad input at the wire: each case gets Kafka's answer (an error code or a closed connection),
and afterwards another connection is still served and every acknowledged record is intact.
Ends with a seeded fuzz run of mutated valid frames, and the same run for 10^6 frames
against a server process (``-m soak``) that checks the server's memory stays bounded."""

from __future__ import annotations

import logging
import random
import socket
import struct
import time

import pytest

from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.messages import API_BY_KEY, encode_request
from tests.helpers.batches import make_batch
from tests.helpers.kafka_clients import ck_produce, create_topic, make_messages
from tests.helpers.requests import fetch_request, produce_request

SENTINEL = "sentinel"


def _req(key: int, **fields):
    return API_BY_KEY[key].request(**fields)


def _batch(n: int = 5, value_size: int = 10, tag: str = "x") -> bytes:
    return make_batch(n, key_prefix=tag.encode(), value_size=value_size, ts=None)


@pytest.fixture(scope="module")
def acked(cluster):
    """Records acknowledged before the abuse starts; they must survive all of it."""
    create_topic(cluster.bootstrap_servers, SENTINEL, 1)
    msgs = make_messages(500, 1, tag="sentinel")
    ck_produce(cluster.bootstrap_servers, SENTINEL, msgs)
    return msgs


def assert_healthy(cluster, kafka_wire, acked) -> None:
    w = kafka_wire(cluster.bootstrap_servers)
    resp = w.call(18, 0, _req(18))
    assert resp.error_code == 0 and any(k.api_key == 0 for k in resp.api_keys)
    fetched = w.call(1, 11, fetch_request(SENTINEL, [(0, 0)]))
    part = fetched.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == len(acked)
    from sparklog.protocol.batch_header import iter_batch_views
    from sparklog.protocol.records import decode_batch

    keys = []
    for view in iter_batch_views(bytes(part.records)):
        keys.extend(r.key for r in decode_batch(bytes(view.raw())).records)
    assert keys == [m.key for m in acked]


def test_random_bytes(cluster, kafka_wire, acked):
    rng = random.Random(7)
    for _ in range(20):
        w = kafka_wire(cluster.bootstrap_servers)
        w.send_raw(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))))
    time.sleep(0.2)
    assert_healthy(cluster, kafka_wire, acked)


def test_truncated_frames(cluster, kafka_wire, acked):
    frame = encode_request(3, 5, 1, "t", _req(3, topics=None, allow_auto_topic_creation=False))
    for cut in (2, 4, 9, len(frame) - 1):
        w = kafka_wire(cluster.bootstrap_servers)
        w.send_raw(frame[:cut])
        w.close()
    # a size prefix that promises more than the body holds: the body fails to decode
    w = kafka_wire(cluster.bootstrap_servers)
    body = frame[4:]
    bad = struct.pack(">i", 12) + body[:12]
    w.send_raw(bad)
    assert w.is_closed()
    assert_healthy(cluster, kafka_wire, acked)


def test_frame_over_limit_rejected_before_reading(cluster, kafka_wire, acked):
    w = kafka_wire(cluster.bootstrap_servers)
    w.send_raw(struct.pack(">i", 200 * 1024 * 1024))  # above socket.request.max.bytes
    t0 = time.monotonic()
    assert w.is_closed(timeout=5)
    assert time.monotonic() - t0 < 5
    w = kafka_wire(cluster.bootstrap_servers)
    w.send_raw(struct.pack(">i", -5))
    assert w.is_closed(timeout=5)
    assert_healthy(cluster, kafka_wire, acked)


def test_unknown_api_key_closes_connection(cluster, kafka_wire, acked):
    w = kafka_wire(cluster.bootstrap_servers)
    w.send_raw(struct.pack(">ihhih", 10, 9999, 0, 1, -1))
    assert w.is_closed()
    w = kafka_wire(cluster.bootstrap_servers)
    w.send_raw(struct.pack(">ihhih", 10, 71, 0, 1, -1))  # GetTelemetrySubscriptions: not served
    assert w.is_closed()
    assert_healthy(cluster, kafka_wire, acked)


def test_unsupported_api_versions_version_gets_v0_reply(cluster, kafka_wire, acked):
    w = kafka_wire(cluster.bootstrap_servers)
    # ApiVersions v9 (header v2: tag buffer after client id), a body we cannot know
    body = struct.pack(">hhih", 18, 9, 77, 3) + b"abc" + b"\x00" + b"\x07future\x02x\x00"
    w.send_raw(struct.pack(">i", len(body)) + body)
    frame = w.read_frame()
    cid, err, n = struct.unpack_from(">ihi", frame, 0)
    assert cid == 77 and err == ErrorCode.UNSUPPORTED_VERSION
    keys = {struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(n)}
    assert (18, 0, 3) in keys and (0, 0, 10) in keys and (1, 4, 13) in keys
    # the client can then talk v0 on the same connection
    assert w.call(18, 0, _req(18)).error_code == 0
    # an unsupported version of another API closes the connection (as Kafka does)
    w2 = kafka_wire(cluster.bootstrap_servers)
    w2.send_raw(struct.pack(">i", 10) + struct.pack(">hhih", 3, 0, 5, -1))  # Metadata v0
    assert w2.is_closed()
    assert_healthy(cluster, kafka_wire, acked)


def test_invalid_topic_names(cluster, kafka_wire, acked):
    w = kafka_wire(cluster.bootstrap_servers)
    mreq = API_BY_KEY[3].request
    for name in ["bad name", "a" * 250, "..", "x/y"]:
        resp = w.call(3, 5, mreq(topics=[mreq.MetadataRequestTopic(name=name)],
                                 allow_auto_topic_creation=True))
        assert resp.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION, name
        creq = API_BY_KEY[19].request
        cresp = w.call(19, 3, creq(topics=[creq.CreatableTopic(name=name, num_partitions=1,
                                                               replication_factor=1)],
                                   timeout_ms=1000, validate_only=False))
        assert cresp.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION, name
    assert_healthy(cluster, kafka_wire, acked)


def test_bad_crc_is_corrupt_message(cluster, kafka_wire, acked):
    batch = bytearray(_batch())
    batch[-1] ^= 0xFF  # inside the CRC-covered range
    w = kafka_wire(cluster.bootstrap_servers)
    resp = w.call(0, 7, produce_request(SENTINEL, 0, bytes(batch)))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
    assert_healthy(cluster, kafka_wire, acked)


def test_two_batches_in_one_partition_entry(cluster, kafka_wire, acked):
    w = kafka_wire(cluster.bootstrap_servers)
    resp = w.call(0, 7, produce_request(SENTINEL, 0, _batch(tag="a") + _batch(tag="b")))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD
    assert_healthy(cluster, kafka_wire, acked)


def test_batch_over_max_message_bytes(cluster, kafka_wire, acked):
    big = _batch(n=2, value_size=700_000)  # > message.max.bytes (1048588)
    w = kafka_wire(cluster.bootstrap_servers)
    resp = w.call(0, 7, produce_request(SENTINEL, 0, big))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE
    # acks=0: no response, and the failure closes the connection (Kafka's only signal)
    w.request(0, 7, produce_request(SENTINEL, 0, big, acks=0))
    assert w.is_closed()
    assert_healthy(cluster, kafka_wire, acked)


def test_offset_out_of_range(cluster, kafka_wire, acked):
    w = kafka_wire(cluster.bootstrap_servers)
    for offset in (10**9, -5):
        resp = w.call(1, 11, fetch_request(SENTINEL, [(0, offset)]))
        part = resp.responses[0].partitions[0]
        assert part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert part.high_watermark == len(acked)
    assert_healthy(cluster, kafka_wire, acked)


def test_produce_to_non_leader(cluster, kafka_wire, acked):
    create_topic(cluster.bootstrap_servers, "led-elsewhere", 2)
    ctrl = cluster.controller

    def move():  # a second (fake) broker takes over partition 0
        ctrl.register_broker(2, "127.0.0.1", 1)
        ctrl.change_leader("led-elsewhere", 0, 2)

    cluster.call(move)
    try:
        w = kafka_wire(cluster.bootstrap_servers)
        resp = w.call(0, 7, produce_request("led-elsewhere", 0, _batch()))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        resp = w.call(0, 7, produce_request("led-elsewhere", 1, _batch()))
        assert resp.responses[0].partition_responses[0].error_code == 0
        fresp = w.call(1, 11, fetch_request("led-elsewhere", [(0, 0)]))
        assert fresp.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        md = w.call(3, 5, API_BY_KEY[3].request(topics=[
            API_BY_KEY[3].request.MetadataRequestTopic(name="led-elsewhere")]))
        parts = {p.partition_index: p for p in md.topics[0].partitions}
        assert parts[1].leader_id == 1 and parts[0].leader_id == 2
    finally:
        def back():
            ctrl.change_leader("led-elsewhere", 0, 1)
            ctrl.unregister_broker(2)

        cluster.call(back)
    assert_healthy(cluster, kafka_wire, acked)


def _client_frames(topic: str, topic_id: bytes) -> list[bytes]:
    """Frames shaped as confluent-kafka (librdkafka) sends them: field values as it sets
    them, a long-poll Fetch at v12 (by name) and v13 (by topic id), and one whose wait and
    size are at their maximum (issue 18)."""
    areq = API_BY_KEY[18].request
    mreq = API_BY_KEY[3].request
    freq = API_BY_KEY[1].request
    batch = make_batch(5, key_prefix=b"ck-", value_size=90, ts=None, producer_id=1000,
                       producer_epoch=0, base_sequence=0)

    def fetch(version: int, max_wait_ms: int = 500, min_bytes: int = 1) -> bytes:
        return encode_request(1, version, 12, "rdkafka", freq(
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=52428800,
            isolation_level=1, session_id=0, session_epoch=-1, topics=[freq.FetchTopic(
                topic=topic, topic_id=topic_id, partitions=[freq.FetchPartition(
                    partition=0, current_leader_epoch=0, fetch_offset=0,
                    last_fetched_epoch=-1, log_start_offset=-1,
                    partition_max_bytes=1048576)])],
            forgotten_topics_data=[], rack_id=""))

    return [
        fetch(12, max_wait_ms=0x7FFFFFFF, min_bytes=0x7FFFFFFF),  # parks until it is closed
        encode_request(18, 3, 1, "rdkafka", areq(
            client_software_name="confluent-kafka-python",
            client_software_version="2.6.1-rdkafka-2.6.1")),
        encode_request(3, 12, 2, "rdkafka", mreq(
            topics=[mreq.MetadataRequestTopic(topic_id=bytes(16), name=topic)],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)),
        encode_request(0, 7, 3, "rdkafka", produce_request(topic, 0, batch)),
        fetch(12),
        fetch(13),
    ]


def _corpus(topic: str, topic_id: bytes) -> list[bytes]:
    mreq = API_BY_KEY[3].request
    lreq = API_BY_KEY[2].request
    creq = API_BY_KEY[19].request
    dreq = API_BY_KEY[32].request
    batch = _batch(n=3, tag="fz")
    frames = [
        encode_request(18, 0, 1, "fz", _req(18)),
        encode_request(18, 2, 1, "fz", _req(18)),
        encode_request(3, 5, 2, "fz", mreq(topics=[mreq.MetadataRequestTopic(name=topic)])),
        encode_request(3, 1, 2, None, mreq(topics=None)),
        encode_request(0, 7, 3, "fz", produce_request(topic, 0, batch)),
        encode_request(0, 3, 3, "fz", produce_request(topic, 0, batch, acks=1)),
        encode_request(1, 11, 4, "fz", fetch_request(topic, [(0, 0)])),
        encode_request(1, 4, 4, "fz", fetch_request(topic, [(0, 0)])),
        encode_request(2, 3, 5, "fz", lreq(replica_id=-1, isolation_level=0, topics=[
            lreq.ListOffsetsTopic(name=topic, partitions=[
                lreq.ListOffsetsPartition(partition_index=0, timestamp=-1)])])),
        encode_request(19, 3, 6, "fz", creq(topics=[creq.CreatableTopic(
            name="fz-created", num_partitions=2, replication_factor=1)], timeout_ms=100)),
        encode_request(32, 1, 7, "fz", dreq(resources=[dreq.DescribeConfigsResource(
            resource_type=2, resource_name=topic, configuration_keys=None)])),
        encode_request(22, 1, 8, "fz", API_BY_KEY[22].request(transactional_id=None,
                                                              transaction_timeout_ms=1000)),
        encode_request(10, 1, 9, "fz", API_BY_KEY[10].request(key="g", key_type=0)),
        encode_request(60, 0, 10, "fz", API_BY_KEY[60].request()),
    ]
    return frames + _client_frames(topic, topic_id)


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    b = bytearray(frame)
    op = rng.randrange(6)
    if op == 0:  # flip a few bytes anywhere after the size prefix
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(4, len(b))
            b[i] = rng.randrange(256)
    elif op == 1:  # truncate the body but keep the size prefix honest
        cut = rng.randrange(8, len(b))
        b = b[:cut]
        struct.pack_into(">i", b, 0, len(b) - 4)
    elif op == 2:  # extend with junk
        b += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
        struct.pack_into(">i", b, 0, len(b) - 4)
    elif op == 3:  # a huge/negative int32 somewhere (lengths, counts, max_wait_ms, min_bytes)
        i = rng.randrange(4, max(5, len(b) - 4))
        b[i:i + 4] = struct.pack(">i", rng.choice([-2, -1, 0x7FFFFFFF, 0x10000000, 65535]))
    elif op == 4:  # a huge/negative int16 (string lengths, versions)
        i = rng.randrange(4, max(5, len(b) - 2))
        b[i:i + 2] = struct.pack(">h", rng.choice([-2, -1, 0x7FFF, 300]))
    else:  # a different (maybe unsupported) version
        struct.pack_into(">h", b, 6, rng.randrange(-1, 20))
    return bytes(b)


def _fuzz(bootstrap: str, corpus: list[bytes], rng: random.Random, total: int, per_conn: int,
          time_limit_s: float) -> tuple[int, int, int]:
    """Send ``total`` mutated frames, ``per_conn`` to a connection that then either closes
    at once or half-closes and reads to the end (one in two); (frames sent, connections
    that read, connections that got an answer)."""
    deadline = time.monotonic() + time_limit_s
    sent = read = answered = 0
    host, port = bootstrap.rsplit(":", 1)
    while sent < total and time.monotonic() < deadline:
        frames = [_mutate(rng, rng.choice(corpus)) for _ in range(per_conn)]
        reads = rng.random() < 0.5
        with socket.create_connection((host, int(port)), timeout=5) as s:
            try:
                s.sendall(b"".join(frames))
                if reads:
                    read += 1
                    s.shutdown(socket.SHUT_WR)
                    got = 0
                    while chunk := s.recv(1 << 16):
                        got += len(chunk)
                    answered += got > 0
            except (ConnectionResetError, BrokenPipeError, TimeoutError):
                pass
        sent += per_conn
    return sent, read, answered


def test_fuzz_mutated_frames(cluster, kafka_wire, acked, caplog):
    caplog.set_level(logging.WARNING)
    create_topic(cluster.bootstrap_servers, "fz", 1)
    corpus = _corpus("fz", cluster.broker.metadata.topic("fz").topic_id)
    total, per_conn = 10_000, 2
    sent, read, answered = _fuzz(cluster.bootstrap_servers, corpus, random.Random(20261122),
                                 total, per_conn, 240)
    assert sent >= total, f"only {sent} frames within the time bound"
    # the broker really parsed and answered a good share of them (not just hung up)
    assert answered > read // 10, (answered, read)
    crashes = [r for r in caplog.records
               if r.levelno >= logging.ERROR and r.name.startswith("sparklog")]
    assert not crashes, [r.getMessage() for r in crashes[:5]]
    assert_healthy(cluster, kafka_wire, acked)


SOAK_FRAMES = 1_000_000
SOAK_RSS_BOUND = 64 << 20


@pytest.mark.soak
@pytest.mark.timeout(1500)
def test_fuzz_soak_memory_stays_bounded(server_factory, kafka_wire):
    """The fuzz run above for 10^6 frames against a ``sparklog server`` process: its RSS
    at the end is within SOAK_RSS_BOUND of its RSS after a warm-up (lazily compiled codecs,
    first allocations). Topic auto-creation is off and CreateTopics left out: topics a
    client asked for are state, not a leak."""
    server = server_factory(extra=["--set", "auto.create.topics.enable=false"]).start()
    w = kafka_wire(server.bootstrap_servers)
    creq = API_BY_KEY[19].request
    w.call(19, 3, creq(topics=[creq.CreatableTopic(name="fz", num_partitions=1,
                                                    replication_factor=1)], timeout_ms=5000))
    mreq = API_BY_KEY[3].request
    md = w.call(3, 12, mreq(topics=[mreq.MetadataRequestTopic(topic_id=bytes(16), name="fz")]))
    w.close()
    corpus = [f for f in _corpus("fz", md.topics[0].topic_id)
              if struct.unpack_from(">h", f, 4)[0] != 19]
    rng = random.Random(20261123)
    _fuzz(server.bootstrap_servers, corpus, rng, 50_000, 4, 120)
    rss0 = server.rss_bytes()
    t0 = time.monotonic()
    sent, read, answered = _fuzz(server.bootstrap_servers, corpus, rng, SOAK_FRAMES, 4, 1200)
    rss1 = server.rss_bytes()
    print(f"soak: {sent} frames in {time.monotonic() - t0:.0f} s, {answered} of {read} "
          f"reading connections answered; server RSS {rss0 / 2**20:.1f} -> "
          f"{rss1 / 2**20:.1f} MiB")
    assert sent >= SOAK_FRAMES
    assert rss1 - rss0 < SOAK_RSS_BOUND
    w = kafka_wire(server.bootstrap_servers)
    assert w.call(18, 0, _req(18)).error_code == 0
