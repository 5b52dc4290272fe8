"""``sparklog server``: run one node in the foreground: by default a single-node cluster
(controller + broker); with ``process.roles=controller`` a controller only, with
``process.roles=broker`` (and ``controller.quorum.voters``) a broker of a multi-node cluster.

Configuration precedence: Kafka defaults < ``--config FILE`` (server.properties syntax) <
``--data-dir``/``--host``/``--port`` < ``--set key=value``. SIGTERM and SIGINT trigger the
graceful shutdown (stop accepting, finish in-flight requests, flush and checkpoint logs), so
a supervisor can stop the broker without the next start having to recover anything. With
``--stop-on-stdin-close`` the end of stdin does the same: the Spark plugin's nodes hold a
pipe from the JVM that started them, so they stop when it exits, even when it is killed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING, Any

from sparklog.cli.arguments import key_value, port_number
from sparklog.cli.client_common import add_verbose
from sparklog.cli.errors import USAGE_EXIT, CliError, print_error, wrap

if TYPE_CHECKING:
    from sparklog.broker.config import BrokerConfig

log = logging.getLogger(__name__)

__all__ = ["add_parser", "run", "build_config", "check_listener"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "server",
        help="run a sparklog node (by default a single-node cluster)",
        description="Run a sparklog node until SIGTERM/SIGINT: by default a single-node "
                    "cluster (controller + broker); --set process.roles=controller or "
                    "process.roles=broker (with controller.quorum.voters=ID@HOST:PORT) for "
                    "one node of a multi-node cluster.",
    )
    p.add_argument("--data-dir", default=None,
                   help="directory for partition logs and metadata (default ./sparklog-data)")
    p.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=None,
                   help="port to listen on, 0 for any free one (default 9092)")
    p.add_argument("--config", default=None, metavar="FILE",
                   help="server.properties file (Kafka key names)")
    p.add_argument("--set", action="append", default=[], type=key_value, metavar="KEY=VALUE",
                   help="override one config key (repeatable)")
    p.add_argument("--stop-on-stdin-close", action="store_true",
                   help="shut down (as on SIGTERM) when stdin reaches its end: a supervisor "
                        "that holds the other end of a pipe stops the node by exiting, "
                        "however it exits")
    add_verbose(p)
    p.set_defaults(func=run)
    return p


def build_config(args: argparse.Namespace) -> BrokerConfig:
    from sparklog.broker.config import BrokerConfig, parse_listener, parse_properties

    props: dict[str, str] = {}
    if args.config:
        with open(args.config, encoding="utf-8") as fh:
            props.update(parse_properties(fh.read()))
    if args.data_dir is not None or "log.dirs" not in props and "log.dir" not in props:
        props["log.dirs"] = args.data_dir or "./sparklog-data"
    if args.host is not None or args.port is not None or "listeners" not in props:
        cur_host, cur_port = ("127.0.0.1", 9092)
        if "listeners" in props:
            cur_host, cur_port = parse_listener(props["listeners"].split(",")[0])
        host = args.host if args.host is not None else cur_host
        port = args.port if args.port is not None else cur_port
        props["listeners"] = f"PLAINTEXT://{host}:{port}"
    for key, value in args.set:
        props[key] = value.strip()
    return BrokerConfig(props)


def check_listener(host: str, port: int) -> None:
    """Fail now, before any log is loaded, when the listener's address cannot be bound (in
    use, not an address of this host, a port out of range): binding is the broker's last
    start-up step, and an operator should not wait for recovery to learn of a typo. Binds
    the way the broker does (SO_REUSEADDR), so a port in TIME_WAIT passes here as there."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if not 0 <= port <= 65535:
        raise CliError(f"cannot listen on {where}: port {port} is out of range (0-65535)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            reason = e.strerror or str(e)
            raise CliError(f"cannot listen on {where}: {reason[0].lower()}{reason[1:]}") \
                from None


def _stop_on_eof(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    fd = sys.stdin.fileno()

    def readable() -> None:
        if not os.read(fd, 65536):
            loop.remove_reader(fd)
            log.info("stdin closed: the supervisor is gone")
            stop.set()

    loop.add_reader(fd, readable)


async def _serve(config: BrokerConfig, stop_on_stdin_close: bool = False) -> int:
    from sparklog.cluster.nodes import build_node

    node = build_node(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if stop_on_stdin_close:
        _stop_on_eof(loop, stop)
    await node.start()
    host, _ = config.listener()
    # a line supervisors and tests can wait for
    print(f"sparklog server listening on {host}:{node.port} "
          f"(process.roles={','.join(sorted(config.roles))}, node.id={config.node_id})",
          file=sys.stderr, flush=True)
    try:
        await stop.wait()
        log.info("shutting down")
    finally:
        await node.shutdown()
    return 0


def _run(args: argparse.Namespace) -> int:
    try:
        config = build_config(args)
        host, port = config.listener()
        config.check_roles()
    except Exception as exc:  # noqa: BLE001 - a bad file or key is the operator's to fix
        print_error(f"invalid configuration: {exc}")
        return USAGE_EXIT
    check_listener(host, port)
    return asyncio.run(_serve(config, args.stop_on_stdin_close))


run = wrap(_run)
