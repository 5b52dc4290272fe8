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
``ProduceRequest.TopicProduceData``.  The codec for a version is generated as Python source
the first time that version is used, so a decode is a straight run of ``Reader`` calls with
consecutive fixed-width fields merged into one ``struct.unpack_from``; no per-field dispatch
at run time.  In flexible versions strings/bytes/arrays/records switch to their compact
forms and every struct ends with a tag section; tagged fields are written only when they
differ from their default, and tags we do not know survive a decode/encode round trip.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, ClassVar

from sparklog.protocol.errors import MalformedFrameError, UnsupportedVersionError
from sparklog.protocol.primitives import Reader, Writer

__all__ = [
    "MISSING", "ApiSpec", "Field", "Message", "MessageSchema", "TopLevel", "VersionRange",
    "api", "compile_message", "f", "schema",
]

MISSING: Any = object()
_NO_MAX = 1 << 15

PRIMITIVES = {
    "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "uuid",
    "string", "bytes", "records",
}
# struct format letters for the fixed-width primitives merged into one unpack
_FIXED = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H",
          "uint32": "I", "float64": "d", "bool": "?"}
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
        return cls._codec(version)[1](r)

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, version: int, pos: int = 0) -> Any:
        """Decode one body at ``pos``; trailing bytes are tolerated (clients send some)."""
        return cls._codec(version)[1](Reader(buf, pos))

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


# --------------------------------------------------------------------------- codegen


class _Gen:
    """Generates the decode/encode functions of every struct of a message for one version."""

    def __init__(self, top: type, version: int, flexible: bool,
                 structs: dict[str, list[Field]]) -> None:
        self.top = top
        self.v = version
        self.fx = flexible
        self.structs = structs
        self.glob: dict[str, Any] = {"Reader": Reader, "Writer": Writer, "_M": MISSING,
                                     "_tag_dec": _tag_dec, "_tag_enc": _tag_enc,
                                     "MalformedFrameError": MalformedFrameError}
        self.src: list[str] = []
        self.done: dict[int, str] = {}
        self.n = 0

    def sym(self, value: Any, prefix: str = "_g") -> str:
        self.n += 1
        name = f"{prefix}{self.n}"
        self.glob[name] = value
        return name

    # per-field expressions ---------------------------------------------------------

    def _prim_read(self, t: str, nullable: bool) -> str:
        fx = self.fx
        if t in _FIXED:
            return {"bool": "r.boolean()"}.get(t, f"r.{t}()")
        if t == "uuid":
            return "r.uuid()"
        if t == "string":
            return f"r.{'compact_' if fx else ''}{'nullable_' if nullable else ''}string()"
        if t == "bytes":
            if fx:
                return f"r.compact_{'nullable_' if nullable else ''}bytes()"
            return "r.nullable_bytes()" if nullable else "r.bytes_()"
        if t == "records":
            return "r.compact_records()" if fx else "r.records()"
        raise ValueError(t)

    def _prim_write(self, t: str, nullable: bool, val: str) -> str:
        fx = self.fx
        if t in _FIXED or t == "uuid":
            return f"w.{'boolean' if t == 'bool' else t}({val})"
        if t == "string":
            return f"w.{'compact_' if fx else ''}{'nullable_' if nullable else ''}string({val})"
        if t == "bytes":
            if fx:
                return f"w.compact_{'nullable_' if nullable else ''}bytes({val})"
            return f"w.nullable_bytes({val})" if nullable else f"w.bytes_({val})"
        if t == "records":
            return f"w.compact_records({val})" if fx else f"w.records({val})"
        raise ValueError(t)

    def read_expr(self, fld: Field) -> str:
        nullable = self.v in fld.nullable
        if not fld.is_array:
            if fld.is_struct:
                return f"{self.struct_fn(fld)[0]}(r)"
            return self._prim_read(fld.elem, nullable)
        kind = ("compact_" if self.fx else "") + ("nullable_" if nullable else "")
        if fld.is_struct:
            item = self.struct_fn(fld)[0]
        else:
            item = self.sym(eval("lambda r: " + self._prim_read(fld.elem, False), self.glob), "_ri")
        return f"r.{kind}array({item})"

    def write_stmt(self, fld: Field, val: str) -> str:
        nullable = self.v in fld.nullable
        if not fld.is_array:
            if fld.is_struct:
                return f"{self.struct_fn(fld)[1]}(w, {val})"
            return self._prim_write(fld.elem, nullable, val)
        kind = ("compact_" if self.fx else "") + ("nullable_" if nullable else "")
        if fld.is_struct:
            item = self.struct_fn(fld)[1]
        else:
            item = self.sym(eval("lambda w, x: " + self._prim_write(fld.elem, False, "x"), self.glob),
                            "_wi")
        return f"w.{kind}array({val}, {item})"

    # structs -----------------------------------------------------------------------

    def struct_fn(self, fld: Field) -> tuple[str, str]:
        fields = _resolve(fld, self.structs)
        key = id(fields)
        if key not in self.done:
            cls = self._class_for(fld.elem)
            self.done[key] = fld.elem
            self.gen_struct(fld.elem, cls, fields)
        name = self.done[key]
        return f"_dec_{name}", f"_enc_{name}"

    def _class_for(self, name: str) -> type:
        cls = getattr(self.top, name, None)
        if cls is None:
            raise ValueError(f"no class for struct {name}")
        return cls

    def gen_struct(self, name: str, cls: type, fields: list[Field]) -> None:
        v = self.v
        present = [x for x in fields if v in x.versions]
        # A tagged field exists only in flexible versions (Kafka requires taggedVersions
        # to be inside flexibleVersions); in older versions it is simply absent.
        plain = [x for x in present if x.tag is None]
        tagged = sorted((x for x in present if x.tag is not None and self.fx), key=lambda x: x.tag)
        c = self.sym(cls, "_cls")
        dec = [f"def _dec_{name}(r):"]
        enc = [f"def _enc_{name}(w, o):"]
        i = 0
        while i < len(plain):
            fld = plain[i]
            if not fld.is_array and fld.elem in _FIXED:
                j = i
                while j < len(plain) and not plain[j].is_array and plain[j].elem in _FIXED:
                    j += 1
                group = plain[i:j]
                if len(group) > 1:
                    s = self.sym(struct.Struct(">" + "".join(_FIXED[g.elem] for g in group)), "_s")
                    names = ", ".join(f"v_{g.name}" for g in group)
                    dec.append(f"    {names}, = r.fixed({s})")
                    enc.append(f"    w.fixed({s}, {', '.join('o.' + g.name for g in group)})")
                    i = j
                    continue
            dec.append(f"    v_{fld.name} = {self.read_expr(fld)}")
            enc.append(f"    {self.write_stmt(fld, 'o.' + fld.name)}")
            i += 1
        dec.append(f"    o = {c}({', '.join(f'{x.name}=v_{x.name}' for x in plain)})")
        if self.fx:
            dec.append("    tg = r.tagged_fields()")
            dec.append("    if tg:")
            for fld in tagged:
                rd = self.sym(eval("lambda r: " + self.read_expr(fld), self.glob), "_rt")
                dec.append(f"        if {fld.tag} in tg: o.{fld.name} = _tag_dec(tg.pop({fld.tag}), {rd})")
            dec.append("        if tg: o._unknown_tags = tg")
            enc.append("    tg = None")
            for fld in tagged:
                wr = self.sym(eval("lambda w, x: " + self.write_stmt(fld, "x"), self.glob), "_wt")
                dflt = fld.default_value()
                if dflt is MISSING:
                    dflt = self._class_for(fld.elem)()
                d = self.sym(dflt, "_dflt")
                enc.append(f"    if o.{fld.name} != {d}:")
                enc.append("        if tg is None: tg = {}")
                enc.append(f"        tg[{fld.tag}] = _tag_enc(o.{fld.name}, {wr})")
            enc.append("    u = o._unknown_tags")
            enc.append("    if u: tg = {**u, **tg} if tg else u")
            enc.append("    if tg: w.tagged_fields(tg)")
            enc.append("    else: w.buf.append(0)")
        enc.append("    return None")
        dec.append("    return o")
        self.src.append("\n".join(dec))
        self.src.append("\n".join(enc))


def _tag_dec(data: bytes, read: Any) -> Any:
    return read(Reader(data))


def _tag_enc(value: Any, write: Any) -> bytes:
    w = Writer()
    write(w, value)
    return w.getvalue()


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

    def compiler(version: int) -> tuple[Any, Any]:
        fx = flexible is not None and version >= flexible
        g = _Gen(cls, version, fx, structs)
        g.done[id(schema.fields)] = schema.name
        g.gen_struct(schema.name, cls, schema.fields)
        src = "\n\n".join(g.src) + "\n"
        exec(compile(src, f"<sparklog codec {schema.name} v{version}>", "exec"), g.glob)
        return g.glob[f"_enc_{schema.name}"], g.glob[f"_dec_{schema.name}"]

    cls._compiler = staticmethod(compiler)
    return cls


schema = MessageSchema  # the name the declarations use


class ApiSpec:
    """One API: its key, declared version range, first flexible version and both classes."""

    __slots__ = ("key", "name", "request", "response", "min_version", "max_version",
                 "flexible")

    def __init__(self, key: int, name: str, request: type, response: type,
                 min_version: int, max_version: int, flexible: int | None) -> None:
        self.key = key
        self.name = name
        self.request = request
        self.response = response
        self.min_version = min_version
        self.max_version = max_version
        self.flexible = flexible

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
