"""``sparklog server`` as a child process, the way an operator runs it.

For tests of what only a separate process shows: SIGTERM and SIGKILL, restarts on the same
data directory and port, the console script's own output, the memory and descriptors the
server holds. (A broker inside the test process
is ``sparklog.cluster.embedded.EmbeddedCluster``; the ``cluster`` fixture runs one.)
The server listens on 127.0.0.1 at a port the caller picks (``tests.helpers.net.free_port``)
so that a restart can come back on the same address. Whoever starts one stops it: the
fixtures that hand them out kill what is still running at teardown.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.helpers.polling import wait_until

__all__ = ["REPO", "SPARKLOG_MAIN", "ServerProcess"]

REPO = Path(__file__).resolve().parents[2]
SPARKLOG_MAIN = "sparklog.cli.main"  # the module ``python -m`` runs (the console script's)
LISTENING = b"sparklog server listening"  # the line server_cmd prints once it accepts


class ServerProcess:
    """``sparklog server --data-dir DATA --port PORT [extra...]``; its output goes to
    ``server-<port>.log`` beside the data directory. ``module``: what ``python -m`` runs,
    a test launcher that prepares the process before it calls sparklog's ``main`` (e.g.
    ``tests.helpers.faulty_store_server``)."""

    def __init__(self, data_dir: Path, port: int, extra: list[str] | None = None,
                 module: str = SPARKLOG_MAIN) -> None:
        self.data_dir = data_dir
        self.port = port
        self.extra = extra or []
        self.module = module
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"server-{port}.log"
        self._start_at = 0  # the log's size when the running process was launched

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> ServerProcess:
        """Start the process and return once it accepts connections."""
        return self.launch().wait_listening(timeout)

    def launch(self) -> ServerProcess:
        """Start the process without waiting (``wait_listening`` waits): several nodes
        start side by side."""
        # a restart appends to the same log: only what this start writes counts
        self._start_at = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module, "server", "--data-dir",
                 str(self.data_dir), "--port", str(self.port), *self.extra],
                stdout=logf, stderr=subprocess.STDOUT, cwd=str(REPO),
            )
        return self

    def wait_listening(self, timeout: float = 30.0) -> ServerProcess:
        """Return once the ``launch``ed process accepts connections."""
        proc = self.proc
        assert proc is not None, "launch() first"
        if not wait_until(lambda: proc.poll() is not None
                          or LISTENING in self.log_path.read_bytes()[self._start_at:], timeout):
            self.kill()
            raise RuntimeError(f"server did not start:\n{self.log_path.read_text()}")
        if proc.poll() is not None:
            self.proc = None
            raise RuntimeError(f"server exited early:\n{self.log_path.read_text()}")
        return self

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (graceful shutdown), SIGKILL if it takes longer than ``timeout``; the
        exit code."""
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

    def rss_bytes(self) -> int:
        """Resident set size of the server process (VmRSS in /proc/<pid>/status)."""
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def open_fds(self) -> int:
        """File descriptors the server process holds open (sockets, segment files...)."""
        assert self.proc is not None
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed or checkpointed."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None
