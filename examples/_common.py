"""Start-up shared by the examples: the broker they talk to and the local Spark session.

Kept out of the examples' bodies so each one reads as the job it demonstrates. Imports are
done inside the functions so that an example sets ``SPARK_LOCAL_IP``/``PYSPARK_PYTHON``
before pyspark is loaded.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def broker(bootstrap: str | None, prefix: str) -> Iterator[str]:
    """Yield ``bootstrap`` as is, or, when it is None, the address of an embedded broker
    (data in a fresh temp dir named ``prefix``...) that is stopped on the way out."""
    from sparklog.cluster.embedded import EmbeddedCluster

    if bootstrap is not None:
        yield bootstrap
        return
    cluster = EmbeddedCluster(tempfile.mkdtemp(prefix=prefix))
    cluster.start()
    try:
        yield cluster.bootstrap_servers
    finally:
        cluster.stop()


def local_spark(app_name: str) -> Any:
    """A 2-core local session on loopback, no UI or progress bars, errors-only logging: the
    examples' output is their own prints."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
