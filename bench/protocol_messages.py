"""Cost of the protocol message codec on the broker's hot paths.

    .venv/bin/python bench/protocol_messages.py

Prints microseconds per operation for: decoding a Produce request frame (header + body,
1 partition, one 16 KiB batch), encoding a Fetch response with 10 partitions (bytes
payloads, and file-slice payloads kept external), and a Metadata response with
100 partitions; with a plain ``bytes`` copy of the same frame as the yardstick.
Figures are process CPU time (best of 5 runs), so other load on the machine matters less.
"""

from __future__ import annotations

import time
import timeit

from sparklog.protocol.messages import (
    decode_request,
    decode_request_header,
    encode_request,
    encode_response,
)
from sparklog.protocol.messages.fetch import FetchResponse
from sparklog.protocol.messages.metadata import MetadataResponse
from sparklog.protocol.messages.produce import ProduceRequest


class FileSlice:
    def __init__(self, size: int) -> None:
        self.size = size


def per_op_us(fn, number: int) -> float:
    # CPU time of this process, best of 5: the machine is shared, wall time is noisy
    best = min(timeit.repeat(fn, number=number, repeat=5, timer=time.process_time))
    return best / number * 1e6


def main() -> None:
    batch = bytes(16384)
    produce = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(name="events", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])])

    rows = []
    for version in (7, 9):
        frame = encode_request(0, version, 1, "bench", produce)[4:]

        def decode_produce(frame=frame, version=version):
            header, pos = decode_request_header(frame)
            return decode_request(0, version, frame, pos)

        copy_us = per_op_us(lambda frame=frame: bytes(bytearray(frame)), 20000)
        rows.append((f"decode Produce v{version} frame (1 partition, 16 KiB)",
                     per_op_us(decode_produce, 20000), copy_us))

    P = FetchResponse.PartitionData
    for version in (11, 12):
        for label, payload in (("bytes", lambda: bytes(1024)), ("file slices", lambda: FileSlice(1 << 20))):
            resp = FetchResponse(session_id=0, responses=[FetchResponse.FetchableTopicResponse(
                topic="events", partitions=[P(partition_index=i, high_watermark=1000,
                                              last_stable_offset=1000, log_start_offset=0,
                                              records=payload()) for i in range(10)])])
            rows.append((f"encode Fetch v{version} response, 10 partitions, {label}",
                         per_op_us(lambda resp=resp, version=version: encode_response(1, version, 7, resp), 5000),
                         None))

    B = MetadataResponse.MetadataResponseBroker
    T = MetadataResponse.MetadataResponseTopic
    MP = MetadataResponse.MetadataResponsePartition
    meta = MetadataResponse(brokers=[B(node_id=1, host="localhost", port=9092)], cluster_id="c",
                            controller_id=1, topics=[T(name="events", partitions=[
                                MP(partition_index=i, leader_id=1, replica_nodes=[1], isr_nodes=[1])
                                for i in range(100)])])
    rows.append(("encode Metadata v12 response, 100 partitions",
                 per_op_us(lambda: encode_response(3, 12, 7, meta), 500), None))

    for name, us, copy_us in rows:
        extra = f"   (bytes copy of the frame: {copy_us:.2f} us, ratio {us / copy_us:.1f}x)" if copy_us else ""
        print(f"{name:58s} {us:8.2f} us{extra}")


if __name__ == "__main__":
    main()
