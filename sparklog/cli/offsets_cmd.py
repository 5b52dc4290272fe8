"""``sparklog offsets``: partition offsets by time (GetOffsetShell): ``topic:partition:offset``."""

from __future__ import annotations

import argparse
import re
from typing import Any

from sparklog.cli.client_common import add_client_command, admin_client
from sparklog.cli.errors import UsageError, no_such_topic

__all__ = ["add_parser"]

_NAMED = {"latest": -1, "earliest": -2, "max-timestamp": -3}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = add_client_command(subparsers, _run, "offsets", help="print topic:partition:offset lines",
                           description="Offsets per partition at a time (like GetOffsetShell).")
    p.add_argument("--topic", required=True, help="topic name (or a regular expression)")
    p.add_argument("--partitions", default=None,
                   help="comma-separated partition ids (default: all)")
    p.add_argument("--time", default="-1",
                   help="-1/latest, -2/earliest, -3/max-timestamp, or a timestamp in ms")
    return p


def _run(args: argparse.Namespace) -> int:
    from sparklog.client import TopicPartition

    t = str(args.time).strip().lower()
    try:
        spec = _NAMED[t] if t in _NAMED else int(t)
    except ValueError:
        raise UsageError(f"--time must be -1, -2, -3 or a timestamp in ms, got {args.time!r}") \
            from None
    wanted = None
    if args.partitions:
        try:
            wanted = {int(x) for x in args.partitions.split(",") if x.strip()}
        except ValueError:
            raise UsageError(f"--partitions: bad list {args.partitions!r}") from None
    with admin_client(args) as admin:
        topics = admin.list_topics()
        if args.topic in topics:
            names = [args.topic]
        else:
            try:
                rx = re.compile(args.topic)
            except re.error:
                rx = None
            names = sorted(n for n in topics if rx is not None and rx.fullmatch(n))
        if not names:
            raise no_such_topic(args.topic)
        tps = [TopicPartition(n, p) for n in names for p in sorted(topics[n].partitions)
               if wanted is None or p in wanted]
        res = admin.list_offsets({tp: spec for tp in tps})
        for tp in tps:
            off = res[tp][0]
            print(f"{tp.topic}:{tp.partition}:{off if off >= 0 else ''}")
    return 0
