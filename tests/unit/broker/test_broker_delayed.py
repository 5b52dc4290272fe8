"""Delayed-operation waiters (long-poll fetch, acks=all) and read-result normalisation."""

from __future__ import annotations

import asyncio
import time

from sparklog.broker.delayed import Waiters, wait_any
from sparklog.broker.fileslice import SliceChain, as_records
from sparklog.storage import FetchDataInfo, FileSlice


def test_wait_any_wakes_on_first_and_cleans_up():
    async def main():
        a, b = Waiters(), Waiters()
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, b.wake)
        t0 = time.monotonic()
        assert await wait_any([a, b], 5.0) is True
        assert time.monotonic() - t0 < 2.0
        assert len(a) == 0 and len(b) == 0  # no leaked futures
        t0 = time.monotonic()
        assert await wait_any([a, b], 0.05) is False
        assert 0.04 <= time.monotonic() - t0 < 2.0
        assert await wait_any([a], 0) is False

    asyncio.run(main())


def test_waiters_wait_timeout_and_wake():
    async def main():
        w = Waiters()
        assert await w.wait(0.02) is False
        asyncio.get_running_loop().call_later(0.02, w.wake)
        assert await w.wait(5) is True
        assert len(w) == 0

    asyncio.run(main())


def test_as_records_shapes(tmp_path):
    p = str(tmp_path / "f")
    with open(p, "wb") as f:
        f.write(b"0123456789")
    one = FileSlice(p, 2, 3)

    def info(slices):
        return FetchDataInfo(0, 0, slices)

    assert as_records(info([])) == (b"", 0)
    assert as_records(info([FileSlice(p, 5, 0)])) == (b"", 0)
    assert as_records(info([one])) == (one, 3)
    chain, size = as_records(info([one, FileSlice(p, 7, 2)]))
    assert isinstance(chain, SliceChain) and size == 5 and chain.read_bytes() == b"23478"
