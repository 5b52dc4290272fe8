"""What clients can make the broker hold, measured on a ``sparklog server`` process (RSS from
/proc): long polls parked by connections that close at once, and one connection pipelining
long polls past ``queued.max.requests`` (issue 18)."""

from __future__ import annotations

import socket
import struct
import time

from sparklog.protocol.messages import API_BY_KEY, decode_response, encode_request
from tests.helpers.batches import make_batch
from tests.helpers.kafka_clients import ck_produce, make_messages
from tests.helpers.polling import wait_for
from tests.helpers.requests import produce_request

MiB = 1 << 20
INT32_MAX = 0x7FFFFFFF


def _create_topic(wire, name: str) -> bytes:
    """Create ``name`` (1 partition) and return its topic id."""
    creq = API_BY_KEY[19].request
    resp = wire.call(19, 3, creq(topics=[creq.CreatableTopic(name=name, num_partitions=1,
                                                              replication_factor=1)],
                                 timeout_ms=5000))
    assert resp.topics[0].error_code == 0
    mreq = API_BY_KEY[3].request
    md = wire.call(3, 12, mreq(topics=[mreq.MetadataRequestTopic(topic_id=bytes(16), name=name)]))
    return md.topics[0].topic_id


def _fetch_v12(topic: str, topic_id: bytes, correlation_id: int, *, max_wait_ms: int,
               min_bytes: int) -> bytes:
    """A Fetch v12 frame as confluent-kafka sends it (offset 0 of partition 0)."""
    freq = API_BY_KEY[1].request
    return encode_request(1, 12, correlation_id, "rdkafka", freq(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=52428800,
        isolation_level=1, session_id=0, session_epoch=-1, topics=[freq.FetchTopic(
            topic=topic, topic_id=topic_id, partitions=[freq.FetchPartition(
                partition=0, current_leader_epoch=0, fetch_offset=0, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=1048576)])],
        forgotten_topics_data=[], rack_id=""))


def test_connections_closing_release_their_parked_fetches(server_factory, kafka_wire):
    """3000 connections each park a fetch that could wait 24 days for 2 GiB, and close: the
    broker's memory and descriptors come back within 5 s, and a consumer is served."""
    server = server_factory().start()
    w = kafka_wire(server.bootstrap_servers)
    topic_id = _create_topic(w, "parked")
    w.close()
    frame = _fetch_v12("parked", topic_id, 7, max_wait_ms=INT32_MAX, min_bytes=INT32_MAX)
    fds0, rss0 = server.open_fds(), server.rss_bytes()
    for _ in range(3000):
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(frame)
    wait_for(lambda: server.rss_bytes() - rss0 < 100 * MiB and server.open_fds() <= fds0,
             5, "the parked fetches to be released", interval=0.02)
    print(f"server RSS {rss0 / MiB:.1f} -> {server.rss_bytes() / MiB:.1f} MiB")

    from confluent_kafka import Consumer, TopicPartition

    msgs = make_messages(10, 1, tag="after")
    ck_produce(server.bootstrap_servers, "parked", msgs)
    c = Consumer({"bootstrap.servers": server.bootstrap_servers, "group.id": "after-parked",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("parked", 0, 0)])
        got: list[bytes] = []
        t0 = time.monotonic()
        while len(got) < len(msgs) and time.monotonic() - t0 < 5:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.key())
        assert got == [m.key for m in msgs]
    finally:
        c.close()


def test_pipelined_long_polls_are_bounded_and_answered_in_order(server_factory, kafka_wire):
    """One connection pipelines 20 000 long-poll fetches on an empty partition: the broker
    reads only ``queued.max.requests`` of them (the client's sends stall) and its memory
    stays put; a record arriving answers them all, in order."""
    n, bound = 20_000, 100
    server = server_factory(extra=["--set", f"queued.max.requests={bound}",
                                   "--set", "socket.receive.buffer.bytes=16384"]).start()
    w = kafka_wire(server.bootstrap_servers)
    topic_id = _create_topic(w, "pipelined")
    data = b"".join(_fetch_v12("pipelined", topic_id, i, max_wait_ms=60_000, min_bytes=1)
                    for i in range(1, n + 1))
    rss0 = server.rss_bytes()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    s.setblocking(False)
    sent = 0

    def push() -> bool:  # True when the socket took something
        nonlocal sent
        before = sent
        try:
            while sent < len(data):
                sent += s.send(data[sent : sent + 65536])
        except BlockingIOError:
            pass
        return sent > before

    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < 0.5:  # until the broker stops reading
        if push():
            quiet_since = time.monotonic()
        time.sleep(0.01)
    grown = server.rss_bytes() - rss0
    print(f"stalled after {sent} of {len(data)} bytes; server RSS +{grown / MiB:.1f} MiB")
    assert sent < len(data) // 2
    assert grown < 16 * MiB

    batch = make_batch(1, value_size=100, ts=None)
    resp = w.call(0, 7, produce_request("pipelined", 0, batch, acks=1))
    assert resp.responses[0].partition_responses[0].error_code == 0

    got = bytearray()
    expected = 1
    deadline = time.monotonic() + 120
    while expected <= n:
        assert time.monotonic() < deadline, f"{expected - 1} of {n} answered"
        push()
        try:
            chunk = s.recv(1 << 20)
        except BlockingIOError:
            time.sleep(0.001)
            continue
        assert chunk, "connection closed"
        got += chunk
        pos = 0
        while len(got) - pos >= 4:
            (size,) = struct.unpack_from(">i", got, pos)
            if len(got) - pos - 4 < size:
                break
            cid, fetched = decode_response(1, 12, bytes(got[pos + 4 : pos + 4 + size]))
            assert cid == expected
            part = fetched.responses[0].partitions[0]
            assert part.error_code == 0 and part.high_watermark == 1 and len(part.records) > 0
            expected += 1
            pos += 4 + size
        del got[:pos]
    s.close()
    assert server.rss_bytes() - rss0 < 32 * MiB
