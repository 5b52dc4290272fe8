"""A bounded in-memory cache of fixed-size chunks of remote objects, with read-ahead.

Remote reads go through it: a fetch asks for a byte range, the cache fetches the aligned
chunks that cover it and keeps the most recently used ones up to ``max_bytes`` in total.
``read_ahead`` starts fetching the chunks after a read in the background, so a consumer
reading a tiered partition from the start finds the next fetch's bytes already here: the
store's latency overlaps the client's work instead of adding to it. Index objects are read
through it too.

Requests are few and large: consecutive missing chunks are fetched by one ranged GET (a
"run", at most ``max_run_bytes``) and split into chunks on arrival, and ``read_ahead`` only
fetches once less than half of its window is already here or on its way, so a sequential
reader's window is refilled a half-window at a time instead of chunk by chunk. Each request
costs CPU on both sides of the HTTP connection (and some stores, e.g. moto's, read the
whole object to answer a range), so bytes per request is what sets the throughput.

Objects are immutable once uploaded (segment ids are never reused), so a cached chunk is
never stale. Thread-safe: one fetch per chunk at a time (a second reader of a chunk being
fetched waits for that fetch); fetches run outside the lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["ChunkCache"]


class ChunkCache:
    def __init__(self, fetch: Callable[[str, int, int], bytes], *,
                 chunk_bytes: int = 1 << 20, max_bytes: int = 64 << 20,
                 fetch_threads: int = 4, max_run_bytes: int = 16 << 20) -> None:
        """``fetch(path, position, size)`` reads a range from the store; ``max_run_bytes``
        caps one request (and the read-ahead window), and is kept to a quarter of
        ``max_bytes`` so a run's chunks are not evicted before they are read."""
        if chunk_bytes <= 0:
            raise ValueError("chunk_bytes must be positive")
        self._fetch = fetch
        self.chunk_bytes = chunk_bytes
        self.max_bytes = max_bytes
        self.max_run_chunks = max(1, min(max_run_bytes, max_bytes // 4) // chunk_bytes)
        # each chunk its own bytes (a run is split by copying: a view would keep the whole
        # run alive for as long as any one of its chunks, past ``max_bytes``)
        self._chunks: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        # chunk -> (the fetch of the run holding it, the run's first chunk index)
        self._inflight: dict[tuple[str, int], tuple[Future[list[bytes]], int]] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=fetch_threads,
                                        thread_name_prefix="sparklog-remote-read")
        self.hits = 0
        self.misses = 0
        self.requests = 0  # ranged reads sent to the store

    @property
    def read_ahead_bytes(self) -> int:
        """The window ``read_ahead`` keeps filled ahead of a sequential reader."""
        return self.max_run_chunks * self.chunk_bytes

    def read(self, path: str, object_size: int, position: int, size: int) -> bytes:
        """Bytes [position, position + size) of ``path`` (``object_size`` bytes long: chunks
        are never asked for past its end, which some stores refuse), fewer at its end."""
        parts = self.read_parts(path, object_size, position, size)
        if len(parts) == 1:
            return bytes(parts[0])
        return b"".join(parts)

    def read_parts(self, path: str, object_size: int, position: int,
                   size: int) -> list[memoryview]:
        """The same bytes as ``read``, as views of the cached chunks (nothing copied: what
        a fetch response writes to its socket)."""
        size = min(size, object_size - position)
        if size <= 0:
            return [memoryview(b"")]
        cb = self.chunk_bytes
        first, last = position // cb, (position + size - 1) // cb
        if last > first:
            self._start(path, object_size, range(first, last + 1))
        parts = []
        for i in range(first, last + 1):
            chunk = memoryview(self._chunk(path, object_size, i))
            lo = position - i * cb if i == first else 0
            hi = position + size - i * cb if i == last else cb
            parts.append(chunk if lo == 0 and hi >= len(chunk) else chunk[lo:hi])
        return parts

    def read_ahead(self, path: str, object_size: int, position: int, size: int) -> None:
        """Start fetching the chunks of [position, position + size) in the background,
        unless the first half of them is already here or being fetched."""
        size = min(size, object_size - position)
        if size <= 0:
            return
        cb = self.chunk_bytes
        first, last = position // cb, (position + size - 1) // cb
        half = first + max(1, (last - first + 1) // 2)
        with self._lock:
            covered = all(self._has(path, i) for i in range(first, half))
        if not covered:
            self._start(path, object_size, range(first, last + 1))

    def _has(self, path: str, index: int) -> bool:
        return (path, index) in self._chunks or (path, index) in self._inflight

    def _start(self, path: str, object_size: int, indexes: range) -> None:
        with self._lock:
            todo = [i for i in indexes if not self._has(path, i)]
            for run in _runs(todo, self.max_run_chunks):
                try:
                    fut = self._pool.submit(self._load, path, object_size, run)
                except RuntimeError:  # shut down: readers fetch for themselves
                    return
                for i in run:
                    self._inflight[(path, i)] = (fut, run.start)

    def _chunk(self, path: str, object_size: int, index: int) -> bytes:
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
            fut, run_start = pending
            return fut.result()[index - run_start]
        return self._load(path, object_size, range(index, index + 1))[0]

    def _load(self, path: str, object_size: int, run: range) -> list[bytes]:
        """Fetch the chunks of ``run`` with one request and keep them."""
        cb = self.chunk_bytes
        start = run.start * cb
        keys = [(path, i) for i in run]
        try:
            data = self._fetch(path, start, min(len(run) * cb, object_size - start))
        except BaseException:
            with self._lock:
                for key in keys:
                    self._inflight.pop(key, None)
            raise
        chunks = ([data] if len(run) == 1
                  else [data[o:o + cb] for o in range(0, len(run) * cb, cb)])
        with self._lock:  # no moment where a chunk is neither in flight nor here
            self.requests += 1
            for key, chunk in zip(keys, chunks, strict=False):
                self._inflight.pop(key, None)
                if key not in self._chunks:
                    self._chunks[key] = chunk
                    self._bytes += len(chunk)
            while self._bytes > self.max_bytes and len(self._chunks) > 1:
                _k, old = self._chunks.popitem(last=False)
                self._bytes -= len(old)
        return chunks

    def invalidate(self, path: str) -> None:
        """Forget the chunks of ``path`` (its object was deleted)."""
        with self._lock:
            for key in [k for k in self._chunks if k[0] == path]:
                self._bytes -= len(self._chunks.pop(key))

    def close(self) -> None:
        """Stop the background fetches (those running finish)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def _runs(indexes: list[int], longest: int) -> Iterator[range]:
    """``indexes`` (ascending) as ranges of consecutive indexes, none longer than
    ``longest``."""
    i = 0
    while i < len(indexes):
        j = i + 1
        while j < len(indexes) and j - i < longest and indexes[j] == indexes[j - 1] + 1:
            j += 1
        yield range(indexes[i], indexes[j - 1] + 1)
        i = j

