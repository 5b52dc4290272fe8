"""Fetch and Produce semantics on the wire: long poll woken by an append, min_bytes,
max_bytes / partition_max_bytes with the first batch always returned, acks=0 silence,
pipelined requests answered in order."""

from __future__ import annotations

import struct
import threading
import time

import pytest

from sparklog.protocol.batch_header import iter_batch_views
from sparklog.protocol.messages import API_BY_KEY, decode_response, encode_request
from tests.helpers.batches import make_batch
from tests.helpers.requests import fetch_request, produce_request

TOPIC = "fp"


@pytest.fixture(scope="module")
def topic(cluster):
    cluster.call(cluster.broker.create_topic, TOPIC, 3, 1)
    return TOPIC


def _batch(n: int, size: int = 100) -> bytes:
    return make_batch(n, key_prefix=None, value_size=size, ts=None)


def test_long_poll_is_woken_by_an_append(cluster, kafka_wire, topic):
    w = kafka_wire(cluster.bootstrap_servers)
    producer = kafka_wire(cluster.bootstrap_servers)
    end = cluster.broker.replica_manager.get(TOPIC, 0).log.log_end_offset

    def later():
        time.sleep(0.3)
        producer.call(0, 7, produce_request(TOPIC, 0, _batch(3), acks=1))

    t = threading.Thread(target=later)
    t0 = time.monotonic()
    t.start()
    resp = w.call(1, 11, fetch_request(TOPIC, [(0, end)], max_wait_ms=10_000))
    waited = time.monotonic() - t0
    t.join()
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0 and len(part.records) > 0
    assert 0.25 <= waited < 5.0  # woken by the append, not by max_wait_ms


def test_long_poll_times_out_empty(cluster, kafka_wire, topic):
    w = kafka_wire(cluster.bootstrap_servers)
    end = cluster.broker.replica_manager.get(TOPIC, 1).log.log_end_offset
    t0 = time.monotonic()
    resp = w.call(1, 11, fetch_request(TOPIC, [(1, end)], max_wait_ms=400))
    waited = time.monotonic() - t0
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0 and len(part.records) == 0 and part.records is not None
    assert 0.35 <= waited < 5.0


def test_min_bytes_waits_for_enough_data(cluster, kafka_wire, topic):
    w = kafka_wire(cluster.bootstrap_servers)
    producer = kafka_wire(cluster.bootstrap_servers)
    end = cluster.broker.replica_manager.get(TOPIC, 2).log.log_end_offset
    small = _batch(1, 10)
    big = _batch(50, 100)

    def later():
        time.sleep(0.2)
        producer.call(0, 7, produce_request(TOPIC, 2, small, acks=1))  # not enough for min_bytes
        time.sleep(0.3)
        producer.call(0, 7, produce_request(TOPIC, 2, big, acks=1))

    t = threading.Thread(target=later)
    t0 = time.monotonic()
    t.start()
    resp = w.call(1, 11, fetch_request(TOPIC, [(2, end)], max_wait_ms=10_000,
                                       min_bytes=len(small) + 100))
    waited = time.monotonic() - t0
    t.join()
    part = resp.responses[0].partitions[0]
    assert len(part.records) == len(small) + len(big)
    assert 0.45 <= waited < 5.0


def test_max_bytes_limits_and_first_batch_always_returned(cluster, kafka_wire):
    cluster.call(cluster.broker.create_topic, "fp-limits", 2, 1)
    w = kafka_wire(cluster.bootstrap_servers)
    batches = [_batch(20, 500) for _ in range(5)]  # ~10 KiB each
    for p in (0, 1):
        for b in batches:
            assert w.call(0, 7, produce_request("fp-limits", p, b, acks=1)).responses[0] \
                .partition_responses[0].error_code == 0

    def fetch(max_bytes, pmax):
        req = fetch_request("fp-limits", [(0, 0), (1, 0)], max_bytes=max_bytes,
                            partition_max_bytes=pmax)
        parts = w.call(1, 11, req).responses[0].partitions
        return [len(list(iter_batch_views(bytes(p.records)))) for p in parts]

    size = len(batches[0])
    assert fetch(1 << 20, 1 << 20) == [5, 5]
    assert fetch(1 << 20, 2 * size + 10) == [2, 2]  # per-partition limit, whole batches
    assert fetch(3 * size + 10, 1 << 20) == [3, 0]  # response limit
    assert fetch(10, 10) == [1, 0]  # first batch even when larger than both limits


def test_acks0_gets_no_response_and_order_holds(cluster, kafka_wire, topic):
    w = kafka_wire(cluster.bootstrap_servers)
    before = cluster.broker.replica_manager.get(TOPIC, 0).log.log_end_offset
    frames = []
    for cid in range(1, 31):
        acks = 0 if cid % 3 == 0 else 1
        frames.append((cid, acks, encode_request(0, 7, cid, "p",
                                                 produce_request(TOPIC, 0, _batch(2), acks=acks))))
    frames.append((99, 1, encode_request(18, 0, 99, "p", API_BY_KEY[18].request())))
    w.send_raw(b"".join(f for _, _, f in frames))  # pipelined
    expected = [cid for cid, acks, _ in frames if acks != 0]
    got = []
    for cid in expected:
        frame = w.read_frame()
        got.append(struct.unpack_from(">i", frame, 0)[0])
        if cid != 99:
            _, resp = decode_response(0, 7, frame)
            assert resp.responses[0].partition_responses[0].error_code == 0
    assert got == expected
    after = cluster.broker.replica_manager.get(TOPIC, 0).log.log_end_offset
    assert after - before == 2 * 30  # acks=0 batches were appended too


def test_high_watermark_waits_for_the_isr(cluster, kafka_wire):
    """With a second replica in the ISR, the HW (what consumers see, what acks=all waits
    for) moves only when that follower has fetched past the records."""
    ctrl = cluster.controller

    def setup():
        ctrl.register_broker(2, "127.0.0.1", 1)  # a follower we play by hand
        cluster.broker.create_topic("repl", assignments={0: [1, 2]})

    cluster.call(setup)
    try:
        w = kafka_wire(cluster.bootstrap_servers)
        follower = kafka_wire(cluster.bootstrap_servers)
        consumer = kafka_wire(cluster.bootstrap_servers)
        result = {}

        def produce_all():
            result["resp"] = w.call(0, 7, produce_request("repl", 0, _batch(4), acks=-1))
            result["t"] = time.monotonic()

        t = threading.Thread(target=produce_all)
        t.start()
        time.sleep(0.3)
        assert "resp" not in result  # acks=all is waiting for the follower

        def fetch(replica_id, offset):
            req = fetch_request("repl", [(0, offset)], replica_id=replica_id)
            return (follower if replica_id >= 0 else consumer).call(1, 11, req).responses[0].partitions[0]

        seen = fetch(-1, 0)
        assert seen.high_watermark == 0 and len(seen.records) == 0  # not committed yet
        replica = fetch(2, 0)  # the follower reads beyond the HW (up to the LEO)
        assert len(list(iter_batch_views(bytes(replica.records)))) == 1
        t0 = time.monotonic()
        fetch(2, 4)  # ... and reports it has everything: HW moves, acks=all completes
        t.join(10)
        assert result["resp"].responses[0].partition_responses[0].error_code == 0
        assert result["t"] - t0 < 2.0
        seen = fetch(-1, 0)
        assert seen.high_watermark == 4 and len(seen.records) > 0
    finally:
        cluster.call(ctrl.unregister_broker, 2)


def test_idempotent_producer_duplicates_and_gaps(cluster, kafka_wire):
    from sparklog.protocol.errors import ErrorCode

    cluster.call(cluster.broker.create_topic, "idem", 1, 1)
    w = kafka_wire(cluster.bootstrap_servers)
    init = w.call(22, 1, API_BY_KEY[22].request(transactional_id=None, transaction_timeout_ms=60000))
    pid, epoch = init.producer_id, init.producer_epoch

    def batch(seq: int, n: int = 3, ep: int = epoch) -> bytes:
        return make_batch(n, key_prefix=None, values=[b"i%d" % (seq + i) for i in range(n)],
                          ts=None, producer_id=pid, producer_epoch=ep, base_sequence=seq)

    def send(b: bytes):
        pr = w.call(0, 7, produce_request("idem", 0, b, acks=-1)).responses[0].partition_responses[0]
        return pr.error_code, pr.base_offset

    assert send(batch(0)) == (0, 0)
    assert send(batch(3)) == (0, 3)
    assert send(batch(3)) == (0, 3)  # a retried batch: same offsets, nothing appended
    assert cluster.broker.replica_manager.get("idem", 0).log.log_end_offset == 6
    code, _ = send(batch(10))  # a gap in the sequence
    assert code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(batch(6)) == (0, 6)
    assert cluster.broker.replica_manager.get("idem", 0).log.log_end_offset == 9


def test_long_poll_notices_topic_deletion(cluster, kafka_wire):
    from sparklog.protocol.errors import ErrorCode

    cluster.call(cluster.broker.create_topic, "doomed", 1, 1)
    w = kafka_wire(cluster.bootstrap_servers)
    req = fetch_request("doomed", [(0, 0)], max_wait_ms=10_000)
    threading.Timer(0.3, lambda: cluster.call(cluster.broker.delete_topic, "doomed")).start()
    t0 = time.monotonic()
    part = w.call(1, 11, req).responses[0].partitions[0]
    assert part.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert time.monotonic() - t0 < 5.0


def test_min_insync_replicas_applies_to_acks_all_only(cluster, kafka_wire):
    from sparklog.protocol.errors import ErrorCode

    cluster.call(cluster.broker.create_topic, "misr", 1, 1, {"min.insync.replicas": "2"})
    w = kafka_wire(cluster.bootstrap_servers)
    pr = w.call(0, 7, produce_request("misr", 0, _batch(1), acks=-1)).responses[0].partition_responses[0]
    assert pr.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    pr = w.call(0, 7, produce_request("misr", 0, _batch(1), acks=1)).responses[0].partition_responses[0]
    assert pr.error_code == 0
    cluster.call(cluster.broker.set_topic_configs, "misr", {"min.insync.replicas": "1"})
    pr = w.call(0, 7, produce_request("misr", 0, _batch(1), acks=-1)).responses[0].partition_responses[0]
    assert pr.error_code == 0 and pr.base_offset == 1
