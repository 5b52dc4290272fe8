"""Fixtures for multi-process cluster tests: a controller and three broker processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cluster import ClusterProcesses

# short sessions so that a dead broker is fenced within a test's time budget
SESSION_MS = 3000
CLUSTER_CONFIG = {"broker.session.timeout.ms": str(SESSION_MS),
                  "broker.heartbeat.interval.ms": "500",
                  "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture
def local_cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    cluster = ClusterProcesses(tmp_path, brokers=3, config=CLUSTER_CONFIG)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
