"""Random protocol messages drawn from their schema declarations, for the message tests:
every field a version has, nulls where it allows them, tagged fields sometimes left at
their default (which must then not be written)."""

from __future__ import annotations

import random
import string

from sparklog.protocol.schema import Field, TopLevel

_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
}
_ALPHABET = string.ascii_letters + string.digits + "._-éß€"


def _prim(rng: random.Random, t: str) -> object:
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return rng.choice([lo, hi, 0, -1 if lo < 0 else 1, rng.randint(lo, hi)])
    if t == "bool":
        return rng.random() < 0.5
    if t == "float64":
        return rng.choice([0.0, -1.5, rng.uniform(-1e9, 1e9)])
    if t == "uuid":
        return rng.randbytes(16)
    if t == "string":
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 12)))
    if t in ("bytes", "records"):
        return rng.randbytes(rng.randint(0, 24))
    raise AssertionError(t)


def struct_class(owner: type, fld: Field) -> type:
    return getattr(owner, fld.elem)


def make_struct(rng: random.Random, cls: type, fields: list[Field], version: int,
                flexible: bool, top: type) -> object:
    kwargs = {}
    for fld in fields:
        if version not in fld.versions:
            continue
        if fld.tag is not None and not flexible:
            continue
        if fld.tag is not None and rng.random() < 0.3:
            continue  # leave a tagged field at its default: it must not be written
        kwargs[fld.name] = make_value(rng, fld, version, flexible, top)
    return cls(**kwargs)


def make_value(rng: random.Random, fld: Field, version: int, flexible: bool, top: type) -> object:
    if version in fld.nullable and rng.random() < 0.2:
        return None
    if fld.is_array:
        n = rng.randint(0, 3)
        if fld.is_struct:
            sub = getattr(top, fld.elem)
            return [make_struct(rng, sub, sub._spec, version, flexible, top) for _ in range(n)]
        return [_prim(rng, fld.elem) for _ in range(n)]
    if fld.is_struct:
        sub = getattr(top, fld.elem)
        return make_struct(rng, sub, sub._spec, version, flexible, top)
    return _prim(rng, fld.elem)


def make_message(rng: random.Random, cls: type[TopLevel], version: int) -> TopLevel:
    flexible = cls.FLEXIBLE_VERSION is not None and version >= cls.FLEXIBLE_VERSION
    return make_struct(rng, cls, cls._spec, version, flexible, cls)  # type: ignore[return-value]
