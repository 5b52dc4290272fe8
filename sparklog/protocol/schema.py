"""Kafka message schemas declared as data, compiled to per-version codecs.

A declaration (see ``sparklog/protocol/messages/``) is a tree of ``Field``s written with
``f(...)``: snake_case name, a type, the versions the field exists in, and optionally the
versions where it may be null, a default and a tag number.  Version ranges use the
notation of Kafka's protocol guide ("3+", "0-12", "none").  Types:

    int8 int16 int32 int64 uint16 uint32 float64 bool uuid string bytes records
    "[]<primitive>"          array of a primitive
    "<Struct>" / "[]<Struct>" a nested struct / array of structs, whose fields are given
                              inline (``fields=[...]``) or declared once in ``structs=``

From the declaration each message becomes a class (``__slots__``, keyword constructor,
omitted fields take the schema default) with one nested class per struct, e.g.
``ProduceRequest.TopicProduceData`` (every struct class is also an attribute of the
top-level class).  The codec of a version is generated as straight-line Python the first
time that version is used (``schema_codegen``): no per-field dispatch at run time.  In
flexible versions strings/bytes/arrays/records switch to their compact forms and every
struct ends with a tag section; tagged fields are written only when they differ from their
default, and tags we do not know survive a decode/encode round trip.

Why generated at import/first use rather than checked-in generated modules: the
declarations stay the single source, there is no generator output to keep in sync, and
the generated source of any (message, version) can still be read with
``codec_source(ProduceRequest, 9)``; its code objects are named
``<sparklog codec NAME vN>`` in tracebacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from sparklog.protocol.errors import MalformedFrameError, UnsupportedVersionError
from sparklog.protocol.primitives import Reader, Writer
from sparklog.protocol.schema_codegen import FIXED as _FIXED
from sparklog.protocol.schema_codegen import STRUCT_DEFAULT, generate

__all__ = [
    "MISSING", "ApiSpec", "Field", "Message", "MessageSchema", "TopLevel", "VersionRange",
    "api", "codec_source", "compile_message", "f", "schema",
]

MISSING: Any = object()
_NO_MAX = 1 << 15

PRIMITIVES = {
    "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "uuid",
    "string", "bytes", "records",
}
_ZERO_UUID = bytes(16)


class VersionRange:
    """An inclusive version range parsed from "3+", "0-12", "5" or "none"."""

    __slots__ = ("lo", "hi")

    def __init__(self, spec: str | None) -> None:
        if spec is None or spec == "none":
            self.lo, self.hi = 1, 0  # empty
        elif spec.endswith("+"):
            self.lo, self.hi = int(spec[:-1]), _NO_MAX
        elif "-" in spec:
            lo, hi = spec.split("-")
            self.lo, self.hi = int(lo), int(hi)
        else:
            self.lo = self.hi = int(spec)

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    def __repr__(self) -> str:
        if self.lo > self.hi:
            return "none"
        return f"{self.lo}+" if self.hi == _NO_MAX else f"{self.lo}-{self.hi}"


class Field:
    __slots__ = ("name", "type", "versions", "nullable", "default", "tag", "fields",
                 "is_array", "elem")

    def __init__(self, name: str, type_: str, versions: str = "0+", *,
                 nullable: str | None = None, default: Any = MISSING, tag: int | None = None,
                 fields: Sequence[Field] | None = None) -> None:
        self.name = name
        self.type = type_
        self.versions = VersionRange(versions)
        self.nullable = VersionRange(nullable)
        self.default = default
        self.tag = tag
        self.fields = list(fields) if fields is not None else None
        self.is_array = type_.startswith("[]")
        self.elem = type_[2:] if self.is_array else type_

    @property
    def is_struct(self) -> bool:
        return self.elem not in PRIMITIVES

    def default_value(self) -> Any:
        """The schema default, following Kafka's rules when none is declared."""
        if self.default is not MISSING:
            return self.default
        if self.is_array:
            return []  # fresh list per call
        t = self.elem
        if t in ("string",):
            return ""
        if t == "bytes":
            return b""
        if t == "records":
            return None
        if t == "uuid":
            return _ZERO_UUID
        if t == "bool":
            return False
        if t == "float64":
            return 0.0
        return 0 if t in _FIXED else MISSING  # MISSING for a struct: a default instance


def f(name: str, type_: str, versions: str = "0+", **kw: Any) -> Field:
    """Shorthand used by the declarations."""
    return Field(name, type_, versions, **kw)


class MessageSchema:
    """One request or response: its top-level fields and any shared struct definitions."""

    def __init__(self, name: str, fields: Sequence[Field], *,
                 structs: dict[str, Sequence[Field]] | None = None) -> None:
        self.name = name
        self.fields = list(fields)
        self.structs = {k: list(v) for k, v in (structs or {}).items()}


class Message:
    """Base of every generated message/struct class."""

    __slots__ = ("_unknown_tags",)
    _fields: ClassVar[tuple[str, ...]] = ()
    _spec: ClassVar[list[Field]]

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._fields)

    def __repr__(self) -> str:
        body = ", ".join(f"{n}={_short_repr(getattr(self, n))}" for n in self._fields)
        return f"{type(self).__qualname__}({body})"

    def to_dict(self) -> dict[str, Any]:
        """Plain data (lists/dicts), e.g. for logging or comparing in tests."""
        return {n: _plain(getattr(self, n)) for n in self._fields}


def _plain(v: Any) -> Any:
    if isinstance(v, Message):
        return v.to_dict()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, memoryview):
        return bytes(v)
    return v


def _short_repr(v: Any) -> str:
    if isinstance(v, bytes | bytearray | memoryview) and len(v) > 32:
        return f"<{len(v)} bytes>"
    return repr(v)


class TopLevel(Message):
    """Adds the version-aware encode/decode entry points to a request/response class."""

    __slots__ = ()
    API_KEY: ClassVar[int]
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]
    FLEXIBLE_VERSION: ClassVar[int | None]
    _codecs: ClassVar[dict[int, tuple[Any, Any]]]
    _compiler: ClassVar[Any]

    @classmethod
    def _codec(cls, version: int) -> tuple[Any, Any]:
        codec = cls._codecs.get(version)
        if codec is None:
            if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
                raise UnsupportedVersionError(
                    f"{cls.__name__} v{version} not declared "
                    f"(v{cls.MIN_VERSION}-v{cls.MAX_VERSION})"
                )
            codec = cls._codecs[version] = cls._compiler(version)
        return codec

    @classmethod
    def read(cls, r: Reader, version: int) -> Any:
        buf = r.buf if type(r.buf) is memoryview else memoryview(r.buf)
        obj, r.pos = cls._codec(version)[1](buf, r.pos, r.end)
        return obj

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, version: int, pos: int = 0) -> Any:
        """Decode one body at ``pos``; trailing bytes are tolerated (clients send some)."""
        view = buf if type(buf) is memoryview else memoryview(buf)
        if not 0 <= pos <= len(view):
            raise MalformedFrameError(f"body offset {pos} outside a {len(view)}-byte frame")
        return cls._codec(version)[1](view, pos, len(view))[0]

    def write(self, w: Writer, version: int) -> None:
        self._codec(version)[0](w, self)

    def encode(self, version: int) -> bytes:
        w = Writer()
        self._codec(version)[0](w, self)
        return w.getvalue()


# --------------------------------------------------------------------------- classes


def _resolve(field: Field, structs: dict[str, list[Field]]) -> list[Field]:
    if field.fields is not None:
        return field.fields
    try:
        return structs[field.elem]
    except KeyError:
        raise ValueError(f"struct {field.elem!r} of field {field.name!r} is not declared") from None


def _make_class(name: str, qualname: str, fields: list[Field], base: type,
                structs: dict[str, list[Field]], ns: dict[str, type]) -> type:
    """A slotted class whose __init__ takes every field as a keyword with its default."""
    nested: dict[str, type] = {}
    for fld in fields:
        if fld.is_struct and fld.elem not in nested:
            sub_fields = _resolve(fld, structs)
            if fld.elem in ns:
                nested[fld.elem] = ns[fld.elem]
            else:
                nested[fld.elem] = _make_class(fld.elem, f"{qualname}.{fld.elem}", sub_fields,
                                               Message, structs, ns)
    names = tuple(fld.name for fld in fields)
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate field names in {qualname}")
    params, body, glob = [], [], {"_M": MISSING}
    for i, fld in enumerate(fields):
        d = fld.default_value()
        if fld.is_array and fld.default is MISSING:
            params.append(f"{fld.name}=_M")
            body.append(f"    self.{fld.name} = [] if {fld.name} is _M else {fld.name}")
        elif fld.is_struct and d is MISSING:
            glob[f"_C{i}"] = nested[fld.elem]
            params.append(f"{fld.name}=_M")
            body.append(f"    self.{fld.name} = _C{i}() if {fld.name} is _M else {fld.name}")
        else:
            glob[f"_D{i}"] = d
            params.append(f"{fld.name}=_D{i}")
            body.append(f"    self.{fld.name} = {fld.name}")
    body.append("    self._unknown_tags = None")
    src = f"def __init__(self, *, {', '.join(params)}):\n" if params else "def __init__(self):\n"
    src += "\n".join(body) + "\n"
    exec(compile(src, f"<sparklog schema {qualname}>", "exec"), glob)
    attrs: dict[str, Any] = {"__slots__": names, "__init__": glob["__init__"],
                             "_fields": names, "_spec": fields, "__qualname__": qualname}
    attrs.update(nested)
    cls = type(name, (base,), attrs)
    ns[name] = cls
    return cls


def codec_source(cls: type[TopLevel], version: int) -> str:
    """The generated Python source of ``cls``'s codec for ``version`` (for reading/debugging)."""
    return cls._codec(version)[0].__globals__["__source__"]


def _default_of(fld: Field) -> Any:
    d = fld.default_value()
    return STRUCT_DEFAULT if d is MISSING else d


def compile_message(schema: MessageSchema, *, api_key: int, versions: tuple[int, int],
                    flexible: int | None) -> type:
    """Build the message class for ``schema``; codecs compile lazily per version."""
    structs = schema.structs
    ns: dict[str, type] = {}
    cls = _make_class(schema.name, schema.name, schema.fields, TopLevel, structs, ns)
    # shared structs not reached through a field still deserve a class
    for sname, sfields in structs.items():
        if sname not in ns:
            _make_class(sname, f"{schema.name}.{sname}", sfields, Message, structs, ns)
    # Every struct class is also reachable from the top level (struct names are unique
    # within a message), so callers write ProduceRequest.PartitionProduceData(...).
    for sname, scls in ns.items():
        if sname != schema.name and sname not in cls.__dict__:
            setattr(cls, sname, scls)
    cls.API_KEY = api_key
    cls.MIN_VERSION, cls.MAX_VERSION = versions
    cls.FLEXIBLE_VERSION = flexible
    cls._codecs = {}

    def resolve(fld: Field) -> list[Field]:
        return _resolve(fld, structs)

    def compiler(version: int) -> tuple[Any, Any]:
        fx = flexible is not None and version >= flexible
        return generate(cls, schema.name, schema.fields, version, fx, resolve, _default_of, Writer)

    cls._compiler = staticmethod(compiler)
    return cls


schema = MessageSchema  # the name the declarations use


@dataclass(slots=True, eq=False, repr=False)
class ApiSpec:
    """One API: its key, declared version range, first flexible version and both classes."""

    key: int
    name: str
    request: type
    response: type
    min_version: int
    max_version: int
    flexible: int | None

    def __repr__(self) -> str:
        return f"ApiSpec({self.name}, key={self.key}, v{self.min_version}-v{self.max_version})"

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.flexible is not None and version >= self.flexible

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        # ApiVersions answers with header v0 whatever the version: a client that sent an
        # unsupported version must be able to parse the reply (KIP-511).
        if self.key == 18:
            return 0
        return 1 if self.is_flexible(version) else 0


def api(key: int, name: str, *, versions: tuple[int, int], flexible: int | None,
        request: MessageSchema, response: MessageSchema) -> ApiSpec:
    """Compile one API declaration.

    ``flexible`` is Kafka's first flexible version even when it lies above ``versions``:
    the header format of a request we do not support still depends on it.
    """
    req = compile_message(request, api_key=key, versions=versions, flexible=flexible)
    resp = compile_message(response, api_key=key, versions=versions, flexible=flexible)
    return ApiSpec(key, name, req, resp, versions[0], versions[1], flexible)
