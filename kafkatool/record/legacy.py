"""Message formats v0 and v1 (spec §5, ``LegacyRecord``/``AbstractLegacyRecordBatch``)."""

from __future__ import annotations

import struct
from typing import Iterable

from kafkatool.errors import CompressionError, CorruptRecordError, InvalidRecordError
from kafkatool.record.batch import (
    LOG_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    Batch,
    Record,
)
from kafkatool.record.compression import DEFAULT_MAX_DECOMPRESSED, Codec, compress, decompress
from kafkatool.record.crc import crc32
from kafkatool.record.v2 import RecordSpec

__all__ = [
    "decode_legacy_header",
    "decode_message",
    "iter_legacy_records",
    "encode_message",
    "encode_legacy",
]

#: Log overhead + message prefix common to v0 and v1 (§3, §5.1):
PREFIX = struct.Struct(
    ">q"  # offset (the last inner offset for a wrapper)
    "i"  # size
    "I"  # crc (CRC-32 from magic to end of value)
    "b"  # magic
    "b"  # attributes
)
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


def _check_magic(magic: int, position: int) -> None:
    if magic not in (0, 1):
        raise InvalidRecordError(f"Invalid magic used in LegacyRecord: {magic}", position=position + 16)


def decode_legacy_header(buf: bytes | memoryview, pos: int = 0, position: int = 0) -> Batch:
    """Decode a legacy shallow entry at ``buf[pos:]`` into a :class:`Batch` with Kafka's fixed values (§5.2).

    The whole entry must be in ``buf``. The CRC computed is the outer CRC-32.
    """
    offset, size, crc, magic, attrs = PREFIX.unpack_from(buf, pos)
    _check_magic(magic, 0)
    minimum = RECORD_OVERHEAD_V1 if magic == 1 else RECORD_OVERHEAD_V0
    if size < minimum:
        raise CorruptRecordError(
            f"Record is corrupt (size {size} is smaller than the magic v{magic} message overhead {minimum})",
            position=8,
        )
    if magic == 1:
        (ts,) = _I64.unpack_from(buf, pos + 18)
    else:
        ts = -1
    computed = crc32(memoryview(buf)[pos + 16 : pos + LOG_OVERHEAD + size])
    return Batch(position, size + LOG_OVERHEAD, offset, magic, crc, attrs & 0xFF, 0, ts, ts, -1, -1, -1, None, -1, computed)


def decode_message(buf: bytes | memoryview, pos: int, end: int):
    """Decode one legacy message with its log overhead at ``buf[pos:end]``.

    Returns ``(offset, size, crc, magic, attributes, timestamp, key, value, crc_valid)``.
    """
    offset, size, crc, magic, attrs = PREFIX.unpack_from(buf, pos)
    _check_magic(magic, pos)
    msg_end = pos + LOG_OVERHEAD + size
    if msg_end > end:
        raise CorruptRecordError("Unexpected EOF while reading a legacy message", position=pos)
    i = pos + 18
    if magic == 1:
        (ts,) = _I64.unpack_from(buf, i)
        i += 8
    else:
        ts = -1
    try:
        if i + 4 > msg_end:
            raise IndexError
        (kl,) = _I32.unpack_from(buf, i)
        i += 4
        if kl < 0:
            key = None
        else:
            if i + kl > msg_end:
                raise IndexError
            key = bytes(buf[i : i + kl])
            i += kl
        if i + 4 > msg_end:
            raise IndexError
        (vl,) = _I32.unpack_from(buf, i)
        i += 4
        if vl < 0:
            value = None
        else:
            if i + vl > msg_end:
                raise IndexError
            value = bytes(buf[i : i + vl])
            i += vl
    except (IndexError, struct.error):
        raise InvalidRecordError("Found invalid record structure (key or value runs past the message end)", position=pos) from None
    computed = crc32(memoryview(buf)[pos + 16 : msg_end])
    return offset, size, crc, magic, attrs & 0xFF, ts, key, value, computed == crc


def iter_legacy_records(
    batch: Batch, data: bytes | memoryview, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> list[Record]:
    """Deep iteration of a legacy shallow entry (§5.2): the message itself, or a wrapper's inner messages.

    ``data`` holds the whole entry including its 12-byte overhead. Error positions are
    relative to the entry start; inner errors name their decompressed offset.
    """
    offset, size, crc, magic, attrs, ts, key, value, valid = decode_message(data, 0, batch.size)
    codec = attrs & 0x07
    if codec == Codec.NONE:
        return [Record(offset, ts, key, value, (), -1, attrs, crc, valid, magic)]
    if codec == Codec.ZSTD:
        # Kafka's message prints the magic, not the codec (§5.2 step 2).
        raise InvalidRecordError(f"Invalid wrapper compressionType found in legacy deep record iterator {magic}", position=0)
    if codec > 4:
        raise InvalidRecordError(f"Unknown compression type id: {codec}", position=17)
    if value is None:
        raise InvalidRecordError(f"Found invalid compressed record set with null value (magic = {magic})", position=0)
    value_start = batch.size - len(value)
    try:
        inner = decompress(codec, value, magic=magic, max_output=max_decompressed)
    except CompressionError as e:
        raise type(e)(e.message, position=value_start) from None
    entries = []
    pos = 0
    end = len(inner)
    while end - pos >= LOG_OVERHEAD:
        (isize,) = _I32.unpack_from(inner, pos + 8)
        if isize < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"Record size is less than the minimum record overhead (14) (inner message at byte {pos} of the decompressed wrapper)",
                position=value_start,
            )
        if pos + LOG_OVERHEAD + isize > end:
            break  # a truncated trailing inner entry is silently dropped
        try:
            entries.append(decode_message(inner, pos, end))
        except (InvalidRecordError, CorruptRecordError) as e:
            raise type(e)(f"{e.message} (inner message at byte {e.position} of the decompressed wrapper)", position=value_start) from None
        pos += LOG_OVERHEAD + isize
    if not entries:
        raise InvalidRecordError("Found invalid compressed record set with no inner records", position=value_start)
    wrapper_lat = magic == 1 and bool(attrs & 0x08)
    if magic == 1:
        last_rel = entries[-1][0]
        if offset == 0:
            base = 0
        else:
            if offset < last_rel:
                raise InvalidRecordError(
                    f"Found invalid wrapper offset in compressed v1 message set, wrapper offset '{offset}' is less than the last inner message offset '{last_rel}' and it is not zero.",
                    position=0,
                )
            base = offset - last_rel
    out = []
    for ioff, isize, icrc, imagic, iattrs, its, ikey, ivalue, ivalid in entries:
        if iattrs & 0x07:
            raise InvalidRecordError("Inner messages must not be compressed", position=value_start)
        abs_off = base + ioff if magic == 1 else ioff
        if imagic == 0:
            rts = -1
        elif wrapper_lat:
            rts = ts
        else:
            rts = its
        out.append(Record(abs_off, rts, ikey, ivalue, (), -1, iattrs, icrc, ivalid, imagic))
    return out


# --------------------------------------------------------------------------- encoding


def encode_message(
    offset: int,
    magic: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    attributes: int = 0,
) -> bytes:
    """Encode one legacy message with its 12-byte log overhead (§5.1)."""
    if magic not in (0, 1):
        raise InvalidRecordError(f"Invalid magic value {magic}")
    body = bytearray()
    body.append(magic)
    body.append(attributes & 0xFF)
    if magic == 1:
        body += _I64.pack(timestamp)
    if key is None:
        body += _I32.pack(-1)
    else:
        body += _I32.pack(len(key)) + key
    if value is None:
        body += _I32.pack(-1)
    else:
        body += _I32.pack(len(value)) + value
    crc = crc32(body)
    return _I64.pack(offset) + _I32.pack(len(body) + 4) + _U32.pack(crc) + bytes(body)


def encode_legacy(
    records: Iterable[RecordSpec],
    *,
    magic: int,
    codec: int = Codec.NONE,
    log_append_time: int | None = None,
    level: int | None = None,
) -> bytes:
    """Encode records as legacy entries: one message each, or one compressed wrapper.

    Wrapper rules (§5.2, §13.1): offset = last inner offset; v1 inner offsets relative to
    the first (``offset - first``), v0 absolute; wrapper timestamp = max inner timestamp,
    or the log-append time.
    """
    recs = list(records)
    if codec == Codec.ZSTD:
        raise InvalidRecordError(f"ZStandard compression is not supported for magic {magic}")
    for r in recs:
        if r.headers:
            raise InvalidRecordError(f"Magic v{magic} does not support record headers")
    ts_bit = 0x08 if (magic == 1 and log_append_time is not None) else 0

    def ts(r: RecordSpec) -> int:
        if magic == 0:
            return -1
        return log_append_time if log_append_time is not None else r.timestamp

    if codec == Codec.NONE:
        return b"".join(encode_message(r.offset, magic, ts(r), r.key, r.value, ts_bit) for r in recs)
    if not recs:
        raise InvalidRecordError("Found invalid compressed record set with no inner records")
    first = recs[0].offset
    inner = b"".join(
        encode_message(r.offset - first if magic == 1 else r.offset, magic, ts(r), r.key, r.value, ts_bit) for r in recs
    )
    payload = compress(codec, inner, magic=magic, level=level)
    if magic == 1:
        wts = log_append_time if log_append_time is not None else max(r.timestamp for r in recs)
    else:
        wts = -1
    return encode_message(recs[-1].offset, magic, wts, None, payload, codec | ts_bit)
