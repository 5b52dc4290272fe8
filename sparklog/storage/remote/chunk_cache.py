"""A bounded in-memory cache of fixed-size chunks of remote objects.

Remote reads go through it: a fetch asks for a byte range, the cache fetches the aligned
chunks that cover it (one ranged GET each) and keeps the most recently used ones up to
``max_bytes`` in total. Consumers reading a tiered partition from the start read each chunk
once from the store however small their fetches are; index objects are read through it too.

Objects are immutable once uploaded (segment ids are never reused), so a cached chunk is
never stale. Thread-safe: fetches run outside the lock; two threads missing the same chunk
may both fetch it, which costs a GET and nothing else.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["ChunkCache"]


class ChunkCache:
    def __init__(self, fetch: Callable[[str, int, int], bytes], *,
                 chunk_bytes: int = 1 << 20, max_bytes: int = 64 << 20) -> None:
        """``fetch(path, position, size)`` reads a range from the store."""
        if chunk_bytes <= 0:
            raise ValueError("chunk_bytes must be positive")
        self._fetch = fetch
        self.chunk_bytes = chunk_bytes
        self.max_bytes = max_bytes
        self._chunks: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
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
        parts = []
        for i in range(first, last + 1):
            chunk = self._chunk(path, i, min(cb, object_size - i * cb))
            lo = position - i * cb if i == first else 0
            hi = position + size - i * cb if i == last else cb
            parts.append(chunk[lo:hi])
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _chunk(self, path: str, index: int, chunk_size: int) -> bytes:
        key = (path, index)
        with self._lock:
            data = self._chunks.get(key)
            if data is not None:
                self._chunks.move_to_end(key)
                self.hits += 1
                return data
            self.misses += 1
        data = self._fetch(path, index * self.chunk_bytes, chunk_size)
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
