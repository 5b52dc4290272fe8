"""The ``sparklog`` console script run as an operator runs it: a subprocess, its stdout,
stderr and exit code (the CLI's one-line error contract checked in one place)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.servers import REPO, ServerProcess

__all__ = ["SPARKLOG", "ok", "one_error", "run"]

SPARKLOG = str(Path(sys.executable).parent / "sparklog")


def run(*args: str, server: ServerProcess | None = None, stdin: bytes | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    cmd = [SPARKLOG, *args]
    if server is not None:
        cmd += ["--bootstrap-server", server.bootstrap_servers]
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout, cwd=str(REPO),
                          text=stdin is None)


def ok(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 0, res.stderr
    return res.stdout


def one_error(res: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """The single stderr line of a failed command (and nothing on stdout)."""
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""
    return lines[0]
