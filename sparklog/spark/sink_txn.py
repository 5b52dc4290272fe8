"""The write task's side of the exactly-once sink: one prepared transaction per task attempt.

A task writes its rows inside its own Kafka transaction and prepares it (KIP-939's two-phase
commit: flushed, partitions added, not ended), then reports the transaction in its
``WriteStats`` commit message; the driver (``sink_commits``) commits or aborts it. Until
then nothing the task wrote is visible to a read_committed reader.

Transactional ids (unique per task attempt, across driver restarts too)::

    streams:      sparklog-<queryId>-<batchId>-<runId>-<partitionId>-<taskAttemptId>
    batch writes: sparklog-write-<uuid4 of the write>-<partitionId>-<taskAttemptId>

``queryId`` and ``batchId`` are local properties Spark sets on a micro-batch's tasks
(``sql.streaming.queryId``, ``streaming.sql.batchId``); the run id reaches them as the job
group (``spark.jobGroup.id``: StreamExecution runs its jobs in a group named by it). The
run id is there because a restarted query replays the same batch ids and Spark counts task
attempt ids from 0 again in a new driver: without it a replayed task would reuse, and by
initialising it abort, a transaction of the crashed run that the driver had already recorded
as committed. Everything up to the batch id is the query's prefix (``sparklog-<queryId>-``),
which the driver's orphan scan lists by (ListTransactions with that pattern). Ids are
single-use, so the coordinator forgets them after Kafka's
``transactional.id.expiration.ms``.

A task with no rows opens no transaction (and makes no producer). A task that fails aborts
its own transaction before it re-raises; one that dies leaves it for the orphan scan.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import WriterCommitMessage

from sparklog.client.transactions import PreparedTxnState
from sparklog.protocol.errors import SparklogError
from sparklog.spark.options import OptionError, SinkOptions

if TYPE_CHECKING:
    from sparklog.client import Producer

log = logging.getLogger(__name__)

__all__ = [
    "PreparedTxn",
    "WriteStats",
    "batch_write_prefix",
    "query_prefix",
    "resolve_exactly_once",
    "task_transactional_id",
    "transactional_conf",
]

# Spark's local properties of a micro-batch's jobs (StreamExecution / MicroBatchExecution)
QUERY_ID_PROPERTY = "sql.streaming.queryId"
RUN_ID_PROPERTY = "spark.jobGroup.id"
BATCH_ID_PROPERTY = "streaming.sql.batchId"

# Kafka API keys the exactly-once path needs: InitProducerId v6 (KIP-939), EndTxn,
# ListTransactions (the orphan scan)
_INIT_PRODUCER_ID, _END_TXN, _LIST_TRANSACTIONS = 22, 26, 66
_TWO_PHASE_CONFIG = "transaction.two.phase.commit.enable"


@dataclass(frozen=True)
class PreparedTxn:
    """A task's prepared transaction, as its commit message carries it to the driver."""

    transactional_id: str
    producer_id: int
    producer_epoch: int

    @property
    def state(self) -> PreparedTxnState:
        return PreparedTxnState(self.producer_id, self.producer_epoch)


@dataclass
class WriteStats(WriterCommitMessage):
    """A write task's commit message: its row counts and, when exactly-once, its prepared
    transaction (None when it wrote no rows) and the prefix the driver scans for orphans."""

    rows: int = 0
    per_topic: dict[str, int] = field(default_factory=dict)
    prepared: PreparedTxn | None = None
    prefix: str | None = None


def query_prefix(query_id: str) -> str:
    """Every transactional id of the streaming query ``query_id`` starts with this."""
    return f"sparklog-{query_id}-"


def batch_write_prefix(write_id: str) -> str:
    """Every transactional id of one batch ``df.write`` starts with this."""
    return f"sparklog-write-{write_id}-"


def task_transactional_id(write_id: str | None) -> tuple[str, str]:
    """(transactional id, prefix) of the running task: of a batch write when ``write_id``
    is given, else of the micro-batch Spark's local properties name."""
    ctx = TaskContext.get()
    if ctx is None:
        raise SparklogError("the sparklog sink's write() runs only inside a Spark task")
    task = f"{ctx.partitionId()}-{ctx.taskAttemptId()}"
    if write_id is not None:
        prefix = batch_write_prefix(write_id)
        return prefix + task, prefix
    query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY)
    run_id = ctx.getLocalProperty(RUN_ID_PROPERTY)
    batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY)
    if not query_id or not run_id or batch_id is None:
        raise SparklogError(
            "exactly-once streaming writes need a micro-batch query (Spark did not set "
            f"{QUERY_ID_PROPERTY}/{RUN_ID_PROPERTY}/{BATCH_ID_PROPERTY}); continuous "
            "processing is not supported. Fix: use a micro-batch trigger, or "
            ".option('exactlyOnce', 'false')."
        )
    prefix = query_prefix(query_id)
    return f"{prefix}{batch_id}-{run_id}-{task}", prefix


def transactional_conf(options: SinkOptions, transactional_id: str) -> dict[str, str]:
    """A task's producer config: the sink's, with its transactional id and 2PC."""
    conf = options.client_conf()
    conf["transactional.id"] = transactional_id
    conf[_TWO_PHASE_CONFIG] = "true"
    return conf


def write_transaction(
    options: SinkOptions,
    batches: Iterator[pa.RecordBatch],
    write_id: str | None,
    produce_all: Callable[[Producer, SinkOptions, Iterator[pa.RecordBatch]], WriteStats],
) -> WriteStats:
    """Write ``batches`` (through ``produce_all``, writer.py's produce loop) in a
    transaction of this task's own and prepare it."""
    first = next((b for b in batches if b.num_rows), None)
    txn_id, prefix = task_transactional_id(write_id)
    if first is None:
        return WriteStats(prefix=prefix)
    from sparklog.client import Producer

    producer = Producer(transactional_conf(options, txn_id))
    began = False
    try:
        producer.init_transactions()
        producer.begin_transaction()
        began = True
        stats = produce_all(producer, options, _chain(first, batches))
        state = producer.prepare_transaction()
    except BaseException:
        if began:
            try:
                producer.abort_transaction(10)
            except Exception:
                log.warning("could not abort transaction %s (the orphan scan will)", txn_id,
                            exc_info=True)
        raise
    finally:
        producer.close(0)
    stats.prepared = PreparedTxn(txn_id, state.producer_id, state.producer_epoch)
    stats.prefix = prefix
    return stats


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def resolve_exactly_once(options: SinkOptions) -> bool:
    """Whether the write runs exactly-once: the option 'exactlyOnce' when set, else whether
    the brokers serve two-phase-commit transactions (InitProducerId v6, EndTxn and
    ListTransactions advertised, and ``transaction.two.phase.commit.enable`` on)."""
    if options.exactly_once is False:
        return False
    from sparklog.client import AdminClient

    with AdminClient({"bootstrap.servers": options.bootstrap_servers}) as admin:
        apis = (admin.supports(_INIT_PRODUCER_ID, 6) and admin.supports(_END_TXN)
                and admin.supports(_LIST_TRANSACTIONS))
        enabled = False
        if apis:
            node = admin.describe_cluster().brokers[0].node_id
            entry = admin.describe_configs(str(node), "broker",
                                           keys=[_TWO_PHASE_CONFIG]).get(_TWO_PHASE_CONFIG)
            enabled = entry is not None and str(entry.value).lower() == "true"
    if apis and enabled:
        return True
    why = ("the brokers do not serve Kafka transactions with two-phase commit (KIP-939)"
           if not apis else f"the brokers have {_TWO_PHASE_CONFIG}=false")
    if options.exactly_once:
        raise OptionError(
            f"Invalid option 'exactlyOnce' = 'true': {why}. Fix: set "
            f"{_TWO_PHASE_CONFIG}=true on every broker, or .option('exactlyOnce', 'false') "
            "for at-least-once writes."
        )
    log.warning("sparklog sink: at-least-once, since %s", why)
    return False
