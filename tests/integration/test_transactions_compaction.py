"""A compacted topic written by a transactional producer (confluent-kafka): the broker's
cleaner removes the aborted transaction's records, then (``delete.retention.ms`` later) its
ABORT marker and ``.txnindex`` entry; read_committed readers (confluent-kafka, kcat) see the
latest committed value of every key before, during and after, and after a SIGKILL the
recovered log has no transaction left open and the same transactional id commits again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers.cli import run
from tests.helpers.kafka_clients import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ck_consume,
    ck_txn_producer,
    create_topic,
    kcat_consume,
)
from tests.helpers.polling import wait_for
from tests.helpers.servers import ServerProcess

TOPIC = "txn-compacted"
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "1024",
                "delete.retention.ms": "1000", "min.cleanable.dirty.ratio": "0.01"}


def txn(p: Any, values: dict[bytes, bytes], commit: bool) -> None:
    p.begin_transaction()
    for k, v in values.items():
        p.produce(TOPIC, key=k, value=v, partition=0)
    p.flush(30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)


def dumped(part: Path, suffix: str) -> str:
    """``sparklog dump-log --print-data`` of every ``suffix`` file of the partition (files
    the cleaner replaces meanwhile are skipped)."""
    return "".join(run("dump-log", "--print-data", str(f)).stdout
                   for f in sorted(part.glob(f"*{suffix}")))


def latest(msgs: list[Any]) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for m in sorted(msgs, key=lambda m: m.offset):
        out[m.key] = m.value
    return out


def test_read_committed_after_compaction_removed_the_abort_marker(
        server_factory: Callable[..., ServerProcess]) -> None:
    from confluent_kafka import Producer

    server = server_factory(extra=["--set", "log.cleaner.backoff.ms=200"]).start()
    bs = server.bootstrap_servers
    create_topic(bs, TOPIC, 1, config=TOPIC_CONFIG)
    p = ck_txn_producer(bs, "compacted-id")
    want: dict[bytes, bytes] = {}
    first = {b"k%d" % i: b"v1-%d" % i for i in range(10)}
    txn(p, first, commit=True)
    txn(p, dict.fromkeys(first, b"aborted"), commit=False)
    second = {b"k%d" % i: b"v2-%d" % i for i in range(5)}
    txn(p, second, commit=True)
    want.update(first)
    want.update(second)

    part = server.data_dir / f"{TOPIC}-0"
    filler = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    written = [0]

    def abort_marker_removed() -> bool:
        # plain writes keep the log rolling and dirty, so the cleaner keeps passing over it
        key = b"f%d" % (written[0] % 8)
        want[key] = b"x%d" % written[0] + b"." * 200
        filler.produce(TOPIC, key=key, value=want[key], partition=0)
        filler.flush(10)
        written[0] += 1
        assert latest(kcat_consume(bs, TOPIC, 1, 0, isolation=READ_COMMITTED)) == want
        return "endTxnMarker: ABORT" not in dumped(part, ".log")

    wait_for(abort_marker_removed, 50, "the cleaner to remove the ABORT marker", interval=0.2)
    assert "Aborted transactions: 0" in dumped(part, ".txnindex") or \
        not list(part.glob("*.txnindex"))
    raw = kcat_consume(bs, TOPIC, 1, 0, isolation=READ_UNCOMMITTED)
    assert b"aborted" not in {m.value for m in raw}
    for isolation in (READ_COMMITTED, READ_UNCOMMITTED):
        assert latest(kcat_consume(bs, TOPIC, 1, 0, isolation=isolation)) == want
    assert latest(ck_consume(bs, TOPIC, 1, len(want), isolation=READ_COMMITTED)) == want

    # a crash: the recovered producer state leaves nothing open, the id works on
    server.kill()
    server.start()
    p2 = ck_txn_producer(bs, "compacted-id")
    third = {b"k0": b"v3-0"}
    txn(p2, third, commit=True)
    want.update(third)
    wait_for(lambda: latest(kcat_consume(bs, TOPIC, 1, 0, isolation=READ_COMMITTED)) == want,
             30, "the last commit through read_committed")
    server.stop()
