"""BrokerConnection framing over a real socket: pipelined requests, frames of every size
(one byte at a time, and multi-megabyte bodies), and failures that fail pending requests."""

import asyncio
import socket
import struct
import threading

import pytest

from sparklog.client.connection import (
    BrokerConnection,
    EventLoopThread,
    KafkaConnectionError,
    KafkaTimeoutError,
    encode_request_header,
    parse_host_port,
)


class EchoServer:
    """Answers each request frame with (correlation id + payload of a size the request
    asks for), optionally dribbling the bytes out one at a time. Serves one connection on
    127.0.0.1 in a thread that ``close()`` ends, whether or not a client came."""

    def __init__(self, dribble=False, mute=False):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.dribble, self.mute = dribble, mute
        self.conn = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _recv(self, conn, n):
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def _serve(self):
        try:
            conn, _ = self.sock.accept()
        except OSError:  # closed before a client came
            return
        self.conn = conn
        try:
            while True:
                size = struct.unpack(">i", self._recv(conn, 4))[0]
                frame = self._recv(conn, size)
                api_key, ver, corr = struct.unpack_from(">hhi", frame)
                cid_len = struct.unpack_from(">h", frame, 8)[0]
                body = frame[10 + cid_len:]
                want = struct.unpack(">i", body[:4])[0]
                if self.mute:
                    continue
                payload = struct.pack(">i", corr) + bytes([corr % 251]) * want
                out = struct.pack(">i", len(payload)) + payload
                if self.dribble:
                    for i in range(len(out)):
                        conn.sendall(out[i:i + 1])
                else:
                    conn.sendall(out)
        except (EOFError, OSError):
            pass
        finally:
            conn.close()

    def close(self):
        for s in (self.conn, self.sock):  # shutdown wakes a thread blocked in accept/recv
            if s is not None:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.sock.close()
        self.thread.join(10)
        assert not self.thread.is_alive()


@pytest.fixture
def echo_server():
    """``echo_server(dribble=..., mute=...)``: an EchoServer, closed at teardown."""
    started = []

    def start(**kw):
        srv = EchoServer(**kw)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.close()


@pytest.fixture
def loop_thread():
    t = EventLoopThread("test")
    yield t
    t.stop()


def test_pipelined_requests_small_and_large_frames(loop_thread, echo_server):
    srv = echo_server()

    async def go():
        c = BrokerConnection("127.0.0.1", srv.port)
        await c.connect()
        sizes = [0, 10, 300_000, 5 * 1024 * 1024, 7, 1024 * 1024 - 3]
        futs = [c.send_nowait(1, 0, struct.pack(">i", s), flexible_request=False,
                              flexible_response=False) for s in sizes]
        bodies = await asyncio.gather(*futs)
        await c.close()
        return sizes, bodies

    sizes, bodies = loop_thread.run(go(), timeout=60)
    for s, b in zip(sizes, bodies, strict=True):
        assert len(b) == s
        assert len(set(bytes(b))) <= 1


def test_byte_at_a_time_responses(loop_thread, echo_server):
    srv = echo_server(dribble=True)

    async def go():
        c = BrokerConnection("127.0.0.1", srv.port)
        await c.connect()
        out = [await c.request(1, 0, struct.pack(">i", s), flexible_request=False,
                               flexible_response=False) for s in (3, 70)]
        await c.close()
        return out

    a, b = loop_thread.run(go(), timeout=60)
    assert len(a) == 3 and len(b) == 70


def test_timeout_fails_the_connection_and_refused_connect(loop_thread, echo_server):
    srv = echo_server(mute=True)

    async def go():
        c = BrokerConnection("127.0.0.1", srv.port)
        await c.connect()
        with pytest.raises(KafkaTimeoutError):
            await c.request(1, 0, struct.pack(">i", 1), flexible_request=False,
                            flexible_response=False, timeout_ms=200)
        assert not c.connected
        with pytest.raises(KafkaTimeoutError):
            c.send_nowait(1, 0, b"\0\0\0\1", flexible_request=False, flexible_response=False)
        dead = BrokerConnection("127.0.0.1", 1)
        with pytest.raises(KafkaConnectionError):
            await dead.connect(1000)

    loop_thread.run(go(), timeout=60)


def test_header_and_address_parsing():
    h = encode_request_header(3, 12, 7, "cli", flexible=True)
    assert h == struct.pack(">hhih", 3, 12, 7, 3) + b"cli" + b"\x00"
    assert encode_request_header(3, 1, 7, None, flexible=False)[-2:] == b"\xff\xff"
    assert parse_host_port("PLAINTEXT://h:9093") == ("h", 9093)
    assert parse_host_port("[::1]:9092") == ("::1", 9092)
    assert parse_host_port("broker") == ("broker", 9092)
