"""Bulk encoders for the converter: many records in, one bytes object out (spec §4, §5).

:func:`v2_records` and :func:`legacy_messages` encode a whole batch's records in one call
(the per-record loop is the hot path of ``kafkatool convert``); :func:`v2_batch` and
:func:`legacy_wrapper` frame an already encoded (and possibly compressed) body. The bytes are
exactly those of :func:`kafkatool.record.v2.encode_record` / :func:`~kafkatool.record.v2.encode_batch`
and :func:`kafkatool.record.legacy.encode_message` / :func:`~kafkatool.record.legacy.encode_legacy`.

A record is anything indexable as ``(offset, timestamp, key, value, headers, ...)``: a
:class:`~kafkatool.record.batch.Record` or a :class:`~kafkatool.record.v2.RecordSpec`. The
compiled extension provides the two per-record loops when it is built (the same bytes);
``KAFKATOOL_PURE=1`` keeps them in Python.
"""

from __future__ import annotations

import struct
from typing import Sequence

from kafkatool.errors import InvalidRecordError, KafkaToolError
from kafkatool.record.compression import Codec, decompress
from kafkatool.record.crc import crc32c
from kafkatool.record.layout import CODEC_MASK, LEGACY_TIMESTAMP_TYPE_BIT, LOG_OVERHEAD, V2_CRC_START, V2_HEADER, V2_HEADER_SIZE
from kafkatool.record.legacy import decode_message, encode_message
from kafkatool.record.v2 import encode_record
from kafkatool.record.speedups import functions as _compiled  # the extension, unless not built or switched off

__all__ = [
    "v2_records",
    "legacy_messages",
    "v2_batch",
    "legacy_wrapper",
    "legacy_wrapper_as_v2",
    "py_v2_records",
    "py_legacy_messages",
]

_U32 = struct.Struct(">I")


def py_v2_records(records: Sequence, base_offset: int, base_timestamp: int, *, headers: bool = True) -> bytes:
    """Pure-Python :func:`v2_records` (the reference the compiled version is tested against):
    :func:`kafkatool.record.v2.encode_record` for each record."""
    return b"".join(
        encode_record(r[0] - base_offset, r[1] - base_timestamp, r[2], r[3], r[4] if headers else ())
        for r in records
    )


def py_legacy_messages(
    records: Sequence,
    magic: int,
    *,
    relative_to: int | None = None,
    timestamp: int | None = None,
    attributes: int = 0,
) -> bytes:
    """Pure-Python :func:`legacy_messages` (the reference the compiled version is tested against):
    :func:`kafkatool.record.legacy.encode_message` for each record."""
    if magic not in (0, 1):
        raise InvalidRecordError(f"Invalid magic value {magic}")
    rel = relative_to or 0
    return b"".join(
        encode_message(r[0] - rel, magic, r[1] if timestamp is None else timestamp, r[2], r[3], attributes)
        for r in records
    )


def v2_batch(
    body: bytes | memoryview,
    *,
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    attributes: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    count: int,
    magic: int = 2,
) -> bytes:
    """One v2 batch with its log overhead: the 61-byte header, its CRC-32C, then ``body``
    (the records section, already compressed when ``attributes`` names a codec), §4.1."""
    attrs = attributes & 0xFFFF
    if attrs > 0x7FFF:
        attrs -= 0x10000
    header = bytearray(
        V2_HEADER.pack(
            base_offset,
            V2_HEADER_SIZE - LOG_OVERHEAD + len(body),
            partition_leader_epoch,
            magic,
            0,
            attrs,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    crc = crc32c(body, crc32c(memoryview(header)[V2_CRC_START:]))
    _U32.pack_into(header, V2_CRC_START - 4, crc)
    header += body
    return bytes(header)


def legacy_wrapper(inner: bytes | memoryview, *, magic: int, offset: int, timestamp: int, attributes: int) -> bytes:
    """One legacy message whose value is ``inner`` (the compressed inner messages) and whose key
    is null, CRC-32 computed (§5.1, §5.2): :func:`kafkatool.record.legacy.encode_message`'s
    framing. ``timestamp`` is ignored for magic 0."""
    return encode_message(offset, magic, timestamp, None, inner, attributes)


# the compiled loops, or None (both or neither: a stale build lacks them)
_c_v2_records, _c_legacy_messages = _compiled("encode_v2_records", "encode_legacy_messages")


def v2_records(records: Sequence, base_offset: int, base_timestamp: int, *, headers: bool = True) -> bytes:
    """The v2 records section (§4.2) of ``records``, uncompressed: offset deltas from
    ``base_offset``, timestamp deltas from ``base_timestamp``, record attributes 0.
    ``headers=False`` writes every record with no headers (they are dropped)."""
    if _c_v2_records is not None:
        try:
            return _c_v2_records(records, base_offset, base_timestamp, headers)
        except (OverflowError, TypeError):
            pass  # an int past 64 bits, an unusual type: the reference decides (same bytes, or its error)
    return py_v2_records(records, base_offset, base_timestamp, headers=headers)


def legacy_messages(
    records: Sequence,
    magic: int,
    *,
    relative_to: int | None = None,
    timestamp: int | None = None,
    attributes: int = 0,
) -> bytes:
    """One legacy message (magic 0 or 1, with log overhead) per record, each with its CRC-32
    (§5.1). ``relative_to``: offsets written as ``offset - relative_to`` (a v1 wrapper's inner
    messages); None writes them absolute. ``timestamp``: None writes each record's own (v1), an
    int writes that one for all (LogAppendTime); v0 has none. ``attributes`` is every
    message's attributes byte."""
    if _c_legacy_messages is not None and magic in (0, 1):
        try:
            return _c_legacy_messages(records, magic, relative_to, timestamp, attributes & 0xFF)
        except (OverflowError, TypeError):
            pass  # a value out of its field's range, an unusual type: the reference decides
    return py_legacy_messages(records, magic, relative_to=relative_to, timestamp=timestamp, attributes=attributes)


(_c_inner_to_v2,) = _compiled("legacy_inner_to_v2")

#: :func:`legacy_wrapper_as_v2` takes wrappers whose inner messages decompress to at most this
#: many bytes (what legacy.iter_legacy_record_chunks keeps in memory between its passes too).
FAST_WRAPPER_INNER_BYTES = 1 << 20
_FAST_CODECS = (Codec.GZIP, Codec.SNAPPY, Codec.LZ4)


def legacy_wrapper_as_v2(data: bytes | memoryview, *, max_decompressed: int) -> tuple | None:
    """The records of a compressed legacy wrapper (``data``: the whole entry, log overhead
    included) as one v2 records section, without a Python object per record (the compiled
    extension): ``(body, count, base_offset, last_offset, base_timestamp, max_timestamp,
    log_append_time)``, body uncompressed, exactly what
    ``v2_records(records, records[0].offset, records[0].timestamp, headers=False)`` writes for
    the records :func:`kafkatool.record.records.batch_record_chunks` yields, with
    ``log_append_time`` the wrapper's timestamp for a v1 LogAppendTime wrapper, else None.

    None when the extension is not in use, or for anything out of the ordinary (an error of
    any kind, a zstd or unknown codec, inner messages over :data:`FAST_WRAPPER_INNER_BYTES` or
    ``max_decompressed``, an inner CRC that fails, a truncated tail...): the caller then takes
    the general path, which raises or handles it as it always does.
    """
    if _c_inner_to_v2 is None:
        return None
    try:
        offset, _size, _crc, magic, attrs, ts, _key, value, _valid = decode_message(data, 0, len(data))
        codec = attrs & CODEC_MASK
        if codec not in _FAST_CODECS or value is None:
            return None
        inner = decompress(codec, value, magic=magic, max_output=min(max_decompressed, FAST_WRAPPER_INNER_BYTES))
    except (KafkaToolError, struct.error, ValueError):
        return None
    lat = ts if magic == 1 and attrs & LEGACY_TIMESTAMP_TYPE_BIT else None
    r = _c_inner_to_v2(inner, magic, offset, lat)
    return None if r is None else (*r, lat)
