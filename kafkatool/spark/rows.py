"""The rows of the ``records`` and ``batches`` kinds: one task's segment slices read with
kafkatool's reader and turned into Arrow record batches (pyarrow and numpy; no pyspark).

Each :class:`~kafkatool.spark.plan.SegmentSlice` ``[start, end)`` is walked with
:meth:`Segment.batches <kafkatool.segment.logdir.Segment.batches>` (seeking with the
``.index``/``.timeindex`` when the options give a start offset or time). A batch belongs to the
slice it starts in. Damage is handled as ``kafkatool verify`` handles it, in its words:

* an entry the walk cannot frame, or a tail it leaves: the bad region
  :func:`kafkatool.segment.resync.bad_region` gives (``invalid_size``, ``unknown_magic``,
  ``partial_batch``, ``trailing_bytes``, ``trailing_zeros``) is ONE row (``records``: offset,
  key, value, headers and every batch column null but ``batchPosition``; ``batches``: a row
  with ``position``/``size`` of the region and ``error``/``errorKind``), and reading resumes
  where the region ends, as verify's does;
* a CRC mismatch: the batch's rows with ``crcValid`` false (its records are still decoded
  when they decode; when they do not, its one error row says why, in the words verify
  ``--deep`` uses for a batch whose CRC holds: verify itself reports only the CRC mismatch);
* a magic byte above 2 (``unknown_magic``), an invalid codec id (``unknown_codec``), a batch
  too large to decode (``decompressed_too_large``), records that do not decode or decompress
  (verify ``--deep``'s finding for the batch: its kind, position and message): ONE error row
  for the batch (``records``), or the batch's row with ``error``/``errorKind`` (``batches``;
  record decoding only with ``opts.deep``);
* a slice the plan could not read (``SegmentSlice.error``), or a file that cannot be opened or
  read: ONE ``unreadable`` row.

An ``error`` reads as verify's text line for the same finding, ``PATH:POSITION: KIND: MESSAGE``
(``PATH`` as :func:`display_path` gives it). An error row has a null timestamp; its offset is
the batch's base offset when a batch is known (a v2 batch, or a legacy message that is not a
compressed wrapper), else null.

Bounds (:class:`~kafkatool.spark.plan.ReadOptions`) apply exactly, row by row, with SQL's null
semantics: a ``records`` row is given when ``startOffset <= offset < endOffset`` and
``startTime <= timestamp < endTime`` (milliseconds), each bound only when set (so an error row
is left out by any time bound, a bad-region row by any offset bound); a ``batches`` row when
``lastOffset >= startOffset``, ``baseOffset < endOffset`` (the batch holds offsets in the
range) and ``startTime <= maxTimestamp < endTime``. The walk seeks to the first batch that can
hold a wanted row and stops at the first v2 batch whose base offset reaches ``endOffset``; the
seek trusts what the broker trusts (offsets grow through a segment, a batch's maxTimestamp is
its records' largest, the ``.timeindex`` entries: see :meth:`Segment.batches
<kafkatool.segment.logdir.Segment.batches>`), so rows that a damaged segment holds against
those rules can be missed by a bounded read; verify reports such damage.

In the ``batches`` kind, a legacy compressed wrapper's ``baseOffset`` (its first inner offset,
as Kafka's ``baseOffset()`` gives it) and ``recordCount`` (its inner messages) need its records:
they are null unless ``opts.deep`` (and such a row is then left out by an ``endOffset`` bound).

Record values: ``timestamp`` is Kafka's milliseconds as Arrow microseconds (-1 ms is -1000 us,
as Spark's Kafka source gives it; a value too large for microseconds is null);
``timestampType`` is Kafka's id (-1 none for magic 0, 0 CreateTime, 1 LogAppendTime); control
records are rows (``isControl`` true); legacy (v0/v1) rows take ``crcValid`` from the
wrapper's CRC and, inside a compressed wrapper, the message's own. ``verify_crc=False`` gives
``crcValid`` (and ``computedCrc``) null; the walk still computes every CRC (framing a batch does,
in C: about 0.2 s of CPU per GiB, measured 0.05 s for 256 MiB), it is only not reported.

Memory stays flat whatever the segment's size: rows are flushed as a record batch at about
:data:`FLUSH_BYTES` of keys and values or :data:`FLUSH_ROWS` rows (:data:`FLUSH_ERRORS` error
rows), and at the end of each slice;
a v2 batch is decoded whole into columns (:class:`kafkatool.record.columns.RecordColumns`) when
it is at most :data:`WHOLE_BATCH_BYTES` once decompressed, else in chunks.
"""

from __future__ import annotations

import os
from array import array
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from kafkatool.errors import CorruptRecordError, InvalidRecordError, KafkaToolError
from kafkatool.record.batch import Batch
from kafkatool.record.columns import RecordColumns
from kafkatool.record.compression import DEFAULT_MAX_DECOMPRESSED, codec_name, iter_decompress
from kafkatool.record.layout import (
    CODEC_MASK,
    CONTROL_BIT,
    LEGACY,
    LEGACY_TIMESTAMP_TYPE_BIT,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    V2,
    V2_HEADER_SIZE,
)
from kafkatool.record.records import batch_record_chunks
from kafkatool.segment.logdir import Segment, batches_and_regions, open_log
from kafkatool.segment.resync import BadRegion
from kafkatool.spark.schema import HEADERS_TYPE, TIMESTAMP_TYPE, arrow_schema
from kafkatool.verify.deep import error_kind
from kafkatool.verify.findings import Finding, FindingAdder, FindingKind

__all__ = [
    "FLUSH_BYTES",
    "FLUSH_ROWS",
    "FLUSH_ERRORS",
    "WHOLE_BATCH_BYTES",
    "read",
    "read_records",
    "read_batches",
    "display_path",
    "error_text",
]

#: A records chunk is flushed once its keys and values hold this many bytes...
FLUSH_BYTES = 8 << 20
#: ... or it holds this many rows (batches rows too).
FLUSH_ROWS = 64 * 1024
#: Error rows gathered before they are flushed (one per bad region or undecodable batch).
FLUSH_ERRORS = 4096
#: A v2 batch whose records section (decompressed) is at most this large is decoded in one call
#: of :meth:`RecordColumns.add_v2`; a larger one is checked whole first, then decoded in chunks
#: with flushes between them (its rows never all in memory at once).
WHOLE_BATCH_BYTES = 32 << 20
#: ... and it holds at most this many records.
WHOLE_BATCH_RECORDS = 256 * 1024

_RUN_FIELDS = 12  # the values of a run of rows, see _RecordsChunk.runs
_MAX_MS = (2**63 - 1) // 1000  # the largest millisecond value a microsecond timestamp holds
_NAMES = tuple(codec_name(i) for i in range(5))
_CODEC_NAMES = pa.array(_NAMES, pa.string())


def _codec(codec_id: int) -> str | None:
    """The codec's name; None for ids 5-7 (their batches' rows carry an ``unknown_codec`` error)."""
    return _NAMES[codec_id] if codec_id < len(_NAMES) else None


def display_path(path: str) -> str:
    """``path`` as valid UTF-8 text for a string column: a name that is not UTF-8 (given as
    ``str`` with surrogate escapes, ``os.fsdecode``'s) has each undecodable byte shown as U+FFFD."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "replace")


def error_text(f: Finding) -> str:
    """The ``error`` of a row for finding ``f``: verify's text line (``PATH:POSITION: KIND:
    MESSAGE``, without the count of good batches after a bad region)."""
    where = f"{f.file}:{f.position}" if f.position is not None else f.file
    return f"{where}: {f.kind}: {f.message}"


def read(task: Any, opts: Any) -> Iterator[pa.RecordBatch]:
    """The record batches of ``task`` (a :class:`~kafkatool.spark.plan.ReadTask`) for
    ``opts.kind`` ``records`` or ``batches``, each with exactly :func:`arrow_schema` of the kind."""
    if opts.kind == "records":
        return read_records(task, opts)
    if opts.kind == "batches":
        return read_batches(task, opts)
    raise ValueError(f"kafkatool.spark.rows reads the records and batches kinds, not {opts.kind!r}")


# ----------------------------------------------------------------------------- the walk

_BATCH, _REGION, _UNREADABLE = 0, 1, 2


def _walk(sl: Any, opts: Any, path: str) -> Iterator[tuple]:
    """The events of one slice, in file order: ``(_BATCH, batch, data)`` for each batch that
    starts in it, ``(_REGION, BadRegion, None)`` for each bad region, ``(_UNREADABLE, message,
    position)`` when the file cannot be opened or read (then nothing more)."""
    if getattr(sl, "error", None):
        yield _UNREADABLE, sl.error, None
        return
    seek_offset, seek_time, end_offset = opts.start_offset, opts.start_time, opts.end_offset
    log = sl.log_path
    try:
        f = open_log(log)
    except KafkaToolError as e:
        yield _UNREADABLE, e.message, None
        return
    try:
        fd = f.fileno()
        size = os.fstat(fd).st_size  # the walk's end: bytes appended meanwhile are not read
        end = size if sl.end is None else min(sl.end, size)
        if seek_offset is None and seek_time is None:
            seg = Segment(sl.base_offset, log)
        else:
            seg = Segment.at(log, base_offset=sl.base_offset)  # its indexes, for the seek
        walk = batches_and_regions(seg, fd, sl.start, end, size, offset=seek_offset, timestamp=seek_time)
        try:
            for item in walk:
                if isinstance(item, BadRegion):
                    yield _REGION, item, None
                    continue
                batch, data = item
                if end_offset is not None and batch.magic >= 2 and batch.offset >= end_offset:
                    return  # past the offsets asked for
                yield _BATCH, batch, data
        except KafkaToolError as e:  # not the bytes: the file could not be read
            yield _UNREADABLE, e.message, None
            return
        finally:
            walk.close()
    except OSError as e:
        yield _UNREADABLE, f"cannot read the file: {e.strerror or e}", None
    finally:
        f.close()


def _region_finding(path: str, region: BadRegion) -> Finding:
    return Finding(path, region.start, region.end - region.start, FindingKind(region.kind), region.message)


def _shallow_problem(b: Batch, path: str) -> Finding | None:
    """verify's finding for a batch whose records cannot be read at all: a magic above 2 or an
    invalid codec id (same kind, position, message)."""
    if b.magic <= 2 and (b.attributes & CODEC_MASK) < (4 if b.magic < 2 else 5):
        return None
    out: list[Finding] = []
    add = FindingAdder(out, path, b, 0)
    magic = b.magic
    if magic > 2:
        add(FindingKind.UNKNOWN_MAGIC, f"magic byte {magic} (Kafka parses it as v2; the CRC does not cover it)",
            "0, 1 or 2", magic, b.position + MAGIC_OFFSET, 1)
        return out[0]
    codec = b.attributes & CODEC_MASK
    if codec > 4 or (codec == 4 and magic < 2):
        add(FindingKind.UNKNOWN_CODEC, f"compression codec id {codec} is not valid with magic {magic}",
            "0-4 (zstd only with magic 2)", codec, b.position + (V2.ATTRIBUTES + 1 if magic >= 2 else LEGACY.ATTRIBUTES), 1)
        return out[0]
    return None


def _too_large(b: Batch, path: str) -> Finding:
    out: list[Finding] = []
    FindingAdder(out, path, b, 0)(FindingKind.DECOMPRESSED_TOO_LARGE, f"a batch of {b.size} bytes is too large to decode in memory")
    return out[0]


def _decode_finding(b: Batch, path: str, e: KafkaToolError) -> Finding:
    """verify ``--deep``'s finding for a batch whose records raised ``e`` (kafkatool's reference
    decoder's error: located in the batch, its kind)."""
    out: list[Finding] = []
    FindingAdder(out, path, b, 0)(error_kind(e), e.message, position=b.position + (e.position or 0))
    return out[0]


def _reference_error(b: Batch, data) -> KafkaToolError | None:
    """The error kafkatool's reference decoder (what verify ``--deep`` and ``Segment.records``
    run) raises for the records of ``b``, None when they decode."""
    try:
        for _chunk in batch_record_chunks(b, data, max_decompressed=DEFAULT_MAX_DECOMPRESSED):
            pass
    except (InvalidRecordError, CorruptRecordError) as e:
        return e
    return None


def _records_section(b: Batch, data) -> bytes | memoryview | None:
    """The uncompressed records section of v2 batch ``b`` (its bytes after the header, or its
    payload decompressed), or None when it is larger than :data:`WHOLE_BATCH_BYTES`. Raises
    the decompression's error."""
    codec = b.attributes & CODEC_MASK
    body = data[V2_HEADER_SIZE : b.size]
    if not codec:
        return body if len(body) <= WHOLE_BATCH_BYTES else None
    parts = []
    total = 0
    for piece in iter_decompress(codec, body, magic=b.magic, max_output=DEFAULT_MAX_DECOMPRESSED):
        total += len(piece)
        if total > WHOLE_BATCH_BYTES:
            return None
        parts.append(piece)
    return parts[0] if len(parts) == 1 else b"".join(parts)


# ----------------------------------------------------------------------------- records


class _RecordsChunk:
    """The rows of one slice being gathered: records as :class:`RecordColumns` plus one run of
    batch values per batch (or per part of a legacy wrapper), or error rows; flushed as
    record batches of the ``records`` schema."""

    def __init__(self, sl: Any, opts: Any, path: str) -> None:
        self.opts = opts
        self.schema = arrow_schema("records")
        self.topic = None if sl.topic is None else display_path(sl.topic)
        self.partition = sl.partition
        self.segment = path
        self.base_offset = sl.base_offset
        self.cols = RecordColumns(include_headers=opts.include_headers)
        # per run: (rows, batchPosition, batchBaseOffset, magic, codec, leaderEpoch, producerId,
        #           producerEpoch, isTransactional, isControl, crcValid, timestampType)
        self.runs = array("q")  # _RUN_FIELDS int64 per run, flat
        self.errors: list[dict] = []
        self.bounded = (opts.start_offset is not None or opts.end_offset is not None
                        or opts.start_time is not None or opts.end_time is not None)

    # -- adding

    def full(self) -> bool:
        cols = self.cols
        return cols.n >= FLUSH_ROWS or len(cols.keys.data) + len(cols.values.data) >= FLUSH_BYTES

    def add_error(self, f: Finding, b: Batch | None) -> Iterator[pa.RecordBatch]:
        """One error row (``b``: the batch it stands for, None for a bad region or a file)."""
        if self.cols.n:
            yield from self.flush()
        row: dict[str, Any] = {"error": error_text(f), "batchPosition": f.position if b is None else b.position}
        if b is not None:
            known = b.magic >= 2 or not b.attributes & CODEC_MASK  # a wrapper's base offset needs its records
            row.update(
                offset=b.offset if known else None, batchBaseOffset=b.offset if known else None,
                timestampType=b.timestamp_type, magic=b.magic, codec=_codec(b.attributes & CODEC_MASK),
                leaderEpoch=b.partition_leader_epoch, producerId=b.producer_id, producerEpoch=b.producer_epoch,
                isTransactional=b.is_transactional, isControl=b.is_control,
                crcValid=b.crc == b.computed_crc if self.opts.verify_crc else None,
            )
        if self._keep_error(row):
            self.errors.append(row)
            if len(self.errors) >= FLUSH_ERRORS:  # a file of many small bad regions: memory stays bounded
                yield from self.flush()

    def _keep_error(self, row: dict) -> bool:
        o = self.opts
        if o.start_time is not None or o.end_time is not None:
            return False  # its timestamp is null
        offset = row.get("offset")
        if o.start_offset is not None and (offset is None or offset < o.start_offset):
            return False
        if o.end_offset is not None and (offset is None or offset >= o.end_offset):
            return False
        return True

    def add_v2(self, b: Batch, section) -> None:
        """Every record of v2 batch ``b`` from its uncompressed records section (raises the
        decoder's error, the columns then unchanged)."""
        (position, _size, offset, magic, crc, attrs, _lod, bts, mts, pid, pep, bseq, count, ple, computed) = b
        cols = self.cols
        before = cols.n
        lat = attrs & TIMESTAMP_TYPE_BIT
        cols.add_v2(section, count, offset, bts, bseq, mts if lat else None)
        added = cols.n - before
        if added:
            self.runs.extend((added, position, offset, magic, attrs & CODEC_MASK, ple, pid, pep,
                              1 if attrs & TRANSACTIONAL_BIT else 0, 1 if attrs & CONTROL_BIT else 0,
                              1 if crc == computed else 0, 1 if lat else 0))

    def add_v2_records(self, b: Batch, records: list) -> None:
        """Decoded :class:`~kafkatool.record.batch.Record` s of v2 batch ``b`` (a large batch, in chunks)."""
        (position, _size, offset, magic, crc, attrs, *_rest) = b
        if not records:
            return
        self.cols.add_records(records)
        self.runs.extend((len(records), position, offset, magic, attrs & CODEC_MASK, b.partition_leader_epoch,
                          b.producer_id, b.producer_epoch, 1 if attrs & TRANSACTIONAL_BIT else 0,
                          1 if attrs & CONTROL_BIT else 0, 1 if crc == b.computed_crc else 0,
                          1 if attrs & TIMESTAMP_TYPE_BIT else 0))

    def add_legacy(self, b: Batch, records: list, base: int) -> None:
        """Decoded legacy messages of entry ``b`` (``base``: the wrapper's first offset): one run
        per stretch of messages with the same timestamp type and CRC validity."""
        if not records:
            return
        self.cols.add_records(records)
        wrapper_ok = b.crc == b.computed_crc
        wrapper_lat = b.magic == 1 and bool(b.attributes & LEGACY_TIMESTAMP_TYPE_BIT)
        codec = b.attributes & CODEC_MASK
        run_key = None
        n = 0
        for r in records:
            ttype = -1 if r.magic == 0 else (1 if wrapper_lat or r.attributes & LEGACY_TIMESTAMP_TYPE_BIT else 0)
            ok = 1 if wrapper_ok and r.crc_valid is not False else 0
            key = (ttype, ok)
            if key != run_key:
                if n:
                    self._legacy_run(b, base, codec, n, run_key)
                run_key, n = key, 0
            n += 1
        self._legacy_run(b, base, codec, n, run_key)

    def _legacy_run(self, b: Batch, base: int, codec: int, n: int, key: tuple) -> None:
        ttype, ok = key
        self.runs.extend((n, b.position, base, b.magic, codec, -1, -1, -1, 0, 0, ok, ttype))

    # -- flushing

    def flush(self) -> Iterator[pa.RecordBatch]:
        """The gathered rows as record batches, in file order: the error rows, then the records
        that came after them (:meth:`add_error` flushes any records before it adds an error)."""
        if self.errors:
            rows, self.errors = self.errors, []
            yield self._errors_batch(rows)
        if self.cols.n:
            rb = self._records_batch()
            if rb.num_rows:
                yield rb

    def _const(self, value, n: int, type_: pa.DataType) -> pa.Array:
        return pa.repeat(pa.scalar(value, type_), n)

    def _records_batch(self) -> pa.RecordBatch:
        cols, runs = self.cols, self.runs
        n = cols.n
        self.cols = RecordColumns(include_headers=self.opts.include_headers)
        self.runs = array("q")
        meta = np.frombuffer(runs, dtype=np.int64).reshape(-1, _RUN_FIELDS)
        counts = meta[:, 0]

        def rep(j: int, dtype) -> np.ndarray:
            return np.repeat(meta[:, j].astype(dtype), counts)

        offsets = np.frombuffer(cols.offsets, dtype="<i8")
        ms = np.frombuffer(cols.timestamps, dtype="<i8")
        timestamp = _timestamps(ms)
        if self.opts.include_headers and cols.header_null_count < n:
            headers = _headers(cols, n)
        else:
            headers = pa.nulls(n, HEADERS_TYPE)
        if self.opts.verify_crc:
            crc_valid = pa.array(rep(10, np.bool_))
        else:
            crc_valid = pa.nulls(n, pa.bool_())
        arrays = [
            _binary(cols.keys, n, pa.binary()),
            _binary(cols.values, n, pa.binary()),
            self._const(self.topic, n, pa.string()),
            self._const(self.partition, n, pa.int32()),
            pa.array(offsets),
            timestamp,
            pa.array(rep(11, np.int32)),
            headers,
            self._const(self.segment, n, pa.string()),
            self._const(self.base_offset, n, pa.int64()),
            pa.array(rep(1, np.int64)),
            pa.array(rep(2, np.int64)),
            pa.array(rep(3, np.int32)),
            _CODEC_NAMES.take(pa.array(rep(4, np.int8))),
            pa.array(rep(5, np.int32)),
            pa.array(rep(6, np.int64)),
            pa.array(rep(7, np.int32)),
            pa.array(np.frombuffer(cols.sequences, dtype="<i4")),
            pa.array(rep(8, np.bool_)),
            pa.array(rep(9, np.bool_)),
            crc_valid,
            pa.nulls(n, pa.string()),
        ]
        rb = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        if self.bounded:
            o = self.opts
            mask = np.ones(n, dtype=np.bool_)
            if o.start_offset is not None:
                mask &= offsets >= o.start_offset
            if o.end_offset is not None:
                mask &= offsets < o.end_offset
            if o.start_time is not None:
                mask &= ms >= o.start_time
            if o.end_time is not None:
                mask &= ms < o.end_time
            if not mask.all():
                rb = rb.filter(pa.array(mask))
        return rb

    def _errors_batch(self, rows: list[dict]) -> pa.RecordBatch:
        constant = {"topic": self.topic, "partition": self.partition, "segment": self.segment,
                    "segmentBaseOffset": self.base_offset}
        arrays = []
        for field in self.schema:
            name = field.name
            if name in constant:
                arrays.append(self._const(constant[name], len(rows), field.type))
            else:
                arrays.append(pa.array([r.get(name) for r in rows], type=field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _binary(col, n: int, type_: pa.DataType) -> pa.Array:
    """A :class:`~kafkatool.record.columns.BinaryColumn` as an Arrow array, zero-copy."""
    validity = pa.py_buffer(col.validity) if col.null_count else None
    return pa.Array.from_buffers(type_, n, [validity, pa.py_buffer(col.offsets), pa.py_buffer(col.data)],
                                 null_count=col.null_count)


def _headers(cols: RecordColumns, n: int) -> pa.Array:
    nh = len(cols.header_keys)
    keys = _binary(cols.header_keys, nh, pa.string())
    values = _binary(cols.header_values, nh, pa.binary())
    struct = pa.StructArray.from_arrays([keys, values], fields=list(HEADERS_TYPE.value_type))
    validity = pa.py_buffer(cols.header_validity) if cols.header_null_count else None
    return pa.Array.from_buffers(HEADERS_TYPE, n, [validity, pa.py_buffer(cols.header_offsets)],
                                 null_count=cols.header_null_count, children=[struct])


def _timestamps(ms: np.ndarray) -> pa.Array:
    """Milliseconds as Arrow ``timestamp[us, UTC]``; a value microseconds cannot hold is null."""
    if len(ms) and (ms.max() > _MAX_MS or ms.min() < -_MAX_MS):
        bad = (ms > _MAX_MS) | (ms < -_MAX_MS)
        return pa.array(np.where(bad, 0, ms) * 1000, type=TIMESTAMP_TYPE, mask=bad)
    return pa.array(ms * 1000, type=TIMESTAMP_TYPE)


def read_records(task: Any, opts: Any) -> Iterator[pa.RecordBatch]:
    """The ``records`` rows of every slice of ``task``, in order (see the module docstring)."""
    for sl in task.slices:
        yield from _slice_records(sl, opts)


def _slice_records(sl: Any, opts: Any) -> Iterator[pa.RecordBatch]:
    path = display_path(sl.log_path)
    chunk = _RecordsChunk(sl, opts, path)
    whole_records, whole_bytes = WHOLE_BATCH_RECORDS, WHOLE_BATCH_BYTES
    flush_rows, flush_bytes = FLUSH_ROWS, FLUSH_BYTES
    for event, a, b in _walk(sl, opts, path):
        if event == _BATCH:
            # the usual batch, inline: a v2 batch, uncompressed or not
            # (its records decoded whole by RecordColumns); everything else goes to _add_batch
            (position, size, offset, magic, crc, attrs, _lod, bts, mts, pid, pep, bseq, count, ple, computed) = a
            codec = attrs & CODEC_MASK
            if (magic == 2 and codec <= 4 and b is not None and 0 < count <= whole_records
                    and (codec or size - V2_HEADER_SIZE <= whole_bytes)):
                cols = chunk.cols
                whole = True
                try:
                    section = _records_section(a, b) if codec else b[V2_HEADER_SIZE:]
                    if section is None:
                        whole = False  # too large once decompressed: _add_batch decodes it in chunks
                    else:
                        lat = attrs & TIMESTAMP_TYPE_BIT
                        cols.add_v2(section, count, offset, bts, bseq, mts if lat else None)
                except (InvalidRecordError, CorruptRecordError):
                    section = None  # _add_batch words the error as verify does
                if section is not None:  # add_v2 appended `count` rows (it appends all or none)
                    chunk.runs.extend((count, position, offset, magic, codec, ple, pid, pep,
                                       1 if attrs & TRANSACTIONAL_BIT else 0, 1 if attrs & CONTROL_BIT else 0,
                                       1 if crc == computed else 0, 1 if lat else 0))
                    if cols.n >= flush_rows or len(cols.keys.data) + len(cols.values.data) >= flush_bytes:
                        yield from chunk.flush()
                    continue
                yield from _add_batch(chunk, a, b, path, whole)
            else:
                yield from _add_batch(chunk, a, b, path)
            if chunk.full():
                yield from chunk.flush()
        elif event == _REGION:
            yield from chunk.add_error(_region_finding(path, a), None)
        else:
            yield from chunk.add_error(Finding(path, b, None, FindingKind.UNREADABLE, a), None)
    yield from chunk.flush()


def _add_batch(chunk: _RecordsChunk, b: Batch, data, path: str, whole: bool = True) -> Iterator[pa.RecordBatch]:
    """The rows of one batch into ``chunk`` (or its error row); yields what must be flushed on the
    way. ``whole`` False: a v2 batch known to be too large to decode whole."""
    problem = _shallow_problem(b, path)
    if problem is None and data is None:
        problem = _too_large(b, path)
    if problem is not None:
        yield from chunk.add_error(problem, b)
        return
    if b.magic >= 2:
        if b.count == 0:
            return  # bytes after a zero-count header are never examined (spec §17 B.11), as the reference does
        if whole and b.count <= WHOLE_BATCH_RECORDS:
            try:
                section = _records_section(b, data)
                if section is not None:
                    chunk.add_v2(b, section)
                    return
            except (InvalidRecordError, CorruptRecordError) as e:
                # the reference decoder's error, exactly as verify --deep words it
                yield from chunk.add_error(_decode_finding(b, path, _reference_error(b, data) or e), b)
                return
        # too large to decode whole: check it all first (no rows for a batch that fails), then in chunks
        e = _reference_error(b, data)
        if e is not None:
            yield from chunk.add_error(_decode_finding(b, path, e), b)
            return
        for records in batch_record_chunks(b, data, max_decompressed=DEFAULT_MAX_DECOMPRESSED):
            chunk.add_v2_records(b, records)
            if chunk.full():
                yield from chunk.flush()
        return
    # legacy: a wrapper's errors all come before its first message (it is checked whole first)
    base = None
    try:
        for records in batch_record_chunks(b, data, max_decompressed=DEFAULT_MAX_DECOMPRESSED):
            if base is None and records:
                base = records[0].offset
            chunk.add_legacy(b, records, base)
            if chunk.full():
                yield from chunk.flush()
    except (InvalidRecordError, CorruptRecordError) as e:
        yield from chunk.add_error(_decode_finding(b, path, e), b)


# ----------------------------------------------------------------------------- batches


def read_batches(task: Any, opts: Any) -> Iterator[pa.RecordBatch]:
    """The ``batches`` rows of every slice of ``task``, in order (see the module docstring)."""
    for sl in task.slices:
        yield from _slice_batches(sl, opts)


_BATCH_FIELDS = ("position", "size", "baseOffset", "lastOffset", "magic", "codec", "attributes", "timestampType",
                 "baseTimestamp", "maxTimestamp", "leaderEpoch", "producerId", "producerEpoch", "baseSequence",
                 "lastSequence", "recordCount", "isTransactional", "isControl", "storedCrc", "computedCrc",
                 "crcValid", "error", "errorKind")


def _us(ms: int) -> int | None:
    return ms * 1000 if -_MAX_MS <= ms <= _MAX_MS else None


def _slice_batches(sl: Any, opts: Any) -> Iterator[pa.RecordBatch]:
    path = display_path(sl.log_path)
    schema = arrow_schema("batches")
    topic = None if sl.topic is None else display_path(sl.topic)
    const = (topic, sl.partition, path, sl.base_offset)
    rows: list[tuple] = []
    verify_crc, deep = opts.verify_crc, opts.deep
    so, eo, st, et = opts.start_offset, opts.end_offset, opts.start_time, opts.end_time
    bounded = so is not None or eo is not None or st is not None or et is not None
    scratch = RecordColumns(include_headers=False) if deep else None

    def flush() -> pa.RecordBatch:
        columns = list(zip(*rows))
        n = len(rows)
        arrays = [pa.repeat(pa.scalar(v, f.type), n) for v, f in zip(const, schema)]
        arrays += [pa.array(col, type=f.type) for col, f in zip(columns, list(schema)[len(const):])]
        rows.clear()
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    for event, a, b in _walk(sl, opts, path):
        if event == _BATCH:
            row = _batch_row(a, b, path, verify_crc, deep, scratch)
            if bounded:
                base, last, max_ts = row[2], row[3], a.max_timestamp
                if so is not None and last < so or eo is not None and (base is None or base >= eo):
                    continue
                if st is not None and max_ts < st or et is not None and max_ts >= et:
                    continue
        else:
            if event == _REGION:
                f = _region_finding(path, a)
            else:
                f = Finding(path, b, None, FindingKind.UNREADABLE, a)
            if bounded:
                continue  # no offsets, no timestamp: outside any bound
            row = (f.position, f.length) + (None,) * 19 + (error_text(f), str(f.kind))
        rows.append(row)
        if len(rows) >= FLUSH_ROWS:
            yield flush()
    if rows:
        yield flush()


def _batch_row(b: Batch, data, path: str, verify_crc: bool, deep: bool, scratch: RecordColumns | None) -> tuple:
    """The ``batches`` row of one batch (the columns after the four slice constants)."""
    (position, size, offset, magic, crc, attrs, _lod, bts, mts, pid, pep, bseq, count, ple, computed) = b
    codec = attrs & CODEC_MASK
    base: int | None = offset
    record_count = count
    problem = _shallow_problem(b, path)
    if magic < 2:
        record_count = None if codec else 1
        if codec:
            base = None  # a wrapper's first offset is its first inner message's
    if problem is None and deep:
        if data is None:
            problem = _too_large(b, path)
        elif magic >= 2:
            problem = _check_v2(b, data, path, scratch)
        else:
            try:
                n = 0
                for records in batch_record_chunks(b, data, max_decompressed=DEFAULT_MAX_DECOMPRESSED):
                    if n == 0 and records:
                        base = records[0].offset
                    n += len(records)
                record_count = n
            except (InvalidRecordError, CorruptRecordError) as e:
                problem = _decode_finding(b, path, e)
    return (
        position, size, base, b.last_offset, magic, _codec(codec), attrs, b.timestamp_type,
        _us(bts), _us(mts), ple, pid, pep, bseq, b.last_sequence, record_count,
        b.is_transactional, b.is_control, crc, computed if verify_crc else None,
        crc == computed if verify_crc else None,
        None if problem is None else error_text(problem), None if problem is None else str(problem.kind),
    )


def _check_v2(b: Batch, data, path: str, scratch: RecordColumns) -> Finding | None:
    """verify ``--deep``'s decoding finding for v2 batch ``b``, None when its records decode."""
    if b.count == 0:
        return None
    try:
        if b.count <= WHOLE_BATCH_RECORDS:
            section = _records_section(b, data)
            if section is not None:
                # (decoded to check them, then dropped: the columns are emptied now and then, not
                # after every batch, which would cost more than decoding a small batch)
                scratch.add_v2(section, b.count, b.offset, b.base_timestamp, b.base_sequence, None)
                if scratch.n >= FLUSH_ROWS or len(scratch.keys.data) + len(scratch.values.data) >= FLUSH_BYTES:
                    scratch.clear()
                return None
    except (InvalidRecordError, CorruptRecordError) as e:
        return _decode_finding(b, path, _reference_error(b, data) or e)
    e = _reference_error(b, data)
    return None if e is None else _decode_finding(b, path, e)
