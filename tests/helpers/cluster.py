"""A multi-process cluster for tests: one controller process and N broker processes
(``ServerProcess`` each, so every node can be SIGKILLed, SIGTERMed and restarted on its
data directory and port), plus the checker fault tests report with.

The cluster is stopped by whoever starts it (``stop`` kills what SIGTERM did not end), as
the ``local_cluster`` fixture in ``tests/cluster/conftest.py`` does.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.kafka_clients import Msg
from tests.helpers.net import free_port
from tests.helpers.servers import ServerProcess

__all__ = ["CONTROLLER_ID", "ClusterProcesses", "Delivery", "delivery_report", "partition_states"]

CONTROLLER_ID = 0


def _sets(config: Mapping[str, str]) -> list[str]:
    return [arg for k, v in config.items() for arg in ("--set", f"{k}={v}")]


class ClusterProcesses:
    """``sparklog server`` with process.roles=controller (node 0) and brokers 1..N."""

    def __init__(self, root: Path, brokers: int = 3,
                 config: Mapping[str, str] | None = None) -> None:
        common = dict(config or {})
        self.controller = ServerProcess(
            root / "controller", free_port(),
            _sets({**common, "process.roles": "controller", "node.id": str(CONTROLLER_ID)}))
        voters = f"{CONTROLLER_ID}@127.0.0.1:{self.controller.port}"
        self.brokers: dict[int, ServerProcess] = {}
        for n in range(1, brokers + 1):
            self.brokers[n] = ServerProcess(
                root / f"broker{n}", free_port(),
                _sets({**common, "process.roles": "broker", "node.id": str(n),
                       "controller.quorum.voters": voters}))

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values() if b.proc is not None)

    def start(self, brokers: Iterable[int] | None = None) -> ClusterProcesses:
        """The controller, then the ``brokers`` (all by default) side by side: each
        registers with the controller on its own."""
        self.controller.start()
        started = [self.brokers[n] for n in (self.brokers if brokers is None else brokers)]
        for b in started:
            b.launch()
        for b in started:
            b.wait_listening()
        return self

    def stop(self) -> None:
        """Brokers first (their controlled shutdown needs the controller), then it."""
        try:
            for b in self.brokers.values():
                b.stop()
            self.controller.stop()
        finally:
            for node in (*self.brokers.values(), self.controller):
                node.kill()


def partition_states(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    """Each partition's (leader, sorted ISR) as confluent-kafka's metadata shows them."""
    from confluent_kafka.admin import AdminClient

    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p.id: (p.leader, sorted(p.isrs)) for p in meta.topics[topic].partitions.values()}


@dataclass(frozen=True)
class Delivery:
    """Acknowledged records of one partition: lost (never read back), duplicated (read
    more than once) and reordered (read in another order than acknowledged)."""

    lost: int
    duplicated: int
    reordered: int


def delivery_report(acked: Iterable[Msg], read: Iterable[Msg]) -> dict[int, Delivery]:
    """Per partition, what happened to the acknowledged records (values identify them;
    ``read`` in offset order within each partition)."""
    sent: dict[int, list[bytes | None]] = defaultdict(list)
    for m in acked:
        sent[m.partition].append(m.value)
    got: dict[int, list[bytes | None]] = defaultdict(list)
    for m in sorted(read, key=lambda m: (m.partition, m.offset)):
        got[m.partition].append(m.value)
    out = {}
    for p in sorted(set(sent) | set(got)):
        position = {v: i for i, v in enumerate(sent[p])}
        counts = Counter(got[p])
        seen = [position[v] for v in dict.fromkeys(got[p]) if v in position]
        out[p] = Delivery(lost=sum(1 for v in sent[p] if v not in counts),
                          duplicated=sum(c - 1 for v, c in counts.items() if v in position),
                          reordered=sum(1 for a, b in zip(seen, seen[1:], strict=False) if b < a))
    return out
