"""Topic names: the wire-level rule every layer applies the same way (Kafka's ``Topic.validate``).

A name is legal when it is 1..249 ASCII alphanumerics, ``.``, ``_`` or ``-`` and is not
``.`` or ``..``; the controller (creation), the broker (auto-creation) and the CLI
(arguments) all reject the same names with the same message.
"""

from __future__ import annotations

import re

from sparklog.protocol.errors import InvalidTopicError

__all__ = ["MAX_TOPIC_NAME_LENGTH", "validate_topic_name"]

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str | None) -> None:
    """Kafka's rules (``Topic.validate``); raises InvalidTopicError."""
    if name is None or name == "":
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(name)} characters long; the maximum is {MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL.match(name):
        raise InvalidTopicError(
            f"topic name {name!r} is illegal: it may contain only ASCII alphanumerics, '.', '_' and '-'"
        )
