"""Restarting a streaming query from its checkpoint: every input record exactly once.

The sink is Spark's Parquet file sink (exactly-once through its _spark_metadata log), so any
duplicate or gap in the output comes from the source's offsets.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.helpers.polling import wait_for
from tests.helpers.servers import REPO
from tests.helpers.spark import produce, source


def _start(spark, bootstrap, topic, out, ckpt, *, available_now=False, max_offsets=10):
    df = source(
        spark,
        bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger=max_offsets,
    )
    w = (
        df.selectExpr("CAST(value AS STRING) AS v", "partition", "offset")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", ckpt)
    )
    w = w.trigger(availableNow=True) if available_now else w.trigger(processingTime="0 seconds")
    return w.start()


def _assert_exactly_once(spark, out, expected):
    got = [r.v for r in spark.read.parquet(out).collect()]
    assert len(got) == len(expected), (len(got), len(expected))
    assert sorted(got) == sorted(expected)


def test_stop_mid_stream_and_restart(spark, bootstrap, topic_factory, tmp_path):
    t = topic_factory(partitions=2)
    first = [f"r{i}" for i in range(200)]
    produce(bootstrap, t, [v.encode() for v in first])
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    q = _start(spark, bootstrap, t, out, ckpt)
    wait_for(
        lambda: q.lastProgress is not None and q.lastProgress["batchId"] >= 2,
        240,
        what="3 micro-batches",
        interval=0.2,
    )
    q.stop()
    done = spark.read.parquet(out).count()
    assert 0 < done < 200  # really stopped mid-stream
    more = [f"s{i}" for i in range(50)]
    produce(bootstrap, t, [v.encode() for v in more])
    q = _start(spark, bootstrap, t, out, ckpt, available_now=True, max_offsets=100)
    assert q.awaitTermination(300) and q.exception() is None
    _assert_exactly_once(spark, out, first + more)


def test_sigkill_mid_stream_and_restart(spark, bootstrap, topic_factory, tmp_path):
    t = topic_factory(partitions=2)
    values = [f"k{i}" for i in range(300)]
    produce(bootstrap, t, [v.encode() for v in values])
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.spark.spark_restart_child", bootstrap, t, out, ckpt],
        cwd=str(REPO),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the driver JVM dies with it
    )
    try:
        commits = Path(ckpt) / "commits"
        wait_for(
            lambda: (
                commits.is_dir() and len([p for p in commits.iterdir() if p.name.isdigit()]) >= 3
            ),
            400,
            what="3 committed batches in the child",
            interval=0.2,
        )
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)
    assert child.returncode == -signal.SIGKILL
    q = _start(spark, bootstrap, t, out, ckpt, available_now=True, max_offsets=1000)
    assert q.awaitTermination(300) and q.exception() is None
    _assert_exactly_once(spark, out, values)
