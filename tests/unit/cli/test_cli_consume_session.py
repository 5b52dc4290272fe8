"""``sparklog consume --group --timeout-ms``: the clock starts at the group's assignment, and
a run that never got one says why nothing came, with a consumer that stands in for the
client's (the group's timing is what is under test, not the protocol)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from sparklog.cli import consume_cmd
from sparklog.cli.errors import CliError
from sparklog.cli.main import build_parser
from sparklog.client import PartitionMetadata, TopicMetadata, TopicPartition


class GroupConsumer:
    """Subscribes, and is assigned ``assignment`` once ``join_s`` have passed (never when
    None); no records ever arrive."""

    def __init__(self, join_s: float | None, assignment: list[TopicPartition]) -> None:
        self.join_s = join_s
        self.assignment = assignment
        self.on_assign: Callable | None = None
        self.created = time.monotonic()

    def list_topics(self, topic: str) -> dict[str, TopicMetadata]:
        return {topic: TopicMetadata(topic, partitions={0: PartitionMetadata(0, 1, [1], [1])})}

    def subscribe(self, _topics: list[str], on_assign: Callable) -> None:
        self.on_assign = on_assign

    def consume(self, _n: int, timeout: float) -> list:
        joined = self.join_s is not None and time.monotonic() - self.created >= self.join_s
        if joined and self.on_assign is not None:
            self.on_assign(self, self.assignment)
            self.on_assign = None
        time.sleep(timeout)
        return []


def _session(consumer: GroupConsumer, timeout_ms: int) -> consume_cmd._Session:
    args = build_parser().parse_args(["consume", "--topic", "t", "--group", "g",
                                      "--timeout-ms", str(timeout_ms)])
    return consume_cmd._Session(consumer, args)  # type: ignore[arg-type]


def test_timeout_counts_from_the_assignment():
    session = _session(GroupConsumer(0.6, [TopicPartition("t", 0)]), timeout_ms=400)
    t0 = time.monotonic()
    session.start()
    session.read()
    took = time.monotonic() - t0
    assert session.assigned_at is not None
    assert took >= 0.6 + 0.4 - 0.05, took  # the join, then the whole timeout
    assert session.note == ""


def test_no_assignment_within_the_join_wait_is_an_error(monkeypatch):
    monkeypatch.setattr(consume_cmd, "JOIN_WAIT_MS", 500)
    session = _session(GroupConsumer(None, []), timeout_ms=100)
    session.start()
    with pytest.raises(CliError, match=r"Group 'g' assigned this consumer no partitions within "
                                       r"0\.5 s: the group is still rebalancing"):
        session.read()


def test_an_empty_assignment_is_explained():
    session = _session(GroupConsumer(0.0, []), timeout_ms=200)
    session.start()
    session.read()
    assert session.note == ("Group 'g' assigned this consumer no partitions of 't': "
                            "its other members hold them all")
