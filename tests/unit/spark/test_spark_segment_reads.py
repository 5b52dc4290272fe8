"""The bucket side of ``storageReads`` without a broker: how a planned range is split at
the manifest's end (or, under read_committed, where the transactions the uploaded producer
snapshot names open begin), and the aborted transactions a ``.txnindex`` lists (Kafka's
layout), on a real ``file://`` store."""

from __future__ import annotations

import dataclasses
import struct

from sparklog.spark.planning import OffsetRange, RangeGroup, plan_tasks
from sparklog.spark.segment_reads import (
    BucketRange,
    aborted_transactions,
    committed_end,
    overlapping,
    split_at_upload,
)
from sparklog.storage.producer_state import ProducerStateEntry, ProducerStateManager
from sparklog.storage.remote.manifest import PartitionManifest, RemoteSegment
from sparklog.storage.remote.store import RemoteStore
from tests.unit.spark.test_spark_planning import _read


def _manifest(*bounds: tuple[int, int], txn: bool = False) -> PartitionManifest:
    files = {".log": 100, ".index": 8, **({".txnindex": 34} if txn else {})}
    segs = tuple(RemoteSegment(b, e, 0, f"id{b}", 0, dict(files)) for b, e in bounds)
    return PartitionManifest(0, bounds[0][0], segs)


def test_a_range_is_split_at_the_manifests_end(tmp_path):
    store = RemoteStore.from_url(f"file://{tmp_path}")
    m = _manifest((0, 100), (100, 250), (250, 400))
    r = OffsetRange("t", 0, 120, 500, "host-a")
    # one task reads the uploaded part from the bucket and the tail through brokers
    (bucket,) = split_at_upload(r, m, 400, store, "d", "file:///b", False)
    assert isinstance(bucket, BucketRange)
    assert (bucket.start, bucket.bucket_end, bucket.end) == (120, 400, 500)
    assert [s.base_offset for s in bucket.segments] == [100, 250]
    assert bucket.segments[0].log_path.endswith("d/00000000000000000100-id100.log")
    assert bucket.host == "host-a" and bucket.txn_indexes == ()
    # wholly uploaded: all from the bucket; wholly after the upload: the range as it was
    (inside,) = split_at_upload(OffsetRange("t", 0, 0, 90), m, 400, store, "d", "u", False)
    assert isinstance(inside, BucketRange) and [s.base_offset for s in inside.segments] == [0]
    assert inside.bucket_end == inside.end == 90
    after = OffsetRange("t", 0, 400, 450)
    assert split_at_upload(after, m, 400, store, "d", "u", False) == [after]
    # read_committed: the .txnindex of every segment from the range's first one on
    m = _manifest((0, 100), (100, 250), (250, 400), txn=True)
    (b,) = split_at_upload(OffsetRange("t", 0, 120, 500), m, 400, store, "d", "u", True)
    assert [p.rsplit("/", 1)[1][:20] for p, _ in b.txn_indexes] == [
        f"{100:020d}", f"{250:020d}"]


def test_read_committed_stops_where_a_transaction_open_at_the_upload_began(tmp_path):
    store = RemoteStore.from_url(f"file://{tmp_path}")
    d = f"{tmp_path}/part"
    # the producer state at the upload's end (400): producer 7's transaction began at 130,
    # producer 8's at 260, producer 9 has none open
    (tmp_path / "local").mkdir()
    (tmp_path / "part").mkdir()
    state = ProducerStateManager(str(tmp_path / "local"))
    state.producers = {pid: ProducerStateEntry(pid, 0, current_txn_first_offset=first)
                       for pid, first in ((7, 130), (8, 260), (9, -1))}
    with open(state.take_snapshot(400), "rb") as f:
        snapshot = f.read()
    m = _manifest((0, 100), (100, 250), (250, 400))
    last = m.segments[-1]
    store.put_bytes(store.object_path(d, last.base_offset, last.segment_id, ".snapshot"),
                    snapshot)
    # no snapshot listed: which transactions are open is unknown
    assert committed_end(store, d, m) is None
    last = dataclasses.replace(last, files={**last.files, ".snapshot": len(snapshot)})
    m = dataclasses.replace(m, segments=(*m.segments[:-1], last))
    assert committed_end(store, d, m) == 130
    (b,) = split_at_upload(OffsetRange("t", 0, 20, 500), m, 130, store, d, "u", True)
    assert isinstance(b, BucketRange) and (b.start, b.bucket_end, b.end) == (20, 130, 500)
    assert [s.base_offset for s in b.segments] == [0, 100]
    # a range starting above the open transaction's first offset: all through brokers
    r = OffsetRange("t", 0, 200, 500)
    assert split_at_upload(r, m, 130, store, d, "u", True) == [r]
    # nothing open: the upload's end
    state.producers = {9: ProducerStateEntry(9, 0)}
    with open(state.take_snapshot(400), "rb") as f:
        store.put_bytes(store.object_path(d, last.base_offset, last.segment_id, ".snapshot"),
                        f.read())
    assert committed_end(store, d, m) == 400


def test_plan_tasks_routes_pieces_before_grouping():
    def route(r: OffsetRange) -> list[OffsetRange]:  # the first 10 offsets elsewhere
        if not r.start < 10 < r.end:
            return [r]
        return [OffsetRange(r.topic, r.partition, r.start, 10),
                OffsetRange(r.topic, r.partition, 10, r.end)]

    tasks = plan_tasks({("t", 0): 0, ("t", 1): 0}, {("t", 0): 30, ("t", 1): 5},
                       _read(min_records_per_partition=1), route=route)
    flat = [r for t in tasks for r in (t.ranges if isinstance(t, RangeGroup) else (t,))]
    assert [(r.partition, r.start, r.end) for r in flat] == [(0, 0, 10), (0, 10, 30), (1, 0, 5)]


def test_aborted_transactions_come_from_the_txnindex(tmp_path):
    store = RemoteStore.from_url(f"file://{tmp_path}")
    entry = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable offset
    data = b"".join(entry.pack(0, pid, first, last, last) for pid, first, last in
                    [(7, 10, 20), (8, 30, 45), (9, 60, 70)])
    store.put_bytes(f"{tmp_path}/a.txnindex", data)
    store.put_bytes(f"{tmp_path}/b.txnindex", entry.pack(0, 5, 2, 90, 90))
    indexes = [(f"{tmp_path}/a.txnindex", len(data)), (f"{tmp_path}/b.txnindex", 34)]
    assert aborted_transactions(store, indexes, 25, 61) == [(5, 2, 90), (8, 30, 45),
                                                            (9, 60, 70)]
    every = aborted_transactions(store, indexes, 0, 100)
    assert every == [(5, 2, 90), (7, 10, 20), (8, 30, 45), (9, 60, 70)]
    assert aborted_transactions(store, [], 0, 100) == []
    # a read from offset 21 on: 7's marker (20) is behind it, so 7 is not aborted there
    assert overlapping(every, 21) == [(5, 2), (8, 30), (9, 60)]
    assert overlapping(every, 20) == [(5, 2), (7, 10), (8, 30), (9, 60)]


def test_windows_cutting_batches_anywhere_give_every_row_once(tmp_path):
    """A segment read in windows of any size (cutting batch headers and bodies anywhere,
    windows smaller than a batch) yields each row in [start, end) once, in order."""
    from sparklog.spark.options import parse_source_options
    from sparklog.spark.schema import arrow_schema, source_schema
    from sparklog.spark.segment_reads import SegmentObjects, read_planned
    from tests.helpers.batches import make_batch

    store = RemoteStore.from_url(f"file://{tmp_path}")
    sizes = [1, 7, 2, 30, 1, 5, 12, 3]  # records per batch: batches of unlike lengths
    batches, offset = [], 100
    for n in sizes:
        batches.append(make_batch(n, base_offset=offset, values=[
            f"v{offset + i}".encode() for i in range(n)]))
        offset += n
    end_of_segment = offset
    path = f"{tmp_path}/seg.log"
    store.put_bytes(path, b"".join(batches))
    seg = SegmentObjects(100, end_of_segment, path, sum(map(len, batches)), "", 0)
    target = arrow_schema(source_schema(False))
    for start, end in ((100, end_of_segment), (103, end_of_segment - 4), (140, 142)):
        want = [f"v{o}".encode() for o in range(start, end)]
        for window in (1, 11, 61, 62, 63, 200, 1000, 1 << 20):
            opts = parse_source_options({"bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
                                         "storageReadBytes": str(window)},
                                        streaming=False)
            r = BucketRange("t", 0, start, end, url=f"file://{tmp_path}", segments=(seg,),
                            bucket_end=end)
            got = [row for b in read_planned([r], opts, target)
                   for row in zip(b.column("offset").to_pylist(),
                                  b.column("value").to_pylist(), strict=True)]
            assert got == list(zip(range(start, end), want, strict=True)), (start, end, window)
