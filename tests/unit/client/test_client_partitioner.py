"""Partitioner parity with the Java client's murmur2 (and kafka-python's port of it)."""

import os
import random

import numpy as np
import pyarrow as pa
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from sparklog.client.partitioner import Partitioner, murmur2, murmur2_array, partition_for_key
from sparklog.protocol.record_arrow_encode import binary_parts


def _signed(h: int) -> int:
    return h - (1 << 32) if h >= 1 << 31 else h


def test_murmur2_matches_java_reference_vectors():
    # org.apache.kafka.common.utils.UtilsTest#testMurmur2
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    for key, expected in cases.items():
        assert _signed(murmur2(key)) == expected, key


def test_murmur2_matches_kafka_python_over_random_keys():
    rng = random.Random(7)
    keys = [rng.randbytes(rng.randint(0, 64)) for _ in range(10_000)]
    assert [murmur2(k) for k in keys] == [kafka_python_murmur2(k) for k in keys]


def test_vectorised_murmur2_equals_scalar():
    rng = random.Random(3)
    keys = [rng.randbytes(rng.randint(0, 40)) for _ in range(5000)]
    arr = pa.array(keys, pa.binary()).slice(17)  # a sliced array exercises the offset
    offsets, data, _ = binary_parts(arr)
    got = murmur2_array(offsets, data)
    assert got.dtype == np.uint32
    assert [int(h) for h in got] == [murmur2(k) for k in keys[17:]]


def test_keyed_partition_is_positive_modulo():
    for key in (b"", b"k", os.urandom(33)):
        for n in (1, 3, 7, 100):
            p = partition_for_key(key, n)
            assert p == (murmur2(key) & 0x7FFFFFFF) % n
            assert 0 <= p < n


def test_null_keys_are_sticky_until_new_batch():
    part = Partitioner("murmur2_random", rng=random.Random(1))
    first = {part.partition("t", None, 6) for _ in range(100)}
    assert len(first) == 1
    (p,) = first
    part.on_new_batch("t", 6, p)
    q = part.partition("t", None, 6)
    assert q != p


def test_partition_array_matches_scalar_and_handles_null_keys():
    part = Partitioner("murmur2_random", rng=random.Random(5))
    keys = [None if i % 4 == 0 else f"key-{i}".encode() for i in range(1000)]
    arr = pa.array(keys, pa.binary())
    offsets, data, valid = binary_parts(arr)
    parts = part.partition_array("t", offsets, data, valid, len(keys), 12)
    sticky = part.sticky_partition("t", 12)
    for k, p in zip(keys, parts, strict=True):
        assert p == (sticky if k is None else partition_for_key(k, 12))
