"""The bucket: an fsspec filesystem under a root URL, the tier's object layout, and retries.

Layout (KIP-405's, as Kafka's remote storage plug-ins lay it out)::

    <root>/<topic>-<topic id>/<partition>/manifest.json
    <root>/<topic>-<topic id>/<partition>/<base offset:020d>-<segment id>.log
                                                    ... .index .timeindex [.txnindex]
                                                    ... .snapshot .leader-epoch-checkpoint

The topic id in the name keeps a re-created topic of the same name apart from the deleted
one; the random segment id keeps two uploads of the same base offset (a retry, a fenced
leader) apart, so an object once listed in a manifest is never overwritten.

Every call is retried with exponential backoff (``RetryPolicy``) on errors other than "not
found"; what still fails raises ``RemoteStorageError`` (a KafkaStorageError, which Kafka
clients retry). The store is thread-safe as far as the filesystem is (fsspec's are).

``run_all`` runs independent calls (the objects of one segment upload) on a few threads:
a store call mostly waits (on a socket, or in a ``sendfile`` that releases the GIL), so a
segment's small objects go up while its ``.log`` does instead of after it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TypeVar

import fsspec
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from sparklog.protocol.errors import KafkaStorageError

from ..checkpoints import topic_id_to_str

__all__ = ["MANIFEST", "RemoteStorageError", "RemoteStore", "RetryPolicy"]

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
T = TypeVar("T")
_CALL_THREADS = 4  # a segment has at most 6 objects; its .log is the long one


class RemoteStorageError(KafkaStorageError):
    """The store could not be reached or refused a call, after the retries."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 4
    initial_backoff_ms: int = 50
    max_backoff_ms: int = 2000


class RemoteStore:
    def __init__(self, fs: fsspec.AbstractFileSystem, root: str,
                 retry: RetryPolicy | None = None) -> None:
        self.fs = fs
        self.root = root.rstrip("/")
        self.retry = retry or RetryPolicy()
        # a rename is atomic (and cheap) on local and memory filesystems; object stores
        # have none, but one PUT replaces an object whole
        self._rename_is_atomic = isinstance(fs, LocalFileSystem | MemoryFileSystem)
        # objects of a file:// store are local files: the fetch path sends them with
        # sendfile by their path, as it does local segments
        self.local_files = isinstance(fs, LocalFileSystem)
        self._pool: ThreadPoolExecutor | None = None  # made by the first ``run_all``
        self._pool_lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, options: Mapping[str, str] | None = None,
                 retry: RetryPolicy | None = None, *, create: bool = True) -> RemoteStore:
        """The store at ``url``; ``create``: make its root directory (a broker's store; a
        reader's only reads)."""
        fs, root = fsspec.url_to_fs(url, **dict(options or {}))
        store = cls(fs, root, retry)
        if create:  # retried like every other call: one failed request must not stop a broker
            store.makedirs(root)
        return store

    # -- layout
    def topic_dir(self, topic: str, topic_id: bytes | str) -> str:
        return f"{self.root}/{topic}-{topic_id_to_str(topic_id)}"

    def partition_dir(self, topic: str, topic_id: bytes | str, partition: int) -> str:
        return f"{self.topic_dir(topic, topic_id)}/{partition}"

    @staticmethod
    def object_path(partition_dir: str, base_offset: int, segment_id: str, suffix: str) -> str:
        return f"{partition_dir}/{base_offset:020d}-{segment_id}{suffix}"

    @staticmethod
    def new_segment_id() -> str:
        return uuid.uuid4().hex

    # -- calls
    def call(self, fn: Callable[[], T], what: str) -> T:
        """``fn()`` with the retry policy; FileNotFoundError passes through at once."""
        backoff = self.retry.initial_backoff_ms
        for attempt in range(1, self.retry.attempts + 1):
            try:
                return fn()
            except FileNotFoundError:
                raise
            except Exception as exc:  # fsspec backends raise anything (OSError, botocore...)
                if attempt == self.retry.attempts:
                    raise RemoteStorageError(f"remote storage {what} failed after {attempt} "
                                             f"attempts: {exc!r}") from exc
                log.debug("remote storage %s failed (attempt %d): %r", what, attempt, exc)
                time.sleep(backoff / 1000)
                backoff = min(backoff * 2, self.retry.max_backoff_ms)
        raise AssertionError("unreachable")

    def run_all(self, calls: Sequence[Callable[[], T]]) -> list[T]:
        """Every call's result, in order, the calls run concurrently; when some raise, the
        first of their exceptions is raised once all have ended (so a caller cleaning up
        after a failure never races a call still writing)."""
        if len(calls) <= 1:
            return [c() for c in calls]
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=_CALL_THREADS,
                                                thread_name_prefix="sparklog-store")
            pool = self._pool
        futures = [pool.submit(c) for c in calls]
        wait(futures)
        return [f.result() for f in futures]

    def close(self) -> None:
        """Let the threads of ``run_all`` go (calls after this make new ones). Not waited
        on: a call hanging in a store that does not answer must not hold up a shutdown."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)

    def put_file(self, local_path: str, path: str) -> int:
        """Upload a local file; returns the size the store reports for it (checked against
        the local size by the caller, so a short upload is never listed)."""
        self.call(lambda: self.fs.put_file(local_path, path), f"upload of {path}")
        self.fs.invalidate_cache(path)  # the size must come from the store, not a listing
        return self.call(lambda: self.fs.size(path), f"size of {path}")

    def makedirs(self, path: str) -> None:
        """Directories exist on filesystems that have them (object stores: a no-op)."""
        self.call(lambda: self.fs.makedirs(path, exist_ok=True), f"mkdir of {path}")

    def put_bytes(self, path: str, data: bytes) -> None:
        self.call(lambda: self.fs.pipe_file(path, data), f"write of {path}")

    def put_atomic(self, path: str, data: bytes) -> None:
        """Replace ``path`` whole: write-then-rename where renames are atomic, else one PUT."""
        if not self._rename_is_atomic:
            self.put_bytes(path, data)
            return
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        self.put_bytes(tmp, data)
        self.call(lambda: self.fs.mv(tmp, path), f"rename to {path}")

    def get_bytes(self, path: str) -> bytes | None:
        """The whole object, None when it does not exist."""
        try:
            return self.call(lambda: self.fs.cat_file(path), f"read of {path}")
        except FileNotFoundError:
            return None

    def read_range(self, path: str, position: int, size: int) -> bytes:
        """Bytes [position, position + size) of an object (fewer at its end)."""
        return self.call(lambda: self.fs.cat_file(path, start=position, end=position + size),
                         f"ranged read of {path}")

    def list_files(self, path: str) -> list[str]:
        """Every object under ``path`` (none when it does not exist), as the store lists
        them now."""
        self.fs.invalidate_cache(path)
        try:
            return list(self.call(lambda: self.fs.find(path), f"listing of {path}"))
        except FileNotFoundError:
            return []

    def modified_ms(self, path: str) -> int:
        return int(self.call(lambda: self.fs.modified(path), f"mtime of {path}").timestamp()
                   * 1000)

    def delete(self, paths: Iterable[str]) -> None:
        for p in paths:
            try:
                self.call(lambda p=p: self.fs.rm_file(p), f"delete of {p}")
            except FileNotFoundError:
                pass

    def delete_dir(self, path: str) -> None:
        try:
            self.call(lambda: self.fs.rm(path, recursive=True), f"delete of {path}")
        except FileNotFoundError:
            pass
