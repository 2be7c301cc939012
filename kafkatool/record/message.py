"""Generic reader and writer of Kafka's generated messages, driven by the schema tables.

One codec for every internal-topic message (``kafkatool.record.schemas.MESSAGES``): the
same rules as Kafka's ``MessageDataGenerator`` (internal-schemas.md §3-§4):

* non-flexible versions: int16 string lengths, int32 bytes/array lengths, -1 = null;
* flexible versions: compact lengths (uvarint(n+1), 0 = null; Java int arithmetic, so a
  length of 2**31 or more is null) and a tagged-field section at the end of every struct
  (read in any order, written in ascending tag order; unknown tags are kept raw under
  ``"_unknownTaggedFields"`` as ``(tag, bytes)`` tuples and skipped by size; a known tag's
  value is read as encoded, its declared size unused, as Kafka does; a known tag outside
  its taggedVersions is an error);
* the clamp rule: a version outside validVersions reads and writes like
  ``min(max(v, lo), hi)`` (Kafka writes ShareUpdateValue v1 with the v0 layout), except that
  Kafka's nested (non-common) struct classes refuse such a version when one is read
  ("Can't read version V of <Struct>");
* strings decode as Java's ``new String(bytes, UTF_8)`` (:data:`JAVA_UTF8_ERRORS`).

All of this was compared with Kafka's own generated classes (the generator at the spec's
commit, run on a JVM) on ~22,000 metadata and remote-log records, valid and corrupt.

Decoded values are plain Python: int, float, bool, str, bytes, None, list, and dicts keyed
by the schema's field names in schema order. Every field appears: a field absent at the
version (or an absent tag) holds its default. A uuid is a str, as Kafka prints it
(base64url without padding, 22 characters).

Speed: :func:`decode` and :func:`to_json` run Python code generated once per (message,
clamped version) from the tables; the table walks themselves (:func:`decode_reference`,
:func:`to_json_reference`) are the reference, and :func:`decode` falls back to the walk for
any bytes the generated reader gives up on, so every error below comes from the walk.
:func:`dumps` writes a tree as Jackson does (what kafka-dump-log prints), floats as Java's
``Double.toString`` (:func:`java_double`).

Bad bytes raise :class:`~kafkatool.errors.InvalidRecordError` with the byte position
(absolute in ``data``); a count or length larger than the remaining bytes is rejected
before anything is allocated. The error's ``kafka_cause`` attribute is the message Kafka's
generated reader gives for the same failure (what kafka-dump-log prints after "due to: "),
or None where Kafka throws a message-less java.nio.BufferUnderflowException (a fixed-width
read or a varint past the end). Bad values given to :func:`encode` raise ``ValueError``.
"""

from __future__ import annotations

import base64
import json as _json
import math as _math
import re as _re
import struct as _struct
from decimal import Decimal as _Decimal
from typing import Any

from kafkatool.errors import InvalidRecordError
from kafkatool.record.javautf8 import JAVA_UTF8_ERRORS, java_string
from kafkatool.record.schemas import MESSAGES
from kafkatool.record.varint import encode_uvarint

__all__ = ["decode", "encode", "clamp_version", "is_flexible", "default_value", "find",
           "uuid_to_str", "uuid_from_str", "to_json", "to_json_reference", "decode_reference", "json_key", "java_string", "JAVA_UTF8_ERRORS", "dumps", "java_double", "has_float64",
           "UNKNOWN_TAGS", "MESSAGES"]

UNKNOWN_TAGS = "_unknownTaggedFields"

# FIELD = (name, type, versions, nullable, tagged, tag, default, fields)
_NAME, _TYPE, _VERSIONS, _NULLABLE, _TAGGED, _TAG, _DEFAULT, _FIELDS = range(8)

_FIXED = {
    "int8": _struct.Struct(">b"),
    "int16": _struct.Struct(">h"),
    "int32": _struct.Struct(">i"),
    "int64": _struct.Struct(">q"),
    "uint16": _struct.Struct(">H"),
    "uint32": _struct.Struct(">I"),
    "float64": _struct.Struct(">d"),
}
_INT16 = _FIXED["int16"]
_INT32 = _FIXED["int32"]
_ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
_PRIMITIVES = frozenset(["bool", "uuid", "string", "bytes", "records", *_FIXED])


def _in(rng: tuple[int, int] | None, v: int) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


def clamp_version(name: str, version: int) -> int:
    """The version the generated code effectively uses (internal-schemas.md §3)."""
    lo, hi = MESSAGES[name]["validVersions"]
    return min(max(version, lo), hi)


def is_flexible(name: str, version: int) -> bool:
    flex = MESSAGES[name]["flexibleFrom"]
    return flex is not None and clamp_version(name, version) >= flex


def find(category: str, number: int, *, value: bool | None = None) -> str | None:
    """The message name of a category's number (apiKey, control type, or coordinator record
    type; ``value`` picks the Key or Value message of a record type), or None."""
    for name, m in MESSAGES.items():
        if m["category"] != category:
            continue
        if m["apiKey"] == number or m["controlRecordType"] == number or (
            m["recordTypes"] is not None and number in m["recordTypes"]
        ):
            if value is None or name.endswith("Value" if value else "Key"):
                return name
    return None


def uuid_to_str(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def uuid_from_str(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16:
        raise ValueError(f"not a uuid: {text!r}")
    return raw


def _struct_fields(f: tuple, structs: dict) -> tuple:
    if f[_FIELDS] is not None:
        return f[_FIELDS]
    return structs[f[_TYPE].removeprefix("[]")]


def default_value(f: tuple, structs: dict) -> Any:
    """A field's default (internal-schemas.md §4 "Defaults")."""
    t = f[_TYPE]
    d = f[_DEFAULT]
    if d == "null":
        return None
    if t.startswith("[]"):
        return []
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        if not d:
            return 0
        s = d.strip()
        neg = s.startswith("-")
        body = s[1:] if neg else s
        n = int(body[2:], 16) if body.lower().startswith("0x") else int(body)
        return -n if neg else n
    if t == "float64":
        return float(d) if d else 0.0
    if t == "bool":
        return d is not None and d.strip().lower() == "true"
    if t == "string":
        return d if d is not None else ""
    if t in ("bytes", "records"):
        return b""
    if t == "uuid":
        return _ZERO_UUID if not d else d
    return {g[_NAME]: default_value(g, structs) for g in _struct_fields(f, structs)}


# ---------------------------------------------------------------- reading


_MUTABLE = object()  # a plan's default that must be made afresh (a list or dict)
_PLANS: dict[tuple[int, int, bool], tuple[tuple, dict[int, tuple]]] = {}
"""struct() plans by (id of a field tuple of MESSAGES, version, flexible): the tables live as
long as the module, so the ids stay valid."""


def _int32(n: int) -> int:
    """The low 32 bits of ``n`` as a Java int."""
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= 1 << 31 else n


class _Reader:
    __slots__ = ("data", "pos", "end", "structs", "v", "raw", "bounds")

    def __init__(self, data: bytes, pos: int, structs: dict, v: int, raw: int | None = None,
                 bounds: tuple[int, int] = (0, 0x7FFF)) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data)
        self.structs = structs
        self.v = v  # the clamped version the fields follow
        self.raw = v if raw is None else raw  # the version asked for (Kafka's _version)
        self.bounds = bounds  # the versions the struct being read is generated for

    def fail(self, message: str, *, at: int | None = None, expected: Any = None, found: Any = None,
             kafka: str | None = None):
        err = InvalidRecordError(message, position=self.pos if at is None else at,
                                 expected=expected, found=found)
        err.kafka_cause = kafka  # type: ignore[attr-defined]
        raise err

    def take(self, n: int, what: str, *, array: bool = False) -> bytes:
        if n > self.end - self.pos:
            remaining = self.end - self.pos
            self.fail(f"{what}: not enough bytes", expected=f"{n} bytes",
                      found=f"{remaining} remaining",
                      kafka=f"Error reading byte array of {n} byte(s): only {remaining} byte(s) available"
                      if array else None)
        start = self.pos
        self.pos = start + n
        return bytes(self.data[start:self.pos])

    def fixed(self, t: str, what: str) -> Any:
        s = _FIXED[t]
        p = self.pos
        if s.size > self.end - p:
            self.take(s.size, what)  # raises
        self.pos = p + s.size
        return s.unpack_from(self.data, p)[0]

    def uvarint(self, what: str) -> int:
        value = 0
        shift = 0
        start = self.pos
        while True:
            if self.pos >= self.end:
                self.fail(f"{what}: truncated varint", at=start)
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                self.fail(f"{what}: varint is too long (more than 5 bytes)", at=start,
                          kafka="Varint is too long, the most significant bit in the 5th byte is set, "
                          f"converted value: {value & 0xFFFFFFFF:x}")

    def length(self, flex: bool, wide: bool, what: str) -> int:
        """A length or count: -1 for null."""
        if flex:
            # Java: readUnsignedVarint() - 1 in int arithmetic (low 32 bits, signed): a huge
            # length is negative, i.e. null, as in Kafka
            n = (self.uvarint(what) - 1) & 0xFFFFFFFF
            return n - (1 << 32) if n >= 1 << 31 else n
        n = (self.fixed("int32", what) if wide else self.fixed("int16", what))
        return -1 if n < 0 else n

    def plan(self, fields: tuple, flex: bool) -> tuple[tuple, dict[int, tuple]]:
        """What struct() does per field at this version: (name, field, nullable, read, default),
        default _MUTABLE when it must be made afresh; and the struct's known tags."""
        v = self.v
        steps = []
        tagged: dict[int, tuple] = {}
        for f in fields:
            if f[_TAG] is not None:
                tagged[f[_TAG]] = f  # known tag, even outside its versions (then an error)
            read = _in(f[_VERSIONS], v) and not (f[_TAG] is not None and flex and _in(f[_TAGGED], v))
            default = None
            if not read:
                default = default_value(f, self.structs)
                if isinstance(default, (list, dict)):
                    default = _MUTABLE
            steps.append((f[_NAME], f, _in(f[_NULLABLE], v), read, default))
        return tuple(steps), tagged

    def struct(self, fields: tuple, flex: bool) -> dict:
        key = (id(fields), self.v, flex)
        plan = _PLANS.get(key)
        if plan is None:
            plan = _PLANS[key] = self.plan(fields, flex)
        steps, tagged = plan
        out: dict = {}
        for name, f, nullable, read, default in steps:
            if read:
                out[name] = self.value(f, flex, nullable)
            elif default is _MUTABLE:
                out[name] = default_value(f, self.structs)
            else:
                out[name] = default
        if flex:
            self.tags(out, tagged)
        return out

    def tags(self, out: dict, tagged: dict[int, tuple]) -> None:
        """The tagged section as Kafka's generated reader walks it: the count, tags and sizes
        are Java ints (a negative count reads nothing); a known tag's value is read from the
        buffer as an untagged one would be, its size unused (so a wrong size is not an error,
        the bytes after the value are read as the next tag); an unknown tag's bytes are
        ``readArray(size)``. Each round reads at least two bytes: a count larger than the data
        fails where the data runs out, as in Kafka."""
        count = _int32(self.uvarint("tagged field count"))
        unknown = []
        for _ in range(count):
            tag = _int32(self.uvarint("tag"))
            size = _int32(self.uvarint(f"size of tag {tag}"))
            f = tagged.get(tag)
            if f is None:
                remaining = self.end - self.pos
                if size > remaining:
                    self.fail(f"tag {tag}: size larger than the remaining bytes",
                              expected=f"<= {remaining}", found=size,
                              kafka=f"Error reading byte array of {size} byte(s): only {remaining} byte(s) available")
                if size < 0:  # new byte[size]: NegativeArraySizeException, whose message is the size
                    self.fail(f"tag {tag}: negative size", found=size, kafka=str(size))
                unknown.append((tag, self.take(size, f"tag {tag}", array=True)))
                continue
            if not _in(f[_TAGGED], self.v):
                self.fail(f"Tag {tag} is not valid for version {self.raw}",
                          kafka=f"Tag {tag} is not valid for version {self.raw}")
            out[f[_NAME]] = self.value(f, True, _in(f[_NULLABLE], self.v), tagged=True)
        if unknown:
            out[UNKNOWN_TAGS] = unknown

    def enter(self, f: tuple) -> tuple[int, int]:
        """Before reading a struct value of field ``f``: Kafka's nested struct classes check the
        version they are read at against the versions they were generated for (an inline
        struct: the enclosing ones' versions; a common struct: its own "0+", no check), which
        the clamp rule does not cover: "Can't read version V of <Struct>". Returns the bounds
        to restore after the read."""
        outer = self.bounds
        if f[_FIELDS] is None:  # a common struct: generated for its own versions (all "0+")
            self.bounds = (0, 0x7FFF)
            return outer
        lo, hi = outer
        flo, fhi = f[_VERSIONS]
        raw = self.raw
        if (fhi > hi and raw > hi) or (flo < lo and raw < lo):
            struct_name = f[_TYPE].removeprefix("[]")
            self.fail(f"Can't read version {raw} of {struct_name}",
                      kafka=f"Can't read version {raw} of {struct_name}")
        self.bounds = (max(lo, flo), min(hi, fhi))
        return outer

    def null(self, name: str, nullable: bool, start: int) -> None:
        """A null read at ``start`` for field ``name``: None, or Kafka's error where it may not be null."""
        if not nullable:  # Kafka names the field camelCase (FieldSpec.camelCaseName)
            self.fail(f"non-nullable field {name} was serialized as null", at=start,
                      kafka=f"non-nullable field {json_key(name)} was serialized as null")
        return None

    def value(self, f: tuple, flex: bool, nullable: bool, *, tagged: bool = False) -> Any:
        t = f[_TYPE]
        name = f[_NAME]
        if t.startswith("[]"):
            start = self.pos
            n = self.length(flex, True, f"array {name}")
            if n < 0:
                return self.null(name, nullable, start)
            if n > self.end - self.pos:
                self.fail(f"array {name}: count larger than the remaining bytes", at=start,
                          expected=f"<= {self.end - self.pos}", found=n,
                          kafka=f"Tried to allocate a collection of size {n}, but there are only "
                          f"{self.end - self.pos} bytes remaining.")
            et = t[2:]
            if et in _PRIMITIVES:  # Kafka calls an element "<field> element"
                element = f"{name} element"
                return [self.primitive(et, element, flex, False) for _ in range(n)]
            sub = _struct_fields(f, self.structs)
            if n == 0:
                return []
            outer = self.enter(f)
            items = [self.struct(sub, flex) for _ in range(n)]
            self.bounds = outer
            return items
        if t in _PRIMITIVES:
            return self.primitive(t, name, flex, nullable)
        sub = _struct_fields(f, self.structs)
        if nullable:
            if tagged:
                # Java: readUnsignedVarint() <= 0 on an int: 0, or the high bit of the low 32 set
                marker = self.uvarint(f"null marker of {name}") & 0xFFFFFFFF
                if marker == 0 or marker >= 1 << 31:
                    return None
            else:
                if self.fixed("int8", f"null marker of {name}") < 0:
                    return None
        outer = self.enter(f)
        item = self.struct(sub, flex)
        self.bounds = outer
        return item

    def primitive(self, t: str, name: str, flex: bool, nullable: bool) -> Any:
        if t in _FIXED:
            return self.fixed(t, name)
        if t == "bool":
            return self.take(1, name)[0] != 0
        if t == "uuid":
            return uuid_to_str(self.take(16, name))
        start = self.pos
        if t == "string":
            n = self.length(flex, False, f"string {name}")
        else:  # bytes, records
            n = self.length(flex, True, f"bytes {name}")
        if n < 0:
            return self.null(name, nullable, start)
        if t == "string" and n > 0x7FFF:
            self.fail(f"string field {name} had invalid length {n}", at=start,
                      kafka=f"string field {json_key(name)} had invalid length {n}")
        raw = self.take(n, name, array=True)
        if t == "string":
            return raw.decode("utf-8", JAVA_UTF8_ERRORS)
        return raw


def decode(name: str, data: bytes, version: int, *, pos: int = 0) -> tuple[dict, int]:
    """Read message ``name`` at ``version`` from ``data[pos:]``; return (value, end position).

    Raises KeyError for an unknown message name, InvalidRecordError for bad bytes. Runs the
    reader compiled for (name, version) and, when it gives up on bad bytes, the table walk
    (:func:`decode_reference`), which raises the located error."""
    if 0 <= pos <= len(data):
        fn = _COMPILED.get((name, version)) or _compiled(name, version)
        try:
            return fn(data, pos, len(data))
        except Exception:  # _GiveUp, struct.error, IndexError: the table walk says what is wrong
            pass
    return decode_reference(name, data, version, pos=pos)


def decode_reference(name: str, data: bytes, version: int, *, pos: int = 0) -> tuple[dict, int]:
    """:func:`decode` by walking the schema tables field by field (no compiled reader): the
    reference the compiled readers are tested against, and what locates the errors."""
    m = MESSAGES[name]
    v = clamp_version(name, version)
    flex = m["flexibleFrom"] is not None and v >= m["flexibleFrom"]
    r = _Reader(data, pos, m["structs"], v, version, m["validVersions"])
    if pos < 0 or pos > len(data):
        raise InvalidRecordError(f"{name}: start position outside the data", position=pos)
    return r.struct(m["fields"], flex), r.pos


# ---------------------------------------------------------------- writing


def _uvarint(n: int) -> bytes:
    """Kafka's unsigned varint, at most 32 bits (what its readers accept)."""
    if n > 0xFFFFFFFF:
        raise ValueError(f"uvarint out of range: {n}")
    return encode_uvarint(n)  # (raises ValueError for a negative n)


class _Writer:
    __slots__ = ("structs", "v")

    def __init__(self, structs: dict, v: int) -> None:
        self.structs = structs
        self.v = v

    def length(self, out: bytearray, n: int, flex: bool, wide: bool) -> None:
        if flex:
            out += _uvarint(n + 1)
        elif wide:
            out += _INT32.pack(n)
        else:
            out += _INT16.pack(n)

    def struct(self, out: bytearray, fields: tuple, value: dict, flex: bool) -> None:
        v = self.v
        tags: list[tuple[int, bytes]] = []
        for f in fields:
            if not _in(f[_VERSIONS], v):
                continue
            name = f[_NAME]
            item = value[name] if name in value else default_value(f, self.structs)
            nullable = _in(f[_NULLABLE], v)
            if flex and _in(f[_TAGGED], v):
                if item == default_value(f, self.structs) and (
                    item is not None or f[_DEFAULT] == "null"
                ):
                    continue
                payload = bytearray()
                self.value(payload, f, item, True, nullable, tagged=True)
                tags.append((f[_TAG], bytes(payload)))
                continue
            self.value(out, f, item, flex, nullable)
        unknown = value.get(UNKNOWN_TAGS) or []
        if not flex:
            if unknown:
                raise ValueError("tagged fields in a non-flexible version")
            return
        tags.extend((int(t), bytes(b)) for t, b in unknown)
        tags.sort(key=lambda tb: tb[0])
        out += _uvarint(len(tags))
        for tag, payload in tags:
            out += _uvarint(tag)
            out += _uvarint(len(payload))
            out += payload

    def value(self, out: bytearray, f: tuple, item: Any, flex: bool, nullable: bool,
              *, tagged: bool = False) -> None:
        t = f[_TYPE]
        name = f[_NAME]
        if t.startswith("[]"):
            if item is None:
                if not nullable:
                    raise ValueError(f"non-nullable field {name} is null")
                self.length(out, -1, flex, True)
                return
            self.length(out, len(item), flex, True)
            et = t[2:]
            if et in _PRIMITIVES:
                for x in item:
                    self.primitive(out, et, name, x, flex, False)
            else:
                sub = _struct_fields(f, self.structs)
                for x in item:
                    self.struct(out, sub, x, flex)
            return
        if t in _PRIMITIVES:
            self.primitive(out, t, name, item, flex, nullable)
            return
        sub = _struct_fields(f, self.structs)
        if nullable:
            if tagged:
                out += b"\x00" if item is None else b"\x01"
            else:
                out += b"\xff" if item is None else b"\x01"
            if item is None:
                return
        elif item is None:
            raise ValueError(f"non-nullable field {name} is null")
        self.struct(out, sub, item, flex)

    def primitive(self, out: bytearray, t: str, name: str, item: Any, flex: bool,
                  nullable: bool) -> None:
        if t in _FIXED:
            try:
                out += _FIXED[t].pack(item)
            except _struct.error as e:
                raise ValueError(f"field {name}: {e}") from None
            return
        if t == "bool":
            out += b"\x01" if item else b"\x00"
            return
        if t == "uuid":
            out += uuid_from_str(item)
            return
        wide = t != "string"
        if item is None:
            if not nullable:
                raise ValueError(f"non-nullable field {name} is null")
            self.length(out, -1, flex, wide)
            return
        raw = item.encode("utf-8") if t == "string" else bytes(item)
        if t == "string" and len(raw) > 0x7FFF:
            raise ValueError(f"'{name}' field is too long to be serialized")
        self.length(out, len(raw), flex, wide)
        out += raw


def encode(name: str, value: dict, version: int) -> bytes:
    """Write message ``name`` at ``version``; a field missing from ``value`` is its default,
    a field absent at the version is not written."""
    m = MESSAGES[name]
    v = clamp_version(name, version)
    flex = m["flexibleFrom"] is not None and v >= m["flexibleFrom"]
    out = bytearray()
    _Writer(m["structs"], v).struct(out, m["fields"], value, flex)
    return bytes(out)


# ---------------------------------------------------------------- JSON (Kafka's JsonConverter)


def _all_fields(fields: tuple):
    for f in fields:
        yield f
        if f[_FIELDS] is not None:
            yield from _all_fields(f[_FIELDS])


def json_key(field_name: str) -> str:
    """Kafka's ``lowerCaseFirst``: only the first letter lower-cased."""
    return field_name[:1].lower() + field_name[1:]


def _json_shown(f: tuple, item: Any, structs: dict) -> bool:
    """Whether JsonConverter writes a tagged field (internal-schemas.md §5)."""
    if f[_DEFAULT] == "null":
        return item is not None
    t = f[_TYPE]
    if t.startswith("[]") or t in ("bytes", "records"):
        return item is None or len(item) > 0
    return item != default_value(f, structs)


def _json_value(f: tuple, item: Any, structs: dict, v: int) -> Any:
    if item is None:
        return None
    t = f[_TYPE]
    if t.startswith("[]"):
        et = t[2:]
        if et in _PRIMITIVES:
            if et in ("bytes", "records"):
                return [base64.b64encode(x).decode("ascii") for x in item]
            return list(item)
        sub = _struct_fields(f, structs)
        return [_json_struct(sub, x, structs, v) for x in item]
    if t in ("bytes", "records"):
        return base64.b64encode(item).decode("ascii")  # Jackson: standard alphabet, padded
    if t in _PRIMITIVES:
        if t == "float64" and not _math.isfinite(item):
            return java_double(item)  # Jackson (QUOTE_NON_NUMERIC_NUMBERS): "NaN", "Infinity"
        return item
    return _json_struct(_struct_fields(f, structs), item, structs, v)


def _json_struct(fields: tuple, value: dict, structs: dict, v: int) -> dict:
    out: dict = {}
    for f in fields:
        if not _in(f[_VERSIONS], v):
            continue
        item = value[f[_NAME]] if f[_NAME] in value else default_value(f, structs)
        if _in(f[_TAGGED], v) and not _json_shown(f, item, structs):
            continue
        out[json_key(f[_NAME])] = _json_value(f, item, structs, v)
    return out


_FLOAT_MESSAGES = frozenset(
    name for name, m in MESSAGES.items()
    if any(f[_TYPE] in ("float64", "[]float64")
           for fields in (m["fields"], *m["structs"].values()) for f in _all_fields(fields))
)


def has_float64(name: str) -> bool:
    """Whether message ``name`` has a float64 field anywhere (its JSON text needs
    ``dumps(tree, floats=True)``)."""
    return name in _FLOAT_MESSAGES


def to_json(name: str, value: dict, version: int) -> dict:
    """The JSON tree Kafka's generated ``<Name>JsonConverter.write(value, version)`` makes
    (internal-schemas.md §5): keys lowerCaseFirst in schema order, fields absent at the
    version omitted, tagged fields only when not their default, bytes as padded standard
    base64, uuids as base64url; unknown tagged fields are not printed. A float64 is a Python
    float, or the string ``"NaN"``/``"Infinity"``/``"-Infinity"`` as Jackson writes a
    non-finite double. :func:`dumps` gives the text Jackson writes for the tree."""
    fn = _COMPILED_JSON.get((name, version)) or _compiled_json(name, version)
    return fn(value)


def to_json_reference(name: str, value: dict, version: int) -> dict:
    """:func:`to_json` by walking the schema tables (the reference its compiled builders are
    tested against)."""
    m = MESSAGES[name]
    return _json_struct(m["fields"], value, m["structs"], clamp_version(name, version))


# ---------------------------------------------------------------- JSON text (Jackson's)


def java_double(x: float) -> str:
    """``Double.toString(x)``, the text Jackson writes for a double (``NumberOutput``).

    The shortest decimal that reads back as ``x`` (JDK 19+ specifies exactly that, Raffaello
    Giulietti's algorithm; when one digit is enough, the closest of the one- and two-digit
    decimals), printed as ``ddd.ddd`` when 10^-3 <= |x| < 10^7 and as ``d.dddE<n>``
    otherwise, always with a digit after the point: ``100.0``, ``0.001``, ``1.0E7``,
    ``1.0E-4``, ``-0.0``, ``4.9E-324``; ``NaN``, ``Infinity``, ``-Infinity``.
    Checked equal to JDK 25's output on 300,000 random and boundary doubles. JDK 17 and
    older (the FloatingDecimal algorithm) print some integral doubles of 2^53 and more with
    extra digits (``1.152921504606847E18`` is ``1.15292150460684698E18`` there): about 0.1%
    of random bit patterns, none of them non-integral in the same check."""
    if x != x:
        return "NaN"
    if x in (_math.inf, -_math.inf):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0.0:
        return "-0.0" if _math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp = repr(abs(x)).partition("e")  # repr: the shortest round-trip digits
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    stripped = digits.lstrip("0")
    # x = 0.<stripped> * 10^point  ->  <d>.<ddd> * 10^e
    e = len(whole) - (len(digits) - len(stripped)) - 1 + (int(exp) if exp else 0)
    digits = stripped.rstrip("0") or "0"
    if len(digits) == 1:
        # JDK 19+: with one digit enough, a two-digit decimal closer to x wins (subnormals only)
        exact = _Decimal(abs(x))
        two = _Decimal(f"{exact:.1e}")
        if float(two) == abs(x) and abs(two - exact) < abs(_Decimal(f"{digits}e{e}") - exact):
            digits, e = f"{two:.1e}".replace(".", "").split("e")[0].rstrip("0") or "0", int(f"{two:.1e}".split("e")[1])
    if -3 <= e < 7:
        if e >= 0:
            head = digits[: e + 1].ljust(e + 1, "0")
            return f"{sign}{head}.{digits[e + 1:] or '0'}"
        return f"{sign}0.{'0' * (-e - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{e}"


_ENCODE = _json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
try:  # the C encoder made once (json.dumps makes a new encoder per call)
    _C_ENCODE = _json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, None, _json.encoder.encode_basestring, None, ":", ",", False, False, True)
except (AttributeError, TypeError):  # pragma: no cover - a Python without the C accelerator
    _C_ENCODE = None
_ESCAPED = _re.compile(r"\\\\|\\u00[01][0-9a-f]")


def _upper_escape(m: "_re.Match[str]") -> str:
    s = m.group(0)
    return s if s == "\\\\" else s.upper().replace("\\U", "\\u")


def _jackson(o: Any, out: list) -> None:
    if isinstance(o, dict):
        out.append("{")
        first = True
        for k, v in o.items():
            if not first:
                out.append(",")
            first = False
            out.append(_ENCODE(k))
            out.append(":")
            _jackson(v, out)
        out.append("}")
    elif isinstance(o, list):
        out.append("[")
        for i, v in enumerate(o):
            if i:
                out.append(",")
            _jackson(v, out)
        out.append("]")
    elif isinstance(o, float):
        text = java_double(o)
        out.append(text if _math.isfinite(o) else f'"{text}"')
    else:
        out.append(_ENCODE(o))


def dumps(tree: Any, *, floats: bool = True) -> str:
    """The compact text Jackson writes for a JSON tree (``JsonNode.toString()``, what
    kafka-dump-log prints): no spaces, non-ASCII as is, control characters escaped with
    upper-case hex (``\\u001F``), doubles as :func:`java_double` (non-finite ones quoted).
    ``floats=False`` promises the tree holds no float (faster: one ``json`` call)."""
    if floats:
        out: list = []
        _jackson(tree, out)
        text = "".join(out)
    elif _C_ENCODE is not None and isinstance(tree, dict):
        try:
            text = "".join(_C_ENCODE(tree, 0))
        except TypeError:  # a value json cannot encode: the encoder's own error
            text = _ENCODE(tree)
    else:
        text = _ENCODE(tree)
    if "\\u00" in text:  # Python escapes control characters with lower-case hex
        text = _ESCAPED.sub(_upper_escape, text)
    return text


# ---------------------------------------------------------------- compiled readers (the fast path)
#
# decode() first runs a reader generated once per (message, version) as Python source: the
# same walk as _Reader, unrolled for that version (runs of fixed-width fields in one unpack,
# tagged defaults as locals, the result built as one dict display). It only handles
# well-formed bytes: at the first doubt (any check that fails, any exception) it gives up and
# _Reader reads the bytes again, which raises the located error with Kafka's cause. The two
# must agree on every input (tests/test_message_codec.py and tests/test_topics_metadata.py
# compare them on random and corrupted messages).


class _GiveUp(Exception):
    """The compiled reader met bytes it does not handle: let _Reader decide."""


_FIXED_CODES = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "uint32": "I",
                "float64": "d"}
_FIXED_SIZES = {k: _struct.calcsize(">" + c) for k, c in _FIXED_CODES.items()}
_UUIDS: dict = {}


def _uv(data: Any, pos: int) -> tuple[int, int]:
    """_Reader.uvarint without its messages (a bad varint gives up)."""
    value = 0
    shift = 0
    while True:
        b = data[pos]  # IndexError past the end: gives up
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise _GiveUp


def _uuid(raw: bytes) -> str:
    text = _UUIDS.get(raw)
    if text is None:
        if len(_UUIDS) >= 4096:
            _UUIDS.clear()
        text = _UUIDS[raw] = uuid_to_str(raw)
    return text


class _Gen:
    """Python source of the readers of one message at one version."""

    def __init__(self, structs: dict, v: int) -> None:
        self.structs = structs
        self.v = v
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {}
        self.funcs: dict[tuple[int, bool], str] = {}
        self.n = 0

    def tmp(self) -> str:
        self.n += 1
        return f"t{self.n}"

    def const(self, value: Any) -> str:
        name = f"C{len(self.consts)}"
        self.consts[name] = value
        return name

    def length(self, out: list, ind: str, var: str, flex: bool, wide: bool) -> None:
        """var = a length or count (-1 for null)."""
        if flex:
            out.append(f"{ind}{var} = data[pos]")
            out.append(f"{ind}if {var} < 128:")
            out.append(f"{ind}    pos += 1")
            out.append(f"{ind}else:")
            out.append(f"{ind}    {var}, pos = _uv(data, pos)")
            out.append(f"{ind}    if {var} > 0x7FFFFFFF:")  # Java int arithmetic: the table walk
            out.append(f"{ind}        raise _GiveUp")
            out.append(f"{ind}{var} -= 1")
        else:
            code = "i" if wide else "h"
            size = 4 if wide else 2
            out.append(f"{ind}{var} = _unpack('>{code}', data, pos)[0]")
            out.append(f"{ind}pos += {size}")
            out.append(f"{ind}if {var} < 0:")
            out.append(f"{ind}    {var} = -1")

    def primitive(self, out: list, ind: str, var: str, t: str, flex: bool, nullable: bool) -> None:
        if t in _FIXED_CODES:
            out.append(f"{ind}{var} = _unpack('>{_FIXED_CODES[t]}', data, pos)[0]")
            out.append(f"{ind}pos += {_FIXED_SIZES[t]}")
            return
        if t == "bool":
            out.append(f"{ind}{var} = data[pos] != 0")
            out.append(f"{ind}pos += 1")
            return
        if t == "uuid":
            out.append(f"{ind}if end - pos < 16:")
            out.append(f"{ind}    raise _GiveUp")
            out.append(f"{ind}{var} = _uuid(bytes(data[pos:pos + 16]))")
            out.append(f"{ind}pos += 16")
            return
        n = self.tmp()
        self.length(out, ind, n, flex, t != "string")
        out.append(f"{ind}if {n} < 0:")
        if nullable:
            out.append(f"{ind}    {var} = None")
        else:
            out.append(f"{ind}    raise _GiveUp")
        out.append(f"{ind}else:")
        limit = " or " + n + " > 32767" if t == "string" else ""
        out.append(f"{ind}    if {n} > end - pos{limit}:")
        out.append(f"{ind}        raise _GiveUp")
        if t == "string":
            out.append(f"{ind}    {var} = str(data[pos:pos + {n}], 'utf-8', {JAVA_UTF8_ERRORS!r})")
        else:
            out.append(f"{ind}    {var} = bytes(data[pos:pos + {n}])")
        out.append(f"{ind}    pos += {n}")

    def value(self, out: list, ind: str, var: str, f: tuple, flex: bool, nullable: bool, tagged: bool) -> None:
        t = f[_TYPE]
        if t.startswith("[]"):
            n = self.tmp()
            self.length(out, ind, n, flex, True)
            out.append(f"{ind}if {n} < 0:")
            out.append(f"{ind}    {var} = None" if nullable else f"{ind}    raise _GiveUp")
            out.append(f"{ind}else:")
            out.append(f"{ind}    if {n} > end - pos:")
            out.append(f"{ind}        raise _GiveUp")
            et = t[2:]
            inner = ind + "    "
            if et in _FIXED_CODES:
                out.append(f"{inner}{var} = list(_unpack('>%d{_FIXED_CODES[et]}' % {n}, data, pos))")
                out.append(f"{inner}pos += {_FIXED_SIZES[et]} * {n}")
                return
            item = self.tmp()
            out.append(f"{inner}{var} = []")
            out.append(f"{inner}for _ in range({n}):")
            if et in _PRIMITIVES:
                self.primitive(out, inner + "    ", item, et, flex, False)
            else:
                fn = self.struct_func(_struct_fields(f, self.structs), flex)
                out.append(f"{inner}    {item}, pos = {fn}(data, pos, end)")
            out.append(f"{inner}    {var}.append({item})")
            return
        if t in _PRIMITIVES:
            self.primitive(out, ind, var, t, flex, nullable)
            return
        fn = self.struct_func(_struct_fields(f, self.structs), flex)
        if nullable:
            m = self.tmp()
            if tagged:
                out.append(f"{ind}{m} = data[pos]")
                out.append(f"{ind}if {m} < 128:")
                out.append(f"{ind}    pos += 1")
                out.append(f"{ind}else:")
                out.append(f"{ind}    {m}, pos = _uv(data, pos)")
                out.append(f"{ind}    if {m} > 0x7FFFFFFF:")
                out.append(f"{ind}        raise _GiveUp")
                out.append(f"{ind}if {m} == 0:")
            else:
                out.append(f"{ind}{m} = _unpack('>b', data, pos)[0]")
                out.append(f"{ind}pos += 1")
                out.append(f"{ind}if {m} < 0:")
            out.append(f"{ind}    {var} = None")
            out.append(f"{ind}else:")
            out.append(f"{ind}    {var}, pos = {fn}(data, pos, end)")
            return
        out.append(f"{ind}{var}, pos = {fn}(data, pos, end)")

    def default_expr(self, f: tuple) -> str:
        d = default_value(f, self.structs)
        if isinstance(d, list):
            return "[]"
        if isinstance(d, dict):
            return f"_default({self.const(f)}, _STRUCTS)"
        return repr(d) if isinstance(d, (int, float, str, bool, bytes, type(None))) and not (
            isinstance(d, float) and not _math.isfinite(d)) else self.const(d)

    def struct_func(self, fields: tuple, flex: bool) -> str:
        key = (id(fields), flex)
        if key in self.funcs:
            return self.funcs[key]
        fn = f"_s{len(self.funcs)}"
        self.funcs[key] = fn
        v = self.v
        out = [f"def {fn}(data, pos, end):"]
        names: list[str] = []
        tagged: list[tuple[tuple, str]] = []
        run: list[tuple[str, str]] = []  # consecutive fixed-width reads: one unpack

        def flush() -> None:
            if not run:
                return
            fmt = ">" + "".join(_FIXED_CODES[t] for _, t in run)
            size = _struct.calcsize(fmt)
            targets = ", ".join(var for var, _ in run) + ("," if len(run) == 1 else "")
            out.append(f"    {targets} = _unpack('{fmt}', data, pos)")
            out.append(f"    pos += {size}")
            run.clear()

        for i, f in enumerate(fields):
            var = f"f{i}"
            names.append(var)
            is_tag = f[_TAG] is not None and flex and _in(f[_TAGGED], v)
            if f[_TAG] is not None:
                tagged.append((f, var))
            if not _in(f[_VERSIONS], v) or is_tag:
                flush()
                out.append(f"    {var} = {self.default_expr(f)}")
                continue
            if f[_TYPE] in _FIXED_CODES:
                run.append((var, f[_TYPE]))
                continue
            flush()
            self.value(out, "    ", var, f, flex, _in(f[_NULLABLE], v), False)
        flush()
        unknown = False
        if flex:
            unknown = True
            out.append("    unknown = None")
            out.append("    nt = data[pos]")
            out.append("    if nt < 128:")
            out.append("        pos += 1")
            out.append("    else:")
            out.append("        nt, pos = _uv(data, pos)")
            out.append("    if nt > end - pos:")
            out.append("        raise _GiveUp")
            out.append("    for _ in range(nt):")
            out.append("        tag, pos = _uv(data, pos)")
            out.append("        if tag > 0x7FFFFFFF:")  # a negative Java int: the table walk decides
            out.append("            raise _GiveUp")
            out.append("        size, pos = _uv(data, pos)")
            out.append("        if size > end - pos:")
            out.append("            raise _GiveUp")
            out.append("        tend = pos + size")
            word = "if"
            for f, var in tagged:
                out.append(f"        {word} tag == {f[_TAG]}:")
                word = "elif"
                if not _in(f[_TAGGED], v):
                    out.append("            raise _GiveUp")
                    continue
                out.append("            oend = end")
                out.append("            end = tend")
                self.value(out, "            ", var, f, True, _in(f[_NULLABLE], v), True)
                out.append("            end = oend")
                out.append("            if pos != tend:")
                out.append("                raise _GiveUp")
            if tagged:
                out.append("        else:")
                out.append("            if unknown is None:")
                out.append("                unknown = []")
                out.append("            unknown.append((tag, bytes(data[pos:tend])))")
                out.append("            pos = tend")
            else:
                out.append("        if unknown is None:")
                out.append("            unknown = []")
                out.append("        unknown.append((tag, bytes(data[pos:tend])))")
                out.append("        pos = tend")
        items = ", ".join(f"{f[_NAME]!r}: {var}" for f, var in zip(fields, names))
        out.append(f"    out = {{{items}}}")
        if unknown:
            out.append("    if unknown:")
            out.append(f"        out[{UNKNOWN_TAGS!r}] = unknown")
        out.append("    return out, pos")
        self.lines.extend(out)
        self.lines.append("")
        return fn


_COMPILED: dict[tuple[str, int], Any] = {}


_CACHE_LIMIT = 4096  # (name, version) keys remembered; versions come from the data, so bounded


def _remember(cache: dict, key: tuple, fn: Any) -> Any:
    if len(cache) < _CACHE_LIMIT:
        cache[key] = fn
    return fn


def _give_up(data: Any, pos: int, end: int) -> Any:
    raise _GiveUp


def _checks_version(fields: tuple, lo: int, hi: int) -> bool:
    """Whether an inline struct under ``fields`` (generated for versions lo..hi) refuses some
    version outside lo..hi (the test of _Reader.enter)."""
    for f in fields:
        if f[_FIELDS] is None:
            continue
        flo, fhi = f[_VERSIONS]
        if fhi > hi or flo < lo or _checks_version(f[_FIELDS], max(lo, flo), min(hi, fhi)):
            return True
    return False


_CHECKS_VERSION = frozenset(name for name, m in MESSAGES.items() if _checks_version(m["fields"], *m["validVersions"]))
"""Messages with inline nested structs, whose generated readers refuse a version outside the
message's range (_Reader.enter): no compiled reader for such versions."""


def _compiled(name: str, version: int) -> Any:
    """The compiled reader of ``name`` at ``version`` (made on first use, once per clamped
    version: a version past the schema shares the newest one's reader)."""
    v = clamp_version(name, version)
    if v != version and name in _CHECKS_VERSION:
        return _remember(_COMPILED, (name, version), _give_up)
    fn = _COMPILED.get((name, v))
    if fn is None:
        m = MESSAGES[name]
        flex = m["flexibleFrom"] is not None and v >= m["flexibleFrom"]
        gen = _Gen(m["structs"], v)
        top = gen.struct_func(m["fields"], flex)
        namespace: dict[str, Any] = {
            "_unpack": _struct.unpack_from, "_uv": _uv, "_uuid": _uuid, "_GiveUp": _GiveUp,
            "_default": default_value, "_STRUCTS": m["structs"], **gen.consts,
        }
        exec(compile("\n".join(gen.lines), f"<kafkatool.record.message reader {name} v{v}>", "exec"), namespace)
        fn = _COMPILED[(name, v)] = namespace[top]
    return _remember(_COMPILED, (name, version), fn)


class _JGen:
    """Python source of the JSON-tree builders (to_json) of one message at one version."""

    def __init__(self, structs: dict, v: int) -> None:
        self.structs = structs
        self.v = v
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {}
        self.funcs: dict[int, str] = {}

    def const(self, value: Any) -> str:
        name = f"C{len(self.consts)}"
        self.consts[name] = value
        return name

    def convert(self, f: tuple, x: str) -> str:
        """The expression of _json_value(f, x) (x a plain name)."""
        t = f[_TYPE]
        if t.startswith("[]"):
            et = t[2:]
            if et in ("bytes", "records"):
                return f"None if {x} is None else [_b64(e).decode('ascii') for e in {x}]"
            if et in _PRIMITIVES:
                return f"None if {x} is None else list({x})"
            fn = self.func(_struct_fields(f, self.structs))
            return f"None if {x} is None else [{fn}(e) for e in {x}]"
        if t in ("bytes", "records"):
            return f"None if {x} is None else _b64({x}).decode('ascii')"
        if t == "float64":
            return f"{x} if {x} is None or _isfinite({x}) else _jd({x})"
        if t in _PRIMITIVES:
            return x
        fn = self.func(_struct_fields(f, self.structs))
        return f"None if {x} is None else {fn}({x})"

    def shown(self, f: tuple, x: str) -> str:
        """The expression of _json_shown(f, x)."""
        if f[_DEFAULT] == "null":
            return f"{x} is not None"
        t = f[_TYPE]
        if t.startswith("[]") or t in ("bytes", "records"):
            return f"{x} is None or len({x}) > 0"
        return f"{x} != {self.const(default_value(f, self.structs))}"

    def func(self, fields: tuple) -> str:
        if id(fields) in self.funcs:
            return self.funcs[id(fields)]
        fn = f"_j{len(self.funcs)}"
        self.funcs[id(fields)] = fn
        v = self.v
        out = [f"def {fn}(value):"]
        display: list[str] = []  # the leading untagged fields: one dict display
        rest: list[str] = []
        for i, f in enumerate(fields):
            if not _in(f[_VERSIONS], v):
                continue
            x = f"x{i}"
            name = f[_NAME]
            out.append(f"    {x} = value[{name!r}] if {name!r} in value else "
                       f"_default({self.const(f)}, _STRUCTS)")
            key = json_key(name)
            if _in(f[_TAGGED], v):
                rest.append(f"    if {self.shown(f, x)}:")
                rest.append(f"        out[{key!r}] = {self.convert(f, x)}")
            elif rest:
                rest.append(f"    out[{key!r}] = {self.convert(f, x)}")
            else:
                display.append(f"{key!r}: {self.convert(f, x)}")
        out.append(f"    out = {{{', '.join(display)}}}")
        out.extend(rest)
        out.append("    return out")
        self.lines.extend(out)
        self.lines.append("")
        return fn


_COMPILED_JSON: dict[tuple[str, int], Any] = {}


def _compiled_json(name: str, version: int) -> Any:
    v = clamp_version(name, version)
    fn = _COMPILED_JSON.get((name, v))
    if fn is None:
        m = MESSAGES[name]
        gen = _JGen(m["structs"], v)
        top = gen.func(m["fields"])
        namespace: dict[str, Any] = {
            "_b64": base64.b64encode, "_isfinite": _math.isfinite, "_jd": java_double,
            "_default": default_value, "_STRUCTS": m["structs"], **gen.consts,
        }
        exec(compile("\n".join(gen.lines), f"<kafkatool.record.message to_json {name} v{v}>", "exec"),
             namespace)
        fn = _COMPILED_JSON[(name, v)] = namespace[top]
    return _remember(_COMPILED_JSON, (name, version), fn)
