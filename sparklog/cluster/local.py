"""A local multi-process cluster (``sparklog cluster start``): one controller process and N
broker processes on consecutive ports, each a ``sparklog server`` child with its own data
directory and log file.

Layout under the cluster's data dir: ``controller/`` and ``broker-<id>/``, each holding the
node's data and its ``server.log``. Node ids: 0 for the controller, 1..N for the brokers,
so a restart on the same directory brings every broker back under its node id.

Invariant: ``stop`` leaves no child running: brokers get SIGTERM first (their controlled
shutdown needs the controller), then the controller; whatever has not exited within the
grace period is killed. A launcher that dies without stopping them (SIGKILL) leaves nothing
either: each node holds a pipe from it as stdin and shuts down when the pipe closes
(``sparklog server --stop-on-stdin-close``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LocalCluster", "LocalNode"]

LISTENING = b"sparklog server listening"  # the line ``sparklog server`` prints when ready
CONTROLLER_ID = 0


@dataclass
class LocalNode:
    node_id: int
    role: str  # "controller" or "broker"
    port: int
    data_dir: Path
    args: list[str]
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "server.log"

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else -1


class LocalCluster:
    """Controller on ``port``, brokers on ``port+1 .. port+brokers``."""

    def __init__(self, data_dir: str | os.PathLike[str], *, brokers: int = 3, port: int = 9091,
                 config: Mapping[str, str] | None = None) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        root = Path(data_dir).resolve()
        sets = [a for k, v in (config or {}).items() for a in ("--set", f"{k}={v}")]
        voters = f"{CONTROLLER_ID}@127.0.0.1:{port}"
        self.controller = LocalNode(CONTROLLER_ID, "controller", port, root / "controller", [
            *sets, "--set", "process.roles=controller", "--set", f"node.id={CONTROLLER_ID}"])
        self.brokers = [
            LocalNode(n, "broker", port + n, root / f"broker-{n}", [
                *sets, "--set", "process.roles=broker", "--set", f"node.id={n}",
                "--set", f"controller.quorum.voters={voters}"])
            for n in range(1, brokers + 1)]

    @property
    def nodes(self) -> list[LocalNode]:
        return [self.controller, *self.brokers]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def start(self, timeout: float = 60.0) -> LocalCluster:
        """Start every node and return once each accepts connections (the controller
        first: brokers register with it)."""
        try:
            for node in self.nodes:
                self._start(node, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, node: LocalNode, timeout: float) -> None:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        start_at = node.log_path.stat().st_size if node.log_path.exists() else 0
        with open(node.log_path, "ab") as logf:
            node.proc = subprocess.Popen(
                [sys.executable, "-m", "sparklog.cli.main", "server", "--data-dir",
                 str(node.data_dir), "--port", str(node.port), "--stop-on-stdin-close",
                 *node.args],
                stdin=subprocess.PIPE, stdout=logf, stderr=subprocess.STDOUT,
                start_new_session=True)
        deadline = time.monotonic() + timeout
        while LISTENING not in node.log_path.read_bytes()[start_at:]:
            if node.proc.poll() is not None:
                raise RuntimeError(f"{node.role} {node.node_id} exited during start; see "
                                   f"{node.log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{node.role} {node.node_id} did not start within "
                                   f"{timeout:.0f} s; see {node.log_path}")
            time.sleep(0.05)

    def wait(self) -> LocalNode | None:
        """Block until a node exits on its own and return it, no longer tracked (None when
        no node is running)."""
        while True:
            running = [n for n in self.nodes if n.proc is not None]
            if not running:
                return None
            for node in running:
                if node.proc is not None and node.proc.poll() is not None:
                    node.proc = None
                    return node
            time.sleep(0.2)

    def stop(self, grace: float = 30.0) -> None:
        for group in (self.brokers, [self.controller]):
            live = [n for n in group if n.proc is not None and n.proc.poll() is None]
            for node in live:
                assert node.proc is not None
                node.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + grace
            for node in live:
                assert node.proc is not None
                try:
                    node.proc.wait(max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    node.proc.kill()
                    node.proc.wait(10)
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.kill()
                node.proc.wait(10)
            node.proc = None
