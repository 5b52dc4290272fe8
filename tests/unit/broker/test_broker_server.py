"""KafkaServer framing, ordering and file-slice writes over real sockets."""

from __future__ import annotations

import asyncio
import os
import socket
import struct

import pytest

from sparklog.broker.server import CloseConnection, KafkaServer
from sparklog.storage import FileSlice


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (n,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(n)


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=30))


async def _echo(conn, frame: bytearray):
    # body: 4-byte tag, then payload; tag 0 = no response, 1 = close, 2 = delay then echo
    tag = frame[0]
    if tag == 0:
        return None
    if tag == 1:
        raise CloseConnection()
    if tag == 2:
        await asyncio.sleep(0.05)
    return [bytes(frame)]


def test_pipelined_frames_answered_in_order_small_and_large():
    async def main():
        srv = KafkaServer(_echo, host="127.0.0.1", port=0, max_request_bytes=8 * 2**20)
        await srv.start()
        try:
            r, w = await asyncio.open_connection("127.0.0.1", srv.port)
            sizes = [8, 100, 40_000, 3 * 2**20, 9, 200_000, 17, 70_000, 1_000_000, 10]
            bodies = []
            for i, s in enumerate(sizes):
                tag = 2 if i % 3 == 0 else 3
                body = bytes([tag]) + os.urandom(s - 1)
                bodies.append(body)
                w.write(_frame(body))
                if i == 4:
                    w.write(_frame(b"\x00" + b"x" * 10))  # no response expected
            await w.drain()
            for body in bodies:
                assert await _read_frame(r) == body
            w.close()
        finally:
            await srv.close()

    _run(main())


def test_frame_over_limit_closes_only_that_connection():
    async def main():
        srv = KafkaServer(_echo, host="127.0.0.1", port=0, max_request_bytes=1024)
        await srv.start()
        try:
            r1, w1 = await asyncio.open_connection("127.0.0.1", srv.port)
            r2, w2 = await asyncio.open_connection("127.0.0.1", srv.port)
            w1.write(struct.pack(">i", 2**31 - 1))  # claims 2 GiB; must not be allocated
            await w1.drain()
            assert await r1.read(10) == b""  # closed
            w2.write(_frame(b"\x03hello-world"))
            await w2.drain()
            assert await _read_frame(r2) == b"\x03hello-world"
            w2.write(_frame(b"\x01bye-bye-bye"))  # processor asks to close
            await w2.drain()
            assert await r2.read(10) == b""
            r3, w3 = await asyncio.open_connection("127.0.0.1", srv.port)
            w3.write(_frame(b"\x03again-again"))
            await w3.drain()
            assert await _read_frame(r3) == b"\x03again-again"
            w3.close()
        finally:
            await srv.close()

    _run(main())


def test_file_slices_sent_in_order(tmp_path):
    path = tmp_path / "seg.log"
    data = os.urandom(3 * 2**20)
    path.write_bytes(data)

    async def proc(conn, frame):
        off, n = struct.unpack(">ii", frame[:8])
        return [b"head", FileSlice(str(path), off, n), b"mid", FileSlice(str(path), 0, 10), b"tail"]

    async def main():
        srv = KafkaServer(proc, host="127.0.0.1", port=0)
        await srv.start()
        try:
            r, w = await asyncio.open_connection("127.0.0.1", srv.port)
            cases = [(5, 100), (1000, 2 * 2**20), (7, 64 * 1024), (0, 0)]
            for off, n in cases:
                w.write(_frame(struct.pack(">ii", off, n)))
            await w.drain()
            for off, n in cases:
                got = await _read_frame(r)
                assert got == b"head" + data[off : off + n] + b"mid" + data[:10] + b"tail"
            # a slice past the end of the file breaks the frame: connection closed
            w.write(_frame(struct.pack(">ii", len(data) - 10, 100)))
            await w.drain()
            rest = await r.read()
            assert len(rest) < 4 + 4 + 100 + 3 + 10 + 4
            w.close()
        finally:
            await srv.close()

    _run(main())


def test_garbage_and_half_frames_do_not_break_server():
    async def main():
        srv = KafkaServer(_echo, host="127.0.0.1", port=0, max_request_bytes=4096)
        await srv.start()
        try:
            loop = asyncio.get_running_loop()
            for payload in [b"\xff\xff\xff\xff", b"\x00\x00\x00\x03abc", b"\x00\x00\x10"]:
                s = socket.create_connection(("127.0.0.1", srv.port))
                s.setblocking(False)
                await loop.sock_sendall(s, payload)
                s.close()
            r, w = await asyncio.open_connection("127.0.0.1", srv.port)
            w.write(_frame(b"\x03ok-ok-ok"))
            await w.drain()
            assert await _read_frame(r) == b"\x03ok-ok-ok"
            w.close()
        finally:
            await srv.close()

    _run(main())


@pytest.mark.parametrize("n", [2000])
def test_many_small_pipelined_frames(n):
    async def main():
        srv = KafkaServer(_echo, host="127.0.0.1", port=0, max_queued_requests=16)
        await srv.start()
        try:
            r, w = await asyncio.open_connection("127.0.0.1", srv.port)
            w.write(b"".join(_frame(b"\x03" + struct.pack(">i", i) + b"abcdefgh") for i in range(n)))
            await w.drain()
            for i in range(n):
                got = await _read_frame(r)
                assert struct.unpack(">i", got[1:5])[0] == i
            w.close()
        finally:
            await srv.close()

    _run(main())


def test_idle_connections_are_closed_busy_ones_are_not():
    async def slow(conn, frame):
        await asyncio.sleep(0.6)  # a long poll: the connection is busy, not idle
        return [bytes(frame)]

    async def main():
        srv = KafkaServer(slow, host="127.0.0.1", port=0, connections_max_idle_ms=200)
        await srv.start()
        try:
            r1, w1 = await asyncio.open_connection("127.0.0.1", srv.port)
            r2, w2 = await asyncio.open_connection("127.0.0.1", srv.port)
            w2.write(_frame(b"\x03long-poll"))
            await w2.drain()
            assert await asyncio.wait_for(r1.read(10), 5) == b""  # idle: closed
            assert await _read_frame(r2) == b"\x03long-poll"  # busy past the idle time
            w2.close()
        finally:
            await srv.close()

    _run(main())
