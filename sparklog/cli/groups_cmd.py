"""``sparklog groups list|describe|reset-offsets|delete`` (kafka-consumer-groups.sh).

``describe`` prints Kafka's tables, one per group, each row starting with the group id:
``--offsets`` (the default: committed offset, log end and lag per partition, with the member
that owns it), ``--members`` (with ``--verbose``: each member's assignment) and ``--state``.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import TYPE_CHECKING, Any

from sparklog.cli.arguments import action_parsers, add_flags
from sparklog.cli.client_common import add_client_command, admin_change, admin_client
from sparklog.cli.errors import CliError, UsageError, warn

if TYPE_CHECKING:
    from sparklog.client import AdminClient, TopicPartition
    from sparklog.client.admin import GroupDescription, MemberDescription

__all__ = ["add_parser", "parse_datetime", "table", "OFFSETS_COLUMNS", "MEMBERS_COLUMNS",
           "STATE_COLUMNS"]

OFFSETS_COLUMNS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                   "CONSUMER-ID", "HOST", "CLIENT-ID"]
MEMBERS_COLUMNS = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
MEMBERS_VERBOSE_COLUMNS = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                           "#PARTITIONS", "ASSIGNMENT"]
STATE_COLUMNS = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p, sub = action_parsers(subparsers, "groups", help="list, describe, reset or delete consumer groups",
                           description="Manage consumer groups (like kafka-consumer-groups.sh).")

    ls = add_client_command(sub, _list, "list", help="list group ids")
    ls.add_argument("--state", action="store_true", help="also print each group's state")

    d = add_client_command(sub, _describe, "describe",
                           help="offsets and lag, members or state of groups",
                           verbose_help="with --members: also each member's assignment; ")
    which = d.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", help="the group to describe")
    which.add_argument("--all-groups", action="store_true", help="describe every group")
    what = d.add_mutually_exclusive_group()
    add_flags(what, {
        "--offsets": "committed offset, log end offset and lag per partition (default)",
        "--members": "the group's members and how many partitions each holds",
        "--state": "coordinator, assignment strategy, state and member count",
    })

    r = add_client_command(sub, _reset, "reset-offsets", help="move a group's committed offsets")
    r.add_argument("--group", required=True, help="the group whose offsets to move")
    tgt = r.add_mutually_exclusive_group(required=True)
    tgt.add_argument("--topic", action="append", default=None, metavar="TOPIC[:P1,P2]",
                     help="a topic, or some of its partitions (repeatable)")
    tgt.add_argument("--all-topics", action="store_true",
                     help="every partition the group has committed offsets for")
    how = r.add_mutually_exclusive_group(required=True)
    add_flags(how, {
        "--to-earliest": "to each log's start",
        "--to-latest": "to each log's end",
        "--to-current": "to the committed offset (the log end where there is none)",
    })
    how.add_argument("--to-offset", type=int, default=None, metavar="OFFSET",
                     help="to this offset (kept inside each log's range, with a warning)")
    how.add_argument("--to-datetime", default=None, metavar="ISO8601",
                     help="to the first offset at or after this time, "
                          "e.g. 2026-01-01T00:00:00.000 (local time unless a zone is given)")
    how.add_argument("--shift-by", type=int, default=None, metavar="N",
                     help="by N (negative: back) from the committed offset (kept inside each "
                          "log's range, with a warning)")
    mode = r.add_mutually_exclusive_group()
    add_flags(mode, {
        "--dry-run": "only show the new offsets (default)",
        "--execute": "commit the new offsets",
    })

    x = add_client_command(sub, _delete, "delete", help="delete a group and its committed offsets")
    x.add_argument("--group", required=True, help="the group to delete (must have no members)")
    return p


def table(header: list[str], rows: list[list[Any]]) -> str:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in cells]
    return "\n".join(lines)


def _no_such_group(group: str) -> CliError:
    return CliError(f"Consumer group '{group}' does not exist.")


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
    with admin_client(args) as admin:
        if args.all_groups:
            groups = [gid for gid, _ptype, _state in admin.list_groups()]
        else:
            groups = [args.group]
        for group in groups:
            desc, committed = _group(admin, group)
            if args.state:
                print()
                print(table(STATE_COLUMNS, [_state_row(desc)]))
            elif args.members:
                _print_members(desc, args.verbose)
            else:
                _print_offsets(admin, desc, committed)
    return 0


def _group(admin: AdminClient, group: str
           ) -> tuple[GroupDescription, dict[TopicPartition, int]]:
    """The group's description and committed offsets; an error if it has neither."""
    from sparklog.client.admin import GroupDescription
    from sparklog.protocol.errors import GroupIdNotFoundError

    try:
        desc = admin.describe_groups([group])[0]
    except GroupIdNotFoundError:
        desc = GroupDescription(group, "Dead", "", "", [])
    committed = admin.list_consumer_group_offsets(group)
    if desc.state == "Dead" and not committed:
        raise _no_such_group(group)
    return desc, committed


def _state_row(desc: GroupDescription) -> list[Any]:
    c = desc.coordinator
    coordinator = "-" if c is None else f"{c.host}:{c.port} ({c.node_id})"
    return [desc.group_id, coordinator, desc.protocol or "-", desc.state, len(desc.members)]


def _assignment(m: MemberDescription) -> str:
    """Kafka's ``topic(0,1), other(2)``."""
    by_topic: dict[str, list[int]] = {}
    for tp in m.assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(f"{t}({','.join(map(str, sorted(ps)))})"
                     for t, ps in sorted(by_topic.items())) or "-"


def _print_members(desc: GroupDescription, verbose: bool) -> None:
    if not desc.members:
        print(f"\nConsumer group '{desc.group_id}' has no active members.")
        return
    members = sorted(desc.members, key=lambda m: m.member_id)
    print()
    if verbose:
        print(table(MEMBERS_VERBOSE_COLUMNS, [
            [desc.group_id, m.member_id, m.group_instance_id or "-", m.host, m.client_id,
             len(m.assignment), _assignment(m)] for m in members]))
    else:
        print(table(MEMBERS_COLUMNS, [
            [desc.group_id, m.member_id, m.host, m.client_id, len(m.assignment)]
            for m in members]))


def _print_offsets(admin: AdminClient, desc: GroupDescription,
                   committed: dict[TopicPartition, int]) -> None:
    owners: dict[TopicPartition, MemberDescription] = {}
    for m in desc.members:
        for tp in m.assignment:
            owners[tp] = m
    tps = sorted(set(committed) | set(owners))
    ends = admin.list_offsets({tp: -1 for tp in tps}) if tps else {}
    g = desc.group_id
    rows: list[list[Any]] = []
    for tp in tps:
        cur = committed.get(tp)
        end = ends.get(tp, (-1, -1))[0]
        lag = end - cur if cur is not None and end >= 0 else "-"
        m = owners.get(tp)
        rows.append([g, tp.topic, tp.partition, "-" if cur is None else cur,
                     "-" if end < 0 else end, lag,
                     m.member_id if m else "-", m.host if m else "-",
                     m.client_id if m else "-"])
    for m in desc.members:
        if not m.assignment:
            rows.append([g, "-", "-", "-", "-", "-", m.member_id, m.host, m.client_id])
    if not desc.members:
        print(f"\nConsumer group '{g}' has no active members.")
    print()
    print(table(OFFSETS_COLUMNS, rows))


def parse_datetime(text: str) -> int:
    """Kafka's reset format 'YYYY-MM-DDTHH:mm:SS.sss' (local time unless a zone is given)
    -> epoch ms."""
    s = text.strip()
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    try:
        t = dt.datetime.fromisoformat(s)
    except ValueError:
        raise UsageError(f"--to-datetime: cannot parse {text!r} "
                       f"(expected YYYY-MM-DDTHH:mm:SS.sss[+HH:MM])") from None
    if t.tzinfo is None:
        t = t.astimezone()
    return int(t.timestamp() * 1000)


def _targets(admin: AdminClient, args: argparse.Namespace,
             committed: dict[TopicPartition, int]) -> list[TopicPartition]:
    from sparklog.client import TopicPartition

    if args.all_topics:
        return sorted(committed)
    out = []
    for spec in args.topic:
        name, _, parts = spec.partition(":")
        if parts:
            try:
                out.extend(TopicPartition(name, int(p)) for p in parts.split(",") if p.strip())
            except ValueError:
                raise UsageError(f"--topic {spec}: partitions must be numbers, "
                               f"e.g. {name}:0,1") from None
        else:
            md = admin.describe_topics([name])[name]
            out.extend(TopicPartition(name, p) for p in sorted(md.partitions))
    return out


def _in_range(wanted: dict[TopicPartition, int], earliest: dict[TopicPartition, int],
              latest: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Requested offsets moved inside each log's range, warning about each one moved (as
    kafka-consumer-groups.sh does)."""
    out = {}
    for tp, off in wanted.items():
        name = f"{tp.topic}-{tp.partition}"
        if off > latest[tp]:
            warn(f"New offset ({off}) is higher than latest offset for topic partition "
                 f"{name}. Value will be set to {latest[tp]}")
            off = latest[tp]
        elif off < earliest[tp]:
            warn(f"New offset ({off}) is lower than earliest offset for topic partition "
                 f"{name}. Value will be set to {earliest[tp]}")
            off = earliest[tp]
        out[tp] = off
    return out


def _reset(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        committed = admin.list_consumer_group_offsets(args.group)
        tps = _targets(admin, args, committed)
        if not tps:
            raise CliError(f"no partitions to reset for group '{args.group}'")
        if args.execute:
            try:
                state = admin.describe_groups([args.group])[0].state
            except Exception:
                state = "Dead"
            if state not in ("Empty", "Dead", ""):
                raise CliError(f"Assignments can only be reset if the group '{args.group}' is "
                               f"inactive, but the current state is {state}.")
        earliest = {tp: v[0] for tp, v in admin.list_offsets({tp: -2 for tp in tps}).items()}
        latest = {tp: v[0] for tp, v in admin.list_offsets({tp: -1 for tp in tps}).items()}
        new: dict[TopicPartition, int] = {}
        if args.to_earliest:
            new = dict(earliest)
        elif args.to_latest:
            new = dict(latest)
        elif args.to_current:
            new = {tp: committed.get(tp, latest[tp]) for tp in tps}
        elif args.to_offset is not None:
            new = _in_range({tp: args.to_offset for tp in tps}, earliest, latest)
        elif args.shift_by is not None:
            new = _in_range({tp: committed.get(tp, latest[tp]) + args.shift_by for tp in tps},
                            earliest, latest)
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
    from sparklog.protocol.errors import GroupIdNotFoundError

    return admin_change(
        args, lambda admin: admin.delete_groups([args.group]), refused=GroupIdNotFoundError,
        error=_no_such_group(args.group), tolerated=False,
        done=f"Deletion of requested consumer groups ('{args.group}') was successful.")
