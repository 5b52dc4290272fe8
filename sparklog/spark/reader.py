"""Batch and streaming readers of the "sparklog" source.

The driver side (``partitions``, ``initialOffset``, ``latestOffset``, ``commit``) only talks
offsets, through ``OffsetReader``; the executor side (``read``) only reads the ranges it is
handed, through ``read_planned`` (``segment_reads``: the bucket for ranges in uploaded
segments, ``read_ranges`` for the rest). That is the split of Spark's Kafka connector
(``KafkaMicroBatchStream`` vs ``KafkaBatchPartitionReader``), and it keeps ``read`` stateless
as pyspark requires.

Offsets: ``{"topic": {"partition": next_offset}}`` (see ``offsets``). A micro-batch covers
``[start, end)``. Progress lives in Spark's checkpoint only: ``groupId`` commits are a
courtesy for lag tools and are never read back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from sparklog.spark.admission import MinOffsetsGate, admit_bytes, backlog, rate_limit
from sparklog.spark.dataloss import report_data_loss
from sparklog.spark.offset_reader import OffsetReader
from sparklog.spark.offsets import PartitionOffsets, from_json_dict, to_json_dict
from sparklog.spark.options import OptionError, SourceOptions
from sparklog.spark.partition_reader import read_ranges
from sparklog.spark.planning import OffsetRange, RangeGroup, plan_ranges, plan_tasks
from sparklog.spark.schema import arrow_schema
from sparklog.spark.segment_reads import BucketPlanner, read_planned

log = logging.getLogger(__name__)

__all__ = ["SparklogBatchReader", "SparklogStreamReader", "stream_reader"]

try:
    # pyspark's own adapter for simple readers is the only stream reader whose rows may travel
    # with the plan: its runner sends what getCache() returns to the JVM, which then answers
    # the micro-batch's task from memory instead of a Python worker. Private API, pinned by
    # pyproject's pyspark range; without it every micro-batch is read by executors.
    from pyspark.sql.datasource_internal import _SimpleStreamReaderWrapper
except ImportError:  # pragma: no cover - other pyspark versions
    _SimpleStreamReaderWrapper = None  # type: ignore[assignment,misc]

# A micro-batch that the driver reads must also fit in the driver: past this many bytes the
# driver gives up and leaves the batch to an executor task.
DRIVER_READ_MAX_BYTES = 64 * 2**20


def _clamp_to_log_start(
    offsets: OffsetReader, start: PartitionOffsets, end: PartitionOffsets
) -> PartitionOffsets:
    """Move starts that retention/delete_records already passed to the log start (or fail)."""
    wanted = [tp for tp in end if tp in start and end[tp] > start[tp]]
    if not wanted:
        return start
    earliest = offsets.earliest(wanted)
    out = dict(start)
    for tp in wanted:
        log_start = earliest.get(tp, -1)
        if log_start > start[tp]:
            report_data_loss(
                offsets.options.fail_on_data_loss,
                f"Cannot read offsets [{start[tp]}, {min(log_start, end[tp])}) of "
                f"{tp[0]}-{tp[1]}: the log now starts at offset {log_start}.",
            )
            out[tp] = min(log_start, end[tp])
    return out


def _plan_tasks(
    offsets: OffsetReader, bucket: BucketPlanner, start: PartitionOffsets, end: PartitionOffsets
) -> list[OffsetRange | RangeGroup]:
    """The executor tasks of a read: ranges in uploaded segments read from the bucket, the
    rest from brokers; grouped by size and by their leader's host."""
    route = bucket.route(offsets, [tp for tp in end if tp in start and end[tp] > start[tp]])
    return plan_tasks(
        start, end, offsets.options, offsets.leader_hosts({tp[0] for tp in end}), route
    )


def _read_task(
    partition: InputPartition, options: SourceOptions, target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The rows of one planned task: a range, or a group of ranges read together."""
    if isinstance(partition, RangeGroup):
        return read_planned(partition.ranges, options, target)
    if isinstance(partition, OffsetRange):
        return read_planned((partition,), options, target)
    return iter(())  # pyspark's placeholder for "no ranges" in a batch read


class SparklogBatchReader(DataSourceReader):
    """``spark.read.format("sparklog")``: one bounded read, planned once on the driver."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.target = arrow_schema(schema)
        self.offsets = OffsetReader(options)
        self.bucket = BucketPlanner(options)

    def partitions(self) -> Sequence[InputPartition]:
        try:
            tps = self.offsets.partitions()
            start = self.offsets.resolve(
                self.options.starting, tps, default="earliest", option="startingOffsets"
            )
            end = self.offsets.resolve(
                self.options.ending, tps, default="latest", option="endingOffsets"
            )
            for tp in sorted(start):
                if tp in end and start[tp] > end[tp]:
                    raise OptionError(
                        f"The starting offset {start[tp]} of {tp[0]}-{tp[1]} is after its "
                        f"ending offset {end[tp]}. Fix: check 'startingOffsets'/"
                        "'startingTimestamp' and 'endingOffsets'/'endingTimestamp' (or the "
                        "topic was deleted and recreated)."
                    )
            start = _clamp_to_log_start(self.offsets, start, end)
            return _plan_tasks(self.offsets, self.bucket, start, end)
        finally:
            self.offsets.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_task(partition, self.options, self.target)


class SparklogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("sparklog")`` with admission control and AvailableNow."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.target = arrow_schema(schema)
        self.offsets = OffsetReader(options)
        self.bucket = BucketPlanner(options)
        self._gate: MinOffsetsGate | None = None
        self._available_now: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None
        self._group_committed: PartitionOffsets | None = None

    def __getstate__(self) -> dict:
        # Executors only need the options; driver state stays on the driver.
        return {
            "options": self.options,
            "target": self.target,
            "offsets": self.offsets,
            "bucket": BucketPlanner(self.options),
            "_gate": None,
            "_available_now": None,
            "_latest": None,
            "_group_committed": None,
        }

    # ------------------------------------------------------------------ driver

    def initialOffset(self) -> dict:
        tps = self.offsets.partitions()
        start = self.offsets.resolve(
            self.options.starting, tps, default="latest", option="startingOffsets"
        )
        log.info("initial offsets %s", start)
        return to_json_dict(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        # Spark round-trips this value opaquely and only built-in ReadLimit types exist, so it
        # just says "limits are on"; latestOffset applies every configured limit itself.
        o = self.options
        if o.max_offsets_per_trigger is not None:
            return ReadMaxRows(o.max_offsets_per_trigger)
        if o.max_bytes_per_trigger is not None:
            return ReadMaxBytes(o.max_bytes_per_trigger)
        if o.min_offsets_per_trigger is not None:
            return ReadMinRows(o.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self.offsets.latest(self.offsets.partitions())
        log.info("Trigger.AvailableNow target offsets %s", self._available_now)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        start_offsets = from_json_dict(start)
        # Spark plans a batch only after the previous one committed, so `start` is fully
        # processed: report it to the group now (commit() only runs once a *later* batch has
        # data, which would leave the group one batch behind on a quiet or finished stream).
        self._commit_group(start_offsets)
        if self._available_now is not None:
            latest = dict(self._available_now)
        else:
            latest = self.offsets.latest(self.offsets.partitions(max_age_s=1.0))
        self._latest = latest
        self.offsets.check_regressions(start_offsets, latest)

        gone = sorted(tp for tp in start_offsets if tp not in latest)
        if gone and self._available_now is None:
            report_data_loss(
                self.options.fail_on_data_loss,
                f"Partitions {gone} are gone (topic deleted or unsubscribed).",
            )
        base = {tp: off for tp, off in start_offsets.items() if tp in latest}
        new = [tp for tp in latest if tp not in base]
        if new:
            base.update(self.offsets.earliest(new))
        end = dict(latest)
        if not isinstance(limit, ReadAllAvailable):
            end = self._admit(base, latest)
            if end is None:
                return start
        for tp, off in base.items():  # never move a partition backwards
            if tp in end and end[tp] < off and latest[tp] >= off:
                end[tp] = off
        return to_json_dict(end)

    def _admit(self, base: PartitionOffsets, latest: PartitionOffsets) -> PartitionOffsets | None:
        o = self.options
        if o.min_offsets_per_trigger is not None and self._available_now is None:
            now = int(time.time() * 1000)
            if self._gate is None:
                self._gate = MinOffsetsGate(o.min_offsets_per_trigger, o.max_trigger_delay_ms, now)
            if not self._gate.should_run(backlog(base, latest), now):
                return None
        end = dict(latest)
        if o.max_offsets_per_trigger is not None:
            end = rate_limit(base, end, o.max_offsets_per_trigger)
        if o.max_bytes_per_trigger is not None:
            end = admit_bytes(base, end, o.max_bytes_per_trigger, self.offsets.measure_bytes)
        return end

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else to_json_dict(self._latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        start_offsets = from_json_dict(start)
        end_offsets = from_json_dict(end)
        new = [tp for tp in end_offsets if tp not in start_offsets]
        if new:
            earliest = self.offsets.earliest(new)
            for tp in new:
                if earliest[tp] > 0:
                    report_data_loss(
                        self.options.fail_on_data_loss,
                        f"Added partition {tp[0]}-{tp[1]} starts from offset {earliest[tp]} "
                        "instead of 0.",
                    )
            start_offsets.update(earliest)
        start_offsets = _clamp_to_log_start(self.offsets, start_offsets, end_offsets)
        return self._plan(start, end, start_offsets, end_offsets)

    def _plan(
        self, start: dict, end: dict, start_offsets: PartitionOffsets, end_offsets: PartitionOffsets
    ) -> list[InputPartition]:
        return list(_plan_tasks(self.offsets, self.bucket, start_offsets, end_offsets))

    def commit(self, end: dict) -> None:
        self._commit_group(from_json_dict(end))

    def _commit_group(self, offsets: PartitionOffsets) -> None:
        group = self.options.group_id
        if not group or not offsets or offsets == self._group_committed:
            return
        try:
            self.offsets.commit_group(group, offsets)
            self._group_committed = dict(offsets)
        except Exception:
            # Lag reporting must never stop the query: the checkpoint holds the progress.
            log.warning("could not commit offsets of group %r", group, exc_info=True)

    def stop(self) -> None:
        self.offsets.close()

    # ------------------------------------------------------------------ executor

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_task(partition, self.options, self.target)


if _SimpleStreamReaderWrapper is not None:

    class _DriverReadingStreamReader(SparklogStreamReader, _SimpleStreamReaderWrapper):
        """Small micro-batches are read on the driver and shipped with the plan.

        A micro-batch of a few hundred records costs more to hand to a Python worker on an
        executor (task launch, worker round trip: ~100 ms measured) than to fetch. With
        at most ``driverReadMaxOffsets`` offsets, ``partitions`` plans one ``RangeGroup`` and
        ``getCache`` (which pyspark's runner calls right after it) fetches the rows, so Spark
        serves the batch from memory. Bigger batches, and small ones the driver could not
        hold, are read by executors as usual (a ``RangeGroup`` is then one task). A replayed
        batch after a restart is planned, and read, again. pyspark never asks a reader of
        this kind for ``reportLatestOffset`` (it reports latest offsets only for readers
        without shipped rows): set ``driverReadMaxOffsets`` to 0 to get them.
        """

        @property
        def simple_reader(self) -> SparklogStreamReader:  # what pyspark's runner delegates to
            return self

        def __init__(self, options: SourceOptions, schema: StructType) -> None:
            super().__init__(options, schema)
            self._shipped: tuple[dict, dict, tuple[OffsetRange, ...]] | None = None

        def __getstate__(self) -> dict:
            return {**super().__getstate__(), "_shipped": None}

        def _plan(
            self,
            start: dict,
            end: dict,
            start_offsets: PartitionOffsets,
            end_offsets: PartitionOffsets,
        ) -> list[InputPartition]:
            self._shipped = None
            ranges = plan_ranges(start_offsets, end_offsets)
            if not ranges or sum(r.size for r in ranges) > self.options.driver_read_max_offsets:
                return super()._plan(start, end, start_offsets, end_offsets)
            self._shipped = (start, end, tuple(ranges))
            return [RangeGroup(tuple(ranges))]

        def getCache(self, start: dict, end: dict) -> Iterator[pa.RecordBatch] | None:
            shipped, self._shipped = self._shipped, None
            if shipped is None or shipped[0] != start or shipped[1] != end:
                return None
            batches: list[pa.RecordBatch] = []
            size = 0
            for batch in read_ranges(shipped[2], self.options, self.target):
                size += batch.nbytes
                if size > DRIVER_READ_MAX_BYTES:
                    log.info("micro-batch %s..%s is too big for the driver", start, end)
                    return None
                batches.append(batch)
            return iter(batches)


def stream_reader(options: SourceOptions, schema: StructType) -> SparklogStreamReader:
    """The stream reader for ``options``: the driver-reading kind unless turned off."""
    if _SimpleStreamReaderWrapper is not None and options.driver_read_max_offsets > 0:
        return _DriverReadingStreamReader(options, schema)
    return SparklogStreamReader(options, schema)
