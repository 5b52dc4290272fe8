"""Issue 13 on a real ``sparklog server``: acknowledged records survive damage to the data
directory, and two servers never share one.

The fault matrix: one partition per fault of ``tests.helpers.log_faults`` in one data
directory; the server is stopped (SIGTERM or SIGKILL), every partition damaged, the server
restarted once; then one record per partition is produced with acks=all and everything is
consumed from offset 0 by confluent-kafka. Per partition, outside the damaged range, the
count of lost, duplicated, reordered or altered acknowledged records must be 0, and the new
record must be served at the offset it was acknowledged at, right after the last kept one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.log_faults import FAULTS, Damage, corrupt_recovery_point
from tests.helpers.net import free_port
from tests.helpers.servers import REPO

TOPIC = "faults"
CASES = list(FAULTS)  # partition p suffers CASES[p]
ROUNDS = 12  # acks=all rounds of RECORDS per partition: about one batch each, five segments
RECORDS = 8
DEADLINE_S = 60


def _produce(bs: str, records: dict[int, list[bytes]]) -> dict[int, dict[int, bytes]]:
    """Produce ``records[p]`` to each partition p (acks=all, idempotent) and wait for every
    acknowledgement; returns partition -> acked offset -> value."""
    from confluent_kafka import Producer

    acked: dict[int, dict[int, bytes]] = {p: {} for p in records}
    errors: list[object] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[msg.partition()][msg.offset()] = msg.value()

    prod = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5})
    for p, values in records.items():
        for v in values:
            prod.produce(TOPIC, value=v, partition=p, on_delivery=on_delivery)
    assert prod.flush(DEADLINE_S) == 0 and not errors, errors[:3]
    assert all(len(acked[p]) == len(records[p]) for p in records)
    return acked


def _consume(bs: str, spans: dict[int, tuple[int, int]]) -> dict[int, list[tuple[int, bytes]]]:
    """(offset, value) of every record delivered per partition, starting at ``spans[p][0]``
    and stopping once ``spans[p][1] - 1`` came (what follows is neither awaited nor kept)."""
    from confluent_kafka import Consumer, TopicPartition

    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in spans}
    todo = {p for p, (lo, hi) in spans.items() if hi > lo}
    c = Consumer({"bootstrap.servers": bs, "group.id": "fault-matrix", "enable.auto.commit": False,
                  "fetch.queue.backoff.ms": 1})
    try:
        c.assign([TopicPartition(TOPIC, p, lo) for p, (lo, _hi) in spans.items() if p in todo])
        deadline = time.monotonic() + DEADLINE_S
        while todo and time.monotonic() < deadline:
            for m in c.consume(1000, 0.2):
                if m.error() is not None:  # a refused (damaged) range: retried by the client
                    continue
                p, off = m.partition(), m.offset()
                if off < spans[p][1]:
                    got[p].append((off, m.value()))
                if off >= spans[p][1] - 1:
                    todo.discard(p)
    finally:
        c.close()
    return got


def _count_faults(got: list[tuple[int, bytes]], expect: dict[int, bytes]) -> dict[str, int]:
    seen: set[int] = set()
    counts = {"lost": 0, "duplicated": 0, "reordered": 0, "altered": 0}
    last = -1
    for off, value in got:
        counts["duplicated"] += off in seen
        counts["reordered"] += off < last
        counts["altered"] += off in expect and expect[off] != value
        seen.add(off)
        last = max(last, off)
    counts["lost"] = len(set(expect) - seen)
    return counts


@pytest.mark.parametrize("shutdown", ["sigterm", "sigkill", "sigterm+unreadable-recovery-point"])
def test_acked_records_survive_damage(server_factory, tmp_path, shutdown):
    from confluent_kafka.admin import AdminClient, NewTopic

    data = tmp_path / "data"
    srv = server_factory(data).start()
    bs = srv.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics(
        [NewTopic(TOPIC, len(CASES), 1, config={"segment.bytes": "1000"})])[TOPIC].result(30)
    acked: dict[int, dict[int, bytes]] = {p: {} for p in range(len(CASES))}
    for r in range(ROUNDS):
        for p, offsets in _produce(bs, {p: [b"p%d-r%d-%d" % (p, r, i) for i in range(RECORDS)]
                                        for p in acked}).items():
            acked[p].update(offsets)
    if shutdown == "sigkill":
        srv.kill()
    else:
        assert srv.stop() == 0

    damage: dict[int, Damage] = {p: FAULTS[c](str(data / f"{TOPIC}-{p}"))
                                 for p, c in enumerate(CASES)}
    if shutdown.endswith("unreadable-recovery-point"):
        corrupt_recovery_point(str(data / f"{TOPIC}-0"))
    srv2 = server_factory(data, port=srv.port).start()
    bs = srv2.bootstrap_servers
    ends = {p: max(a) + 1 for p, a in acked.items()}
    kept_end = {p: ends[p] if d.lost_from is None else d.lost_from for p, d in damage.items()}
    new = _produce(bs, {p: [b"new-%d" % p] for p in acked})
    # dense: each new record lands right after the last kept one
    assert {p: min(n) for p, n in new.items()} == kept_end
    expect = {p: {o: v for o, v in acked[p].items() if o < kept_end[p]} | new[p] for p in acked}
    unserved = {p: d.unserved for p, d in damage.items() if d.unserved is not None}
    for p, (lo, hi) in unserved.items():  # the damaged range may be refused or served as is
        expect[p] = {o: v for o, v in expect[p].items() if not lo <= o < hi}

    # from 0 (up to a refused range), then from its end
    got = _consume(bs, {p: (0, unserved[p][0] if p in unserved else kept_end[p] + 1)
                        for p in acked})
    after = _consume(bs, {p: (hi, kept_end[p] + 1) for p, (_lo, hi) in unserved.items()})
    faults = {}
    for p, case in enumerate(CASES):
        if p in unserved:
            lo, hi = unserved[p]
            before = {o: v for o, v in expect[p].items() if o < lo}
            counts = _count_faults(got[p], before)
            more = _count_faults(after[p], {o: v for o, v in expect[p].items() if o >= hi})
            counts = {k: counts[k] + more[k] for k in counts}
        else:
            counts = _count_faults(got[p], expect[p])
        if any(counts.values()):
            faults[case] = counts
    assert faults == {}, faults
    log_text = srv2.log_path.read_text()
    for p in (CASES.index("garbage_tail"), CASES.index("bit_flip_last_batch")):
        assert f"{TOPIC}-{p}/" in log_text and "truncating" in log_text
    assert srv2.stop() == 0


def _server(data: Path, port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sparklog.cli.main", "server", "--data-dir", str(data),
         "--port", str(port)], capture_output=True, text=True, timeout=60, cwd=str(REPO))


def test_second_server_on_a_data_dir_fails_before_touching_it(server_factory, tmp_path):
    from sparklog.cluster.embedded import EmbeddedCluster
    from sparklog.storage.checkpoints import CLEAN_SHUTDOWN_MARKER

    data = tmp_path / "data"
    first = server_factory(data).start()
    assert first.proc is not None
    pid = first.proc.pid
    before = {p: p.stat().st_mtime_ns for p in data.rglob("*") if p.is_file()}

    second = _server(data, free_port())
    assert second.returncode == 1
    assert second.stderr.strip() == (f"Error: data directory {data} is in use by another "
                                      f"sparklog process (pid {pid})")
    with pytest.raises(RuntimeError) as failed, EmbeddedCluster(data):
        pass
    assert f"in use by another sparklog process (pid {pid})" in str(failed.value.__cause__)
    # neither wrote anything: no clean-shutdown marker under the running server
    assert {p: p.stat().st_mtime_ns for p in data.rglob("*") if p.is_file()} == before
    assert not (data / CLEAN_SHUTDOWN_MARKER).exists()

    assert first.stop() == 0
    # once the holder is gone the directory is free: an embedded cluster opens it, and a
    # server started while that cluster runs is refused in turn
    with EmbeddedCluster(data):
        refused = _server(data, free_port())
        assert refused.returncode == 1
        assert f"is in use by another sparklog process (pid {os.getpid()})" in refused.stderr
    server_factory(data, port=first.port).start().stop()
