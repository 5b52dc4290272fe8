"""``sparklog cluster start`` and ``sparklog cluster describe`` as an operator runs them:
one line per node and the bootstrap line, every broker live and serving, a killed broker
shown fenced while the others run on, and SIGTERM stopping every process."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

from tests.helpers.cli import ok, run
from tests.helpers.kafka_clients import ck_consume, ck_produce, create_topic, make_messages
from tests.helpers.net import free_port_run
from tests.helpers.polling import wait_for
from tests.helpers.procs import alive
from tests.helpers.servers import REPO

pytestmark = pytest.mark.timeout(120)

_NODE = re.compile(r"node (\d+) (controller|broker) pid (\d+) address (\S+) data (\S+) log (\S+)")


def test_cluster_start_describe_and_stop(tmp_path):
    port = free_port_run(3)
    with subprocess.Popen(
        [sys.executable, "-m", "sparklog.cli.main", "cluster", "start", "--brokers", "2",
         "--data-dir", str(tmp_path / "c"), "--port", str(port),
         "--set", "broker.session.timeout.ms=3000", "--set", "broker.heartbeat.interval.ms=500"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(REPO), text=True) as proc:
        nodes = _drive(proc, port)
    assert proc.returncode == 0
    for _, pid, _ in nodes.values():
        assert not alive(pid)


def test_nodes_stop_when_the_launcher_is_sigkilled(tmp_path):
    """Nothing is left running when the launcher dies without a chance to stop its nodes."""
    port = free_port_run(2)
    with subprocess.Popen(
        [sys.executable, "-m", "sparklog.cli.main", "cluster", "start", "--brokers", "1",
         "--data-dir", str(tmp_path / "c"), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(REPO), text=True) as proc:
        assert proc.stdout is not None
        pids = []
        for _ in range(2):
            m = _NODE.fullmatch(proc.stdout.readline().strip())
            assert m, "one line per node"
            pids.append(int(m[3]))
        assert proc.stdout.readline().startswith("bootstrap.servers=")
        proc.kill()
    wait_for(lambda: not any(alive(pid) for pid in pids), timeout=30,
             what="every node gone after its launcher's SIGKILL")


def _drive(proc: subprocess.Popen[str], port: int) -> dict[int, tuple[str, int, str]]:
    """Check the running cluster, then SIGTERM the launcher; the nodes it printed."""
    nodes: dict[int, tuple[str, int, str]] = {}
    try:
        assert proc.stdout is not None
        for _ in range(3):
            m = _NODE.fullmatch(proc.stdout.readline().strip())
            assert m, "one line per node"
            nodes[int(m[1])] = (m[2], int(m[3]), m[4])
            assert os.path.isdir(m[5])
        bootstrap = proc.stdout.readline().strip()
        assert bootstrap == f"bootstrap.servers=127.0.0.1:{port + 1},127.0.0.1:{port + 2}"
        assert nodes == {0: ("controller", nodes[0][1], f"127.0.0.1:{port}"),
                         1: ("broker", nodes[1][1], f"127.0.0.1:{port + 1}"),
                         2: ("broker", nodes[2][1], f"127.0.0.1:{port + 2}")}
        bs = bootstrap.split("=", 1)[1]

        out = ok(run("cluster", "describe", "--bootstrap-server", bs))
        assert f"broker 1 127.0.0.1:{port + 1} live" in out
        assert f"broker 2 127.0.0.1:{port + 2} live" in out
        out = ok(run("cluster", "describe", "--bootstrap-controller", f"127.0.0.1:{port}"))
        assert f"controller 0 127.0.0.1:{port}" in out

        create_topic(bs, "cli", partitions=4)
        msgs = make_messages(40, 4)
        ck_produce(bs, "cli", msgs)
        assert len(ck_consume(bs, "cli", 4, len(msgs))) == len(msgs)

        os.kill(nodes[2][1], signal.SIGKILL)  # the launcher reports it, the rest run on
        wait_for(lambda: f"broker 2 127.0.0.1:{port + 2} fenced" in ok(
            run("cluster", "describe", "--bootstrap-server", f"127.0.0.1:{port + 1}")),
            timeout=20, what="broker 2 shown fenced")
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    return nodes
