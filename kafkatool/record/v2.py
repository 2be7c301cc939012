"""Message format v2: record batches and records (spec §4, ``DefaultRecordBatch``/``DefaultRecord``)."""

from __future__ import annotations

import struct
from typing import Iterable, Iterator, NamedTuple, Sequence

from kafkatool.errors import CompressionError, InvalidRecordError
from kafkatool.record.batch import Batch, Record, batch_from_header, increment_sequence
from kafkatool.record.compression import DEFAULT_MAX_DECOMPRESSED, Codec, StreamBuffer, compress, iter_decompress
from kafkatool.record.layout import (
    CODEC_MASK,
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    INT32_MAX,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    V2,
    V2_CRC_START,
    V2_HEADER,
    V2_HEADER_SIZE,
)
from kafkatool.record.varint import decode_varint, decode_zigzag, encode_varint, encode_varlong

__all__ = [
    "HEADER",
    "decode_header",
    "decode_records",
    "decode_records_part",
    "iter_batch_records",
    "iter_batch_record_chunks",
    "RecordSpec",
    "encode_record",
    "encode_batch",
]

_I32 = struct.Struct(">i")

#: The 61-byte v2 batch header (§4.1), one field per line: :data:`kafkatool.record.layout.V2_HEADER`.
HEADER = V2_HEADER
CRC_START = V2_CRC_START
ATTRIBUTES_OFFSET = V2.ATTRIBUTES


def decode_header(buf: bytes | memoryview, pos: int = 0, position: int = 0) -> Batch:
    """Decode the v2 header at ``buf[pos:]`` into a :class:`Batch` (CRC computed over the batch).

    ``position`` is the file position recorded in the result. The caller guarantees the
    whole batch (log overhead + batchLength bytes, ≥ 61) is in ``buf``.
    """
    (length,) = _I32.unpack_from(buf, pos + V2.BATCH_LENGTH)
    return batch_from_header(memoryview(buf), pos, position, length + LOG_OVERHEAD)


def decode_records(
    buf: bytes | bytearray | memoryview, pos: int, end: int, count: int
) -> list[tuple[int, int, int, bytes | None, bytes | None, tuple]]:
    """Decode ``count`` v2 records from ``buf[pos:end]`` (pure Python reference implementation).

    Returns tuples ``(attributes, timestamp_delta, offset_delta, key, value, headers)``,
    headers being a tuple of ``(key_bytes, value_bytes_or_None)``. The records must fill
    the range exactly (§4.2). Errors carry the position within ``buf``.
    """
    if count < 0:
        raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch", position=pos, kind="record_count_mismatch")
    out, i, _status = decode_records_part(buf, pos, end, count, _NO_BUDGET, True)
    if i != end:
        raise InvalidRecordError(
            "Incorrect declared batch size, records still remaining in file", position=i, kind="record_count_mismatch"
        )
    return out


#: Why :func:`decode_records_part` stopped before ``limit`` records:
PART_DONE = 0  # the byte budget is spent (or ``limit`` reached): call again from the position returned
PART_MORE = 1  # not final: the next record is not complete in ``[pos, end)`` yet
PART_NEED_END = 2  # not final: the next record's length is negative; its error names the bytes to the stream's end

#: A malformed record's one-byte fast paths (offsetDelta, key, value and header count
#: lengths) read up to this many bytes past its end: a record is decided only when they
#: are in the buffer, or at the stream's end.
LOOKAHEAD = 4

_NO_BUDGET = 1 << 62


def decode_records_part(
    buf: bytes | bytearray | memoryview, pos: int, end: int, limit: int, budget: int, final: bool
) -> tuple[list[tuple[int, int, int, bytes | None, bytes | None, tuple]], int, int]:
    """Decode at most ``limit`` v2 records from ``buf[pos:end]``: one chunk of a stream.

    Returns ``(records, next_pos, status)``. It stops after the record that brings the
    bytes decoded to ``budget`` (PART_DONE). With ``final`` set, ``[pos, end)`` is all
    there is and running out of bytes raises exactly as :func:`decode_records` does.
    Without it, more bytes may follow ``end``: it stops, without an error, before a
    record it cannot decide from the bytes it has (PART_MORE, PART_NEED_END). So a
    stream decoded in chunks gives exactly the records and the error of one call over
    the whole stream. Checking that nothing follows the last record is the caller's.
    """
    if limit < 0 or budget < 0:
        raise ValueError("decode_records_part: limit and budget must be >= 0")
    if not (0 <= pos <= len(buf) and 0 <= end <= len(buf)):
        raise ValueError(f"decode_records_part: pos {pos} and end {end} must lie within [0, {len(buf)}]")
    out = []
    append = out.append
    i = pos
    status = PART_DONE
    for _ in range(limit):
        rec_start = i
        if out and i - pos >= budget:
            break
        # --- length (varint, inlined fast path for one byte)
        try:
            if i >= end:
                if not final:
                    status = PART_MORE
                    break
                raise InvalidRecordError(
                    "Incorrect declared batch size, premature EOF reached", position=i, kind="record_count_mismatch"
                )
            b = buf[i]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                i += 1
            else:
                if not final and end - i < 5 and all(buf[j] >= 0x80 for j in range(i, end)):
                    status = PART_MORE  # the length varint goes on past end
                    break
                length, i = _slow_varint(buf, i, end)
            body_end = i + length
            if length < 0 or body_end > end:
                if not final:
                    status = PART_NEED_END if length < 0 else PART_MORE
                    i = rec_start
                    break
                raise InvalidRecordError(
                    f"Invalid record size: expected {length} bytes in record payload, but instead the buffer has only {end - i} remaining bytes.",
                    position=rec_start,
                )
            if not final and end - body_end < LOOKAHEAD:
                status = PART_MORE
                i = rec_start
                break
            if length < 6:
                raise InvalidRecordError("Found invalid record structure", position=rec_start)
            attrs = buf[i]
            i += 1
            b = buf[i]
            if b < 0x80:
                tsd = (b >> 1) ^ -(b & 1)
                i += 1
            else:
                tsd, i = _slow_varlong(buf, i, body_end)
            b = buf[i]
            if b < 0x80:
                od = (b >> 1) ^ -(b & 1)
                i += 1
            else:
                od, i = _slow_varint(buf, i, body_end)
            b = buf[i]
            if b < 0x80:
                kl = (b >> 1) ^ -(b & 1)
                i += 1
            else:
                kl, i = _slow_varint(buf, i, body_end)
            if kl < 0:
                key = None
            else:
                if i + kl > body_end:
                    raise InvalidRecordError("Found invalid record structure", position=rec_start)
                key = bytes(buf[i : i + kl])
                i += kl
            b = buf[i]
            if b < 0x80:
                vl = (b >> 1) ^ -(b & 1)
                i += 1
            else:
                vl, i = _slow_varint(buf, i, body_end)
            if vl < 0:
                value = None
            else:
                if i + vl > body_end:
                    raise InvalidRecordError("Found invalid record structure", position=rec_start)
                value = bytes(buf[i : i + vl])
                i += vl
            b = buf[i]
            if b < 0x80:
                hc = (b >> 1) ^ -(b & 1)
                i += 1
            else:
                hc, i = _slow_varint(buf, i, body_end)
            if hc == 0:
                headers = ()
            else:
                if hc < 0:
                    raise InvalidRecordError(f"Found invalid number of record headers {hc}", position=rec_start)
                if hc > body_end - i:
                    raise InvalidRecordError(
                        f"Found invalid number of record headers. {hc} is larger than the remaining size of the buffer",
                        position=rec_start,
                    )
                hs = []
                for _h in range(hc):
                    hkl, i = _slow_varint(buf, i, body_end)
                    if hkl < 0:
                        raise InvalidRecordError(f"Invalid negative header key size {hkl}", position=rec_start)
                    if i + hkl > body_end:
                        raise InvalidRecordError("Found invalid record structure", position=rec_start)
                    hk = bytes(buf[i : i + hkl])
                    i += hkl
                    hvl, i = _slow_varint(buf, i, body_end)
                    if hvl < 0:
                        hv = None
                    else:
                        if i + hvl > body_end:
                            raise InvalidRecordError("Found invalid record structure", position=rec_start)
                        hv = bytes(buf[i : i + hvl])
                        i += hvl
                    hs.append((hk, hv))
                headers = tuple(hs)
        except IndexError:
            raise InvalidRecordError("Found invalid record structure", position=rec_start) from None
        if i != body_end:
            raise InvalidRecordError(
                f"Invalid record size: expected to read {length} bytes in record payload, but instead read {i - (body_end - length)}",
                position=rec_start,
            )
        append((attrs, tsd, od, key, value, headers))
    return out, i, status


def _slow_varint(buf, i: int, end: int) -> tuple[int, int]:
    return decode_zigzag(buf, i, end, 5, _RECORD_STRUCTURE + " (Varint is too long, the most significant bit in the 5th byte is set)",
                         _RECORD_STRUCTURE)


def _slow_varlong(buf, i: int, end: int) -> tuple[int, int]:
    return decode_zigzag(buf, i, end, 10, _RECORD_STRUCTURE + " (Varlong is too long, most significant bit in the 10th byte is set)",
                         _RECORD_STRUCTURE)


_RECORD_STRUCTURE = "Found invalid record structure"


from kafkatool.record.speedups import functions as _compiled  # the extension, unless not built or switched off

# the compiled decoders, or None (both or neither: a stale build lacks the second)
_fast_decode_records, _fast_decode_records_part = _compiled("decode_records", "decode_records_part")

_decode = _fast_decode_records or decode_records
_decode_part = _fast_decode_records_part or decode_records_part

#: A streamed batch's records come in chunks of at most this many records, decoded from
#: about this many bytes: what a batch holds at once stays well under a MiB of tuples,
#: whatever its record count says (the count is the writer's word, never preallocated).
CHUNK_RECORDS = 2048
CHUNK_BYTES = 256 * 1024


def iter_batch_records(
    batch: Batch, data: bytes | memoryview, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> list[Record]:
    """Decode every record of a v2 batch (§4.1 "Record iteration") into one list.

    ``data`` is the whole batch including its log overhead. Positions in errors are
    relative to the batch start for uncompressed batches; for compressed batches the
    error is placed at the payload start and its message names the decompressed offset.
    The list grows with the record count: for a batch that may hold millions of
    records (anything read from a file), use :func:`iter_batch_record_chunks`.
    """
    count = batch[12]  # count
    if count <= 0:
        if count == 0:
            return []  # bytes after a zero-count header are never examined (§17 B.11)
        raise InvalidRecordError(
            f"Found invalid record count {count} in magic v2 batch", position=V2.RECORDS_COUNT, kind="record_count_mismatch"
        )
    if batch[5] & CODEC_MASK:  # attributes: compressed
        return [r for chunk in iter_batch_record_chunks(batch, data, max_decompressed=max_decompressed) for r in chunk]
    return _records(batch, _decode(data, V2_HEADER_SIZE, batch[1], count))  # size


def iter_batch_record_chunks(
    batch: Batch,
    data: bytes | memoryview,
    *,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    chunk_records: int = CHUNK_RECORDS,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[list[Record]]:
    """The records of a v2 batch as they are decoded, in lists of at most ``chunk_records``.

    Memory stays bounded whatever the batch's record count: a compressed payload is
    decompressed chunk by chunk (:func:`~kafkatool.record.compression.iter_decompress`)
    and decoded with a carry-over buffer. The chunks joined, or the error raised after
    them, are exactly what :func:`iter_batch_records` returns or raises: where a whole
    decompression would fail first, the rest of the stream is read (and dropped) before
    an error in the records is raised.
    """
    count = batch[12]  # count
    if count <= 0:
        if count == 0:
            return  # bytes after a zero-count header are never examined (§17 B.11)
        raise InvalidRecordError(
            f"Found invalid record count {count} in magic v2 batch", position=V2.RECORDS_COUNT, kind="record_count_mismatch"
        )
    codec = batch[5] & CODEC_MASK  # attributes
    if not codec:
        end = batch[1]  # size
        pos = V2_HEADER_SIZE
        while count:
            raw, pos, _status = _decode_part(data, pos, end, min(chunk_records, count), chunk_bytes, True)
            count -= len(raw)
            yield _records(batch, raw)
        if pos != end:
            raise InvalidRecordError(
                "Incorrect declared batch size, records still remaining in file", position=pos, kind="record_count_mismatch"
            )
        return
    if codec > 4:
        raise InvalidRecordError(f"Unknown compression type id: {codec}", position=ATTRIBUTES_OFFSET + 1)
    stream = iter_decompress(
        codec, memoryview(data)[V2_HEADER_SIZE : batch.size], magic=batch.magic, max_output=max_decompressed
    )
    try:
        yield from _stream_records(batch, stream, count, chunk_records, chunk_bytes)
    except CompressionError as e:
        raise type(e)(e.message, position=V2_HEADER_SIZE, kind=e.kind) from None


def _stream_records(batch: Batch, stream: Iterator[bytes], count: int, chunk_records: int, chunk_bytes: int) -> Iterator[list[Record]]:
    """Decode ``count`` records from a decompressed stream (see :func:`iter_batch_record_chunks`)."""
    w = StreamBuffer(stream)
    while count:
        buf = w.buf
        try:
            raw, w.pos, status = _decode_part(buf, w.pos, len(buf), min(chunk_records, count), chunk_bytes, w.final)
        except InvalidRecordError as e:
            w.drain()  # a failing stream is what decompress() reports, not the records
            raise InvalidRecordError(
                f"{e.message} (at byte {w.base + e.position} of the decompressed records)",
                position=V2_HEADER_SIZE,
                kind=e.kind,
            ) from None
        if raw:
            count -= len(raw)
            yield _records(batch, raw)
        if status == PART_DONE:
            continue
        if status == PART_NEED_END:  # a negative record length: the message names the bytes left
            length, after = decode_varint(buf, w.pos)
            remaining = w.drain() - (after - w.pos)
            raise InvalidRecordError(
                f"Invalid record size: expected {length} bytes in record payload, but instead the buffer has only "
                f"{remaining} remaining bytes. (at byte {w.base + w.pos} of the decompressed records)",
                position=V2_HEADER_SIZE,
            )
        w.read_more()  # PART_MORE
    if w.drain():
        raise InvalidRecordError(
            f"Incorrect declared batch size, records still remaining in file (at byte {w.base + w.pos} of the decompressed records)",
            position=V2_HEADER_SIZE,
            kind="record_count_mismatch",
        )


def _records(batch: Batch, raw: list) -> list[Record]:
    """Build Record tuples from the decoder's raw tuples; one flat comprehension per case
    (this runs once per record of a deep dump)."""
    base = batch.offset
    bseq = batch.base_sequence
    magic = batch.magic
    new = tuple.__new__
    R = Record
    if batch.attributes & TIMESTAMP_TYPE_BIT:  # LogAppendTime: every record shows the batch maxTimestamp
        mts = batch.max_timestamp
        if bseq == -1:
            return [new(R, (base + od, mts, k, v, h, -1, a, None, None, magic)) for (a, _t, od, k, v, h) in raw]
        return [
            new(R, (base + od, mts, k, v, h, increment_sequence(bseq, od), a, None, None, magic))
            for (a, _t, od, k, v, h) in raw
        ]
    bts = batch.base_timestamp
    if bseq == -1:
        return [new(R, (base + od, bts + t, k, v, h, -1, a, None, None, magic)) for (a, t, od, k, v, h) in raw]
    wrap = INT32_MAX - bseq  # record sequence = baseSequence + offsetDelta, wrapping past Int.MAX (§4.1)
    return [
        new(R, (base + od, bts + t, k, v, h, bseq + od if od <= wrap else od - wrap - 1, a, None, None, magic))
        for (a, t, od, k, v, h) in raw
    ]


# --------------------------------------------------------------------------- encoding


class RecordSpec(NamedTuple):
    """A record to write: absolute offset and timestamp; headers as (str|bytes, bytes|None)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str | bytes, bytes | None]] = ()


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None, headers=(), attributes: int = 0) -> bytes:
    """Encode one v2 record (§4.2)."""
    body = bytearray()
    body.append(attributes & 0xFF)
    body += encode_varlong(timestamp_delta)
    body += encode_varint(offset_delta)
    if key is None:
        body += encode_varint(-1)
    else:
        body += encode_varint(len(key))
        body += key
    if value is None:
        body += encode_varint(-1)
    else:
        body += encode_varint(len(value))
        body += value
    body += encode_varint(len(headers))
    for hk, hv in headers:
        hkb = hk.encode("utf-8") if isinstance(hk, str) else bytes(hk)
        body += encode_varint(len(hkb))
        body += hkb
        if hv is None:
            body += encode_varint(-1)
        else:
            body += encode_varint(len(hv))
            body += hv
    return encode_varint(len(body)) + bytes(body)


def encode_batch(
    records: Iterable[RecordSpec],
    *,
    base_offset: int | None = None,
    codec: int = Codec.NONE,
    log_append_time: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
    magic: int = 2,
    level: int | None = None,
    last_offset_delta: int | None = None,
    extra_attributes: int = 0,
) -> bytes:
    """Encode one v2 batch, with log overhead, as Kafka's ``MemoryRecordsBuilder`` would.

    ``log_append_time`` makes a LogAppendTime batch whose maxTimestamp is that time.
    ``base_offset`` defaults to the first record's offset; record offsets are written as
    deltas from it. An empty ``records`` writes a zero-count (compacted) header.
    """
    recs = list(records)
    if base_offset is None:
        base_offset = recs[0].offset if recs else 0
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    else:
        base_ts = recs[0].timestamp if recs else -1
    if log_append_time is not None:
        max_ts = log_append_time
    else:
        max_ts = max((r.timestamp for r in recs), default=-1)
    body = b"".join(
        encode_record(r.offset - base_offset, r.timestamp - base_ts, r.key, r.value, r.headers) for r in recs
    )
    if codec != Codec.NONE:
        body = compress(codec, body, magic=2, level=level)
    attrs = (codec & CODEC_MASK) | extra_attributes
    if log_append_time is not None:
        attrs |= TIMESTAMP_TYPE_BIT
    if is_transactional:
        attrs |= TRANSACTIONAL_BIT
    if is_control:
        attrs |= CONTROL_BIT
    if delete_horizon_ms is not None:
        attrs |= DELETE_HORIZON_BIT
    if last_offset_delta is None:
        last_offset_delta = (recs[-1].offset - base_offset) if recs else 0
    from kafkatool.record.encode import v2_batch  # the one framing of a v2 batch (encode imports this module's neighbours)

    return v2_batch(
        body,
        base_offset=base_offset,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        attributes=attrs,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        count=len(recs),
        magic=magic,
    )

