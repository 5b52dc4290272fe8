"""``sparklog cluster``: ``start`` runs a local multi-process cluster in the foreground (one
controller process and N broker processes on consecutive ports) until Ctrl-C / SIGTERM;
``spark`` runs one as a Spark application (the driver hosts the controller and the bootstrap
address, each executor a broker) until Ctrl-C / SIGTERM; ``describe`` lists a cluster's
brokers (id, address, state) and its controller."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from sparklog.cli.arguments import bootstrap_servers, key_value, port_number
from sparklog.cli.client_common import add_client_command, add_verbose, admin_client
from sparklog.cli.errors import CliError, wrap

__all__ = ["add_parser"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("cluster", help="run or describe a multi-node cluster",
                              description="Run a local multi-process cluster, or describe one.")
    sub = p.add_subparsers(dest="cluster_command", metavar="SUBCOMMAND", required=True)
    start = sub.add_parser(
        "start", help="run a controller and N brokers as local processes",
        description="Run one controller process (node 0, on --port) and N broker processes "
                    "(nodes 1..N, on the next ports) until Ctrl-C / SIGTERM, which stops "
                    "them all cleanly.")
    start.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    start.add_argument("--data-dir", default="./sparklog-cluster",
                       help="directory for every node's data and log (default ./sparklog-cluster)")
    start.add_argument("--port", type=port_number, default=9091,
                       help="the controller's port; brokers use the next ones (default 9091)")
    start.add_argument("--set", action="append", default=[], type=key_value,
                       metavar="KEY=VALUE", help="a config key for every node (repeatable)")
    add_verbose(start)
    start.set_defaults(func=wrap(_start))
    spark = sub.add_parser(
        "spark", help="run a cluster as a Spark application (a broker per executor)",
        description="Run spark-submit with sparklog's Spark plugin: the driver runs the "
                    "controller and a bootstrap address on --port that every Kafka client "
                    "can use, each executor runs one broker. Prints bootstrap.servers=HOST:P "
                    "once the brokers are registered; Ctrl-C / SIGTERM stops the application "
                    "(controlled shutdown of every broker, then the controller).")
    spark.add_argument("--master", required=True,
                       help="Spark master, e.g. local-cluster[3,1,1024], spark://HOST:7077, yarn")
    spark.add_argument("--data-dir", default=None,
                       help="directory for every node's data (DIR/node-<id>; default: each "
                            "executor's local dir, the controller's a temporary dir)")
    spark.add_argument("--port", type=port_number, default=9092,
                       help="the driver's bootstrap port (default 9092)")
    spark.add_argument("--conf", action="append", default=[], type=key_value,
                       metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    spark.add_argument("--set", action="append", default=[], type=key_value,
                       metavar="KEY=VALUE",
                       help="a server config key for the controller and every broker (repeatable)")
    add_verbose(spark)
    spark.set_defaults(func=wrap(_spark))
    describe = add_client_command(
        sub, _describe, "describe", help="list the brokers and the controller",
        description="The brokers (id, address, state) and the controller.")
    describe.add_argument("--bootstrap-controller", default=None, type=bootstrap_servers,
                          metavar="HOST:PORT",
                          help="ask the controller itself (its id and every registered broker)")
    return p


def _start(args: argparse.Namespace) -> int:
    from sparklog.cluster.local import LocalCluster

    if args.brokers < 1:
        raise CliError("--brokers must be at least 1")
    if args.port + args.brokers > 65535:
        raise CliError(f"ports {args.port}..{args.port + args.brokers} do not all exist")
    cluster = LocalCluster(args.data_dir, brokers=args.brokers, port=args.port,
                           config=dict(args.set))

    def run() -> int:
        cluster.start()
        for node in cluster.nodes:
            print(f"node {node.node_id} {node.role} pid {node.pid} address {node.address} "
                  f"data {node.data_dir} log {node.log_path}", flush=True)
        print(f"bootstrap.servers={cluster.bootstrap_servers}", flush=True)
        # a node that dies (or is killed to try a failover) is reported; the rest run on
        while (gone := cluster.wait()) is not None:
            print(f"sparklog: {gone.role} {gone.node_id} exited (see {gone.log_path})",
                  file=sys.stderr, flush=True)
        return 1

    return _in_foreground(run, cluster.stop, "the cluster")


def _spark(args: argparse.Namespace) -> int:
    from sparklog.cluster.spark_hosted import SparkHostedCluster
    from sparklog.cluster.spark_plugin import ShimBuildError

    try:
        cluster = SparkHostedCluster(args.master, port=args.port, data_dir=args.data_dir,
                                     conf=dict(args.conf), server=dict(args.set))
    except ShimBuildError as exc:
        raise CliError(str(exc)) from None

    def run() -> int:
        cluster.start()
        while (line := cluster.readline()) is not None:
            print(line, flush=True)
        print("sparklog: the Spark application ended", file=sys.stderr, flush=True)
        return 1

    return _in_foreground(run, cluster.stop, "the Spark application")


def _in_foreground(run: Callable[[], int], stop: Callable[[], object], what: str) -> int:
    """``run()`` until it returns or Ctrl-C / SIGTERM (exit code 0), then ``stop()``."""

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        return run()
    except KeyboardInterrupt:
        print(f"stopping {what}", file=sys.stderr, flush=True)
        return 0
    finally:
        stop()


def _describe(args: argparse.Namespace) -> int:
    if args.bootstrap_controller:
        args.bootstrap_server = args.bootstrap_controller
    with admin_client(args) as admin:
        desc = admin.describe_cluster(include_fenced=True)
    print(f"cluster.id {desc.cluster_id}")
    for b in sorted(desc.brokers, key=lambda b: b.node_id):
        state = "fenced" if b.node_id in desc.fenced else "live"
        rack = f" rack {b.rack}" if b.rack else ""
        print(f"broker {b.node_id} {b.host}:{b.port} {state}{rack}")
    where = f" {args.bootstrap_controller}" if args.bootstrap_controller else ""
    print(f"controller {desc.controller_id}{where}")
    return 0
