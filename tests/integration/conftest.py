"""Fixtures for broker integration tests: real sockets, real Kafka clients.

(``cluster``, an embedded broker per module, comes from ``tests/conftest.py``.)
- ``server_factory``: starts ``sparklog server`` as a subprocess (for restart tests) and
  kills whatever is still running at teardown; tests stop it with SIGTERM, the way an
  operator would. ``module=`` runs a test launcher instead of sparklog's CLI module.
- ``kafka_wire``: a tiny raw-protocol client on top of sparklog.protocol, for bad-input tests
  that third-party clients cannot produce; every connection it opened is closed at teardown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers.net import free_port
from tests.helpers.servers import SPARKLOG_MAIN, ServerProcess
from tests.helpers.wire import KafkaWire


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    started: list[ServerProcess] = []

    def make(data_dir: Path | None = None, port: int | None = None,
             extra: list[str] | None = None, module: str = SPARKLOG_MAIN) -> ServerProcess:
        s = ServerProcess(data_dir or tmp_path / "data", port or free_port(), extra, module)
        started.append(s)
        return s

    yield make
    for s in started:
        s.kill()


@pytest.fixture
def kafka_wire() -> Iterator[Callable[[str], KafkaWire]]:
    opened: list[KafkaWire] = []

    def connect(bootstrap: str) -> KafkaWire:
        w = KafkaWire(bootstrap)
        opened.append(w)
        return w

    yield connect
    for w in opened:
        w.close()
