"""The driver's side of the exactly-once sink: record, then complete, each batch's
prepared transactions; abort orphans.

Protocol of a micro-batch ``N`` of query ``Q`` (``commit(messages, N)``, ``end_batch``):

1. Read the latest commit record of ``Q``. If it is for batch ``N``, this is a replay of a
   batch whose commit decision was already taken (the driver died during or after the
   commit, before Spark logged the batch as done): the transactions named in the record are
   completed (committed; those already committed are left alone) and the replay's own
   prepared transactions are left for step 3 to abort. The batch appears once.
2. Otherwise the record ``(Q, N, [(transactional id, producer id, epoch), ...])`` of the
   tasks' prepared transactions is written and acknowledged (acks=all) FIRST, then each is
   committed (KIP-939 recovery: take the id over, commit the transaction it left open).
   Once the record exists the decision is "commit": a crash after it is rolled forward by
   the replay in step 1, never backwards.
3. Orphans are aborted: every transaction still open whose id has the query's prefix
   (``sparklog-<Q>-``, ListTransactions by pattern). After step 1 or 2 the batch's own
   transactions are complete, and the tasks of the next batch have not started, so whatever
   is still open is an orphan: a superseded task attempt (failed, speculative, or of a run
   that crashed before recording), or a replay's duplicate. Spark replays an interrupted
   batch first thing after a restart, so that replay's commit is also the restart's scan.

``abort(messages, N)`` rolls batch ``N`` forward as step 1 does when its record says it was
decided (Spark calls abort when commit raised, possibly after the record was written).
Otherwise it first records ``N`` as aborted, then aborts the messages' transactions: a
commit record whose write failed ambiguously (not acknowledged, yet in the log) and becomes
readable later is then followed by the abort record, so a replay never rolls forward
transactions that were aborted. Either way it aborts orphans too.

Where the record lives: the compacted topic ``__sparklog_sink_commits`` (one partition,
keyed by query id, so compaction keeps each query's latest record), not the checkpoint
directory: the sink does not always know the checkpoint location (Spark passes it only when
given as a writer option, not through ``spark.sql.streaming.checkpointLocation``), the
driver may not be able to write it (a remote store without credentials here), and a topic is
replicated wherever the output topic is. Only the latest record of a query is ever needed:
Spark replays only the last batch, and never one before the last it committed.

A batch ``df.write`` has no replay: its commit completes the tasks' transactions (no record)
and aborts its orphans (prefix ``sparklog-write-<uuid>-``). A driver that dies in the middle
of it leaves the rest prepared; ``sparklog transactions list`` shows them.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql.datasource import WriterCommitMessage

from sparklog.client import AdminClient, Consumer, NewTopic, Producer
from sparklog.protocol.errors import SparklogError, TopicAlreadyExistsError
from sparklog.protocol.topic_partition import TopicPartition
from sparklog.spark.options import SinkOptions
from sparklog.spark.sink_txn import PreparedTxn, WriteStats

log = logging.getLogger(__name__)

__all__ = [
    "COMMITS_TOPIC",
    "CommitRecord",
    "abort_orphans",
    "end_batch",
    "end_write",
    "read_record",
    "write_record",
]

COMMITS_TOPIC = "__sparklog_sink_commits"
_COMMITS_TP = TopicPartition(COMMITS_TOPIC, 0)
# small segments, so compaction soon leaves about one record per query to read past
_COMMITS_CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(4 * 2**20),
                   "min.insync.replicas": "1"}
# offsets read per step when looking for a query's latest record from the end backwards
_READ_STEP = 2000
TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class CommitRecord:
    """The decision on one micro-batch: commit (or abort) its prepared transactions."""

    batch_id: int
    txns: tuple[PreparedTxn, ...]
    committed: bool = True

    def encode(self) -> bytes:
        return json.dumps({"batch": self.batch_id, "committed": self.committed, "txns": [
            [t.transactional_id, t.producer_id, t.producer_epoch] for t in self.txns]}).encode()

    @classmethod
    def decode(cls, value: bytes) -> CommitRecord:
        d = json.loads(value)
        return cls(int(d["batch"]), tuple(PreparedTxn(str(i), int(p), int(e))
                                          for i, p, e in d["txns"]), bool(d["committed"]))

    def commits(self, batch_id: int) -> bool:
        """Whether this record decided to commit ``batch_id``."""
        return self.committed and self.batch_id == batch_id


def _stats(messages: Sequence[WriterCommitMessage | None]) -> list[WriteStats]:
    return [m for m in messages if isinstance(m, WriteStats)]


def _prepared(stats: list[WriteStats]) -> list[PreparedTxn]:
    return [s.prepared for s in stats if s.prepared is not None]


def _prefix(stats: list[WriteStats]) -> str | None:
    return next((s.prefix for s in stats if s.prefix is not None), None)


def _query_id(prefix: str) -> str:
    return prefix.removeprefix("sparklog-").rstrip("-")


def _admin(options: SinkOptions) -> AdminClient:
    return AdminClient({"bootstrap.servers": options.bootstrap_servers})


def _ensure_topic(admin: AdminClient) -> None:
    if COMMITS_TOPIC in admin.list_topics():
        return
    rf = min(3, len(admin.describe_cluster().brokers))
    try:
        admin.create_topics([NewTopic(COMMITS_TOPIC, 1, rf, dict(_COMMITS_CONFIG))])
    except TopicAlreadyExistsError:
        pass  # another query's driver created it first


def read_record(options: SinkOptions, query_id: str) -> CommitRecord | None:
    """The latest commit record of ``query_id`` (None: the query has none yet), read from
    the end of the topic backwards."""
    key = query_id.encode()
    consumer = Consumer({"bootstrap.servers": options.bootstrap_servers,
                         "enable.auto.commit": "false", "isolation.level": "read_committed"})
    try:
        consumer.assign([_COMMITS_TP])
        low, end = consumer.get_watermark_offsets(_COMMITS_TP)
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while end > low:
            start = max(low, end - _READ_STEP)
            found: bytes | None = None
            consumer.seek(_COMMITS_TP, start)
            while (consumer.position(_COMMITS_TP) or 0) < end:
                if time.monotonic() > deadline:
                    raise SparklogError(f"reading {COMMITS_TOPIC} timed out")
                for r in consumer.consume(_READ_STEP, 1.0):
                    if r.offset < end and r.key == key and r.value is not None:
                        found = r.value
            if found is not None:
                return CommitRecord.decode(found)
            end = start
        return None
    finally:
        consumer.close()


def write_record(options: SinkOptions, query_id: str, record: CommitRecord) -> None:
    producer = Producer({"bootstrap.servers": options.bootstrap_servers, "acks": "all",
                         "enable.idempotence": "true", "linger.ms": "0"})
    try:
        producer.produce(COMMITS_TOPIC, record.encode(), key=query_id.encode(), partition=0)
        left = producer.flush(TIMEOUT_MS / 1000)
        if left:
            raise SparklogError(f"the commit record of batch {record.batch_id} was not "
                                "acknowledged in time")
    finally:
        producer.close()


def _complete(admin: AdminClient, txns: Sequence[PreparedTxn], commit: bool) -> int:
    """Commit (or abort) ``txns``; returns how many were open and committed."""
    if not txns:
        return 0
    done = admin.recover_prepared_transactions(
        {t.transactional_id: t.state if commit else None for t in txns}, TIMEOUT_MS)
    return sum(done.values())


def abort_orphans(admin: AdminClient, prefix: str) -> list[str]:
    """Abort every open transaction whose id starts with ``prefix``; returns their ids."""
    open_ids = [t.transactional_id for t in admin.list_transactions(
        states=["Ongoing"], id_pattern=re.escape(prefix) + ".*")]
    if open_ids:
        log.warning("sparklog sink: aborting %d orphan transaction(s) of %s: %s",
                    len(open_ids), prefix, open_ids)
        _complete(admin, [PreparedTxn(i, -1, -1) for i in open_ids], commit=False)
    return open_ids


def end_batch(options: SinkOptions, messages: Sequence[WriterCommitMessage | None],
              batch_id: int, commit: bool) -> int:
    """A micro-batch's commit (``commit``) or abort, as the module doc describes: a batch
    already decided "commit" is rolled forward either way. Returns the rows made visible."""
    stats = _stats(messages)
    prefix = _prefix(stats)
    if prefix is None:
        return 0  # no task ran exactly-once (or there were none)
    query_id = _query_id(prefix)
    with _admin(options) as admin:
        _ensure_topic(admin)
        record = read_record(options, query_id)
        if record is not None and record.commits(batch_id):
            log.warning("sparklog sink: batch %d of query %s was already decided: completing "
                        "its %d recorded transaction(s), aborting the replay's", batch_id,
                        query_id, len(record.txns))
            _complete(admin, record.txns, commit=True)
            rows = 0
        else:
            record = CommitRecord(batch_id, tuple(_prepared(stats)), committed=commit)
            write_record(options, query_id, record)
            _complete(admin, record.txns, commit)
            rows = sum(s.rows for s in stats) if commit else 0
        abort_orphans(admin, prefix)
    return rows


def end_write(options: SinkOptions, messages: Sequence[WriterCommitMessage | None],
              commit: bool) -> None:
    """A batch ``df.write``'s commit or abort: its tasks' transactions, then its orphans."""
    stats = _stats(messages)
    prefix = _prefix(stats)
    if prefix is None:
        return
    with _admin(options) as admin:
        _complete(admin, _prepared(stats), commit)
        abort_orphans(admin, prefix)
