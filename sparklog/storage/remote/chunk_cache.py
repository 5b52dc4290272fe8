"""A bounded in-memory cache of fixed-size chunks of remote objects, with read-ahead.

Remote reads go through it: a fetch asks for a byte range, the cache fetches the aligned
chunks that cover it (one ranged GET each, those after the first in parallel) and keeps the
most recently used ones up to ``max_bytes`` in total. ``read_ahead`` starts fetching the
chunks after a read in the background, so a consumer reading a tiered partition from the
start finds the next fetch's bytes already here: the store's latency overlaps the client's
work instead of adding to it. Index objects are read through it too.

Objects are immutable once uploaded (segment ids are never reused), so a cached chunk is
never stale. Thread-safe: one fetch per chunk at a time (a second reader of a chunk being
fetched waits for that fetch); fetches run outside the lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["ChunkCache"]


class ChunkCache:
    def __init__(self, fetch: Callable[[str, int, int], bytes], *,
                 chunk_bytes: int = 1 << 20, max_bytes: int = 64 << 20,
                 fetch_threads: int = 4) -> None:
        """``fetch(path, position, size)`` reads a range from the store."""
        if chunk_bytes <= 0:
            raise ValueError("chunk_bytes must be positive")
        self._fetch = fetch
        self.chunk_bytes = chunk_bytes
        self.max_bytes = max_bytes
        self._chunks: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._inflight: dict[tuple[str, int], Future[bytes]] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=fetch_threads,
                                        thread_name_prefix="sparklog-remote-read")
        self.hits = 0
        self.misses = 0

    def read(self, path: str, object_size: int, position: int, size: int) -> bytes:
        """Bytes [position, position + size) of ``path`` (``object_size`` bytes long: chunks
        are never asked for past its end, which some stores refuse), fewer at its end."""
        size = min(size, object_size - position)
        if size <= 0:
            return b""
        cb = self.chunk_bytes
        first, last = position // cb, (position + size - 1) // cb
        if last > first:
            self._start(path, object_size, range(first + 1, last + 1))
        parts = []
        for i in range(first, last + 1):
            chunk = self._chunk(path, i, min(cb, object_size - i * cb))
            lo = position - i * cb if i == first else 0
            hi = position + size - i * cb if i == last else cb
            parts.append(chunk[lo:hi])
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def read_ahead(self, path: str, object_size: int, position: int, size: int) -> None:
        """Start fetching the chunks of [position, position + size) in the background."""
        size = min(size, object_size - position)
        if size > 0:
            cb = self.chunk_bytes
            self._start(path, object_size, range(position // cb, (position + size - 1) // cb + 1))

    def _start(self, path: str, object_size: int, indexes: range) -> None:
        with self._lock:
            todo = [i for i in indexes
                    if (path, i) not in self._chunks and (path, i) not in self._inflight]
            for i in todo:
                size = min(self.chunk_bytes, object_size - i * self.chunk_bytes)
                try:
                    self._inflight[(path, i)] = self._pool.submit(self._load, path, i, size)
                except RuntimeError:  # shut down: readers fetch for themselves
                    return

    def _chunk(self, path: str, index: int, chunk_size: int) -> bytes:
        key = (path, index)
        with self._lock:
            data = self._chunks.get(key)
            if data is not None:
                self._chunks.move_to_end(key)
                self.hits += 1
                return data
            self.misses += 1
            pending = self._inflight.get(key)
        if pending is not None:
            return pending.result()
        return self._load(path, index, chunk_size)

    def _load(self, path: str, index: int, chunk_size: int) -> bytes:
        key = (path, index)
        try:
            data = self._fetch(path, index * self.chunk_bytes, chunk_size)
        finally:
            with self._lock:
                self._inflight.pop(key, None)
        with self._lock:
            if key not in self._chunks:
                self._chunks[key] = data
                self._bytes += len(data)
                while self._bytes > self.max_bytes and len(self._chunks) > 1:
                    _k, old = self._chunks.popitem(last=False)
                    self._bytes -= len(old)
        return data

    def invalidate(self, path: str) -> None:
        """Forget the chunks of ``path`` (its object was deleted)."""
        with self._lock:
            for key in [k for k in self._chunks if k[0] == path]:
                self._bytes -= len(self._chunks.pop(key))

    def close(self) -> None:
        """Stop the background fetches (those running finish)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
