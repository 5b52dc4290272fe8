"""The sink's mode against brokers that do not allow two-phase commit (Kafka's default):
at-least-once by default, and ``exactlyOnce=true`` an error that says what to change."""

import pytest

from sparklog.spark.options import OptionError, parse_sink_options
from sparklog.spark.sink_txn import resolve_exactly_once


@pytest.fixture(scope="module")
def broker_config() -> dict[str, str]:
    return {"transaction.two.phase.commit.enable": "false"}


def test_brokers_without_two_phase_commit(bootstrap):
    opts = {"bootstrap.servers": bootstrap, "topic": "t"}
    assert resolve_exactly_once(parse_sink_options(opts)) is False
    assert resolve_exactly_once(parse_sink_options({**opts, "exactlyOnce": "false"})) is False
    with pytest.raises(OptionError, match="transaction.two.phase.commit.enable=true"):
        resolve_exactly_once(parse_sink_options({**opts, "exactlyOnce": "true"}))

