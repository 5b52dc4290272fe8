"""Cross-client matrix: every client's produced data, in every codec it supports, consumed by
every other client with identical keys, values, headers and timestamps.

The broker stores client batches untouched, so this is also a check that each client
really compressed (the stored batch attributes carry the codec; old librdkafka is known to
silently fall back to uncompressed when Produce v0 is not advertised).
"""

from __future__ import annotations

import pytest

from sparklog.protocol.batch_header import Compression, iter_batch_views
from tests.helpers.kafka_clients import (
    CLIENTS,
    Msg,
    ak_produce,
    ck_produce,
    comparable,
    kcat_produce,
    kp_produce,
    make_messages,
)

N = 300
CODECS = ["gzip", "snappy", "lz4", "zstd"]
PRODUCERS = ["confluent", "kafka-python", "aiokafka", "kcat"]
CONSUMERS = {name: consume for name, (_, consume) in CLIENTS.items()}
KCAT_HEADERS = (("origin", b"kcat"), ("const", b"c"))


def _produce(producer: str, bs: str, topic: str, codec: str, msgs: list[Msg]) -> None:
    if producer == "confluent":
        ck_produce(bs, topic, msgs, **{"compression.type": codec})
    elif producer == "kafka-python":
        kp_produce(bs, topic, msgs, compression_type=codec)
    elif producer == "aiokafka":
        ak_produce(bs, topic, msgs, compression_type=codec)
    else:
        bare = [m._replace(headers=()) for m in msgs]
        kcat_produce(bs, topic, bare, extra=["-z", codec, "-H", "origin=kcat", "-H", "const=c"])


@pytest.fixture(scope="module")
def produced(cluster):
    bs = cluster.bootstrap_servers
    out = {}
    for producer in PRODUCERS:
        for codec in CODECS:
            topic = f"mx-{producer}-{codec}"
            msgs = make_messages(N, 1, headers=producer != "kcat", tag=f"{producer}-{codec}")
            _produce(producer, bs, topic, codec, msgs)
            out[(producer, codec)] = (topic, msgs)
    return out


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_matrix(cluster, produced, producer, codec):
    topic, sent = produced[(producer, codec)]
    bs = cluster.bootstrap_servers
    # the stored batches use the codec the producer was asked for
    plog = cluster.broker.replica_manager.get(topic, 0).log
    views = list(iter_batch_views(plog.read(0, 64 << 20).read_bytes()))
    assert views and {v.compression for v in views} == {Compression[codec.upper()]}

    results = {name: consume(bs, topic, 1, N) for name, consume in CONSUMERS.items()}
    if producer == "kcat":
        # kcat stamps its own timestamps and fixed headers: compare with the first reader
        reference = sorted(results["confluent"], key=lambda m: m.offset)
        assert [(m.key, m.value) for m in reference] == [(m.key, m.value) for m in sent]
        assert all(m.headers == KCAT_HEADERS for m in reference)
        expected = comparable(reference)
    else:
        expected = comparable(sent)
    for name, got in results.items():
        assert len(got) == N, name
        assert comparable(got) == expected, f"{name} read {producer}/{codec} differently"
