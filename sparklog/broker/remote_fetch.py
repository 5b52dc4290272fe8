"""Fetches below a tiered log's local start read the bucket on worker threads first, for
a bounded time, on a bounded number of threads.

The fetch handler reads on the event loop, where a call to the object store would stall
every connection (produce included) for as long as the store takes. So before a fetch
reads, each partition whose fetch offset lies in the remote tier has its bytes read into
the tier's chunk cache on a worker thread (``RemoteLog.prefetch``), with the ``.txnindex``
objects a read_committed fetch reports aborted transactions from; the read that follows
finds them in memory. A store that fails there leaves the partition's remote log failing
fast for a moment, so the read answers KAFKA_STORAGE_ERROR (retriable) at once.

A store that neither answers nor fails holds a thread until its backend gives up (s3fs:
a minute). Bounded as Kafka bounds it (KIP-405's reader pool, KIP-1018's wait):

- the reads run on ``remote.log.reader.threads`` threads of their own, and at most
  ``remote.log.reader.max.pending.tasks`` reads wait for one; a fetch that would queue
  another gets KAFKA_STORAGE_ERROR for that partition (retriable) instead;
- a fetch waits at most ``remote.fetch.max.wait.ms`` for its reads; a partition whose read
  has not finished by then is answered with no records and no error (the client fetches
  again), and is not read on the event loop;
- a read already running for the same partition, offset and size is waited on, not
  started again: a client retrying against a hung store adds no thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from sparklog.broker.replica_manager import ReplicaManager
from sparklog.storage.remote.remote_log import RemoteLog

__all__ = ["RemoteFetches", "RemoteReadBusy"]

# (the partition's remote log, fetch offset, max bytes, read_committed)
_Key = tuple[int, int, int, bool]


class RemoteReadBusy(Exception):
    """Too many remote reads are waiting for a thread (``max_pending``)."""


class RemoteFetches:
    def __init__(self, *, threads: int = 10, max_pending: int = 100,
                 max_wait_ms: int = 500) -> None:
        self.threads = max(1, threads)
        self.max_pending = max_pending
        self.max_wait_ms = max_wait_ms
        self._pool = ThreadPoolExecutor(max_workers=self.threads,
                                        thread_name_prefix="sparklog-remote-fetch")
        self._lock = threading.Lock()
        self._reads: dict[_Key, Future[None]] = {}  # submitted and not finished

    @property
    def in_flight(self) -> int:
        """Reads submitted and not finished (running or waiting for a thread)."""
        with self._lock:
            return len(self._reads)

    async def prefetch(self, rm: ReplicaManager, wanted: Sequence[tuple[str, int, int, int]],
                       read_committed: bool) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
        """``wanted``: (topic, partition, fetch offset, max bytes) of each fetched partition;
        ``read_committed``: the fetch reports aborted transactions (their indexes are read
        too). Returns (partitions whose read is still running: answer them empty, and
        partitions refused a read: answer them KAFKA_STORAGE_ERROR); the others' bytes
        are in the cache, or their remote log fails fast."""
        waits: dict[tuple[str, int], Future[None]] = {}
        busy: set[tuple[str, int]] = set()
        for topic, partition, offset, max_bytes in wanted:
            p = rm.get(topic, partition)
            if p is None:
                continue
            plog = p.log
            remote = plog.remote
            if remote is None or not plog.log_start_offset <= offset < plog.local_log_start_offset:
                continue
            try:
                waits[(topic, partition)] = self._submit(remote, offset, max_bytes,
                                                         read_committed)
            except RemoteReadBusy:
                busy.add((topic, partition))
        if not waits:
            return set(), busy
        futures = {asyncio.wrap_future(f): tp for tp, f in waits.items()}
        _done, pending = await asyncio.wait(futures, timeout=self.max_wait_ms / 1000)
        return {futures[f] for f in pending}, busy

    def _submit(self, remote: RemoteLog, offset: int, max_bytes: int,
                read_committed: bool) -> Future[None]:
        key = (id(remote), offset, max_bytes, read_committed)
        with self._lock:
            running = self._reads.get(key)
            if running is not None:
                return running
            if len(self._reads) >= self.max_pending + self.threads:
                raise RemoteReadBusy(f"{len(self._reads)} remote reads in flight")
            fut = self._pool.submit(remote.prefetch, offset, max_bytes, read_committed)
            self._reads[key] = fut

        def finished(_f: Future[None]) -> None:
            with self._lock:
                if self._reads.get(key) is fut:
                    del self._reads[key]

        fut.add_done_callback(finished)
        return fut

    def close(self) -> None:
        """Drop queued reads; running ones end with their store call (never waited on)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
