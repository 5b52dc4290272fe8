"""One TCP connection to one broker, plus the private event-loop thread the sync facades use.

The connection is an ``asyncio.BufferedProtocol``: small frames are parsed out of one
reusable receive buffer, and a large frame (a multi-megabyte Fetch response) is received
straight into a bytearray of exactly its size, so the body is never copied or joined on
the Python side. Requests are pipelined: every in-flight request waits on a future keyed
by correlation id (Kafka answers in order per connection, but keying costs nothing and
survives acks=0 produce requests that never get an answer).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import struct
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from sparklog.protocol.errors import KafkaError, SparklogError
from sparklog.protocol.messages import API_BY_KEY

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = [
    "KafkaConnectionError",
    "KafkaTimeoutError",
    "BrokerConnection",
    "EventLoopThread",
    "parse_host_port",
    "retry_delay_s",
    "send_request",
]

_I32 = struct.Struct(">i")
_HDR = struct.Struct(">hhi")
_SMALL_BUF = 256 * 1024


class KafkaConnectionError(SparklogError):
    """The socket to a broker failed or closed; retriable by reconnecting."""

    retriable = True


class KafkaTimeoutError(SparklogError):
    """A client-side deadline passed (request, metadata, flush...)."""

    retriable = True


def parse_host_port(addr: str, default_port: int = 9092) -> tuple[str, int]:
    addr = addr.strip()
    for prefix in ("PLAINTEXT://", "tcp://"):
        if addr.startswith(prefix):
            addr = addr[len(prefix):]
    if addr.startswith("["):  # [ipv6]:port
        host, _, rest = addr[1:].partition("]")
        return host, int(rest.lstrip(":") or default_port)
    host, sep, port = addr.rpartition(":")
    if not sep:
        return addr, default_port
    return host, int(port)


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, flexible: bool
) -> bytes:
    """Request header v1 (v2 when the API version is flexible: one extra empty tag buffer).
    client_id stays an int16-length string in every header version."""
    head = _HDR.pack(api_key, api_version, correlation_id)
    if client_id is None:
        cid = b"\xff\xff"
    else:
        raw = client_id.encode()
        cid = struct.pack(">h", len(raw)) + raw
    return head + cid + (b"\x00" if flexible else b"")


class _Pending:
    __slots__ = ("future", "api_key", "api_version", "flexible_response")

    def __init__(self, future: asyncio.Future, api_key: int, api_version: int,
                 flexible_response: bool) -> None:
        self.future = future
        self.api_key = api_key
        self.api_version = api_version
        self.flexible_response = flexible_response


class _KafkaProtocol(asyncio.BufferedProtocol):
    def __init__(self, conn: BrokerConnection) -> None:
        self._conn = conn
        self._small = bytearray(_SMALL_BUF)
        self._small_view = memoryview(self._small)
        self._start = 0  # first unparsed byte in _small
        self._end = 0  # end of received bytes in _small
        self._big: bytearray | None = None  # body of a large frame being received
        self._big_view: memoryview | None = None
        self._big_pos = 0
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.get_running_loop().create_future()
        self._paused = False
        self._drain_waiters: list[asyncio.Future] = []

    # -- asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big_view is not None:
            return self._big_view[self._big_pos:]
        if self._end == len(self._small):
            self._compact()
        return self._small_view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._big_view is not None:
            self._big_pos += nbytes
            if self._big_pos == len(self._big_view):
                frame = self._big
                self._big = self._big_view = None
                self._conn._on_frame(frame)  # type: ignore[arg-type]
            return
        self._end += nbytes
        self._parse()

    def _compact(self) -> None:
        n = self._end - self._start
        if self._start:
            self._small[:n] = self._small[self._start:self._end]
        self._start, self._end = 0, n

    def _parse(self) -> None:
        small = self._small
        while True:
            avail = self._end - self._start
            if avail < 4:
                break
            (size,) = _I32.unpack_from(small, self._start)
            if size < 0:
                self._conn._fail(KafkaConnectionError(f"negative frame size {size}"))
                return
            if avail - 4 >= size:
                s = self._start + 4
                frame = bytes(small[s:s + size])
                self._start = s + size
                self._conn._on_frame(frame)
                continue
            if size + 4 > len(small):
                # large frame: receive the rest straight into its own buffer
                big = bytearray(size)
                got = avail - 4
                big[:got] = small[self._start + 4:self._end]
                self._start = self._end = 0
                self._big, self._big_view, self._big_pos = big, memoryview(big), got
                return
            break
        if self._start == self._end:
            self._start = self._end = 0

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        self._conn._fail(KafkaConnectionError(f"connection to {self._conn.address} lost: {exc or 'closed by peer'}"))
        for w in self._drain_waiters:
            if not w.done():
                w.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        waiters, self._drain_waiters = self._drain_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def drain(self) -> None:
        if self._paused:
            fut = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(fut)
            await fut


class BrokerConnection:
    """A pipelined request/response channel to one broker (async; lives on one loop)."""

    def __init__(self, host: str, port: int, *, client_id: str | None = "sparklog",
                 node_id: int = -1, request_timeout_ms: int = 30000) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self._protocol: _KafkaProtocol | None = None
        self._pending: dict[int, _Pending] = {}
        self._corr = itertools.count(1)
        self._error: BaseException | None = None
        self.api_versions: dict[int, tuple[int, int]] = {}

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._protocol is not None and self._error is None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def connect(self, timeout_ms: int | None = None) -> None:
        loop = asyncio.get_running_loop()
        t = (timeout_ms or self.request_timeout_ms) / 1000
        try:
            _, proto = await asyncio.wait_for(
                loop.create_connection(lambda: _KafkaProtocol(self), self.host, self.port), t)
        except (TimeoutError, OSError) as e:
            raise KafkaConnectionError(f"cannot connect to {self.address}: {e or 'timed out'}") from None
        self._protocol = proto  # type: ignore[assignment]
        sock = proto.transport.get_extra_info("socket") if proto.transport else None
        if sock is not None:
            import socket

            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)
            except OSError:
                pass

    def _on_frame(self, frame: bytes | bytearray) -> None:
        if len(frame) < 4:
            self._fail(KafkaConnectionError("response frame shorter than its header"))
            return
        (corr,) = _I32.unpack_from(frame, 0)
        pending = self._pending.pop(corr, None)
        if pending is None:
            log.warning("%s: response with unknown correlation id %d dropped", self.address, corr)
            return
        pos = 4
        if pending.flexible_response:
            # response header v1: skip the tag buffer (uvarint count, then tag/size/bytes)
            pos = _skip_tags(frame, pos)
        if not pending.future.done():
            pending.future.set_result(memoryview(frame)[pos:])

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(exc)
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()

    def send_nowait(self, api_key: int, api_version: int, body: bytes | bytearray | memoryview,
                    *, flexible_request: bool, flexible_response: bool,
                    expect_response: bool = True) -> asyncio.Future | None:
        """Write one request; returns the future of the response body (None for acks=0)."""
        if self._error is not None:
            raise self._error
        if self._protocol is None or self._protocol.transport is None:
            raise KafkaConnectionError(f"not connected to {self.address}")
        corr = next(self._corr) & 0x7FFFFFFF
        header = encode_request_header(api_key, api_version, corr, self.client_id, flexible_request)
        fut: asyncio.Future | None = None
        if expect_response:
            fut = asyncio.get_running_loop().create_future()
            self._pending[corr] = _Pending(fut, api_key, api_version, flexible_response)
        size = len(header) + len(body)
        t = self._protocol.transport
        if len(body) < 65536:
            t.write(_I32.pack(size) + header + bytes(body))
        else:
            t.writelines((_I32.pack(size) + header, body))
        return fut

    async def request(self, api_key: int, api_version: int, body: bytes | bytearray | memoryview,
                      *, flexible_request: bool, flexible_response: bool,
                      expect_response: bool = True, timeout_ms: int | None = None) -> memoryview | None:
        fut = self.send_nowait(api_key, api_version, body, flexible_request=flexible_request,
                               flexible_response=flexible_response, expect_response=expect_response)
        assert self._protocol is not None
        await self._protocol.drain()
        if fut is None:
            return None
        t = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        try:
            return await asyncio.wait_for(fut, t)
        except TimeoutError:
            # the connection's request stream is now out of step with us: drop it
            exc = KafkaTimeoutError(f"request (api {api_key} v{api_version}) to {self.address} "
                                    f"timed out after {t:.1f}s")
            self._fail(exc)
            raise exc from None

    async def close(self) -> None:
        self._fail(KafkaConnectionError(f"connection to {self.address} closed"))
        if self._protocol is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._protocol.closed), 1.0)
            except (TimeoutError, asyncio.CancelledError):
                pass


async def send_request(conn: BrokerConnection, request: Any, version: int, *,
                       expect_response: bool = True, timeout_ms: int | None = None) -> Any:
    """Encode ``request`` (a message of ``protocol.messages``) at ``version``, send it on
    ``conn`` and decode the response (None when none is expected)."""
    spec = API_BY_KEY[request.API_KEY]
    raw = await conn.request(request.API_KEY, version, request.encode(version),
                             flexible_request=spec.is_flexible(version),
                             flexible_response=spec.response_header_version(version) == 1,
                             expect_response=expect_response, timeout_ms=timeout_ms)
    if raw is None:
        return None
    return spec.response.decode(raw, version)


def _skip_tags(buf: bytes | bytearray, pos: int) -> int:
    def uvarint(p: int) -> tuple[int, int]:
        shift = value = 0
        while True:
            b = buf[p]
            p += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value, p
            shift += 7

    count, pos = uvarint(pos)
    for _ in range(count):
        _, pos = uvarint(pos)
        size, pos = uvarint(pos)
        pos += size
    return pos


class EventLoopThread:
    """A private asyncio loop on a daemon thread: the sync facades submit coroutines here,
    so a CLI command or a Spark task gets async pipelining without owning a loop."""

    def __init__(self, name: str = "sparklog-client") -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        self._closed = False

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = asyncio.all_tasks(self.loop)
                for t in pending:
                    t.cancel()
                if pending:
                    self.loop.run_until_complete(
                        asyncio.gather(*pending, return_exceptions=True))
            finally:
                self.loop.close()

    @property
    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait; a timeout cancels it and raises
        KafkaTimeoutError."""
        return self.wait(self.spawn(coro), timeout)

    def spawn(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop without waiting (``wait`` collects it)."""
        if self._closed:
            coro.close()
            raise SparklogError("client is closed")
        return self.submit(coro)

    @staticmethod
    def wait(fut: concurrent.futures.Future[T], timeout: float | None = None) -> T:
        """The result of a ``submit``ted coroutine; a timeout cancels it and raises
        KafkaTimeoutError."""
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise KafkaTimeoutError(f"operation timed out after {timeout}s") from None

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self, timeout: float = 5.0) -> None:
        if self._closed:
            return
        self._closed = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        if not self.in_loop_thread:
            self._thread.join(timeout)


def retry_delay_s(attempt: int, backoff_ms: int) -> float:
    """Seconds to wait before retry number ``attempt`` (1, 2, ...): ``retry.backoff.ms``
    doubling per attempt up to one second (Kafka's ``retry.backoff.max.ms`` default)."""
    return min(backoff_ms * (2 ** min(attempt - 1, 6)), 1000) / 1000


async def with_retries(
    op: Callable[[], Awaitable[T]], *, retries: int, backoff_ms: int, deadline: float,
    on_retry: Callable[[BaseException], Awaitable[None]] | None = None,
) -> T:
    """Retry ``op`` on retriable errors with exponential backoff until ``deadline``
    (loop time)."""
    loop = asyncio.get_running_loop()
    attempt = 0
    while True:
        try:
            return await op()
        except (KafkaError, KafkaConnectionError, KafkaTimeoutError) as e:
            retriable = getattr(e, "retriable", False)
            attempt += 1
            delay = retry_delay_s(attempt, backoff_ms)
            if not retriable or attempt > retries or loop.time() + delay >= deadline:
                raise
            log.debug("retrying after %s (attempt %d)", e, attempt)
            if on_retry is not None:
                await on_retry(e)
            await asyncio.sleep(delay)
