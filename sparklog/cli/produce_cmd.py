"""``sparklog produce``: the console producer (kafka-console-producer.sh).

One message per stdin line (the line ending is not part of it); with ``--key-separator S``
the text before the first S is the key. Exits 0 once every line is acknowledged.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sparklog.cli.arguments import key_value, topic_name
from sparklog.cli.client_common import add_client_command, client_config
from sparklog.cli.errors import CliError, error_message

__all__ = ["add_parser"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = add_client_command(subparsers, _run, "produce", help="send stdin lines as messages",
                           description="Console producer: one message per stdin line.")
    p.add_argument("--topic", required=True, type=topic_name, help="topic to write to")
    p.add_argument("--key-separator", default=None, metavar="S",
                   help="split each line into key S value (at the first S)")
    p.add_argument("--acks", default="all", choices=["all", "-1", "0", "1"],
                   help="acknowledgements to wait for: all (= -1) in-sync replicas, the "
                        "leader's (1) or none (0) (default all)")
    p.add_argument("--compression", default="none",
                   choices=["none", "gzip", "snappy", "lz4", "zstd"],
                   help="compression codec of the batches (default none)")
    p.add_argument("--header", action="extend", nargs="+", default=[], type=key_value,
                   metavar="KEY=VALUE", help="header added to every message (repeatable)")
    p.add_argument("--partition", type=int, default=None,
                   help="write every message to this partition (default: by key, or "
                        "spread when there is none)")
    p.add_argument("--linger-ms", type=int, default=5,
                   help="how long a batch waits for more messages (default 5)")
    p.add_argument("--producer-property", action="extend", nargs="+", default=[],
                   type=key_value, metavar="KEY=VALUE",
                   help="producer config (Kafka key names), e.g. batch.size=65536 (repeatable)")
    return p


def _run(args: argparse.Namespace) -> int:
    from sparklog.client import Producer

    headers = [(k, v.encode()) for k, v in args.header] or None
    conf = client_config(args, **{"acks": args.acks, "compression.type": args.compression,
                                  "linger.ms": args.linger_ms})
    conf.update(args.producer_property)
    sep = args.key_separator.encode() if args.key_separator else None
    failures: list[BaseException] = []

    def report(err: BaseException | None, _md: Any) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer(conf)
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
            if failures:
                break
    finally:
        left = producer.flush(60, raise_errors=False)
        producer.close(5)
    if failures:
        raise CliError(f"failed to deliver {len(failures)} message(s): "
                       f"{error_message(failures[0])}")
    if left:
        raise CliError(f"{left} message(s) not acknowledged in time")
    return 0
