"""``sparklog configs`` (kafka-configs.sh): describe and change topic overrides and dynamic
broker configs, per broker (``--entity-name ID``) or cluster-wide (``--entity-default``).

Output follows kafka-configs.sh: ``--describe`` lists the configs set at that level (a
topic's overrides, a broker's dynamic configs, the cluster's dynamic defaults), each with
its synonyms, the layers that set it from highest precedence down; ``--all`` lists every
config. Changes go through IncrementalAlterConfigs, so the keys not named stay as they are.
"""

from __future__ import annotations

import argparse
from typing import Any

from sparklog.cli.client_common import add_client_command, admin_client
from sparklog.cli.errors import UsageError

__all__ = ["add_parser"]

# The source of the configs set at each level (what --describe lists without --all).
_OWN_SOURCE = {"topics": "DYNAMIC_TOPIC_CONFIG", "brokers": "DYNAMIC_BROKER_CONFIG",
               "default": "DYNAMIC_DEFAULT_BROKER_CONFIG"}


def _key_values(text: str) -> list[tuple[str, str]]:
    """``k=v[,k=v]`` (kafka-configs.sh's --add-config; a list value goes in [a,b])."""
    out: list[tuple[str, str]] = []
    for item in _split_top_level(text):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"expects KEY=VALUE[,KEY=VALUE], got '{text}'")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out.append((key.strip(), value))
    return out


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside [...]."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += (ch == "[") - (ch == "]")
        cur += ch
    parts.append(cur)
    return [p for p in parts if p.strip()]


def _keys(text: str) -> list[str]:
    return [k.strip() for k in text.split(",") if k.strip()]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = add_client_command(subparsers, _run,
        "configs", help="describe or change topic and dynamic broker configs",
        description="Describe or change topic overrides and dynamic broker configs "
                    "(like kafka-configs.sh).")
    p.add_argument("--entity-type", required=True, choices=["topics", "brokers"],
                   help="what the configs belong to")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--entity-name", default=None,
                     help="the topic name, or the broker id")
    who.add_argument("--entity-default", action="store_true",
                     help="the cluster-wide default of every broker (brokers only)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--describe", action="store_true", help="list the configs")
    what.add_argument("--alter", action="store_true",
                      help="change configs (with --add-config and/or --delete-config)")
    p.add_argument("--all", action="store_true",
                   help="with --describe: every config, not only those set at this level")
    p.add_argument("--add-config", action="extend", default=[], type=_key_values,
                   metavar="K=V[,K=V]", help="configs to set (repeatable)")
    p.add_argument("--delete-config", action="extend", default=[], type=_keys,
                   metavar="K[,K]", help="configs to remove, back to the default (repeatable)")
    return p


def _target(args: argparse.Namespace) -> tuple[str, str, str]:
    """(resource type for the client, name, level) from the entity options."""
    if args.entity_type == "topics":
        if args.entity_default or not args.entity_name:
            raise UsageError("--entity-type topics needs --entity-name TOPIC")
        return "topic", args.entity_name, "topics"
    if args.entity_default:
        return "broker", "", "default"
    if args.entity_name is None:
        raise UsageError("--entity-type brokers needs --entity-name ID or --entity-default")
    if not args.entity_name.isdigit():
        raise UsageError(f"the broker id must be an integer, got '{args.entity_name}'")
    return "broker", args.entity_name, "brokers"


def _what(level: str, name: str) -> str:
    return {"topics": f"topic {name}", "brokers": f"broker {name}",
            "default": "brokers in the cluster"}[level]


def _run(args: argparse.Namespace) -> int:
    rtype, name, level = _target(args)
    if args.describe and (args.add_config or args.delete_config):
        raise UsageError("--add-config and --delete-config go with --alter")
    with admin_client(args) as admin:
        if args.describe:
            entries = admin.describe_configs(name, rtype, synonyms=True)
            shown = [e for _, e in sorted(entries.items())
                     if args.all or e.source == _OWN_SOURCE[level]]
            if level == "default":
                print("Default configs for brokers in the cluster are:")
            else:
                print(f"{'All' if args.all else 'Dynamic'} configs for {_what(level, name)} are:")
            for e in shown:
                value = "null" if e.is_sensitive or e.value is None else e.value
                syns = ", ".join(f"{src}:{n}={'null' if v is None else v}"
                                 for src, n, v in e.synonyms)
                print(f"  {e.name}={value} sensitive={str(e.is_sensitive).lower()} "
                      f"synonyms={{{syns}}}")
            return 0
        changes: dict[str, str | None] = dict(args.add_config)
        changes.update(dict.fromkeys(args.delete_config))
        if not changes:
            raise UsageError("--alter needs --add-config K=V or --delete-config K")
        admin.alter_configs(name, changes, rtype)
        if level == "default":
            print("Completed updating default config for brokers in the cluster.")
        else:
            print(f"Completed updating config for {_what(level, name)}.")
    return 0
