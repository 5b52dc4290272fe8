"""The object-storage tier's core against real fsspec filesystems (``file://`` and
``memory://``): upload with the manifest, local deletion, remote reads equal to local ones,
restore of an empty local directory, retention, fencing, bucket clean-up, and the aborted
transactions a read_committed fetch from the bucket reports."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import fsspec
import pytest
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from sparklog.protocol.errors import KafkaStorageError
from sparklog.protocol.records import decode_batches
from sparklog.storage import LogConfig, LogManager, PartitionLog
from sparklog.storage.remote.conditional import replace_if
from sparklog.storage.remote.follower import tier_start
from sparklog.storage.remote.manager import RemoteLogManager
from sparklog.storage.remote.store import RemoteStore, RetryPolicy
from tests.helpers.batches import append_committed, append_marker, make_batch, txn_batch
from tests.helpers.object_store import FaultyFileSystem, FaultyStore
from tests.helpers.polling import wait_for

TOPIC_ID = uuid.UUID(int=0x1234).bytes
TIERED = dict(segment_bytes=600, file_delete_delay_ms=0, remote_storage_enable=True,
              retention_ms=-1)


@pytest.fixture(params=["file", "memory", "s3"])
def store(request, tmp_path):
    retry = RetryPolicy(attempts=2, initial_backoff_ms=1)
    if request.param == "file":
        yield RemoteStore.from_url(f"file://{tmp_path}/bucket", retry=retry)
    elif request.param == "memory":
        fs = fsspec.filesystem("memory")
        root = f"/tier-{uuid.uuid4().hex}"
        fs.makedirs(root, exist_ok=True)
        yield RemoteStore(fs, root, retry)
        fs.rm(root, recursive=True)
    else:
        moto = request.getfixturevalue("moto_s3")
        yield RemoteStore.from_url(f"s3://b-{uuid.uuid4().hex[:12]}/tier", moto.options, retry)


def _tier(store, epoch=0, **kw):
    return RemoteLogManager(store, lambda t, p: epoch, **kw)


def _log(tmp_path, name="t-0", **cfg):
    return PartitionLog(str(tmp_path / "logs" / name), LogConfig(**{**TIERED, **cfg}),
                        topic_id=TOPIC_ID)


def _fill(plog, n, *, ts0=1_000_000):
    for i in range(n):
        plog.append_as_leader(make_batch(3, ts=ts0 + i), 0)
    plog.update_high_watermark(plog.log_end_offset)


def _uploaded(tmp_path, store, batches, epoch=0):
    """A tiered log of ``batches`` batches whose sealed segments the tier uploaded."""
    plog = _log(tmp_path)
    tier = _tier(store, epoch)
    tier.attach(plog)
    _fill(plog, batches)
    tier.run_for(plog)
    return plog, tier


def _read_everything(plog, start=None):
    """Batches from ``start`` to the HW, fetch by fetch, as a consumer would."""
    offset = plog.log_start_offset if start is None else start
    out = []
    while offset < plog.high_watermark:
        info = plog.read(offset, 700, max_offset=plog.high_watermark)
        data = info.read_bytes()
        assert data, f"no progress at {offset}"
        out.append(data)
        offset = info.next_offset
    return b"".join(out)


def _raw(plog):
    """Every local byte of the log, segment by segment (what a remote read must equal)."""
    return b"".join(Path(s.log_path).read_bytes() for s in plog.segments)


def test_upload_lists_complete_segments_and_remote_reads_equal_local(tmp_path, store):
    plog, tier = _uploaded(tmp_path, store, 40)
    original = _raw(plog)
    sealed = plog.segments[:-1]
    assert len(sealed) > 3
    m = plog.remote.manifest
    assert [s.base_offset for s in m.segments] == [s.base_offset for s in sealed]
    assert m.end_offset == sealed[-1].next_offset and m.leader_epoch == 0
    seg0 = m.segments[0]
    assert {".log", ".timeindex", ".snapshot", ".leader-epoch-checkpoint"} <= set(seg0.files)
    assert seg0.size == sealed[0].size
    # nothing uploaded twice
    tier.run_for(plog)
    assert plog.remote.manifest == m
    times = [999_999, 1_000_000, 1_000_007, 1_000_020, 1_000_038, 1_000_041, 2_000_000]
    by_time = [plog.offset_for_timestamp(t) for t in times]
    # local retention 0 bytes: every uploaded segment goes locally, the log start stays
    plog.config = plog.config.with_values({"local_retention_bytes": 0})
    tier.run_for(plog)
    assert plog.local_log_start_offset == m.end_offset
    assert plog.log_start_offset == 0
    assert _read_everything(plog, 0) == original
    # ListOffsets by timestamp finds the same records in the bucket
    assert [plog.offset_for_timestamp(t) for t in times] == by_time
    assert [b.base_offset for b in decode_batches(_read_everything(plog, 5))][0] == 3


def test_restore_from_empty_disk_continues_after_last_upload(tmp_path, store):
    plog = _log(tmp_path)
    tier = _tier(store)
    tier.attach(plog)
    for i in range(30):
        pid_batch = make_batch(2, ts=1_000_000 + i, producer_id=7, producer_epoch=0,
                               base_sequence=2 * i)
        plog.append_as_leader(pid_batch, 3 if i >= 10 else 0)
    plog.update_high_watermark(plog.log_end_offset)
    tier.run_for(plog)
    m = plog.remote.manifest
    remote_bytes = b"".join(Path(s.log_path).read_bytes() for s in plog.segments[:-1])
    plog.close()

    tier2 = _tier(store)
    mgr = LogManager([str(tmp_path / "fresh")], LogConfig(**TIERED), tier=tier2)
    try:
        restored = mgr.get_or_create_log("t", 0, topic_id=TOPIC_ID)
        assert restored.log_end_offset == m.end_offset
        assert restored.log_start_offset == 0
        assert restored.high_watermark == m.end_offset
        assert restored.leader_epoch_cache.entries() == [(0, 0), (3, 20)]
        # producer state came along: the next sequence is accepted, a replay is a duplicate
        n = m.end_offset // 2
        info = restored.append_as_leader(make_batch(2, producer_id=7, producer_epoch=0,
                                                    base_sequence=2 * n), 3)
        assert info.first_offset == m.end_offset and not info.duplicate
        restored.update_high_watermark(restored.log_end_offset)
        assert _read_everything(restored, 0)[: len(remote_bytes)] == remote_bytes
    finally:
        mgr.shutdown()


def test_a_follower_restarts_from_the_bucket_below_the_leaders_local_start(tmp_path, store):
    """KIP-405's follower path: the follower's log starts empty after the last uploaded
    segment the leader dropped locally, with the bucket's log start, the leader epochs and
    the producer state there, and reads below that come from the bucket."""
    leader = _log(tmp_path)
    tier = _tier(store)
    tier.attach(leader)
    for i in range(30):
        leader.append_as_leader(make_batch(2, ts=1_000_000 + i, producer_id=7, producer_epoch=0,
                                           base_sequence=2 * i), 3 if i >= 10 else 0)
    leader.update_high_watermark(leader.log_end_offset)
    tier.run_for(leader)
    uploaded = b"".join(Path(s.log_path).read_bytes() for s in leader.segments[:-1])
    leader.config = leader.config.with_values({"local_retention_bytes": 0})
    tier.run_for(leader)
    local_start = leader.local_log_start_offset
    assert local_start == leader.remote.manifest.end_offset > 20

    follower = PartitionLog(str(tmp_path / "f" / "t-0"), LogConfig(**TIERED), topic_id=TOPIC_ID)
    follower.append_as_follower(make_batch(2, base_offset=0))  # a stale prefix goes too
    RemoteLogManager(store, lambda t, p: None).attach(follower)
    start = tier_start(follower.remote, local_start)
    assert start is not None and start.offset == local_start
    follower.truncate_fully_and_start_at(start.offset, start.log_start_offset, start.epochs,
                                         start.producer_snapshot)
    assert (follower.log_start_offset, follower.local_log_start_offset,
            follower.log_end_offset) == (0, local_start, local_start)
    assert follower.leader_epoch_cache.entries() == [(0, 0), (3, 20)]
    entry = follower.producer_state.last_entry(7)
    assert entry is not None and entry.last_seq == local_start - 1
    assert _read_everything(follower, 0) == uploaded
    # no segment holds the offset before a local start the bucket does not reach yet
    assert tier_start(follower.remote, local_start + 10) is None


def test_truncation_below_the_local_start_of_a_tiered_log(tmp_path, store):
    plog, tier = _uploaded(tmp_path, store, 40)
    original = _raw(plog)
    plog.config = plog.config.with_values({"local_retention_bytes": 0})
    tier.run_for(plog)
    target = plog.local_log_start_offset - 6
    assert plog.truncate_to(target)
    assert (plog.log_start_offset, plog.local_log_start_offset, plog.log_end_offset,
            plog.high_watermark) == (0, target, target, target)
    assert plog.leader_epoch_cache.entries() == [(0, 0)]
    # the bucket serves what is below the truncation point, nothing past it
    below = _read_everything(plog, 0)
    assert original.startswith(below)
    assert [b.base_offset for b in decode_batches(below)] == list(range(0, target, 3))
    assert plog.append_as_leader(make_batch(3), 1).first_offset == target


def test_total_retention_deletes_remote_segments_and_moves_log_start(tmp_path, store):
    plog, tier = _uploaded(tmp_path, store, 40)
    m = plog.remote.manifest
    doomed = m.segments[:2]
    paths = [plog.remote.object_path(s, ".log") for s in doomed]
    assert all(store.fs.exists(p) for p in paths)
    # retention.bytes counts the whole log: the remote segments first
    total = m.size_bytes + plog.active_segment.size
    keep = total - doomed[0].size - doomed[1].size
    plog.config = plog.config.with_values({"retention_bytes": keep})
    tier.run_for(plog)
    assert plog.log_start_offset == doomed[1].end_offset
    assert plog.remote.manifest.segments == m.segments[2:]
    assert not any(store.fs.exists(p) for p in paths)
    # DeleteRecords moves the start further; the next run drops what it passed
    target = m.segments[3].end_offset
    plog.delete_records(target)
    tier.run_for(plog)
    assert plog.remote.manifest.log_start_offset == target
    assert plog.remote.manifest.segments[0].base_offset == target


def test_a_fenced_leader_uploads_nothing_visible(tmp_path, store):
    plog, tier = _uploaded(tmp_path, store, 20, epoch=5)
    m = plog.remote.manifest
    assert m.leader_epoch == 5
    _fill(plog, 20)
    stale = _tier(store, epoch=4)
    plog.remote = None
    stale.attach(plog)
    before = set(store.fs.find(plog.remote.directory))
    stale.run_for(plog)
    assert plog.remote.load_manifest() == m
    assert set(store.fs.find(plog.remote.directory)) == before
    # the leader of the current epoch continues where the manifest ends
    plog.remote = None
    tier.attach(plog)
    tier.run_for(plog)
    segs = plog.remote.manifest.segments
    assert segs[: len(m.segments)] == m.segments and len(segs) > len(m.segments)
    assert all(a.end_offset <= b.base_offset for a, b in zip(segs, segs[1:], strict=False))


class _SegmentFaults(FaultyFileSystem):
    """Fails the uploads of one segment (by base offset) and counts manifest writes."""

    def __init__(self, inner):
        super().__init__(inner)
        self.failing_base: int | None = None
        self.manifest_writes = 0

    def put_file(self, lpath, rpath, **kw):
        if self.failing_base is not None and f"/{self.failing_base:020d}-" in rpath:
            raise OSError(f"injected fault: upload of {rpath}")
        super().put_file(lpath, rpath, **kw)

    def pipe_file(self, path, value, **kw):  # a manifest is one write on this store
        self.manifest_writes += path.endswith("manifest.json")
        super().pipe_file(path, value, **kw)


def test_a_pass_lists_its_uploads_in_one_manifest_write_and_keeps_them_when_one_fails(tmp_path):
    """Segments uploaded in one pass are listed together (one manifest write, not one
    each); when the upload of a later segment fails, those before it are listed and
    nothing of the failed one is left in the bucket."""
    inner = fsspec.filesystem("memory")
    root = f"/tier-{uuid.uuid4().hex}"
    fs = _SegmentFaults(inner)
    store = RemoteStore(fs, root, RetryPolicy(attempts=2, initial_backoff_ms=1))
    plog = _log(tmp_path)
    tier = _tier(store, manifest_interval_ms=3_600_000)
    assert tier.attach(plog)
    _fill(plog, 40)
    sealed = plog.segments[:-1]
    assert len(sealed) > 5
    fs.failing_base = sealed[3].base_offset
    with pytest.raises(KafkaStorageError):
        tier.run_for(plog)
    m = plog.remote.load_manifest()
    assert [s.base_offset for s in m.segments] == [s.base_offset for s in sealed[:3]]
    assert fs.manifest_writes == 1
    listed = {plog.remote.object_path(s, x) for s in m.segments for x in s.files}
    assert {p for p in inner.find(root) if not p.endswith("manifest.json")} == listed
    fs.failing_base = None
    tier.run_for(plog)
    assert [s.base_offset for s in plog.remote.load_manifest().segments] == [
        s.base_offset for s in sealed]
    assert fs.manifest_writes == 2
    original = _raw(plog)
    plog.config = plog.config.with_values({"local_retention_bytes": 0})
    tier.run_for(plog)
    assert plog.local_log_start_offset == sealed[-1].next_offset
    assert _read_everything(plog, 0) == original
    inner.rm(root, recursive=True)


def test_a_follower_uploads_nothing(tmp_path, store):
    plog = _log(tmp_path)
    follower = RemoteLogManager(store, lambda t, p: None)
    follower.attach(plog)
    _fill(plog, 20)
    follower.run_for(plog)
    assert plog.remote.manifest.segments == ()
    assert store.get_bytes(plog.remote.manifest_path) is None


def test_store_errors_are_retriable_and_fail_fast(tmp_path, store):
    plog, tier = _uploaded(tmp_path, store, 20)
    plog.delete_local_segments_below(plog.remote.manifest.end_offset)
    seg = plog.remote.manifest.segments[0]
    store.fs.rm_file(plog.remote.object_path(seg, ".log"))
    tier.cache.invalidate(plog.remote.object_path(seg, ".log"))
    with pytest.raises(KafkaStorageError):
        plog.read(0, 1000)
    # within the backoff window: refused without asking the store
    with pytest.raises(KafkaStorageError, match="unavailable"):
        plog.read(0, 1000)


def test_topic_deletion_cleans_the_bucket_and_a_replica_leaving_does_not(tmp_path, store):
    tier = _tier(store, task_interval_ms=3_600_000)
    mgr = LogManager([str(tmp_path / "d")], LogConfig(**TIERED), tier=tier)
    try:
        plog = mgr.get_or_create_log("t", 0, topic_id=TOPIC_ID)
        _fill(plog, 20)
        tier.run_for(plog)
        manifest = plog.remote.manifest_path
        json.loads(store.get_bytes(manifest))
        mgr.delete_log("t", 0)  # the replica moved to another broker: the bucket stays
        tier.run_once()
        assert store.get_bytes(manifest) is not None
        tier.delete_topic("t", TOPIC_ID)
        tier.run_once()
        assert store.get_bytes(manifest) is None
        assert not store.fs.exists(store.topic_dir("t", TOPIC_ID))
    finally:
        mgr.shutdown()


def test_store_faults_are_retried_and_never_list_a_partial_upload(tmp_path):
    inner = fsspec.filesystem("memory")
    root = f"/tier-{uuid.uuid4().hex}"
    faulty = FaultyFileSystem(inner, fail_rate=0.3, delay_rate=0.2, delay_s=0.002, seed=7)
    store = RemoteStore(faulty, root, RetryPolicy(attempts=2, initial_backoff_ms=1))
    plog = _log(tmp_path)
    tier = _tier(store)
    while not tier.attach(plog):
        pass
    _fill(plog, 60)
    original = _raw(plog)
    sealed_end = plog.segments[-1].base_offset
    plog.config = plog.config.with_values({"local_retention_bytes": 0})
    for _ in range(200):
        try:
            tier.run_for(plog)
        except KafkaStorageError:
            pass  # what the task logs and retries on its next run
        m = plog.remote.manifest
        # every listed segment is whole in the store, whatever failed around it
        for seg in m.segments:
            for suffix, size in seg.files.items():
                assert inner.size(plog.remote.object_path(seg, suffix)) == size
        if (m.end_offset == sealed_end and plog.local_log_start_offset == sealed_end
                and not plog.remote.orphan_count):
            break
    else:
        raise AssertionError(f"tier did not converge: {plog.remote.manifest}")
    assert faulty.failures > 0
    # objects of failed uploads were removed: only listed segments remain
    listed = {plog.remote.object_path(s, x) for s in m.segments for x in s.files}
    left = {p for p in inner.find(root) if not p.endswith("manifest.json")}
    assert left == listed
    # reads retry through faults too: a consumer gets every byte, some fetches fail first
    faulty.fail_rate = 0.2
    plog.remote.read_backoff_ms = 0  # the test does not wait out the fail-fast window
    got, offset = [], 0
    for _ in range(2000):
        if offset >= plog.high_watermark:
            break
        try:
            info = plog.read(offset, 700, max_offset=plog.high_watermark)
            got.append(info.read_bytes())
            offset = info.next_offset
        except KafkaStorageError:
            pass  # retriable: the consumer fetches again
    assert b"".join(got) == original
    inner.rm(root, recursive=True)


def test_a_store_that_fails_at_start_up_is_retried(tmp_path):
    """A broker's store makes its root directory through the retry policy: one failed
    request (here the first of all, seed 1) does not stop the broker from starting."""
    fsspec.register_implementation(FaultyStore.protocol, FaultyStore, clobber=True)
    store = RemoteStore.from_url(f"faulty://{tmp_path}/tier",
                                 {"target_protocol": "file", "fail_rate": "0.5", "seed": "1"},
                                 RetryPolicy(attempts=5, initial_backoff_ms=1))
    assert store.fs.failures == 1 and store.fs.calls == 2
    assert (tmp_path / "tier").is_dir()


def test_a_new_leader_with_other_segment_boundaries_continues_the_manifest(tmp_path, store):
    """Leader A uploads, leader B (epoch 1, segments cut elsewhere) takes over mid-way and
    A's late upload is fenced: the manifest covers every offset once, with no gap."""
    a, tier_a = _uploaded(tmp_path, store, 20)
    b = PartitionLog(str(tmp_path / "b" / "t-0"), LogConfig(**{**TIERED, "segment_bytes": 900}),
                     topic_id=TOPIC_ID)
    _fill(b, 40)
    _fill(a, 20)  # A goes on appending (an old leader that has not learnt of B yet)
    tier_b = _tier(store, epoch=1)
    tier_b.attach(b)
    tier_b.run_for(b)
    assert tier_a.copy_segments(a, a.remote, 0) == 0  # fenced: nothing listed
    segs = b.remote.load_manifest().segments
    assert segs[0].base_offset == 0 and segs[-1].end_offset == b.segments[-1].base_offset
    for prev, nxt in zip(segs, segs[1:], strict=False):
        assert nxt.base_offset <= prev.end_offset < nxt.end_offset
    assert {s.leader_epoch for s in segs} == {0, 1}
    listed = {b.remote.object_path(s, x) for s in segs for x in s.files}
    assert {p for p in store.fs.find(b.remote.directory)
            if not p.endswith("manifest.json")} == listed
    original = _raw(b)
    b.delete_local_segments_below(segs[-1].end_offset)
    assert b.local_log_start_offset == segs[-1].end_offset
    assert _read_everything(b, 0) == original


def test_a_followers_log_start_follows_the_manifest(tmp_path, store):
    leader, tier = _uploaded(tmp_path, store, 40)
    follower = PartitionLog(str(tmp_path / "f" / "t-0"), LogConfig(**TIERED), topic_id=TOPIC_ID)
    _fill(follower, 40)
    target = leader.remote.manifest.segments[2].end_offset
    leader.delete_records(target)
    tier.run_for(leader)
    follower_tier = RemoteLogManager(store, lambda t, p: None)
    follower_tier.attach(follower)
    follower_tier.run_for(follower)
    assert follower.log_start_offset == target
    assert follower.local_log_start_offset == target  # its segments below went too


def test_a_hanging_store_never_blocks_appends_or_local_reads(tmp_path):
    inner = fsspec.filesystem("memory")
    root = f"/tier-{uuid.uuid4().hex}"
    faulty = FaultyFileSystem(inner)
    tier = _tier(RemoteStore(faulty, root, RetryPolicy(attempts=1)), task_interval_ms=10)
    mgr = LogManager([str(tmp_path / "d")], LogConfig(**TIERED), tier=tier)
    try:
        plog = mgr.get_or_create_log("t", 0, topic_id=TOPIC_ID)
        faulty.gate.clear()  # the store stops answering
        mgr.start()  # the tier's thread uploads every 10 ms
        _fill(plog, 10)
        wait_for(lambda: faulty.waiting > 0, 10, "the uploader to hang on the store")
        done = threading.Event()

        def produce_and_read() -> None:
            _fill(plog, 100, ts0=2_000_000)
            assert decode_batches(plog.read(0, 1 << 20).read_bytes())[0].base_offset == 0
            done.set()

        t = threading.Thread(target=produce_and_read)
        t.start()
        assert done.wait(10), "appends waited for the store"
        t.join()
        faulty.gate.set()
        wait_for(lambda: plog.remote.manifest.end_offset == plog.segments[-1].base_offset, 10,
                 "the uploads once the store answers again")
    finally:
        faulty.gate.set()
        mgr.shutdown()
        inner.rm(root, recursive=True)


def test_objects_of_an_upload_the_broker_died_in_are_swept(tmp_path, store):
    plog, tier = _uploaded(tmp_path, store, 20)
    rl = plog.remote
    listed = set(store.fs.find(rl.directory))
    crashed = [store.object_path(rl.directory, 12, "deadbeef", x) for x in (".log", ".index")]
    for p in crashed:
        store.put_bytes(p, b"half an upload")
    store.put_bytes(f"{rl.manifest_path}.0123.tmp", b"{")
    young = _tier(store, orphan_sweep_interval_ms=0, orphan_grace_ms=3_600_000)
    plog.remote = None
    young.attach(plog)
    young.run_for(plog)  # too young to tell from an upload in flight: kept
    assert all(store.fs.exists(p) for p in crashed)
    sweeper = _tier(store, orphan_sweep_interval_ms=0, orphan_grace_ms=-1)
    plog.remote = None
    sweeper.attach(plog)
    sweeper.run_for(plog)
    store.fs.invalidate_cache()
    assert set(store.fs.find(plog.remote.directory)) == listed


def _two_aborted(tmp_path, store):
    """A tiered log with A's aborted transaction in its first segment, B's begun in the
    second and aborted in the third (the active one); (log, tier, A's marker, B's first
    offset, B's marker)."""
    a, b = 1001, 1002
    plog = _log(tmp_path, segment_bytes=1 << 20)
    tier = _tier(store)
    tier.attach(plog)
    append_committed(plog, make_batch(3, ts=None))
    append_committed(plog, txn_batch(a, 0))
    a_marker = append_marker(plog, a, commit=False)
    plog.roll()
    append_committed(plog, make_batch(3, ts=None))
    b_first = append_committed(plog, txn_batch(b, 0))
    plog.roll()
    b_marker = append_marker(plog, b, commit=False)
    append_committed(plog, make_batch(3, ts=None))
    return plog, tier, a_marker, b_first, b_marker


def _tiered_locally_dropped(plog, tier):
    tier.run_for(plog)
    plog.config = plog.config.with_values({"local_retention_bytes": 0})
    tier.run_for(plog)


def test_read_committed_below_the_local_start_reports_aborted_transactions(tmp_path, store):
    """A's aborted transaction lies wholly in uploaded segments (its entry is in an
    uploaded ``.txnindex``); B's began in one, but its ABORT marker is in the local tail.
    Fetches served from the bucket report both, as the local log did before."""
    plog, tier, a_marker, b_first, b_marker = _two_aborted(tmp_path, store)
    ranges = [(0, b_first + 2), (a_marker + 1, b_first + 2), (b_first, b_marker + 1)]
    local = [plog.aborted_transactions(*r) for r in ranges]
    assert [t.last_offset for t in local[0]] == [a_marker, b_marker]
    assert [t.first_offset for t in local[2]] == [b_first]

    _tiered_locally_dropped(plog, tier)
    assert ".txnindex" in plog.remote.manifest.segments[0].files
    assert plog.local_log_start_offset == plog.remote.manifest.end_offset == b_first + 2
    assert [plog.aborted_transactions(*r) for r in ranges] == local
    # what a read_committed fetch reports: the aborted transactions up to what it returned
    info = plog.read(0, 1 << 20, max_offset=plog.last_stable_offset)
    assert info.next_offset == a_marker + 1  # one remote segment per read
    assert plog.aborted_transactions(0, info.next_offset) == local[0][:1]
    info = plog.read(info.next_offset, 1 << 20, max_offset=plog.last_stable_offset)
    assert plog.aborted_transactions(a_marker + 1, info.next_offset) == local[0][1:]


def test_a_read_committed_prefetch_reads_the_transaction_indexes_too(tmp_path):
    """The broker prefetches on a worker thread so its event loop never waits on the
    store: after a read_committed prefetch, the fetch's read and its aborted transactions
    need no store call (every call fails now)."""
    inner = fsspec.filesystem("memory")
    root = f"/tier-{uuid.uuid4().hex}"
    faulty = FaultyFileSystem(inner)
    try:
        plog, tier, a_marker, _b, _m = _two_aborted(
            tmp_path, RemoteStore(faulty, root, RetryPolicy(attempts=1)))
        want = plog.aborted_transactions(0, a_marker + 1)
        _tiered_locally_dropped(plog, tier)
        plog.remote.prefetch(0, 1 << 20, read_committed=True)
        faulty.fail_rate = 1.0
        info = plog.read(0, 1 << 20, max_offset=plog.last_stable_offset)
        assert info.next_offset == a_marker + 1
        assert plog.aborted_transactions(0, info.next_offset) == want
        assert faulty.failures == 0
    finally:
        inner.rm(root, recursive=True)


def test_manifest_writes_lose_no_concurrent_update(store):
    """A second writer acting between a writer's read and its write: on S3 the first one's
    If-Match PUT fails (the second's write stands); on file:// and memory:// the second
    waits for the first and then builds on it. Either way no write is silently lost."""
    path = f"{store.root}/cas-{uuid.uuid4().hex}/manifest.json"
    store.makedirs(path.rsplit("/", 1)[0])
    store.put_bytes(path, b"v0")
    other: list[bool] = []
    racer = threading.Thread(target=lambda: other.append(
        replace_if(store, path, lambda stored: (stored or b"") + b"+b")))

    def decide(stored):
        racer.start()
        racer.join(0.5)  # done on S3; waiting for our write where writes are serialised
        return (stored or b"") + b"+a"

    ours = replace_if(store, path, decide)
    racer.join(10)
    assert other == [True]
    assert store.get_bytes(path) == (b"v0+a+b" if ours else b"v0+b")
    assert ours == isinstance(store.fs, LocalFileSystem | MemoryFileSystem)
    # a first manifest is created only if none exists meanwhile
    fresh = f"{path}.new"
    assert replace_if(store, fresh, lambda stored: b"first" if stored is None else None)
    assert not replace_if(store, fresh, lambda stored: b"again" if stored is None else None)
    assert store.get_bytes(fresh) == b"first"
