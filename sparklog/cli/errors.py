"""The CLI's error contract, in one place: every failure is one line on stderr,
``Error: <what went wrong>``, and a non-zero exit code (1 at run time, 2 for a usage error:
argparse's own, or a ``UsageError`` a command raises for options that do not go together);
a traceback only with ``--verbose``.

The client raises typed exceptions whose messages were written for programs
(``topic 'x': INVALID_TOPIC_EXCEPTION``, ``GroupIdNotFoundError``); ``error_message`` turns
any of them into the sentence an operator reads, so no command formats errors itself and
``topics describe``, ``consume`` and ``groups delete`` say the same thing about the same
problem.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable

from sparklog.protocol.errors import ErrorCode, KafkaError, SparklogError

__all__ = ["CliError", "UsageError", "error_message", "no_such_topic", "print_error", "warn",
           "wrap", "FAILURE_EXIT", "USAGE_EXIT", "INTERRUPTED_EXIT"]

FAILURE_EXIT = 1
USAGE_EXIT = 2
INTERRUPTED_EXIT = 130

# What an error code means, for messages that carry only the code's name (Kafka's own
# descriptions of these codes, shortened).
_MEANING: dict[ErrorCode, str] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "the topic or partition does not exist",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "the topic name is illegal (a name may contain only "
                                       "ASCII alphanumerics, '.', '_' and '-') or the topic "
                                       "is internal",
    ErrorCode.GROUP_ID_NOT_FOUND: "the consumer group does not exist",
    ErrorCode.NON_EMPTY_GROUP: "the consumer group still has active members",
    ErrorCode.LEADER_NOT_AVAILABLE: "the partition has no leader right now",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "the broker is not the partition's leader",
    ErrorCode.NOT_ENOUGH_REPLICAS: "fewer in-sync replicas than min.insync.replicas",
    ErrorCode.MESSAGE_TOO_LARGE: "the message is larger than the topic's max.message.bytes",
    ErrorCode.RECORD_LIST_TOO_LARGE: "the batch is larger than the broker accepts",
    ErrorCode.REQUEST_TIMED_OUT: "the broker did not answer in time",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "the group coordinator is not available",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "not authorized to access the topic",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "not authorized to access the group",
}


class CliError(Exception):
    """A user-facing error whose message is already the sentence to print."""


class UsageError(CliError):
    """Options that cannot work together or a value argparse cannot check: exit 2."""


def error_message(exc: BaseException) -> str:
    """The one line (without ``Error: ``) that describes ``exc`` to an operator."""
    if isinstance(exc, CliError):
        text = str(exc)
    elif isinstance(exc, KafkaError):
        text = _kafka_message(exc)
    elif isinstance(exc, SparklogError | OSError | ValueError):
        # messages written for people: connection failures and timeouts (SparklogErrors
        # without a Kafka code), bad client configuration (the client raises ValueError for
        # a property it cannot parse), files
        text = str(exc) or type(exc).__name__
    else:  # a bug, not bad input: say so, and how to see where
        text = (f"unexpected {type(exc).__name__}: {exc} "
                f"(run with --verbose for the traceback)")
    lines = text.strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _kafka_message(exc: KafkaError) -> str:
    code = exc.error_code
    text = exc.message or ""
    meaning = _MEANING.get(code, code.name.lower().replace("_", " "))
    if not text or text == code.name:
        return meaning[0].upper() + meaning[1:]
    if text.endswith(code.name):  # "topic 'x': INVALID_TOPIC_EXCEPTION"
        return text[: -len(code.name)].rstrip(" :") + ": " + meaning
    return text


def no_such_topic(topic: str) -> CliError:
    """The words the admin client uses too (``topics describe``), so every command agrees."""
    return CliError(f"Topic '{topic}' does not exist")


def print_error(message: str) -> None:
    print(f"Error: {message}", file=sys.stderr, flush=True)


def warn(message: str) -> None:
    """Something the command did differently from what was asked, and went on."""
    print(f"Warning: {message}", file=sys.stderr, flush=True)


def wrap(fn: Callable[[argparse.Namespace], int | None]) -> Callable[[argparse.Namespace], int]:
    """The subcommand's ``func``: every failure becomes one line on stderr and exit 1."""

    def run(args: argparse.Namespace) -> int:
        try:
            return int(fn(args) or 0)
        except KeyboardInterrupt:
            return INTERRUPTED_EXIT
        except BrokenPipeError:  # `sparklog consume ... | head`: the reader has had enough
            return 0
        except SystemExit:
            raise
        except Exception as e:  # noqa: BLE001 - the CLI boundary
            if args.verbose:
                traceback.print_exc()
            print_error(error_message(e))
            return USAGE_EXIT if isinstance(e, UsageError) else FAILURE_EXIT

    return run
