"""The four third-party clients the broker must serve (confluent-kafka, kafka-python,
aiokafka, kcat): produce/consume helpers, topic creation and committed offsets.

Every produce/consume helper takes plain data (``Msg`` tuples) and returns plain data, so
tests can compare what one client wrote with what another read, field by field.
``CLIENTS`` maps each client's name to its (produce, consume) pair; every consume helper
takes ``isolation`` (``READ_COMMITTED`` reads only committed transactions).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from tests.helpers.polling import collect

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
DEADLINE_S = 60
READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"


class Msg(NamedTuple):
    partition: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes], ...] = ()
    offset: int = -1


def make_messages(n: int, partitions: int, *, t0: int | None = None, headers: bool = False,
                  tag: str = "m") -> list[Msg]:
    t0 = t0 if t0 is not None else int(time.time() * 1000) - 600_000
    out = []
    for i in range(n):
        h = ((f"h{i % 3}", f"hv-{i}".encode()), ("const", b"c")) if headers else ()
        out.append(Msg(i % partitions, f"{tag}-key-{i}".encode(),
                       f"{tag}-value-{i}-".encode() + b"x" * (i % 50), t0 + i, h))
    return out


def comparable(msgs: list[Msg]) -> list[tuple[Any, ...]]:
    return sorted((m.partition, m.key, m.value, m.timestamp, tuple(m.headers)) for m in msgs)


# -- confluent-kafka ------------------------------------------------------------------------

def ck_produce(bs: str, topic: str, msgs: list[Msg], **conf: Any) -> None:
    from confluent_kafka import Producer

    errors: list[Any] = []
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "acks": "all",
                  "enable.idempotence": True, **conf})
    for m in msgs:
        while True:
            try:
                p.produce(topic, value=m.value, key=m.key, partition=m.partition,
                          timestamp=m.timestamp, headers=list(m.headers) or None,
                          on_delivery=lambda err, _msg: err and errors.append(err))
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(DEADLINE_S)
    assert left == 0 and not errors, (left, errors[:3])


def ck_txn_producer(bs: str, txn_id: str, **conf: Any) -> Any:
    """A confluent-kafka transactional producer of ``txn_id``, initialised."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bs, "transactional.id": txn_id, "linger.ms": 5, **conf})
    p.init_transactions(DEADLINE_S)
    return p


def ck_consume(bs: str, topic: str, partitions: int, n: int, start: int = 0,
               isolation: str = READ_UNCOMMITTED) -> list[Msg]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": f"ck-assign-{topic}",
                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 1,
                  "auto.offset.reset": "earliest", "isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, p, start) for p in range(partitions)])

        def msg(m: Any) -> Msg:
            if m.error():
                raise AssertionError(m.error())
            return Msg(m.partition(), m.key(), m.value(), m.timestamp()[1],
                       tuple((k, v) for k, v in (m.headers() or [])), m.offset())

        return collect(lambda: [msg(m) for m in c.consume(10000, 0.5)], n, DEADLINE_S)
    finally:
        c.close()


def ck_read_to_end(bs: str, topic: str, partitions: int,
                   isolation: str = READ_COMMITTED) -> list[Msg]:
    """Everything confluent-kafka reads of ``topic`` up to the end of each partition (its
    last stable offset under read_committed, which an open transaction holds back: the
    read then waits until the deadline and fails)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": f"ck-end-{topic}",
                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 1,
                  "enable.partition.eof": True, "isolation.level": isolation})
    out: list[Msg] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + DEADLINE_S
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic}: no end reached on {at_end}"
            for m in c.consume(10000, 0.5):
                if m.error() and m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                elif m.error():
                    raise AssertionError(m.error())
                else:
                    at_end.discard(m.partition())
                    out.append(Msg(m.partition(), m.key(), m.value(), m.timestamp()[1],
                                   tuple((k, v) for k, v in (m.headers() or [])), m.offset()))
        return out
    finally:
        c.close()


# -- kafka-python ---------------------------------------------------------------------------

def kp_produce(bs: str, topic: str, msgs: list[Msg], **conf: Any) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bs, acks="all", enable_idempotence=True, linger_ms=5,
                      **conf)
    futures = [p.send(topic, value=m.value, key=m.key, partition=m.partition,
                      timestamp_ms=m.timestamp, headers=list(m.headers) or None) for m in msgs]
    p.flush(DEADLINE_S)
    for f in futures:
        f.get(DEADLINE_S)
    p.close(5)


def kp_consume(bs: str, topic: str, partitions: int, n: int, start: int = 0,
               isolation: str = READ_UNCOMMITTED) -> list[Msg]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, consumer_timeout_ms=2000,
                      isolation_level=isolation)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, start)
        return collect(lambda: [
            Msg(tp.partition, r.key, r.value, r.timestamp,
                tuple((k, v) for k, v in (r.headers or [])), r.offset)
            for tp, records in c.poll(500, max_records=10000).items() for r in records],
            n, DEADLINE_S)
    finally:
        c.close()


# -- aiokafka -------------------------------------------------------------------------------

def ak_produce(bs: str, topic: str, msgs: list[Msg], **conf: Any) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bs, acks="all", enable_idempotence=True,
                             linger_ms=5, **conf)
        await p.start()
        try:
            futs = [await p.send(topic, value=m.value, key=m.key, partition=m.partition,
                                 timestamp_ms=m.timestamp, headers=list(m.headers) or None)
                    for m in msgs]
            await p.flush()
            for f in futs:
                await asyncio.wait_for(f, DEADLINE_S)
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(run(), DEADLINE_S * 2))


def ak_consume(bs: str, topic: str, partitions: int, n: int, start: int = 0,
               isolation: str = READ_UNCOMMITTED) -> list[Msg]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[Msg]:
        c = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False,
                             isolation_level=isolation)
        await c.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            c.assign(tps)
            for tp in tps:
                c.seek(tp, start)
            out: list[Msg] = []
            deadline = time.monotonic() + DEADLINE_S
            while len(out) < n and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500, max_records=10000)
                for tp, records in batch.items():
                    for r in records:
                        out.append(Msg(tp.partition, r.key, r.value, r.timestamp,
                                       tuple((k, bytes(v)) for k, v in (r.headers or [])),
                                       r.offset))
            return out
        finally:
            await c.stop()

    return asyncio.run(asyncio.wait_for(run(), DEADLINE_S * 2))


# -- kcat -----------------------------------------------------------------------------------

_SEP = "\x1f"  # field separator for kcat -F/-K/-D that never appears in our payloads


def kcat_produce(bs: str, topic: str, msgs: list[Msg], extra: list[str] | None = None) -> None:
    """One kcat process per partition (kcat takes the partition from -p)."""
    by_part: dict[int, list[Msg]] = {}
    for m in msgs:
        by_part.setdefault(m.partition, []).append(m)
    for part, items in by_part.items():
        if any(m.headers for m in items):
            # kcat sets headers per invocation only (-H); one process per message is slow,
            # so the matrix sends headers only through the library clients
            raise ValueError("kcat_produce does not send per-message headers")
        with tempfile.NamedTemporaryFile("wb", delete=False) as fh:
            for m in items:
                fh.write(m.key + b"\t" + m.value + b"\n")
            path = fh.name
        try:
            cmd = [KCAT, "-b", bs, "-P", "-t", topic, "-p", str(part), "-K", "\t",
                   "-X", "acks=all", "-X", "enable.idempotence=true", "-X", "linger.ms=5",
                   *(extra or []), "-l", path]
            subprocess.run(cmd, check=True, timeout=DEADLINE_S, capture_output=True)
        finally:
            os.unlink(path)


def kcat_consume(bs: str, topic: str, partitions: int, n: int, start: int = 0,
                 offset_spec: str | None = None, isolation: str = READ_UNCOMMITTED) -> list[Msg]:
    out: list[Msg] = []
    for part in range(partitions):
        spec = offset_spec if offset_spec is not None else str(start)
        fmt = _SEP.join(["%p", "%o", "%T", "%k", "%s", "%h"]) + "\x1e"
        cmd = [KCAT, "-b", bs, "-C", "-t", topic, "-p", str(part), "-o", spec, "-e", "-q",
               "-X", f"isolation.level={isolation}", "-f", fmt]
        res = subprocess.run(cmd, check=True, timeout=DEADLINE_S, capture_output=True)
        for rec in res.stdout.split(b"\x1e"):
            if not rec:
                continue
            p, o, ts, k, v, h = rec.split(_SEP.encode(), 5)
            headers: tuple[tuple[str, bytes], ...] = ()
            if h:
                pairs = []
                for item in h.decode().split(","):
                    hk, _, hv = item.partition("=")
                    pairs.append((hk, hv.encode()))
                headers = tuple(pairs)
            out.append(Msg(int(p), k, v, int(ts), headers, int(o)))
    return out


CLIENTS: dict[str, tuple[Callable[..., None], Callable[..., list[Msg]]]] = {
    "confluent": (ck_produce, ck_consume),
    "kafka-python": (kp_produce, kp_consume),
    "aiokafka": (ak_produce, ak_consume),
    "kcat": (kcat_produce, kcat_consume),
}


# -- topics and committed offsets (through confluent-kafka) ---------------------------------

def create_topic(bs: str, name: str, partitions: int = 4, replication_factor: int = 1,
                 config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, partitions, replication_factor,
                                  config=config or {})])[name].result(timeout=30)


def commit_offsets(bs: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` (partition -> offset) for ``group`` without joining it."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                 asynchronous=False)
    finally:
        c.close()


def committed_offsets(bs: str, group: str, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    """What the broker says the group committed (confluent-kafka's committed())."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in partitions], timeout=20)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()
