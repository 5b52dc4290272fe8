"""Shared fixtures of the Spark tests: ONE SparkSession and ONE embedded sparklog broker.

Starting Spark costs ~10-15 s and a broker ~1 s on this machine, so both are session-scoped;
tests isolate themselves with unique topic names and checkpoint directories instead.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

# Spark must bind to loopback (it picks eth0 otherwise) and its Python workers must be this
# interpreter (so they import sparklog from the same venv): set before the JVM starts.
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def make_spark_session(app: str = "sparklog-tests"):  # noqa: ANN201
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )


@pytest.fixture(scope="session")
def spark():  # noqa: ANN201
    session = make_spark_session()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from sparklog.cluster.embedded import EmbeddedCluster

    data_dir = tmp_path_factory.mktemp("sparklog-broker")
    c = EmbeddedCluster(
        str(data_dir),
        config={
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "4",
            "num.partitions": "1",
        },
    )
    c.start()
    yield c
    c.stop()


@pytest.fixture(scope="session")
def bootstrap(cluster) -> str:  # noqa: ANN001
    return cluster.bootstrap_servers


@pytest.fixture(scope="session")
def admin(bootstrap: str):  # noqa: ANN201
    from sparklog.client import AdminClient

    a = AdminClient({"bootstrap.servers": bootstrap})
    yield a
    a.close()


@pytest.fixture
def topic_factory(admin):  # noqa: ANN001, ANN201
    """Create fresh topics: ``topic_factory(partitions=2) -> name``."""

    def make(partitions: int = 1, config: dict[str, str] | None = None) -> str:
        from sparklog.client import NewTopic

        name = f"t-{uuid.uuid4().hex[:10]}"
        admin.create_topics([NewTopic(name, num_partitions=partitions, config=config or {})])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            meta = admin.list_topics()
            if name in meta and len(meta[name].partitions) == partitions:
                return name
            time.sleep(0.05)
        raise AssertionError(f"topic {name} did not appear")

    return make
