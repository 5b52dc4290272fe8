"""Shared fixtures of the Spark tests: ONE SparkSession for the run, the embedded broker of
``tests/conftest.py`` per module (it starts in ~20 ms) with the config below.

Starting Spark costs ~10-15 s on this machine, so the session is session-scoped; tests
isolate themselves with unique topic names and checkpoint directories instead.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator

import pytest

from sparklog.client import AdminClient, NewTopic
from sparklog.cluster.embedded import EmbeddedCluster
from tests.helpers.polling import wait_for
from tests.helpers.spark import make_spark_session

# Spark must bind to loopback (it picks eth0 otherwise) and its Python workers must be this
# interpreter (so they import sparklog from the same venv): set before the JVM starts. Child
# processes (spark_restart_child.py) inherit them.
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


@pytest.fixture(scope="session")
def spark():  # noqa: ANN201
    session = make_spark_session()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker_config() -> dict[str, str]:
    return {
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "4",
        "num.partitions": "1",
        # the sink is exactly-once by default only where two-phase commit is allowed
        "transaction.two.phase.commit.enable": "true",
    }


@pytest.fixture(scope="module")
def bootstrap(cluster: EmbeddedCluster) -> str:
    return cluster.bootstrap_servers


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> Iterator[AdminClient]:
    a = AdminClient({"bootstrap.servers": bootstrap})
    yield a
    a.close()


@pytest.fixture
def topic_factory(admin: AdminClient) -> Callable[..., str]:
    """Create fresh topics: ``topic_factory(partitions=2) -> name``."""

    def make(partitions: int = 1, config: dict[str, str] | None = None) -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        admin.create_topics([NewTopic(name, num_partitions=partitions, config=config or {})])

        def created() -> bool:
            meta = admin.list_topics()
            return name in meta and len(meta[name].partitions) == partitions

        wait_for(created, 10, f"topic {name} to appear")
        return name

    return make
