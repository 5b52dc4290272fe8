"""``sparklog`` console script: a thin registry of subcommands.

Every module ``sparklog/cli/<name>_cmd.py`` exposes ``add_parser(subparsers)``, which adds
its subcommand and sets ``func`` (``func(args) -> int``) as a parser default. Modules are
discovered by name, so adding a command never means editing this file.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from collections.abc import Sequence

import sparklog
import sparklog.cli as cli_pkg
from sparklog.cli.arguments import CliParser
from sparklog.cli.errors import INTERRUPTED_EXIT, USAGE_EXIT

log = logging.getLogger(__name__)

__all__ = ["main", "build_parser"]


def _command_modules() -> list[str]:
    names = [m.name for m in pkgutil.iter_modules(cli_pkg.__path__) if m.name.endswith("_cmd")]
    return [f"sparklog.cli.{n}" for n in sorted(names)]


def build_parser() -> argparse.ArgumentParser:
    parser = CliParser(
        prog="sparklog",
        description="Spark-native streaming storage speaking the Apache Kafka protocol.",
    )
    parser.add_argument("--version", action="version", version=f"sparklog {sparklog.__version__}")
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="log level for messages on stderr (default INFO)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod_name in _command_modules():
        try:
            mod = importlib.import_module(mod_name)
        except Exception as exc:  # one broken command must not take the others down
            print(f"sparklog: command module {mod_name} failed to load: {exc}", file=sys.stderr)
            continue
        add = getattr(mod, "add_parser", None)
        if add is not None:
            add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return USAGE_EXIT
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT


if __name__ == "__main__":
    sys.exit(main())
