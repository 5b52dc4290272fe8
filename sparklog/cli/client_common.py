"""What every client subcommand shares: ``--bootstrap-server``, client properties,
``--verbose``, the client configuration built from them, and the one-call admin change."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from sparklog.cli.arguments import bootstrap_servers, key_value
from sparklog.cli.errors import CliError, wrap

if TYPE_CHECKING:
    from sparklog.client import AdminClient
    from sparklog.protocol.errors import KafkaError

__all__ = ["add_client_command", "add_common", "add_verbose", "client_config", "admin_client",
           "admin_change"]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def add_verbose(p: argparse.ArgumentParser, more: str = "") -> None:
    p.add_argument("--verbose", action="store_true",
                   help=f"{more}show the traceback of an error")


def add_common(p: argparse.ArgumentParser, verbose_help: str = "") -> None:
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, type=bootstrap_servers,
                   metavar="HOST:PORT",
                   help=f"broker(s) to connect to, comma-separated (default {DEFAULT_BOOTSTRAP})")
    p.add_argument("--command-config", default=None, metavar="FILE",
                   help="client properties file (Kafka key names)")
    p.add_argument("--command-property", action="extend", nargs="+", default=[],
                   type=key_value, metavar="KEY=VALUE", help="one client property (repeatable)")
    add_verbose(p, verbose_help)


def add_client_command(sub: argparse._SubParsersAction,
                       func: Callable[[argparse.Namespace], int | None], name: str,
                       verbose_help: str = "", **parser_kwargs: str) -> argparse.ArgumentParser:
    """The parser of a client subcommand ``name`` running ``func`` (errors reported by
    ``wrap``), with the options every client command takes (``add_common``)."""
    p = sub.add_parser(name, **parser_kwargs)
    add_common(p, verbose_help)
    p.set_defaults(func=wrap(func))
    return p


def client_config(args: argparse.Namespace, **extra: str | int | None) -> dict[str, str | int]:
    """Kafka client properties: the CLI's defaults < ``--command-config`` <
    ``--command-property`` < ``extra`` (the command's own options; None = not given)."""
    conf: dict[str, str | int] = {"bootstrap.servers": args.bootstrap_server,
                                  "client.id": "sparklog-cli",
                                  "request.timeout.ms": 30000}
    if args.command_config:
        try:
            with open(args.command_config, encoding="utf-8") as fh:
                for line in fh:
                    line = line.strip()
                    if not line or line[0] in "#!":
                        continue
                    k, _, v = line.partition("=")
                    conf[k.strip()] = v.strip()
        except OSError as e:
            raise CliError(f"cannot read --command-config: {e}") from None
    conf.update(args.command_property)
    conf.update({k: v for k, v in extra.items() if v is not None})
    return conf


def admin_client(args: argparse.Namespace) -> AdminClient:
    """An AdminClient for the CLI's connection options; use it in a ``with`` block."""
    from sparklog.client import AdminClient

    return AdminClient(client_config(args))


def admin_change(args: argparse.Namespace, change: Callable[[AdminClient], object], *,
                 refused: type[KafkaError], error: CliError, tolerated: bool, done: str) -> int:
    """One admin call that changes the cluster (create or delete a topic, delete a group),
    reported as Kafka's tools do: ``done`` on success; ``refused`` (the topic exists, the
    group does not) is ``error``, or a silent success when ``tolerated`` (``--if-exists``,
    ``--if-not-exists``)."""
    with admin_client(args) as admin:
        try:
            change(admin)
        except refused:
            if tolerated:
                return 0
            raise error from None
        print(done)
    return 0
