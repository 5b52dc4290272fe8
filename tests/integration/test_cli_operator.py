"""The ``sparklog`` console script as an operator meets it, checked from outside: a
``sparklog server`` child process with Kafka's default group settings (a group's first
join waits ``group.initial.rebalance.delay.ms`` = 3 s), the console script run as a
subprocess, and assertions on its stdout, stderr and exit code, side by side with what
Kafka's own tools print."""

from __future__ import annotations

import re
import signal
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from sparklog.client import AdminClient
from tests.helpers.cli import SPARKLOG, ok, one_error, run
from tests.helpers.net import free_port
from tests.helpers.polling import wait_for
from tests.helpers.servers import ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path_factory.mktemp("operator") / "data", free_port())
    s.start()
    try:
        yield s
    finally:
        s.stop()




def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def topic_with(server: ServerProcess, lines: bytes, partitions: int = 1) -> str:
    t = name("t")
    ok(run("topics", "create", "--topic", t, "--partitions", str(partitions), server=server))
    if lines:
        assert run("produce", "--topic", t, server=server, stdin=lines).returncode == 0
    return t


def rows(out: str, first: str) -> list[list[str]]:
    """The table rows of ``out`` whose first column is ``first``."""
    return [ln.split() for ln in out.splitlines() if ln.split()[:1] == [first]]


def wait_for_state(server: ServerProcess, group: str, state: str) -> None:
    """Wait until ``group`` is in ``state``, asked in-process: a state can last only the
    3 s of the initial rebalance delay, which polls by CLI subprocess (a second or more
    each under load) could miss."""
    with AdminClient({"bootstrap.servers": server.bootstrap_servers}) as admin:
        wait_for(lambda: admin.describe_groups([group])[0].state == state, 30,
                 f"group {group} in state {state}", interval=0.05)


# ---------------------------------------------------------------- bad input, one line each


def test_bad_port_and_bootstrap_are_usage_errors():
    err = one_error(run("server", "--port", "99999"), code=2)
    assert err.startswith("Error: argument --port: port 99999 is out of range (0-65535)")
    err = one_error(run("topics", "list", "--bootstrap-server", "127.0.0.1:notaport"), code=2)
    assert "'127.0.0.1:notaport' is not HOST:PORT" in err


def test_port_in_use_is_named_before_any_log_is_loaded(server, tmp_path):
    data = tmp_path / "never-created"
    t0 = time.monotonic()
    err = one_error(run("server", "--port", str(server.port), "--data-dir", str(data)))
    assert err == f"Error: cannot listen on 127.0.0.1:{server.port}: address already in use"
    assert not data.exists() and time.monotonic() - t0 < 20


def test_a_missing_topic_is_the_same_sentence_everywhere(server):
    expected = "Error: Topic 'nosuch' does not exist"
    for argv in (["topics", "describe", "--topic", "nosuch"],
                 ["topics", "delete", "--topic", "nosuch"],
                 ["topics", "alter", "--topic", "nosuch", "--partitions", "4"],
                 ["consume", "--topic", "nosuch"],
                 ["consume", "--topic", "nosuch", "--group", name("g"), "--timeout-ms", "500"],
                 ["offsets", "--topic", "nosuch"],
                 ["perf", "consume", "--topic", "nosuch", "--messages", "1"],
                 ["groups", "reset-offsets", "--group", "g", "--topic", "nosuch",
                  "--to-earliest"]):
        assert one_error(run(*argv, server=server)) == expected, argv


def test_a_missing_group_is_the_same_sentence_everywhere(server):
    expected = "Error: Consumer group 'nosuch' does not exist."
    for argv in (["groups", "describe", "--group", "nosuch"],
                 ["groups", "describe", "--group", "nosuch", "--members"],
                 ["groups", "describe", "--group", "nosuch", "--state"],
                 ["groups", "delete", "--group", "nosuch"]):
        assert one_error(run(*argv, server=server)) == expected, argv


def test_an_illegal_topic_name_is_explained_by_produce_as_by_create(server):
    explained = ("argument --topic: topic name 'bad/name' is illegal: it may contain only ASCII "
                 "alphanumerics, '.', '_' and '-'")
    for argv in (["topics", "create", "--topic", "bad/name"],
                 ["produce", "--topic", "bad/name"],
                 ["consume", "--topic", "bad/name"]):
        err = one_error(run(*argv, server=server), code=2)
        assert err.startswith(f"Error: {explained}; see 'sparklog {argv[0]}"), err


def test_consume_prints_only_the_error_for_a_missing_partition_or_broker(server):
    t = topic_with(server, b"a\n")
    assert one_error(run("consume", "--topic", t, "--partition", "7", server=server)) == \
        f"Error: Partition 7 of '{t}' does not exist"
    err = one_error(run("consume", "--topic", t, "--bootstrap-server", f"127.0.0.1:{free_port()}"))
    assert err.startswith("Error: no broker reachable")


# ---------------------------------------------------------------- consume with a group


def test_group_consume_timeout_counts_from_the_assignment_and_leaves(server):
    """The join alone takes the 3 s initial rebalance delay, longer than --timeout-ms: both
    messages still arrive, and the member is gone at once, so the offsets can be reset."""
    t = topic_with(server, b"a\nb\n")
    g = name("g")
    res = run("consume", "--topic", t, "--group", g, "--from-beginning", "--timeout-ms", "2000",
              server=server)
    assert ok(res).splitlines() == ["a", "b"]
    assert res.stderr == "Processed a total of 2 messages\n"
    out = ok(run("groups", "reset-offsets", "--group", g, "--topic", t, "--to-earliest",
                 "--execute", server=server))
    assert rows(out, g) == [[g, t, "0", "0"]]


def test_ctrl_c_during_the_join_leaves_the_group(server):
    t = topic_with(server, b"a\n")
    g = name("g")
    with subprocess.Popen([SPARKLOG, "consume", "--topic", t, "--group", g,
                           "--bootstrap-server", server.bootstrap_servers],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            wait_for_state(server, g, "PreparingRebalance")  # joined, waiting out the delay
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 0 and out == "" and err == "Processed a total of 0 messages\n"
    state = ok(run("groups", "describe", "--group", g, "--state", server=server))
    assert rows(state, g)[0][-2:] == ["Empty", "0"]


def test_sigterm_commits_what_was_printed_and_leaves(server):
    t = topic_with(server, b"a\nb\nc\n")
    g = name("g")
    with subprocess.Popen([SPARKLOG, "consume", "--topic", t, "--group", g, "--from-beginning",
                           "--bootstrap-server", server.bootstrap_servers],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            assert [proc.stdout.readline() for _ in range(3)] == ["a\n", "b\n", "c\n"]
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 0 and err == "Processed a total of 3 messages\n"
    out = ok(run("groups", "describe", "--group", g, server=server))
    assert "has no active members" in out
    assert [r[3:6] for r in rows(out, g)] == [["3", "3", "0"]]


# ---------------------------------------------------------------- groups


def test_reset_offsets_warns_when_it_moves_an_offset_into_range(server):
    t = topic_with(server, b"a\nb\n")
    g = name("g")
    res = run("groups", "reset-offsets", "--group", g, "--topic", t, "--to-offset", "99",
              server=server)
    assert rows(ok(res), g) == [[g, t, "0", "2"]]
    assert res.stderr == (f"Warning: New offset (99) is higher than latest offset for topic "
                          f"partition {t}-0. Value will be set to 2\n")
    res = run("groups", "reset-offsets", "--group", g, "--topic", t, "--shift-by", "-5",
              server=server)
    assert rows(ok(res), g) == [[g, t, "0", "0"]]
    assert "New offset (-3) is lower than earliest offset" in res.stderr  # latest 2, minus 5
    res = run("groups", "reset-offsets", "--group", g, "--topic", t, "--to-offset", "1",
              server=server)
    assert rows(ok(res), g) == [[g, t, "0", "1"]] and res.stderr == ""


def test_groups_describe_offsets_members_state_and_all_groups(server):
    t = topic_with(server, b"a\nb\nc\n", partitions=2)
    g = name("g")
    ok(run("consume", "--topic", t, "--group", g, "--from-beginning", "--max-messages", "3",
           server=server))
    out = ok(run("groups", "describe", "--group", g, server=server))
    header = next(ln.split() for ln in out.splitlines() if ln.startswith("GROUP"))
    assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                      "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert sorted(r[1:3] for r in rows(out, g)) == [[t, "0"], [t, "1"]]
    assert ok(run("groups", "describe", "--group", g, "--offsets", server=server)) == out
    every = ok(run("groups", "describe", "--all-groups", server=server))
    assert sorted(rows(every, g)) == sorted(rows(out, g))
    assert rows(ok(run("groups", "describe", "--group", g, "--state", server=server)), g) == \
        [[g, f"127.0.0.1:{server.port}", "(1)", "-", "Empty", "0"]]

    # a live member: --members, --members --verbose, --state, and the offsets' owner column
    with subprocess.Popen([SPARKLOG, "consume", "--topic", t, "--group", g,
                           "--bootstrap-server", server.bootstrap_servers],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        try:
            wait_for_state(server, g, "Stable")
            members = ok(run("groups", "describe", "--group", g, "--members", server=server))
            assert members.split("\n")[1].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID",
                                                      "#PARTITIONS"]
            (m,) = rows(members, g)
            assert m[2:] == ["/127.0.0.1", "sparklog-cli", "2"]
            verbose = ok(run("groups", "describe", "--group", g, "--members", "--verbose",
                             server=server))
            assert verbose.split("\n")[1].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID",
                                                      "HOST", "CLIENT-ID", "#PARTITIONS",
                                                      "ASSIGNMENT"]
            assert rows(verbose, g) == [[g, m[1], "-", "/127.0.0.1", "sparklog-cli", "2",
                                         f"{t}(0,1)"]]
            state = rows(ok(run("groups", "describe", "--group", g, "--state", server=server)), g)
            assert state[0][3:] == ["range", "Stable", "1"]
            owned = rows(ok(run("groups", "describe", "--group", g, server=server)), g)
            assert {r[6] for r in owned} == {m[1]}
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            finally:
                proc.kill()


# ---------------------------------------------------------------- the rest of section 3


def test_topic_id_is_kafkas_base64_in_the_server_log_and_describe(server):
    t = topic_with(server, b"")
    out = ok(run("topics", "describe", "--topic", t, server=server))
    topic_id = re.search(r"TopicId: (\S+)", out).group(1)
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", topic_id)
    assert f"created topic {t} (1 partitions, id {topic_id})" in server.log_path.read_text()


def test_server_on_a_new_directory_says_so(tmp_path):
    s = ServerProcess(tmp_path / "fresh", free_port())
    s.start()
    assert s.stop() == 0
    first = s.log_path.read_text()
    assert f"from {tmp_path / 'fresh'} in" in first and "(new log directory)" in first
    assert "clean shutdown: False" not in first
    again = ServerProcess(s.data_dir, free_port())  # its own log file
    again.start()
    assert again.stop() == 0
    assert "(clean shutdown: True)" in again.log_path.read_text()


def test_perf_consume_prints_kafkas_columns_once(server):
    t = topic_with(server, b"".join(b"%d\n" % i for i in range(500)), partitions=2)
    lines = ok(run("perf", "consume", "--topic", t, "--messages", "500", server=server))
    header, result = lines.splitlines()  # one header, one result, nothing else
    assert header == ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                      "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    cells = result.split(", ")
    assert len(cells) == 10
    for date in cells[:2]:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", date)
    assert cells[4] == "500" and cells[6] == "0"
    assert float(cells[2]) > 0 and float(cells[5]) > 0
    detailed = ok(run("perf", "consume", "--topic", t, "--messages", "500",
                      "--show-detailed-stats", "--hide-header", server=server)).splitlines()
    assert detailed and all(len(ln.split(", ")) == 10 for ln in detailed)
    assert detailed[-1].split(", ")[4] == "500"  # totals so far; no summary line after it
    short = run("perf", "consume", "--topic", t, "--messages", "600", "--timeout-ms", "500",
                server=server)
    assert ok(short).splitlines()[1].split(", ")[4] == "500"
    assert short.stderr.startswith("Warning: Exiting before consuming the expected number of "
                                   "messages: only 500 of 600 arrived")


def test_dump_log_of_an_index_counts_its_entries(server, tmp_path):
    t = topic_with(server, b"a\n")
    out = ok(run("dump-log", str(server.data_dir / f"{t}-0" / "00000000000000000000.index")))
    entries = [ln for ln in out.splitlines() if ln.startswith("offset: ")]
    assert out.splitlines()[-1] == f"Index entries: {len(entries)}"
    empty = tmp_path / "00000000000000000042.index"
    empty.write_bytes(b"")
    assert ok(run("dump-log", str(empty))).splitlines() == [f"Dumping {empty}", "Index entries: 0"]
    # Kafka preallocates index files: the zeroed tail is not entries
    index = tmp_path / "00000000000000000100.index"
    index.write_bytes(struct.pack(">II", 3, 4100) + struct.pack(">II", 9, 8300) + bytes(80))
    assert ok(run("dump-log", str(index))).splitlines() == [
        f"Dumping {index}", "offset: 103 position: 4100", "offset: 109 position: 8300",
        "Index entries: 2"]
    times = tmp_path / "00000000000000000010.timeindex"
    times.write_bytes(struct.pack(">qI", 1000, 1) + struct.pack(">qI", 2000, 5) + bytes(12))
    assert ok(run("dump-log", str(times))).splitlines() == [
        f"Dumping {times}", "timestamp: 1000 offset: 11", "timestamp: 2000 offset: 15",
        "Time index entries: 2"]


def test_server_stops_cleanly_when_its_supervisor_closes_stdin(tmp_path):
    """--stop-on-stdin-close: the Spark plugin's nodes stop with the JVM holding the pipe."""
    port = free_port()
    proc = subprocess.Popen(
        [SPARKLOG, "server", "--data-dir", str(tmp_path / "d"), "--port", str(port),
         "--stop-on-stdin-close"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None and proc.stdin is not None
        while b"sparklog server listening" not in proc.stderr.readline():
            assert proc.poll() is None, "the server exited during start"
        proc.stdin.write(b"anything written is ignored\n")
        proc.stdin.flush()
        proc.stdin.close()
        assert proc.wait(30) == 0
        assert b"stdin closed" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stderr.close()
