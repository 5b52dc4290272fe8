"""Compare-and-swap of one small object (a partition's manifest) where the store offers it.

A manifest write replaces the object only if it still holds what the writer read and
decided on, so two writers that read the same manifest (a fenced leader that has not yet
learned of its successor, and the successor) can never both succeed: the loser gets False,
deletes its unlisted objects and reads again on its next run.

- S3 (s3fs): the object's ETag is read, then its body, then the PUT carries ``If-Match``
  (``If-None-Match: *`` for a first manifest). Reading the ETag first errs on the safe side:
  a write in between fails the PUT, it never lands over bytes the writer did not see. A PUT
  whose answer was lost is settled by reading the object back: ours is there or it is not.
- Local filesystems (``file://``, shared by brokers on one host): an exclusive ``flock`` on
  the object's directory is held from the read to the rename.
- The memory filesystem (one process): a process-wide lock.
- Other stores (GCS, ABFS through fsspec, which has no common precondition API): read,
  compare, replace without a guard. There the leader epoch is the only fence: a writer
  whose epoch is below the stored one never writes, and the window in which a deposed
  leader and its successor can both write ends when the deposed one learns of the new
  epoch (one metadata round); a segment it listed in that window holds the same committed
  batches (uploads stop at the last stable offset), so what is lost is at most its listing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import threading
from collections.abc import Callable, Iterator

from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from .store import RemoteStore

__all__ = ["replace_if"]

_MEMORY_LOCK = threading.Lock()

# the bytes stored now (None: no object) -> the bytes to store instead (None: leave it)
Decide = Callable[[bytes | None], bytes | None]


def replace_if(store: RemoteStore, path: str, decide: Decide) -> bool:
    """Replace ``path`` with ``decide(current bytes)`` unless another writer replaced it
    since it was read; False when ``decide`` declined or another writer got there first.
    Store failures raise RemoteStorageError (after the store's retries)."""
    fs = store.fs
    if _is_s3(fs):
        return _s3_replace_if(store, path, decide)
    with _exclusive(fs, path):
        new = decide(store.get_bytes(path))
        if new is None:
            return False
        store.put_atomic(path, new)
        return True


@contextlib.contextmanager
def _exclusive(fs: AbstractFileSystem, path: str) -> Iterator[None]:
    if isinstance(fs, MemoryFileSystem):
        with _MEMORY_LOCK:
            yield
    elif isinstance(fs, LocalFileSystem):
        fd = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock
    else:
        yield


def _is_s3(fs: AbstractFileSystem) -> bool:
    # an S3FileSystem exists only once s3fs is imported: asking sys.modules never imports
    # it (the import costs ~0.25 s, which every file:// store paid on its first manifest)
    s3fs = sys.modules.get("s3fs")
    return s3fs is not None and isinstance(fs, s3fs.S3FileSystem)


def _s3_replace_if(store: RemoteStore, path: str, decide: Decide) -> bool:
    fs = store.fs
    etag = _etag(store, path)
    new = decide(store.get_bytes(path) if etag is not None else None)
    if new is None:
        return False

    def put() -> bool:
        try:
            if etag is None:
                fs.pipe_file(path, new, mode="create")
            else:
                fs.pipe_file(path, new, IfMatch=etag)
            return True
        except OSError:  # the precondition failed, or the PUT did
            fs.invalidate_cache(path)
            try:
                now = fs.cat_file(path)
            except FileNotFoundError:
                now = None
            if now == new:
                return True  # ours landed; only its answer was lost
            if _etag(store, path) != etag:
                return False  # another writer's
            raise  # neither: a store failure, retried

    return store.call(put, f"conditional write of {path}")


def _etag(store: RemoteStore, path: str) -> str | None:
    store.fs.invalidate_cache(path)
    try:
        info = store.call(lambda: store.fs.info(path), f"etag of {path}")
    except FileNotFoundError:
        return None
    return str(info["ETag"])
