"""The ``sparklog`` command line as it parses today, through the real entry point
(``sparklog.cli.main``): every subcommand's flags and their defaults, what argparse rejects
and what a command rejects before it creates a client (exit code 2, one ``Error:`` line on
stderr naming the flag), and the other checks made before connecting (exit code 1, one
``Error:`` line). No broker runs here: each case stops before a connection is tried.
"""

from __future__ import annotations

import argparse
import re

import pytest

from sparklog.cli.client_common import DEFAULT_BOOTSTRAP, client_config
from sparklog.cli.main import build_parser, main
from tests.helpers.batches import make_batch

COMMANDS = ["cluster", "configs", "consume", "dump-log", "groups", "offsets", "perf", "produce",
            "server", "topics", "transactions"]

# the shortest valid command line of every client subcommand (they all take add_common's flags)
CLIENT_COMMANDS = [
    ["topics", "create", "--topic", "t"],
    ["topics", "list"],
    ["topics", "describe"],
    ["topics", "alter", "--topic", "t"],
    ["topics", "delete", "--topic", "t"],
    ["produce", "--topic", "t"],
    ["consume", "--topic", "t"],
    ["offsets", "--topic", "t"],
    ["groups", "list"],
    ["groups", "describe", "--group", "g"],
    ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest"],
    ["groups", "delete", "--group", "g"],
    ["perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1"],
    ["perf", "consume", "--topic", "t", "--messages", "1"],
    ["configs", "--entity-type", "topics", "--entity-name", "t", "--describe"],
    ["cluster", "describe"],
    ["transactions", "list"],
    ["transactions", "describe", "--transactional-id", "x"],
]

# (command line, what argparse's one-line error says about it): exit code 2
REJECTED = [
    (["topics", "list", "--command-property", "novalue"],
     "argument --command-property: expects KEY=VALUE, got 'novalue'"),
    (["topics", "list", "--command-property", "=v"],
     "argument --command-property: expects KEY=VALUE, got '=v'"),
    (["topics", "create", "--topic", "t", "--config", "novalue"],
     "argument --config: expects KEY=VALUE, got 'novalue'"),
    (["topics", "alter", "--topic", "t", "--config", "x"],
     "argument --config: expects KEY=VALUE, got 'x'"),
    (["produce", "--topic", "t", "--header", "nokv"],
     "argument --header: expects KEY=VALUE, got 'nokv'"),
    (["produce", "--topic", "t", "--producer-property", "x"],
     "argument --producer-property: expects KEY=VALUE, got 'x'"),
    (["consume", "--topic", "t", "--consumer-property", "bad"],
     "argument --consumer-property: expects KEY=VALUE, got 'bad'"),
    (["server", "--set", "novalue"], "argument --set: expects KEY=VALUE, got 'novalue'"),
    (["nosuch"], "argument COMMAND: invalid choice: 'nosuch'"),
    (["groups", "list", "--bogus"], "unrecognized arguments: --bogus"),
    (["--log-level", "LOUD", "topics", "list"], "argument --log-level: invalid choice: 'LOUD'"),
    (["topics"], "the following arguments are required: ACTION"),
    (["topics", "create"], "the following arguments are required: --topic"),
    (["topics", "create", "--topic", "t", "--partitions", "x"],
     "argument --partitions: invalid int value: 'x'"),
    (["produce"], "the following arguments are required: --topic"),
    (["produce", "--topic", "t", "--acks", "2"], "argument --acks: invalid choice: '2'"),
    (["produce", "--topic", "t", "--compression", "brotli"],
     "argument --compression: invalid choice: 'brotli'"),
    (["produce", "--topic", "t", "--partition", "p0"],
     "argument --partition: invalid int value: 'p0'"),
    (["consume"], "the following arguments are required: --topic"),
    (["consume", "--topic", "t", "--isolation-level", "dirty"],
     "argument --isolation-level: invalid choice: 'dirty'"),
    (["consume", "--topic", "t", "--max-messages", "all"],
     "argument --max-messages: invalid int value: 'all'"),
    (["offsets"], "the following arguments are required: --topic"),
    (["groups"], "the following arguments are required: ACTION"),
    (["groups", "describe"], "one of the arguments --group --all-groups is required"),
    (["groups", "delete"], "the following arguments are required: --group"),
    (["groups", "reset-offsets", "--group", "g", "--all-topics"],
     "one of the arguments --to-earliest --to-latest --to-current --to-offset --to-datetime "
     "--shift-by is required"),
    (["groups", "reset-offsets", "--group", "g", "--to-earliest"],
     "one of the arguments --topic --all-topics is required"),
    (["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-latest"],
     "argument --to-latest: not allowed with argument --to-earliest"),
    (["groups", "reset-offsets", "--group", "g", "--topic", "t", "--all-topics", "--to-earliest"],
     "argument --all-topics: not allowed with argument --topic"),
    (["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--dry-run",
      "--execute"], "argument --execute: not allowed with argument --dry-run"),
    (["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-offset", "ten"],
     "argument --to-offset: invalid int value: 'ten'"),
    (["perf"], "the following arguments are required: ACTION"),
    (["perf", "produce", "--topic", "t", "--num-records", "10"],
     "the following arguments are required: --record-size"),
    (["perf", "consume", "--topic", "t"], "the following arguments are required: --messages"),
    (["dump-log"], "the following arguments are required: FILE"),
    (["server", "--port", "abc"], "argument --port: 'abc' is not a port number"),
    (["server", "--port", "99999"], "argument --port: port 99999 is out of range (0-65535)"),
    (["topics", "list", "--bootstrap-server", "127.0.0.1:notaport"],
     "argument --bootstrap-server: '127.0.0.1:notaport' is not HOST:PORT"),
    (["topics", "list", "--bootstrap-server", "h:1,h:70000"],
     "argument --bootstrap-server: 'h:70000': port 70000 is out of range"),
    (["produce", "--topic", "bad/name"],
     "argument --topic: topic name 'bad/name' is illegal: it may contain only ASCII "
     "alphanumerics, '.', '_' and '-'"),
    (["groups", "describe", "--group", "g", "--all-groups"],
     "argument --all-groups: not allowed with argument --group"),
    (["groups", "describe", "--group", "g", "--members", "--state"],
     "argument --state: not allowed with argument --members"),
]

# (command line, its one stderr line): options a command rejects before a client exists
# (they do not go together, or argparse cannot check the value), exit code 2
CHECKED = [
    (["topics", "alter", "--topic", "t"],
     "Error: topics alter needs --partitions N or --config KEY=VALUE"),
    (["consume", "--topic", "t", "--offset", "5"], "Error: --offset needs --partition"),
    (["consume", "--topic", "t", "--partition", "0", "--group", "g"],
     "Error: --partition cannot be used with --group"),
    (["offsets", "--topic", "t", "--time", "yesterday"],
     "Error: --time must be -1, -2, -3 or a timestamp in ms, got 'yesterday'"),
    (["offsets", "--topic", "t", "--partitions", "a,b"], "Error: --partitions: bad list 'a,b'"),
    (["perf", "produce", "--topic", "t", "--num-records", "0", "--record-size", "10"],
     "Error: --num-records must be > 0 and --record-size >= 0"),
    (["perf", "produce", "--topic", "t", "--num-records", "10", "--record-size", "-1"],
     "Error: --num-records must be > 0 and --record-size >= 0"),
]


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def check_parsed(argv: list[str], **want: object) -> None:
    """``argv`` parses, and the attributes named in ``want`` hold exactly those values."""
    got = vars(parse(*argv))
    assert {k: got[k] for k in want} == want


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int | str | None, str, str]:
    """``main(argv)``'s exit status (its return value, or the code of the SystemExit it
    raised) and what it wrote to stdout and stderr."""
    try:
        status: int | str | None = main(list(argv))
    except SystemExit as e:
        status = e.code
    out, err = capsys.readouterr()
    return status, out, err


def cli_error(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 1) -> str:
    """The one stderr line of a command that fails before it connects."""
    got, _, err = run(capsys, *argv)
    assert got == status, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    return lines[0]


# --------------------------------------------------------------------------- the entry point


def test_every_subcommand_is_registered():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(sub.choices) == COMMANDS


def test_no_command_prints_help_and_returns_2(capsys):
    status, out, err = run(capsys)
    assert status == 2 and out == "" and err.startswith("usage: sparklog")


@pytest.mark.parametrize("argv", [["--help"], *([c, "--help"] for c in COMMANDS),
                                  *(c[:2] + ["--help"] for c in CLIENT_COMMANDS
                                    if not c[1].startswith("-"))], ids=" ".join)
def test_help_goes_to_stdout_and_exits_0(capsys, argv):
    status, out, err = run(capsys, *argv)
    assert status == 0 and err == ""
    assert out.startswith(f"usage: {' '.join(['sparklog', *argv[:-1]])}")


@pytest.mark.parametrize("argv,message", REJECTED, ids=[" ".join(a) for a, _ in REJECTED])
def test_argparse_rejects_with_exit_2(capsys, argv, message):
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {message}"), err
    assert re.search(r"; see 'sparklog[a-z -]*--help'$", lines[0]), err  # where to read on


@pytest.mark.parametrize("argv,line", CHECKED, ids=[" ".join(a) for a, _ in CHECKED])
def test_checks_before_connecting_exit_2(capsys, argv, line):
    assert cli_error(capsys, *argv, status=2) == line


def test_log_level():
    check_parsed(["topics", "list"], log_level="INFO")
    check_parsed(["--log-level", "DEBUG", "topics", "list"], log_level="DEBUG")


# --------------------------------------------------------------------------- client options


@pytest.mark.parametrize("argv", CLIENT_COMMANDS, ids=" ".join)
def test_client_commands_share_the_connection_flags(argv):
    assert DEFAULT_BOOTSTRAP == "127.0.0.1:9092"
    check_parsed(argv, bootstrap_server=DEFAULT_BOOTSTRAP, command_config=None,
                 command_property=[], verbose=False)
    assert callable(parse(*argv).func)
    check_parsed([*argv, "--bootstrap-server", "h:1", "--verbose"], bootstrap_server="h:1",
                 verbose=True)


def test_client_properties_file_then_flags_then_command_settings(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("# comment\n! also a comment\n\nclient.id = from-file\nlinger.ms=7\n"
                     "request.timeout.ms=1000\n")
    args = parse("produce", "--topic", "t", "--bootstrap-server", "h:1",
                 "--command-config", str(props),
                 "--command-property", "linger.ms=8", "retries=3",
                 "--command-property", "acks=0")
    assert args.command_property == [("linger.ms", "8"), ("retries", "3"), ("acks", "0")]
    assert client_config(args, acks="all", compression=None) == {
        "bootstrap.servers": "h:1", "client.id": "from-file", "request.timeout.ms": "1000",
        "linger.ms": "8", "retries": "3", "acks": "all"}
    assert client_config(parse("topics", "list")) == {
        "bootstrap.servers": "127.0.0.1:9092", "client.id": "sparklog-cli",
        "request.timeout.ms": 30000}


def test_unreadable_client_properties_file_fails_before_connecting(capsys, tmp_path):
    missing = tmp_path / "missing.properties"
    assert cli_error(capsys, "topics", "list", "--command-config", str(missing)).startswith(
        "Error: cannot read --command-config: [Errno 2] No such file or directory")


# --------------------------------------------------------------------------- per command


def test_topics_flags():
    check_parsed(["topics", "create", "--topic", "t"], topics_action="create", topic="t",
                 partitions=None, replication_factor=None, config=[], if_not_exists=False)
    check_parsed(["topics", "create", "--topic", "t", "--partitions", "3",
                  "--replication-factor", "1", "--config", "a=1", "b=2", "--config", "c=3",
                  "--if-not-exists"],
                 partitions=3, replication_factor=1, config=[("a", "1"), ("b", "2"), ("c", "3")],
                 if_not_exists=True)
    check_parsed(["topics", "list"], exclude_internal=False)
    check_parsed(["topics", "describe"], topic=None, exclude_internal=False)
    check_parsed(["topics", "alter", "--topic", "t", "--delete-config", "a", "b"],
                 partitions=None, config=[], delete_config=["a", "b"])
    check_parsed(["topics", "delete", "--topic", "t"], if_exists=False)


def test_produce_flags():
    check_parsed(["produce", "--topic", "t"], key_separator=None, acks="all", compression="none",
                 header=[], partition=None, linger_ms=5, producer_property=[])
    check_parsed(["produce", "--topic", "t", "--key-separator", ":", "--acks", "0",
                  "--compression", "zstd", "--header", "a=1", "--header", "b=", "--partition",
                  "2", "--linger-ms", "0", "--producer-property", "batch.size=1"],
                 key_separator=":", acks="0", compression="zstd", header=[("a", "1"), ("b", "")],
                 partition=2, linger_ms=0, producer_property=[("batch.size", "1")])
    for acks in ("all", "-1", "0", "1"):
        check_parsed(["produce", "--topic", "t", "--acks", acks], acks=acks)


def test_consume_flags():
    printing = ("print_key", "print_offset", "print_partition", "print_timestamp",
                "print_headers")
    check_parsed(["consume", "--topic", "t"], from_beginning=False, group=None, partition=None,
                 offset=None, max_messages=None, timeout_ms=None, key_separator="\t", json=False,
                 isolation_level="read_uncommitted", consumer_property=[],
                 **dict.fromkeys(printing, False))
    check_parsed(["consume", "--topic", "t", "--from-beginning", "--partition", "1", "--offset",
                  "earliest", "--max-messages", "3", "--timeout-ms", "100", "--print-key",
                  "--print-offset", "--print-partition", "--print-timestamp", "--print-headers",
                  "--key-separator", "|", "--json", "--isolation-level", "read_committed",
                  "--consumer-property", "fetch.max.bytes=1"],
                 from_beginning=True, partition=1, offset="earliest", max_messages=3,
                 timeout_ms=100, key_separator="|", json=True, isolation_level="read_committed",
                 consumer_property=[("fetch.max.bytes", "1")], **dict.fromkeys(printing, True))
    check_parsed(["consume", "--topic", "t", "--group", "g"], group="g")


def test_offsets_flags():
    check_parsed(["offsets", "--topic", "t.*"], topic="t.*", partitions=None, time="-1")
    check_parsed(["offsets", "--topic", "t", "--partitions", "0,2", "--time", "earliest"],
                 partitions="0,2", time="earliest")


def test_groups_flags():
    check_parsed(["groups", "list"], groups_action="list", state=False)
    check_parsed(["groups", "describe", "--group", "g"], group="g", all_groups=False,
                 offsets=False, members=False, state=False, verbose=False)
    check_parsed(["groups", "describe", "--all-groups", "--members", "--verbose"], group=None,
                 all_groups=True, members=True, verbose=True)
    check_parsed(["groups", "reset-offsets", "--group", "g", "--topic", "a", "--topic", "b:0,1",
                  "--shift-by", "-2"],
                 topic=["a", "b:0,1"], all_topics=False, shift_by=-2, to_offset=None,
                 to_datetime=None, to_earliest=False, to_latest=False, to_current=False,
                 dry_run=False, execute=False)
    check_parsed(["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-offset", "5",
                  "--execute"], topic=None, all_topics=True, to_offset=5, execute=True)


def test_perf_flags():
    check_parsed(["perf", "produce", "--topic", "t", "--num-records", "10", "--record-size", "5"],
                 perf_action="produce", num_records=10, record_size=5, throughput=-1, acks="1",
                 compression="none", producer_props=[], arrow=False, arrow_chunk=100_000)
    check_parsed(["perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
                  "--throughput", "2.5", "--producer-props", "a=1", "b=2", "--arrow"],
                 throughput=2.5, producer_props=[("a", "1"), ("b", "2")], arrow=True)
    check_parsed(["perf", "consume", "--topic", "t", "--messages", "7"], perf_action="consume",
                 messages=7, timeout_ms=10000, per_record=False, from_latest=False,
                 show_detailed_stats=False, reporting_interval=5000, hide_header=False)
    check_parsed(["perf", "consume", "--topic", "t", "--messages", "7", "--timeout", "50",
                  "--show-detailed-stats", "--reporting-interval", "100", "--hide-header"],
                 timeout_ms=50, show_detailed_stats=True, reporting_interval=100,
                 hide_header=True)


def test_dump_log_flags(capsys, tmp_path):
    check_parsed(["dump-log", "a.log", "b.index"], files=["a.log", "b.index"], print_data=False,
                 deep_iteration=False, verbose=False)
    missing = tmp_path / "00000000000000000000.log"
    assert cli_error(capsys, "dump-log", str(missing)) == f"Error: {missing}: no such file"


def test_dump_log_depth_follows_the_flags(capsys, tmp_path):
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(make_batch(2) + make_batch(3, base_offset=2, key_prefix=b"x"))
    dumps = {}
    for flags in ([], ["--deep-iteration"], ["--print-data"]):
        status, out, _ = run(capsys, "dump-log", *flags, str(seg))
        assert status == 0
        dumps[" ".join(flags)] = out.splitlines()
    batch_lines = [ln for ln in dumps[""] if ln.startswith("baseOffset:")]
    assert len(batch_lines) == 2 and not any(ln.startswith("|") for ln in dumps[""])
    deep = [ln for ln in dumps["--deep-iteration"] if ln.startswith("| offset:")]
    assert len(deep) == 5 and not any("payload:" in ln for ln in deep)
    data = [ln for ln in dumps["--print-data"] if ln.startswith("| offset:")]
    assert len(data) == 5 and all("payload:" in ln for ln in data)
    assert "key: x2" in data[-1]


def test_server_flags():
    check_parsed(["server"], data_dir=None, host=None, port=None, config=None, set=[])
    check_parsed(["server", "--data-dir", "d", "--host", "0.0.0.0", "--port", "1", "--config",
                  "c", "--set", "a=1", "--set", "b=2"],
                 data_dir="d", host="0.0.0.0", port=1, config="c", set=[("a", "1"), ("b", "2")])


def test_server_rejects_a_bad_configuration_without_starting(capsys, tmp_path):
    status, _, err = run(capsys, "server", "--config", str(tmp_path / "missing.properties"))
    assert status == 2
    assert err.startswith("Error: invalid configuration: [Errno 2]")
    status, _, err = run(capsys, "server", "--set", "num.partitions=abc", "--data-dir",
                         str(tmp_path / "d"))
    assert status == 2 and err.startswith(
        "Error: invalid configuration: invalid value 'abc' for num.partitions")
    assert not (tmp_path / "d").exists()
