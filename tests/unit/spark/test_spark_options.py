"""Option parsing and validation: every mistake is caught at definition time, by name."""

import pytest

from sparklog.spark.options import (
    OptionError,
    parse_duration_ms,
    parse_sink_options,
    parse_source_options,
)
from sparklog.spark.source import SparklogDataSource

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


def src(streaming=True, **kw):
    return parse_source_options({**BOOT, **kw}, streaming=streaming)


def test_defaults_match_spark_kafka_connector():
    o = src(subscribe="a, b")
    assert o.subscription.kind == "subscribe" and o.subscription.topics == ("a", "b")
    assert o.starting is None and o.ending is None
    assert o.fail_on_data_loss is True and o.include_headers is False
    assert o.max_trigger_delay_ms == 15 * 60 * 1000
    assert o.isolation_level == "read_committed"  # librdkafka's default (issue 15)
    assert o.poll_timeout_ms == 120_000 and o.fetch_offset_num_retries == 3
    assert o.client_conf() == {"bootstrap.servers": "127.0.0.1:9092"}
    assert o.fetch_bytes == 4 * 2**20  # per executor Fetch; see options.READ_FETCH_BYTES


def test_fetch_size_follows_kafka_option():
    o = src(subscribe="a", **{"kafka.max.partition.fetch.bytes": "1048576"})
    assert o.fetch_bytes == 1048576


def test_storage_reads_and_the_buckets_filesystem_options():
    o = src(subscribe="a")
    assert o.storage_reads == "auto" and o.storage_url is None and o.storage_options == {}
    assert o.storage_read_bytes == 16 * 2**20
    o = src(subscribe="a", storageReads="NEVER", storageReadBytes="65536",
            **{"storage.url": "s3://b/tier",
               "storage.options.endpoint_url": "http://127.0.0.1:9000"})
    assert o.storage_reads == "never" and o.storage_url == "s3://b/tier"
    assert o.storage_read_bytes == 65536
    assert o.storage_options == {"endpoint_url": "http://127.0.0.1:9000"}


def test_min_records_per_partition_groups_by_default():
    assert src(subscribe="a").min_records_per_partition == 250_000
    assert src(subscribe="a", minRecordsPerPartition="1").min_records_per_partition == 1
    with pytest.raises(OptionError, match="'minRecordsPerPartition'.*must be >= 1"):
        src(subscribe="a", minRecordsPerPartition="0")


def test_kafka_prefixed_bootstrap_and_passthrough():
    o = parse_source_options(
        {"kafka.bootstrap.servers": "h:1,h2:2", "subscribe": "t", "kafka.client.id": "x"},
        streaming=True,
    )
    assert o.bootstrap_servers == "h:1,h2:2"
    assert o.client_conf() == {"bootstrap.servers": "h:1,h2:2", "client.id": "x"}


def test_case_insensitive_keys():
    o = parse_source_options(
        {**BOOT, "SUBSCRIBE": "t", "maxoffsetspertrigger": "10", "FailOnDataLoss": "FALSE"},
        streaming=True,
    )
    assert o.max_offsets_per_trigger == 10 and o.fail_on_data_loss is False


@pytest.mark.parametrize(
    "opts, needle",
    [
        ({}, "Exactly one of the options 'subscribe'"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "2 are set (subscribe, assign)"),
        ({"subscribe": " , "}, "'subscribe'"),
        ({"subscribePattern": "a(("}, "not a valid regex"),
        ({"assign": "nope"}, "'assign' = 'nope': not valid JSON"),
        ({"assign": '{"a": [0, "x"]}'}, "needs a non-empty list of partition numbers"),
        (
            {"subscribe": "a", "maxOffsetsPerTrigger": "0"},
            "'maxOffsetsPerTrigger' = '0': must be >= 1",
        ),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "ten"}, "not an integer"),
        ({"subscribe": "a", "maxBytesPerTrigger": "-5"}, "'maxBytesPerTrigger'"),
        ({"subscribe": "a", "failOnDataLoss": "maybe"}, "use 'true' or 'false'"),
        (
            {"subscribe": "a", "maxTriggerDelay": "5 parsecs", "minOffsetsPerTrigger": "1"},
            "'maxTriggerDelay'",
        ),
        (
            {"subscribe": "a", "maxTriggerDelay": "5m"},
            "only used together with 'minOffsetsPerTrigger'",
        ),
        (
            {"subscribe": "a", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
            "minOffsetsPerTrigger <= maxOffsetsPerTrigger",
        ),
        (
            {"subscribe": "a", "startingOffsets": "soon"},
            "'startingOffsets' = 'soon': not valid JSON",
        ),
        (
            {"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'},
            "-2 for earliest / -1 for latest",
        ),
        ({"subscribe": "a", "startingTimestamp": "yesterday"}, "'startingTimestamp'"),
        ({"subscribe": "a", "startingOffsetsByTimestamp": '{"a": {"0": -1}}'}, "is negative"),
        (
            {"subscribe": "a", "startingOffsetsByTimestampStrategy": "guess"},
            "use 'error' or 'latest'",
        ),
        ({"subscribe": "a", "isolation.level": "serializable"}, "read_committed"),
        ({"subscribe": "a", "endingOffsets": "latest"}, "not valid in streaming queries"),
        (
            {"subscribe": "a", "kafka.auto.offset.reset": "earliest"},
            "use the option 'startingOffsets'",
        ),
        ({"subscribe": "a", "kafka.value.deserializer": "x"}, "CAST(value AS STRING)"),
        ({"subscribe": "a", "kafka.enable.auto.commit": "true"}, "'groupId'"),
        ({"subscribe": "a", "groupId": " "}, "'groupId'"),
        ({"subscribe": "a", "kafka.max.partition.fetch.bytes": "0"}, "must be >= 1"),
        ({"subscribe": "a", "kafka.max.partition.fetch.bytes": "4MB"}, "not an integer"),
        ({"subscribe": "a", "maxOffsetPerTrigger": "5"}, "did you mean 'maxOffsetsPerTrigger'"),
        ({"subscribe": "a", "storageReads": "always"}, "use 'auto' or 'never'"),
        ({"subscribe": "a", "storageRead": "never"}, "did you mean 'storageReads'"),
        ({"subscribe": "a", "storageReadBytes": "0"}, "must be >= 1"),
        ({"subscribe": "a", "storageReadBytes": "16MB"}, "not an integer"),
        ({"subscribe": "a", "startingOffset": "earliest"}, "did you mean 'startingOffsets'"),
        (
            {"assign": '{"a": [0, 1]}', "startingOffsets": '{"a": {"0": 5}}'},
            "differ from the partitions in 'assign'",
        ),
    ],
)
def test_bad_source_options_name_the_option_and_the_fix(opts, needle):
    with pytest.raises(OptionError) as exc:
        src(**opts)
    msg = str(exc.value)
    assert needle in msg
    assert "Fix" in msg or "did you mean" in msg


@pytest.mark.parametrize(
    "opts, needle",
    [
        ({"startingOffsets": "latest"}, "not allowed for batch queries"),
        ({"startingOffsets": '{"a": {"0": -1}}'}, "-1 (latest) is not allowed"),
        ({"endingOffsets": "earliest"}, "not allowed as an ending offset"),
        ({"endingOffsets": '{"a": {"0": -2}}'}, "-2 (earliest) is not allowed"),
    ],
)
def test_batch_only_rules(opts, needle):
    with pytest.raises(OptionError, match="Fix") as exc:
        src(streaming=False, subscribe="a", **opts)
    assert needle in str(exc.value)


def test_missing_and_bad_bootstrap():
    with pytest.raises(OptionError, match="'bootstrap.servers'.*is required"):
        parse_source_options({"subscribe": "a"}, streaming=True)
    with pytest.raises(OptionError, match="is not host:port"):
        parse_source_options({"bootstrap.servers": "localhost", "subscribe": "a"}, streaming=True)
    with pytest.raises(OptionError, match="conflicts with 'kafka.bootstrap.servers'"):
        parse_source_options(
            {**BOOT, "kafka.bootstrap.servers": "other:1", "subscribe": "a"}, streaming=True
        )


def test_offset_bounds_parse():
    o = src(
        streaming=False,
        subscribe="a",
        startingOffsets='{"a": {"0": 5, "1": -2}}',
        endingOffsets='{"a": {"0": 9, "1": -1}}',
    )
    assert o.starting.kind == "offsets" and o.starting.offsets == {"a": {0: 5, 1: -2}}
    assert o.ending.offsets == {"a": {0: 9, 1: -1}}
    # timestamp options win over offsets, as in Spark
    o = src(subscribe="a", startingOffsets="earliest", startingTimestamp="1000")
    assert o.starting.kind == "timestamp" and o.starting.timestamp == 1000
    o = src(subscribe="a", startingOffsetsByTimestamp='{"a": {"0": 7}}')
    assert o.starting.kind == "timestamps" and o.starting.offsets == {"a": {0: 7}}
    assert src(subscribe="a", startingOffsets="EARLIEST").starting.kind == "earliest"


def test_assign_and_pattern():
    o = src(assign='{"b": [1, 0], "a": [2]}')
    assert o.subscription.assignment == (("a", 2), ("b", 0), ("b", 1))
    o = src(subscribePattern="ev-.*")
    assert o.subscription.matches("ev-1") and not o.subscription.matches("xev-1")


def test_durations():
    assert parse_duration_ms("15m") == 900_000
    assert parse_duration_ms("30s") == 30_000
    assert parse_duration_ms("250") == 250
    assert parse_duration_ms("2h") == 7_200_000
    with pytest.raises(ValueError):
        parse_duration_ms("soon")


def test_sink_options():
    o = parse_sink_options({**BOOT, "topic": "out", "kafka.compression.type": "lz4"})
    assert o.topic == "out"
    assert o.client_conf() == {
        "acks": "all",
        "enable.idempotence": "true",
        "compression.type": "lz4",
        "bootstrap.servers": "127.0.0.1:9092",
    }
    assert parse_sink_options({**BOOT, "kafka.acks": "1"}).client_conf()["acks"] == "1"
    with pytest.raises(OptionError, match="write a binary or string 'value' column"):
        parse_sink_options({**BOOT, "kafka.value.serializer": "x"})
    with pytest.raises(OptionError, match="is a read option"):
        parse_sink_options({**BOOT, "subscribe": "x"})
    with pytest.raises(OptionError, match="'kafka.acks'"):
        parse_sink_options({**BOOT, "kafka.acks": "most"})


def test_sink_exactly_once_option():
    assert parse_sink_options(BOOT).exactly_once is None  # decided by what the brokers serve
    assert parse_sink_options({**BOOT, "exactlyOnce": "true"}).exactly_once is True
    assert parse_sink_options({**BOOT, "exactlyonce": "FALSE"}).exactly_once is False
    with pytest.raises(OptionError, match="'exactlyOnce'"):
        parse_sink_options({**BOOT, "exactlyOnce": "yes"})
    with pytest.raises(OptionError, match="its own transactional id"):
        parse_sink_options({**BOOT, "kafka.transactional.id": "t"})
    with pytest.raises(OptionError, match="did you mean 'exactlyOnce'"):
        parse_sink_options({**BOOT, "exactlyOnc": "true"})

def test_datasource_validates_at_creation():
    # Spark passes a case-insensitive dict; a plain dict of lower-case keys is equivalent.
    with pytest.raises(OptionError, match="maxOffsetsPerTrigger"):
        SparklogDataSource(
            {"bootstrap.servers": "h:1", "subscribe": "t", "maxoffsetspertrigger": "x"}
        )
    with pytest.raises(OptionError, match="bootstrap.servers"):
        SparklogDataSource({"topic": "t"})
    # a write-shaped option set is fine at creation time
    ds = SparklogDataSource({"bootstrap.servers": "h:1", "topic": "t", "checkpointlocation": "/x"})
    assert ds.name() == "sparklog"
    assert [f.name for f in ds.schema().fields][-1] == "timestampType"
    ds = SparklogDataSource(
        {"bootstrap.servers": "h:1", "subscribe": "t", "includeheaders": "true"}
    )
    assert ds.schema().fields[-1].name == "headers"
