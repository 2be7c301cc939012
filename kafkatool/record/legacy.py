"""Message formats v0 and v1 (spec §5, ``LegacyRecord``/``AbstractLegacyRecordBatch``)."""

from __future__ import annotations

import struct
from typing import Iterable, Iterator

from kafkatool.errors import CompressionError, CorruptRecordError, InvalidRecordError, KafkaToolError
from kafkatool.record.batch import Batch, Record, batch_from_header
from kafkatool.record.compression import DEFAULT_MAX_DECOMPRESSED, Codec, StreamBuffer, compress, iter_decompress
from kafkatool.record.crc import crc32
from kafkatool.record.layout import (
    CODEC_MASK,
    LEGACY,
    LEGACY_CRC_START,
    LEGACY_PREFIX,
    LEGACY_TIMESTAMP_TYPE_BIT,
    LEGACY_V1_TIMESTAMP,
    LOG_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
)
from kafkatool.record.v2 import RecordSpec

__all__ = [
    "decode_legacy_header",
    "decode_message",
    "iter_legacy_records",
    "iter_legacy_record_chunks",
    "encode_message",
    "encode_legacy",
]

#: Log overhead + message prefix common to v0 and v1 (§3, §5.1): :data:`kafkatool.record.layout.LEGACY_PREFIX`.
PREFIX = LEGACY_PREFIX
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


def _check_magic(magic: int, position: int) -> None:
    if magic not in (0, 1):
        raise InvalidRecordError(f"Invalid magic used in LegacyRecord: {magic}", position=position + LEGACY.MAGIC, kind="unknown_magic")


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
            position=LEGACY.SIZE_FIELD,
        )
    return batch_from_header(memoryview(buf), pos, position, size + LOG_OVERHEAD)


def decode_message(buf: bytes | memoryview, pos: int, end: int):
    """Decode one legacy message with its log overhead at ``buf[pos:end]``.

    Returns ``(offset, size, crc, magic, attributes, timestamp, key, value, crc_valid)``.
    """
    offset, size, crc, magic, attrs, ts, kl, vl, msg_end = _parse_message(buf, pos, end)
    i = pos + (LEGACY_V1_TIMESTAMP + 8 if magic == 1 else LEGACY_PREFIX.size) + 4
    key = None if kl < 0 else bytes(buf[i : i + kl])
    if kl > 0:
        i += kl
    i += 4
    value = None if vl < 0 else bytes(buf[i : i + vl])
    computed = crc32(memoryview(buf)[pos + LEGACY_CRC_START : msg_end])
    return offset, size, crc, magic, attrs, ts, key, value, computed == crc


def _parse_message(buf: bytes | memoryview, pos: int, end: int):
    """The layout of one legacy message at ``buf[pos:end]``, checked as :func:`decode_message`
    needs it: ``(offset, size, crc, magic, attributes, timestamp, key_length,
    value_length, message_end)``, without copying the key and value."""
    offset, size, crc, magic, attrs = PREFIX.unpack_from(buf, pos)
    _check_magic(magic, pos)
    msg_end = pos + LOG_OVERHEAD + size
    if msg_end > end:
        raise CorruptRecordError("Unexpected EOF while reading a legacy message", position=pos)
    i = pos + LEGACY_PREFIX.size
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
        if kl >= 0:
            if i + kl > msg_end:
                raise IndexError
            i += kl
        if i + 4 > msg_end:
            raise IndexError
        (vl,) = _I32.unpack_from(buf, i)
        i += 4
        if vl >= 0 and i + vl > msg_end:
            raise IndexError
    except (IndexError, struct.error):
        raise InvalidRecordError("Found invalid record structure (key or value runs past the message end)", position=pos) from None
    return offset, size, crc, magic, attrs & 0xFF, ts, kl, vl, msg_end


#: A wrapper whose inner messages fit these limits is decoded once and its records kept
#: between the two passes; a larger one is decompressed twice instead (memory stays flat).
KEEP_INNER_BYTES = 1 << 20
KEEP_INNER_MESSAGES = 4096
CHUNK_RECORDS = 2048


def iter_legacy_records(
    batch: Batch, data: bytes | memoryview, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> list[Record]:
    """Deep iteration of a legacy shallow entry (§5.2) into one list: the message itself,
    or a wrapper's inner messages.

    ``data`` holds the whole entry including its 12-byte overhead. Error positions are
    relative to the entry start; inner errors name their decompressed offset. The list
    grows with the number of inner messages: for entries read from a file use
    :func:`iter_legacy_record_chunks`.
    """
    return [r for chunk in iter_legacy_record_chunks(batch, data, max_decompressed=max_decompressed) for r in chunk]


def iter_legacy_record_chunks(
    batch: Batch,
    data: bytes | memoryview,
    *,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    chunk_records: int = CHUNK_RECORDS,
) -> Iterator[list[Record]]:
    """The records of a legacy entry (§5.2) in lists of at most ``chunk_records``, memory flat.

    Kafka decompresses a wrapper whole before it yields a record (a v1 wrapper's inner
    offsets are relative to its last one), so every error comes before the first record.
    So does it here, without holding the inner messages: a first pass over the
    decompressed stream checks them all and finds the last offset, a second one (over
    the kept records when the wrapper is small, else over the stream decompressed again)
    yields the records.
    """
    offset, size, crc, magic, attrs, ts, key, value, valid = decode_message(data, 0, batch.size)
    codec = attrs & CODEC_MASK
    if codec == Codec.NONE:
        yield [Record(offset, ts, key, value, (), -1, attrs, crc, valid, magic)]
        return
    if codec == Codec.ZSTD:
        # Kafka's message prints the magic, not the codec (§5.2 step 2).
        raise InvalidRecordError(
            f"Invalid wrapper compressionType found in legacy deep record iterator {magic}", position=0, kind="invalid_wrapper"
        )
    if codec > 4:
        raise InvalidRecordError(f"Unknown compression type id: {codec}", position=LEGACY.ATTRIBUTES)
    if value is None:
        raise InvalidRecordError(
            f"Found invalid compressed record set with null value (magic = {magic})", position=0, kind="invalid_wrapper"
        )
    value_start = batch.size - len(value)

    # pass 1: every inner message checked, the last offset found
    kept: list | None = []
    n = 0
    last_rel = 0
    inner_compressed = False
    try:
        stream = StreamBuffer(iter_decompress(codec, value, magic=magic, max_output=max_decompressed))
        for entries, first_pos, base in _inner_entries(stream, value_start):
            if not entries:
                continue
            if kept is not None:
                last_start = first_pos
                if n + len(entries) <= KEEP_INNER_MESSAGES:
                    last = entries[-1]
                    # where the last of them starts: the next position minus its length
                    last_start = stream.pos - LOG_OVERHEAD - last[1]
                if n + len(entries) <= KEEP_INNER_MESSAGES and base + last_start < KEEP_INNER_BYTES:
                    kept += entries
                else:  # the first one past a limit is not kept, nor anything after it
                    p = first_pos
                    for k, entry in enumerate(entries):
                        if n + k >= KEEP_INNER_MESSAGES or base + p >= KEEP_INNER_BYTES:
                            kept = None
                            break
                        kept.append(entry)
                        p += LOG_OVERHEAD + entry[1]
            n += len(entries)
            last_rel = entries[-1][0]
            if not inner_compressed:
                for entry in entries:
                    if entry[4] & CODEC_MASK:  # attributes
                        inner_compressed = True
                        break
    except CompressionError as e:
        raise type(e)(e.message, position=value_start) from None
    if not n:
        raise InvalidRecordError(
            "Found invalid compressed record set with no inner records", position=value_start, kind="invalid_wrapper"
        )
    base_offset = 0
    if magic == 1 and offset != 0:
        if offset < last_rel:
            raise InvalidRecordError(
                f"Found invalid wrapper offset in compressed v1 message set, wrapper offset '{offset}' is less than the last inner message offset '{last_rel}' and it is not zero.",
                position=0,
                kind="invalid_wrapper",
            )
        base_offset = offset - last_rel
    if inner_compressed:
        raise InvalidRecordError("Inner messages must not be compressed", position=value_start, kind="invalid_wrapper")

    # pass 2: the records
    wrapper_lat = magic == 1 and bool(attrs & LEGACY_TIMESTAMP_TYPE_BIT)
    if kept is not None:
        groups: Iterable = (kept,)
    else:
        stream = StreamBuffer(iter_decompress(codec, value, magic=magic, max_output=max_decompressed))
        groups = (entries for entries, _p, _b in _inner_entries(stream, value_start))
    new = tuple.__new__
    R = Record
    rel = base_offset if magic == 1 else 0
    out: list[Record] = []
    for entries in groups:
        if wrapper_lat:
            out += [new(R, (rel + o, -1 if im == 0 else ts, k, v, (), -1, a, c, ok, im)) for (o, _s, c, im, a, _t, k, v, ok) in entries]
        else:
            out += [new(R, (rel + o, -1 if im == 0 else t, k, v, (), -1, a, c, ok, im)) for (o, _s, c, im, a, t, k, v, ok) in entries]
        while len(out) >= chunk_records:
            yield out[:chunk_records]
            del out[:chunk_records]
    if out:
        yield out


#: Inner messages decoded per call of the compiled decoder (the tuples of one call are held at once).
INNER_LIMIT = 4096


_SMALL_INNER = f"Record size is less than the minimum record overhead ({RECORD_OVERHEAD_V0})"


def _inner_error(e: InvalidRecordError | CorruptRecordError, base: int, value_start: int) -> KafkaToolError:
    """An inner message's error as the wrapper's: located at the wrapper's value, the message
    saying where in the decompressed stream (``base``: the stream byte of the buffer's byte 0)."""
    return type(e)(
        f"{e.message} (inner message at byte {base + e.position} of the decompressed wrapper)",
        position=value_start,
        kind=e.kind if isinstance(e, CompressionError) else "invalid_wrapper",
    )


def _inner_entries(w: StreamBuffer, value_start: int) -> Iterator[tuple[list, int, int]]:
    """``(entries, first_pos, base)`` for the complete inner messages of a wrapper's
    decompressed stream, in groups: each entry is what :func:`decode_message` returns, the
    first one starts at ``first_pos`` of the buffer whose byte 0 is byte ``base`` of the
    stream; after a group ``w.pos`` is where the next message starts. A truncated trailing
    message is dropped, as Kafka does (§5.2 step 4); an error is raised as the message-by-
    message loop raised it (after the stream is drained)."""
    if _fast_inner is None:
        for buf, pos, base in _inner_messages(w, value_start):
            try:
                entry = decode_message(buf, pos, len(buf))
            except (InvalidRecordError, CorruptRecordError) as e:
                w.drain()
                raise _inner_error(e, base, value_start) from None
            w.pos = pos + LOG_OVERHEAD + entry[1]
            yield [entry], pos, base
        return
    while True:
        buf = w.buf
        first = w.pos
        try:
            entries, w.pos, status = _fast_inner(buf, first, len(buf), INNER_LIMIT)
        except (InvalidRecordError, CorruptRecordError) as e:
            w.drain()
            raise _inner_error(e, w.base, value_start) from None
        yield entries, first, w.base
        if status == _INNER_LIMIT:
            continue
        if status == _INNER_BAD_SIZE:
            w.drain()  # a failing stream is reported first, as a whole decompression would
            raise _inner_error(CorruptRecordError(_SMALL_INNER, position=w.pos), w.base, value_start)
        if w.final:
            return  # fewer than 12 bytes, or a truncated message, left: dropped
        w.read_more()


from kafkatool.record.speedups import functions as _compiled  # noqa: E402  (the extension, unless not built or switched off)

(_fast_inner,) = _compiled("decode_legacy_inner")
_INNER_BAD_SIZE = 1
_INNER_LIMIT = 2


def _inner_messages(w: StreamBuffer, value_start: int) -> Iterator[tuple[bytearray | bytes, int, int]]:
    """``(buf, pos, base)`` for each complete inner message of a wrapper's decompressed
    stream: the message starts at ``buf[pos]``, which is byte ``base + pos`` of the stream.
    ``buf`` is valid until the next message is asked for. A truncated trailing message
    is dropped, as Kafka does (§5.2 step 4)."""
    while True:
        buf = w.buf
        pos = w.pos
        end = len(buf)
        while end - pos >= LOG_OVERHEAD:
            (isize,) = _I32.unpack_from(buf, pos + LEGACY.SIZE_FIELD)
            if isize < RECORD_OVERHEAD_V0:
                w.drain()  # a failing stream is reported first, as a whole decompression would
                raise _inner_error(CorruptRecordError(_SMALL_INNER, position=pos), w.base, value_start)
            if pos + LOG_OVERHEAD + isize > end:
                break
            yield buf, pos, w.base
            pos += LOG_OVERHEAD + isize
        w.pos = pos
        if w.final:
            return  # fewer than 12 bytes, or a truncated message, left: dropped
        w.read_more()


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
    ts_bit = LEGACY_TIMESTAMP_TYPE_BIT if (magic == 1 and log_append_time is not None) else 0

    def ts(r: RecordSpec) -> int:
        if magic == 0:
            return -1
        return log_append_time if log_append_time is not None else r.timestamp

    if codec == Codec.NONE:
        return b"".join(encode_message(r.offset, magic, ts(r), r.key, r.value, ts_bit) for r in recs)
    if not recs:
        raise InvalidRecordError("Found invalid compressed record set with no inner records", kind="invalid_wrapper")
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
