"""Driver-side offset management: which partitions exist, and their offsets.

Everything the driver needs goes through sparklog's AdminClient (Metadata + ListOffsets: one
cheap round trip per question), never through a consumer, so ``latestOffset`` stays fast on
an idle stream. The executors read data; this module never does (except that measuring a
byte budget has to look at batch sizes, through an ArrowFetcher: see ``measure_bytes``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sparklog.spark.dataloss import report_data_loss
from sparklog.spark.offsets import PartitionOffsets, TopicPartitionKey
from sparklog.spark.options import EARLIEST, LATEST, OffsetBound, OptionError, SourceOptions

if TYPE_CHECKING:
    from sparklog.client import AdminClient, ArrowFetcher

log = logging.getLogger(__name__)

__all__ = ["OffsetReader"]


class OffsetReader:
    """Answers offset questions for one source; holds one AdminClient (and, for byte
    budgets, one ArrowFetcher), created lazily."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._admin: AdminClient | None = None
        self._fetcher: ArrowFetcher | None = None
        self._discovered: tuple[float, list[TopicPartitionKey]] | None = None

    # ---------------------------------------------------------------- connections

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            from sparklog.client import AdminClient

            self._admin = AdminClient(self.options.client_conf())
        return self._admin

    @property
    def fetcher(self) -> ArrowFetcher:
        if self._fetcher is None:
            from sparklog.client import ArrowFetcher

            self._fetcher = ArrowFetcher(self.options.client_conf())
        return self._fetcher

    def close(self) -> None:
        for client in (self._admin, self._fetcher):
            if client is not None:
                try:
                    client.close()
                except Exception:  # closing is best effort
                    log.debug("error closing client", exc_info=True)
        self._admin = self._fetcher = None

    def __getstate__(self) -> dict:
        # Spark pickles readers into its tasks: connections stay behind.
        return {"options": self.options, "_admin": None, "_fetcher": None, "_discovered": None}

    # ---------------------------------------------------------------- partitions

    def partitions(self, max_age_s: float = 0.0) -> list[TopicPartitionKey]:
        """The partitions the subscription covers (pattern/new partitions included).

        ``max_age_s``: reuse a discovery at most that old. An idle stream asks for the latest
        offsets every few milliseconds; the topic list does not need a Metadata round trip
        each time (Kafka clients refresh it every ``metadata.max.age.ms`` = 5 minutes; new
        partitions still show up within a second here).
        """
        sub = self.options.subscription
        if sub.kind == "assign":
            return list(sub.assignment)
        now = time.monotonic()
        if self._discovered is not None and now - self._discovered[0] <= max_age_s:
            return list(self._discovered[1])
        # a topic list asks for those topics only; a pattern has to see every topic
        named = sub.topics if sub.kind == "subscribe" else None
        topics = self._with_retries(self.admin.list_topics, None, named)
        from sparklog.client import TopicPartition

        # TopicPartition keys (equal to the plain tuples): ``_list`` then sends them as they
        # are, with no new key object per partition and question
        out: list[TopicPartitionKey] = []
        for name, meta in topics.items():
            if getattr(meta, "is_internal", False) and sub.kind == "subscribePattern":
                continue
            if sub.matches(name):
                out.extend(TopicPartition(name, int(p)) for p in meta.partitions)
        out.sort()
        self._discovered = (now, out)
        return list(out)

    def leader_hosts(self, topics: Iterable[str]) -> dict[TopicPartitionKey, str]:
        """The host of each partition's leader, for the plan's locality ({} when the
        metadata cannot be had: locality is a hint, never a reason to fail a plan)."""
        try:
            metas = self.admin.describe_topics(sorted(set(topics)))
            hosts = {b.node_id: b.host for b in self.admin.describe_cluster().brokers}
        except Exception:
            log.debug("no leader hosts for the plan", exc_info=True)
            return {}
        return {
            (name, p): hosts[pm.leader]
            for name, tm in metas.items()
            for p, pm in tm.partitions.items()
            if pm.leader in hosts
        }

    # ---------------------------------------------------------------- offsets

    def _with_retries(self, fn, *args):  # noqa: ANN001, ANN202
        attempts = self.options.fetch_offset_num_retries + 1
        for attempt in range(attempts):
            try:
                return fn(*args)
            except Exception:
                if attempt + 1 >= attempts:
                    raise
                log.warning("offset request failed, retrying", exc_info=True)
                time.sleep(self.options.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def _list(self, specs: dict[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        if not specs:
            return {}
        from sparklog.client import TopicPartition

        request = {
            tp if type(tp) is TopicPartition else TopicPartition(tp[0], tp[1]): spec
            for tp, spec in specs.items()
        }
        result = self._with_retries(
            lambda: self.admin.list_offsets(request, isolation_level=self.options.isolation_level)
        )
        return {tp: off_ts[0] for tp, off_ts in result.items()}

    def earliest(self, tps: Iterable[TopicPartitionKey]) -> PartitionOffsets:
        return self._list(dict.fromkeys(tps, EARLIEST))

    def latest(self, tps: Iterable[TopicPartitionKey]) -> PartitionOffsets:
        return self._list(dict.fromkeys(tps, LATEST))

    def for_timestamps(
        self, timestamps: dict[TopicPartitionKey, int], *, option: str, strategy: str
    ) -> PartitionOffsets:
        """First offset whose timestamp >= the given one; no such offset -> per ``strategy``."""
        found = self._list(timestamps)
        missing = [tp for tp in timestamps if found.get(tp, -1) < 0]
        if missing:
            if strategy == "error":
                raise OptionError(
                    f"No offset matched the timestamp given by '{option}' for partitions "
                    f"{sorted(missing)} (no record that new). Fix: use an earlier timestamp, or "
                    "set 'startingOffsetsByTimestampStrategy' to 'latest' to start those "
                    "partitions at their latest offset."
                )
            found.update(self.latest(missing))
        return found

    def resolve(
        self,
        bound: OffsetBound | None,
        tps: list[TopicPartitionKey],
        *,
        default: str,
        option: str,
    ) -> PartitionOffsets:
        """Concrete offsets for ``tps`` from a starting/ending bound (None -> ``default``)."""
        kind = bound.kind if bound is not None else default
        if kind == "earliest":
            return self.earliest(tps)
        if kind == "latest":
            return self.latest(tps)
        assert bound is not None
        # No offset at/after an ending timestamp means "read to the end" (Spark's rule); for a
        # starting timestamp it is up to startingOffsetsByTimestampStrategy.
        strategy = (
            "latest" if option.startswith("ending") else self.options.starting_by_timestamp_strategy
        )
        if kind == "timestamp":
            assert bound.timestamp is not None
            return self.for_timestamps(
                dict.fromkeys(tps, bound.timestamp), option=option, strategy=strategy
            )
        given = {(t, p): v for t, ps in bound.offsets.items() for p, v in ps.items()}
        unknown = sorted(set(given) - set(tps))
        if unknown:
            raise OptionError(
                f"Option '{option}' names partitions that do not exist or are not subscribed: "
                f"{unknown}. Fix: list only partitions of the subscribed topics "
                f"(currently {tps})."
            )
        missing = sorted(set(tps) - set(given))
        if kind == "timestamps":
            if missing:
                raise OptionError(
                    f"Option '{option}' has no timestamp for partitions {missing}. "
                    "Fix: give a timestamp for every subscribed partition."
                )
            return self.for_timestamps(given, option=option, strategy=strategy)
        if missing:
            raise OptionError(
                f"Option '{option}' has no offset for partitions {missing}. Fix: give an "
                "offset (or -2 for earliest, -1 for latest) for every subscribed partition."
            )
        out = {tp: off for tp, off in given.items() if off >= 0}
        out.update(self.earliest([tp for tp, off in given.items() if off == EARLIEST]))
        out.update(self.latest([tp for tp, off in given.items() if off == LATEST]))
        return out

    # ---------------------------------------------------------------- bytes

    def measure_bytes(
        self, tp: TopicPartitionKey, start: int, end: int, budget: int, force: bool
    ) -> tuple[int, int]:
        """End offset and size of the whole record batches from ``start`` that fit ``budget``.

        Reads batch headers only (offsets and lengths), through the fetcher's raw fetch.
        """
        from sparklog.client import TopicPartition

        pos, used = start, 0
        while pos < end:
            sizes = self.fetcher.batch_sizes(
                TopicPartition(tp[0], tp[1]), pos, max_bytes=max(budget - used, 1)
            )
            if not sizes:
                break
            progressed = False
            for next_offset, size in sizes:
                if next_offset <= pos:
                    continue
                if used + size > budget and not (force and used == 0):
                    return pos, used
                pos, used, progressed = min(next_offset, end), used + size, True
                if pos >= end:
                    break
            if not progressed:
                break
        return pos, used

    # ---------------------------------------------------------------- groups

    def commit_group(self, group: str, offsets: PartitionOffsets) -> None:
        from sparklog.client import TopicPartition

        self.admin.alter_consumer_group_offsets(
            group, {TopicPartition(t, p): off for (t, p), off in offsets.items()}
        )

    def check_regressions(self, start: PartitionOffsets, latest: PartitionOffsets) -> None:
        """A partition's end moving below where the query stands means it was recreated."""
        for tp, off in latest.items():
            if tp in start and off < start[tp]:
                report_data_loss(
                    self.options.fail_on_data_loss,
                    f"Partition {tp[0]}-{tp[1]}'s latest offset went back from {start[tp]} to "
                    f"{off} (was the topic deleted and recreated?).",
                )
