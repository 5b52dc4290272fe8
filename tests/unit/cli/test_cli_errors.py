"""The CLI's error contract, in process: every failure is one ``Error: ...`` line on stderr
with exit code 1 (2 for usage), worded for an operator, never a traceback or a bare
exception class or error-code name."""

from __future__ import annotations

import argparse

import pytest

from sparklog.cli.arguments import bootstrap_servers, key_value, port_number, topic_name
from sparklog.cli.errors import (
    CliError,
    UsageError,
    error_message,
    no_such_topic,
    wrap,
)
from sparklog.cli.main import main
from sparklog.client.connection import KafkaConnectionError
from sparklog.protocol.errors import (
    ErrorCode,
    GroupIdNotFoundError,
    InvalidTopicError,
    UnknownTopicOrPartitionError,
    error_for_code,
)


def test_kafka_errors_lose_their_class_name():
    assert error_message(UnknownTopicOrPartitionError("Topic 'x' does not exist")) == \
        str(no_such_topic("x"))
    assert error_message(GroupIdNotFoundError("Group 'g' does not exist.")) == \
        "Group 'g' does not exist."


def test_a_bare_error_code_name_becomes_its_meaning():
    msg = error_message(InvalidTopicError("topic 'bad/name': INVALID_TOPIC_EXCEPTION"))
    assert msg.startswith("topic 'bad/name': the topic name is illegal")
    assert "ASCII alphanumerics" in msg and "INVALID_TOPIC_EXCEPTION" not in msg
    assert error_message(error_for_code(ErrorCode.NOT_ENOUGH_REPLICAS)) == \
        "Fewer in-sync replicas than min.insync.replicas"
    # a code without a prepared sentence still reads as words, not as a constant
    assert error_message(error_for_code(ErrorCode.INVALID_PRODUCER_EPOCH)) == \
        "Invalid producer epoch"


def test_other_errors():
    assert error_message(CliError("said as is")) == "said as is"
    assert error_message(KafkaConnectionError("cannot connect to h:1")) == "cannot connect to h:1"
    assert error_message(ValueError("config acks: bad\nsecond line")) == "config acks: bad"
    bug = error_message(KeyError("x"))
    assert bug.startswith("unexpected KeyError: 'x'") and "--verbose" in bug


@pytest.mark.parametrize(("exc", "code"), [
    (CliError("runtime"), 1),
    (UsageError("--a needs --b"), 2),
    (UnknownTopicOrPartitionError("Topic 'x' does not exist"), 1),
    (RuntimeError("bug"), 1),
    (KeyboardInterrupt(), 130),
])
def test_wrap_exit_codes_and_one_line(capsys, exc, code):
    def fail(_args: argparse.Namespace) -> int:
        raise exc

    assert wrap(fail)(argparse.Namespace(verbose=False)) == code
    err = capsys.readouterr().err
    if code == 130:
        assert err == ""
    else:
        assert err.count("\n") == 1 and err.startswith("Error: ") and "Traceback" not in err


def test_verbose_adds_the_traceback(capsys):
    def fail(_args: argparse.Namespace) -> int:
        raise CliError("boom")

    assert wrap(fail)(argparse.Namespace(verbose=True)) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().endswith("Error: boom")


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == "sparklog 0.1.0\n"


def test_value_types():
    assert port_number("0") == 0 and port_number("65535") == 65535
    assert bootstrap_servers("a:1, [::1]:2") == "a:1, [::1]:2"
    assert topic_name("ok.name_1-x") == "ok.name_1-x"
    assert key_value("a = b=c") == ("a", " b=c")
    for fn, bad in ((port_number, "-1"), (bootstrap_servers, ","), (topic_name, ".."),
                    (key_value, "=v")):
        with pytest.raises(argparse.ArgumentTypeError):
            fn(bad)
