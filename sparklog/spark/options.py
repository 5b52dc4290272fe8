"""Options of the "sparklog" data source, parsed and validated up front.

The names are Spark's Kafka connector's (so ``format("kafka")`` can become
``format("sparklog")`` with the same options), plus a few of our own (``groupId``,
``maxBytesPerTrigger``, ``minRecordsPerPartition``: small topic-partitions grouped into
tasks of at least that many offsets, see ``planning``; ``storageReads`` with ``storage.url``
and ``storage.options.<key>``: tiered topics read from the bucket, see ``segment_reads``;
``exactlyOnce``: the sink's transactions, see ``sink_txn``). Everything is checked when the
data source is created rather than when the first micro-batch runs, and every error names
the option and says what to write instead: a streaming query that fails an hour in because
of a typo is the worst kind of failure.

Spark hands the options over in a case-insensitive map (keys lower-cased), so lookups here go
through lower-cased keys and messages use the documented spelling.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from sparklog.protocol.errors import SparklogError

__all__ = [
    "OptionError",
    "OffsetBound",
    "Subscription",
    "SourceOptions",
    "SinkOptions",
    "parse_source_options",
    "parse_sink_options",
    "parse_duration_ms",
    "check_common_options",
]

EARLIEST = -2
LATEST = -1


class OptionError(SparklogError, ValueError):
    """A data source option is missing, malformed, or conflicts with another one."""


# Canonical spelling of every option this source understands (looked up lower-cased).
SOURCE_OPTIONS = (
    "bootstrap.servers",
    "kafka.bootstrap.servers",
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "maxBytesPerTrigger",
    "minPartitions",
    "maxRecordsPerPartition",
    "minRecordsPerPartition",
    "failOnDataLoss",
    "includeHeaders",
    "isolation.level",
    "groupId",
    "groupIdPrefix",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "driverReadMaxOffsets",
    "storageReads",
    "storageReadBytes",
    "storage.url",
)
# 'storage.options.<key>' options go to the bucket's fsspec filesystem as <key>
STORAGE_OPTIONS_PREFIX = "storage.options."
SINK_OPTIONS = ("topic", "includeHeaders", "exactlyOnce", "bootstrap.servers",
                "kafka.bootstrap.servers")
_KNOWN = {name.lower(): name for name in SOURCE_OPTIONS + SINK_OPTIONS}

# Options Spark itself passes to sources/sinks (writeStream options, save(path) ...).
_SPARK_OWNED = {"path", "checkpointlocation", "queryname", "paths"}

_FORBIDDEN_CONSUMER = {
    "kafka.auto.offset.reset": "use the option 'startingOffsets' (earliest/latest/JSON) instead",
    "kafka.enable.auto.commit": (
        "the source never auto-commits; progress lives in the checkpoint. Set the option "
        "'groupId' to have each finished micro-batch's end offsets committed to a group"
    ),
    "kafka.key.deserializer": (
        "keys are always returned as binary; convert them with DataFrame operations "
        "(e.g. CAST(key AS STRING))"
    ),
    "kafka.value.deserializer": (
        "values are always returned as binary; convert them with DataFrame operations "
        "(e.g. CAST(value AS STRING) or from_json)"
    ),
    "kafka.interceptor.classes": "interceptors are not supported by the sparklog source",
}
_FORBIDDEN_PRODUCER = {
    "kafka.key.serializer": "write a binary or string 'key' column instead",
    "kafka.value.serializer": "write a binary or string 'value' column instead",
    "kafka.transactional.id": (
        "the sink gives each write task its own transactional id (option 'exactlyOnce'); "
        "remove it"
    ),
}

_DURATION_UNITS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "sec": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}
_DURATION_RE = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")


@dataclass(frozen=True)
class OffsetBound:
    """Where a read starts or ends, before it is resolved against the log.

    ``kind``: "earliest", "latest", "offsets" (per-partition JSON with -2 = earliest and
    -1 = latest allowed), "timestamp" (one timestamp for every partition) or "timestamps"
    (per-partition JSON of timestamps).
    """

    kind: Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    timestamp: int | None = None

    def describe(self) -> str:
        if self.kind in ("earliest", "latest"):
            return self.kind
        if self.kind == "timestamp":
            return f"timestamp {self.timestamp}"
        return json.dumps({t: {str(p): o for p, o in ps.items()} for t, ps in self.offsets.items()})


@dataclass(frozen=True)
class Subscription:
    """Which partitions a query reads: a topic list, a regex, or fixed partitions."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assignment: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            assert self.pattern is not None
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assignment)


# Bytes an executor asks for per Fetch unless 'kafka.max.partition.fetch.bytes' says
# otherwise (Kafka's 1 MiB default is for consumers polling many partitions). Measured with
# bench/spark_source.py on 2 cores: 1 MiB fetches cost twice the JVM and Python CPU per row
# of 4 MiB ones (fixed costs per Fetch and per Arrow batch on both sides of the worker
# socket), while 16-50 MiB ones stall the pipeline: the JVM idles while one huge batch is
# fetched and decoded, and the big buffers fall out of cache.
READ_FETCH_BYTES = 4 * 2**20
# a task reading the bucket asks for this much per ranged GET (and holds two such windows):
# each request costs CPU on both ends, so fewer, larger ones read faster (the broker's chunk
# cache reads runs of up to 16 MiB for the same reason)
STORAGE_READ_BYTES = 16 * 2**20

# Streaming micro-batches of at most this many offsets are read by the driver and handed to
# Spark with the plan, instead of by Python tasks on executors ('driverReadMaxOffsets').
DRIVER_READ_MAX_OFFSETS = 10_000

# Small offset ranges are grouped into input partitions of at least this many offsets
# ('minRecordsPerPartition'; 1 = one task per topic-partition, as in Spark's connector). A
# Python source task costs tens of milliseconds before it reads its first row; a task of this
# size reads for a few hundred milliseconds, so that cost stays small, and a read only gets
# fewer tasks than partitions when it has under this many offsets per partition.
MIN_RECORDS_PER_PARTITION = 250_000


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetBound | None  # None: the default (latest for streams, earliest for batch)
    ending: OffsetBound | None  # None: latest (batch only)
    starting_by_timestamp_strategy: Literal["error", "latest"] = "error"
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    max_bytes_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    min_records_per_partition: int = MIN_RECORDS_PER_PARTITION
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: Literal["read_uncommitted", "read_committed"] = "read_committed"
    group_id: str | None = None
    poll_timeout_ms: int = 120_000
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 10
    fetch_bytes: int = READ_FETCH_BYTES
    driver_read_max_offsets: int = DRIVER_READ_MAX_OFFSETS
    client_config: dict[str, str] = field(default_factory=dict)
    # 'storageReads': "auto" reads ranges in uploaded segments of tiered topics from the
    # bucket ('storage.url', else the brokers' remote.log.storage.url), "never" from brokers
    storage_reads: Literal["auto", "never"] = "auto"
    # 'storageReadBytes': bytes per ranged read of a segment object by a task
    storage_read_bytes: int = STORAGE_READ_BYTES
    storage_url: str | None = None
    storage_options: dict[str, str] = field(default_factory=dict)

    def client_conf(self) -> dict[str, str]:
        """The config dict for sparklog.client (Kafka names)."""
        conf = dict(self.client_config)
        conf["bootstrap.servers"] = self.bootstrap_servers
        return conf


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None
    include_headers: bool
    producer_config: dict[str, str]
    # 'exactlyOnce': None (not set) = when the brokers serve two-phase-commit transactions
    exactly_once: bool | None = None

    def client_conf(self) -> dict[str, str]:
        conf = {"acks": "all", "enable.idempotence": "true"}
        conf.update(self.producer_config)
        conf["bootstrap.servers"] = self.bootstrap_servers
        return conf


# --------------------------------------------------------------------------- helpers


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _err(option: str, value: object, problem: str, fix: str) -> OptionError:
    shown = repr(value) if value is not None else "(not set)"
    return OptionError(f"Invalid option '{option}' = {shown}: {problem}. Fix: {fix}.")


def _reject_present(opts: dict[str, str], names: tuple[str, ...], problem: str, fix: str) -> None:
    """Options that have no meaning here: the first one given is an error."""
    for name in names:
        if name.lower() in opts:
            raise _err(name, opts[name.lower()], problem, fix)


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    v = raw.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise _err(name, raw, "not a boolean", "use 'true' or 'false'")


def _int(opts: dict[str, str], name: str, *, minimum: int = 1) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise _err(name, raw, "not an integer", f"use a whole number >= {minimum}") from None
    if value < minimum:
        raise _err(name, raw, f"must be >= {minimum}", f"use a whole number >= {minimum}")
    return value


def _default(value: int | None, default: int) -> int:
    return default if value is None else value


def parse_duration_ms(text: str) -> int:
    """Spark's time strings ("15m", "30s", "100ms", "2h"; a bare number is milliseconds)."""
    m = _DURATION_RE.match(text.lower())
    if not m:
        raise ValueError(text)
    number, unit = int(m.group(1)), m.group(2) or "ms"
    if unit not in _DURATION_UNITS:
        raise ValueError(text)
    return int(number * _DURATION_UNITS[unit])


def _check_bootstrap(opts: dict[str, str]) -> str:
    plain = opts.get("bootstrap.servers")
    prefixed = opts.get("kafka.bootstrap.servers")
    if plain and prefixed and plain.strip() != prefixed.strip():
        raise _err(
            "bootstrap.servers",
            plain,
            f"conflicts with 'kafka.bootstrap.servers' = {prefixed!r}",
            "set only one of the two",
        )
    servers = (plain or prefixed or "").strip()
    if not servers:
        raise _err(
            "bootstrap.servers",
            None,
            "is required",
            "set .option('bootstrap.servers', 'host:port[,host:port]') "
            "(also accepted as 'kafka.bootstrap.servers')",
        )
    for hp in servers.split(","):
        host, sep, port = hp.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise _err(
                "bootstrap.servers",
                servers,
                f"entry {hp.strip()!r} is not host:port",
                "use a comma-separated list like '127.0.0.1:9092'",
            )
    return servers


def _check_typos(opts: dict[str, str]) -> None:
    """Reject options that look like a misspelt known option (they would be silently ignored)."""
    known = list(_KNOWN)
    for key in opts:
        if (key in _KNOWN or key in _SPARK_OWNED or key.startswith("kafka.")
                or key.startswith(STORAGE_OPTIONS_PREFIX)):
            continue
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.85)
        if close:
            raise OptionError(
                f"Unknown option '{key}'. Fix: did you mean '{_KNOWN[close[0]]}'? "
                "(Options that are not recognised would otherwise be ignored.)"
            )


def check_common_options(options: Mapping[str, str]) -> None:
    """Checks that hold for reads and writes alike: run when the DataSource is created."""
    opts = _lower(options)
    _check_bootstrap(opts)
    _check_typos(opts)
    # value-level checks of every option that is present, whatever the role
    _bool(opts, "failOnDataLoss", True)
    _bool(opts, "includeHeaders", False)
    _bool(opts, "exactlyOnce", True)
    for name in (
        "maxOffsetsPerTrigger",
        "minOffsetsPerTrigger",
        "maxBytesPerTrigger",
        "minPartitions",
        "maxRecordsPerPartition",
        "minRecordsPerPartition",
        "kafkaConsumer.pollTimeoutMs",
        "fetchOffset.retryIntervalMs",
    ):
        _int(opts, name)
    _int(opts, "fetchOffset.numRetries", minimum=0)
    if "maxtriggerdelay" in opts:
        _trigger_delay(opts)
    _isolation(opts)
    _storage_reads(opts)
    _int(opts, "storageReadBytes")


def _storage_reads(opts: dict[str, str]) -> Literal["auto", "never"]:
    raw = opts.get("storagereads", "auto").strip().lower()
    if raw not in ("auto", "never"):
        raise _err("storageReads", raw, "unknown mode", "use 'auto' or 'never'")
    return raw  # type: ignore[return-value]


def _trigger_delay(opts: dict[str, str]) -> int:
    raw = opts.get("maxtriggerdelay")
    if raw is None:
        return 15 * 60 * 1000
    try:
        return parse_duration_ms(raw)
    except ValueError:
        raise _err(
            "maxTriggerDelay", raw, "not a duration", "use e.g. '15m', '30s' or '500ms'"
        ) from None


def _isolation(opts: dict[str, str]) -> Literal["read_uncommitted", "read_committed"]:
    plain = opts.get("isolation.level")
    prefixed = opts.get("kafka.isolation.level")
    if plain and prefixed and plain != prefixed:
        raise _err(
            "isolation.level",
            plain,
            f"conflicts with 'kafka.isolation.level' = {prefixed!r}",
            "set only one of the two",
        )
    raw = (plain or prefixed or "read_committed").strip().lower()
    if raw not in ("read_uncommitted", "read_committed"):
        raise _err(
            "isolation.level", raw, "unknown level", "use 'read_uncommitted' or 'read_committed'"
        )
    return raw  # type: ignore[return-value]


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [n for n in ("subscribe", "subscribePattern", "assign") if n.lower() in opts]
    if len(given) != 1:
        problem = "none is set" if not given else f"{len(given)} are set ({', '.join(given)})"
        raise OptionError(
            f"Exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be "
            f"set, but {problem}. Fix: e.g. .option('subscribe', 'topicA,topicB'), "
            f".option('subscribePattern', 'topic.*') or "
            f""".option('assign', '{{"topicA": [0, 1]}}')."""
        )
    kind = given[0]
    raw = opts[kind.lower()]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise _err("subscribe", raw, "no topic given", "use a comma-separated list of topics")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribePattern":
        if not raw.strip():
            raise _err("subscribePattern", raw, "empty pattern", "use a regex like 'events-.*'")
        try:
            re.compile(raw)
        except re.error as exc:
            raise _err(
                "subscribePattern", raw, f"not a valid regex ({exc})", "fix the regex"
            ) from None
        return Subscription("subscribePattern", pattern=raw)
    example = """'{"topicA": [0, 1], "topicB": [0]}'"""
    try:
        parsed = json.loads(raw)
    except ValueError:
        raise _err("assign", raw, "not valid JSON", f"use JSON like {example}") from None
    if not isinstance(parsed, dict) or not parsed:
        raise _err("assign", raw, "not a non-empty JSON object", f"use JSON like {example}")
    pairs: list[tuple[str, int]] = []
    for topic, parts in parsed.items():
        if (
            not isinstance(parts, list)
            or not parts
            or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts)
        ):
            raise _err(
                "assign",
                raw,
                f"topic {topic!r} needs a non-empty list of partition numbers",
                f"use JSON like {example}",
            )
        pairs.extend((topic, p) for p in parts)
    return Subscription("assign", assignment=tuple(sorted(set(pairs))))


def _per_partition_json(option: str, raw: str, *, what: str) -> dict[str, dict[int, int]]:
    example = """'{"topicA": {"0": 23, "1": -1}}'"""
    try:
        parsed = json.loads(raw)
    except ValueError:
        raise _err(option, raw, "not valid JSON", f"use JSON like {example}") from None
    if not isinstance(parsed, dict) or not parsed:
        raise _err(option, raw, "not a non-empty JSON object", f"use JSON like {example}")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict) or not parts:
            raise _err(
                option, raw, f"topic {topic!r} needs an object of partition -> {what}", example
            )
        out[topic] = {}
        for p, v in parts.items():
            try:
                pn = int(p)
            except ValueError:
                raise _err(option, raw, f"partition {p!r} is not a number", example) from None
            if not isinstance(v, int) or isinstance(v, bool) or pn < 0:
                raise _err(option, raw, f"{what} for {topic}-{p} is not an integer", example)
            out[topic][pn] = v
    return out


def _bound(opts: dict[str, str], prefix: str) -> OffsetBound | None:
    """startingX / endingX: the timestamp options win over the offsets option, as in Spark."""
    ts_name = f"{prefix}Timestamp"
    by_ts_name = f"{prefix}OffsetsByTimestamp"
    off_name = f"{prefix}Offsets"
    ts_raw = opts.get(ts_name.lower())
    if ts_raw is not None:
        try:
            ts = int(ts_raw.strip())
        except ValueError:
            raise _err(
                ts_name, ts_raw, "not an integer", "use milliseconds since the epoch"
            ) from None
        if ts < 0:
            raise _err(ts_name, ts_raw, "must be >= 0", "use milliseconds since the epoch")
        return OffsetBound("timestamp", timestamp=ts)
    by_ts_raw = opts.get(by_ts_name.lower())
    if by_ts_raw is not None:
        parsed = _per_partition_json(by_ts_name, by_ts_raw, what="timestamp")
        for topic, parts in parsed.items():
            for p, ts in parts.items():
                if ts < 0:
                    raise _err(
                        by_ts_name,
                        by_ts_raw,
                        f"timestamp for {topic}-{p} is negative",
                        "use milliseconds since the epoch",
                    )
        return OffsetBound("timestamps", offsets=parsed)
    raw = opts.get(off_name.lower())
    if raw is None:
        return None
    word = raw.strip().lower()
    if word in ("earliest", "latest"):
        return OffsetBound(word)  # type: ignore[arg-type]
    parsed = _per_partition_json(off_name, raw, what="offset")
    for topic, parts in parsed.items():
        for p, off in parts.items():
            if off < EARLIEST:
                raise _err(
                    off_name,
                    raw,
                    f"offset {off} for {topic}-{p} is invalid",
                    "use an offset >= 0, or -2 for earliest / -1 for latest",
                )
    return OffsetBound("offsets", offsets=parsed)


def _client_config(opts: dict[str, str], forbidden: Mapping[str, str]) -> dict[str, str]:
    conf: dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka."):
            continue
        if key in forbidden:
            raise OptionError(f"Option '{key}' is not supported. Fix: {forbidden[key]}.")
        name = key[len("kafka.") :]
        if name in ("bootstrap.servers", "isolation.level", "group.id"):
            continue
        conf[name] = value
    return conf


# --------------------------------------------------------------------------- entry points


def _reject_in_batch(
    bound: OffsetBound | None,
    option: str,
    kind: str,
    offset: int,
    kind_error: tuple[str, str],
    offset_error: tuple[str, str],
) -> None:
    """A batch read's bound must be neither ``kind`` nor hold its special ``offset``; the
    errors are (problem, fix)."""
    if bound is None:
        return
    if bound.kind == kind:
        raise _err(option, kind, *kind_error)
    if bound.kind == "offsets" and any(
        o == offset for ps in bound.offsets.values() for o in ps.values()
    ):
        raise _err(option, bound.describe(), *offset_error)


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate and parse the options of a read (batch when ``streaming`` is False)."""
    opts = _lower(options)
    check_common_options(opts)
    bootstrap = _check_bootstrap(opts)
    subscription = _subscription(opts)
    starting = _bound(opts, "starting")
    ending = _bound(opts, "ending")

    if streaming:
        _reject_present(
            opts, ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"),
            "ending offsets are not valid in streaming queries",
            "remove it, or use spark.read (batch) for a bounded read",
        )
    else:
        _reject_in_batch(
            starting, "startingOffsets", "latest", LATEST,
            ("'latest' is not allowed for batch queries (the read would be empty)",
             "use 'earliest' or per-partition JSON offsets"),
            ("-1 (latest) is not allowed as a starting offset for batch queries",
             "use -2 (earliest) or an offset >= 0"),
        )
        _reject_in_batch(
            ending, "endingOffsets", "earliest", EARLIEST,
            ("'earliest' is not allowed as an ending offset",
             "use 'latest' or per-partition JSON offsets"),
            ("-2 (earliest) is not allowed as an ending offset",
             "use -1 (latest) or an offset >= 0"),
        )

    if subscription.kind == "assign":
        assigned = set(subscription.assignment)
        for bound, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
            if bound is not None and bound.kind in ("offsets", "timestamps"):
                given = {(t, p) for t, ps in bound.offsets.items() for p in ps}
                if given != assigned:
                    raise _err(
                        name,
                        bound.describe(),
                        "its partitions differ from the partitions in 'assign' "
                        f"({sorted(assigned)})",
                        "list exactly the assigned partitions",
                    )

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise _err(
            "startingOffsetsByTimestampStrategy",
            strategy,
            "unknown strategy",
            "use 'error' or 'latest'",
        )

    max_offsets = _int(opts, "maxOffsetsPerTrigger")
    min_offsets = _int(opts, "minOffsetsPerTrigger")
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise _err(
            "minOffsetsPerTrigger",
            min_offsets,
            f"is larger than 'maxOffsetsPerTrigger' = {max_offsets}",
            "make minOffsetsPerTrigger <= maxOffsetsPerTrigger",
        )
    if "maxtriggerdelay" in opts and min_offsets is None:
        raise _err(
            "maxTriggerDelay",
            opts["maxtriggerdelay"],
            "is only used together with 'minOffsetsPerTrigger'",
            "set 'minOffsetsPerTrigger' too, or remove 'maxTriggerDelay'",
        )
    group_id = opts.get("groupid")
    if group_id is not None and not group_id.strip():
        raise _err("groupId", group_id, "is empty", "use a consumer group name, or remove it")

    return SourceOptions(
        bootstrap_servers=bootstrap,
        subscription=subscription,
        starting=starting,
        ending=ending,
        starting_by_timestamp_strategy=strategy,  # type: ignore[arg-type]
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=_trigger_delay(opts),
        max_bytes_per_trigger=_int(opts, "maxBytesPerTrigger"),
        min_partitions=_int(opts, "minPartitions"),
        max_records_per_partition=_int(opts, "maxRecordsPerPartition"),
        min_records_per_partition=_default(
            _int(opts, "minRecordsPerPartition"), MIN_RECORDS_PER_PARTITION
        ),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        isolation_level=_isolation(opts),
        group_id=group_id.strip() if group_id else None,
        poll_timeout_ms=_int(opts, "kafkaConsumer.pollTimeoutMs") or 120_000,
        fetch_offset_num_retries=_default(_int(opts, "fetchOffset.numRetries", minimum=0), 3),
        fetch_offset_retry_interval_ms=_int(opts, "fetchOffset.retryIntervalMs") or 10,
        fetch_bytes=_int(opts, "kafka.max.partition.fetch.bytes") or READ_FETCH_BYTES,
        driver_read_max_offsets=_default(
            _int(opts, "driverReadMaxOffsets", minimum=0), DRIVER_READ_MAX_OFFSETS
        ),
        client_config=_client_config(opts, _FORBIDDEN_CONSUMER),
        storage_reads=_storage_reads(opts),
        storage_read_bytes=_default(_int(opts, "storageReadBytes"), STORAGE_READ_BYTES),
        storage_url=opts.get("storage.url", "").strip() or None,
        storage_options={
            k[len(STORAGE_OPTIONS_PREFIX) :]: v
            for k, v in opts.items()
            if k.startswith(STORAGE_OPTIONS_PREFIX)
        },
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate and parse the options of a write."""
    opts = _lower(options)
    check_common_options(opts)
    _reject_present(
        opts, ("subscribe", "subscribePattern", "assign"),
        "is a read option and has no meaning for a write",
        "use the option 'topic' or a 'topic' column to choose where rows go",
    )
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise _err("topic", topic, "is empty", "use a topic name, or a 'topic' column")
    producer = _client_config(opts, _FORBIDDEN_PRODUCER)
    acks = producer.get("acks")
    if acks is not None and acks not in ("0", "1", "all", "-1"):
        raise _err("kafka.acks", acks, "unknown acks", "use 'all', '1' or '0'")
    return SinkOptions(
        bootstrap_servers=_check_bootstrap(opts),
        topic=topic.strip() if topic else None,
        include_headers=_bool(opts, "includeHeaders", False),
        producer_config=producer,
        exactly_once=_bool(opts, "exactlyOnce", True) if "exactlyonce" in opts else None,
    )
