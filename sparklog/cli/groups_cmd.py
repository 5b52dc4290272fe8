"""``sparklog groups list|describe|reset-offsets|delete`` (kafka-consumer-groups.sh)."""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from sparklog.cli.client_common import CliError, add_common, admin_client, wrap

__all__ = ["add_parser", "parse_datetime", "table"]

DESCRIBE_COLUMNS = ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                    "CONSUMER-ID", "HOST", "CLIENT-ID"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("groups", help="list, describe, reset or delete consumer groups",
                              description="Manage consumer groups (like kafka-consumer-groups.sh).")
    sub = p.add_subparsers(dest="groups_action", metavar="ACTION")
    sub.required = True

    ls = sub.add_parser("list", help="list group ids")
    add_common(ls)
    ls.add_argument("--state", action="store_true", help="also print each group's state")
    ls.set_defaults(func=wrap(_list))

    d = sub.add_parser("describe", help="offsets, lag and members of a group")
    add_common(d)
    d.add_argument("--group", required=True)
    d.set_defaults(func=wrap(_describe))

    r = sub.add_parser("reset-offsets", help="move a group's committed offsets")
    add_common(r)
    r.add_argument("--group", required=True)
    tgt = r.add_mutually_exclusive_group(required=True)
    tgt.add_argument("--topic", action="append", default=None,
                     help="TOPIC or TOPIC:P1,P2 (repeatable)")
    tgt.add_argument("--all-topics", action="store_true")
    how = r.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-current", action="store_true")
    how.add_argument("--to-offset", type=int, default=None)
    how.add_argument("--to-datetime", default=None, metavar="ISO8601")
    how.add_argument("--shift-by", type=int, default=None)
    mode = r.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    r.set_defaults(func=wrap(_reset))

    x = sub.add_parser("delete", help="delete a group and its committed offsets")
    add_common(x)
    x.add_argument("--group", required=True)
    x.set_defaults(func=wrap(_delete))
    return p


def table(header: list[str], rows: list[list[Any]]) -> str:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in cells]
    return "\n".join(lines)


def _list(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        groups = admin.list_groups()
        if args.state:
            rows = []
            for gid, _ptype, state in groups:
                if not state:
                    try:
                        state = admin.describe_groups([gid])[0].state
                    except Exception:
                        state = "Unknown"
                rows.append([gid, state])
            print(table(["GROUP", "STATE"], rows))
        else:
            for gid, _ptype, _state in groups:
                print(gid)
    return 0


def _describe(args: argparse.Namespace) -> int:
    from sparklog.client import TopicPartition
    from sparklog.protocol.errors import GroupIdNotFoundError

    with admin_client(args) as admin:
        try:
            desc = admin.describe_groups([args.group])[0]
        except GroupIdNotFoundError:
            desc = None
        committed = admin.list_consumer_group_offsets(args.group)
        if desc is not None and desc.state == "Dead" and not committed:
            raise CliError(f"Consumer group '{args.group}' does not exist.")
        owners: dict[TopicPartition, Any] = {}
        for m in desc.members if desc else []:
            for tp in m.assignment:
                owners[tp] = m
        tps = sorted(set(committed) | set(owners))
        ends = admin.list_offsets({tp: -1 for tp in tps}) if tps else {}
        rows = []
        for tp in tps:
            cur = committed.get(tp)
            end = ends.get(tp, (-1, -1))[0]
            lag = end - cur if cur is not None and end >= 0 else "-"
            m = owners.get(tp)
            rows.append([tp.topic, tp.partition, "-" if cur is None else cur,
                         "-" if end < 0 else end, lag,
                         m.member_id if m else "-", m.host if m else "-",
                         m.client_id if m else "-"])
        for m in desc.members if desc else []:
            if not m.assignment:
                rows.append(["-", "-", "-", "-", "-", m.member_id, m.host, m.client_id])
        if desc is None or not desc.members:
            print(f"\nConsumer group '{args.group}' has no active members.")
        print()
        print(table(DESCRIBE_COLUMNS, rows))
    return 0


def parse_datetime(text: str) -> int:
    """Kafka's reset format 'YYYY-MM-DDTHH:mm:SS.sss' (local time unless a zone is given)
    -> epoch ms."""
    s = text.strip()
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    try:
        t = dt.datetime.fromisoformat(s)
    except ValueError:
        raise CliError(f"--to-datetime: cannot parse {text!r} "
                       f"(expected YYYY-MM-DDTHH:mm:SS.sss[+HH:MM])") from None
    if t.tzinfo is None:
        t = t.astimezone()
    return int(t.timestamp() * 1000)


def _targets(admin: Any, args: argparse.Namespace, committed: dict) -> list:
    from sparklog.client import TopicPartition

    if args.all_topics:
        return sorted(committed)
    out = []
    for spec in args.topic:
        name, _, parts = spec.partition(":")
        if parts:
            out.extend(TopicPartition(name, int(p)) for p in parts.split(",") if p.strip())
        else:
            md = admin.describe_topics([name])[name]
            out.extend(TopicPartition(name, p) for p in sorted(md.partitions))
    return out


def _reset(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        committed = admin.list_consumer_group_offsets(args.group)
        tps = _targets(admin, args, committed)
        if not tps:
            raise CliError(f"no partitions to reset for group '{args.group}'")
        if args.execute:
            try:
                desc = admin.describe_groups([args.group])[0]
                state = desc.state
            except Exception:
                state = "Dead"
            if state not in ("Empty", "Dead", ""):
                raise CliError(f"Assignments can only be reset if the group '{args.group}' is "
                               f"inactive, but the current state is {state}.")
        earliest = {tp: v[0] for tp, v in admin.list_offsets({tp: -2 for tp in tps}).items()}
        latest = {tp: v[0] for tp, v in admin.list_offsets({tp: -1 for tp in tps}).items()}
        new: dict = {}
        if args.to_earliest:
            new = dict(earliest)
        elif args.to_latest:
            new = dict(latest)
        elif args.to_current:
            new = {tp: committed.get(tp, latest[tp]) for tp in tps}
        elif args.to_offset is not None:
            new = {tp: min(max(args.to_offset, earliest[tp]), latest[tp]) for tp in tps}
        elif args.shift_by is not None:
            new = {tp: min(max(committed.get(tp, latest[tp]) + args.shift_by, earliest[tp]),
                           latest[tp]) for tp in tps}
        elif args.to_datetime is not None:
            ts = parse_datetime(args.to_datetime)
            found = admin.list_offsets({tp: ts for tp in tps})
            new = {tp: (found[tp][0] if found[tp][0] >= 0 else latest[tp]) for tp in tps}
        if args.execute:
            admin.alter_consumer_group_offsets(args.group, new)
        print()
        print(table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                    [[args.group, tp.topic, tp.partition, new[tp]] for tp in sorted(new)]))
    return 0


def _delete(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        admin.delete_groups([args.group])
        print(f"Deletion of requested consumer groups ('{args.group}') was successful.")
    return 0
