"""``sparklog consume``: the console consumer (kafka-console-consumer.sh).

Prints one value per line, then ``Processed a total of N messages`` on stderr, also after
Ctrl-C or SIGTERM; an error (no such topic, partition or broker) prints only the error and
exits 1. ``--timeout-ms`` bounds the reading: the command returns what arrived within it
(seed 000's REST consume semantics) and exits 0. With ``--group`` the clock starts when the
group assigns this consumer its partitions, as joining can take the coordinator's
``group.initial.rebalance.delay.ms`` (3 s by default) before anything can be read; a join
that does not complete in ``max(--timeout-ms, 30 s)`` is an error that says so.

With ``--group`` the consumer joins the group and commits what it printed; without, it reads
every partition directly (no group is created). The consumer is closed on every way out
(end, timeout, Ctrl-C, SIGTERM, error), so a group member leaves the group at once instead of
holding its partitions until its session times out.
"""

from __future__ import annotations

import argparse
import base64
import json
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

from sparklog.cli.arguments import add_flags, key_value, topic_name
from sparklog.cli.client_common import add_client_command, client_config
from sparklog.cli.errors import CliError, UsageError, no_such_topic

if TYPE_CHECKING:
    from sparklog.client import Consumer, ConsumerRecord, TopicPartition

__all__ = ["add_parser", "format_record"]

# How long a group consumer waits for its first assignment when --timeout-ms is shorter:
# the coordinator's initial rebalance delay (3 s) plus a rebalance in which the group's
# other members rejoin (one heartbeat interval, 3 s, each), with room to spare.
JOIN_WAIT_MS = 30_000


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = add_client_command(subparsers, _run, "consume", help="print messages of a topic",
                           description="Console consumer: print messages, one per line.")
    p.add_argument("--topic", required=True, type=topic_name, help="topic to read")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset when there is no committed one "
                        "(default: only new messages)")
    p.add_argument("--group", default=None,
                   help="consumer group to join; its committed offsets say where to start, "
                        "and what is printed is committed")
    p.add_argument("--partition", type=int, default=None,
                   help="read only this partition (not with --group)")
    p.add_argument("--offset", default=None,
                   help="with --partition: an offset, 'earliest' or 'latest' (default latest)")
    p.add_argument("--max-messages", type=int, default=None,
                   help="exit after printing this many messages (default: no limit)")
    p.add_argument("--timeout-ms", type=int, default=None,
                   help="exit after reading for this long; with --group counted from the "
                        "group's assignment (default: no limit)")
    add_flags(p, {
        "--print-key": "print each message's key",
        "--print-offset": "print each message's offset (Offset:N)",
        "--print-partition": "print each message's partition (Partition:N)",
        "--print-timestamp": "print each message's timestamp (CreateTime:MS or LogAppendTime:MS)",
        "--print-headers": "print each message's headers (k1:v1,k2:v2 or NO_HEADERS)",
    })
    p.add_argument("--key-separator", default="\t", metavar="S",
                   help="separator between the printed fields (default a tab)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object per message with every field")
    p.add_argument("--isolation-level", default="read_uncommitted",
                   choices=["read_uncommitted", "read_committed"],
                   help="read_committed hides aborted transactions and stops at open ones "
                        "(default read_uncommitted)")
    p.add_argument("--consumer-property", action="extend", nargs="+", default=[],
                   type=key_value, metavar="KEY=VALUE",
                   help="consumer config (Kafka key names), e.g. fetch.max.bytes=1048576 "
                        "(repeatable)")
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


def format_record(r: ConsumerRecord, args: argparse.Namespace) -> bytes:
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
    from sparklog.client import Consumer

    if args.offset is not None and args.partition is None:
        raise UsageError("--offset needs --partition")
    if args.partition is not None and args.group:
        raise UsageError("--partition cannot be used with --group")
    conf = client_config(args, **{
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        "isolation.level": args.isolation_level,
        "enable.auto.commit": "true",
        "group.id": args.group,
    })
    conf.update(args.consumer_property)
    consumer = Consumer(conf)
    session = _Session(consumer, args)
    # SIGTERM ends the run like Ctrl-C: what was printed is committed and counted
    old = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        try:
            session.start()
            session.read()
        except KeyboardInterrupt:
            pass
    finally:
        signal.signal(signal.SIGTERM, old)
        consumer.close()  # commits and leaves the group on every way out
    if session.note:
        print(session.note, file=sys.stderr)
    print(f"Processed a total of {session.count} messages", file=sys.stderr)
    return 0


class _Session:
    """One run of the console consumer: what it reads from, how long, and what it printed."""

    def __init__(self, consumer: Consumer, args: argparse.Namespace) -> None:
        self.consumer = consumer
        self.args = args
        self.count = 0
        self.note = ""  # why nothing came, when the group gave this consumer no partitions
        self.started = time.monotonic()
        self.assigned_at: float | None = None  # when reading could begin

    def start(self) -> None:
        """Check the topic (and partition) exist, then subscribe or assign and seek."""
        from sparklog.client import TopicPartition

        args, consumer = self.args, self.consumer
        md = consumer.list_topics(args.topic).get(args.topic)
        if md is None or md.error or not md.partitions:
            raise no_such_topic(args.topic)
        if args.group:
            consumer.subscribe([args.topic], on_assign=self._on_assign)
            return
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
                raise UsageError(f"--offset must be a number, 'earliest' or 'latest', "
                               f"got {args.offset!r}") from None
            consumer.seek(tps[0], off)
        self.assigned_at = time.monotonic()

    def _on_assign(self, _consumer: Consumer, tps: list[TopicPartition]) -> None:
        if self.assigned_at is None:
            self.assigned_at = time.monotonic()
        self.note = "" if tps else (
            f"Group '{self.args.group}' assigned this consumer no partitions of "
            f"'{self.args.topic}': its other members hold them all")

    def _deadline(self) -> float | None:
        timeout_ms = self.args.timeout_ms
        if timeout_ms is None:
            return None
        if self.assigned_at is not None:
            return self.assigned_at + timeout_ms / 1000
        return self.started + max(timeout_ms, JOIN_WAIT_MS) / 1000

    def read(self) -> None:
        args, out = self.args, sys.stdout.buffer
        while args.max_messages is None or self.count < args.max_messages:
            deadline = self._deadline()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                if self.assigned_at is None:
                    raise CliError(
                        f"Group '{args.group}' assigned this consumer no partitions within "
                        f"{max(args.timeout_ms, JOIN_WAIT_MS) / 1000:g} s: the group is "
                        f"still rebalancing (see 'sparklog groups describe --group "
                        f"{args.group} --state')")
                break
            want = 500 if args.max_messages is None else min(500, args.max_messages - self.count)
            recs = self.consumer.consume(want, 0.5 if left is None else min(left, 0.5))
            if recs:
                self.count += len(recs)  # before the write, as Kafka's: a signal may end it
                out.write(b"\n".join(format_record(r, args) for r in recs) + b"\n")
                out.flush()
