"""Fixtures shared by every test directory.

- ``cluster``: an EmbeddedCluster (controller + broker in this process) on 127.0.0.1 at a
  port the OS picks, one per test module, stopped when the module is done.
- ``moto_s3``: moto's standalone S3 server (a child process on 127.0.0.1), one per session,
  for the object-storage tier's tests against a real S3 API.
- ``broker_config``: the config that cluster starts with. A module (or a directory's
  conftest) that needs other broker settings overrides this fixture, not ``cluster``.

Tests marked ``soak`` (runs of minutes, e.g. 10^6 fuzzed frames) are skipped unless
selected with ``-m soak``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sparklog.cluster.embedded import EmbeddedCluster
from tests.helpers.object_store import MotoS3


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "soak" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="soak test: select it with -m soak")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def broker_config() -> dict[str, str]:
    return {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory,
            broker_config: dict[str, str]) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(tmp_path_factory.mktemp("broker"), config=broker_config) as c:
        yield c


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3]:
    server = MotoS3(tmp_path_factory.mktemp("moto")).start()
    try:
        yield server
    finally:
        server.stop()
