"""Control records (spec §6): transaction markers and KRaft control messages."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

from kafkatool.errors import InvalidRecordError
from kafkatool.record.javautf8 import JAVA_UTF8_ERRORS
from kafkatool.record.varint import decode_uvarint, encode_uvarint

__all__ = [
    "ControlType",
    "control_type_name",
    "decode_control_key",
    "encode_control_key",
    "decode_end_txn_marker",
    "encode_end_txn_marker",
    "decode_kraft_control",
    "encode_snapshot_header",
    "encode_snapshot_footer",
    "encode_kraft_version",
    "encode_voters",
    "encode_leader_change",
    "kafka_uuid_str",
    "kafka_json",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")


class ControlType:
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
    UNKNOWN = -1


_NAMES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}


def control_type_name(type_id: int) -> str:
    """Kafka's enum name; anything unrecognised is ``UNKNOWN``."""
    return _NAMES.get(type_id, "UNKNOWN")


def decode_control_key(key: bytes | None) -> tuple[int, int]:
    """``(version, type_id)`` of a control record key (§6)."""
    if key is None or len(key) < 4:
        n = 0 if key is None else len(key)
        raise InvalidRecordError(
            f"Invalid value size found for end control record key. Must have at least 4 bytes, but found only {n}"
        )
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        raise InvalidRecordError(f"Invalid version found for control record: {version}. May indicate data corruption")
    return version, type_id


def encode_control_key(type_id: int, version: int = 0) -> bytes:
    return _KEY.pack(version, type_id)


def decode_end_txn_marker(value: bytes | None) -> tuple[int, int]:
    """``(version, coordinator_epoch)`` of an ABORT/COMMIT marker value (§6)."""
    n = 0 if value is None else len(value)
    if value is None or n < 6:
        raise InvalidRecordError(
            f"Invalid value size found for end transaction marker. Must have at least 6 bytes, but found only {n}"
        )
    version, epoch = _MARKER.unpack_from(value, 0)
    if version < 0:
        raise InvalidRecordError(f"Invalid version found for end transaction marker: {version}. May indicate data corruption")
    return version, epoch


def encode_end_txn_marker(coordinator_epoch: int, version: int = 0) -> bytes:
    return _MARKER.pack(version, coordinator_epoch)


def kafka_uuid_str(raw: bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def kafka_json(obj: Any) -> str:
    """Compact JSON as Kafka's generated JsonConverters print it (no spaces, schema order)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


class _Reader:
    """A tiny reader for flexible (compact) protocol messages."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise InvalidRecordError(f"message truncated: needed {n} bytes at byte {self.pos} of {len(self.buf)}")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def uint16(self) -> int:
        return _U16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        v, self.pos = decode_uvarint(self.buf, self.pos)
        return v

    def uuid(self) -> str:
        return kafka_uuid_str(self._take(16))

    def compact_string(self) -> str | None:
        n = self.uvarint()
        if n == 0:
            return None
        return self._take(n - 1).decode("utf-8", JAVA_UTF8_ERRORS)

    def compact_array_len(self) -> int:
        n = self.uvarint()
        return -1 if n == 0 else n - 1

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


def _decode_snapshot_header(r: _Reader) -> dict:
    d = {"version": r.int16(), "lastContainedLogTimestamp": r.int64()}
    r.tagged_fields()
    return d


def _decode_snapshot_footer(r: _Reader) -> dict:
    d = {"version": r.int16()}
    r.tagged_fields()
    return d


def _decode_kraft_version(r: _Reader) -> dict:
    d = {"version": r.int16(), "kRaftVersion": r.int16()}
    r.tagged_fields()
    return d


def _decode_voters(r: _Reader) -> dict:
    version = r.int16()
    voters = []
    for _ in range(max(r.compact_array_len(), 0)):
        voter_id = r.int32()
        dir_id = r.uuid()
        endpoints = []
        for _e in range(max(r.compact_array_len(), 0)):
            name = r.compact_string()
            host = r.compact_string()
            port = r.uint16()
            r.tagged_fields()
            endpoints.append({"name": name, "host": host, "port": port})
        feature = {"minSupportedVersion": r.int16(), "maxSupportedVersion": r.int16()}
        r.tagged_fields()
        r.tagged_fields()
        voters.append(
            {"voterId": voter_id, "voterDirectoryId": dir_id, "endpoints": endpoints, "kRaftVersionFeature": feature}
        )
    r.tagged_fields()
    return {"version": version, "voters": voters}


_KRAFT_DECODERS = {
    ControlType.SNAPSHOT_HEADER: ("SnapshotHeader", _decode_snapshot_header),
    ControlType.SNAPSHOT_FOOTER: ("SnapshotFooter", _decode_snapshot_footer),
    ControlType.KRAFT_VERSION: ("KRaftVersion", _decode_kraft_version),
    ControlType.KRAFT_VOTERS: ("KRaftVoters", _decode_voters),
}


def decode_kraft_control(type_id: int, value: bytes | None) -> tuple[str, dict] | None:
    """Decode a KRaft control value: ``(label, fields)`` as DumpLogSegments names it, or None.

    Returns None for types DumpLogSegments does not decode (LEADER_CHANGE, unknown).
    """
    entry = _KRAFT_DECODERS.get(type_id)
    if entry is None:
        return None
    if value is None:
        raise InvalidRecordError(f"{control_type_name(type_id)} control record has a null value")
    label, fn = entry
    return label, fn(_Reader(bytes(value)))


# --------------------------------------------------------------------------- encoders


def _compact_string(s: str) -> bytes:
    b = s.encode("utf-8")
    return encode_uvarint(len(b) + 1) + b


def encode_snapshot_header(last_contained_log_timestamp: int, version: int = 0) -> bytes:
    return _I16.pack(version) + _I64.pack(last_contained_log_timestamp) + b"\x00"


def encode_snapshot_footer(version: int = 0) -> bytes:
    return _I16.pack(version) + b"\x00"


def encode_kraft_version(kraft_version: int, version: int = 0) -> bytes:
    return _I16.pack(version) + _I16.pack(kraft_version) + b"\x00"


def encode_voters(voters: list[dict], version: int = 0) -> bytes:
    """Encode a VotersRecord; each voter: voterId, voterDirectoryId (16 raw bytes), endpoints, min, max."""
    out = bytearray(_I16.pack(version))
    out += encode_uvarint(len(voters) + 1)
    for v in voters:
        out += _I32.pack(v["voterId"]) + bytes(v["voterDirectoryId"])
        out += encode_uvarint(len(v["endpoints"]) + 1)
        for ep in v["endpoints"]:
            out += _compact_string(ep["name"]) + _compact_string(ep["host"]) + _U16.pack(ep["port"]) + b"\x00"
        out += _I16.pack(v.get("minSupportedVersion", 0)) + _I16.pack(v.get("maxSupportedVersion", 1)) + b"\x00"
        out += b"\x00"
    out += b"\x00"
    return bytes(out)


def encode_leader_change(leader_id: int, voters: list[int], version: int = 0) -> bytes:
    """Encode a LeaderChangeMessage v0 (voters and granting voters are the same list)."""
    out = bytearray(_I16.pack(version) + _I32.pack(leader_id))
    for _ in range(2):
        out += encode_uvarint(len(voters) + 1)
        for v in voters:
            out += _I32.pack(v) + b"\x00"
    out += b"\x00"
    return bytes(out)
