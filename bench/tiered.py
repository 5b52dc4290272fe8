"""The object-storage tier: (a) consuming a topic whose data is all in the bucket vs the
same data on local disk, and (c) upload throughput vs a plain ``fs.put`` of the same bytes.

(a) One ``sparklog server`` with the tier on (``file://`` bucket in a temp dir, or moto's S3
server with ``--store s3``). N records of 100 B go to a plain topic and to a tiered one
(``local.retention.bytes=0``: every sealed segment leaves the local disk once uploaded;
the last segment is rolled with ``segment.ms`` and one extra record, so all N are in the
bucket). Then confluent-kafka consumes each from offset 0. Target (issue 17): tiered >=
0.8x plain records/s.

(b) Spark (local[2]) reads a tiered topic of N records in ``--spark-partitions`` partitions,
all in the bucket, with ``readStream`` + Trigger.AvailableNow into the noop sink, with
``storageReads=auto`` (tasks read the segment objects) and ``never`` (tasks fetch from the
broker, which reads the bucket), alternating, best of ``--reps``. Then, to say where the
time goes, the same ranges read in this process without Spark: the bucket reader
(``read_planned``) and the broker reader (``read_ranges``), rows/s on one thread. Target:
auto >= 1.0x never.

(c) In this process: a partition log of N records in ``--segment-mib`` segments is uploaded
by the tier (``RemoteLogManager.copy_segments``: every file, size checks, manifest) and the
same files are copied with ``fs.put_file`` alone. Target: tier >= 0.8x the plain put's MiB/s.

    .venv/bin/python bench/tiered.py [--n 2000000] [--store file|s3] [--only a|b|c]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

from _net import free_port, wait_listening
from broker import (
    VALUE_SIZE,
    BrokerProc,
    MiB,
    consume,
    fmt_rate,
    proc_cpu_s,
    produce,
    start_sparklog,
    values,
)


def machine_cpu_s() -> tuple[float, float]:
    """(busy, idle) CPU-seconds of the whole machine so far, all cores (/proc/stat)."""
    with open("/proc/stat") as fh:
        ticks = [int(x) for x in fh.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks[:8]) - idle) / hz, idle / hz


def cpu_split(pids: dict[str, int]) -> tuple[dict[str, float], ...]:
    """Now: CPU-seconds of each named process and of the machine (busy, idle)."""
    busy, idle = machine_cpu_s()
    return {name: proc_cpu_s(pid) for name, pid in pids.items()}, {"busy": busy, "idle": idle}


def start_moto() -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                          str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(port, 30)
    return p, {"endpoint_url": f"http://127.0.0.1:{port}", "key": "bench", "secret": "bench"}


def store_url(store: str, workdir: str, options: dict[str, str]) -> str:
    if store == "file":
        return f"file://{workdir}/bucket"
    import fsspec

    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    fsspec.filesystem("s3", **options).mkdir(bucket)
    return f"s3://{bucket}/tier"


def start_tiered(args: argparse.Namespace, workdir: str, options: dict[str, str]) -> BrokerProc:
    """A ``sparklog server`` with its tier in the bucket ``--store`` says."""
    url = store_url(args.store, workdir, options)
    sets = ["remote.log.storage.system.enable=true", f"remote.log.storage.url={url}",
            "remote.log.manager.task.interval.ms=500"]
    sets += [f"remote.log.storage.options.{k}={v}" for k, v in options.items()]
    return start_sparklog(workdir, sets)


def create(bs: str, topic: str, configs: dict[str, str], partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient({"bootstrap.servers": bs})
    a.create_topics([NewTopic(topic, partitions, 1, config=configs)])[topic].result(30)


def local_logs(data: str, topic: str, partition: int = 0) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(data, f"{topic}-{partition}"))
                  if n.endswith(".log"))


def bench_consume(args: argparse.Namespace, workdir: str, options: dict[str, str]) -> dict:
    b = start_tiered(args, workdir, options)
    data = os.path.join(workdir, "sparklog-data")
    try:
        seg = str(args.segment_mib * MiB)
        create(b.bootstrap, "plain", {"segment.bytes": seg})
        create(b.bootstrap, "tiered", {"segment.bytes": seg, "remote.storage.enable": "true",
                                       "local.retention.bytes": "0", "segment.ms": "2000"})
        vals = values()
        produce(b, "plain", args.n, "1", vals, args.cap_s)
        produce(b, "tiered", args.n, "1", vals, args.cap_s)
        time.sleep(2.1)
        produce(b, "tiered", 1, "1", vals, args.cap_s)  # rolls the last full segment
        t0 = time.monotonic()
        while local_logs(data, "tiered")[0] != f"{args.n:020d}.log":
            if time.monotonic() - t0 > args.cap_s:
                raise RuntimeError(f"upload not done: {local_logs(data, 'tiered')[:3]}")
            time.sleep(0.2)
        upload_wait = time.monotonic() - t0
        out = {"upload_wait_s": upload_wait}
        for rep in range(args.reps):
            for topic in ("plain", "tiered"):  # interleaved: same machine load for both
                r = consume(b, topic, 1, args.n, args.cap_s)
                out.setdefault(topic, []).append(r["rps"])
                print(f"  consume {topic:6s} rep {rep}: {fmt_rate(r['rps'])} rec/s "
                      f"({r['mibps']:.0f} MiB/s, broker {r['cpu_s_per_gib']:.2f} CPU-s/GiB)",
                      flush=True)
        return out
    finally:
        b.stop()


def bench_spark(args: argparse.Namespace, workdir: str, options: dict[str, str]) -> dict:
    from confluent_kafka import Consumer, Producer, TopicPartition

    b = start_tiered(args, workdir, options)
    data = os.path.join(workdir, "sparklog-data")
    parts = args.spark_partitions
    spark = None
    try:
        create(b.bootstrap, "sparked", {
            "segment.bytes": str(args.segment_mib * MiB), "remote.storage.enable": "true",
            "local.retention.bytes": "0", "segment.ms": "2000"}, parts)
        produce(b, "sparked", args.n, "1", values(), args.cap_s)
        time.sleep(2.1)
        p = Producer({"bootstrap.servers": b.bootstrap})
        for part in range(parts):  # rolls each partition's last full segment
            p.produce("sparked", b"roll", partition=part)
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "bench-b"})
        ends = [c.get_watermark_offsets(TopicPartition("sparked", q), 10)[1]
                for q in range(parts)]
        c.close()
        t0 = time.monotonic()
        # all in the bucket: each partition keeps only its active segment (the roll record)
        while any(local_logs(data, "sparked", q) != [f"{ends[q] - 1:020d}.log"]
                  for q in range(parts)):
            if time.monotonic() - t0 > args.cap_s:
                raise RuntimeError("upload not done")
            time.sleep(0.2)
        total = sum(ends)
        storage = {f"storage.options.{k}": v for k, v in options.items()}

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from spark_source import run_query, spark_session

        spark = spark_session("2g")
        out: dict[str, list[float]] = {}
        for rep in range(args.reps + 1):  # the first round warms up Spark and the workers
            for mode in ("never", "auto")[:: 1 if rep % 2 else -1]:
                r = spark.readStream.format("sparklog").option("bootstrap.servers", b.bootstrap)
                for k, v in {"subscribe": "sparked", "startingOffsets": "earliest",
                             "storageReads": mode, **storage}.items():
                    r = r.option(k, v)
                progress: list[dict] = []
                pids = {"broker": b.p.pid, **({"moto": args.moto_pid} if args.moto_pid else {})}
                before = cpu_split(pids)
                rows, wall, _batches, _busy = run_query(
                    r.load(), os.path.join(workdir, f"ckpt-{mode}-{rep}"),
                    progress_out=progress)
                after = cpu_split(pids)
                assert rows == total, (mode, rows, total)
                # where the CPU went: the named processes, the rest of the machine (Spark's
                # JVM, its Python workers, this driver), and what stayed idle
                cpu = {k: after[0][k] - before[0][k] for k in pids}
                busy = after[1]["busy"] - before[1]["busy"]
                cpu["spark+rest"] = busy - sum(cpu.values())
                cpu["idle"] = after[1]["idle"] - before[1]["idle"]
                # where the query's time goes: each phase summed over its micro-batches
                phases = {k: sum(p["durationMs"].get(k, 0) for p in progress)
                          for k in ("latestOffset", "queryPlanning", "addBatch", "walCommit",
                                    "commitOffsets", "triggerExecution")}
                print(f"  spark {mode:5s} rep {rep}: {fmt_rate(rows / wall)} rows/s "
                      f"({wall:.1f} s; ms per phase {phases}; CPU-s "
                      f"{ {k: round(v, 2) for k, v in cpu.items()} })", flush=True)
                if rep:
                    out.setdefault(mode, []).append(rows / wall)
        out.update(in_process_reads(b.bootstrap, parts, storage))
        return out
    finally:
        if spark is not None:
            spark.stop()
        b.stop()


def in_process_reads(bootstrap: str, parts: int, storage: dict[str, str]) -> dict:
    """Rows/s of the bucket reader and the broker reader on this thread, no Spark."""
    import pyarrow as pa

    from sparklog.spark.options import parse_source_options
    from sparklog.spark.partition_reader import read_ranges
    from sparklog.spark.planning import RangeGroup
    from sparklog.spark.reader import SparklogBatchReader
    from sparklog.spark.schema import arrow_schema, source_schema
    from sparklog.spark.segment_reads import BucketRange, read_planned

    opts = parse_source_options({"bootstrap.servers": bootstrap, "subscribe": "sparked",
                                 **storage}, streaming=False)
    target: pa.Schema = arrow_schema(source_schema(False))
    tasks = SparklogBatchReader(opts, source_schema(False)).partitions()
    ranges = [r for t in tasks for r in (t.ranges if isinstance(t, RangeGroup) else (t,))]
    bucket = [r for r in ranges if isinstance(r, BucketRange)]
    out = {}
    for name, read in (("bucket_reader", lambda: read_planned(bucket, opts, target)),
                       ("broker_reader", lambda: read_ranges(bucket, opts, target))):
        t0 = time.perf_counter()
        n = sum(batch.num_rows for batch in read())
        out[name] = n / (time.perf_counter() - t0)
        print(f"  in-process {name}: {fmt_rate(out[name])} rows/s over {n} rows", flush=True)
    return out


def bench_upload(args: argparse.Namespace, workdir: str, options: dict[str, str]) -> dict:
    import fsspec

    from sparklog.protocol.records import Record, encode_batch
    from sparklog.storage.log_config import LogConfig
    from sparklog.storage.partition_log import PartitionLog
    from sparklog.storage.remote.manager import RemoteLogManager
    from sparklog.storage.remote.store import RemoteStore

    vals = values()
    plog = PartitionLog(os.path.join(workdir, "up-0"),
                        LogConfig(segment_bytes=args.segment_mib * MiB, remote_storage_enable=True),
                        topic_id=uuid.uuid4().bytes)
    per_batch = 5000
    for i in range(0, args.n, per_batch):
        recs = [Record(key=None, value=vals[(i + j) % len(vals)], timestamp=1_700_000_000_000)
                for j in range(min(per_batch, args.n - i))]
        plog.append_as_leader(encode_batch(recs), 0)
    plog.roll()
    plog.update_high_watermark(plog.log_end_offset)
    files = [os.path.join(plog.directory, n) for n in sorted(os.listdir(plog.directory))
             if n.endswith((".log", ".index", ".timeindex", ".snapshot"))
             and not n.startswith(f"{plog.log_end_offset:020d}")]
    nbytes = sum(os.path.getsize(f) for f in files)
    url = store_url(args.store, workdir, options)
    fs, root = fsspec.url_to_fs(url, **options)
    t_tier, t_put = [], []
    for rep in range(args.reps):
        def tier_upload(rep: int = rep) -> None:
            tier = RemoteLogManager(RemoteStore.from_url(f"{url}/tier-{rep}", options),
                                    lambda t, p: 0)
            plog.remote = None
            tier.attach(plog)
            tier.copy_segments(plog, plog.remote, 0)

        def plain_put(rep: int = rep) -> None:
            dst = f"{root}/put-{rep}"
            fs.makedirs(dst, exist_ok=True)
            for f in files:
                fs.put_file(f, f"{dst}/{os.path.basename(f)}")

        # alternate which goes first: the second one finds the page cache warmer
        for name, fn in (("tier", tier_upload), ("put", plain_put))[:: 1 if rep % 2 else -1]:
            t0 = time.perf_counter()
            fn()
            (t_tier if name == "tier" else t_put).append(time.perf_counter() - t0)
            # each copy goes once measured: on this VM, memory (the page cache of a file://
            # bucket included) in use beyond ~4 GiB is written ~9x slower, so copies kept
            # would slow whichever rep crossed that line
            if name == "tier":
                n_segments = len(plog.remote.manifest.segments)
            fs.rm(f"{root}/{name}-{rep}", recursive=True)
    n = n_segments
    t_tier_best, t_put_best = min(t_tier), min(t_put)
    plog.close()
    return {"segments": n, "mib": nbytes / MiB, "tier_mibps": nbytes / MiB / t_tier_best,
            "put_mibps": nbytes / MiB / t_put_best}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2_000_000, help="records (100 B each)")
    ap.add_argument("--store", choices=["file", "s3"], default="file")
    ap.add_argument("--segment-mib", type=int, default=16)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--cap-s", type=float, default=300.0)
    ap.add_argument("--only", choices=["a", "b", "c"], default=None)
    ap.add_argument("--spark-partitions", type=int, default=2)
    args = ap.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="sparklog-tiered-")
    moto = None
    options: dict[str, str] = {}
    try:
        args.moto_pid = None
        if args.store == "s3":
            moto, options = start_moto()
            args.moto_pid = moto.pid
        results: dict[str, object] = {"n": args.n, "store": args.store}
        if args.only in (None, "a"):
            a = bench_consume(args, workdir, options)
            plain, tiered = max(a["plain"]), max(a["tiered"])
            results["a"] = {**a, "ratio": tiered / plain}
            print(f"(a) consume from offset 0: tiered {fmt_rate(tiered)} rec/s vs plain "
                  f"{fmt_rate(plain)} rec/s = {tiered / plain:.2f}x (target >= 0.8x); "
                  f"upload of {args.n} x {VALUE_SIZE} B done {a['upload_wait_s']:.1f} s after "
                  f"the roll", flush=True)
        if args.only in (None, "b"):
            sb = bench_spark(args, workdir, options)
            auto, never = max(sb["auto"]), max(sb["never"])
            results["b"] = {**sb, "ratio": auto / never}
            print(f"(b) Spark AvailableNow: storageReads=auto {fmt_rate(auto)} rows/s vs never "
                  f"{fmt_rate(never)} rows/s = {auto / never:.2f}x (target >= 1.0x); "
                  f"without Spark, one thread: bucket reader "
                  f"{fmt_rate(sb['bucket_reader'])} rows/s, broker reader "
                  f"{fmt_rate(sb['broker_reader'])} rows/s", flush=True)
        if args.only in (None, "c"):
            c = bench_upload(args, workdir, options)
            results["c"] = {**c, "ratio": c["tier_mibps"] / c["put_mibps"]}
            print(f"(c) upload: tier {c['tier_mibps']:.0f} MiB/s vs fs.put {c['put_mibps']:.0f} "
                  f"MiB/s = {c['tier_mibps'] / c['put_mibps']:.2f}x (target >= 0.8x), "
                  f"{c['segments']} segments, {c['mib']:.0f} MiB", flush=True)
        print(json.dumps(results))
    finally:
        if moto is not None:
            moto.terminate()  # only the process we started
            moto.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
