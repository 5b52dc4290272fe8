"""A sparklog cluster hosted by a Spark application (``sparklog cluster spark``):
``spark-submit`` with the jvm-shim plugin and the driver application (``spark_app``), so the
driver runs the controller and the bootstrap address and each executor one broker.

``--conf`` settings go to Spark as they are; ``--set`` server keys become
``spark.sparklog.server.KEY``, which the plugin hands to the controller and every broker;
``data_dir`` becomes ``spark.sparklog.dataDir`` (each node under ``DIR/node-<id>``).

Invariant: ``stop`` leaves no process of the application running. It SIGTERMs the driver
application (which stops the SparkContext: the plugin stops every broker with a controlled
shutdown, then the controller; spark-submit ends with it), then the spark-submit JVM if it
still runs halfway through the grace period; what is left in the application's process
group after the grace period (``spark-submit`` starts in a session of its own, and Spark's
processes and the nodes stay in it) is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pyspark

from sparklog.cluster import spark_app
from sparklog.cluster.spark_plugin import PLUGIN_CLASS, jar_path

__all__ = ["SparkHostedCluster", "spark_submit_args"]

SERVER_PREFIX = "spark.sparklog.server."  # NodeProcess.SERVER_PREFIX in jvm-shim
DATA_DIR_CONF = "spark.sparklog.dataDir"  # NodeProcess.DATA_DIR in jvm-shim
DRIVER_APP = Path(spark_app.__file__).resolve()


def spark_submit_args(master: str, *, port: int, data_dir: str | os.PathLike[str] | None = None,
                      conf: Mapping[str, str] | None = None,
                      server: Mapping[str, str] | None = None) -> list[str]:
    """The ``spark-submit`` arguments (after the command itself) of the application."""
    settings = {"spark.plugins": PLUGIN_CLASS, **(conf or {})}
    if data_dir is not None:
        settings[DATA_DIR_CONF] = str(Path(data_dir).resolve())
    settings.update({SERVER_PREFIX + k: v for k, v in (server or {}).items()})
    confs = [a for k, v in settings.items() for a in ("--conf", f"{k}={v}")]
    return ["--master", master, "--jars", str(jar_path()), *confs,
            str(DRIVER_APP), "--port", str(port)]


def _spark_submit() -> str:
    home = os.environ.get("SPARK_HOME") or str(Path(pyspark.__file__).resolve().parent)
    return str(Path(home) / "bin" / "spark-submit")


class SparkHostedCluster:
    """The ``spark-submit`` child and its process group. Its stdout is piped (the driver
    application prints the bootstrap line there); stderr (Spark's log) goes to ``stderr``."""

    def __init__(self, master: str, *, port: int = 9092,
                 data_dir: str | os.PathLike[str] | None = None,
                 conf: Mapping[str, str] | None = None, server: Mapping[str, str] | None = None,
                 stderr: int | None = None) -> None:
        self.args = [_spark_submit(), *spark_submit_args(master, port=port, data_dir=data_dir,
                                                         conf=conf, server=server)]
        self.stderr = stderr
        self.proc: subprocess.Popen[str] | None = None
        self.driver_pid: int | None = None

    def start(self) -> SparkHostedCluster:
        env = dict(os.environ)
        # the nodes run on this interpreter unless the user chose another
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", env["PYSPARK_PYTHON"])
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env=env, text=True, start_new_session=True)
        return self

    def readline(self) -> str | None:
        """The next line the driver application prints for the user (None once it has
        ended); its pid line is kept, not returned."""
        assert self.proc is not None and self.proc.stdout is not None
        while line := self.proc.stdout.readline():
            key, _, value = line.rstrip("\n").partition("=")
            if key != spark_app.DRIVER_PID:
                return line.rstrip("\n")
            self.driver_pid = int(value)
        return None

    def stop(self, grace: float = 90.0) -> int | None:
        """SIGTERM to spark-submit, then SIGKILL to whatever of the group outlives
        ``grace``; spark-submit's exit code."""
        proc = self.proc
        if proc is None:
            return None
        deadline = time.monotonic() + grace
        if proc.poll() is None:
            # the driver application stops the SparkContext; spark-submit ends with it
            if self.driver_pid is not None and _signal(self.driver_pid, signal.SIGTERM):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(max(deadline - time.monotonic(), 0.1) / 2)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(max(deadline - time.monotonic(), 0.1))
        # the driver application and the nodes end shortly after the JVM
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        rc = proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
        self.proc = None
        return rc


def _signal(pid: int, sig: signal.Signals) -> bool:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
