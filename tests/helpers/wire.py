"""A blocking raw-protocol Kafka connection for tests (requests in, decoded responses out):
for bad input and versions that no third-party client sends."""

from __future__ import annotations

import socket
import struct
from typing import Any

from sparklog.protocol.messages import decode_response, encode_request
from sparklog.protocol.schema import TopLevel

__all__ = ["KafkaWire"]


class KafkaWire:
    """Blocking raw-protocol connection: send requests, read responses."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.cid = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, api_key: int, version: int, message: TopLevel,
                client_id: str = "wire-test") -> None:
        self.cid += 1
        self.sock.sendall(encode_request(api_key, version, self.cid, client_id, message))

    def read_frame(self) -> bytes:
        head = self._read_exact(4)
        (n,) = struct.unpack(">i", head)
        return self._read_exact(n)

    def response(self, api_key: int, version: int) -> Any:
        _cid, msg = decode_response(api_key, version, self.read_frame())
        return msg

    def call(self, api_key: int, version: int, message: TopLevel) -> Any:
        self.request(api_key, version, message)
        return self.response(api_key, version)

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by broker")
            buf += chunk
        return bytes(buf)

    def is_closed(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()
