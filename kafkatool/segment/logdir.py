"""The log-dir model: log dirs, partition dirs and segments on disk, found and read lazily (spec §2).

This is the one way kafkatool finds the files it reads:

* :class:`LogDir` is a broker's log dir (``log.dirs``): its partition dirs and its offset
  checkpoints;
* :class:`Partition` is a partition dir (``<topic>-<partition>``, split on the LAST ``-``,
  with the ``-delete``/``-future``/``-stray`` states): every entry classified, its segments;
* :class:`Segment` is one ``.log`` with its side files, in base-offset order;
* :func:`expand` turns command-line paths (files, partition dirs, log dirs, directories of
  log dirs) into :class:`Target` s, an unreadable directory being a target with an error
  rather than an exception, so one bad directory never hides the others.

Nothing is read until asked: constructing any of these touches no file. Listings are read
with one ``scandir`` per directory (a file's type comes with the listing; only symbolic
links and special files cost a ``stat``). Names that are not UTF-8 arrive as ``str`` with
surrogate escapes (``os.fsencode`` gives the bytes back).
"""

from __future__ import annotations

import bisect
import enum
import mmap
import os
import stat
import struct
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Iterable, Iterator, Sequence

from kafkatool.errors import KafkaToolError
from kafkatool.record.batch import Batch, Record
from kafkatool.record.layout import LOG_OVERHEAD, RECORD_OVERHEAD_V0
from kafkatool.segment import files as names
from kafkatool.segment.files import FileKind, PartitionDir
from kafkatool.segment.resync import BadRegion, bad_region, resync
from kafkatool.segment.walk import DEFAULT_MAX_BATCH_BYTES, SegmentWalker, WalkStop

__all__ = [
    "BatchReader",
    "best_copy",
    "DirectoryError",
    "PartitionReader",
    "Entry",
    "EntryType",
    "FileKind",
    "LogDir",
    "Partition",
    "Segment",
    "SEGMENT_FILE_KINDS",
    "Target",
    "descend_all",
    "entry_type_of",
    "descend_partition_named",
    "expand",
    "holds_segment_files",
    "iter_records",
    "list_dir",
    "log_end_offset",
    "open_log",
    "segments_of",
]


class DirectoryError(KafkaToolError):
    """A directory that cannot be listed (permissions, gone, not a directory).

    ``os_error`` is the :class:`OSError` (its ``strerror`` for messages that quote it);
    the message reads ``PATH: cannot list the directory: Permission denied``.
    """

    os_error: OSError | None = None


def _directory_error(e: OSError, path: str) -> DirectoryError:
    err = DirectoryError(f"cannot list the directory: {e.strerror or e}", path=path)
    err.os_error = e
    err.__cause__ = e
    return err


# ----------------------------------------------------------------------------- entries


class EntryType(enum.Enum):
    """What a directory entry is on disk (following a symbolic link, see :attr:`Entry.is_symlink`)."""

    FILE = "regular file"
    DIR = "directory"
    FIFO = "FIFO"
    SOCKET = "socket"
    CHAR_DEVICE = "character device"
    BLOCK_DEVICE = "block device"
    OTHER = "special file"
    MISSING = "missing"
    """A dangling symbolic link, or an entry gone between the listing and its ``stat``."""


_MODE_TYPES = (
    (stat.S_ISREG, EntryType.FILE),
    (stat.S_ISDIR, EntryType.DIR),
    (stat.S_ISFIFO, EntryType.FIFO),
    (stat.S_ISSOCK, EntryType.SOCKET),
    (stat.S_ISCHR, EntryType.CHAR_DEVICE),
    (stat.S_ISBLK, EntryType.BLOCK_DEVICE),
)


def entry_type_of(mode: int) -> EntryType:
    """The :class:`EntryType` of an ``st_mode``."""
    return next((t for test, t in _MODE_TYPES if test(mode)), EntryType.OTHER)


#: The files that make up a segment (spec §2.1): the ``.log`` and its three indexes.
SEGMENT_FILE_KINDS = frozenset({FileKind.LOG, FileKind.INDEX, FileKind.TIMEINDEX, FileKind.TXNINDEX})


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a directory listing, classified by its name (:func:`files.classify`)."""

    path: str
    """The directory's path joined with :attr:`name` (as given: not made absolute)."""
    name: str
    kind: FileKind
    type: EntryType
    """What it is, following a symbolic link (:attr:`EntryType.MISSING` when that leads nowhere)."""
    is_symlink: bool = False

    @property
    def is_file(self) -> bool:
        """A regular file (or a symbolic link to one)."""
        return self.type is EntryType.FILE

    @property
    def is_dir(self) -> bool:
        """A directory (or a symbolic link to one)."""
        return self.type is EntryType.DIR

    @property
    def suffix(self) -> str | None:
        """The name from its last ``.`` (:func:`files.file_suffix`)."""
        return names.file_suffix(self.name)

    @property
    def base_offset(self) -> int | None:
        """The offset a segment, index or snapshot file is named after; None for other kinds."""
        if self.kind in SEGMENT_FILE_KINDS or self.kind is FileKind.PRODUCER_SNAPSHOT:
            return names.parse_base_offset(self.name)
        return None

    @property
    def partition_dir(self) -> PartitionDir | None:
        """The name parsed as a partition dir's (:func:`files.parse_partition_dir`), or None."""
        return names.parse_partition_dir(self.name)


def _entry(d: os.DirEntry[str], path: str) -> Entry:
    name = d.name
    kind = names.classify(name)
    # The listing's d_type answers for regular files and directories without a stat.
    if d.is_file(follow_symlinks=False):
        return Entry(path, name, kind, EntryType.FILE)
    if d.is_dir(follow_symlinks=False):
        return Entry(path, name, kind, EntryType.DIR)
    symlink = d.is_symlink()
    try:
        mode = d.stat(follow_symlinks=True).st_mode
    except OSError:
        return Entry(path, name, kind, EntryType.MISSING, symlink)
    return Entry(path, name, kind, entry_type_of(mode), symlink)


def list_dir(path: str) -> list[Entry]:
    """Every entry of directory ``path``, classified, sorted by name (code-point order).

    Raises :class:`DirectoryError` when the directory cannot be listed.
    """
    prefix = path if path.endswith("/") or path == "" else path + "/"
    try:
        with os.scandir(path or ".") as it:
            out = [_entry(d, prefix + d.name if path else d.name) for d in it]
    except OSError as e:
        raise _directory_error(e, path) from None
    out.sort(key=lambda e: e.name)
    return out


def holds_segment_files(entries: Iterable[Entry]) -> bool:
    """Whether a listing holds a file Kafka names as part of a segment (``<20 digits>.log``,
    ``.index``, ``.timeindex``, ``.txnindex``)."""
    return any(e.kind in SEGMENT_FILE_KINDS for e in entries)


# ----------------------------------------------------------------------------- segments


@dataclass(frozen=True, slots=True)
class Segment:
    """One segment: a ``<base offset>.log`` and the side files named after the same offset.

    A side file's path is None when the file is absent. Build one from a partition's listing
    (:meth:`Partition.segments`) or from a ``.log`` path (:meth:`Segment.at`).
    """

    base_offset: int
    log_path: str
    index_path: str | None = None
    timeindex_path: str | None = None
    txnindex_path: str | None = None
    snapshot_path: str | None = None
    """The producer snapshot named after this segment's base offset, if any."""

    @classmethod
    def at(cls, log_path: str | os.PathLike[str], base_offset: int | None = None) -> "Segment":
        """The segment of the ``.log`` at ``log_path``, its side files found beside it.

        The base offset is read from the name (:func:`files.parse_base_offset`, which raises
        :class:`~kafkatool.errors.FileNameError` for a name Kafka could not load) unless
        given: a copy under any name can be read with ``base_offset=``.
        """
        log_path = os.fspath(log_path)
        base = names.parse_base_offset(log_path) if base_offset is None else base_offset

        def side(suffix: str) -> str | None:
            p = names.sibling(log_path, suffix)
            return p if os.path.isfile(p) else None

        return cls(
            base,
            log_path,
            side(names.INDEX_SUFFIX),
            side(names.TIME_INDEX_SUFFIX),
            side(names.TXN_INDEX_SUFFIX),
            side(names.PRODUCER_SNAPSHOT_SUFFIX),
        )

    @property
    def size(self) -> int:
        """The ``.log``'s size in bytes (a ``stat``)."""
        return os.stat(self.log_path).st_size

    # ------------------------------------------------------------------ reading

    def batches(
        self,
        start: int = 0,
        end: int | None = None,
        *,
        offset: int | None = None,
        timestamp: int | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    ) -> "BatchReader":
        """The batches of the ``.log`` (every magic), each with its ``position`` and ``size`` in the file.

        ``start``/``end`` bound the walk in bytes (``start`` must be a batch start: 0, a
        ``position`` seen before, a :meth:`split` boundary; ``end`` defaults to the file size,
        a batch running past it is not read). ``offset`` starts at the batch holding that
        offset (the first whose last offset is at least ``offset``); ``timestamp`` at the first
        batch whose max timestamp is at least ``timestamp`` (Kafka's ``ListOffsets`` by time).
        Both look the start up in the ``.index``/``.timeindex`` as the broker does, and scan
        from ``start`` instead when an index is missing or unreadable, or the ``.index`` points
        at no whole batch (CRC checked) holding the offset asked. A ``.timeindex`` entry is
        trusted as the broker trusts it: one naming too late an offset starts the walk late.

        The walk stops at the end, at a short tail (a truncated last batch: not an error, see
        :attr:`BatchReader.trailing_bytes`), or raises the located
        :class:`~kafkatool.errors.KafkaToolError` (``PATH:POSITION: ...``) of the first entry
        that cannot be framed. A CRC mismatch is not an error here: compare ``batch.crc`` with
        ``batch.computed_crc`` (``batch.crc_valid``). Memory stays flat: the file is read
        through a 1 MiB window.
        """
        return BatchReader(self, start, end, offset, timestamp, max_batch_bytes)

    def records(
        self,
        start: int = 0,
        end: int | None = None,
        *,
        offset: int | None = None,
        timestamp: int | None = None,
        control: bool = False,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    ) -> Iterator[Record]:
        """The records of :meth:`batches` (same arguments), decompressed and decoded, memory flat.

        With ``offset``, records before that offset are left out; with ``timestamp``, the
        records before the first whose timestamp is at least ``timestamp`` (later records
        are all given, whatever their timestamp, as a consumer reading from that offset
        sees them). The records of control batches (transaction markers) are left out
        unless ``control``; records of aborted transactions are given (read_uncommitted).
        A record that does not decode raises the located error of its batch.
        """
        reader = self.batches(start, end, offset=offset, timestamp=timestamp, max_batch_bytes=max_batch_bytes)
        return iter_records(reader, offset=offset, timestamp=timestamp, control=control)

    def split(self, n: int, *, exact: bool = True) -> list[tuple[int, int]]:
        """At most ``n`` byte ranges ``(start, end)`` for parallel readers, each starting at a batch.

        The ranges are contiguous, never overlap and cover ``[0, size)`` exactly (the last one
        holds any trailing bytes). Each range after the first is cut near an even share of
        the bytes, ``size * i // n``; fewer than ``n`` ranges come back when the segment holds
        fewer batches or no cut is found.

        ``exact=True`` (the default): every cut is a batch start, proven by framing, so
        ``batches(start, end)`` over each range, in order, gives every batch of ``batches()``
        once. A cut is the first batch start at or after its share, found by walking the
        batch headers alone (their offset and size fields) from the ``.index`` entry below it
        (checked to start a whole batch whose CRC holds), or from the start of the file: one
        read per batch up to the last cut without a usable index.

        ``exact=False``: cheap, and every cut is a *candidate* batch start. A cut is searched
        from its share, or just past the previous cut when that is later. When a known batch
        start (a checked ``.index`` entry, or the start of the file) lies at most 1 MiB below,
        the same header walk finds the first batch start from there; otherwise (no index,
        too far, or a header on the way that does not frame a batch) it is the first
        position where a whole entry with a valid CRC begins (:func:`kafkatool.segment.resync.resync`),
        which costs about one batch whatever the segment's size. Such a position can lie
        inside a record value that happens to hold a valid batch, so a reader must check
        that its walk of each range ends exactly where the next range starts (at the end of
        the range, on a batch boundary) and, where one does not, walk on serially from that
        range's start: ``kafkatool verify --jobs`` does (``verify.workers.scan_chunks``).
        """
        if n < 1:
            raise ValueError(f"split into at least one range, not {n}")
        try:
            size = self.size
            if n == 1 or size == 0:
                return [(0, size)]
            wanted = [size * i // n for i in range(1, n)]
            cuts = _split_points(self, size, wanted) if exact else _candidate_points(self, size, wanted)
        except OSError as e:
            raise _read_error(e, self.log_path) from None
        bounds = [0, *cuts, size]
        return list(zip(bounds, bounds[1:]))

    def find_position(self, offset: int) -> int:
        """The byte position to start reading at for ``offset``: the ``.index`` lookup
        (``OffsetIndex.lookup``), checked against the batch there; 0 when there is no index,
        it points past the end or at no batch holding an offset up to ``offset``."""
        found = _index_lookup(self, offset)
        return 0 if found is None else found


_SIDE_FIELDS = {
    FileKind.INDEX: "index_path",
    FileKind.TIMEINDEX: "timeindex_path",
    FileKind.TXNINDEX: "txnindex_path",
    FileKind.PRODUCER_SNAPSHOT: "snapshot_path",
}


def segments_of(entries: Iterable[Entry]) -> list[Segment]:
    """The segments in a partition dir's listing, in base-offset order.

    One per ``<20 digits>.log`` that is a regular file (a FIFO named like a segment is never a
    segment); side files are matched by base offset and must be regular files too.
    """
    logs: dict[int, str] = {}
    side: dict[int, dict[str, str]] = {}
    for e in entries:
        if not e.is_file:
            continue
        if e.kind is FileKind.LOG:
            logs[names.parse_base_offset(e.name)] = e.path
        elif e.kind in _SIDE_FIELDS:
            side.setdefault(names.parse_base_offset(e.name), {})[_SIDE_FIELDS[e.kind]] = e.path
    return [Segment(base, logs[base], **side.get(base, {})) for base in sorted(logs)]


# ----------------------------------------------------------------------------- reading


class _Reader:
    """An iterator that starts its walk on first use and can be closed early (its file too)."""

    __slots__ = ("_iter",)

    def __init__(self) -> None:
        self._iter: Iterator[Batch] | None = None

    def __iter__(self) -> Iterator[Batch]:
        if self._iter is None:
            self._iter = self._walk()
        return self._iter

    def __next__(self) -> Batch:
        return next(iter(self))

    def close(self) -> None:
        """Stop the walk and close the file (done by itself at the end of the iteration)."""
        if self._iter is not None:
            self._iter.close()  # type: ignore[attr-defined]

    def _walk(self) -> Iterator[Batch]:
        raise NotImplementedError


class BatchReader(_Reader):
    """An iterator over the batches of one segment (:meth:`Segment.batches`).

    After the iteration, :attr:`position` is where the walk stopped (the end of the last
    whole batch: Kafka's valid bytes when the walk started at 0), :attr:`stop` why
    (:class:`~kafkatool.segment.walk.WalkStop` END or TAIL; an ERROR was raised), and
    :attr:`trailing_bytes` the bytes after :attr:`position` up to the walk's end.
    :attr:`data` is the bytes of the batch just yielded (a memoryview valid until the next
    one; None for a batch larger than ``max_batch_bytes``, which is CRC-checked by streaming).
    """

    __slots__ = ("segment", "start", "end", "offset", "timestamp", "position", "stop", "trailing_bytes", "data",
                 "_max_batch_bytes")

    def __init__(self, segment: Segment, start: int, end: int | None, offset: int | None, timestamp: int | None,
                 max_batch_bytes: int) -> None:
        super().__init__()
        self.segment = segment
        self.start = start
        self.end = end
        self.offset = offset
        self.timestamp = timestamp
        self.position = start
        self.stop: WalkStop | None = None
        self.trailing_bytes = 0
        self.data: memoryview | None = None
        self._max_batch_bytes = max_batch_bytes

    @property
    def path(self) -> str:
        """The ``.log`` being read."""
        return self.segment.log_path

    def _start(self) -> int | None:
        """Where the walk starts: ``start``, or the batch ``offset``/``timestamp`` asks for
        (None: there is none, the walk is over)."""
        seg, start = self.segment, self.start
        if self.offset is None and self.timestamp is None:
            return start
        if self.timestamp is None:
            start = max(start, _index_lookup(seg, self.offset, floor=start) or start)  # type: ignore[arg-type]
        else:
            start = max(start, _time_lookup(seg, self.timestamp, floor=start) or start)
        # the batches before the one asked for (an index interval's worth, or a whole segment
        # without an index) are skipped with a small window: the walk that follows starts at
        # the batch found, and reads its 1 MiB window only from there
        return self._find(start)

    def _walk(self) -> Iterator[Batch]:
        seg = self.segment
        start = self._start()
        if start is None:
            return
        f = open_log(seg.log_path)
        walker = SegmentWalker(f, start=start, end=self.end, path=seg.log_path, max_batch_bytes=self._max_batch_bytes)
        try:
            # the window walk's own tuples, nothing added per batch
            for batch, self.data in walker:
                yield batch
        except OSError as e:
            raise _read_error(e, seg.log_path) from None
        finally:
            self._ended(walker, f)
        if walker.error is not None:
            raise walker.error

    def _find(self, start: int) -> int | None:
        """The position of the first batch from ``start`` that holds ``offset`` or reaches
        ``timestamp``; None (the walk is over: nothing to yield) when there is none."""
        offset, timestamp = self.offset, self.timestamp
        path = self.segment.log_path
        f = open_log(path)
        walker = SegmentWalker(f, start=start, end=self.end, path=path, window=_FIND_WINDOW,
                               max_batch_bytes=self._max_batch_bytes)
        try:
            for batch, _data in walker:
                if timestamp is not None and batch.max_timestamp < timestamp:
                    continue
                if offset is not None and batch.last_offset < offset:
                    continue
                return batch.position
        except OSError as e:
            raise _read_error(e, path) from None
        finally:
            self._ended(walker, f)
        if walker.error is not None:
            raise walker.error
        return None

    def _ended(self, walker: SegmentWalker, f: BinaryIO) -> None:
        self.position = walker.position
        self.stop = walker.stop
        self.trailing_bytes = walker.trailing_bytes
        f.close()


def batches_and_regions(
    segment: Segment, fd: int, start: int, end: int, size: int, *,
    offset: int | None = None, timestamp: int | None = None, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
) -> Iterator["tuple[Batch, memoryview | bytes | None] | BadRegion"]:
    """Every batch starting in ``[start, end)`` of ``segment``'s ``.log`` (open as ``fd``, walked
    to ``size`` at most) as ``(batch, data)`` (``data``: :attr:`BatchReader.data`, valid until
    the next item), and between them each :class:`~kafkatool.segment.resync.BadRegion` the walk
    cannot frame, reading on after it as ``kafkatool verify`` does: the one walk around damage
    of every reader that goes on after it (``kafkatool convert --skip-damaged``, the Spark
    source). ``start`` must be a batch start; a batch starting before ``end`` is read whole
    even when it runs past ``end``. ``offset``/``timestamp`` seek as :meth:`Segment.batches`
    does, at the start and after each region. An error that is not about the bytes (the file
    cannot be read) is raised.
    """
    pos, walk_end = start, end
    while pos < end:
        reader = segment.batches(pos, walk_end, offset=offset, timestamp=timestamp, max_batch_bytes=max_batch_bytes)
        framing: KafkaToolError | None = None
        try:
            it = iter(reader)
            while True:
                try:
                    batch = next(it)
                except StopIteration:
                    break
                except KafkaToolError as e:
                    if reader.stop is not WalkStop.ERROR:
                        raise  # not the bytes: a read error
                    framing = e
                    break
                if batch.position >= end:
                    return  # (a seek can land past the range)
                yield batch, reader.data
        finally:
            reader.close()
        pos = reader.position
        if pos >= end:
            return  # anything from ``end`` on is the next range's
        if framing is None and walk_end < size:
            walk_end = size  # a batch starting before ``end`` runs past it: it is this range's
            continue
        region = bad_region(fd, segment.log_path, pos, size, framing)
        yield region
        pos = region.end


def open_log(path: str) -> BinaryIO:
    """``path`` opened for reading, unbuffered; a located :class:`KafkaToolError` when it cannot
    be, or is not a regular file (a FIFO named like a segment would block a reader forever: it
    is opened without blocking and refused)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise _read_error(e, path) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise KafkaToolError(f"is a {entry_type_of(mode).value}, not a regular file: not read", path=path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def _read_error(e: OSError, path: str) -> KafkaToolError:
    err = KafkaToolError(f"cannot read the file: {e.strerror or e}", path=path)
    err.__cause__ = e
    return err


class PartitionReader(_Reader):
    """An iterator over the batches of a partition's segments (:meth:`Partition.batches`).

    :attr:`reader` is the :class:`BatchReader` of the segment being read (its ``data`` the
    bytes of the batch just yielded, its ``segment`` where it is).
    """

    __slots__ = ("partition", "start_offset", "start_time", "end_offset", "reader", "_max_batch_bytes")

    def __init__(self, partition: "Partition", start_offset: int | None, start_time: int | None,
                 end_offset: int | None, max_batch_bytes: int) -> None:
        super().__init__()
        self.partition = partition
        self.start_offset = start_offset
        self.start_time = start_time
        self.end_offset = end_offset
        self.reader: BatchReader | None = None
        self._max_batch_bytes = max_batch_bytes

    @property
    def data(self) -> memoryview | None:
        """The bytes of the batch just yielded (see :attr:`BatchReader.data`)."""
        return None if self.reader is None else self.reader.data

    @property
    def path(self) -> str:
        """The ``.log`` being read."""
        return self.partition.path if self.reader is None else self.reader.segment.log_path

    def _walk(self) -> Iterator[Batch]:
        segments = self.partition.segments()
        offset, timestamp, end_offset = self.start_offset, self.start_time, self.end_offset
        if offset is not None and timestamp is None:
            bases = [s.base_offset for s in segments]
            segments = segments[max(0, bisect.bisect_right(bases, offset) - 1):]
        below = -1  # the last offset yielded: a legacy wrapper's inner offsets all lie above it
        for seg in segments:
            if end_offset is not None and seg.base_offset >= end_offset:
                return
            self.reader = reader = seg.batches(offset=offset, timestamp=timestamp,
                                               max_batch_bytes=self._max_batch_bytes)
            if end_offset is None:
                it = iter(reader)
                if offset is not None or timestamp is not None:
                    first = next(it, None)
                    if first is None:
                        continue  # not in this segment: look it up in the next
                    yield first
                    offset = timestamp = None  # found: every later batch follows, whatever its offset or time
                yield from it
                continue
            for batch in reader:
                # a v2 batch's first offset is in its header; a legacy entry names only its last
                # (a compressed wrapper's inner offsets come before it), its first is above `below`
                first = batch.offset if batch.magic >= 2 else below + 1
                if first >= end_offset:
                    reader.close()
                    return
                below = batch.last_offset
                yield batch
                offset = timestamp = None


def iter_records(
    batches: "BatchReader | PartitionReader",
    *,
    offset: int | None = None,
    timestamp: int | None = None,
    control: bool = False,
) -> Iterator[Record]:
    """The records of the batches a reader yields, decoded as they come, in chunks (memory
    flat whatever a batch's record count); see :meth:`Segment.records` for the arguments."""
    from kafkatool.record.records import batch_record_chunks

    started = offset is None and timestamp is None
    for batch in batches:
        if batch.is_control and not control:
            continue
        data = batches.data
        if data is None:
            raise KafkaToolError(
                f"batch of {batch.size} bytes is larger than max_batch_bytes: its records are not read into memory",
                path=batches.path, position=batch.position,
            )
        try:
            for chunk in batch_record_chunks(batch, data):
                if started:
                    yield from chunk
                    continue
                for i, r in enumerate(chunk):
                    if (offset is None or r.offset >= offset) and (timestamp is None or r.timestamp >= timestamp):
                        started = True
                        yield from chunk[i:]
                        break
        except KafkaToolError as e:
            raise e.at(batches.path, batch.position) from None


_HEAD = struct.Struct(">qi")  # offset, size: all the framing a header walk needs (§3)
_HEADER_BLOCK = 16 << 10
_FIND_WINDOW = 64 << 10  # the window of the walk to a start batch
_CHECK_LIMIT = 64 << 20  # an index entry pointing at a larger "batch" is not trusted (a scan finds it)


def _open_index(path: str | None) -> mmap.mmap | None:
    """The bytes of a regular, non-empty index file mapped (pages are read as they are touched)."""
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            return None
        return mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def batch_at(path: str, position: int) -> Batch | None:
    """The whole entry starting at ``position`` if one does, its CRC holding; else None.

    Reads that entry only (its size field first), whatever the walk's window.
    """
    try:
        with open_log(path) as f:
            head = os.pread(f.fileno(), LOG_OVERHEAD, position)
            if len(head) < LOG_OVERHEAD:
                return None
            _offset, length = _HEAD.unpack(head)
            if length < RECORD_OVERHEAD_V0 or length > _CHECK_LIMIT:
                return None
            data = os.pread(f.fileno(), LOG_OVERHEAD + length, position)
        for batch, _data in SegmentWalker(data, path=path):
            return batch._replace(position=position) if batch.crc_valid else None
    except (OSError, KafkaToolError):
        return None
    return None


def _index_lookup(seg: Segment, offset: int, floor: int = 0) -> int | None:
    """``OffsetIndex.lookup(offset)``'s position when the batch there holds offsets up to
    ``offset`` (a v2 batch spanning the entry's offset, a legacy entry named by it); else None."""
    from kafkatool.segment.index import OFFSET_ENTRY, OffsetIndexEntry, IndexEntries, lookup_offset

    mm = _open_index(seg.index_path)
    if mm is None:
        return None
    with mm:
        entry_offset, position = lookup_offset(IndexEntries(mm, OFFSET_ENTRY, OffsetIndexEntry), seg.base_offset, offset)
    if position <= floor:
        return None
    batch = batch_at(seg.log_path, position)
    if batch is None:
        return None
    first = batch.offset if batch.magic >= 2 else batch.last_offset
    if not first <= entry_offset <= batch.last_offset or first > offset:
        return None
    return position


def _time_lookup(seg: Segment, timestamp: int, floor: int = 0) -> int | None:
    """Where the first batch with a max timestamp of at least ``timestamp`` can be: the
    ``.timeindex`` entry below it, then that offset's ``.index`` position (``LogSegment.findOffsetByTimestamp``).

    The time index holds an entry each time the segment's running max timestamp grows, so
    every batch before the entry's offset has a smaller max timestamp than the entry's.
    """
    from kafkatool.segment.index import TIME_ENTRY, IndexEntries, TimeIndexEntry, lookup_time

    mm = _open_index(seg.timeindex_path)
    if mm is None:
        return None
    with mm:
        found_ts, entry_offset = lookup_time(IndexEntries(mm, TIME_ENTRY, TimeIndexEntry), seg.base_offset, timestamp)
    if found_ts < 0 or entry_offset < seg.base_offset:
        return None
    return _index_lookup(seg, entry_offset, floor)


def _index_positions(seg: Segment) -> list[int]:
    """The ``.index``'s positions while they increase (a zero-filled tail ends them); [] without one."""
    from kafkatool.segment.index import OFFSET_ENTRY

    mm = _open_index(seg.index_path)
    if mm is None:
        return []
    with mm:
        # every entry's (relative offset, position) at once: one unpack, not an object per entry
        count = len(mm) // OFFSET_ENTRY.size
        positions = list(struct.unpack_from(f">{count * 2}i", mm)[1::2])
    for i in range(1, len(positions)):
        if positions[i] <= positions[i - 1]:
            return positions[:i]
    return positions


class _HeaderWalk:
    """Batch starts found from a known one by framing alone: each header's size field, read
    in 16 KiB blocks (after a batch larger than a block, its successor's header alone), never
    the batches' contents."""

    __slots__ = ("fd", "size", "buf", "buf_start", "length")

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self.buf, self.buf_start = b"", 0
        self.length = 0  # the size field of the last header read

    def first_start(self, pos: int, want: int) -> int | None:
        """The first batch start at or after ``want``, walking from the batch start ``pos``;
        None when a header on the way (or there) does not frame a whole entry: a tail, damage."""
        size = self.size
        while True:
            rel = pos - self.buf_start
            if not 0 <= rel <= len(self.buf) - LOG_OVERHEAD:
                read = LOG_OVERHEAD if self.length > _HEADER_BLOCK else _HEADER_BLOCK
                self.buf, self.buf_start, rel = os.pread(self.fd, read, pos), pos, 0
                if len(self.buf) < LOG_OVERHEAD:
                    return None
            _offset, length = _HEAD.unpack_from(self.buf, rel)
            self.length = length
            if length < RECORD_OVERHEAD_V0 or pos + LOG_OVERHEAD + length > size:
                return None
            if pos >= want:
                return pos
            pos += LOG_OVERHEAD + length


def _split_points(seg: Segment, size: int, wanted: list[int]) -> list[int]:
    """The first batch start at or after each wanted position (ascending), by a header walk
    that jumps ahead to the last ``.index`` position below the wanted one when the batch there
    is whole and its CRC holds. A header that does not frame a batch ends the cuts."""
    positions = _index_positions(seg)
    cuts: list[int] = []
    pos = 0  # a batch start
    with open_log(seg.log_path) as f:
        walk = _HeaderWalk(f.fileno(), size)
        for want in wanted:
            i = bisect.bisect_right(positions, want) - 1
            if i >= 0 and pos < positions[i] < size and batch_at(seg.log_path, positions[i]) is not None:
                pos = positions[i]
            found = walk.first_start(pos, want)
            if found is None:
                return cuts
            pos = found
            if not cuts or pos > cuts[-1]:
                cuts.append(pos)
    return cuts


_NEAR = 1 << 20
"""The cheap split walks headers to a cut from a known batch start at most this far below it."""


def _candidate_points(seg: Segment, size: int, wanted: list[int]) -> list[int]:
    """A candidate batch start at or after each wanted position and past the previous one:
    a header walk from a known batch start (a checked ``.index`` entry, or 0) within
    :data:`_NEAR` below, else :func:`resync`'s first valid entry. No candidate ends the cuts."""
    mm = _open_index(seg.index_path)
    cuts: list[int] = []
    try:
        with open_log(seg.log_path) as f:
            walk = _HeaderWalk(f.fileno(), size)
            for want in wanted:
                if cuts:
                    want = max(want, cuts[-1] + 1)
                known = 0 if mm is None else _index_floor(mm, want)
                if not 0 < known < size or want - known > _NEAR or batch_at(seg.log_path, known) is None:
                    known = 0  # the start of the file is the known batch start
                found = walk.first_start(known, want) if want - known <= _NEAR else None
                if found is None:
                    found = resync(seg.log_path, want, size)
                    if found is None:
                        return cuts
                cuts.append(found)
    finally:
        if mm is not None:
            mm.close()
    return cuts


def _index_floor(mm: mmap.mmap, want: int) -> int:
    """The last ``.index`` position at or below ``want`` (0 if none), by binary search: the
    entries' positions increase up to a zero-filled (preallocated) tail, which is left out. An
    index that is not in order gives some entry: the caller checks the batch there."""
    from kafkatool.segment.index import OFFSET_ENTRY  # (relative offset, position), spec §6

    size = OFFSET_ENTRY.size
    no_entry = bytes(size)
    lo, hi = 0, len(mm) // size
    while lo < hi:  # the first all-zero entry starts the tail
        mid = (lo + hi) // 2
        if mm[mid * size : (mid + 1) * size] == no_entry:
            hi = mid
        else:
            lo = mid + 1
    lo, hi = 0, lo
    while lo < hi:
        mid = (lo + hi) // 2
        if OFFSET_ENTRY.unpack_from(mm, mid * size)[1] <= want:
            lo = mid + 1
        else:
            hi = mid
    return 0 if lo == 0 else OFFSET_ENTRY.unpack_from(mm, (lo - 1) * size)[1]


# ----------------------------------------------------------------------------- partitions


class Partition:
    """A partition directory. Nothing is read until asked.

    ``topic``/``partition``/``state``/``unique_id`` come from the directory name as Kafka
    parses it (``LocalLog.parseTopicPartitionName``: the split is at the last ``-``;
    ``<topic>-<p>.<uuid>-delete|-future|-stray`` carry a state). A directory whose name
    Kafka would refuse (a copy named ``backup``) is still a Partition: ``topic`` and
    ``partition`` are then None.
    """

    __slots__ = ("path", "name", "parsed", "log_dir", "_listing")

    def __init__(self, path: str | os.PathLike[str], *, log_dir: "LogDir | None" = None) -> None:
        self.path: str = os.fspath(path)
        self.name: str = os.path.basename(os.path.abspath(self.path))
        self.parsed: PartitionDir | None = names.parse_partition_dir(self.name)
        self.log_dir = log_dir
        self._listing: list[Entry] | None = None

    def __repr__(self) -> str:
        return f"Partition({self.path!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Partition) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    @property
    def topic(self) -> str | None:
        return self.parsed.topic if self.parsed else None

    @property
    def partition(self) -> int | None:
        return self.parsed.partition if self.parsed else None

    @property
    def state(self) -> str | None:
        """None for a live partition, else ``"delete"``, ``"future"`` or ``"stray"``."""
        return self.parsed.state if self.parsed else None

    @property
    def unique_id(self) -> str | None:
        return self.parsed.unique_id if self.parsed else None

    def sort_key(self) -> tuple:
        """``(topic, partition, state, name)``, None sorting first."""
        return (self.topic or "", -1 if self.partition is None else self.partition, self.state or "", self.name)

    def listing(self, *, refresh: bool = False) -> list[Entry]:
        """Every entry of the directory, classified, in segment order
        (:func:`files.segment_order`: each segment's files by base offset, then the rest by name).

        Read once and kept (``refresh`` reads it again). Raises :class:`DirectoryError`.
        """
        if self._listing is None or refresh:
            entries = list_dir(self.path)
            entries.sort(key=lambda e: names.segment_order(e.name))
            self._listing = entries
        return self._listing

    def segments(self) -> list[Segment]:
        """The segments, in base-offset order, each with its side files (see :func:`segments_of`)."""
        return segments_of(self.listing())

    def batches(
        self,
        start_offset: int | None = None,
        *,
        start_time: int | None = None,
        end_offset: int | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    ) -> "PartitionReader":
        """The batches of every segment in offset order, from ``start_offset`` or ``start_time``.

        ``start_offset`` starts in the segment that holds it (the last whose base offset is at
        most it) at the batch holding it; ``start_time`` at the first batch, in offset order,
        whose max timestamp is at least it (each segment looked up in its ``.timeindex``
        until one has such a batch; then every later batch follows). ``end_offset``
        (exclusive) stops before the first batch whose offsets all lie at or above it. Each
        segment is read as :meth:`Segment.batches` reads it (errors located, memory flat).
        """
        return PartitionReader(self, start_offset, start_time, end_offset, max_batch_bytes)

    def records(
        self,
        start_offset: int | None = None,
        *,
        start_time: int | None = None,
        end_offset: int | None = None,
        control: bool = False,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    ) -> Iterator[Record]:
        """The records of :meth:`batches` (same arguments), decoded; ``end_offset`` exclusive.

        As :meth:`Segment.records`: records before ``start_offset`` (or before the first at or
        after ``start_time``) are left out, control records unless ``control``.
        """
        reader = self.batches(start_offset, start_time=start_time, end_offset=end_offset,
                              max_batch_bytes=max_batch_bytes)
        records = iter_records(reader, offset=start_offset, timestamp=start_time, control=control)
        if end_offset is None:
            return records
        return (r for r in records if r.offset < end_offset)

    def find_file(self, name: str) -> str | None:
        """The path of the regular file ``name`` in this dir (``leader-epoch-checkpoint`` ...), or None."""
        for e in self.listing():
            if e.name == name and e.is_file:
                return e.path
        return None


# ----------------------------------------------------------------------------- log dirs


class LogDir:
    """A broker's log dir (one entry of ``log.dirs``). Nothing is read until asked."""

    __slots__ = ("path", "_listing")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path: str = os.fspath(path)
        self._listing: list[Entry] | None = None

    def __repr__(self) -> str:
        return f"LogDir({self.path!r})"

    def listing(self, *, refresh: bool = False) -> list[Entry]:
        """Every entry of the log dir, classified, sorted by name. Raises :class:`DirectoryError`."""
        if self._listing is None or refresh:
            self._listing = list_dir(self.path)
        return self._listing

    def partitions(self) -> list[Partition]:
        """The partition dirs Kafka would load or mark (a directory named ``<topic>-<partition>``,
        with or without a ``-delete``/``-future``/``-stray`` state), sorted by
        ``(topic, partition, state, name)``. Other directories (``remote-log-index-cache``, a
        stray copy) are not partitions."""
        out = [Partition(e.path, log_dir=self) for e in self.listing() if e.is_dir and e.partition_dir is not None]
        out.sort(key=Partition.sort_key)
        return out

    def partition(self, topic: str, partition: int) -> Partition | None:
        """The live partition dir of ``topic``/``partition``, or None."""
        for p in self.partitions():
            if p.topic == topic and p.partition == partition and p.state is None:
                return p
        return None

    def _file(self, name: str) -> str | None:
        for e in self.listing():
            if e.name == name and e.is_file:
                return e.path
        return None

    def offset_checkpoint(self, name: str) -> dict[tuple[str, int], int] | None:
        """The entries of the offset checkpoint ``name`` as ``{(topic, partition): offset}``, or
        None when the log dir has none. ``name`` is ``recovery-point-offset-checkpoint``,
        ``replication-offset-checkpoint``, ``log-start-offset-checkpoint`` or
        ``cleaner-offset-checkpoint``. Raises :class:`~kafkatool.errors.CheckpointError` for a
        malformed file (Kafka's message, with the line's byte position).
        """
        if name not in names.OFFSET_CHECKPOINTS:
            raise ValueError(f"not an offset checkpoint name: {name!r} (one of {sorted(names.OFFSET_CHECKPOINTS)})")
        path = self._file(name)
        if path is None:
            return None
        from kafkatool.segment.checkpoint import read_offset_checkpoint

        return {(e.topic, e.partition): e.offset for e in read_offset_checkpoint(path)}

    def meta_properties(self) -> dict[str, str] | None:
        """``meta.properties`` (broker/node id, cluster id, version) as strings, or None when absent."""
        path = self._file(names.META_PROPERTIES)
        if path is None:
            return None
        from kafkatool.segment.checkpoint import read_meta_properties

        return read_meta_properties(path)


# ----------------------------------------------------------------------------- command-line paths


@dataclass(frozen=True, slots=True, eq=False)
class Target:
    """One path :func:`expand` found: a path named on the command line, or a directory reached.

    For a directory, :attr:`entries` is its classified listing (sorted by name), or
    :attr:`error` says why it could not be listed. For a path named that is not a directory,
    :attr:`entries` is None, and :attr:`type` says what it is (:attr:`EntryType.MISSING` when
    it does not exist: :attr:`error` then holds the ``stat`` failure).
    """

    path: str
    named: bool
    """Given on the command line (not found below one)."""
    type: EntryType
    entries: tuple[Entry, ...] | None = None
    error: KafkaToolError | None = None
    parent: "Target | None" = field(default=None, repr=False)
    """The directory target this one was found in (None for a named path)."""
    is_log_dir: bool = False
    """A directory holding ``meta.properties``: every broker writes one in each log dir at start."""
    holds_segments: bool = False
    """A directory holding a segment file (:func:`holds_segment_files`)."""
    holds_partition_dirs: bool = False
    """A directory holding subdirectories named like partition dirs: a log dir (or a copy of some of
    its partitions), whatever its own name says (Kafka never puts a directory in a partition dir)."""

    @classmethod
    def of_dir(cls, path: str, named: bool, entries: tuple[Entry, ...], parent: "Target | None" = None) -> "Target":
        """The target of a directory listed (what it holds computed once, not per question)."""
        return cls(path, named, EntryType.DIR, entries, None, parent,
                   is_log_dir=any(e.name == names.META_PROPERTIES for e in entries),
                   holds_segments=holds_segment_files(entries),
                   holds_partition_dirs=any(e.is_dir and e.partition_dir is not None for e in entries))

    @property
    def is_partition(self) -> bool:
        """A listed directory read as a partition: it holds segment files, or it is named
        ``<topic>-<partition>`` and holds no partition dirs (``kafka-logs-1`` holding ``orders-0``
        is a log dir, not partition 1 of "kafka-logs")."""
        return self.error is None and self.is_dir and (
            self.holds_segments or (self.partition_dir is not None and not self.holds_partition_dirs))

    @property
    def is_dir(self) -> bool:
        return self.type is EntryType.DIR

    @property
    def name(self) -> str:
        return os.path.basename(os.path.abspath(self.path)) if self.path else ""

    @property
    def partition_dir(self) -> PartitionDir | None:
        """The name parsed as a partition dir's, or None."""
        return names.parse_partition_dir(self.name)

    @property
    def depth(self) -> int:
        """0 for a named path, 1 for a directory found in it, ..."""
        n, t = 0, self.parent
        while t is not None:
            n, t = n + 1, t.parent
        return n

    def partition(self) -> Partition:
        """This directory as a :class:`Partition` (its listing already read)."""
        p = Partition(self.path)
        if self.entries is not None:
            listing = list(self.entries)
            listing.sort(key=lambda e: names.segment_order(e.name))
            p._listing = listing  # noqa: SLF001 - the same class family; the listing is read once
        return p


#: ``descend(directory_target, subdirectory_entry) -> bool``: whether :func:`expand` goes into a subdirectory.
Descend = Callable[[Target, Entry], bool]


def descend_all(target: Target, entry: Entry) -> bool:
    """Go into every subdirectory that is not a symbolic link, except below a directory holding
    segment files (a partition dir has no subdirectories Kafka reads). A directory named like a
    partition is searched too: ``/var/lib/kafka/data-1`` is a log dir, not partition 1 of "data"."""
    return not entry.is_symlink and not target.holds_segments


def descend_partition_named(target: Target, entry: Entry) -> bool:
    """Go into subdirectories named like partition dirs, following symbolic links."""
    return entry.partition_dir is not None


def expand(paths: Iterable[str], *, descend: Descend = descend_all) -> list[Target]:
    """The targets of command-line ``paths``: files, partition dirs, log dirs, directories of log dirs.

    Each path gives one :class:`Target`; a directory is then searched, pre-order in name
    order, every subdirectory for which ``descend(directory, entry)`` is true giving its own
    target (found below it, :attr:`Target.parent` set). :func:`descend_all` (the default)
    searches a whole tree without following symbolic links and stops at segment-holding dirs;
    :func:`descend_partition_named` follows only ``<topic>-<partition>`` names (symbolic links
    included). A directory is visited once even when two links lead to it.

    Nothing raises for a bad path: a directory that cannot be listed is a target with an
    :attr:`~Target.error` (a :class:`DirectoryError`), a named path that does not exist one
    with ``type`` MISSING and an error; the others are still searched. Only listings and a
    ``stat`` per named path are read; no file is opened.
    """
    out: list[Target] = []

    def visit(path: str, named: bool, parent: Target | None, above: frozenset[tuple[int, int]]) -> None:
        try:
            st = os.stat(path)
        except OSError:
            pass
        else:
            key = (st.st_dev, st.st_ino)
            if key in above:
                return  # a symbolic link to a directory above it: the search would never end
            above = above | {key}
        try:
            entries = tuple(list_dir(path))
        except DirectoryError as e:
            out.append(Target(path, named, EntryType.DIR, None, e, parent))
            return
        t = Target.of_dir(path, named, entries, parent)
        out.append(t)
        for e in entries:
            if e.is_dir and descend(t, e):
                visit(e.path, False, t, above)

    for p in paths:
        p = os.fspath(p)
        try:
            mode = os.stat(p).st_mode
        except (OSError, ValueError) as e:  # ValueError: an embedded NUL
            err = KafkaToolError(f"cannot read the file: {getattr(e, 'strerror', None) or e}", path=p)
            err.__cause__ = e
            out.append(Target(p, True, EntryType.MISSING, None, err))
            continue
        if mode is not None and stat.S_ISDIR(mode):
            visit(p, True, None, frozenset())
        else:
            out.append(Target(p, True, entry_type_of(mode)))
    return out


_LAST_OFFSET = (1 << 63) - 1


def log_end_offset(partition: Partition) -> int | None:
    """The partition's log end offset: the next offset after its last batch (the last segment
    holding one), the last segment's base offset when no segment holds one; None without
    segments. Each segment is walked from its last ``.index`` entry (checked to start a whole
    batch; from the start without one), damaged regions walked around as the replay does."""
    segments = partition.segments()
    for seg in reversed(segments):
        last = None
        f = open_log(seg.log_path)
        try:
            size = os.fstat(f.fileno()).st_size
            for start in dict.fromkeys((seg.find_position(_LAST_OFFSET), 0)):
                for item in batches_and_regions(seg, f.fileno(), start, size, size):
                    if not isinstance(item, BadRegion):
                        last = item[0]
                if last is not None:
                    break  # (nothing from the index entry on: the whole segment is walked)
        finally:
            f.close()
        if last is not None:
            return last.next_offset
    return segments[-1].base_offset if segments else None


def best_copy(copies: Sequence[Partition]) -> tuple[int, list[int | None]]:
    """Of several copies of one partition (replicas from several brokers' log dirs): the index of
    the one with the highest :func:`log_end_offset` (the first on a tie; one that cannot be read
    counts as the lowest), and each copy's log end offset (None: no segment, or unreadable)."""
    ends: list[int | None] = []
    for p in copies:
        try:
            ends.append(log_end_offset(p))
        except (KafkaToolError, OSError):
            ends.append(None)
    best = max(range(len(copies)), key=lambda i: (-1 if ends[i] is None else ends[i], -i))
    return best, ends


def iter_partitions(targets: Iterable[Target]) -> Iterator[Partition]:
    """The partition dirs among ``targets``: directories holding segment files or named ``<topic>-<partition>``."""
    for t in targets:
        if t.is_partition:
            yield t.partition()
