"""Fixtures for broker integration tests: a real broker, real sockets, real Kafka clients.

- ``cluster``: an EmbeddedCluster on a free port, one per test module.
- ``server_factory``: starts ``sparklog server`` as a subprocess (for restart tests) and
  stops it with SIGTERM, the way an operator would.
- ``kafka_wire``: a tiny raw-protocol client on top of sparklog.protocol, for bad-input tests
  that third-party clients cannot produce.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_wire import KafkaWire

from sparklog.cluster.embedded import EmbeddedCluster

REPO = Path(__file__).resolve().parents[2]
KCAT = shutil.which("kcat") or "/usr/bin/kcat"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    data = tmp_path_factory.mktemp("broker")
    c = EmbeddedCluster(data, config={"group.initial.rebalance.delay.ms": "0"})
    c.start()
    try:
        yield c
    finally:
        c.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``sparklog server`` in a child process."""

    def __init__(self, data_dir: Path, port: int, extra: list[str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = port
        self.extra = extra or []
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"server-{port}.log"

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> ServerProcess:
        logf = open(self.log_path, "ab")  # noqa: SIM115 - child owns it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sparklog.cli.main", "server", "--data-dir", str(self.data_dir),
             "--port", str(self.port), *self.extra],
            stdout=logf, stderr=subprocess.STDOUT, cwd=str(REPO),
        )
        logf.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log_path.read_text()}")
            if b"sparklog server listening" in self.log_path.read_bytes():
                return self
            time.sleep(0.05)
        raise RuntimeError(f"server did not start:\n{self.log_path.read_text()}")

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(10)
        self.proc = None
        return rc

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[ServerProcess] = []

    def make(data_dir: Path | None = None, port: int | None = None,
             extra: list[str] | None = None) -> ServerProcess:
        s = ServerProcess(data_dir or tmp_path / "data", port or free_port(), extra)
        started.append(s)
        return s

    yield make
    for s in started:
        s.kill()


@pytest.fixture
def kafka_wire() -> Iterator[Any]:
    opened: list[KafkaWire] = []

    def connect(bootstrap: str) -> KafkaWire:
        w = KafkaWire(bootstrap)
        opened.append(w)
        return w

    yield connect
    for w in opened:
        w.close()
