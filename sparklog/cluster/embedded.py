"""Embedded single-node cluster: controller + broker on a background asyncio thread
(``cluster.background``).

For laptops, tests and the Spark quickstart: ``with EmbeddedCluster(tmpdir) as c:`` gives a
real broker on ``c.bootstrap_servers`` that any Kafka client can use, and ``stop()`` shuts it
down gracefully (the same path as SIGTERM on ``sparklog server``), so a later cluster on
the same directory recovers exactly what was acknowledged. Like the server, it holds the
directory's lock while it runs: a second cluster or server on it fails to start.

Unlike a plain ``sparklog server`` (Kafka's defaults), the embedded broker allows two-phase
commit (``transaction.two.phase.commit.enable=true``, KIP-939) unless ``config`` says
otherwise: it exists to back Spark queries, and the sink is exactly-once only on brokers
that allow it (at-least-once with a warning elsewhere).
"""

from __future__ import annotations

import logging
import os

from sparklog.broker.broker import Broker
from sparklog.broker.config import BrokerConfig
from sparklog.cluster.background import BackgroundCluster
from sparklog.cluster.single_node import build_single_node
from sparklog.controller import Controller

log = logging.getLogger(__name__)

__all__ = ["EmbeddedCluster"]


class EmbeddedCluster(BackgroundCluster):
    def __init__(self, data_dir: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 0,
                 config: dict[str, str] | None = None) -> None:
        super().__init__()
        self.data_dir = os.fspath(data_dir)
        self.host = host
        self.port = port
        props = {"log.dirs": self.data_dir, "listeners": f"PLAINTEXT://{host}:{port}",
                 "transaction.two.phase.commit.enable": "true"}
        props.update(config or {})
        self.config = BrokerConfig(props)
        self.broker: Broker | None = None
        self.controller: Controller | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    async def _start_nodes(self) -> None:
        node = build_single_node(self.config)
        self.broker = node.broker
        self.controller = node.controller
        await self.broker.start()
        self.port = self.broker.port

    async def _stop_nodes(self) -> None:
        if self.broker is not None:
            await self.broker.shutdown()
