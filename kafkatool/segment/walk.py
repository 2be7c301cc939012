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

Both walks (over memory, over a file) ask :func:`kafkatool.record.framing.frame_entry` what
the entry at each position is, and build its :class:`Batch` with
:func:`kafkatool.record.batch.batch_from_header`: the walk itself only moves bytes (refills
the window on a NEED answer, streams an entry too large for it). The compiled window walk
(``_speedups.walk_v2``) takes the runs of complete v2 batches first; tests/test_framing.py
holds the three to the same answers.
"""

from __future__ import annotations

import enum
import os
from typing import BinaryIO, Iterator

from kafkatool.errors import CorruptRecordError, KafkaToolError
from kafkatool.record.batch import Batch, batch_from_header
from kafkatool.record.crc import crc32, crc32c
from kafkatool.record.framing import END, ENTRY, ERROR, NEED, frame_entry
from kafkatool.record.layout import LEGACY_CRC_START, LEGACY_PREFIX, MAGIC_OFFSET, V2_CRC_START, V2_HEADER_SIZE

__all__ = ["SegmentWalker", "CompiledScan", "WalkStop", "DEFAULT_WINDOW", "DEFAULT_MAX_BATCH_BYTES"]

from kafkatool.record.speedups import functions as _compiled  # the extension, unless not built or switched off

(_fast_walk,) = _compiled("walk_v2")  # the compiled window walk, or None

DEFAULT_WINDOW = 1 << 20  # small enough that CRC reads bytes still in L2 (PERF.md)
DEFAULT_MAX_BATCH_BYTES = 256 << 20

#: What ``_stream_entry`` reads first of an entry too large for memory: any magic's header.
_STREAM_HEAD = max(V2_HEADER_SIZE, LEGACY_PREFIX.size + 8)


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
        path = self.path
        while True:
            kind, total, _magic, err = frame_entry(mv, pos, end, end, 0, path)
            if kind is not ENTRY:
                self._stopped(kind, err)
                return
            yield batch_from_header(mv, pos, pos, total), mv[pos : pos + total]
            pos += total
            self.position = pos

    def _stopped(self, kind, err: KafkaToolError | None) -> None:
        """Record how the walk ended (a framing answer other than ENTRY or NEED)."""
        if kind is ERROR:
            assert err is not None
            self.stop = WalkStop.ERROR
            self.error = err
        else:
            self.stop = WalkStop.END if kind is END else WalkStop.TAIL

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
        path = self.path
        f.seek(pos)
        readinto = f.readinto
        fast = self.window_scan
        frame, from_header, entry = frame_entry, batch_from_header, ENTRY  # locals: the loop runs once per entry
        stop = end - buf_start  # where the walk ends, relative to buf
        while True:
            rel = pos - buf_start
            if fast is not None:
                # the compiled walk takes every complete v2 batch in the window at once; the
                # Python code below handles one entry at a time (refills, legacy, errors, tail)
                lim = min(buf_len, stop)
                if 0 <= rel < lim:
                    batches, nxt, _status = fast(buf, rel, lim, pos, Batch)
                    for b in batches:
                        r = b[0] - buf_start
                        yield b, mv[r : r + b[1]]
                    if nxt != rel:
                        pos = buf_start + nxt
                        self.position = pos
                        rel = nxt
            kind, total, magic, err = frame(buf, rel, buf_len, stop, buf_start, path)
            if kind is entry:
                yield from_header(mv, rel, pos, total), mv[rel : rel + total]
                pos += total
                self.position = pos
                continue
            if kind is not NEED:
                self._stopped(kind, err)
                return
            # not all at hand: ``total`` more bytes are needed
            need = buf_len - rel + total  # bytes from pos
            if magic is not None and need > self.max_batch_bytes:
                try:
                    batch = self._stream_entry(pos, need)
                except KafkaToolError as e:
                    self._fail(e, pos)
                    return
                yield batch, None
                pos += need
                self.position = pos
                # force a refill at the new position
                buf_start = pos
                stop = end - buf_start
                buf_len = 0
                f.seek(pos)
                continue
            # refill: keep the unread bytes at the front, read more behind them
            kept = buf_len - rel if buf_len > rel else 0
            if need > len(buf):
                nbuf = bytearray(max(need, window))
                nbuf[0:kept] = buf[rel:buf_len]
                buf = nbuf
                mv = memoryview(buf)
            elif kept:
                buf[0:kept] = buf[rel:buf_len]
            buf_start = pos
            stop = end - buf_start
            buf_len = kept
            want = min(len(buf), stop) - buf_len
            while want > 0:
                n = readinto(mv[buf_len : buf_len + want])
                if not n:
                    break
                buf_len += n
                want -= n
            if buf_len < need:  # file shrank under us
                self.stop = WalkStop.TAIL
                return

    def _stream_entry(self, pos: int, total: int) -> Batch:
        """The batch of an entry too large for memory (its header framed already); CRC it by streaming."""
        f = self._file
        assert f is not None
        f.seek(pos)
        head = memoryview(f.read(_STREAM_HEAD))
        if len(head) <= MAGIC_OFFSET:
            raise CorruptRecordError("Unexpected EOF while attempting to read the next batch")
        if 2 <= head[MAGIC_OFFSET] < 128:
            crc_start, crc_of = V2_CRC_START, crc32c
        else:
            crc_start, crc_of = LEGACY_CRC_START, crc32
        f.seek(pos + crc_start)
        left = total - crc_start
        crc = 0
        chunk = 1 << 20
        while left > 0:
            piece = f.read(min(chunk, left))
            if not piece:
                raise CorruptRecordError("Unexpected EOF while attempting to read the next batch")
            crc = crc_of(piece, crc)
            left -= len(piece)
        return batch_from_header(head, 0, pos, total, crc)
