"""The remote read cache sends few, large requests: consecutive missing chunks go as one
ranged read, and a sequential reader's read-ahead window is refilled half a window at a
time; the bytes are always the object's."""

from __future__ import annotations

import os
import uuid

import fsspec

from sparklog.storage.remote.chunk_cache import ChunkCache
from sparklog.storage.remote.store import RemoteStore

KiB = 1024


def _object(size: int) -> tuple[RemoteStore, str, bytes, list[tuple[int, int]]]:
    """A memory-filesystem store holding one object of ``size`` random bytes, and the list
    its reads are recorded in (position, size)."""
    fs = fsspec.filesystem("memory")
    root = f"/cache-{uuid.uuid4().hex}"
    store = RemoteStore(fs, root)
    data = os.urandom(size)
    path = f"{root}/obj.log"
    store.put_bytes(path, data)
    return store, path, data, []


def _cache(store: RemoteStore, calls: list[tuple[int, int]], **kw: int) -> ChunkCache:
    def fetch(path: str, position: int, size: int) -> bytes:
        calls.append((position, size))
        return store.read_range(path, position, size)

    return ChunkCache(fetch, chunk_bytes=KiB, **kw)


def test_a_read_over_missing_chunks_is_one_request_per_run():
    store, path, data, calls = _object(40 * KiB + 100)
    cache = _cache(store, calls, max_bytes=256 * KiB, max_run_bytes=16 * KiB)
    try:
        assert cache.read(path, len(data), 3 * KiB + 5, 2 * KiB) == data[3 * KiB + 5:5 * KiB + 5]
        assert calls == [(3 * KiB, 3 * KiB)]
        # chunks 3-5 are here: 0-2 and 6-39 go as runs of at most 16 chunks, the last
        # one short at the object's end
        assert cache.read(path, len(data), 0, len(data)) == data
        assert calls[1:] == [(0, 3 * KiB), (6 * KiB, 16 * KiB), (22 * KiB, 16 * KiB),
                             (38 * KiB, 2 * KiB + 100)]
    finally:
        cache.close()


def test_a_sequential_reader_refills_its_window_half_a_window_at_a_time():
    size = 200 * KiB
    store, path, data, calls = _object(size)
    cache = _cache(store, calls, max_bytes=64 * KiB, max_run_bytes=16 * KiB)
    try:
        assert cache.read_ahead_bytes == 16 * KiB
        got, pos, step = [], 0, 700
        while pos < size:
            cache.read_ahead(path, size, pos, step)
            got.append(cache.read(path, size, pos, step))
            pos += len(got[-1])
            cache.read_ahead(path, size, pos, cache.read_ahead_bytes)
        assert b"".join(got) == data
        assert sum(s for _p, s in calls) == size  # every byte fetched once
        assert sorted(p for p, _s in calls) == [p for p, _s in sorted(calls)]
        # 200 chunks in requests of at least half the window (the first and last aside)
        assert len(calls) <= 200 // 8 + 2, calls
    finally:
        cache.close()


def test_the_window_is_capped_by_a_quarter_of_the_cache():
    store, _path, _data, calls = _object(KiB)
    cache = _cache(store, calls, max_bytes=32 * KiB, max_run_bytes=16 * KiB)
    try:
        assert cache.read_ahead_bytes == 8 * KiB
    finally:
        cache.close()


def test_read_parts_are_views_of_the_cached_chunks():
    store, path, data, calls = _object(10 * KiB)
    cache = _cache(store, calls, max_bytes=256 * KiB)
    try:
        parts = cache.read_parts(path, len(data), 500, 3 * KiB)
        assert [len(p) for p in parts] == [KiB - 500, KiB, KiB, 500]
        assert b"".join(parts) == data[500:3 * KiB + 500]
        assert all(isinstance(p, memoryview) for p in parts)
        assert len(calls) == 1
        assert b"".join(cache.read_parts(path, len(data), 9 * KiB, 5 * KiB)) == data[9 * KiB:]
    finally:
        cache.close()
