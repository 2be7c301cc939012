"""Per-record columns in Arrow buffer layout, filled straight from v2 record bytes.

A :class:`RecordColumns` holds the records of one chunk as growing ``bytearray`` buffers laid
out as Arrow arrays are (the Arrow columnar format: little-endian fixed-width values, int32
offsets ``n + 1`` long starting at 0, LSB-first validity bitmaps whose bits past the last row
are zero), so a caller holding pyarrow builds arrays with ``pa.Array.from_buffers`` without a
Python object per record. This module imports no pyarrow.

:meth:`RecordColumns.add_v2` decodes the *uncompressed* records section of a v2 batch (spec §4.2)
in C (``_speedups.decode_columns_v2``) or, under ``KAFKATOOL_PURE=1`` or without the extension,
through :func:`kafkatool.record.v2.decode_records` (the pure-Python reference): same columns,
same errors. Per record:

* offset = baseOffset + offsetDelta, timestamp = baseTimestamp + timestampDelta (or the batch's
  LogAppendTime), both wrapping modulo 2**64 as Java's ``long`` arithmetic does (the reference
  gives an unbounded Python int, which a valid batch never needs);
* sequence = Kafka's ``DefaultRecordBatch.incrementSequence(baseSequence, offsetDelta)``
  (:func:`~kafkatool.record.batch.increment_sequence`), -1 when baseSequence is -1; stored as
  int32 (only a negative baseSequence other than -1 with a negative delta could leave the int32
  range: it wraps modulo 2**32);
* key and value: null for length -1;
* headers: ``list<struct<key: string, value: binary>>``, a NULL list (not an empty one) for a
  record without headers, as Spark's Kafka source gives; header keys decoded as Java's
  ``new String(bytes, UTF_8)`` does (:func:`java_utf8`), so the string column is valid UTF-8.
"""

from __future__ import annotations

import sys
from array import array
from itertools import accumulate
from typing import Iterable

from kafkatool.record.batch import Record, increment_sequence
from kafkatool.record.javautf8 import java_utf8
from kafkatool.record.speedups import functions as _compiled
from kafkatool.record.v2 import decode_records as _py_decode_records

__all__ = ["BinaryColumn", "RecordColumns", "java_utf8"]

(_fast_columns,) = _compiled("decode_columns_v2")

_LITTLE = sys.byteorder == "little"
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


_EXPORTED = ("RecordColumns: a buffer is still exported (viewed by Arrow or a memoryview) and cannot grow; "
             "clear() gives the columns new buffers")


def _wrap64(v: int) -> int:
    return v if _INT64_MIN <= v <= _INT64_MAX else ((v + 2**63) & (2**64 - 1)) - 2**63


def _wrap32(v: int) -> int:
    return v if _INT32_MIN <= v <= _INT32_MAX else ((v + 2**31) & (2**32 - 1)) - 2**31


def _le(typecode: str, values: list[int]) -> bytes:
    a = array(typecode, values)
    if not _LITTLE:  # pragma: no cover - no big-endian CI machine
        a.byteswap()
    return a.tobytes()


def _append_bits(bitmap: bytearray, n: int, bits: list[bool]) -> None:
    """Append ``bits`` after the first ``n`` bits of the LSB-first ``bitmap`` (its bits past ``n``
    are zero and stay so)."""
    if not bits:
        return
    k = 0
    if n & 7:  # finish the partial last byte
        last = bitmap[-1]
        while k < len(bits) and (n + k) & 7:
            if bits[k]:
                last |= 1 << ((n + k) & 7)
            k += 1
        bitmap[-1] = last
    out = bytearray()
    for j in range(k, len(bits), 8):
        byte = 0
        for b, v in enumerate(bits[j : j + 8]):
            if v:
                byte |= 1 << b
        out.append(byte)
    bitmap += out


def _get_bit(bitmap: bytearray, i: int) -> bool:
    return bool(bitmap[i >> 3] >> (i & 7) & 1)


class BinaryColumn:
    """A growing Arrow ``binary`` (or ``string``) column: int32 LE offsets (``n + 1``, from 0),
    the data bytes, an LSB-first validity bitmap (bit i set when row i is not null; the bits past
    row n are zero) and the null count."""

    __slots__ = ("offsets", "data", "validity", "_cell", "_slot")

    def __init__(self, _cell: list[int] | None = None, _slot: int = 0) -> None:
        self.offsets = bytearray(4)  # the leading 0
        self.data = bytearray()
        self.validity = bytearray()
        # the null count lives in a list slot, for RecordColumns' the one list its C path updates
        self._cell, self._slot = ([0], 0) if _cell is None else (_cell, _slot)

    @property
    def null_count(self) -> int:
        return self._cell[self._slot]

    @null_count.setter
    def null_count(self, value: int) -> None:
        self._cell[self._slot] = value

    def __len__(self) -> int:
        return len(self.offsets) // 4 - 1

    def extend(self, values: list[bytes | None]) -> None:
        """Append ``values`` (None for null)."""
        if not values:
            return
        n = len(self)
        end = int.from_bytes(self.offsets[-4:], "little")
        lens = [0 if v is None else len(v) for v in values]
        ends = list(accumulate(lens, initial=end))[1:]
        if ends[-1] > _INT32_MAX:
            raise OverflowError("BinaryColumn: more than 2**31-1 data bytes in one column; clear() first")
        self.offsets += _le("i", ends)
        self.data += b"".join(v for v in values if v is not None)
        valid = [v is not None for v in values]
        _append_bits(self.validity, n, valid)
        self.null_count += len(values) - sum(valid)

    def to_list(self) -> list[bytes | None]:
        """The rows as Python values (for tests and debugging; the fast way out is Arrow)."""
        offs = array("i")
        offs.frombytes(bytes(self.offsets))
        if not _LITTLE:  # pragma: no cover
            offs.byteswap()
        return [
            bytes(self.data[offs[i] : offs[i + 1]]) if _get_bit(self.validity, i) else None for i in range(len(offs) - 1)
        ]

    def _buffers(self) -> tuple[bytearray, bytearray, bytearray]:
        return (self.offsets, self.data, self.validity)


class RecordColumns:
    """Per-record columns of one chunk, in Arrow buffer layout (no pyarrow import here).

    Attributes (all public, read by the caller to build Arrow arrays):

    ``n`` rows; ``offsets`` and ``timestamps`` int64 LE (milliseconds as Kafka stores them, -1
    kept); ``sequences`` int32 LE; ``keys``, ``values``: :class:`BinaryColumn`; the headers column
    ``list<struct<key: string, value: binary>>`` as ``header_offsets`` (int32 list offsets,
    ``n + 1``), ``header_validity`` (bitmap over rows; a record without headers, or every record
    when ``include_headers`` is False, is a NULL list) and ``header_null_count``, with the
    struct's children ``header_keys`` (never null, valid UTF-8) and ``header_values`` (nullable).
    Read them, never rebind or resize them by hand (the compiled path refuses buffers that do not
    match the counts).

    :meth:`clear` gives the columns new bytearrays and never touches the old ones again, so
    buffers handed to Arrow zero-copy (``pa.py_buffer(cols.offsets)``) stay valid; while Arrow
    holds such a view the bytearray cannot grow, and :meth:`add_v2` raises ``BufferError``
    (columns unchanged).
    """

    __slots__ = ("include_headers", "offsets", "timestamps", "sequences", "keys", "values",
                 "header_offsets", "header_validity", "header_keys", "header_values", "_counts_list", "_bufs")

    def __init__(self, include_headers: bool = True) -> None:
        self.include_headers = bool(include_headers)
        self.clear()

    def clear(self) -> None:
        """Drop every row: fresh, empty buffers (the old bytearrays are left as they are)."""
        # rows, key nulls, value nulls, header-list nulls, headers, header-value nulls: one list,
        # updated in place by the C path (the attributes below read it)
        self._counts_list = c = [0, 0, 0, 0, 0, 0]
        self.offsets = bytearray()
        self.timestamps = bytearray()
        self.sequences = bytearray()
        self.keys = BinaryColumn(c, 1)
        self.values = BinaryColumn(c, 2)
        self.header_offsets = bytearray(4)
        self.header_validity = bytearray()
        self.header_keys = BinaryColumn()
        self.header_values = BinaryColumn(c, 5)
        # the buffers in the C function's order, built once per clear() (a call per batch must be cheap)
        self._bufs = (
            self.offsets, self.timestamps, self.sequences,
            *self.keys._buffers(), *self.values._buffers(),
            self.header_offsets, self.header_validity,
            *self.header_keys._buffers(), *self.header_values._buffers(),
        )

    @property
    def n(self) -> int:
        """Rows so far."""
        return self._counts_list[0]

    @property
    def header_null_count(self) -> int:
        """Rows whose headers list is NULL."""
        return self._counts_list[3]

    def __len__(self) -> int:
        return self.n

    # ------------------------------------------------------------------ appending

    def add_v2(
        self,
        records: bytes | bytearray | memoryview,
        count: int,
        base_offset: int,
        base_timestamp: int,
        base_sequence: int,
        log_append_time: int | None,
    ) -> None:
        """Decode ``count`` v2 records from the *uncompressed* records section ``records`` (spec
        §4.2: the batch bytes after its 61-byte header, or a decompressed payload) and append them.

        ``log_append_time``: for a batch with the LogAppendTime bit, every record's timestamp is
        this (the batch maxTimestamp), as Kafka reports it; else None and the timestamp is
        base_timestamp + timestampDelta.

        Raises InvalidRecordError exactly as ``kafkatool.record.v2.decode_records(records, 0,
        len(records), count)`` does (class, message, position relative to the start of
        ``records``, kind), and then the columns are exactly as before the call. One difference
        from decode_records, as iter_batch_records: ``count == 0`` appends nothing and never looks
        at the bytes (§17 B.11). A negative count raises decode_records' error (at position 0).
        Memory is bounded by the input: a count larger than the bytes can hold fails on the way,
        nothing is allocated for it. BufferError while a buffer is exported (see the class),
        OverflowError for a base field outside int64 (base_sequence: int32) or a column past
        2**31-1 bytes (Arrow's int32 offsets: clear() first); the columns unchanged either way.
        """
        if _fast_columns is not None:  # checks its arguments as below; updates _counts_list on success
            _fast_columns(records, count, base_offset, base_timestamp, base_sequence, log_append_time,
                          self.include_headers, self._bufs, self._counts_list)
            return
        if not _INT64_MIN <= base_offset <= _INT64_MAX:
            raise OverflowError("add_v2: base_offset must be int64")
        if not _INT64_MIN <= base_timestamp <= _INT64_MAX:
            raise OverflowError("add_v2: base_timestamp must be int64")
        if not _INT32_MIN <= base_sequence <= _INT32_MAX:
            raise OverflowError("add_v2: base_sequence must be int32")
        if log_append_time is not None and not _INT64_MIN <= log_append_time <= _INT64_MAX:
            raise OverflowError("add_v2: log_append_time must be int64")
        if count == 0:
            return
        if count > 0:
            self._check_growable()
        raw = _py_decode_records(records, 0, len(records), count)
        if log_append_time is not None:
            timestamps = [log_append_time] * len(raw)
        else:
            timestamps = [_wrap64(base_timestamp + r[1]) for r in raw]
        offsets = [_wrap64(base_offset + r[2]) for r in raw]
        if base_sequence == -1:
            sequences = [-1] * len(raw)
        else:
            sequences = [_wrap32(increment_sequence(base_sequence, r[2])) for r in raw]
        self._append(offsets, timestamps, sequences, [r[3] for r in raw], [r[4] for r in raw], [r[5] for r in raw])

    def add_records(self, records: Iterable[Record]) -> None:
        """Append decoded :class:`~kafkatool.record.batch.Record` rows (the slow path, for legacy
        v0/v1 messages or anything already decoded): offset, timestamp, key, value, headers and
        sequence as the records carry them. Atomic as :meth:`add_v2`."""
        recs = list(records)
        for r in recs:
            if not (_INT64_MIN <= r.offset <= _INT64_MAX and _INT64_MIN <= r.timestamp <= _INT64_MAX
                    and _INT32_MIN <= r.sequence <= _INT32_MAX):
                raise OverflowError(f"add_records: record at offset {r.offset} has a value outside int64/int32")
        self._append(
            [r.offset for r in recs], [r.timestamp for r in recs], [r.sequence for r in recs],
            [r.key for r in recs], [r.value for r in recs], [r.headers for r in recs],
        )

    def _append(self, offsets, timestamps, sequences, keys, values, headers) -> None:
        """Append whole rows; on any failure every buffer is put back as it was."""
        if not offsets:
            return
        self._check_growable()
        saved = self._save()
        try:
            self.offsets += _le("q", offsets)
            self.timestamps += _le("q", timestamps)
            self.sequences += _le("i", sequences)
            self.keys.extend(keys)
            self.values.extend(values)
            n = self.n
            if self.include_headers:
                has = [bool(h) for h in headers]
                flat = [pair for h in headers for pair in h]
                end = int.from_bytes(self.header_offsets[-4:], "little")
                ends = list(accumulate((len(h) for h in headers), initial=end))[1:]
                self.header_keys.extend([java_utf8(k) for k, _v in flat])
                self.header_values.extend([v for _k, v in flat])
            else:
                has = [False] * len(headers)
                ends = [int.from_bytes(self.header_offsets[-4:], "little")] * len(headers)
            self.header_offsets += _le("i", ends)
            _append_bits(self.header_validity, n, has)
            c = self._counts_list
            c[3] += len(has) - sum(has)
            c[4] = len(self.header_keys)
            c[0] = n + len(offsets)
        except BaseException:
            self._restore(saved)
            raise

    def _check_growable(self) -> None:
        """Raise BufferError, as the C path does before changing anything, when a buffer is exported."""
        for b in self._buffers():
            try:
                b.append(0)  # resizing raises BufferError while the bytearray is exported
            except BufferError:
                raise BufferError(_EXPORTED) from None
            del b[-1]

    # ------------------------------------------------------------------ the buffers, in the C order

    def _buffers(self) -> tuple[bytearray, ...]:
        return self._bufs

    def _counts(self) -> tuple[int, ...]:
        return tuple(self._counts_list)

    def _set_counts(self, counts: tuple[int, ...]) -> None:
        self._counts_list[:] = counts

    def _save(self):
        return ([(b, len(b), bytes(b[-1:])) for b in self._buffers()], self._counts())

    def _restore(self, saved) -> None:
        bufs, counts = saved
        for b, length, last in bufs:
            del b[length:]
            if last:
                b[length - 1 : length] = last  # a bitmap's partial byte may have gained bits
        self._set_counts(counts)

    # ------------------------------------------------------------------ reading back (tests, debugging)

    def rows(self) -> list[tuple[int, int, bytes | None, bytes | None, tuple | None, int]]:
        """``(offset, timestamp, key, value, headers, sequence)`` per row, headers as a tuple of
        ``(key_str, value_bytes_or_None)`` or None for a NULL list. For tests and debugging."""
        offs = array("q", bytes(self.offsets))
        tss = array("q", bytes(self.timestamps))
        seqs = array("i", bytes(self.sequences))
        hoffs = array("i", bytes(self.header_offsets))
        if not _LITTLE:  # pragma: no cover
            for a in (offs, tss, seqs, hoffs):
                a.byteswap()
        keys, values = self.keys.to_list(), self.values.to_list()
        hks, hvs = self.header_keys.to_list(), self.header_values.to_list()
        out = []
        for i in range(self.n):
            if _get_bit(self.header_validity, i):
                hdrs = tuple((hks[j].decode("utf-8"), hvs[j]) for j in range(hoffs[i], hoffs[i + 1]))
            else:
                hdrs = None
            out.append((offs[i], tss[i], keys[i], values[i], hdrs, seqs[i]))
        return out
