"""``sparklog transactions list|describe`` (kafka-transactions.sh).

``list`` prints one row per transactional id the brokers coordinate (filters: ``--state``,
``--producer-id``, ``--duration-ms`` for transactions open at least that long, which is how
stuck ones are found, ``--transactional-id-pattern``); ``describe`` prints Kafka's columns for one id, the partitions of
its open transaction included.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from sparklog.cli.client_common import add_client_command, admin_client
from sparklog.cli.groups_cmd import table

__all__ = ["add_parser", "LIST_COLUMNS", "DESCRIBE_COLUMNS"]

LIST_COLUMNS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_COLUMNS = ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                    "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                    "TransactionDurationMs", "TopicPartitions"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("transactions", help="list or describe transactions",
                              description="Inspect transactions (like kafka-transactions.sh).")
    sub = p.add_subparsers(dest="transactions_action", metavar="ACTION")
    sub.required = True

    ls = add_client_command(sub, _list, "list", help="list transactional ids and their state")
    ls.add_argument("--state", action="append", default=[], metavar="STATE",
                    help="only this state (Ongoing, CompleteCommit, ...; repeatable)")
    ls.add_argument("--producer-id", action="append", default=[], type=int, metavar="ID",
                    help="only this producer id (repeatable)")
    ls.add_argument("--duration-ms", type=int, default=-1, metavar="MS",
                    help="only transactions open at least this long")
    ls.add_argument("--transactional-id-pattern", default=None, metavar="REGEX",
                    help="only transactional ids this regular expression matches whole")

    d = add_client_command(sub, _describe, "describe",
                           help="one transactional id's state and partitions")
    d.add_argument("--transactional-id", required=True, help="the id to describe")
    return p


def _list(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        found = admin.list_transactions(args.state, args.producer_id, args.duration_ms,
                                        args.transactional_id_pattern)
    print(table(LIST_COLUMNS, [[t.transactional_id, t.coordinator_id, t.producer_id, t.state]
                               for t in found]))
    return 0


def _describe(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        d = admin.describe_transactions([args.transactional_id])[0]
    open_ = d.start_ms >= 0
    print(table(DESCRIBE_COLUMNS, [[
        d.coordinator_id, d.transactional_id, d.producer_id, d.producer_epoch, d.state,
        d.timeout_ms, d.start_ms if open_ else "None",
        int(time.time() * 1000) - d.start_ms if open_ else "None",
        ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions)]]))
    return 0
