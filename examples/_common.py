"""Start-up shared by the examples: the broker they talk to and the local Spark session.

Kept out of the examples' bodies so each one reads as the job it demonstrates. Imports are
done inside the functions so that an example sets ``SPARK_LOCAL_IP``/``PYSPARK_PYTHON``
before pyspark is loaded. Whatever an example creates on disk lives in a temporary
directory that is removed when it exits, however it exits.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# warnings and errors only, without Spark's start-up banner lines (see the file)
LOG4J2_CONF = Path(__file__).resolve().parent.parent / "conf" / "log4j2.properties"


@contextmanager
def broker(bootstrap: str | None, prefix: str) -> Iterator[str]:
    """Yield ``bootstrap`` as is, or, when it is None, the address of an embedded broker
    (data in a temp dir named ``prefix``...) that is stopped, and its data removed, on the
    way out."""
    from sparklog.cluster.embedded import EmbeddedCluster

    if bootstrap is not None:
        yield bootstrap
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as data, EmbeddedCluster(data) as cluster:
        yield cluster.bootstrap_servers


def local_spark(app_name: str) -> Any:
    """A 2-core local session on loopback, no UI or progress bars, warnings-only logging
    (errors-only once started): the examples' output is their own prints."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        # read by the driver JVM pyspark starts next, so it applies from its first line on
        .config(
            "spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG4J2_CONF.as_uri()}"
        )
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
