"""``sparklog topics create|list|describe|alter|delete`` (kafka-topics.sh)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparklog.cli.arguments import action_parsers, add_flags, key_value, topic_name
from sparklog.cli.client_common import add_client_command, admin_change, admin_client
from sparklog.cli.errors import CliError, UsageError, no_such_topic

if TYPE_CHECKING:
    from sparklog.client.metadata import PartitionMetadata

__all__ = ["add_parser"]

_CONFIG_HELP = "topic config override, e.g. retention.ms=86400000 (repeatable)"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p, sub = action_parsers(subparsers, "topics",
                            help="create, list, describe, alter, delete topics; elect leaders, "
                                 "reassign partitions",
                            description="Manage topics (like kafka-topics.sh).")

    c = add_client_command(sub, _create, "create", help="create a topic")
    c.add_argument("--topic", required=True, type=topic_name, help="name of the new topic")
    c.add_argument("--partitions", type=int, default=None,
                   help="number of partitions (default: the broker's num.partitions)")
    c.add_argument("--replication-factor", type=int, default=None,
                   help="copies of each partition (default: the broker's "
                        "default.replication.factor)")
    c.add_argument("--config", action="extend", nargs="+", default=[], type=key_value,
                   metavar="KEY=VALUE", help=_CONFIG_HELP)
    c.add_argument("--if-not-exists", action="store_true",
                   help="succeed without changes when the topic already exists")

    ls = add_client_command(sub, _list, "list", help="list topic names")
    _add_exclude_internal(ls)

    d = add_client_command(sub, _describe, "describe",
                           help="partitions, leaders, replicas, ISR and configs")
    d.add_argument("--topic", default=None, help="the topic to describe (default: all)")
    add_flags(d, {
        "--under-replicated-partitions":
            "only partitions whose ISR is smaller than their replica list",
        "--unavailable-partitions": "only partitions without a live leader",
    })
    _add_exclude_internal(d)

    a = add_client_command(sub, _alter, "alter", help="add partitions or change configs")
    a.add_argument("--topic", required=True, help="the topic to change")
    a.add_argument("--partitions", type=int, default=None,
                   help="new, larger number of partitions")
    a.add_argument("--config", action="extend", nargs="+", default=[], type=key_value,
                   metavar="KEY=VALUE", help=_CONFIG_HELP)
    a.add_argument("--delete-config", action="extend", nargs="+", default=[], metavar="KEY",
                   help="remove a config override, back to the default (repeatable)")

    e = add_client_command(sub, _elect_leaders,
        "elect-leaders", help="elect partition leaders (like kafka-leader-election.sh)",
        description="Move leadership to each partition's preferred replica (the first one, "
                    "when it is live and in the ISR), or, with --election-type unclean, elect "
                    "a leader for partitions that have none (possibly losing records).")
    target = e.add_mutually_exclusive_group(required=True)
    target.add_argument("--topic", default=None, help="the topic whose partitions to elect")
    target.add_argument("--all-topic-partitions", action="store_true",
                        help="every partition of every topic")
    e.add_argument("--partition", type=int, default=None,
                   help="only this partition of --topic")
    e.add_argument("--election-type", choices=["preferred", "unclean"], default="preferred",
                   type=str.lower, help="preferred (default) or unclean")

    r = add_client_command(sub, _reassign,
        "reassign", help="move a partition's replicas (like kafka-reassign-partitions.sh)",
        description="Move a partition to new replicas: the new ones are added and catch up, "
                    "then the old ones are dropped; or cancel an ongoing move, or list them.")
    r.add_argument("--topic", default=None, help="the topic of the partition")
    r.add_argument("--partition", type=int, default=None, help="the partition to move")
    what = r.add_mutually_exclusive_group(required=True)
    what.add_argument("--replicas", type=_broker_ids, default=None, metavar="ID,ID,...",
                      help="the new replica list, preferred leader first")
    add_flags(what, {
        "--cancel": "cancel the partition's ongoing reassignment",
        "--list": "list ongoing reassignments (of --topic, or all)",
    })

    x = add_client_command(sub, _delete, "delete", help="delete a topic")
    x.add_argument("--topic", required=True, help="the topic to delete")
    x.add_argument("--if-exists", action="store_true",
                   help="succeed without changes when the topic does not exist")
    return p


def _add_exclude_internal(p: argparse.ArgumentParser) -> None:
    p.add_argument("--exclude-internal", action="store_true",
                   help="leave out internal topics (__consumer_offsets, ...)")


def _create(args: argparse.Namespace) -> int:
    from sparklog.client import NewTopic
    from sparklog.protocol.errors import TopicAlreadyExistsError

    topic = NewTopic(args.topic, args.partitions if args.partitions is not None else -1,
                     args.replication_factor if args.replication_factor is not None else -1,
                     dict(args.config))
    return admin_change(args, lambda admin: admin.create_topics([topic]),
                        refused=TopicAlreadyExistsError,
                        error=CliError(f"Topic '{args.topic}' already exists."),
                        tolerated=args.if_not_exists, done=f"Created topic {args.topic}.")


def _list(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        for name, md in sorted(admin.list_topics().items()):
            if args.exclude_internal and md.is_internal:
                continue
            print(name)
    return 0


def _describe(args: argparse.Namespace) -> int:
    from sparklog.storage.checkpoints import topic_id_to_str

    only = _partition_filter(args)
    with admin_client(args) as admin:
        if args.topic:
            topics = admin.describe_topics([args.topic])
        else:
            topics = admin.list_topics()
        for name in sorted(topics):
            md = topics[name]
            if args.exclude_internal and md.is_internal:
                continue
            parts = md.partitions
            if only is not None:
                # the filters print matching partitions only, as kafka-topics.sh does
                parts = {p: pm for p, pm in parts.items() if only(pm)}
            else:
                try:
                    cfg = admin.describe_configs(name)
                    overrides = ",".join(
                        f"{k}={e.value}" for k, e in sorted(cfg.items())
                        if e.source == "DYNAMIC_TOPIC_CONFIG" and not e.is_sensitive)
                except Exception:  # configs are a bonus; partitions are what matters
                    overrides = ""
                rf = len(next(iter(parts.values())).replicas) if parts else 0
                print(f"Topic: {name}\tTopicId: {topic_id_to_str(md.topic_id)}\t"
                      f"PartitionCount: {len(parts)}\tReplicationFactor: {rf}\t"
                      f"Configs: {overrides}")
            for p in sorted(parts):
                pm = parts[p]
                leader = str(pm.leader) if pm.leader >= 0 else "none"
                line = (f"\tTopic: {name}\tPartition: {p}\tLeader: {leader}\t"
                        f"Replicas: {','.join(map(str, pm.replicas))}\t"
                        f"Isr: {','.join(map(str, pm.isr))}")
                if pm.offline_replicas:
                    line += f"\tOffline: {','.join(map(str, pm.offline_replicas))}"
                print(line)
    return 0


def _partition_filter(args: argparse.Namespace) -> Callable[[PartitionMetadata], bool] | None:
    """The partitions ``--under-replicated-partitions`` / ``--unavailable-partitions`` keep
    (either one, when both are given); None without them."""
    tests: list[Callable[[PartitionMetadata], bool]] = []
    if args.under_replicated_partitions:
        tests.append(lambda pm: len(pm.isr) < len(pm.replicas))
    if args.unavailable_partitions:
        tests.append(lambda pm: pm.leader < 0)
    if not tests:
        return None
    return lambda pm: any(t(pm) for t in tests)


def _alter(args: argparse.Namespace) -> int:
    configs: dict[str, str | None] = dict(args.config)
    for k in args.delete_config:
        configs[k] = None
    if args.partitions is None and not configs:
        raise UsageError("topics alter needs --partitions N or --config KEY=VALUE")
    with admin_client(args) as admin:
        if args.partitions is not None:
            current = admin.describe_topics([args.topic])[args.topic]
            if args.partitions <= len(current.partitions):
                raise CliError(f"The number of partitions for a topic can only be increased. "
                               f"Topic {args.topic} currently has {len(current.partitions)} "
                               f"partitions, {args.partitions} would not be an increase.")
            admin.create_partitions({args.topic: args.partitions})
            print("Adding partitions succeeded!")
        if configs:
            admin.describe_topics([args.topic])
            admin.alter_configs(args.topic, configs)
            print(f"Completed updating config for topic {args.topic}.")
    return 0


def _elect_leaders(args: argparse.Namespace) -> int:
    """kafka-leader-election.sh's report: the partitions elected, those that already had
    the right leader, and each failure; exit 1 when any failed."""
    from sparklog.protocol.errors import ErrorCode

    if args.partition is not None and args.topic is None:
        raise UsageError("--partition needs --topic")
    kind = args.election_type.upper()
    with admin_client(args) as admin:
        partitions = None
        if args.topic is not None:
            md = admin.describe_topics([args.topic])[args.topic]
            partitions = {args.topic: [args.partition] if args.partition is not None
                          else sorted(md.partitions)}
        results = admin.elect_leaders(1 if kind == "UNCLEAN" else 0, partitions)
    done = sorted(tp for tp, err in results.items() if err is None)
    already = sorted(tp for tp, err in results.items()
                     if err is not None and err.error_code == ErrorCode.ELECTION_NOT_NEEDED)
    failed = sorted((tp, err) for tp, err in results.items()
                    if err is not None and err.error_code != ErrorCode.ELECTION_NOT_NEEDED)
    if done:
        print(f"Successfully completed leader election ({kind}) for partitions "
              + ", ".join(f"{tp.topic}-{tp.partition}" for tp in done))
    if already:
        print("Valid replica already elected for partitions "
              + ", ".join(f"{tp.topic}-{tp.partition}" for tp in already))
    for tp, err in failed:
        print(f"Error completing leader election ({kind}) for partition: "
              f"{tp.topic}-{tp.partition}: {err}")
    if not results:
        print(f"No partition needed a leader election ({kind})")
    return 1 if failed else 0


def _broker_ids(text: str) -> list[int]:
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects broker ids like 1,2,3, got {text!r}") \
            from None
    if not ids:
        raise argparse.ArgumentTypeError("expects at least one broker id")
    return ids


def _reassign(args: argparse.Namespace) -> int:
    """kafka-reassign-partitions.sh's messages for --execute, --cancel and --list."""
    from sparklog.client import TopicPartition

    with admin_client(args) as admin:
        if args.list:
            ongoing = admin.list_partition_reassignments(
                None if args.topic is None else {args.topic: sorted(
                    admin.describe_topics([args.topic])[args.topic].partitions)})
            print("Current partition reassignments:" if ongoing
                  else "No partition reassignments found.")
            for tp, r in sorted(ongoing.items()):
                print(f"{tp.topic}-{tp.partition}: replicas: {','.join(map(str, r.replicas))}."
                      f" adding: {','.join(map(str, r.adding_replicas))}."
                      f" removing: {','.join(map(str, r.removing_replicas))}.")
            return 0
        if args.topic is None or args.partition is None:
            raise UsageError("--replicas and --cancel need --topic and --partition")
        tp = TopicPartition(args.topic, args.partition)
        err = admin.alter_partition_reassignments(
            {tp: None if args.cancel else args.replicas})[tp]
    name = f"{tp.topic}-{tp.partition}"
    if err is not None:
        raise CliError(f"Error {'cancelling' if args.cancel else 'reassigning'} partition "
                       f"{name}: {err}")
    print(f"Successfully {'cancelled' if args.cancel else 'started'} partition reassignment "
          f"for {name}")
    return 0


def _delete(args: argparse.Namespace) -> int:
    from sparklog.protocol.errors import UnknownTopicOrPartitionError

    return admin_change(args, lambda admin: admin.delete_topics([args.topic]),
                        refused=UnknownTopicOrPartitionError, error=no_such_topic(args.topic),
                        tolerated=args.if_exists, done=f"Deleted topic {args.topic}.")
