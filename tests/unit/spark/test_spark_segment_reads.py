"""The bucket side of ``storageReads`` without a broker: how a planned range is split at
the manifest's end, and the aborted transactions a ``.txnindex`` lists (Kafka's layout),
on a real ``file://`` store."""

from __future__ import annotations

import struct

from sparklog.spark.planning import OffsetRange, RangeGroup, plan_tasks
from sparklog.spark.segment_reads import BucketRange, aborted_transactions, split_at_upload
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
    (bucket,) = split_at_upload(r, m, store, "d", "file:///b", False)
    assert isinstance(bucket, BucketRange)
    assert (bucket.start, bucket.upload_end, bucket.end) == (120, 400, 500)
    assert [s.base_offset for s in bucket.segments] == [100, 250]
    assert bucket.segments[0].log_path.endswith("d/00000000000000000100-id100.log")
    assert bucket.host == "host-a" and bucket.txn_indexes == ()
    # wholly uploaded: all from the bucket; wholly after the upload: the range as it was
    (inside,) = split_at_upload(OffsetRange("t", 0, 0, 90), m, store, "d", "u", False)
    assert isinstance(inside, BucketRange) and [s.base_offset for s in inside.segments] == [0]
    assert inside.upload_end == inside.end == 90
    after = OffsetRange("t", 0, 400, 450)
    assert split_at_upload(after, m, store, "d", "u", False) == [after]
    # read_committed: the .txnindex of every segment from the range's first one on
    m = _manifest((0, 100), (100, 250), (250, 400), txn=True)
    (b,) = split_at_upload(OffsetRange("t", 0, 120, 500), m, store, "d", "u", True)
    assert [p.rsplit("/", 1)[1][:20] for p, _ in b.txn_indexes] == [
        f"{100:020d}", f"{250:020d}"]


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
    assert aborted_transactions(store, indexes, 25, 61) == [(5, 2), (8, 30), (9, 60)]
    assert aborted_transactions(store, indexes, 0, 100) == [(5, 2), (7, 10), (8, 30), (9, 60)]
    assert aborted_transactions(store, [], 0, 100) == []
