"""The ``sparklog`` command line as it parses today, through the real entry point
(``sparklog.cli.main``): every subcommand's flags and their defaults, what argparse rejects
(exit code 2, the usage error names the flag), and the checks a command makes before it
creates a client (exit code 1, one ``Error:`` line on stderr). No broker runs here: each
case stops before a connection is tried.
"""

from __future__ import annotations

import argparse

import pytest

from sparklog.cli.client_common import DEFAULT_BOOTSTRAP, client_config
from sparklog.cli.main import build_parser, main
from tests.helpers.batches import make_batch

COMMANDS = ["consume", "dump-log", "groups", "offsets", "perf", "produce", "server", "topics"]

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
]


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int | str | None, str, str]:
    """``main(argv)``'s exit status (its return value, or the code of the SystemExit it
    raised) and what it wrote to stdout and stderr."""
    try:
        status: int | str | None = main(list(argv))
    except SystemExit as e:
        status = e.code
    out, err = capsys.readouterr()
    return status, out, err


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The last stderr line of a command line argparse rejects (exit code 2)."""
    status, _, err = run(capsys, *argv)
    assert status == 2, err
    return err.strip().splitlines()[-1]


def cli_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one stderr line of a command that fails before it connects (exit code 1)."""
    status, _, err = run(capsys, *argv)
    assert status == 1, err
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


def test_unknown_command_and_flag(capsys):
    assert "argument COMMAND: invalid choice: 'nosuch'" in usage_error(capsys, "nosuch")
    assert "unrecognized arguments: --bogus" in usage_error(capsys, "groups", "list", "--bogus")


def test_log_level(capsys):
    assert parse("topics", "list").log_level == "INFO"
    assert parse("--log-level", "DEBUG", "topics", "list").log_level == "DEBUG"
    assert "argument --log-level: invalid choice: 'LOUD'" in usage_error(
        capsys, "--log-level", "LOUD", "topics", "list")


# --------------------------------------------------------------------------- client options


@pytest.mark.parametrize("argv", CLIENT_COMMANDS, ids=" ".join)
def test_client_commands_share_the_connection_flags(argv):
    args = parse(*argv)
    assert args.bootstrap_server == DEFAULT_BOOTSTRAP == "127.0.0.1:9092"
    assert args.command_config is None and args.command_property == [] and not args.verbose
    assert callable(args.func)
    args = parse(*argv, "--bootstrap-server", "h:1", "--verbose")
    assert args.bootstrap_server == "h:1" and args.verbose


def test_client_properties_file_then_flags_then_command_settings(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("# comment\n! also a comment\n\nclient.id = from-file\nlinger.ms=7\n"
                     "request.timeout.ms=1000\n")
    args = parse("produce", "--topic", "t", "--bootstrap-server", "h:1",
                 "--command-config", str(props),
                 "--command-property", "linger.ms=8", "retries=3",
                 "--command-property", "acks=0")
    assert args.command_property == ["linger.ms=8", "retries=3", "acks=0"]  # extend, repeatable
    assert client_config(args, acks="all", compression=None) == {
        "bootstrap.servers": "h:1", "client.id": "from-file", "request.timeout.ms": "1000",
        "linger.ms": "8", "retries": "3", "acks": "all"}
    assert client_config(parse("topics", "list")) == {
        "bootstrap.servers": "127.0.0.1:9092", "client.id": "sparklog-cli",
        "request.timeout.ms": 30000}


def test_bad_client_properties_fail_before_connecting(capsys, tmp_path):
    missing = tmp_path / "missing.properties"
    assert cli_error(capsys, "topics", "list", "--command-config", str(missing)).startswith(
        "Error: cannot read --command-config: [Errno 2] No such file or directory")
    assert cli_error(capsys, "topics", "list", "--command-property", "novalue") == \
        "Error: --command-property expects KEY=VALUE, got 'novalue'"
    assert cli_error(capsys, "topics", "list", "--command-property", "=v") == \
        "Error: --command-property expects KEY=VALUE, got '=v'"


# --------------------------------------------------------------------------- topics


def test_topics_flags(capsys):
    assert "the following arguments are required: ACTION" in usage_error(capsys, "topics")
    assert "required: --topic" in usage_error(capsys, "topics", "create")
    args = parse("topics", "create", "--topic", "t")
    assert (args.topics_action, args.topic, args.partitions, args.replication_factor,
            args.config, args.if_not_exists) == ("create", "t", None, None, [], False)
    args = parse("topics", "create", "--topic", "t", "--partitions", "3",
                 "--replication-factor", "1", "--config", "a=1", "b=2", "--config", "c=3",
                 "--if-not-exists")
    assert (args.partitions, args.replication_factor, args.config, args.if_not_exists) == \
        (3, 1, ["a=1", "b=2", "c=3"], True)
    assert "argument --partitions: invalid int value: 'x'" in usage_error(
        capsys, "topics", "create", "--topic", "t", "--partitions", "x")
    assert not parse("topics", "list").exclude_internal
    assert parse("topics", "describe").topic is None
    args = parse("topics", "alter", "--topic", "t", "--delete-config", "a", "b")
    assert (args.partitions, args.config, args.delete_config) == (None, [], ["a", "b"])
    assert not parse("topics", "delete", "--topic", "t").if_exists


def test_topics_checks_before_connecting(capsys):
    assert cli_error(capsys, "topics", "alter", "--topic", "t") == \
        "Error: topics alter needs --partitions N or --config KEY=VALUE"
    assert cli_error(capsys, "topics", "create", "--topic", "t", "--config", "novalue") == \
        "Error: --config expects KEY=VALUE, got 'novalue'"
    assert cli_error(capsys, "topics", "alter", "--topic", "t", "--config", "x") == \
        "Error: --config expects KEY=VALUE, got 'x'"


# --------------------------------------------------------------------------- produce / consume


def test_produce_flags(capsys):
    assert "required: --topic" in usage_error(capsys, "produce")
    args = parse("produce", "--topic", "t")
    assert (args.key_separator, args.acks, args.compression, args.header, args.partition,
            args.linger_ms, args.producer_property) == (None, "all", "none", [], None, 5, [])
    args = parse("produce", "--topic", "t", "--key-separator", ":", "--acks", "0",
                 "--compression", "zstd", "--header", "a=1", "--header", "b=", "--partition",
                 "2", "--linger-ms", "0", "--producer-property", "batch.size=1")
    assert (args.key_separator, args.acks, args.compression, args.header, args.partition,
            args.linger_ms, args.producer_property) == \
        (":", "0", "zstd", ["a=1", "b="], 2, 0, ["batch.size=1"])
    for acks in ("all", "-1", "0", "1"):
        assert parse("produce", "--topic", "t", "--acks", acks).acks == acks
    assert "argument --acks: invalid choice: '2'" in usage_error(
        capsys, "produce", "--topic", "t", "--acks", "2")
    assert "argument --compression: invalid choice: 'brotli'" in usage_error(
        capsys, "produce", "--topic", "t", "--compression", "brotli")
    assert "argument --partition: invalid int value: 'p0'" in usage_error(
        capsys, "produce", "--topic", "t", "--partition", "p0")


def test_produce_checks_before_connecting(capsys):
    assert cli_error(capsys, "produce", "--topic", "t", "--header", "nokv") == \
        "Error: --header expects KEY=VALUE, got 'nokv'"
    assert cli_error(capsys, "produce", "--topic", "t", "--producer-property", "x") == \
        "Error: --producer-property expects KEY=VALUE, got 'x'"


def test_consume_flags(capsys):
    assert "required: --topic" in usage_error(capsys, "consume")
    args = parse("consume", "--topic", "t")
    assert (args.from_beginning, args.group, args.partition, args.offset, args.max_messages,
            args.timeout_ms, args.key_separator, args.json, args.isolation_level,
            args.consumer_property) == \
        (False, None, None, None, None, None, "\t", False, "read_uncommitted", [])
    assert not any((args.print_key, args.print_offset, args.print_partition,
                    args.print_timestamp, args.print_headers))
    args = parse("consume", "--topic", "t", "--from-beginning", "--partition", "1", "--offset",
                 "earliest", "--max-messages", "3", "--timeout-ms", "100", "--print-key",
                 "--print-offset", "--print-partition", "--print-timestamp", "--print-headers",
                 "--key-separator", "|", "--json", "--isolation-level", "read_committed",
                 "--consumer-property", "fetch.max.bytes=1")
    assert (args.from_beginning, args.partition, args.offset, args.max_messages,
            args.timeout_ms, args.key_separator, args.json, args.isolation_level,
            args.consumer_property) == \
        (True, 1, "earliest", 3, 100, "|", True, "read_committed", ["fetch.max.bytes=1"])
    assert all((args.print_key, args.print_offset, args.print_partition, args.print_timestamp,
                args.print_headers))
    assert "argument --isolation-level: invalid choice: 'dirty'" in usage_error(
        capsys, "consume", "--topic", "t", "--isolation-level", "dirty")
    assert "argument --max-messages: invalid int value: 'all'" in usage_error(
        capsys, "consume", "--topic", "t", "--max-messages", "all")


def test_consume_checks_before_connecting(capsys):
    assert cli_error(capsys, "consume", "--topic", "t", "--offset", "5") == \
        "Error: --offset needs --partition"
    assert cli_error(capsys, "consume", "--topic", "t", "--partition", "0", "--group", "g") == \
        "Error: --partition cannot be used with --group"
    assert cli_error(capsys, "consume", "--topic", "t", "--consumer-property", "bad") == \
        "Error: --consumer-property expects KEY=VALUE, got 'bad'"


# --------------------------------------------------------------------------- offsets / groups


def test_offsets_flags_and_checks(capsys):
    assert "required: --topic" in usage_error(capsys, "offsets")
    args = parse("offsets", "--topic", "t.*")
    assert (args.topic, args.partitions, args.time) == ("t.*", None, "-1")
    assert cli_error(capsys, "offsets", "--topic", "t", "--time", "yesterday") == \
        "Error: --time must be -1, -2, -3 or a timestamp in ms, got 'yesterday'"
    assert cli_error(capsys, "offsets", "--topic", "t", "--partitions", "a,b") == \
        "Error: --partitions: bad list 'a,b'"


def test_groups_flags(capsys):
    assert "the following arguments are required: ACTION" in usage_error(capsys, "groups")
    assert not parse("groups", "list").state
    assert "required: --group" in usage_error(capsys, "groups", "describe")
    assert "required: --group" in usage_error(capsys, "groups", "delete")
    args = parse("groups", "reset-offsets", "--group", "g", "--topic", "a", "--topic", "b:0,1",
                 "--shift-by", "-2")
    assert (args.topic, args.all_topics, args.shift_by, args.to_offset, args.to_datetime) == \
        (["a", "b:0,1"], False, -2, None, None)
    assert not any((args.to_earliest, args.to_latest, args.to_current, args.dry_run,
                    args.execute))
    args = parse("groups", "reset-offsets", "--group", "g", "--all-topics", "--to-offset", "5",
                 "--execute")
    assert (args.topic, args.all_topics, args.to_offset, args.execute) == (None, True, 5, True)


@pytest.mark.parametrize("extra,message", [
    (["--all-topics"], "one of the arguments --to-earliest --to-latest --to-current "
                       "--to-offset --to-datetime --shift-by is required"),
    (["--to-earliest"], "one of the arguments --topic --all-topics is required"),
    (["--all-topics", "--to-earliest", "--to-latest"],
     "argument --to-latest: not allowed with argument --to-earliest"),
    (["--topic", "t", "--all-topics", "--to-earliest"],
     "argument --all-topics: not allowed with argument --topic"),
    (["--all-topics", "--to-earliest", "--dry-run", "--execute"],
     "argument --execute: not allowed with argument --dry-run"),
    (["--all-topics", "--to-offset", "ten"], "argument --to-offset: invalid int value: 'ten'"),
], ids=["no-method", "no-target", "two-methods", "two-targets", "dry-run-and-execute",
        "bad-offset"])
def test_groups_reset_offsets_rejects(capsys, extra, message):
    assert message in usage_error(capsys, "groups", "reset-offsets", "--group", "g", *extra)


# --------------------------------------------------------------------------- perf


def test_perf_flags_and_checks(capsys):
    assert "the following arguments are required: ACTION" in usage_error(capsys, "perf")
    assert "required: --record-size" in usage_error(
        capsys, "perf", "produce", "--topic", "t", "--num-records", "10")
    assert "required: --messages" in usage_error(capsys, "perf", "consume", "--topic", "t")
    args = parse("perf", "produce", "--topic", "t", "--num-records", "10", "--record-size", "5")
    assert (args.num_records, args.record_size, args.throughput, args.acks, args.compression,
            args.producer_props, args.arrow, args.arrow_chunk) == \
        (10, 5, -1, "1", "none", [], False, 100_000)
    assert parse("perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
                 "--throughput", "2.5", "--producer-props", "a=1", "b=2").producer_props == \
        ["a=1", "b=2"]
    args = parse("perf", "consume", "--topic", "t", "--messages", "7")
    assert (args.messages, args.timeout_ms, args.per_record, args.from_latest) == \
        (7, 10000, False, False)
    for n, size in (("0", "10"), ("10", "-1")):
        assert cli_error(capsys, "perf", "produce", "--topic", "t", "--num-records", n,
                         "--record-size", size) == \
            "Error: --num-records must be > 0 and --record-size >= 0"


# --------------------------------------------------------------------------- dump-log


def test_dump_log_flags(capsys, tmp_path):
    assert "the following arguments are required: FILE" in usage_error(capsys, "dump-log")
    args = parse("dump-log", "a.log", "b.index")
    assert (args.files, args.print_data, args.deep_iteration, args.verbose) == \
        (["a.log", "b.index"], False, False, False)
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


# --------------------------------------------------------------------------- server


def test_server_flags(capsys):
    args = parse("server")
    assert (args.data_dir, args.host, args.port, args.config, args.set) == \
        (None, None, None, None, [])
    args = parse("server", "--data-dir", "d", "--host", "0.0.0.0", "--port", "1",
                 "--config", "c", "--set", "a=1", "--set", "b=2")
    assert (args.data_dir, args.host, args.port, args.config, args.set) == \
        ("d", "0.0.0.0", 1, "c", ["a=1", "b=2"])
    assert "argument --port: invalid int value: 'abc'" in usage_error(
        capsys, "server", "--port", "abc")


def test_server_rejects_a_bad_configuration_without_starting(capsys, tmp_path):
    status, _, err = run(capsys, "server", "--config", str(tmp_path / "missing.properties"))
    assert status == 2
    assert err.startswith("sparklog server: invalid configuration: [Errno 2]")
    status, _, err = run(capsys, "server", "--set", "num.partitions=abc", "--data-dir",
                      str(tmp_path / "d"))
    assert status == 2 and err.startswith(
        "sparklog server: invalid configuration: invalid value 'abc' for num.partitions")
    # a --set without '=' ends the process with its message (exit status 1)
    status, _, err = run(capsys, "server", "--set", "novalue")
    assert status == "sparklog server: --set expects KEY=VALUE, got 'novalue'"
    assert not (tmp_path / "d").exists()
