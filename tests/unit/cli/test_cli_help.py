"""Every option of every ``sparklog`` subcommand says what it does in ``--help``."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from sparklog.cli.main import build_parser


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:  # argparse keeps its subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_option_has_help_text():
    missing = []
    commands = 0
    for parser in _parsers(build_parser()):
        commands += 1
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{parser.prog} {'/'.join(action.option_strings) or action.dest}")
    assert commands > 15  # the registry found the commands
    assert not missing, "options without help: " + ", ".join(missing)

