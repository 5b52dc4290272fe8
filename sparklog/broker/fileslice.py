"""Sending the segment byte ranges of a fetch (``storage.FileSlice``) without copying them
through Python.

The response encoder (``Writer.records``) treats any object with an integer ``size`` as an
external payload and leaves a hole for it; the connection then calls ``send`` after flushing
the bytes before it, so wire order holds. Large slices go out with ``os.sendfile`` on the raw
socket (``loop.sendfile`` waits for the transport's buffer to empty and pauses reading while
it runs); small ones are read with ``pread`` and written as bytes, which is cheaper than the
sendfile set-up for a few KiB.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os

from sparklog.storage.backend import FileSlice
from sparklog.storage.log_info import FetchDataInfo

log = logging.getLogger(__name__)

__all__ = ["SliceChain", "SENDFILE_MIN_BYTES", "as_records", "send_external"]

SENDFILE_MIN_BYTES = 64 * 1024


async def send_external(obj: FileSlice | SliceChain, loop: asyncio.AbstractEventLoop,
                        transport: asyncio.Transport) -> bool:
    """Write a file slice (or a chain of them) to ``transport`` after everything written
    before it; False if fewer bytes were available.

    The slice is sent from a descriptor of our own (``loop.sendfile`` moves the file offset;
    the segment's shared descriptor must not be disturbed). A slice of a file deleted since
    the read (retention) is read through the segment's still-open descriptor instead.
    """
    size = obj.size
    if size == 0:
        return True
    if isinstance(obj, SliceChain):
        for s in obj.slices:
            if not await send_external(s, loop, transport):
                return False
        return True
    parts = obj.remote_parts()
    if parts is not None:  # the tier's cached chunks, written as they are
        for part in parts:
            transport.write(part)
        return sum(len(p) for p in parts) == size
    f = _open_private(obj)
    if f is None:
        data = obj.read_bytes()
        transport.write(data)
        return len(data) == size
    try:
        if size < SENDFILE_MIN_BYTES or not _can_sendfile(transport):
            data = _pread_all(f.fileno(), size, obj.position)
            transport.write(data)
            return len(data) == size
        try:
            sent = await loop.sendfile(transport, f, obj.position, size, fallback=True)
        except (ConnectionError, RuntimeError, OSError) as exc:
            log.debug("sendfile failed: %s", exc)
            return False
        return sent == size
    finally:
        f.close()


def _open_private(obj: FileSlice) -> io.FileIO | None:
    try:
        return open(obj.path, "rb", buffering=0)  # noqa: SIM115 - caller closes
    except OSError:
        pass
    fd = obj.fileno()
    if fd is not None:
        try:
            return open(f"/proc/self/fd/{fd}", "rb", buffering=0)  # noqa: SIM115
        except OSError:
            return None
    return None


def _can_sendfile(transport: asyncio.Transport) -> bool:
    # SSL transports and exotic loops have no raw socket to sendfile on; loop.sendfile's
    # fallback would then read through Python anyway.
    return transport.get_extra_info("socket") is not None and transport.get_extra_info("sslcontext") is None


def _pread_all(fd: int, size: int, position: int) -> bytes:
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class SliceChain:
    """Several file slices sent back to back as one records field."""

    __slots__ = ("slices", "size")

    def __init__(self, slices: list[FileSlice]) -> None:
        self.slices = slices
        self.size = sum(s.size for s in slices)

    def read_bytes(self) -> bytes:
        return b"".join(s.read_bytes() for s in self.slices)


def as_records(info: FetchDataInfo) -> tuple[bytes | FileSlice | SliceChain, int]:
    """A storage read as the records field of a fetch response, and its size: nothing, its
    one slice, or its slices chained."""
    slices = [s for s in info.slices if s.size]
    if not slices:
        return b"", 0
    if len(slices) == 1:
        return slices[0], slices[0].size
    chain = SliceChain(slices)
    return chain, chain.size
