"""The exactly-once sink's driver protocol against a real broker, without Spark: tasks'
prepared transactions (real 2PC producers), the commit record, replays, abort and orphans.

Each case plays what the driver sees after a crash at one point of ``commit``; the output is
read by confluent-kafka with read_committed, and no transaction of the query may stay open.
"""

from __future__ import annotations

import uuid

import pyarrow as pa

from sparklog.client import AdminClient, Producer
from sparklog.spark.options import parse_sink_options
from sparklog.spark.sink_commits import (
    CommitRecord,
    end_batch,
    end_write,
    read_record,
    write_record,
)
from sparklog.spark.sink_txn import (
    PreparedTxn,
    WriteStats,
    query_prefix,
    resolve_exactly_once,
    transactional_conf,
)
from tests.helpers.kafka_clients import ck_read_to_end


def _prepare(options, prefix: str, name: str, topic: str, values: list[bytes]) -> WriteStats:
    """What a write task does: its own 2PC transaction, written and prepared."""
    txn_id = prefix + name
    p = Producer(transactional_conf(options, txn_id))
    try:
        p.init_transactions()
        p.begin_transaction()
        p.produce_arrow(topic, pa.array(values, pa.binary()))
        state = p.prepare_transaction()
    finally:
        p.close(0)
    return WriteStats(len(values), {topic: len(values)},
                      PreparedTxn(txn_id, state.producer_id, state.producer_epoch), prefix)


def _values(bootstrap: str, topic: str) -> list[bytes]:
    return sorted(m.value for m in ck_read_to_end(bootstrap, topic, 1))


def _open_txns(admin: AdminClient, prefix: str) -> list[str]:
    return [t.transactional_id for t in admin.list_transactions(states=["Ongoing"])
            if t.transactional_id.startswith(prefix)]


def _setup(bootstrap, topic_factory):  # noqa: ANN202
    topic = topic_factory()
    options = parse_sink_options({"bootstrap.servers": bootstrap, "topic": topic})
    query = str(uuid.uuid4())
    return topic, options, query, query_prefix(query)


def test_commit_records_then_commits_and_a_replay_is_not_written_twice(
        bootstrap, topic_factory, admin):
    topic, options, query, prefix = _setup(bootstrap, topic_factory)
    first = [_prepare(options, prefix, f"3-run1-{i}-{i}", topic, [b"a%d" % i, b"b%d" % i])
             for i in range(2)]
    assert end_batch(options, first, 3, commit=True) == 4
    record = read_record(options, query)
    assert record == CommitRecord(3, tuple(m.prepared for m in first))
    # the driver died after the commit, before Spark logged it: batch 3 is replayed
    replay = [_prepare(options, prefix, f"3-run2-{i}-{i}", topic, [b"a%d" % i, b"b%d" % i])
              for i in range(2)]
    end_batch(options, replay, 3, commit=True)
    assert _values(bootstrap, topic) == sorted([b"a0", b"b0", b"a1", b"b1"])
    assert _open_txns(admin, prefix) == []


def test_record_written_but_not_completed_is_rolled_forward_by_the_replay(
        bootstrap, topic_factory, admin):
    topic, options, query, prefix = _setup(bootstrap, topic_factory)
    decided = [_prepare(options, prefix, f"7-run1-{i}-{i}", topic, [b"x%d" % i])
               for i in range(3)]
    # the driver recorded batch 7 and died before committing any of it
    write_record(options, query, CommitRecord(7, tuple(m.prepared for m in decided)))
    replay = [_prepare(options, prefix, f"7-run2-{i}-{i}", topic, [b"x%d" % i])
              for i in range(3)]
    end_batch(options, replay, 7, commit=True)
    assert _values(bootstrap, topic) == [b"x0", b"x1", b"x2"]
    assert _open_txns(admin, prefix) == []


def test_abort_after_the_record_commits_instead(bootstrap, topic_factory, admin):
    topic, options, query, prefix = _setup(bootstrap, topic_factory)
    msgs = [_prepare(options, prefix, "2-run1-0-0", topic, [b"kept"])]
    write_record(options, query, CommitRecord(2, tuple(m.prepared for m in msgs)))
    # Spark aborts when commit raised after the record was written
    end_batch(options, msgs, 2, commit=False)
    assert _values(bootstrap, topic) == [b"kept"]
    assert _open_txns(admin, prefix) == []


def test_a_commit_record_readable_only_after_the_abort_is_not_rolled_forward(
        bootstrap, topic_factory, admin):
    topic, options, query, prefix = _setup(bootstrap, topic_factory)
    msgs = [_prepare(options, prefix, "4-run1-0-0", topic, [b"aborted"])]
    end_batch(options, msgs, 4, commit=False)  # no record yet: records the abort, aborts
    # the commit record whose write had failed ambiguously turns up late, before the abort's
    write_record(options, query, CommitRecord(4, tuple(m.prepared for m in msgs)))
    write_record(options, query, CommitRecord(4, tuple(m.prepared for m in msgs), False))
    replay = [_prepare(options, prefix, "4-run2-0-0", topic, [b"replayed"])]
    end_batch(options, replay, 4, commit=True)
    assert _values(bootstrap, topic) == [b"replayed"]
    assert read_record(options, query).commits(4)
    assert _open_txns(admin, prefix) == []

def test_abort_of_an_unrecorded_batch_and_orphans(bootstrap, topic_factory, admin):
    topic, options, query, prefix = _setup(bootstrap, topic_factory)
    zero = [_prepare(options, prefix, "0-run1-0-0", topic, [b"zero"])]
    end_batch(options, zero, 0, commit=True)
    # a superseded attempt of batch 1, and a crashed run's unrecorded batch 1
    _prepare(options, prefix, "1-run1-0-5", topic, [b"orphan"])
    _prepare(options, prefix, "1-run0-0-1", topic, [b"orphan"])
    msgs = [_prepare(options, prefix, "1-run1-0-6", topic, [b"aborted"])]
    assert len(_open_txns(admin, prefix)) == 3
    end_batch(options, msgs, 1, commit=False)
    assert _open_txns(admin, prefix) == []
    one = [_prepare(options, prefix, "1-run1-0-7", topic, [b"one"])]
    end_batch(options, one, 1, commit=True)
    assert _values(bootstrap, topic) == [b"one", b"zero"]
    assert read_record(options, query) is not None and read_record(options, query).batch_id == 1


def test_batch_write_commit_and_abort(bootstrap, topic_factory, admin):
    topic, options, _, _ = _setup(bootstrap, topic_factory)
    prefix = f"sparklog-write-{uuid.uuid4().hex}-"
    end_write(options, [_prepare(options, prefix, "0-1", topic, [b"w"])], commit=True)
    end_write(options, [_prepare(options, prefix, "0-2", topic, [b"gone"])], commit=False)
    _prepare(options, prefix, "1-3", topic, [b"orphan"])
    end_write(options, [_prepare(options, prefix, "0-4", topic, [b"w2"])], commit=True)
    assert _values(bootstrap, topic) == [b"w", b"w2"]
    assert _open_txns(admin, prefix) == []


def test_brokers_allowing_two_phase_commit_make_the_sink_exactly_once(bootstrap):
    assert resolve_exactly_once(parse_sink_options({"bootstrap.servers": bootstrap})) is True


def test_a_recoverer_that_died_after_its_takeover_is_finished_by_the_next(
        bootstrap, topic_factory, admin):
    topic, options, _, prefix = _setup(bootstrap, topic_factory)
    msg = _prepare(options, prefix, "5-run1-0-0", topic, [b"once"])
    assert msg.prepared is not None
    dead = Producer(transactional_conf(options, msg.prepared.transactional_id))
    dead.init_transactions(keep_prepared_txn=True)  # took the transaction over, then died
    dead.close(0)
    end_batch(options, [msg], 5, commit=True)
    assert _values(bootstrap, topic) == [b"once"]
    assert _open_txns(admin, prefix) == []
