"""``sparklog consume``: the console consumer (kafka-console-consumer.sh).

Prints one value per line. ``--timeout-ms`` bounds the whole run: the command returns what
arrived within it (seed 000's REST consume semantics) and exits 0. With ``--group`` the
consumer joins the group and commits what it printed; without, it reads every partition
directly (no group is created).
"""

from __future__ import annotations

import argparse
import base64
import json
import signal
import sys
import time
from typing import Any

from sparklog.cli.client_common import CliError, add_common, client_config, parse_kv, wrap

__all__ = ["add_parser", "format_record"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("consume", help="print messages of a topic",
                              description="Console consumer: print messages, one per line.")
    add_common(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--group", default=None)
    p.add_argument("--partition", type=int, default=None)
    p.add_argument("--offset", default=None,
                   help="with --partition: an offset, 'earliest' or 'latest' (default latest)")
    p.add_argument("--max-messages", type=int, default=None)
    p.add_argument("--timeout-ms", type=int, default=None)
    p.add_argument("--print-key", action="store_true")
    p.add_argument("--print-offset", action="store_true")
    p.add_argument("--print-partition", action="store_true")
    p.add_argument("--print-timestamp", action="store_true")
    p.add_argument("--print-headers", action="store_true")
    p.add_argument("--key-separator", default="\t")
    p.add_argument("--json", action="store_true", help="one JSON object per message")
    p.add_argument("--isolation-level", default="read_uncommitted",
                   choices=["read_uncommitted", "read_committed"])
    p.add_argument("--consumer-property", action="extend", nargs="+", default=[], metavar="KEY=VALUE")
    p.set_defaults(func=wrap(_run))
    return p


def _raw(b: bytes | None) -> bytes:
    return b"null" if b is None else b


def _json_bytes(b: bytes | None) -> Any:
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(b).decode()}


def format_record(r: Any, args: argparse.Namespace) -> bytes:
    """One output line (without newline). Keys and values are written as raw bytes, as
    Kafka's console consumer does, so binary payloads survive a pipe."""
    if args.json:
        return json.dumps({
            "topic": r.topic, "partition": r.partition, "offset": r.offset,
            "timestamp": r.timestamp,
            "timestampType": "LogAppendTime" if r.timestamp_type == 1 else "CreateTime",
            "key": _json_bytes(r.key), "value": _json_bytes(r.value),
            "headers": [{"key": k, "value": _json_bytes(v)} for k, v in r.headers],
        }, ensure_ascii=False).encode()
    parts: list[bytes] = []
    if args.print_timestamp:
        kind = "LogAppendTime" if r.timestamp_type == 1 else "CreateTime"
        parts.append(f"{kind}:{r.timestamp}".encode())
    if args.print_partition:
        parts.append(f"Partition:{r.partition}".encode())
    if args.print_offset:
        parts.append(f"Offset:{r.offset}".encode())
    if args.print_headers:
        parts.append(b",".join(k.encode() + b":" + _raw(v) for k, v in r.headers)
                     or b"NO_HEADERS")
    if args.print_key:
        parts.append(_raw(r.key))
    parts.append(_raw(r.value))
    sep = args.key_separator.encode()  # Kafka separates every column with key.separator
    return sep.join(parts)


def _run(args: argparse.Namespace) -> int:
    from sparklog.client import Consumer, TopicPartition

    if args.offset is not None and args.partition is None:
        raise CliError("--offset needs --partition")
    if args.partition is not None and args.group:
        raise CliError("--partition cannot be used with --group")
    conf = client_config(args, **{
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        "isolation.level": args.isolation_level,
        "enable.auto.commit": "true",
    })
    if args.group:
        conf["group.id"] = args.group
    conf.update(parse_kv(args.consumer_property, "--consumer-property"))
    consumer = Consumer(conf)
    deadline = None if args.timeout_ms is None else time.monotonic() + args.timeout_ms / 1000
    count = 0
    stop = False

    def on_term(*_: Any) -> None:
        nonlocal stop
        stop = True

    old = signal.signal(signal.SIGTERM, on_term)
    out = sys.stdout.buffer
    try:
        if args.group:
            consumer.subscribe([args.topic])
        else:
            md = consumer.list_topics(args.topic).get(args.topic)
            if md is None or md.error or not md.partitions:
                raise CliError(f"Topic '{args.topic}' does not exist")
            if args.partition is not None:
                if args.partition not in md.partitions:
                    raise CliError(f"Partition {args.partition} of '{args.topic}' does not exist")
                tps = [TopicPartition(args.topic, args.partition)]
            else:
                tps = [TopicPartition(args.topic, p) for p in sorted(md.partitions)]
            consumer.assign(tps)
            if args.offset is None or args.offset == "latest":
                if args.from_beginning and args.offset is None:
                    consumer.seek_to_beginning(tps)
                else:
                    consumer.seek_to_end(tps)
            elif args.offset == "earliest":
                consumer.seek_to_beginning(tps)
            else:
                try:
                    off = int(args.offset)
                except ValueError:
                    raise CliError(f"--offset must be a number, 'earliest' or 'latest', "
                                   f"got {args.offset!r}") from None
                consumer.seek(tps[0], off)
        while not stop:
            if args.max_messages is not None and count >= args.max_messages:
                break
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            want = 500 if args.max_messages is None else min(500, args.max_messages - count)
            recs = consumer.consume(want, 0.5 if left is None else min(left, 0.5))
            if recs:
                out.write(b"\n".join(format_record(r, args) for r in recs) + b"\n")
                out.flush()
                count += len(recs)
        if args.group:
            consumer.commit()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, old)
        consumer.close()
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
