"""Request and response headers.

    Request header v0   api_key int16, api_version int16, correlation_id int32
    Request header v1   + client_id NULLABLE_STRING (int16 length in every version)
    Request header v2   + tag buffer                       (flexible request versions)
    Response header v0  correlation_id int32
    Response header v1  + tag buffer                       (flexible response versions,
                                                            except ApiVersions: always v0)

The header version follows from the API's first flexible version; ``ApiSpec`` knows it.
Header v0 was only ever used by ControlledShutdown v0, which sparklog does not serve.
"""

from __future__ import annotations

import struct

from sparklog.protocol.errors import MalformedFrameError
from sparklog.protocol.primitives import Reader, Writer

__all__ = [
    "RequestHeader",
    "peek_api_key_version",
    "read_request_header",
    "write_request_header",
    "read_response_header",
    "write_response_header",
]

_KEY_VERSION_CID = struct.Struct(">hhi")


class RequestHeader:
    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "tagged_fields")

    def __init__(self, api_key: int, api_version: int, correlation_id: int,
                 client_id: str | None = None,
                 tagged_fields: dict[int, bytes] | None = None) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.tagged_fields = tagged_fields or {}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestHeader):
            return NotImplemented
        return (self.api_key, self.api_version, self.correlation_id, self.client_id,
                self.tagged_fields) == (other.api_key, other.api_version,
                                        other.correlation_id, other.client_id,
                                        other.tagged_fields)

    def __repr__(self) -> str:
        return (f"RequestHeader(api_key={self.api_key}, api_version={self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r})")


def peek_api_key_version(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) without committing to a header version.

    This is all a broker needs to answer an unsupported version or an unknown API.
    """
    if len(buf) - pos < 8:
        raise MalformedFrameError(f"request header needs 8 bytes, frame has {len(buf) - pos}")
    return _KEY_VERSION_CID.unpack_from(buf, pos)


def read_request_header(r: Reader, header_version: int) -> RequestHeader:
    api_key, api_version, cid = r.fixed(_KEY_VERSION_CID)
    client_id = r.nullable_string() if header_version >= 1 else None
    tags = r.tagged_fields() if header_version >= 2 else None
    return RequestHeader(api_key, api_version, cid, client_id, dict(tags) if tags else None)


def write_request_header(w: Writer, header: RequestHeader, header_version: int) -> None:
    w.fixed(_KEY_VERSION_CID, header.api_key, header.api_version, header.correlation_id)
    if header_version >= 1:
        w.nullable_string(header.client_id)
    if header_version >= 2:
        w.tagged_fields(header.tagged_fields)


def read_response_header(r: Reader, header_version: int) -> int:
    """The correlation id; unknown header tags are skipped (none are defined)."""
    cid = r.int32()
    if header_version >= 1:
        r.tagged_fields()
    return cid


def write_response_header(w: Writer, correlation_id: int, header_version: int) -> None:
    w.int32(correlation_id)
    if header_version >= 1:
        w.buf.append(0)
