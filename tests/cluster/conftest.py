"""Fixtures for multi-process cluster tests: a controller and three broker processes.

A failed test's report ends with the last lines of every node's log (the ``*.log`` files
directly in its ``tmp_path``: ``server-<port>.log`` per node, ``spark.log`` of a Spark-hosted
cluster), since what a fault test trips on is usually only visible there.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping
from pathlib import Path

import pytest

from tests.helpers.cluster import ClusterProcesses

# short sessions so that a dead broker is fenced within a test's time budget
SESSION_MS = 3000
CLUSTER_CONFIG = {"broker.session.timeout.ms": str(SESSION_MS),
                  "broker.heartbeat.interval.ms": "500",
                  "group.initial.rebalance.delay.ms": "0"}
# fault tests: a follower that stopped fetching leaves the ISR within seconds, and one
# whose leader went away tries the next one soon
LAG_MS = 2000
FAULT_CONFIG = {**CLUSTER_CONFIG, "replica.lag.time.max.ms": str(LAG_MS),
                "replica.fetch.backoff.ms": "200"}
# a test that pauses followers which must stay in the ISR meanwhile gets this much time,
# however slow the machine (nothing waits for a follower to leave the ISR there)
PATIENT_LAG_MS = 15000


def cluster_of(tmp_path: Path, config: Mapping[str, str]) -> Iterator[ClusterProcesses]:
    """A controller and three brokers with ``config``, stopped when the test ends."""
    cluster = ClusterProcesses(tmp_path, brokers=3, config=config)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture
def local_cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    yield from cluster_of(tmp_path, CLUSTER_CONFIG)


@pytest.fixture
def fault_cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    yield from cluster_of(tmp_path, FAULT_CONFIG)


@pytest.fixture
def patient_fault_cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    yield from cluster_of(tmp_path, {**FAULT_CONFIG,
                                     "replica.lag.time.max.ms": str(PATIENT_LAG_MS)})


LOG_TAIL_LINES = 40


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.failed or not isinstance(item, pytest.Function):
        return
    tmp = item.funcargs.get("tmp_path")
    if not isinstance(tmp, Path):
        return
    for log in sorted(tmp.glob("*.log")):  # node logs; segments (.log too) lie deeper
        lines = log.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        report.sections.append((f"{log.relative_to(tmp)} (last {len(lines)} lines)",
                                "\n".join(lines)))
