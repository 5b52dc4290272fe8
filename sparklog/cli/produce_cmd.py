"""``sparklog produce``: the console producer (kafka-console-producer.sh).

One message per stdin line (the line ending is not part of it); with ``--key-separator S``
the text before the first S is the key. Exits 0 once every line is acknowledged.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sparklog.cli.client_common import CliError, add_common, client_config, parse_kv, wrap

__all__ = ["add_parser"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("produce", help="send stdin lines as messages",
                              description="Console producer: one message per stdin line.")
    add_common(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--key-separator", default=None, metavar="S",
                   help="split each line into key S value (at the first S)")
    p.add_argument("--acks", default="all", choices=["all", "-1", "0", "1"])
    p.add_argument("--compression", default="none",
                   choices=["none", "gzip", "snappy", "lz4", "zstd"])
    p.add_argument("--header", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="header added to every message (repeatable)")
    p.add_argument("--partition", type=int, default=None)
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--producer-property", action="extend", nargs="+", default=[], metavar="KEY=VALUE")
    p.set_defaults(func=wrap(_run))
    return p


def _run(args: argparse.Namespace) -> int:
    from sparklog.client import Producer

    headers = None
    if args.header:
        parse_kv(args.header, "--header")  # validates
        headers = [(h.partition("=")[0].strip(), h.partition("=")[2].encode())
                   for h in args.header]
    conf = client_config(args, **{"acks": args.acks, "compression.type": args.compression,
                                  "linger.ms": args.linger_ms})
    conf.update(parse_kv(args.producer_property, "--producer-property"))
    sep = args.key_separator.encode() if args.key_separator else None
    failures: list[BaseException] = []

    def report(err: BaseException | None, _md: Any) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer(conf)
    count = 0
    try:
        for lineno, raw in enumerate(sys.stdin.buffer, 1):
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if line.endswith(b"\r"):
                line = line[:-1]
            key = None
            if sep is not None:
                k, found, v = line.partition(sep)
                if not found:
                    raise CliError(f"No key separator found on line number {lineno}: "
                                   f"'{line.decode(errors='replace')}'")
                key, line = k, v
            producer.produce(args.topic, line, key=key, partition=args.partition,
                             headers=headers, on_delivery=report)
            count += 1
            if failures:
                break
    finally:
        left = producer.flush(60, raise_errors=False)
        producer.close(5)
    if failures:
        raise CliError(f"failed to deliver {len(failures)} message(s): {failures[0]}")
    if left:
        raise CliError(f"{left} message(s) not acknowledged in time")
    return 0
