"""KafkaServer framing, ordering, file-slice writes, and what a connection holds and for how
long (parked requests, the in-flight bound, idle and closed connections) over real sockets."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import struct
import weakref

import pytest

from sparklog.broker.delayed import Waiters
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
            for w in (w1, w2, w3):  # the server closed w1 and w2; ours still need closing
                w.close()
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
            w1.close()
            w2.close()
        finally:
            await srv.close()

    _run(main())


# -- lifetime and bounds ----------------------------------------------------------------

async def _wait_for(cond, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


class _LongPoll:
    """A processor whose requests long-poll until ``publish`` (answered W when woken, D
    once published, E when expired), remembering every connection it served."""

    def __init__(self) -> None:
        self.waiters = Waiters()
        self.published = False
        self.seen: list[weakref.ref] = []

    def publish(self) -> None:
        self.published = True
        self.waiters.wake()

    async def __call__(self, conn, frame: bytearray):
        self.seen.append(weakref.ref(conn))
        if frame[0] == 1:
            raise CloseConnection()
        if self.published:
            return [bytes(frame) + b"D"]
        woken = await conn.park([self.waiters], 3600)
        return [bytes(frame) + (b"W" if woken else b"E")]


_REQUEST = _frame(b"\x03" + b"r" * 20)
_CASES = {
    "parked request": _REQUEST,
    "parked request and more behind it": _REQUEST * 50,
    "request the processor refuses": _frame(b"\x01" + b"x" * 20),
    "size prefix out of range": struct.pack(">i", 3) + b"abc",
    "half a size prefix": b"\x00\x00",
    "half a frame": struct.pack(">i", 100_000) + b"y" * 1000,
    "a request then half a frame": _REQUEST + struct.pack(">i", 50) + b"z" * 10,
}


@pytest.mark.parametrize("how", ["close", "reset"])
@pytest.mark.parametrize("sent", list(_CASES), ids=list(_CASES))
def test_a_closed_connection_leaves_nothing_behind(sent, how):
    """Whatever the client sent, once it is gone its Connection - with the buffers, frames
    and parked requests it held - is freed without the cycle collector."""
    async def main():
        poll = _LongPoll()
        srv = KafkaServer(poll, host="127.0.0.1", port=0, max_request_bytes=1 << 20)
        await srv.start()
        gc.disable()
        try:
            loop = asyncio.get_running_loop()
            s = socket.create_connection(("127.0.0.1", srv.port))
            s.setblocking(False)
            await _wait_for(lambda: len(srv.connections) == 1)
            conns = [weakref.ref(c) for c in srv.connections]
            await loop.sock_sendall(s, _CASES[sent])
            if sent.startswith("parked"):
                await _wait_for(lambda: len(srv.purgatory) == 1)
            if how == "reset":
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
            await _wait_for(lambda: not srv.connections
                            and all(r() is None for r in conns + poll.seen))
            assert len(srv.purgatory) == 0 and len(poll.waiters) == 0
        finally:
            gc.enable()
            await srv.close()

    _run(main())


def test_half_close_answers_parked_requests_at_once():
    async def main():
        srv = KafkaServer(_LongPoll(), host="127.0.0.1", port=0)
        await srv.start()
        try:
            r, w = await asyncio.open_connection("127.0.0.1", srv.port)
            w.write(_frame(b"\x03first-request") + _frame(b"\x03second-request"))
            await w.drain()
            await _wait_for(lambda: len(srv.purgatory) == 1)
            w.write_eof()
            assert await _read_frame(r) == b"\x03first-requestE"  # expired, not left waiting
            assert await _read_frame(r) == b"\x03second-requestE"
            assert await r.read() == b""
            assert len(srv.purgatory) == 0
            w.close()
        finally:
            await srv.close()

    _run(main())


def test_idle_connection_with_a_parked_request_is_dropped():
    """A parked request is no activity (Kafka's rule): the idle timeout ends it."""
    async def main():
        srv = KafkaServer(_LongPoll(), host="127.0.0.1", port=0, connections_max_idle_ms=200)
        await srv.start()
        try:
            r, w = await asyncio.open_connection("127.0.0.1", srv.port)
            w.write(_REQUEST)
            await w.drain()
            assert await asyncio.wait_for(r.read(), 5) == b""
            await _wait_for(lambda: not srv.connections and len(srv.purgatory) == 0)
            w.close()
        finally:
            await srv.close()

    _run(main())


def test_client_that_stops_reading_is_dropped_after_the_idle_time():
    """A response the client never reads is no activity either: the connection (with its
    unsent response) goes once ``connections.max.idle.ms`` passed."""
    async def main():
        srv = KafkaServer(_echo, host="127.0.0.1", port=0, max_request_bytes=16 << 20,
                          connections_max_idle_ms=300)
        await srv.start()
        try:
            s = socket.create_connection(("127.0.0.1", srv.port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.setblocking(False)
            await _wait_for(lambda: len(srv.connections) == 1)
            (conn,) = srv.connections
            ref = weakref.ref(conn)
            del conn
            big = _frame(b"\x03" + b"b" * (8 << 20))
            await asyncio.get_running_loop().sock_sendall(s, big + big)
            await _wait_for(lambda: ref() is None and not srv.connections)
            s.close()
        finally:
            await srv.close()

    _run(main())


def test_in_flight_bound_stops_reading_until_requests_are_answered():
    """With a request parked and ``queued.max.requests`` frames behind it the connection is
    not read: the client's sends stall, however many it has. Data arriving answers them
    all, in order."""
    n, bound = 50_000, 8
    data = b"".join(_frame(b"\x03" + struct.pack(">i", i) + b"fetch-req-pad") for i in range(n))

    async def main():
        poll = _LongPoll()
        srv = KafkaServer(poll, host="127.0.0.1", port=0, max_queued_requests=bound,
                          receive_buffer_bytes=4096)
        await srv.start()
        try:
            loop = asyncio.get_running_loop()
            r, w = await asyncio.open_connection("127.0.0.1", srv.port)
            w.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            w.write(data)
            unsent = w.transport.get_write_buffer_size
            last, quiet_since = unsent(), loop.time()
            while loop.time() - quiet_since < 0.5:  # until the server stops reading
                await asyncio.sleep(0.01)
                if unsent() != last:
                    last, quiet_since = unsent(), loop.time()
            # one parked, fewer than ``bound`` queued, one staging buffer of unsplit bytes
            # and the kernel's buffers: far from everything
            assert unsent() > len(data) // 2
            (conn,) = srv.connections
            assert len(conn._queue) < bound
            poll.publish()
            for i in range(n):
                body = await _read_frame(r)
                assert struct.unpack_from(">i", body, 1)[0] == i
                assert body.endswith(b"W" if i == 0 else b"D")
            w.close()
        finally:
            await srv.close()

    _run(main())
