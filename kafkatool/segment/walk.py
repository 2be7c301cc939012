"""The batch walk of spec §3 over a bounded read window.

One walker serves dump, verify and repair. It yields ``(batch, data)`` pairs where
``data`` is a memoryview of the whole entry (log overhead included) inside a reused
window buffer: it is valid only until the walk advances. Memory stays flat whatever
the segment size (PERF.md lesson 1); only a single batch larger than the window
grows the buffer, and one larger than ``max_batch_bytes`` is CRC-checked by
streaming and yielded with ``data=None``.

The walk ends in one of three ways, recorded in :attr:`SegmentWalker.stop`:
``END`` (nothing left), ``TAIL`` (a tail of at most 17 bytes, or an entry whose size
runs past the end: Kafka stops silently, DumpLogSegments calls it invalid bytes), or
``ERROR`` (size < 14, or an entry too short for its own header: Kafka throws). In the
last case :attr:`SegmentWalker.error` holds the located :class:`KafkaToolError`.
"""

from __future__ import annotations

import enum
import os
import struct
from typing import BinaryIO, Iterator

from kafkatool.errors import CorruptRecordError, InvalidRecordError, KafkaToolError
from kafkatool.record.batch import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    V2_HEADER_SIZE,
    Batch,
)
from kafkatool.record.crc import crc32, crc32c
from kafkatool.record.v2 import HEADER as V2_HEADER

__all__ = ["SegmentWalker", "CompiledScan", "WalkStop", "DEFAULT_WINDOW", "DEFAULT_MAX_BATCH_BYTES"]

from kafkatool.record.speedups import functions as _compiled  # the extension, unless not built or switched off

(_fast_walk,) = _compiled("walk_v2")  # the compiled window walk, or None

DEFAULT_WINDOW = 1 << 20  # small enough that CRC reads bytes still in L2 (PERF.md)
DEFAULT_MAX_BATCH_BYTES = 256 << 20

_OFFSET_SIZE = struct.Struct(">qi")
_LEGACY = struct.Struct(">qiIbb")
_I64 = struct.Struct(">q")


#: The compiled file loops' buffer (an entry larger than this is left to :class:`SegmentWalker`).
SCAN_BUFFER = 4 << 20
SCAN_PAUSED = 9  # the status of a compiled file loop whose byte budget is spent


class CompiledScan:
    """A compiled loop over a file (``_speedups.scan_fd``) from ``start`` to ``end``.

    The loop reads the file itself (128 KiB preads into a reused buffer) and handles every
    batch it can in C, updating ``state`` (the loop's own state list). Iterating yields
    ``(batch, data)`` for each batch it hands to Python (``data`` a memoryview of a copy);
    the caller handles it and syncs ``state`` before the next one. The iteration ends where
    the loop stops for good: at ``end``, or at an entry it does not take (a tail, a legacy or
    damaged entry, an entry larger than its buffer). :attr:`position` is then where a
    :class:`SegmentWalker` goes on. ``on_progress(before, after)`` is called after every
    call, at most ``budget`` bytes apart (0: no pauses).
    """

    def __init__(self, path: str, start: int, end: int, scan, state: list, *, budget: int = 0, on_progress=None,
                 buffer_size: int | None = None) -> None:
        self.path = path
        self.position = start
        self.end = end
        self._scan = scan
        self._state = state
        self._budget = budget
        self._on_progress = on_progress
        self._buffer_size = SCAN_BUFFER if buffer_size is None else buffer_size

    def __iter__(self) -> Iterator[tuple[Batch, memoryview]]:
        scan, state, budget, on_progress = self._scan, self._state, self._budget, self._on_progress
        pos, end = self.position, self.end
        buf = bytearray(self._buffer_size)
        held = (0, 0)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            while pos < end:
                batch, data, nxt, status, *held = scan(fd, pos, end, Batch, state, buf, *held, budget)
                if on_progress is not None:
                    on_progress(pos, nxt)
                self.position = pos = nxt
                if batch is not None:
                    yield batch, memoryview(data)
                elif status != SCAN_PAUSED:
                    return
        finally:
            os.close(fd)


class WalkStop(enum.Enum):
    END = "end"
    TAIL = "tail"
    ERROR = "error"


class SegmentWalker:
    """Walk the entries of a ``.log``/``.checkpoint`` file, or of an in-memory buffer.

    ``source`` is a path, a binary file object, or bytes. ``start``/``end`` bound the
    walk (``end`` defaults to the file size; DumpLogSegments' ``--max-bytes`` maps to
    ``end=min(size, max_bytes)``).
    """

    def __init__(
        self,
        source: str | os.PathLike | BinaryIO | bytes | bytearray | memoryview,
        *,
        start: int = 0,
        end: int | None = None,
        window: int = DEFAULT_WINDOW,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        path: str | None = None,
        window_scan=None,
    ) -> None:
        self._file: BinaryIO | None = None
        self._owns = False
        self._mem: memoryview | None = None
        if isinstance(source, (bytes, bytearray, memoryview)):
            self._mem = memoryview(source)
            size = len(self._mem)
            self.path = path or "<memory>"
        elif hasattr(source, "readinto"):
            self._file = source  # type: ignore[assignment]
            size = os.fstat(self._file.fileno()).st_size
            self.path = path or getattr(source, "name", "<file>")
        else:
            self.path = path or os.fspath(source)
            self._file = open(source, "rb", buffering=0)  # noqa: SIM115 - closed in close()
            self._owns = True
            size = os.fstat(self._file.fileno()).st_size
        self.file_size = size
        self.start = start
        self.end = size if end is None else max(0, min(end, size))
        self.window = window
        self.max_batch_bytes = max_batch_bytes
        #: Replaces the compiled window walk for file sources: called as
        #: ``window_scan(buf, pos, end, file_position, Batch)`` and answering as
        #: ``_speedups.walk_v2`` does, except that it may consume entries without returning
        #: them (verify's compiled scan keeps only the batches that need a closer look).
        self.window_scan = window_scan if window_scan is not None else _fast_walk
        #: Position just after the last entry yielded (Kafka's "position" / validBytes).
        self.position = start
        self.stop: WalkStop | None = None
        self.error: KafkaToolError | None = None

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        if self._owns and self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "SegmentWalker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def trailing_bytes(self) -> int:
        """Bytes between the end of the last entry walked and the walk's end."""
        return self.end - self.position

    def _fail(self, err: KafkaToolError, position: int) -> None:
        self.stop = WalkStop.ERROR
        self.error = err.at(self.path, position) if err.path is None else err

    # ------------------------------------------------------------------ the walk
    def __iter__(self) -> Iterator[tuple[Batch, memoryview | None]]:
        if self._mem is not None:
            return self._walk_memory()
        return self._walk_file()

    def _walk_memory(self) -> Iterator[tuple[Batch, memoryview | None]]:
        mv = self._mem
        assert mv is not None
        pos = self.start
        end = self.end
        while True:
            if pos >= end - HEADER_SIZE_UP_TO_MAGIC:
                self.stop = WalkStop.END if pos >= end else WalkStop.TAIL
                return
            _off, size = _OFFSET_SIZE.unpack_from(mv, pos)
            if size < RECORD_OVERHEAD_V0:
                self._fail(_size_error(size, self.path), pos)
                return
            if pos > end - LOG_OVERHEAD - size:
                self.stop = WalkStop.TAIL
                return
            total = size + LOG_OVERHEAD
            data = mv[pos : pos + total]
            try:
                batch = _decode_entry(data, pos)
            except KafkaToolError as e:
                self._fail(e, pos)
                return
            yield batch, data
            pos += total
            self.position = pos

    def _walk_file(self) -> Iterator[tuple[Batch, memoryview | None]]:
        f = self._file
        assert f is not None
        window = self.window
        buf = bytearray(window)
        mv = memoryview(buf)
        buf_start = self.start  # file position of buf[0]
        buf_len = 0
        pos = self.start
        end = self.end
        f.seek(pos)
        readinto = f.readinto
        unpack_os = _OFFSET_SIZE.unpack_from
        v2_unpack = V2_HEADER.unpack_from
        new_tuple = tuple.__new__
        fast = self.window_scan
        while True:
            if fast is not None:
                # the compiled walk takes every complete v2 batch in the window at once; the
                # Python code below handles one entry at a time (refills, legacy, errors, tail)
                rel = pos - buf_start
                lim = min(buf_len, end - buf_start)
                if 0 <= rel < lim:
                    batches, nxt, _status = fast(buf, rel, lim, pos, Batch)
                    for b in batches:
                        r = b[0] - buf_start
                        yield b, mv[r : r + b[1]]
                    if nxt != rel:
                        pos = buf_start + nxt
                        self.position = pos
            if pos >= end - HEADER_SIZE_UP_TO_MAGIC:
                self.stop = WalkStop.END if pos >= end else WalkStop.TAIL
                return
            rel = pos - buf_start
            if rel + HEADER_SIZE_UP_TO_MAGIC > buf_len:
                # refill: keep the unread bytes, read more behind them
                rem = buf_len - rel
                if rem > 0:
                    buf[0:rem] = buf[rel:buf_len]
                buf_start = pos
                buf_len = rem if rem > 0 else 0
                want = min(len(buf), end - buf_start) - buf_len
                while want > 0:
                    n = readinto(mv[buf_len : buf_len + want])
                    if not n:
                        break
                    buf_len += n
                    want -= n
                rel = 0
                if buf_len < HEADER_SIZE_UP_TO_MAGIC:  # file shrank under us
                    self.stop = WalkStop.TAIL
                    return
            _off, size = unpack_os(buf, rel)
            if size < RECORD_OVERHEAD_V0:
                self._fail(_size_error(size, self.path), pos)
                return
            if pos > end - LOG_OVERHEAD - size:
                self.stop = WalkStop.TAIL
                return
            total = size + LOG_OVERHEAD
            if rel + total > buf_len:
                if total > self.max_batch_bytes:
                    try:
                        batch = self._stream_entry(pos, total)
                    except KafkaToolError as e:
                        self._fail(e, pos)
                        return
                    yield batch, None
                    pos += total
                    self.position = pos
                    # force a refill at the new position
                    buf_start = pos
                    buf_len = 0
                    f.seek(pos)
                    continue
                if total > len(buf):
                    nbuf = bytearray(max(total, window))
                    nbuf[0 : buf_len - rel] = buf[rel:buf_len]
                    buf = nbuf
                    mv = memoryview(buf)
                else:
                    buf[0 : buf_len - rel] = buf[rel:buf_len]
                buf_len -= rel
                buf_start = pos
                rel = 0
                want = min(len(buf), end - buf_start) - buf_len
                while want > 0:
                    n = readinto(mv[buf_len : buf_len + want])
                    if not n:
                        break
                    buf_len += n
                    want -= n
                if total > buf_len:  # file shrank under us
                    self.stop = WalkStop.TAIL
                    return
            magic = buf[rel + 16]
            if 2 <= magic < 128:
                if total < V2_HEADER_SIZE:
                    self._fail(_short_v2_error(total), pos)
                    return
                fields = v2_unpack(buf, rel)
                # Batch(...) field order: position, size, offset, magic, crc, attributes,
                # last_offset_delta, base/max timestamp, producer id/epoch, base sequence, count,
                # partition leader epoch, computed crc. tuple.__new__ skips NamedTuple's Python __new__.
                batch = new_tuple(Batch, (
                    pos, total, fields[0], fields[3], fields[4], fields[5] & 0xFFFF, fields[6], fields[7],
                    fields[8], fields[9], fields[10], fields[11], fields[12], fields[2],
                    crc32c(mv[rel + 21 : rel + total]),
                ))
            else:
                try:
                    batch = _decode_legacy(mv, rel, pos, total)
                except KafkaToolError as e:
                    self._fail(e, pos)
                    return
            yield batch, mv[rel : rel + total]
            pos += total
            self.position = pos

    def _stream_entry(self, pos: int, total: int) -> Batch:
        """Decode the header of an entry too large for memory; CRC it by streaming."""
        f = self._file
        assert f is not None
        f.seek(pos)
        head = f.read(max(V2_HEADER_SIZE, 26))
        magic = head[16] if len(head) > 16 else 0
        chunk = 1 << 20
        if 2 <= magic < 128:
            fields = V2_HEADER.unpack_from(head, 0)
            f.seek(pos + 21)
            left = total - 21
            crc = 0
            while left > 0:
                piece = f.read(min(chunk, left))
                if not piece:
                    raise CorruptRecordError("Unexpected EOF while attempting to read the next batch")
                crc = crc32c(piece, crc)
                left -= len(piece)
            (b, ln, ple, mg, scrc, attrs, lod, bts, mts, pid, pep, bseq, cnt) = fields
            return Batch(pos, total, b, mg, scrc, attrs & 0xFFFF, lod, bts, mts, pid, pep, bseq, cnt, ple, crc)
        batch = _decode_legacy(memoryview(head), 0, pos, len(head), crc=False)
        f.seek(pos + 16)
        left = total - 16
        crc = 0
        while left > 0:
            piece = f.read(min(chunk, left))
            if not piece:
                raise CorruptRecordError("Unexpected EOF while attempting to read the next batch")
            crc = crc32(piece, crc)
            left -= len(piece)
        return batch._replace(size=total, computed_crc=crc)


def _size_error(size: int, path: str) -> CorruptRecordError:
    return CorruptRecordError(
        f"Found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0}) in file {path}."
    )


def _short_v2_error(total: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"Record batch is corrupt (the size {total} is smaller than the minimum allowed overhead {V2_HEADER_SIZE})"
    )


def _decode_legacy(mv: memoryview, rel: int, pos: int, total: int, crc: bool = True) -> Batch:
    offset, size, scrc, magic, attrs = _LEGACY.unpack_from(mv, rel)
    if magic < 0:
        raise InvalidRecordError(f"Invalid magic used in LegacyRecord: {magic}")
    if magic == 1:
        if size < RECORD_OVERHEAD_V1:
            raise CorruptRecordError(
                f"Record is corrupt (the size {size} is smaller than the magic v1 message overhead {RECORD_OVERHEAD_V1})"
            )
        (ts,) = _I64.unpack_from(mv, rel + 18)
    else:
        ts = -1
    computed = crc32(mv[rel + 16 : rel + total]) if crc else 0
    return Batch(pos, total, offset, magic, scrc, attrs & 0xFF, 0, ts, ts, -1, -1, -1, None, -1, computed)


def _decode_entry(data: memoryview, pos: int) -> Batch:
    magic = data[16]
    total = len(data)
    if 2 <= magic < 128:
        if total < V2_HEADER_SIZE:
            raise _short_v2_error(total)
        (b, ln, ple, mg, crc, attrs, lod, bts, mts, pid, pep, bseq, cnt) = V2_HEADER.unpack_from(data, 0)
        return Batch(pos, total, b, mg, crc, attrs & 0xFFFF, lod, bts, mts, pid, pep, bseq, cnt, ple, crc32c(data[21:]))
    return _decode_legacy(data, 0, pos, total)
