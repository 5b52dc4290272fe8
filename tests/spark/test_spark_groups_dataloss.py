"""groupId lag reporting and failOnDataLoss, against a real broker."""

import uuid

import pytest

from tests.helpers.polling import wait_for
from tests.helpers.spark import produce, source


def _tp(topic, p):
    from sparklog.client import TopicPartition

    return TopicPartition(topic, p)


def test_group_id_commits_make_lag_visible(spark, bootstrap, admin, topic_factory, tmp_path):
    t = topic_factory(partitions=2)
    produce(bootstrap, t, [b"x"] * 30, partition=0)
    produce(bootstrap, t, [b"y"] * 20, partition=1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    df = source(
        spark,
        bootstrap,
        subscribe=t,
        startingOffsets="earliest",
        groupId=group,
        maxOffsetsPerTrigger=20,
    )
    q = (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(300) and q.exception() is None
    want = {_tp(t, 0): 30, _tp(t, 1): 20}
    wait_for(
        lambda: admin.list_consumer_group_offsets(group) == want,
        60,
        what="group offsets = end of the topic",
        interval=0.2,
    )
    # new data shows up as lag: log end - committed
    produce(bootstrap, t, [b"z"] * 7, partition=1)
    ends = admin.list_offsets({_tp(t, 0): -1, _tp(t, 1): -1})
    committed = admin.list_consumer_group_offsets(group)
    lag = {tp: ends[tp][0] - committed[tp] for tp in committed}
    assert lag == {_tp(t, 0): 0, _tp(t, 1): 7}


def _run(spark, bootstrap, topic, out, ckpt, fail_on_data_loss):
    df = source(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        failOnDataLoss=fail_on_data_loss,
    )
    q = (
        df.selectExpr("offset")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )
    try:
        q.awaitTermination(300)
    except Exception as exc:  # StreamingQueryException
        return exc
    return q.exception()


def test_fail_on_data_loss_both_ways(spark, bootstrap, admin, topic_factory, tmp_path):
    t = topic_factory(partitions=1)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    produce(bootstrap, t, [b"a"] * 10, partition=0)
    assert _run(spark, bootstrap, t, out, ckpt, "true") is None  # reads offsets 0..9
    produce(bootstrap, t, [b"b"] * 20, partition=0)  # offsets 10..29, never read ...
    admin.delete_records({_tp(t, 0): 20})  # ... and 10..19 are deleted
    err = _run(spark, bootstrap, t, out, ckpt, "true")
    assert err is not None
    assert "failOnDataLoss" in str(err) and "'false'" in str(err)
    assert sorted(r.offset for r in spark.read.parquet(out).collect()) == list(range(10))
    # same checkpoint, failOnDataLoss=false: warns, skips the lost range, reads the rest
    assert _run(spark, bootstrap, t, out, ckpt, "false") is None
    got = sorted(r.offset for r in spark.read.parquet(out).collect())
    assert got == list(range(10)) + list(range(20, 30))


def test_bad_options_fail_at_definition(spark, bootstrap):
    with pytest.raises(Exception, match="did you mean 'maxOffsetsPerTrigger'"):
        source(spark, bootstrap, subscribe="t", maxOffsetPerTrigger=5)
    with pytest.raises(Exception, match="Exactly one of the options 'subscribe'"):
        source(spark, bootstrap, stream=False).count()
    with pytest.raises(Exception, match="'startingOffsets' = 'soon': not valid JSON"):
        source(spark, bootstrap, subscribe="t", startingOffsets="soon")
    with pytest.raises(Exception, match="is required"):
        spark.read.format("sparklog").option("subscribe", "t").load()
