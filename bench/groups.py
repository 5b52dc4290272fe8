"""Group coordinator costs: offset commits, joins/rebalances, and __consumer_offsets replay.

Figures, all against an in-process EmbeddedCluster:

- OffsetCommit round trips/s (raw wire, v8, 10 partitions per commit, one connection,
  sequential) and confluent-kafka ``commit(asynchronous=False)`` calls/s;
- time for M confluent-kafka consumers subscribing together to all hold an assignment
  (group.initial.rebalance.delay.ms=0), then for one more member to be absorbed;
- broker start time with G groups x P committed partitions to replay from
  __consumer_offsets, as replayed records/s.

    .venv/bin/python bench/groups.py [--commits 5000] [--members 8] [--groups 500] [--parts 100]
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sparklog.cluster.embedded import EmbeddedCluster  # noqa: E402
from sparklog.protocol.messages import decode_response, encode_request  # noqa: E402
from sparklog.protocol.messages import offsets as o  # noqa: E402

CFG = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "10"}


class Wire:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0

    def call(self, key: int, version: int, msg: object) -> object:
        self.cid += 1
        self.sock.sendall(encode_request(key, version, self.cid, "bench", msg))
        (n,) = struct.unpack(">i", self._read(4))
        return decode_response(key, version, self._read(n))[1]

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)


def commit_request(group: str, topic: str, parts: range, offset: int) -> object:
    P = o.OffsetCommitRequest.OffsetCommitRequestPartition
    T = o.OffsetCommitRequest.OffsetCommitRequestTopic
    return o.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        topics=[T(name=topic, partitions=[P(partition_index=p, committed_offset=offset)
                                          for p in parts])])


def bench_commits(bs: str, topic: str, n: int) -> None:
    w = Wire(bs)
    t0 = time.perf_counter()
    for i in range(n):
        w.call(8, 8, commit_request("bench-raw", topic, range(10), i))
    dt = time.perf_counter() - t0
    print(f"OffsetCommit v8 (10 partitions), raw wire : {n / dt:10.0f} commits/s "
          f"({dt / n * 1e6:.0f} us each, {10 * n / dt:.0f} offsets/s)")

    c = ck.Consumer({"bootstrap.servers": bs, "group.id": "bench-ck",
                     "enable.auto.commit": False})
    offsets = [ck.TopicPartition(topic, p, 1) for p in range(10)]
    c.commit(offsets=offsets, asynchronous=False)
    m = max(n // 5, 100)
    t0 = time.perf_counter()
    for i in range(m):
        for tp in offsets:
            tp.offset = i + 2
        c.commit(offsets=offsets, asynchronous=False)
    dt = time.perf_counter() - t0
    c.close()
    print(f"confluent-kafka commit(sync), 10 partitions: {m / dt:10.0f} commits/s "
          f"({dt / m * 1e3:.2f} ms each)")


def bench_join(bs: str, topic: str, members: int) -> None:
    consumers: list[ck.Consumer] = []
    assigned: dict[int, bool] = {}
    stop = threading.Event()

    def make(i: int) -> ck.Consumer:
        def on_assign(c: object, parts: list[object]) -> None:
            assigned[i] = bool(parts)

        c = ck.Consumer({"bootstrap.servers": bs, "group.id": "bench-join",
                         "client.id": f"m{i}", "session.timeout.ms": 10000,
                         "heartbeat.interval.ms": 200, "enable.auto.commit": False})
        c.subscribe([topic], on_assign=on_assign)
        return c

    def poller() -> None:
        while not stop.is_set():
            for c in list(consumers):
                c.poll(0.01)

    t0 = time.perf_counter()
    consumers.extend(make(i) for i in range(members))
    th = threading.Thread(target=poller, daemon=True)
    th.start()
    while sum(assigned.values()) < members and time.perf_counter() - t0 < 60:
        time.sleep(0.005)
    t_join = time.perf_counter() - t0
    print(f"{members} consumers subscribe -> all assigned : {t_join * 1000:8.0f} ms")
    t0 = time.perf_counter()
    before = dict(assigned)
    consumers.append(make(members))
    while not assigned.get(members) and time.perf_counter() - t0 < 60:
        time.sleep(0.005)
    t_reb = time.perf_counter() - t0
    print(f"member {members + 1} joins -> rebalanced         : {t_reb * 1000:8.0f} ms "
          f"({sum(before.values())} members had partitions before)")
    stop.set()
    th.join()
    for c in consumers:
        c.close()


def bench_replay(groups: int, parts: int) -> None:
    data = Path(tempfile.mkdtemp(prefix="bench-groups-"))
    cl = EmbeddedCluster(data, config=CFG).start()
    try:
        bs = cl.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})  # must outlive the future
        admin.create_topics([NewTopic("replay", parts, 1)])["replay"].result(30)
        w = Wire(bs)
        for g in range(groups):
            w.call(8, 8, commit_request(f"replay-{g}", "replay", range(parts), g))
    finally:
        cl.stop()
    t0 = time.perf_counter()
    cl = EmbeddedCluster(data, config=CFG).start()
    t_start = time.perf_counter() - t0
    try:
        gc = cl.broker.group_coordinator
        loaded = sum(len(g.offsets) for g in gc.groups.values())
        assert loaded == groups * parts, loaded
    finally:
        cl.stop()
    empty = Path(tempfile.mkdtemp(prefix="bench-groups-empty-"))
    t0 = time.perf_counter()
    EmbeddedCluster(empty, config=CFG).start().stop()
    t_base = time.perf_counter() - t0
    n = groups * parts
    replay = max(t_start - t_base, 1e-6)
    print(f"start with {groups} groups x {parts} offsets : {t_start * 1000:8.0f} ms "
          f"(empty broker {t_base * 1000:.0f} ms; replay ~{n / replay:,.0f} records/s)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=5000)
    ap.add_argument("--members", type=int, default=8)
    ap.add_argument("--groups", type=int, default=500)
    ap.add_argument("--parts", type=int, default=100)
    args = ap.parse_args()
    with EmbeddedCluster(tempfile.mkdtemp(prefix="bench-groups-"), config=CFG) as cl:
        bs = cl.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})  # must outlive the future
        admin.create_topics([NewTopic("bench", 16, 1)])["bench"].result(30)
        bench_commits(bs, "bench", args.commits)
        bench_join(bs, "bench", args.members)
    bench_replay(args.groups, args.parts)


if __name__ == "__main__":
    main()
