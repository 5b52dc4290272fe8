"""Compiles one version of a message declaration into straight-line Python.

The generic way to walk a schema (a loop over fields dispatching on the type of each)
costs a Python call and a branch per field; a Fetch response with 10 partitions would pay
that ~150 times.  Instead, the first use of a (message, version) generates the source of
one decode and one encode function per struct, with everything known at that point baked
in: which fields exist, compact or classic encodings, consecutive fixed-width fields
merged into one ``struct`` pack/unpack, arrays unrolled into loops, tagged-field default
checks spelled out.  The result is ``exec``-ed once and cached on the message class.

Decoders work on ``(buf, pos, end)`` with ``buf`` a memoryview and return ``(obj, pos)``;
every length is checked against ``end`` before anything is sliced or allocated, and every
failure is a ``MalformedFrameError``.  Encoders append to ``w.buf`` (a bytearray) and hand
record payloads that are not bytes to ``Writer.external`` (see ``primitives.Writer``).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from sparklog.protocol.errors import MalformedFrameError
from sparklog.protocol.primitives import _decode_unsigned, encode_uvarint

if TYPE_CHECKING:
    from sparklog.protocol.schema import Field

__all__ = ["generate"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_UV1 = [bytes((i,)) for i in range(128)]
_UINT32_MAX = (1 << 32) - 1
_BYTES_LIKE = (bytes, bytearray, memoryview)

# struct letters / sizes of the fixed-width primitives
FIXED = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H",
         "uint32": "I", "float64": "d", "bool": "?"}


# --------------------------------------------------------------------------- runtime


def _trunc(what: str, pos: int, need: int, end: int) -> MalformedFrameError:
    return MalformedFrameError(
        f"truncated {what} at offset {pos}: need {need} bytes, have {max(end - pos, 0)}"
    )


def _ruv(buf: Any, pos: int, end: int) -> tuple[int, int]:
    if pos >= end:
        raise _trunc("unsigned varint", pos, 1, end)
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value, npos = _decode_unsigned(buf, pos, 5)
    if value > _UINT32_MAX:
        raise MalformedFrameError(f"unsigned varint at offset {pos} exceeds 32 bits")
    if npos > end:
        raise _trunc("unsigned varint", pos, npos - pos, end)
    return value, npos


def _uv(n: int) -> bytes:
    return _UV1[n] if n < 128 else encode_uvarint(n)


def _text(buf: Any, pos: int, n: int, end: int) -> tuple[str, int]:
    if pos + n > end:
        raise _trunc("string", pos, n, end)
    try:
        return str(buf[pos:pos + n], "utf-8"), pos + n
    except UnicodeDecodeError as exc:
        raise MalformedFrameError(f"string at offset {pos} is not valid UTF-8") from exc


def _blob(buf: Any, pos: int, n: int, end: int) -> tuple[bytes, int]:
    if pos + n > end:
        raise _trunc("bytes", pos, n, end)
    return bytes(buf[pos:pos + n]), pos + n


def _len16(buf: Any, pos: int, end: int) -> int:
    if pos + 2 > end:
        raise _trunc("string length", pos, 2, end)
    return _I16.unpack_from(buf, pos)[0]


def _len32(buf: Any, pos: int, end: int) -> int:
    if pos + 4 > end:
        raise _trunc("length", pos, 4, end)
    return _I32.unpack_from(buf, pos)[0]


def _rstr(buf: Any, pos: int, end: int) -> tuple[str, int]:
    n = _len16(buf, pos, end)
    if n < 0:
        raise MalformedFrameError(f"null at offset {pos} for a non-nullable string")
    return _text(buf, pos + 2, n, end)


def _rnstr(buf: Any, pos: int, end: int) -> tuple[str | None, int]:
    n = _len16(buf, pos, end)
    if n < 0:
        if n != -1:
            raise MalformedFrameError(f"invalid string length {n} at offset {pos}")
        return None, pos + 2
    return _text(buf, pos + 2, n, end)


def _rcstr(buf: Any, pos: int, end: int) -> tuple[str, int]:
    n, npos = _ruv(buf, pos, end)
    if n == 0:
        raise MalformedFrameError(f"null at offset {pos} for a non-nullable compact string")
    return _text(buf, npos, n - 1, end)


def _rcnstr(buf: Any, pos: int, end: int) -> tuple[str | None, int]:
    n, npos = _ruv(buf, pos, end)
    if n == 0:
        return None, npos
    return _text(buf, npos, n - 1, end)


def _rbytes(buf: Any, pos: int, end: int) -> tuple[bytes, int]:
    n = _len32(buf, pos, end)
    if n < 0:
        raise MalformedFrameError(f"null at offset {pos} for non-nullable bytes")
    return _blob(buf, pos + 4, n, end)


def _rnbytes(buf: Any, pos: int, end: int) -> tuple[bytes | None, int]:
    n = _len32(buf, pos, end)
    if n < 0:
        if n != -1:
            raise MalformedFrameError(f"invalid bytes length {n} at offset {pos}")
        return None, pos + 4
    return _blob(buf, pos + 4, n, end)


def _rcbytes(buf: Any, pos: int, end: int) -> tuple[bytes, int]:
    n, npos = _ruv(buf, pos, end)
    if n == 0:
        raise MalformedFrameError(f"null at offset {pos} for non-nullable compact bytes")
    return _blob(buf, npos, n - 1, end)


def _rcnbytes(buf: Any, pos: int, end: int) -> tuple[bytes | None, int]:
    n, npos = _ruv(buf, pos, end)
    if n == 0:
        return None, npos
    return _blob(buf, npos, n - 1, end)


def _rrec(buf: Any, pos: int, end: int) -> tuple[memoryview | None, int]:
    """Record sets stay views of the frame: the broker hands them to storage as is."""
    n = _len32(buf, pos, end)
    if n < 0:
        if n != -1:
            raise MalformedFrameError(f"invalid records length {n} at offset {pos}")
        return None, pos + 4
    pos += 4
    if pos + n > end:
        raise _trunc("records", pos, n, end)
    return buf[pos:pos + n], pos + n


def _rcrec(buf: Any, pos: int, end: int) -> tuple[memoryview | None, int]:
    n, pos = _ruv(buf, pos, end)
    if n == 0:
        return None, pos
    n -= 1
    if pos + n > end:
        raise _trunc("records", pos, n, end)
    return buf[pos:pos + n], pos + n


def _ruuid(buf: Any, pos: int, end: int) -> tuple[bytes, int]:
    return _blob(buf, pos, 16, end)


def _rcount(buf: Any, pos: int, end: int, compact: bool, nullable: bool) -> tuple[int, int]:
    """Array element count (-1 = null); a count that cannot fit is garbage."""
    if compact:
        n, npos = _ruv(buf, pos, end)
        n -= 1
    else:
        n = _len32(buf, pos, end)
        npos = pos + 4
    if n < 0:
        if n != -1 or not nullable:
            raise MalformedFrameError(f"invalid array count {n} at offset {pos}")
    elif n > end - npos:
        raise MalformedFrameError(
            f"array of {n} elements at offset {pos} cannot fit in {end - npos} bytes"
        )
    return n, npos


_ARRAY_STRUCTS: dict[tuple[str, int], struct.Struct] = {}


def _array_struct(letter: str, n: int) -> struct.Struct:
    """Compiled struct for n values; formatting a format string per call costs more."""
    s = _ARRAY_STRUCTS.get((letter, n))
    if s is None:
        s = struct.Struct(f">{n}{letter}")
        if n <= 256:
            _ARRAY_STRUCTS[(letter, n)] = s
    return s


def _rfixed_array(buf: Any, pos: int, end: int, n: int, letter: str, size: int) -> tuple[list, int]:
    if pos + n * size > end:
        raise _trunc("array", pos, n * size, end)
    return list(_array_struct(letter, n).unpack_from(buf, pos)), pos + n * size


def _pack_array(letter: str, items: Any) -> bytes:
    return _array_struct(letter, len(items)).pack(*items)


def _rtags(buf: Any, pos: int, end: int) -> tuple[dict[int, bytes] | None, int]:
    if pos < end and buf[pos] == 0:
        return None, pos + 1
    count, pos = _ruv(buf, pos, end)
    if count > end - pos:
        raise MalformedFrameError(f"{count} tagged fields cannot fit at offset {pos}")
    out: dict[int, bytes] = {}
    last = -1
    for _ in range(count):
        tag, pos = _ruv(buf, pos, end)
        if tag <= last:
            raise MalformedFrameError(f"tagged field {tag} out of order or repeated")
        last = tag
        size, pos = _ruv(buf, pos, end)
        out[tag], pos = _blob(buf, pos, size, end)
    return out, pos


def _wstr(b: bytearray, v: str) -> None:
    s = v.encode()
    if len(s) > 0x7FFF:
        raise ValueError(f"string of {len(s)} bytes exceeds the int16 length")
    b += _I16.pack(len(s))
    b += s


def _wnstr(b: bytearray, v: str | None) -> None:
    if v is None:
        b += b"\xff\xff"
    else:
        _wstr(b, v)


def _wcstr(b: bytearray, v: str) -> None:
    s = v.encode()
    n = len(s) + 1
    b += _UV1[n] if n < 128 else encode_uvarint(n)
    b += s


def _wcnstr(b: bytearray, v: str | None) -> None:
    if v is None:
        b.append(0)
    else:
        _wcstr(b, v)


def _wbytes(b: bytearray, v: Any) -> None:
    b += _I32.pack(len(v))
    b += v


def _wnbytes(b: bytearray, v: Any) -> None:
    if v is None:
        b += b"\xff\xff\xff\xff"
    else:
        b += _I32.pack(len(v))
        b += v


def _wcbytes(b: bytearray, v: Any) -> None:
    n = len(v) + 1
    b += _UV1[n] if n < 128 else encode_uvarint(n)
    b += v


def _wcnbytes(b: bytearray, v: Any) -> None:
    if v is None:
        b.append(0)
    else:
        _wcbytes(b, v)


def _wrec(w: Any, v: Any) -> None:
    if v is None:
        w.buf += b"\xff\xff\xff\xff"
    elif isinstance(v, _BYTES_LIKE):
        b = w.buf
        b += _I32.pack(len(v))
        b += v
    else:
        w.buf += _I32.pack(v.size)
        w.external(v)


def _wcrec(w: Any, v: Any) -> None:
    if v is None:
        w.buf.append(0)
    elif isinstance(v, _BYTES_LIKE):
        b = w.buf
        b += _uv(len(v) + 1)
        b += v
    else:
        w.buf += _uv(v.size + 1)
        w.external(v)


def _wuuid(v: bytes) -> bytes:
    if len(v) != 16:
        raise ValueError(f"a UUID is 16 bytes, got {len(v)}")
    return v


def _wtags(b: bytearray, tags: dict[int, bytes]) -> None:
    b += _uv(len(tags))
    for tag in sorted(tags):
        value = tags[tag]
        b += _uv(tag)
        b += _uv(len(value))
        b += value


_RUNTIME = {name: obj for name, obj in globals().items() if name.startswith("_") and callable(obj)}
_RUNTIME.update({"_I16": _I16, "_I32": _I32, "_UV1": _UV1, "MalformedFrameError": MalformedFrameError})


# --------------------------------------------------------------------------- generator


class _Gen:
    def __init__(self, top: type, version: int, flexible: bool,
                 resolve: Any, default_of: Any) -> None:
        self.top = top
        self.v = version
        self.fx = flexible
        self.resolve = resolve
        self.default_of = default_of
        self.glob: dict[str, Any] = dict(_RUNTIME)
        self.src: list[str] = []
        self.done: dict[int, str] = {}
        self.n = 0

    def sym(self, value: Any, prefix: str = "_g") -> str:
        self.n += 1
        name = f"{prefix}{self.n}"
        self.glob[name] = value
        return name

    def struct_fns(self, fld: Field) -> str:
        """Name suffix of the functions for the struct type of ``fld`` (generated once)."""
        fields = self.resolve(fld)
        key = id(fields)
        if key not in self.done:
            self.done[key] = fld.elem
            self.gen_struct(fld.elem, getattr(self.top, fld.elem), fields)
        return self.done[key]

    # decode ------------------------------------------------------------------------

    def dec_value(self, fld: Field, target: str, ind: str) -> list[str]:
        """Lines that read one field into ``target`` and advance ``pos``."""
        nullable = self.v in fld.nullable
        fx = self.fx
        t = fld.elem
        if not fld.is_array:
            if fld.is_struct:
                return [f"{ind}{target}, pos = _dec_{self.struct_fns(fld)}(buf, pos, end)"]
            if t in FIXED:
                s = self.sym(struct.Struct(">" + FIXED[t]), "_s")
                size = struct.calcsize(">" + FIXED[t])
                return [f"{ind}if pos + {size} > end: raise _trunc({t!r}, pos, {size}, end)",
                        f"{ind}{target} = {s}.unpack_from(buf, pos)[0]",
                        f"{ind}pos += {size}"]
            fn = self._prim_reader(t, nullable)
            return [f"{ind}{target}, pos = {fn}(buf, pos, end)"]
        # fast path inline (a plausible count), everything else through _rcount
        if fx:
            lines = [f"{ind}if pos < end and 0 < buf[pos] < 0x80 and buf[pos] <= end - pos:",
                     f"{ind}    n = buf[pos] - 1",
                     f"{ind}    pos += 1"]
        else:
            lines = [f"{ind}if pos + 4 <= end and 0 <= (n := _I32.unpack_from(buf, pos)[0]) <= end - pos - 4:",
                     f"{ind}    pos += 4"]
        lines += [f"{ind}else:",
                  f"{ind}    n, pos = _rcount(buf, pos, end, {fx}, {nullable})"]
        inner = ind + "    "
        if nullable:
            lines.append(f"{ind}if n < 0: {target} = None")
            lines.append(f"{ind}else:")
        else:
            inner = ind
        if not fld.is_struct and t in FIXED:
            size = struct.calcsize(">" + FIXED[t])
            lines.append(f"{inner}{target}, pos = _rfixed_array(buf, pos, end, n, {FIXED[t]!r}, {size})")
            return lines
        if fld.is_struct:
            item = f"_dec_{self.struct_fns(fld)}"
        else:
            item = self._prim_reader(t, False)
        lines += [f"{inner}{target} = lst = []",
                  f"{inner}for _ in range(n):",
                  f"{inner}    x, pos = {item}(buf, pos, end)",
                  f"{inner}    lst.append(x)"]
        return lines

    def _prim_reader(self, t: str, nullable: bool) -> str:
        c = "c" if self.fx else ""
        nl = "n" if nullable else ""
        if t == "string":
            return f"_r{c}{nl}str"
        if t == "bytes":
            return f"_r{c}{nl}bytes"
        if t == "records":
            return f"_r{c}rec"
        if t == "uuid":
            return "_ruuid"
        if t in FIXED:  # element of an array of fixed-width values read one by one
            s = struct.Struct(">" + FIXED[t])
            size = s.size

            def read(buf: Any, pos: int, end: int, _s: Any = s, _n: int = size) -> tuple[Any, int]:
                if pos + _n > end:
                    raise _trunc("value", pos, _n, end)
                return _s.unpack_from(buf, pos)[0], pos + _n

            return self.sym(read, "_rp")
        raise ValueError(t)

    # encode ------------------------------------------------------------------------

    def enc_value(self, fld: Field, val: str, ind: str) -> list[str]:
        """Lines that append one field; ``b`` is refreshed after anything that may swap it."""
        nullable = self.v in fld.nullable
        fx = self.fx
        t = fld.elem
        if not fld.is_array:
            if fld.is_struct:
                return [f"{ind}_enc_{self.struct_fns(fld)}(w, {val})", f"{ind}b = w.buf"]
            if t in FIXED:
                s = self.sym(struct.Struct(">" + FIXED[t]), "_s")
                return [f"{ind}b += {s}.pack({val})"]
            if t == "records":
                return [f"{ind}_w{'c' if fx else ''}rec(w, {val})", f"{ind}b = w.buf"]
            if t == "uuid":
                return [f"{ind}b += _wuuid({val})"]
            return [f"{ind}{self._prim_writer(t, nullable)}(b, {val})"]
        lines = [f"{ind}items = {val}"]
        inner = ind
        if nullable:
            lines.append(f"{ind}if items is None: " + ("b.append(0)" if fx else 'b += b"\\xff\\xff\\xff\\xff"'))
            lines.append(f"{ind}else:")
            inner = ind + "    "
        lines.append(f"{inner}n = len(items)")
        lines.append(f"{inner}b += _uv(n + 1)" if fx else f"{inner}b += _I32.pack(n)")
        if fld.is_struct:
            fn = f"_enc_{self.struct_fns(fld)}"
            lines += [f"{inner}for x in items: {fn}(w, x)", f"{inner}b = w.buf"]
        elif t in FIXED:
            lines.append(f"{inner}if n: b += _pack_array({FIXED[t]!r}, items)")
        elif t == "uuid":
            lines.append(f"{inner}for x in items: b += _wuuid(x)")
        else:
            lines.append(f"{inner}for x in items: {self._prim_writer(t, False)}(b, x)")
        return lines

    def _prim_writer(self, t: str, nullable: bool) -> str:
        c = "c" if self.fx else ""
        nl = "n" if nullable else ""
        if t == "string":
            return f"_w{c}{nl}str"
        if t == "bytes":
            return f"_w{c}{nl}bytes"
        raise ValueError(t)

    def is_default_expr(self, fld: Field, val: str) -> str:
        """Python expression true when a tagged field holds its default (then not written)."""
        d = self.default_of(fld)
        if fld.is_array:
            return f"({val} is None)" if d is None else f"(not {val})"
        if fld.is_struct and d is _STRUCT_DEFAULT:
            sub = self.resolve(fld)
            parts = [self.is_default_expr(x, f"{val}.{x.name}") for x in sub
                     if self.v in x.versions and x.tag is None]
            return "(" + " and ".join(parts or ["True"]) + ")"
        return f"({val} == {self.sym(d, '_d')})"

    # one struct ----------------------------------------------------------------------

    def gen_struct(self, name: str, cls: type, fields: list[Field]) -> None:
        v = self.v
        present = [x for x in fields if v in x.versions]
        plain = [x for x in present if x.tag is None]
        tagged = sorted((x for x in present if x.tag is not None and self.fx), key=lambda x: x.tag)
        c = self.sym(cls, "_cls")
        dec = [f"def _dec_{name}(buf, pos, end):"]
        enc = [f"def _enc_{name}(w, o):", "    b = w.buf"]
        i = 0
        while i < len(plain):
            fld = plain[i]
            if not fld.is_array and fld.elem in FIXED:
                j = i
                while j < len(plain) and not plain[j].is_array and plain[j].elem in FIXED:
                    j += 1
                group = plain[i:j]
                if len(group) > 1:
                    st = struct.Struct(">" + "".join(FIXED[g.elem] for g in group))
                    s = self.sym(st, "_s")
                    names = ", ".join(f"v_{g.name}" for g in group)
                    dec.append(f"    if pos + {st.size} > end: raise _trunc('fields', pos, {st.size}, end)")
                    dec.append(f"    {names}, = {s}.unpack_from(buf, pos)")
                    dec.append(f"    pos += {st.size}")
                    enc.append(f"    b += {s}.pack({', '.join('o.' + g.name for g in group)})")
                    i = j
                    continue
            dec += self.dec_value(fld, f"v_{fld.name}", "    ")
            enc += self.enc_value(fld, f"o.{fld.name}", "    ")
            i += 1
        dec.append(f"    o = {c}({', '.join(f'{x.name}=v_{x.name}' for x in plain)})")
        if self.fx:
            # the common case, an empty tag section, costs one byte compare
            dec.append("    if pos < end and buf[pos] == 0:")
            dec.append("        pos += 1")
            dec.append("    else:")
            dec.append("        tg, pos = _rtags(buf, pos, end)")
            dec.append("        if tg is not None:")
            for fld in tagged:
                sub_dec = [f"def _rt_{name}_{fld.name}(buf, pos, end):"]
                sub_dec += self.dec_value(fld, "val", "    ")
                sub_dec.append("    return val, pos")
                self.src.append("\n".join(sub_dec))
                dec.append(f"            if {fld.tag} in tg:")
                dec.append(f"                data = memoryview(tg.pop({fld.tag}))")
                dec.append(f"                o.{fld.name} = _rt_{name}_{fld.name}(data, 0, len(data))[0]")
            dec.append("            if tg: o._unknown_tags = tg")
            if not tagged:
                enc.append("    if o._unknown_tags: _wtags(b, o._unknown_tags)")
                enc.append("    else: b.append(0)")
            else:
                enc.append("    tg = None")
            for fld in tagged:
                sub_enc = [f"def _wt_{name}_{fld.name}(w, val):", "    b = w.buf"]
                sub_enc += self.enc_value(fld, "val", "    ")
                self.src.append("\n".join(sub_enc))
                val = f"o.{fld.name}"
                enc.append(f"    if not {self.is_default_expr(fld, val)}:")
                enc.append("        if tg is None: tg = {}")
                enc.append("        sw = _Writer()")
                enc.append(f"        _wt_{name}_{fld.name}(sw, {val})")
                enc.append(f"        tg[{fld.tag}] = sw.getvalue()")
            if tagged:
                enc.append("    u = o._unknown_tags")
                enc.append("    if u: tg = {**u, **tg} if tg else u")
                enc.append("    if tg: _wtags(b, tg)")
                enc.append("    else: b.append(0)")
        enc.append("    return None")
        dec.append("    return o, pos")
        self.src.append("\n".join(dec))
        self.src.append("\n".join(enc))


class _StructDefault:
    """Marker: the default of a struct field is an instance with every field defaulted."""


_STRUCT_DEFAULT: Any = _StructDefault()


def generate(top: type, top_name: str, top_fields: list[Field], version: int, flexible: bool,
             resolve: Any, default_of: Any, writer_cls: type) -> tuple[Any, Any]:
    """(encode(w, msg), decode(buf, pos, end) -> (msg, pos)) for one version."""
    g = _Gen(top, version, flexible, resolve, default_of)
    g.glob["struct"] = struct
    g.glob["_Writer"] = writer_cls
    g.done[id(top_fields)] = top_name
    g.gen_struct(top_name, top, top_fields)
    src = "\n\n".join(g.src) + "\n"
    g.glob["__source__"] = src  # readable via schema.codec_source()
    exec(compile(src, f"<sparklog codec {top_name} v{version}>", "exec"), g.glob)
    return g.glob[f"_enc_{top_name}"], g.glob[f"_dec_{top_name}"]


STRUCT_DEFAULT = _STRUCT_DEFAULT
