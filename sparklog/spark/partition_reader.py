"""Executor side (and the driver, for micro-batches it reads itself): read a task's offset
ranges (one, or a group of small ones) as Arrow batches.

Fetchers are cached per worker process, keyed by their config (``ClientCache``): a
micro-batch does not pay connection set-up and metadata again. Each fetch comes back from
the client as one Arrow RecordBatch already in the exact Arrow schema Spark expects for the
source's own schema, so the rows pass through untouched (no Python object per row, no cast);
only a schema the user gave differently is cast.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from sparklog.protocol.errors import OffsetOutOfRangeError
from sparklog.spark.client_cache import ClientCache
from sparklog.spark.dataloss import report_data_loss
from sparklog.spark.options import SourceOptions
from sparklog.spark.planning import OffsetRange

if TYPE_CHECKING:
    from sparklog.client import ArrowFetcher

log = logging.getLogger(__name__)

__all__ = ["read_ranges"]


def _new_fetcher(conf: dict[str, str]) -> ArrowFetcher:
    from sparklog.client import ArrowFetcher

    return ArrowFetcher(conf)


_FETCHERS: ClientCache[ArrowFetcher] = ClientCache(_new_fetcher)

# Added to a partition's estimated bytes left when asking for them: the estimate is from
# the decoded rows seen so far, and the batch holding a range's last offset is whole.
_SLACK_BYTES = 64 * 2**10


def _log_start(conf: dict[str, str], topic: str, partition: int, isolation: str) -> int:
    from sparklog.client import AdminClient, TopicPartition

    admin = AdminClient(dict(conf))
    try:
        tp = TopicPartition(topic, partition)
        return int(admin.list_offsets({tp: -2}, isolation_level=isolation)[tp][0])
    finally:
        admin.close()


def read_ranges(
    ranges: Sequence[OffsetRange], options: SourceOptions, target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """Yield the records of every range (offsets ``[start, end)``) as batches of ``target``.

    The ranges are read together: each round sends one multi-partition Fetch per leader
    broker for every partition still being read (``ArrowFetcher.fetch_ahead``) and yields
    the round's rows as one batch (partition after partition, each in offset order), so
    per-partition order holds while partitions interleave. The next round is sent before
    this round's rows are yielded: the client's loop thread fetches and decodes it while
    Spark takes the rows. Two ranges of the same partition are read one after the other.
    Partitions that got rows move to the back of the next round's request, so a fetch
    budget used up by the first partitions does not starve the rest. Once a round has
    returned rows, the bytes per row seen so far estimate what each range has left: each
    partition asks for about that much (plus ``_SLACK_BYTES``), since a Fetch cannot say
    where to stop and the data past a range's end would take the budget of the partitions
    after it (a task of 100 ranges of 2 500 offsets in partitions of 10 000 took 25 rounds
    instead of 9); and a request lists only the partitions the budget can serve (twice
    ``fetch_bytes`` of those estimates): the broker fills partitions in order and answers
    the rest empty, and each listed partition costs the broker a log lookup and both sides
    a response entry. A partition asked for too little gets nothing but keeps its place at
    the front, where the broker's first batch of a request is always whole. A round in
    which no partition moves lists them all again; three such rounds in a row and the
    ranges left are treated as done (only control batches, aborted data or compacted-away
    offsets remained, or the data is not readable yet under read_committed).
    """
    from sparklog.client import FetchAhead, FetchRange, TopicPartition

    conf = options.client_conf()
    fetcher = _FETCHERS.get(conf)
    queued: dict[TopicPartition, deque[OffsetRange]] = {}
    for r in ranges:
        if r.size:
            queued.setdefault(TopicPartition(r.topic, r.partition), deque()).append(r)
    # per partition: the range being read and the next offset to fetch
    active = {tp: (rs[0], rs[0].start) for tp, rs in queued.items()}

    rows_seen = bytes_seen = 0  # the rows yielded so far and their size

    def send(every: bool) -> tuple[FetchAhead, bool]:
        """The next round's request (all active partitions when ``every``, else those the
        budget can serve) and whether it lists them all."""
        want = []
        room = 2 * options.fetch_bytes
        for tp, (r, pos) in active.items():
            if not rows_seen:
                want.append(FetchRange(tp, pos, r.end))
                continue
            left = (r.end - pos) * bytes_seen // rows_seen  # about what is left to read
            want.append(FetchRange(tp, pos, r.end, min(left + _SLACK_BYTES, options.fetch_bytes)))
            room -= left
            if room <= 0 and not every:
                break
        ahead = fetcher.fetch_ahead(
            want,
            isolation_level=options.isolation_level,
            timeout_ms=options.poll_timeout_ms,
            include_headers=options.include_headers,
            max_bytes=options.fetch_bytes,
        )
        return ahead, len(want) == len(active)

    empty_rounds = 0
    ahead, listed_all = send(True) if active else (None, True)
    while ahead is not None:
        try:
            results = ahead.result()
        except Exception:
            _FETCHERS.drop(conf)  # a broken connection must not poison the next task
            raise
        moved: list[TopicPartition] = []
        rows: list[pa.RecordBatch] = []
        for tp, got in results.items():
            r, pos = active[tp]
            if isinstance(got, OffsetOutOfRangeError):
                new_pos = _skip_lost(conf, options, r, pos, got)
            elif got.batch.num_rows:
                batch = got.batch
                rows.append(batch)
                new_pos = batch.column("offset")[batch.num_rows - 1].as_py() + 1
            else:
                # No records: the client says how far the log was scanned (past markers,
                # aborted data, compacted-away offsets).
                new_pos = max(pos, got.next_offset)
            if new_pos > pos:
                moved.append(tp)
            active[tp] = (r, new_pos)
        for tp in moved:
            r, pos = active.pop(tp)
            if pos < r.end:
                active[tp] = (r, pos)  # to the back of the next request
                continue
            queued[tp].popleft()
            if queued[tp]:
                active[tp] = (queued[tp][0], queued[tp][0].start)
        if moved:
            empty_rounds = 0
        elif listed_all:
            empty_rounds += 1
        rows_seen += sum(b.num_rows for b in rows)
        bytes_seen += sum(b.nbytes for b in rows)
        ahead = None
        if active and empty_rounds < 3:
            ahead, listed_all = send(not moved)
        if rows:
            # one Arrow batch per round: each batch handed to Spark has a fixed cost
            batch = rows[0] if len(rows) == 1 else pa.concat_batches(rows)
            yield batch if batch.schema == target else batch.cast(target)
    if active:
        log.info(
            "no records in %s after %d fetches; ranges treated as done",
            ", ".join(f"{r.topic}-{r.partition} [{pos}, {r.end})" for r, pos in active.values()),
            empty_rounds,
        )


def _skip_lost(
    conf: dict[str, str],
    options: SourceOptions,
    r: OffsetRange,
    pos: int,
    err: OffsetOutOfRangeError,
) -> int:
    """Where to go on after ``pos`` fell below the log start (or raise, per
    ``failOnDataLoss``)."""
    log_start = err.log_start_offset
    if log_start is None or log_start < 0:
        log_start = _log_start(conf, r.topic, r.partition, options.isolation_level)
    if log_start <= pos:
        raise err
    report_data_loss(
        options.fail_on_data_loss,
        f"Cannot fetch offset {pos} of {r.topic}-{r.partition}: the log now starts at "
        f"{log_start}, so offsets [{pos}, {min(log_start, r.end)}) are gone.",
    )
    return log_start
