"""How much of the backlog one micro-batch admits: pure arithmetic over offset maps.

Three limits, combinable (the smallest end offset wins per partition):

- ``maxOffsetsPerTrigger``: split across partitions in proportion to each one's backlog, as
  Spark's Kafka source does (a share below one offset is rounded up so small partitions are
  never starved), except that the rounding remainder is handed out too, so a full trigger
  admits exactly the limit instead of leaving a few offsets for an extra micro-batch.
- ``maxBytesPerTrigger``: exact, counted in record-batch bytes as stored in the log. The
  byte budget is split in proportion to backlog too, each partition admits whole batches up to
  its share, left-over budget goes to partitions that still have data, and if not even one
  batch fits (one batch bigger than the whole budget) that single batch is admitted so the
  query always progresses. Measuring needs the log, so it is passed in as ``measure``.
- ``minOffsetsPerTrigger`` + ``maxTriggerDelay``: skip triggers until enough offsets have
  arrived or the delay since the last batch has passed (``MinOffsetsGate``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from sparklog.spark.offsets import PartitionOffsets, TopicPartitionKey

__all__ = ["rate_limit", "admit_bytes", "MinOffsetsGate", "Measure", "backlog"]

# measure(tp, start, end, budget, force) -> (new_end, bytes_used): the largest end <= `end`
# such that the batches in [start, new_end) fit in `budget` bytes; with force=True at least
# one batch even when it alone exceeds the budget.
Measure = Callable[[TopicPartitionKey, int, int, int, bool], tuple[int, int]]


def backlog(start: Mapping[TopicPartitionKey, int], latest: Mapping[TopicPartitionKey, int]) -> int:
    """Offsets available after ``start`` (partitions new in ``latest`` count from 0)."""
    return sum(max(0, end - start.get(tp, 0)) for tp, end in latest.items())


def rate_limit(
    start: Mapping[TopicPartitionKey, int],
    latest: Mapping[TopicPartitionKey, int],
    max_offsets: int,
) -> PartitionOffsets:
    """End offsets admitting about ``max_offsets`` offsets in total (Spark's proration)."""
    sizes = {tp: end - start[tp] for tp, end in latest.items() if tp in start and end > start[tp]}
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    shares: dict[TopicPartitionKey, int] = {}
    fractions: dict[TopicPartitionKey, float] = {}
    for tp, size in sizes.items():
        prorate = max_offsets * (size / total)
        shares[tp] = min(size, math.ceil(prorate) if prorate < 1 else math.floor(prorate))
        fractions[tp] = prorate - math.floor(prorate)
    # Spark stops at the rounded-down shares, which leaves a few offsets over and costs a
    # whole extra micro-batch for them; hand the rounding remainder out instead
    # (largest fraction first), so a full trigger admits exactly max_offsets.
    left = max_offsets - sum(shares.values())
    for tp in sorted(fractions, key=lambda k: (-fractions[k], k)):
        if left <= 0:
            break
        if shares[tp] < sizes[tp]:
            shares[tp] += 1
            left -= 1
    out: PartitionOffsets = {}
    for tp, end in latest.items():
        out[tp] = start[tp] + shares[tp] if tp in shares else end
    return out


def admit_bytes(
    start: Mapping[TopicPartitionKey, int],
    latest: Mapping[TopicPartitionKey, int],
    max_bytes: int,
    measure: Measure,
) -> PartitionOffsets:
    """End offsets whose record batches add up to at most ``max_bytes`` (see module doc)."""
    out: PartitionOffsets = dict(latest)
    pending = sorted(tp for tp, end in latest.items() if tp in start and end > start[tp])
    for tp in pending:
        out[tp] = start[tp]
    if not pending:
        return out
    total_backlog = sum(latest[tp] - start[tp] for tp in pending)
    remaining = max_bytes
    # pass 1: proportional shares
    for tp in pending:
        share = max_bytes * (latest[tp] - start[tp]) // total_backlog
        if share <= 0:
            continue
        new_end, used = measure(tp, out[tp], latest[tp], min(share, remaining), False)
        out[tp], remaining = new_end, remaining - used
    # pass 2: hand what is left to partitions that still have data, in order
    for tp in pending:
        if remaining <= 0:
            break
        if out[tp] < latest[tp]:
            new_end, used = measure(tp, out[tp], latest[tp], remaining, False)
            out[tp], remaining = new_end, remaining - used
    # progress guarantee: one batch bigger than the whole budget is still admitted alone
    if all(out[tp] == start[tp] for tp in pending):
        tp = pending[0]
        out[tp], _ = measure(tp, start[tp], latest[tp], max_bytes, True)
    return out


class MinOffsetsGate:
    """``minOffsetsPerTrigger``/``maxTriggerDelay``: decides whether a trigger runs a batch.

    The clock starts when the gate is created (the query's start), so a query that starts on
    a nearly idle topic waits for enough data rather than running a tiny first batch.
    """

    def __init__(self, min_offsets: int, max_delay_ms: int, now_ms: int) -> None:
        self.min_offsets = min_offsets
        self.max_delay_ms = max_delay_ms
        self.last_trigger_ms = now_ms

    def should_run(self, available: int, now_ms: int) -> bool:
        if available <= 0:
            return False
        if available >= self.min_offsets or now_ms - self.last_trigger_ms >= self.max_delay_ms:
            self.last_trigger_ms = now_ms
            return True
        return False
