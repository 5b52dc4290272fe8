"""What every client subcommand shares: ``--bootstrap-server``, client properties, and the
error contract (one line on stderr and exit code 1; a traceback only with ``--verbose``)."""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from typing import Any

__all__ = ["add_common", "client_config", "wrap", "parse_kv", "CliError"]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class CliError(Exception):
    """A user-facing error: printed as is."""


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
                   help=f"broker(s) to connect to (default {DEFAULT_BOOTSTRAP})")
    p.add_argument("--command-config", default=None, metavar="FILE",
                   help="client properties file (Kafka key names)")
    p.add_argument("--command-property", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                   help="one client property (repeatable)")
    p.add_argument("--verbose", action="store_true", help="show tracebacks on errors")


def parse_kv(items: list[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise CliError(f"{what} expects KEY=VALUE, got {item!r}")
        out[k.strip()] = v
    return out


def client_config(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": args.bootstrap_server,
                            "client.id": "sparklog-cli",
                            "request.timeout.ms": 30000}
    if getattr(args, "command_config", None):
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
    conf.update(parse_kv(getattr(args, "command_property", []), "--command-property"))
    conf.update({k: v for k, v in extra.items() if v is not None})
    return conf


def admin_client(args: argparse.Namespace) -> Any:  # noqa: ANN401 - sparklog.client.AdminClient
    """An AdminClient for the CLI's connection options; use it in a ``with`` block."""
    from sparklog.client import AdminClient

    return AdminClient(client_config(args))


def wrap(fn: Callable[[argparse.Namespace], int | None]) -> Callable[[argparse.Namespace], int]:
    """The subcommand's ``func``: turns every failure into one line on stderr + exit 1."""

    def run(args: argparse.Namespace) -> int:
        try:
            return int(fn(args) or 0)
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            return 0
        except SystemExit:
            raise
        except BaseException as e:  # noqa: BLE001 - the CLI boundary
            if getattr(args, "verbose", False):
                traceback.print_exc()
            msg = str(e) or type(e).__name__
            if not isinstance(e, CliError):
                msg = f"{type(e).__name__}: {msg}"
            print(f"Error: {msg.splitlines()[0]}", file=sys.stderr)
            return 1

    return run
