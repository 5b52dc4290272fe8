"""``sparklog server``: run a single-node cluster (controller + broker) in the foreground.

Configuration precedence: Kafka defaults < ``--config FILE`` (server.properties syntax) <
``--data-dir``/``--host``/``--port`` < ``--set key=value``. SIGTERM and SIGINT trigger the
graceful shutdown (stop accepting, finish in-flight requests, flush and checkpoint logs), so
a supervisor can stop the broker without the next start having to recover anything.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["add_parser", "run", "build_config"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "server",
        help="run a single-node sparklog cluster",
        description="Run a single-node sparklog cluster (controller + broker) until SIGTERM/SIGINT.",
    )
    p.add_argument("--data-dir", default=None,
                   help="directory for partition logs and metadata (default ./sparklog-data)")
    p.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port to listen on (default 9092)")
    p.add_argument("--config", default=None, metavar="FILE",
                   help="server.properties file (Kafka key names)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one config key (repeatable)")
    p.set_defaults(func=run)
    return p


def build_config(args: argparse.Namespace) -> Any:
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
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"sparklog server: --set expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    return BrokerConfig(props)


async def _serve(config: Any) -> int:
    from sparklog.broker.broker import Broker

    broker = Broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await broker.start()
    # a line supervisors and tests can wait for
    print(f"sparklog server listening on {broker.server.host}:{broker.port}",  # type: ignore[union-attr]
          file=sys.stderr, flush=True)
    try:
        await stop.wait()
        log.info("shutting down")
    finally:
        await broker.shutdown()
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        config = build_config(args)
    except Exception as exc:
        print(f"sparklog server: invalid configuration: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(config))
    except OSError as exc:
        print(f"sparklog server: {exc}", file=sys.stderr)
        return 1
