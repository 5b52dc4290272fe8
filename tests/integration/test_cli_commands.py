"""The ``sparklog`` client commands end to end: a real ``sparklog server`` subprocess, the
console script run as a subprocess, output checked the way an operator reads it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid

import pytest

from tests.helpers.net import free_port
from tests.helpers.polling import wait_until
from tests.helpers.servers import REPO, ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("cli-broker")
    srv = ServerProcess(data / "d", free_port(),
                        extra=["--set", "group.initial.rebalance.delay.ms=0"])
    try:
        srv.start()
        yield {"bootstrap": srv.bootstrap_servers, "data": srv.data_dir}
    finally:
        srv.stop(20)


def sl(server, *args: str, stdin: bytes | None = None, timeout: float = 60,
       bootstrap: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "sparklog.cli.main", *args]
    if bootstrap:
        cmd += ["--bootstrap-server", server["bootstrap"]]
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout, cwd=str(REPO))


def ok(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 0, res.stderr.decode()
    return res.stdout.decode()


def _t(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_topics_lifecycle_and_describe_shape(server):
    t = _t("topics")
    assert ok(sl(server, "topics", "create", "--topic", t, "--partitions", "3",
                 "--config", "retention.ms=3600000")) == f"Created topic {t}.\n"
    dup = sl(server, "topics", "create", "--topic", t, "--partitions", "3")
    assert dup.returncode != 0
    err = dup.stderr.decode().strip().splitlines()
    assert len(err) == 1 and "already exists" in err[0] and "Traceback" not in err[0]
    assert t in ok(sl(server, "topics", "list")).split()
    out = ok(sl(server, "topics", "describe", "--topic", t))
    lines = out.strip().splitlines()
    assert re.match(rf"Topic: {t}\tTopicId: \S+\tPartitionCount: 3\tReplicationFactor: 1\t"
                    r"Configs: retention.ms=3600000$", lines[0])
    for p in range(3):
        assert lines[1 + p].split() == ["Topic:", t, "Partition:", str(p), "Leader:", "1",
                                        "Replicas:", "1", "Isr:", "1"]
    assert "Adding partitions succeeded!" in ok(sl(server, "topics", "alter", "--topic", t,
                                                   "--partitions", "5"))
    ok(sl(server, "topics", "alter", "--topic", t, "--config", "cleanup.policy=compact"))
    out = ok(sl(server, "topics", "describe", "--topic", t))
    assert "PartitionCount: 5" in out and "cleanup.policy=compact" in out
    assert "Partition: 4\tLeader: 1" in out
    ok(sl(server, "topics", "delete", "--topic", t))
    gone = sl(server, "topics", "describe", "--topic", t)
    assert gone.returncode == 1 and "does not exist" in gone.stderr.decode()
    assert len(gone.stderr.decode().strip().splitlines()) == 1


def test_unreachable_broker_is_one_line_error_and_verbose_shows_traceback(server):
    nobody = f"127.0.0.1:{free_port()}"
    res = sl(server, "topics", "list", "--bootstrap-server", nobody, bootstrap=False)
    assert res.returncode == 1
    lines = res.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:")
    res = sl(server, "topics", "list", "--bootstrap-server", nobody, "--verbose", bootstrap=False)
    assert res.returncode == 1 and "Traceback" in res.stderr.decode()


def test_produce_stdin_then_consume_formats(server):
    t = _t("console")
    ok(sl(server, "topics", "create", "--topic", t, "--partitions", "1"))
    ok(sl(server, "produce", "--topic", t, "--key-separator", ":", "--header", "src=test",
          "--compression", "lz4", stdin=b"k1:hello\nk2:world\r\nk3:\n"))
    ok(sl(server, "produce", "--topic", t, stdin=b"plain\n\nlast"))
    out = ok(sl(server, "consume", "--topic", t, "--from-beginning", "--max-messages", "6"))
    assert out.splitlines() == ["hello", "world", "", "plain", "", "last"]
    out = ok(sl(server, "consume", "--topic", t, "--from-beginning", "--max-messages", "2",
                "--print-key", "--print-offset"))
    assert out.splitlines() == ["Offset:0\tk1\thello", "Offset:1\tk2\tworld"]
    out = ok(sl(server, "consume", "--topic", t, "--partition", "0", "--offset", "3",
                "--max-messages", "1", "--print-timestamp"))
    assert re.fullmatch(r"CreateTime:\d{13}\tplain\n", out)
    out = ok(sl(server, "consume", "--topic", t, "--from-beginning", "--max-messages", "1",
                "--json"))
    rec = json.loads(out)
    assert rec["key"] == "k1" and rec["value"] == "hello" and rec["offset"] == 0
    assert rec["headers"] == [{"key": "src", "value": "test"}]
    # --timeout-ms returns what arrived, even when fewer than --max-messages
    t0 = time.monotonic()
    res = sl(server, "consume", "--topic", t, "--from-beginning", "--timeout-ms", "3000",
             "--max-messages", "100")
    assert len(ok(res).splitlines()) == 6 and time.monotonic() - t0 < 30
    assert "Processed a total of 6 messages" in res.stderr.decode()
    bad = sl(server, "produce", "--topic", t, "--key-separator", ":", stdin=b"nokey\n")
    assert bad.returncode == 1 and "No key separator" in bad.stderr.decode()


def _offset_rows(describe_out: str, group: str) -> list[list[str]]:
    """``groups describe`` rows of ``group`` without the GROUP column (TOPIC first)."""
    return [ln.split()[1:] for ln in describe_out.splitlines() if ln.split()[:1] == [group]]


def test_groups_describe_lag_reset_and_delete(server):
    t = _t("grp")
    g = _t("g")
    ok(sl(server, "topics", "create", "--topic", t, "--partitions", "2"))
    lines = b"".join(f"k{i}:v{i}\n".encode() for i in range(40))
    ok(sl(server, "produce", "--topic", t, "--key-separator", ":", stdin=lines))
    ok(sl(server, "consume", "--topic", t, "--group", g, "--from-beginning",
          "--max-messages", "15", "--timeout-ms", "30000"))
    assert g in ok(sl(server, "groups", "list")).split()
    out = ok(sl(server, "groups", "describe", "--group", g))
    rows = [ln.split() for ln in out.strip().splitlines()]
    header_i = next(i for i, r in enumerate(rows) if r and r[0] == "GROUP")
    assert rows[header_i] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                              "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert {r[0] for r in rows[header_i + 1:] if r} == {g}
    data = _offset_rows(out, g)
    assert {r[0] for r in data} == {t}
    total_end = sum(int(r[3]) for r in data)
    total_lag = sum(int(r[4]) if r[4] != "-" else int(r[3]) for r in data)
    assert total_end == 40 and total_lag == 25
    for r in data:
        if r[2] != "-":
            assert int(r[4]) == int(r[3]) - int(r[2])
    # dry run by default: nothing changes
    out = ok(sl(server, "groups", "reset-offsets", "--group", g, "--topic", t, "--to-earliest"))
    assert "NEW-OFFSET" in out
    out2 = ok(sl(server, "groups", "describe", "--group", g))
    assert sum(int(r[4]) if r[4] != "-" else int(r[3]) for r in _offset_rows(out2, g)) == 25
    ok(sl(server, "groups", "reset-offsets", "--group", g, "--topic", t, "--to-latest",
          "--execute"))
    out3 = ok(sl(server, "groups", "describe", "--group", g))
    assert all(r[4] == "0" for r in _offset_rows(out3, g))
    ok(sl(server, "groups", "reset-offsets", "--group", g, "--topic", f"{t}:0",
          "--to-offset", "1", "--execute"))
    ok(sl(server, "groups", "reset-offsets", "--group", g, "--topic", f"{t}:1",
          "--shift-by", "-2", "--execute"))
    rows = {int(r[1]): r for r in _offset_rows(ok(sl(server, "groups", "describe", "--group", g)),
                                               g)}
    assert rows[0][2] == "1" and int(rows[1][2]) == int(rows[1][3]) - 2
    ok(sl(server, "groups", "reset-offsets", "--group", g, "--all-topics",
          "--to-datetime", "2000-01-01T00:00:00.000", "--execute"))
    rows = _offset_rows(ok(sl(server, "groups", "describe", "--group", g)), g)
    assert all(r[2] == "0" for r in rows)
    out = ok(sl(server, "groups", "delete", "--group", g))
    assert "was successful" in out
    assert g not in ok(sl(server, "groups", "list")).split()


def test_offsets_shell_lines(server):
    t = _t("offs")
    ok(sl(server, "topics", "create", "--topic", t, "--partitions", "2"))
    ok(sl(server, "produce", "--topic", t, "--partition", "1", stdin=b"a\nb\nc\n"))
    assert ok(sl(server, "offsets", "--topic", t)).splitlines() == [f"{t}:0:0", f"{t}:1:3"]
    assert ok(sl(server, "offsets", "--topic", t, "--time", "-2")).splitlines() == \
        [f"{t}:0:0", f"{t}:1:0"]
    future = str(int(time.time() * 1000) + 3_600_000)
    assert ok(sl(server, "offsets", "--topic", t, "--time", "0", "--partitions", "1")) \
        .splitlines() == [f"{t}:1:0"]
    assert ok(sl(server, "offsets", "--topic", t, "--time", future)).splitlines() == \
        [f"{t}:0:", f"{t}:1:"]


def test_dump_log_on_a_real_segment(server):
    t = _t("dump")
    ok(sl(server, "topics", "create", "--topic", t, "--partitions", "1"))
    ok(sl(server, "produce", "--topic", t, "--key-separator", "=", stdin=b"k=v1\nk=v2\n"))
    ok(sl(server, "produce", "--topic", t, "--compression", "gzip", stdin=b"x\n"))
    seg = server["data"] / f"{t}-0" / "00000000000000000000.log"
    wait_until(lambda: seg.exists() and seg.stat().st_size > 0, 10, interval=0.1)
    out = ok(sl(server, "dump-log", str(seg), bootstrap=False))
    lines = out.strip().splitlines()
    assert lines[0] == f"Dumping {seg}" and lines[1] == "Log starting offset: 0"
    batches = [ln for ln in lines if ln.startswith("baseOffset:")]
    assert len(batches) == 2
    assert "baseOffset: 0 lastOffset: 1 count: 2" in batches[0] and "isvalid: true" in batches[0]
    assert "compresscodec: gzip" in batches[1]
    out = ok(sl(server, "dump-log", str(seg), "--print-data", bootstrap=False))
    recs = [ln for ln in out.splitlines() if ln.startswith("| offset:")]
    assert len(recs) == 3
    assert recs[0].startswith("| offset: 0 CreateTime:") and recs[0].endswith("key: k payload: v1")
    assert recs[2].endswith("payload: x")
    # a corrupted copy is reported invalid with a non-zero exit
    bad = seg.parent.parent / "corrupt-00000000000000000000.log"
    raw = bytearray(seg.read_bytes())
    raw[70] ^= 0xFF
    bad.write_bytes(bytes(raw))
    res = sl(server, "dump-log", str(bad), bootstrap=False)
    assert res.returncode == 1 and "isvalid: false" in res.stdout.decode()


def test_perf_produce_and_consume_summaries(server):
    t = _t("perf")
    ok(sl(server, "topics", "create", "--topic", t, "--partitions", "2"))
    out = ok(sl(server, "perf", "produce", "--topic", t, "--num-records", "20000",
                "--record-size", "100", "--acks", "all"))
    final = out.strip().splitlines()[-1]
    assert re.fullmatch(r"20000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg "
                        r"latency, [\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, "
                        r"\d+ ms 99.9th\.", final), final
    out = ok(sl(server, "perf", "produce", "--topic", t, "--num-records", "20000",
                "--record-size", "100", "--arrow", "--arrow-chunk", "5000"))
    assert "records sent" in out.strip().splitlines()[-1]
    out = ok(sl(server, "perf", "consume", "--topic", t, "--messages", "30000"))
    header, final = out.strip().splitlines()
    assert header.startswith("start.time, end.time, data.consumed.in.MB, ")
    assert final.split(", ")[4] == "30000"
    assert ok(sl(server, "offsets", "--topic", t)).count(":") == 4


def test_binary_payloads_pass_through_produce_and_consume(server):
    t = _t("bin")
    ok(sl(server, "topics", "create", "--topic", t, "--partitions", "1"))
    payload = bytes(b for b in range(256) if b not in (10, 13))
    ok(sl(server, "produce", "--topic", t, stdin=payload + b"\n" + b"\xff\xfe\n"))
    res = sl(server, "consume", "--topic", t, "--from-beginning", "--max-messages", "2")
    assert res.returncode == 0
    assert res.stdout == payload + b"\n" + b"\xff\xfe\n"
    rec = json.loads(ok(sl(server, "consume", "--topic", t, "--from-beginning",
                           "--max-messages", "1", "--json")))
    import base64
    assert base64.b64decode(rec["value"]["base64"]) == payload
