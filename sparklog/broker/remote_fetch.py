"""Fetches below a tiered log's local start read the bucket on worker threads first.

The fetch handler reads on the event loop, where a call to the object store would stall
every connection (produce included) for as long as the store takes. So before a fetch
reads, each partition whose fetch offset lies in the remote tier has its bytes read into
the tier's chunk cache on a worker thread (``RemoteLog.prefetch``), with the ``.txnindex``
objects a read_committed fetch reports aborted transactions from; the read that follows
finds them in memory. A store that fails there leaves the partition's remote log failing
fast for a moment, so the read answers KAFKA_STORAGE_ERROR (retriable) at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sparklog.broker.replica_manager import ReplicaManager

__all__ = ["prefetch_remote"]


async def prefetch_remote(rm: ReplicaManager, wanted: Sequence[tuple[str, int, int, int]],
                          read_committed: bool) -> None:
    """``wanted``: (topic, partition, fetch offset, max bytes) of each fetched partition;
    ``read_committed``: the fetch reports aborted transactions (their indexes are read too)."""
    jobs = []
    for topic, partition, offset, max_bytes in wanted:
        p = rm.get(topic, partition)
        if p is None:
            continue
        plog = p.log
        remote = plog.remote
        if remote is None or not plog.log_start_offset <= offset < plog.local_log_start_offset:
            continue
        jobs.append(asyncio.to_thread(remote.prefetch, offset, max_bytes, read_committed))
    if jobs:
        await asyncio.gather(*jobs)
