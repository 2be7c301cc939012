"""Hypothesis strategies of internal-topic message values, driven by the schema tables
(``kafkatool.record.schemas``): every field present at a version, nullable ones sometimes
null, and unknown tagged fields in flexible versions. Shared by the codec and decoder tests."""

from __future__ import annotations

import base64

from hypothesis import strategies as st

from kafkatool.record import message
from kafkatool.record.message import UNKNOWN_TAGS, default_value
from kafkatool.record.schemas import MESSAGES

__all__ = ["message_values"]


_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
}


def _in(rng, v):
    return rng is not None and rng[0] <= v <= rng[1]


def _primitive(t):
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1]))
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "bool":
        return st.booleans()
    if t == "uuid":
        return st.binary(min_size=16, max_size=16).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("="))
    if t == "string":
        return st.text(max_size=8)
    if t in ("bytes", "records"):
        return st.binary(max_size=8)
    raise AssertionError(t)


def _is_primitive(t):
    return t in _INT_RANGES or t in ("float64", "bool", "uuid", "string", "bytes", "records")


def _field_value(f, structs, v, flex):
    t = f[1]
    if t.startswith("[]"):
        et = t[2:]
        if _is_primitive(et):
            elem = _primitive(et)
        else:
            elem = _struct_value(f[7] or structs[et], structs, v, flex)
        s = st.lists(elem, max_size=3)
    elif _is_primitive(t):
        s = _primitive(t)
    else:
        s = _struct_value(f[7] or structs[t], structs, v, flex)
    if _in(f[3], v):
        s = st.one_of(st.none(), s)
    return s


def _struct_value(fields, structs, v, flex):
    parts = {}
    for f in fields:
        if _in(f[2], v):
            parts[f[0]] = _field_value(f, structs, v, flex)
        else:
            parts[f[0]] = st.just(default_value(f, structs))
    base = st.fixed_dictionaries(parts)
    if not flex:
        return base
    known = {f[5] for f in fields if f[5] is not None}
    unknown = st.lists(
        st.tuples(st.integers(0, 40).filter(lambda t: t not in known), st.binary(max_size=4)),
        max_size=2,
        unique_by=lambda tb: tb[0],
    ).map(lambda xs: sorted(xs, key=lambda tb: tb[0]))

    def add(pair):
        value, extra = pair
        if extra:
            value = dict(value)
            value[UNKNOWN_TAGS] = extra
        return value

    return st.tuples(base, unknown).map(add)


def message_values(name, v):
    """Random values of message ``name`` at version ``v`` (the clamp rule applied)."""
    m = MESSAGES[name]
    v = message.clamp_version(name, v)
    flex = m["flexibleFrom"] is not None and v >= m["flexibleFrom"]
    return _struct_value(m["fields"], m["structs"], v, flex)
