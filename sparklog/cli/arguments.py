"""Argument parsing shared by every subcommand: the parser class and the value types that
reject bad input while parsing, so a typo is a usage error (one line, exit 2) and never a
traceback from deep inside the client or the broker. (The client and controller modules they
need are imported when a value is checked: ``--help`` and ``dump-log`` stay fast.)
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from sparklog.cli.errors import USAGE_EXIT, print_error
from sparklog.protocol.errors import InvalidTopicError

__all__ = ["CliParser", "action_parsers", "add_flags", "port_number", "bootstrap_servers",
           "topic_name", "key_value"]


class CliParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors follow the CLI's error contract: one line,
    ``Error: ...``, naming the help to read, exit 2. Subcommand parsers inherit it."""

    def error(self, message: str) -> NoReturn:
        print_error(f"{message}; see '{self.prog} --help'")
        raise SystemExit(USAGE_EXIT)


def add_flags(p: argparse._ActionsContainer, helps: dict[str, str]) -> None:
    """On/off options (``store_true``): each ``--flag`` of ``helps`` with its help text."""
    for flag, text in helps.items():
        p.add_argument(flag, action="store_true", help=text)


def action_parsers(subparsers: Any, name: str, *, help: str, description: str
                   ) -> tuple[argparse.ArgumentParser, Any]:
    """The parser of a command that takes an ACTION first (``topics create``, ``groups
    list``, ``perf produce``) and its actions' subparsers: a command without its action is a
    usage error."""
    p = subparsers.add_parser(name, help=help, description=description)
    actions = p.add_subparsers(dest=f"{name}_action", metavar="ACTION")
    actions.required = True
    return p, actions


def port_number(text: str) -> int:
    """A TCP port, 0-65535 (0: any free port)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is out of range (0-65535)")
    return port


def bootstrap_servers(text: str) -> str:
    """A comma-separated HOST:PORT list, checked here so that a bad one is a usage error."""
    from sparklog.client.connection import parse_host_port  # pyarrow: not for --help

    items = [s for s in text.split(",") if s.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expects HOST:PORT[,HOST:PORT...]")
    for item in items:
        try:
            _host, port = parse_host_port(item)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"'{item.strip()}' is not HOST:PORT (the port must be a number)") from None
        if not 0 < port <= 65535:
            raise argparse.ArgumentTypeError(
                f"'{item.strip()}': port {port} is out of range (1-65535)")
    return text


def topic_name(text: str) -> str:
    """A topic name by Kafka's rules, with the same explanation ``topics create`` gives."""
    from sparklog.protocol.topic_names import validate_topic_name

    try:
        validate_topic_name(text)
    except InvalidTopicError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` -> (key, value); the value may be empty and may contain '='."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expects KEY=VALUE, got '{text}'")
    return key.strip(), value
