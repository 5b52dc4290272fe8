"""Transactions across broker crashes (SIGKILL of the server process): what was committed
stays committed in full, what was open at the crash ends aborted in full (by the
transaction timeout once the coordinator is back), on every partition; read_committed
readers see exactly the committed records, none lost, none duplicated, in order; offsets
committed in transactions come back as the last committed one; and the same transactional
id keeps working afterwards."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from confluent_kafka import TopicPartition

from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.messages.transactions import InitProducerIdRequest
from tests.helpers.cli import ok, run
from tests.helpers.kafka_clients import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ck_txn_producer,
    committed_offsets,
    create_topic,
    kcat_consume,
)
from tests.helpers.polling import wait_for
from tests.helpers.servers import ServerProcess
from tests.helpers.wire import KafkaWire

PARTS = 3
TIMEOUT_MS = 3000
SERVER_SETTINGS = ["--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200"]


def producer(bs: str, txn_id: str) -> Any:
    return ck_txn_producer(bs, txn_id, **{"transaction.timeout.ms": TIMEOUT_MS,
                                          "message.timeout.ms": TIMEOUT_MS})


Written = list[tuple[int, bytes]]  # (partition, value) in the order produced


def write(p: Any, topic: str, prefix: str, n: int) -> Written:
    out = [(i % PARTS, f"{prefix}-{i}".encode()) for i in range(n)]
    for part, v in out:
        p.produce(topic, value=v, partition=part)
    p.flush(30)
    return out


def committed_records(bs: str, topic: str) -> Written:
    return [(m.partition, m.value) for m in sorted(
        kcat_consume(bs, topic, PARTS, 0, isolation=READ_COMMITTED),
        key=lambda m: (m.partition, m.offset))]


def stable_ends(bs: str, topic: str, isolation: str) -> list[int]:
    """Per partition, the end a consumer of ``isolation`` sees (LSO or high watermark)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": "ends", "isolation.level": isolation})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(PARTS)]
    finally:
        c.close()


def group_metadata(bs: str, group: str) -> Any:
    """confluent-kafka's ConsumerGroupMetadata of ``group`` (no join needed)."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        return c.consumer_group_metadata()
    finally:
        c.close()


def check_exactly(bs: str, topic: str, want: Written) -> None:
    """read_committed holds ``want``: none lost, duplicated or extra, in order per
    partition."""
    got = committed_records(bs, topic)
    counts = Counter(got)
    lost = [r for r in want if r not in counts]
    dup = [r for r, c in counts.items() if c > 1]
    extra = [r for r in counts if r not in set(want)]
    assert (lost, dup, extra) == ([], [], []), (lost[:5], dup[:5], extra[:5])
    for part in range(PARTS):
        assert [v for q, v in got if q == part] == [v for q, v in want if q == part]


def started(server_factory: Callable[..., ServerProcess], topic: str
            ) -> tuple[ServerProcess, str]:
    """A server process (fast abort timer) with ``topic``; and its bootstrap address."""
    server = server_factory(extra=SERVER_SETTINGS).start()
    create_topic(server.bootstrap_servers, topic, PARTS)
    return server, server.bootstrap_servers


def test_sigkill_mid_transaction_is_all_or_nothing(
        server_factory: Callable[..., ServerProcess]) -> None:
    topic = "txn-crash"
    server, bs = started(server_factory, topic)
    p = producer(bs, "crash-id")
    p.begin_transaction()
    committed = write(p, topic, "committed", 30)
    p.commit_transaction(30)
    p.begin_transaction()
    open_values = write(p, topic, "open", 30)  # in the log, not committed
    server.kill()
    del p  # its broker is gone; a restarted application uses a new instance

    server.start()
    # the open transaction holds the LSO back: nothing of it is readable committed, until
    # its timeout aborts it (the coordinator reloaded it from __transaction_state)
    check_exactly(bs, topic, committed)
    wait_for(lambda: stable_ends(bs, topic, READ_COMMITTED) == stable_ends(bs, topic,
                                                                           READ_UNCOMMITTED),
             30, "the open transaction's abort")
    check_exactly(bs, topic, committed)
    # a new producer instance of the same id commits more
    p2 = producer(bs, "crash-id")
    p2.begin_transaction()
    later = write(p2, topic, "later", 9)
    p2.commit_transaction(30)
    check_exactly(bs, topic, committed + later)
    raw = kcat_consume(bs, topic, PARTS, 0, isolation=READ_UNCOMMITTED)
    assert {(m.partition, m.value) for m in raw} >= set(open_values)  # aborted, still in the log
    server.stop()


def test_committed_transactions_survive_sigkill_and_recovery(
        server_factory: Callable[..., ServerProcess]) -> None:
    topic = "txn-durable"
    server, bs = started(server_factory, topic)
    p = producer(bs, "durable-id")
    group = group_metadata(bs, "durable-group")
    want: Written = []
    for round_ in range(4):
        p.begin_transaction()
        values = write(p, topic, f"r{round_}", 12)
        # offsets committed in the transaction: round r commits r + 1 on partition 0
        p.send_offsets_to_transaction([TopicPartition(topic, 0, round_ + 1)], group, 30)
        if round_ % 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            want += values
    server.kill()  # no clean shutdown: producer state and .txnindex come from recovery
    server.start()
    check_exactly(bs, topic, want)
    # __consumer_offsets replayed the same way: the last committed round's offset, not the
    # aborted round's after it
    assert committed_offsets(bs, "durable-group", topic, [0]) == {0: 3}
    # what the log holds, as kafka-dump-log.sh shows it: two aborted transactions indexed
    # per partition, and the markers
    part = server.data_dir / f"{topic}-0"
    idx = ok(run("dump-log", str(part / "00000000000000000000.txnindex"))).splitlines()
    assert idx[-1] == "Aborted transactions: 2" and idx[1].startswith("version: 0 producerId: ")
    dump = ok(run("dump-log", "--print-data", str(part / "00000000000000000000.log")))
    markers = [ln.split("endTxnMarker: ")[1] for ln in dump.splitlines() if "endTxnMarker" in ln]
    assert markers == ["COMMIT", "ABORT", "COMMIT", "ABORT"]
    assert "isTransactional: true isControl: true" in dump
    # the restarted log keeps serving transactions: the same id commits once more
    p2 = producer(bs, "durable-id")
    p2.begin_transaction()
    want += write(p2, topic, "after", 6)
    p2.commit_transaction(30)
    wait_for(lambda: len(committed_records(bs, topic)) == len(want), 30, "the last commit")
    check_exactly(bs, topic, want)
    server.stop()


def test_a_retried_init_producer_id_gets_the_same_epoch_after_a_crash(
        server_factory: Callable[..., ServerProcess],
        kafka_wire: Callable[[str], KafkaWire]) -> None:
    """The producer asked to bump its epoch (KIP-360), the broker logged the bump and died
    before answering; the retry against the restarted coordinator presents the old epoch
    and must get the bumped one, not PRODUCER_FENCED."""
    server, bs = started(server_factory, "txn-retry")

    def init(producer_id: int = -1, epoch: int = -1) -> tuple[ErrorCode, int, int]:
        out: list[tuple[ErrorCode, int, int]] = []

        def answered() -> bool:
            r = kafka_wire(bs).call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
                transactional_id="retry-id", transaction_timeout_ms=TIMEOUT_MS,
                producer_id=producer_id, producer_epoch=epoch))
            out.append((ErrorCode(r.error_code), r.producer_id, r.producer_epoch))
            return out[-1][0] not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                      ErrorCode.NOT_COORDINATOR)
        wait_for(answered, 30, "the coordinator")
        return out[-1]

    _e, pid, epoch = init()
    bumped = init(pid, epoch)
    assert bumped == (ErrorCode.NONE, pid, epoch + 1)
    server.kill()
    server.start()
    assert init(pid, epoch) == bumped
    # a new instance (no epoch) fences both epochs
    assert init() == (ErrorCode.NONE, pid, epoch + 2)
    assert init(pid, epoch)[0] == ErrorCode.PRODUCER_FENCED
    assert init(pid, epoch + 1)[0] == ErrorCode.PRODUCER_FENCED
    server.stop()


def test_the_lso_holds_at_open_transactions_across_a_sigkill(
        server_factory: Callable[..., ServerProcess]) -> None:
    """Two transactions open at the crash, one begun before segment rolls (the rolls'
    producer snapshots hold it open), one after them (only the replay of the log tail
    finds it): after the restart the LSO of each partition is the first offset of its
    oldest open transaction, read_committed readers see nothing at or past it, until the
    reloaded coordinator aborts both on their timeout; then LSO = high watermark and the
    committed records are all there, once."""
    from confluent_kafka import Producer

    topic = "txn-lso"
    server = server_factory(extra=SERVER_SETTINGS).start()
    bs = server.bootstrap_servers
    create_topic(bs, topic, PARTS, config={"segment.bytes": "2048"})
    slow = {"transaction.timeout.ms": 25_000, "message.timeout.ms": 25_000}
    first = ck_txn_producer(bs, "lso-first", **slow)
    second = ck_txn_producer(bs, "lso-second", **slow)
    plain = Producer({"bootstrap.servers": bs, "linger.ms": 5})

    def filler(prefix: str, n: int) -> Written:
        out = [(i % PARTS, f"{prefix}-{i}".encode() + b"." * 150) for i in range(n)]
        for part, v in out:
            plain.produce(topic, value=v, partition=part)
        plain.flush(30)
        return out

    committed = filler("before", 30)
    first.begin_transaction()
    write(first, topic, "open-first", 15)
    committed += filler("rolling", 90)  # several rolls per partition while it is open
    second.begin_transaction()
    write(second, topic, "open-second", 15)
    committed += filler("after", 6)
    server.kill()
    server.start()

    raw = kcat_consume(bs, topic, PARTS, 0, isolation=READ_UNCOMMITTED)
    open_first = [min(m.offset for m in raw if m.partition == part
                      and m.value.startswith(b"open-first")) for part in range(PARTS)]
    segments = [len(list((server.data_dir / f"{topic}-{part}").glob("*.log")))
                for part in range(PARTS)]
    assert min(segments) > 2, segments
    assert stable_ends(bs, topic, READ_COMMITTED) == open_first
    assert all(h > o for h, o in zip(stable_ends(bs, topic, READ_UNCOMMITTED), open_first,
                                     strict=True))
    seen = kcat_consume(bs, topic, PARTS, 0, isolation=READ_COMMITTED)
    assert all(m.offset < open_first[m.partition] for m in seen)
    assert [m.value for m in seen] == [m.value for m in raw if m.offset < open_first[m.partition]]
    wait_for(lambda: stable_ends(bs, topic, READ_COMMITTED) == stable_ends(bs, topic,
                                                                           READ_UNCOMMITTED),
             40, "the open transactions' aborts")
    check_exactly(bs, topic, committed)
    server.stop()
