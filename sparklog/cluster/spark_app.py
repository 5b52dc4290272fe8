"""The long-lived driver application of a Spark-hosted sparklog cluster, run by
``spark-submit`` with the plugin (``sparklog cluster spark`` does it; see the README for the
plain ``spark-submit`` form).

The plugin's driver side has started the controller before this code gets its
SparkContext; the executors' sides start the brokers. This application waits for the
expected number of brokers to register, then serves the stable bootstrap address
(``BootstrapProxy``) with the live brokers the controller lists, prints
``bootstrap.servers=HOST:P`` on stdout, and runs until SIGTERM / SIGINT or until the JVM
that started it is gone; stopping the SparkContext stops every node (the plugin's
shutdown: brokers' controlled shutdowns, the controller). SIGTERM to this process (its pid
is the first line it prints, ``driver.pid=N``) is the orderly stop: a SIGTERM to the JVM
instead runs Spark's shutdown hooks, where a local-cluster's workers kill their executors
and start new ones until the JVM is gone.

Expected brokers: ``spark.sparklog.brokers`` when set, else N of ``local-cluster[N,...]``,
else ``spark.executor.instances``, else 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import re
import signal
import sys
import time

from pyspark import SparkConf
from pyspark.sql import SparkSession

from sparklog.client.admin import AdminClient, ClusterDescription
from sparklog.cluster.bootstrap_proxy import BootstrapProxy
from sparklog.protocol.errors import SparklogError

__all__ = ["expected_brokers", "main"]

log = logging.getLogger("sparklog.cluster.spark_app")

VOTERS_CONF = "spark.sparklog.controller.quorum.voters"  # set by the plugin's driver side
BROKERS_CONF = "spark.sparklog.brokers"
DRIVER_PID = "driver.pid"  # the first line on stdout: this process's pid
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,")
_POLL_S = 1.0


def expected_brokers(conf: SparkConf) -> int:
    """How many brokers the application waits for before it prints its bootstrap line."""
    if conf.contains(BROKERS_CONF):
        return int(conf.get(BROKERS_CONF) or "1")
    m = _LOCAL_CLUSTER.match(conf.get("spark.master", "") or "")
    if m:
        return int(m[1])
    return int(conf.get("spark.executor.instances", "1") or "1")


def _live(desc: ClusterDescription) -> list[tuple[str, int]]:
    return [(b.host, b.port) for b in sorted(desc.brokers, key=lambda b: b.node_id)
            if b.node_id not in desc.fenced]


async def _serve(admin: AdminClient, proxy: BootstrapProxy, want: int, timeout: float) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    parent = os.getppid()
    deadline = time.monotonic() + timeout
    announced = False
    while not stop.is_set():
        if os.getppid() != parent:
            log.warning("the Spark driver JVM is gone; stopping")
            break
        try:
            desc = await asyncio.to_thread(admin.describe_cluster, include_fenced=True)
        except (SparklogError, TimeoutError) as exc:  # the controller may be restarting
            log.warning("cannot reach the controller: %s", exc)
        else:
            proxy.brokers = _live(desc)
        if not announced and len(proxy.brokers) >= want:
            await proxy.start()
            print(f"bootstrap.servers={proxy.host}:{proxy.port}", flush=True)
            announced = True
        elif not announced and time.monotonic() > deadline:
            raise SystemExit(f"sparklog: {len(proxy.brokers)} of {want} brokers registered "
                             f"within {timeout:.0f} s; see the executors' logs")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), _POLL_S)
    await proxy.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sparklog-spark-driver")
    p.add_argument("--host", default=None,
                   help="address of the bootstrap listener (default spark.driver.host)")
    p.add_argument("--port", type=int, default=9092, help="bootstrap port (default 9092)")
    p.add_argument("--start-timeout", type=float, default=300.0,
                   help="seconds to wait for the brokers to register (default 300)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # whom a launcher signals to stop the application the orderly way (spark.stop() here)
    print(f"{DRIVER_PID}={os.getpid()}", flush=True)
    spark = SparkSession.builder.appName("sparklog").getOrCreate()
    try:
        conf = spark.sparkContext.getConf()
        voters = conf.get(VOTERS_CONF)
        if not voters:
            raise SystemExit(f"sparklog: {VOTERS_CONF} is not set: is spark.plugins "
                             "org.sparklog.shim.SparklogPlugin with the sparklog jar?")
        controller = voters.split("@", 1)[1]
        host = args.host or conf.get("spark.driver.host", "127.0.0.1") or "127.0.0.1"
        proxy = BootstrapProxy(host, args.port)
        with AdminClient({"bootstrap.servers": controller}) as admin:
            asyncio.run(_serve(admin, proxy, expected_brokers(conf), args.start_timeout))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
