"""The conversion rules (spec §13): one source entry in, the output entries out.

:class:`BatchConverter` is fed the entries of a segment in file order and returns, for each, the
output entries (a v2 batch, or legacy messages/wrappers, each with its log overhead) that are
complete at that point. It never reads or writes a file; the segment layer
(:mod:`kafkatool.convert.source`) walks the ``.log`` and applies the damage policy, and counts
what is lost in the :class:`~kafkatool.convert.options.Loss` it is given.

The rules, by source and target magic (offsets are always kept):

* **v2 → v2**: one output batch per source batch, every header field kept (producer id/epoch, base
  sequence, transactional and control flags, leader epoch, delete horizon, timestamp type, base
  and max timestamps, lastOffsetDelta); only the codec bits, the records section, batchLength and
  the CRC change. The records section is decompressed and recompressed, never decoded (the fast
  path); same codec: the entry's bytes, unchanged. Control batches stay uncompressed, and so do
  empty (compacted, count 0) batches: codec none and no records section, as Kafka's
  ``writeEmptyHeader`` writes one (an empty section under a codec's bits is no valid stream).
* **v2 → v0/v1**: control batches dropped; the records of a batch become one legacy message each
  (uncompressed target) or ONE wrapper (compressed target) whose offset is the last record's, with
  v1 inner offsets relative to the first record and v0 ones absolute. Headers, producer fields,
  the leader epoch and the transactional flag are dropped (counted), v0 loses timestamps (counted).
  A LogAppendTime batch gives v1 messages (inner and wrapper) carrying its maxTimestamp, with
  attribute bit 3 set on each. A batch with no records left is skipped (counted).
* **v0/v1 → v2**: a compressed wrapper becomes one v2 batch; consecutive uncompressed messages are
  coalesced into one v2 batch while the whole output batch (log overhead included) stays within
  ``max_batch_bytes`` (a batch of exactly that size fits; one record larger than it is a batch on
  its own). A run ends at a change of magic or timestamp type, at a LogAppendTime message whose
  timestamp differs from the run's (a v2 batch has one log-append time), and at an offset that
  does not follow the run's last one. Timestamps are copied (v0: -1), producer fields and leader
  epoch are -1, the codec is ``options.codec`` or the source's.
* ``level``: a codec kept at an asked level is compressed again (``--compression zstd --level 19``
  on zstd batches); without a level, the same codec keeps the bytes.
* **v0 ↔ v1** (and a legacy codec change): same magic and codec, the entry's bytes unchanged;
  otherwise re-encoded at the target magic. A wrapper stays one wrapper; uncompressed messages
  stay one message each, or are coalesced as above into one wrapper when a codec is asked
  (measured on the uncompressed inner messages plus the wrapper's overhead).

A codec the target cannot take (zstd below v2: asked, or kept from a zstd v2 batch) raises a
located :class:`~kafkatool.errors.KafkaToolError` of kind ``"refused"`` (``plan_convert`` refuses
it before anything is written; this is the guard behind it).

``dry=True`` counts exactly what a real run counts (it decodes and decompresses what a real run
does, so a batch that fails, fails there too) and skips encoding and compression.
``salvaged=True`` (a batch whose CRC failed): its records are decoded (they must decode) and it is
always re-encoded, so it gets a new CRC.
"""

from __future__ import annotations

import struct
from concurrent.futures import Executor, Future
from functools import partial
from operator import itemgetter
from typing import Callable, Iterable, Sequence

from kafkatool.convert.aborted import AbortedSet
from kafkatool.convert.options import ConvertOptions, Loss
from kafkatool.errors import CompressionError, InvalidRecordError, KafkaToolError
from kafkatool.record.batch import LOG_APPEND_TIME, Batch, Record
from kafkatool.record.compression import Codec, compress, decompress
from kafkatool.record.encode import legacy_messages, legacy_wrapper, legacy_wrapper_as_v2, v2_batch, v2_records
from kafkatool.record.layout import (
    CODEC_MASK,
    INT32_MAX,
    LEGACY,
    LEGACY_TIMESTAMP_TYPE_BIT,
    LOG_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    TIMESTAMP_TYPE_BIT,
    V2,
    V2_HEADER_SIZE,
)
from kafkatool.record.records import batch_record_chunks
from kafkatool.record.varint import size_of_varint, size_of_varlong

__all__ = ["BatchConverter", "v2_record_size"]

_I32 = struct.Struct(">i")
_timestamp = itemgetter(1)  # Record fields, read in bulk (map) on the per-record paths
_headers = itemgetter(4)
_crc_valid = itemgetter(8)


def _up_converted_frame(base: int, last: int, base_ts: int, max_ts: int, codec: int, lat: int | None,
                        count: int) -> Callable[[bytes], bytes]:
    """The v2 framing of up-converted legacy records (spec §13: producer fields and the leader
    epoch -1, the wrapper's timestamp type): a function of the records section."""
    return partial(
        v2_batch,
        base_offset=base,
        last_offset_delta=last - base,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        attributes=codec | (TIMESTAMP_TYPE_BIT if lat is not None else 0),
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        partition_leader_epoch=-1,
        count=count,
    )


def _compress_and_frame(codec: int, body: bytes, magic: int, level: int | None, frame: Callable[[bytes], bytes]) -> bytes:
    """One output entry: ``body`` compressed with ``codec`` (Kafka's framing for ``magic``), then framed."""
    return frame(compress(codec, body, magic=magic, level=level))


def v2_record_size(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None) -> int:
    """Bytes one v2 record without headers takes in a records section (§4.2), its length
    varint included: what :func:`kafkatool.record.encode.v2_records` writes for it."""
    body = 1 + size_of_varlong(timestamp_delta) + size_of_varint(offset_delta) + 1  # attributes ... header count 0
    body += 1 if key is None else size_of_varint(len(key)) + len(key)
    body += 1 if value is None else size_of_varint(len(value)) + len(value)
    return size_of_varint(body) + body


def _legacy_message_size(magic: int, key: bytes | None, value: bytes | None) -> int:
    """Bytes one legacy message takes with its log overhead (§5.1)."""
    size = LOG_OVERHEAD + (RECORD_OVERHEAD_V1 if magic == 1 else RECORD_OVERHEAD_V0)
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    return size


def _split_messages(buf: bytes) -> list[bytes]:
    """The legacy messages of ``buf`` (written by ``legacy_messages``), one bytes each."""
    out = []
    pos = 0
    end = len(buf)
    mv = memoryview(buf)
    size_at = _I32.unpack_from
    while pos < end:
        nxt = pos + LOG_OVERHEAD + size_at(buf, pos + LEGACY.SIZE_FIELD)[0]
        out.append(bytes(mv[pos:nxt]))
        pos = nxt
    return out


class _Run:
    """Consecutive uncompressed legacy messages waiting to become one output entry."""

    __slots__ = ("key", "records", "count", "size", "base_offset", "base_timestamp", "last_offset", "max_timestamp")

    def __init__(self, key: tuple, first: Record, size: int, keep: bool) -> None:
        self.key = key  # (source magic, timestamp type, log-append time or None)
        self.records: list[Record] | None = [first] if keep else None
        self.count = 1
        self.size = size
        self.base_offset = first.offset
        self.base_timestamp = first.timestamp
        self.last_offset = first.offset
        self.max_timestamp = first.timestamp


class BatchConverter:
    """Applies the conversion rules (module docstring) to a segment's entries, one at a time.

    ``loss`` is added to as entries are fed. ``aborted`` (from
    :func:`kafkatool.convert.aborted.find_aborted`) tells which transactional batches belong to
    aborted transactions: needed for ``--drop-aborted`` and to count the aborted records a
    down-conversion makes readable; None: no batch is taken as aborted. ``path`` locates errors.
    Memory: one source batch and its decompressed records, plus a pending run of at most
    ``options.max_batch_bytes``. ``pool`` (an executor) compresses output entries while the
    next batches are converted (:meth:`feed`); ``dry`` counts without encoding anything.
    """

    def __init__(
        self,
        options: ConvertOptions,
        loss: Loss,
        *,
        aborted: AbortedSet | None = None,
        path: str = "",
        dry: bool = False,
        pool: Executor | None = None,
    ) -> None:
        if options.magic not in (0, 1, 2):
            raise KafkaToolError(f"unknown target magic {options.magic} (expected 0, 1 or 2)", kind="refused")
        self.options = options
        self.loss = loss
        self.aborted = aborted
        self.path = path
        self.dry = dry
        self.pool = pool
        self._run: _Run | None = None
        self._run_codec = Codec.NONE
        self._max_decompressed = options.max_decompressed_bytes

    # ------------------------------------------------------------------ entry points
    def feed(self, batch: Batch, data: bytes | memoryview, *, salvaged: bool = False) -> list[bytes]:
        """The output entries complete after ``batch`` (its whole entry in ``data``), in offset
        order: a pending run of legacy messages comes first when ``batch`` ends it. Raises the
        located :class:`~kafkatool.errors.KafkaToolError` of a batch that does not convert
        (records that do not decode, a decompression failure, a codec the target refuses).

        With a ``pool``, an entry to be compressed is a :class:`~concurrent.futures.Future` of its
        bytes (everything that can fail has been checked before it is submitted): the caller
        takes the results in order (:func:`kafkatool.convert.segment.convert_segment` keeps a
        bounded window of them)."""
        counters = self.loss.counters()
        run = self._run
        run_state = None if run is None else (run.count, run.size, run.last_offset, run.max_timestamp)
        self.loss.batches_in += 1
        try:
            if batch.magic >= 2:
                out = self.flush() if self._run is not None else []
                if self.options.magic >= 2:
                    out += self._v2_to_v2(batch, data, salvaged)
                else:
                    out += self._v2_to_legacy(batch, data)
                return out
            return self._from_legacy(batch, data, salvaged)
        except KafkaToolError as e:
            # atomic: the caller may skip this entry (a damaged range) or feed it again as
            # salvaged, so nothing of it stays counted and a pending run is as it was
            self.loss.restore(counters)
            self._run = run
            if run is not None and run_state is not None:
                run.count, run.size, run.last_offset, run.max_timestamp = run_state
                if run.records is not None:
                    del run.records[run.count :]
            raise e.at(self.path or None, batch.position) from e.__cause__

    def flush(self) -> list[bytes]:
        """The pending run of coalesced legacy messages as its output entry (call at the end of a
        segment: a run never spans two segments); [] when there is none."""
        run = self._run
        if run is None:
            return []
        self._run = None
        return self._emit_run(run)

    # ------------------------------------------------------------------ helpers
    def _target_codec(self, source_codec: int) -> int:
        """The codec of the output (errors positioned at the entry start, as :meth:`feed` locates them)."""
        codec = source_codec if self.options.codec is None else self.options.codec
        if codec == Codec.ZSTD and self.options.magic < 2:
            asked = "asked" if self.options.codec is not None else "kept from the source batch"
            raise KafkaToolError(
                f"ZStandard compression is not supported for magic {self.options.magic} (zstd {asked}; "
                "name another codec with --compression)",
                position=0,
                kind="refused",
            )
        if codec > Codec.ZSTD:
            raise InvalidRecordError(f"Unknown compression type id: {codec}", position=0)
        return codec

    def _chunks(self, batch: Batch, data: bytes | memoryview) -> Iterable[list[Record]]:
        return batch_record_chunks(batch, data, max_decompressed=self._max_decompressed)

    def _is_aborted(self, batch: Batch) -> bool:
        return self.aborted is not None and batch.is_transactional and self.aborted.is_aborted(batch)

    # ------------------------------------------------------------------ v2 → v2
    def _v2_to_v2(self, batch: Batch, data: bytes | memoryview, salvaged: bool) -> list[bytes]:
        loss = self.loss
        count = batch.count
        if count is None or count < 0:
            raise InvalidRecordError(
                f"Found invalid record count {count} in magic v2 batch", position=V2.RECORDS_COUNT, kind="record_count_mismatch"
            )
        if self.options.drop_aborted and self._is_aborted(batch):
            loss.records_in += count
            loss.aborted_records_dropped += count
            return []
        source_codec = batch.attributes & CODEC_MASK
        # control batches stay uncompressed; so do empty (compacted) ones: Kafka writes them with
        # CompressionType.NONE (DefaultRecordBatch.writeEmptyHeader), and an empty records section
        # under a codec's bits is no valid stream for a consumer (kafka-python, aiokafka fail on it)
        codec = Codec.NONE if batch.is_control or count == 0 else self._target_codec(source_codec)
        loss.records_in += count
        loss.records_out += count
        loss.batches_out += 1
        recompress = count > 0 and self._recompress(source_codec, codec)
        if codec == source_codec and not recompress and not salvaged:
            return [] if self.dry else [bytes(data)]
        mv = memoryview(data)[V2_HEADER_SIZE : batch.size]
        if count == 0:
            body: bytes | memoryview = b""  # writeEmptyHeader: the records section is never read
        elif not recompress:
            body = mv  # salvaged, same codec: the section kept, the records checked below
        else:
            body = self._decompress(source_codec, mv)
        if salvaged and count:
            for _chunk in self._chunks(batch, data):  # the records must decode
                pass
        if self.dry:
            return []
        frame = partial(
            v2_batch,
            base_offset=batch.offset,
            last_offset_delta=batch.last_offset_delta,
            base_timestamp=batch.base_timestamp,
            max_timestamp=batch.max_timestamp,
            attributes=(batch.attributes & ~CODEC_MASK) | codec,
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            partition_leader_epoch=batch.partition_leader_epoch,
            count=count,
        )
        if recompress and codec != Codec.NONE:
            return [self._compressed(codec, bytes(body), 2, frame)]
        return [frame(body)]

    def _recompress(self, source_codec: int, codec: int) -> bool:
        """Whether a compressed section must be made again: another codec, or a ``--level`` asked
        (the same codec at an asked level is compressed again; without one, the bytes are kept)."""
        return codec != source_codec or (self.options.level is not None and codec != Codec.NONE)

    def _compressed(self, codec: int, body: bytes, magic: int, frame: Callable[[bytes], bytes]) -> "bytes | Future[bytes]":
        """``frame(compress(body))``: the output entry whose records section (or wrapper value) is
        ``body`` compressed. With a :attr:`pool`, a :class:`~concurrent.futures.Future` of it: the
        codecs release the GIL, so the next batches are converted while this one is compressed."""
        job = partial(_compress_and_frame, codec, body, magic, self.options.level, frame)
        return job() if self.pool is None else self.pool.submit(job)

    def _decompress(self, codec: int, section: memoryview) -> bytes:
        if codec == Codec.NONE:
            return bytes(section)
        try:
            return decompress(codec, section, magic=2, max_output=self._max_decompressed)
        except CompressionError as e:
            raise type(e)(e.message, position=V2_HEADER_SIZE, kind=e.kind) from None

    # ------------------------------------------------------------------ v2 → v0/v1
    def _v2_to_legacy(self, batch: Batch, data: bytes | memoryview) -> list[bytes]:
        loss = self.loss
        count = batch.count
        if batch.is_control:
            loss.control_batches_dropped += 1
            loss.control_records_dropped += max(count or 0, 0)
            loss.records_in += max(count or 0, 0)
            return []
        aborted = self._is_aborted(batch)
        if aborted and self.options.drop_aborted:
            loss.records_in += count
            loss.aborted_records_dropped += count
            return []
        magic = self.options.magic
        codec = self._target_codec(batch.attributes & CODEC_MASK)
        if count == 0:
            loss.empty_batches_dropped += 1
            return []
        if (
            batch.producer_id != -1
            or batch.producer_epoch != -1
            or batch.base_sequence != -1
            or batch.partition_leader_epoch != -1
            or batch.is_transactional
        ):
            loss.producer_fields_dropped += 1
        lat = batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None
        ts_bit = LEGACY_TIMESTAMP_TYPE_BIT if magic == 1 and lat is not None else 0
        dry = self.dry
        out: list[bytes] = []
        inner: list[bytes] = []
        first = last = None
        max_ts = -1
        n = 0
        for chunk in self._chunks(batch, data):
            if not chunk:
                continue
            n += len(chunk)
            with_headers = [h for h in map(_headers, chunk) if h]
            if with_headers:
                loss.headers_dropped += len(with_headers)
                loss.header_count += sum(map(len, with_headers))
            if magic == 0:
                loss.timestamps_dropped += len(chunk) - list(map(_timestamp, chunk)).count(-1)
            if first is None:
                first = chunk[0].offset
            last = chunk[-1].offset
            if dry:
                continue
            if codec == Codec.NONE:
                out += _split_messages(legacy_messages(chunk, magic, timestamp=lat if magic == 1 else None, attributes=ts_bit))
            else:
                if magic == 1 and lat is None:
                    max_ts = max(max_ts, max(map(_timestamp, chunk)))
                inner.append(
                    legacy_messages(chunk, magic, relative_to=first if magic == 1 else None,
                                    timestamp=lat if magic == 1 else None, attributes=ts_bit)
                )
        loss.records_in += n
        loss.records_out += n
        if aborted:
            loss.aborted_records_kept += n
        if codec == Codec.NONE:
            loss.batches_out += n
            return out
        loss.batches_out += 1
        if dry:
            return []
        wts = -1 if magic == 0 else (lat if lat is not None else max_ts)
        frame = partial(legacy_wrapper, magic=magic, offset=last, timestamp=wts, attributes=codec | ts_bit)
        return [self._compressed(codec, b"".join(inner), magic, frame)]

    # ------------------------------------------------------------------ v0/v1 → any
    def _from_legacy(self, batch: Batch, data: bytes | memoryview, salvaged: bool) -> list[bytes]:
        loss = self.loss
        options = self.options
        magic = options.magic
        source_codec = batch.attributes & CODEC_MASK
        codec = self._target_codec(source_codec)
        lat = batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None
        if source_codec == Codec.NONE and codec != Codec.NONE or (source_codec == Codec.NONE and magic == 2):
            # an uncompressed message: joins (or starts) a run
            records = [r for chunk in self._chunks(batch, data) for r in chunk]  # exactly one
            loss.records_in += len(records)
            out: list[bytes] = []
            for r in records:
                out += self._add_to_run(batch, r, lat, codec)
            return out
        out = self.flush() if self._run is not None else []
        if magic == batch.magic and not self._recompress(source_codec, codec) and not salvaged:
            n = sum(len(chunk) for chunk in self._chunks(batch, data))  # counted, and checked
            loss.records_in += n
            loss.records_out += n
            loss.batches_out += 1
            if not self.dry:
                out.append(bytes(data))
            return out
        if magic == 2 and source_codec != Codec.NONE and not salvaged:
            # a compressed wrapper to v2: its records as one v2 records section in C, no object
            # per record (None for anything unusual: the general path below raises or handles it)
            fast = legacy_wrapper_as_v2(data, max_decompressed=self._max_decompressed)
            if fast is not None:
                body, n, base, last, bts, mts, _lat = fast
                loss.records_in += n
                loss.records_out += n
                loss.batches_out += 1
                if self.dry:
                    return out
                frame = _up_converted_frame(base, last, bts, mts, codec, lat, n)
                out.append(self._compressed(codec, body, 2, frame) if codec != Codec.NONE else frame(body))
                return out
        records: list[Record] = []
        for chunk in self._chunks(batch, data):
            records += chunk
        if source_codec != Codec.NONE and not salvaged:
            self._check_inner_crcs(records)
        loss.records_in += len(records)
        if magic == 0:
            loss.timestamps_dropped += len(records) - list(map(_timestamp, records)).count(-1)
        if magic == 2:
            out += self._v2_of(records, codec, lat)
        else:
            out += self._legacy_of(records, magic, codec, lat)
        return out

    @staticmethod
    def _check_inner_crcs(records: Sequence[Record]) -> None:
        """Refuse to re-encode a wrapper whose inner messages fail their own CRC (§5.2): a new
        CRC would launder the damage (``--salvage`` accepts it, listed)."""
        if False not in map(_crc_valid, records):
            return
        for r in records:
            if r.crc_valid is False:
                raise KafkaToolError(
                    f"inner message {r.offset} fails its CRC (stored crc {r.crc}, not the crc computed over its "
                    "bytes) inside a wrapper whose outer CRC is valid",
                    position=0,
                    found=r.crc,
                    kind="inner_crc_mismatch",
                )

    def _legacy_of(self, records: Sequence[Record], magic: int, codec: int, lat: int | None) -> list[bytes]:
        """Legacy output of ``records``: one message each (codec none) or one wrapper."""
        loss = self.loss
        n = len(records)
        loss.records_out += n
        if magic == 0:
            lat = None
        ts_bit = LEGACY_TIMESTAMP_TYPE_BIT if lat is not None else 0
        if codec == Codec.NONE:
            loss.batches_out += n
            if self.dry:
                return []
            return _split_messages(legacy_messages(records, magic, timestamp=lat, attributes=ts_bit))
        loss.batches_out += 1
        if self.dry:
            return []
        first = records[0].offset
        inner = legacy_messages(records, magic, relative_to=first if magic == 1 else None, timestamp=lat, attributes=ts_bit)
        if magic == 0:
            wts = -1
        else:
            wts = lat if lat is not None else max(map(_timestamp, records))
        frame = partial(legacy_wrapper, magic=magic, offset=records[-1].offset, timestamp=wts, attributes=codec | ts_bit)
        return [self._compressed(codec, inner, magic, frame)]

    def _v2_of(self, records: Sequence[Record], codec: int, lat: int | None) -> list[bytes]:
        """One v2 batch of legacy ``records`` (spec §13: producer fields and leader epoch -1)."""
        loss = self.loss
        loss.records_out += len(records)
        loss.batches_out += 1
        if self.dry:
            return []
        base = records[0].offset
        bts = records[0].timestamp
        body = v2_records(records, base, bts, headers=False)
        if lat is not None:
            mts = lat
        else:
            mts = max(map(_timestamp, records))
        frame = _up_converted_frame(base, records[-1].offset, bts, mts, codec, lat, len(records))
        return [self._compressed(codec, body, 2, frame) if codec != Codec.NONE else frame(body)]

    # ------------------------------------------------------------------ runs
    def _add_to_run(self, batch: Batch, r: Record, lat: int | None, codec: int) -> list[bytes]:
        """Add one uncompressed legacy message's record to the run; the entries a run it ends gives."""
        out: list[bytes] = []
        magic = self.options.magic
        if magic < 2 and codec == Codec.NONE:  # pragma: no cover - callers send these elsewhere
            raise AssertionError("uncompressed legacy target needs no run")
        if magic == 0:
            self.loss.timestamps_dropped += r.timestamp != -1
        key = (batch.magic, batch.timestamp_type, lat)
        run = self._run
        if run is not None:
            if run.key == key and r.offset > run.last_offset and r.offset - run.base_offset <= INT32_MAX:
                if magic == 2:
                    size = v2_record_size(r.offset - run.base_offset, r.timestamp - run.base_timestamp, r.key, r.value)
                else:
                    size = _legacy_message_size(magic, r.key, r.value)
                if run.size + size <= self.options.max_batch_bytes:
                    run.size += size
                    run.count += 1
                    run.last_offset = r.offset
                    if r.timestamp > run.max_timestamp:
                        run.max_timestamp = r.timestamp
                    if run.records is not None:
                        run.records.append(r)
                    return out
            out = self.flush()
        if magic == 2:
            size = V2_HEADER_SIZE + v2_record_size(0, 0, r.key, r.value)
        else:  # a wrapper: its own overhead, then the inner message
            size = LOG_OVERHEAD + (RECORD_OVERHEAD_V1 if magic == 1 else RECORD_OVERHEAD_V0) + _legacy_message_size(magic, r.key, r.value)
        self._run = _Run(key, r, size, keep=not self.dry)
        self._run_codec = codec
        return out

    def _emit_run(self, run: _Run) -> list[bytes]:
        codec = self._run_codec
        lat = run.key[2]
        magic = self.options.magic
        if self.dry:
            self.loss.records_out += run.count
            self.loss.batches_out += 1
            return []
        assert run.records is not None
        if magic == 2:
            return self._v2_of(run.records, codec, lat)
        return self._legacy_of(run.records, magic, codec, lat)

