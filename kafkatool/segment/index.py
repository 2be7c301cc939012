"""Offset index (``.index``) and time index (``.timeindex``), spec §8.

Reading follows ``AbstractIndex``: Kafka trusts the file length, so the entry count is
``floor(length / entry size)`` and the zero-filled slots of an untrimmed (preallocated)
file count as entries (§8.2). Entries are decoded on access from the file bytes, so a
10 MiB preallocated index costs 10 MiB, not a million objects.

Writing follows the broker's recovery rebuild (``LogSegment.recover``, §8.3, §12.2):
:class:`IndexBuilder` reproduces it byte for byte, including the OffsetIndex and
TimeIndex append rules.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Iterable, Iterator, NamedTuple, Sequence, TypeVar, overload

from kafkatool.segment.index_scan import IndexScanState
from kafkatool.errors import CorruptIndexError
from kafkatool.record.layout import INT32_MAX
from kafkatool.segment.files import parse_base_offset

__all__ = [
    "OffsetIndexEntry",
    "TimeIndexEntry",
    "IndexEntries",
    "OffsetIndex",
    "TimeIndex",
    "IndexFile",
    "IndexAppendError",
    "IndexBuilder",
    "decode_offset_index",
    "decode_time_index",
    "read_offset_index",
    "read_time_index",
    "sanity_check_offset_index",
    "sanity_check_time_index",
    "lookup_offset",
    "lookup_time",
    "encode_offset_index",
    "encode_time_index",
    "OFFSET_ENTRY_SIZE",
    "TIME_ENTRY_SIZE",
    "DEFAULT_MAX_INDEX_SIZE",
    "DEFAULT_INDEX_INTERVAL_BYTES",
]

# §8.1 entry layouts, big-endian.
OFFSET_ENTRY = struct.Struct(
    ">"
    "i"  # relativeOffset: offset - segment baseOffset
    "i"  # physical position of a batch start in the .log
)
TIME_ENTRY = struct.Struct(
    ">"
    "q"  # timestamp (ms)
    "i"  # relativeOffset
)
OFFSET_ENTRY_SIZE = OFFSET_ENTRY.size  # 8, OffsetIndex.ENTRY_SIZE
TIME_ENTRY_SIZE = TIME_ENTRY.size  # 12, TimeIndex.ENTRY_SIZE

DEFAULT_MAX_INDEX_SIZE = 10485760  # segment.index.bytes (§8.2)
DEFAULT_INDEX_INTERVAL_BYTES = 4096  # index.interval.bytes (§8.3)
NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP (§1)

_WARM_BYTES = 8192  # AbstractIndex.warmEntries() = 8192 / entrySize


class IndexAppendError(CorruptIndexError):
    """An append the broker's OffsetIndex/TimeIndex would refuse (§8.3).

    Raised by :class:`IndexBuilder` when the batches fed to it break Kafka's rules
    (offsets not increasing, an offset that cannot be made relative, a full index).
    During recovery the broker treats these as a failed segment (§12.1).
    """


class OffsetIndexEntry(NamedTuple):
    """One ``.index`` slot: the batch starting at ``position`` has lastOffset ``base + relative_offset``."""

    relative_offset: int
    position: int

    def absolute_offset(self, base_offset: int) -> int:
        """The offset this entry names, given the segment's base offset."""
        return base_offset + self.relative_offset


class TimeIndexEntry(NamedTuple):
    """One ``.timeindex`` slot: max timestamp ``timestamp`` is reached by offset ``base + relative_offset``."""

    timestamp: int
    relative_offset: int

    def absolute_offset(self, base_offset: int) -> int:
        """The offset this entry names, given the segment's base offset."""
        return base_offset + self.relative_offset


E = TypeVar("E", OffsetIndexEntry, TimeIndexEntry)


class IndexEntries(Sequence[E]):
    """A read-only sequence of index entries decoded on access from the file bytes."""

    __slots__ = ("_data", "_layout", "_factory", "_count")

    def __init__(self, data: bytes, layout: struct.Struct, factory: Callable[..., E]) -> None:
        self._data = data
        self._layout = layout
        self._factory = factory
        self._count = len(data) // layout.size

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> E: ...

    @overload
    def __getitem__(self, i: slice) -> list[E]: ...

    def __getitem__(self, i: int | slice) -> E | list[E]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError("index entry out of range")
        return self._factory(*self._layout.unpack_from(self._data, i * self._layout.size))

    def __iter__(self) -> Iterator[E]:
        factory = self._factory
        whole = memoryview(self._data)[: self._count * self._layout.size]
        for fields in self._layout.iter_unpack(whole):
            yield factory(*fields)

    def __repr__(self) -> str:
        return f"IndexEntries({self._count} x {self._factory.__name__})"


@dataclass(frozen=True, slots=True)
class IndexFile:
    """A decoded index file of fixed-size entries. ``data`` is the whole file content."""

    base_offset: int
    data: bytes = field(repr=False)
    path: str | None = None
    ENTRY_SIZE: ClassVar[int] = 1

    @property
    def file_length(self) -> int:
        return len(self.data)

    @property
    def entry_count(self) -> int:
        """``floor(length / ENTRY_SIZE)``: zero-filled slots count, as in Kafka (§8.2)."""
        return len(self.data) // self.ENTRY_SIZE

    @property
    def remainder(self) -> int:
        """Bytes after the last whole entry (ignored by Kafka, flagged by the sanity check)."""
        return len(self.data) % self.ENTRY_SIZE


@dataclass(frozen=True, slots=True)
class OffsetIndex(IndexFile):
    """A decoded ``.index`` file (8-byte entries)."""

    ENTRY_SIZE: ClassVar[int] = OFFSET_ENTRY_SIZE

    @property
    def entries(self) -> IndexEntries[OffsetIndexEntry]:
        return IndexEntries(self.data, OFFSET_ENTRY, OffsetIndexEntry)

    @property
    def last_offset(self) -> int:
        """Kafka's ``lastOffset``: the last entry's offset, or the base offset when empty (§8.2)."""
        count = self.entry_count
        if count == 0:
            return self.base_offset
        rel, _ = OFFSET_ENTRY.unpack_from(self.data, (count - 1) * OFFSET_ENTRY_SIZE)
        return self.base_offset + rel

    def iter_absolute(self) -> Iterator[tuple[int, int]]:
        """Every entry as ``(absolute offset, position)``, zero tail included."""
        base = self.base_offset
        for rel, position in OFFSET_ENTRY.iter_unpack(memoryview(self.data)[: self.entry_count * OFFSET_ENTRY_SIZE]):
            yield base + rel, position

    def iter_dump_entries(self) -> Iterator[tuple[int, int]]:
        """``(absolute offset, position)`` as DumpLogSegments visits them (§15.5 step 5.1).

        Stops at the first entry ``i > 0`` whose relative offset is 0 (the zero-tail rule),
        so an untrimmed index ends where its real entries end.
        """
        for i, (offset, position) in enumerate(self.iter_absolute()):
            if i > 0 and offset == self.base_offset:
                return
            yield offset, position

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """``OffsetIndex.lookup``: see :func:`lookup_offset`."""
        return lookup_offset(self.entries, self.base_offset, target_offset)


@dataclass(frozen=True, slots=True)
class TimeIndex(IndexFile):
    """A decoded ``.timeindex`` file (12-byte entries)."""

    ENTRY_SIZE: ClassVar[int] = TIME_ENTRY_SIZE

    @property
    def entries(self) -> IndexEntries[TimeIndexEntry]:
        return IndexEntries(self.data, TIME_ENTRY, TimeIndexEntry)

    @property
    def last_entry(self) -> tuple[int, int]:
        """Kafka's ``lastEntry`` as ``(timestamp, absolute offset)``; ``(-1, base)`` when empty (§8.2)."""
        count = self.entry_count
        if count == 0:
            return NO_TIMESTAMP, self.base_offset
        ts, rel = TIME_ENTRY.unpack_from(self.data, (count - 1) * TIME_ENTRY_SIZE)
        return ts, self.base_offset + rel

    def iter_absolute(self) -> Iterator[tuple[int, int]]:
        """Every entry as ``(timestamp, absolute offset)``, zero tail included."""
        base = self.base_offset
        for ts, rel in TIME_ENTRY.iter_unpack(memoryview(self.data)[: self.entry_count * TIME_ENTRY_SIZE]):
            yield ts, base + rel

    def iter_dump_entries(self) -> Iterator[tuple[int, int]]:
        """``(timestamp, absolute offset)`` as DumpLogSegments visits them (§15.6 step 3.1).

        Stops at the first entry ``i > 0`` whose relative offset is 0 (the zero-tail rule).
        """
        for i, (ts, offset) in enumerate(self.iter_absolute()):
            if i > 0 and offset == self.base_offset:
                return
            yield ts, offset

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """``TimeIndex.lookup``: see :func:`lookup_time`."""
        return lookup_time(self.entries, self.base_offset, target_timestamp)


# ----------------------------------------------------------------------------- decode / read


def decode_offset_index(data: bytes, base_offset: int, path: str | None = None) -> OffsetIndex:
    """Wrap the bytes of a ``.index`` file. Never fails: any length is a valid Kafka read (§8.2)."""
    return OffsetIndex(base_offset, bytes(data), path)


def decode_time_index(data: bytes, base_offset: int, path: str | None = None) -> TimeIndex:
    """Wrap the bytes of a ``.timeindex`` file. Never fails: any length is a valid Kafka read (§8.2)."""
    return TimeIndex(base_offset, bytes(data), path)


def _read(path: str | os.PathLike[str], base_offset: int | None) -> tuple[bytes, int, str]:
    # Missing files raise OSError: a read-only tool must not create them (§17.E.46).
    spath = os.fspath(path)
    if base_offset is None:
        base_offset = parse_base_offset(spath)
    with open(spath, "rb") as f:
        data = f.read()
    return data, base_offset, spath


def read_offset_index(path: str | os.PathLike[str], base_offset: int | None = None) -> OffsetIndex:
    """Read a ``.index`` file; ``base_offset`` defaults to the one in its name (§15.5 step 1)."""
    data, base, spath = _read(path, base_offset)
    return OffsetIndex(base, data, spath)


def read_time_index(path: str | os.PathLike[str], base_offset: int | None = None) -> TimeIndex:
    """Read a ``.timeindex`` file; ``base_offset`` defaults to the one in its name."""
    data, base, spath = _read(path, base_offset)
    return TimeIndex(base, data, spath)


# ----------------------------------------------------------------------------- sanity checks


def _display_path(path: str | None) -> str:
    # Kafka prints File.getAbsolutePath().
    return os.path.abspath(path) if path else "<memory>"


def sanity_check_offset_index(index: OffsetIndex, path: str | None = None) -> None:
    """``OffsetIndex.sanityCheck`` (§8.4): both checks, in Kafka's order.

    Raises :class:`CorruptIndexError` whose ``message`` is exactly Kafka's text, with the
    absolute path of ``path`` (default ``index.path``) inside it; the error itself carries
    no path or position, so ``str(err)`` is Kafka's text too.
    Note: an index with 0 entries (e.g. 5 bytes) fails only the length check; DumpLogSegments
    prints ``<path> is empty.`` before it would run this (§15.5 step 3).
    """
    where = _display_path(path if path is not None else index.path)
    last = index.last_offset
    if index.entry_count != 0 and last < index.base_offset:
        raise CorruptIndexError(
            f"Corrupt index found, index file {where} has non-zero size but the last offset "
            f"is {last} which is less than the base offset {index.base_offset}"
        )
    if index.file_length % OFFSET_ENTRY_SIZE != 0:
        raise CorruptIndexError(
            f"Index file {where} is corrupt, found {index.file_length} bytes which is neither "
            f"positive nor a multiple of {OFFSET_ENTRY_SIZE}"
        )


def sanity_check_time_index(index: TimeIndex, path: str | None = None) -> None:
    """``TimeIndex.sanityCheck`` (§8.4): the three checks, in Kafka's order.

    Raises :class:`CorruptIndexError` whose ``message`` is exactly Kafka's text (path=None
    on the error). An untrimmed time index fails the first check (last timestamp 0).
    """
    where = _display_path(path if path is not None else index.path)
    last_ts, last_offset = index.last_entry
    if index.entry_count != 0:
        first_ts, _ = TIME_ENTRY.unpack_from(index.data, 0)
        if last_ts < first_ts:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({where}) has non-zero size but the "
                f"last timestamp is {last_ts} which is less than the first timestamp {first_ts}"
            )
        if last_offset < index.base_offset:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({where}) has non-zero size but the "
                f"last offset is {last_offset} which is less than the first offset {index.base_offset}"
            )
    if index.file_length % TIME_ENTRY_SIZE != 0:
        raise CorruptIndexError(
            f"Time index file {where} is corrupt, found {index.file_length} bytes which is neither "
            f"positive nor a multiple of {TIME_ENTRY_SIZE}"
        )


# ----------------------------------------------------------------------------- lookups


def _largest_lower_bound(count: int, key: Callable[[int], int], target: int, entry_size: int) -> int:
    """``AbstractIndex.largestLowerBoundSlotFor``: slot of the largest key <= target, or -1.

    Kafka's exact search, warm section included, so that on an unsorted (e.g. zero-tailed)
    index it lands on the same slot as the broker and DumpLogSegments.
    """
    if count == 0:
        return -1
    first_hot = max(0, count - 1 - _WARM_BYTES // entry_size)
    if key(first_hot) < target:
        lo, hi = first_hot, count - 1
    else:
        if key(0) > target:
            return -1
        lo, hi = 0, first_hot
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        found = key(mid)
        if found > target:
            hi = mid - 1
        elif found < target:
            lo = mid
        else:
            return mid
    return lo


def lookup_offset(entries: Sequence[OffsetIndexEntry], base_offset: int, target: int) -> tuple[int, int]:
    """``OffsetIndex.lookup`` (§8.2): ``(offset, position)`` of the largest entry with offset <= target.

    ``(base_offset, 0)`` when the index is empty or every entry is larger.
    """
    slot = _largest_lower_bound(
        len(entries), lambda i: base_offset + entries[i].relative_offset, target, OFFSET_ENTRY_SIZE
    )
    if slot == -1:
        return base_offset, 0
    entry = entries[slot]
    return base_offset + entry.relative_offset, entry.position


def lookup_time(entries: Sequence[TimeIndexEntry], base_offset: int, target_timestamp: int) -> tuple[int, int]:
    """``TimeIndex.lookup`` (§8.2): ``(timestamp, offset)`` of the largest entry with timestamp <= target.

    ``(-1, base_offset)`` when the index is empty or every entry is larger.
    """
    slot = _largest_lower_bound(len(entries), lambda i: entries[i].timestamp, target_timestamp, TIME_ENTRY_SIZE)
    if slot == -1:
        return NO_TIMESTAMP, base_offset
    entry = entries[slot]
    return entry.timestamp, base_offset + entry.relative_offset


# ----------------------------------------------------------------------------- encode


def encode_offset_index(entries: Iterable[OffsetIndexEntry | tuple[int, int]]) -> bytes:
    """The bytes of a trimmed ``.index`` holding ``entries`` ((relative offset, position) pairs)."""
    out = bytearray()
    for rel, position in entries:
        try:
            out += OFFSET_ENTRY.pack(rel, position)
        except struct.error:
            raise CorruptIndexError(
                "offset index entry does not fit 8 bytes",
                expected="int32 relative offset and int32 position",
                found=(rel, position),
            ) from None
    return bytes(out)


def encode_time_index(entries: Iterable[TimeIndexEntry | tuple[int, int]]) -> bytes:
    """The bytes of a trimmed ``.timeindex`` holding ``entries`` ((timestamp, relative offset) pairs)."""
    out = bytearray()
    for ts, rel in entries:
        try:
            out += TIME_ENTRY.pack(ts, rel)
        except struct.error:
            raise CorruptIndexError(
                "time index entry does not fit 12 bytes",
                expected="int64 timestamp and int32 relative offset",
                found=(ts, rel),
            ) from None
    return bytes(out)


# ----------------------------------------------------------------------------- recovery rebuild


class IndexBuilder:
    """Rebuild a segment's ``.index`` and ``.timeindex`` exactly as ``LogSegment.recover`` does (§8.3, §12.2).

    Feed every valid batch of the segment, in file order, starting at byte 0, with
    :meth:`add_batch`; then :meth:`finish` returns the trimmed file contents. The
    appends obey ``OffsetIndex.append`` and ``TimeIndex.maybeAppend``; a batch they
    would refuse raises :class:`IndexAppendError` with Kafka's message.

    ``path`` is only used in messages (Kafka names the index file there).
    """

    def __init__(
        self,
        base_offset: int,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        path: str | None = None,
    ) -> None:
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.path = path
        self._max_offset_entries = max_index_size // OFFSET_ENTRY_SIZE
        self._max_time_entries = max_index_size // TIME_ENTRY_SIZE
        self._offset = bytearray()
        self._time = bytearray()
        self._offset_entries = 0
        self._last_offset = base_offset  # OffsetIndex.lastOffset of an empty index
        self._time_entries = 0
        self._last_time_entry = (NO_TIMESTAMP, base_offset)  # TimeIndex.lastEntry of an empty index
        # recover(): validBytes = 0, lastIndexEntry = 0, maxTimestampSoFar unknown (§12.2 step 1)
        self._valid_bytes = 0
        self._last_index_entry = 0
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = base_offset
        self._finished = False

    # ---------------------------------------------------------------- Kafka's append rules
    def _where(self, kind: str) -> str:
        return f" to {self.path}" if self.path else f" to the {kind}"

    def _relative(self, offset: int) -> int:
        rel = offset - self.base_offset
        if rel < 0 or rel > INT32_MAX:
            # IndexOffsetOverflowException
            where = f" ({self.path})" if self.path else ""
            raise IndexAppendError(f"Integer overflow for offset: {offset}{where}")
        return rel

    def _append_offset(self, offset: int, position: int) -> None:
        # OffsetIndex.append (§8.3)
        if self._offset_entries >= self._max_offset_entries:
            raise IndexAppendError(f"Attempt to append to a full index (size = {self._offset_entries}).")
        if self._offset_entries != 0 and offset <= self._last_offset:
            raise IndexAppendError(
                f"Attempt to append an offset {offset} to position {self._offset_entries} no larger than "
                f"the last offset appended ({self._last_offset}){self._where('offset index')}",
                kind="offset_index_invalid_offset",  # Kafka's InvalidOffsetException (§8.3)
            )
        if position > INT32_MAX:
            # A segment is at most 2^31-1 bytes (§3); the position field is an int32.
            raise IndexAppendError(
                "index position does not fit an int32", expected=f"<= {INT32_MAX}", found=position
            )
        self._offset += OFFSET_ENTRY.pack(self._relative(offset), position)
        self._offset_entries += 1
        self._last_offset = offset

    def _maybe_append_time(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        # TimeIndex.maybeAppend (§8.3): the last slot is reserved for the roll/close entry.
        if not skip_full_check and self._time_entries >= self._max_time_entries - 1:
            raise IndexAppendError(f"Attempt to append to a full time index (size = {self._time_entries}).")
        last_ts, last_offset = self._last_time_entry
        if self._time_entries != 0 and offset < last_offset:
            raise IndexAppendError(
                f"Attempt to append an offset ({offset}) to slot {self._time_entries} no larger than "
                f"the last offset appended ({last_offset}){self._where('time index')}",
                kind="time_index_invalid_offset",  # Kafka's InvalidOffsetException (§8.3)
            )
        if self._time_entries != 0 and timestamp < last_ts:
            raise IndexAppendError(
                f"Attempt to append a timestamp ({timestamp}) to slot {self._time_entries} no larger than "
                f"the last timestamp appended ({last_ts}){self._where('time index')}"
            )
        # Only a strictly greater timestamp is appended: equal ones, and -1 into an empty index, are skipped.
        if timestamp > last_ts:
            self._time += TIME_ENTRY.pack(timestamp, self._relative(offset))
            self._time_entries += 1
            self._last_time_entry = (timestamp, offset)

    # ---------------------------------------------------------------- the recover loop
    def add_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        """One iteration of the ``recover`` loop for a batch that passed ``ensureValid`` (§12.2 step 2).

        ``position`` must be where the previous batch ended (Kafka indexes ``validBytes``,
        the sum of the earlier batch sizes); ``size`` includes the 12-byte log overhead.
        A batch refused with :class:`IndexAppendError` leaves the builder as it was (the
        time index can refuse an entry after the offset index took one): a repair goes on
        as if the walk had stopped before it.
        """
        saved = (len(self._offset), len(self._time), self._offset_entries, self._last_offset, self._time_entries,
                 self._last_time_entry, self._max_timestamp, self._offset_of_max_timestamp)
        try:
            self._add_batch(position, size, last_offset, max_timestamp)
        except IndexAppendError:
            (offset_len, time_len, self._offset_entries, self._last_offset, self._time_entries,
             self._last_time_entry, self._max_timestamp, self._offset_of_max_timestamp) = saved
            del self._offset[offset_len:]
            del self._time[time_len:]
            raise

    def _add_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        if self._finished:
            raise IndexAppendError("IndexBuilder.add_batch called after finish()")
        if position != self._valid_bytes:
            raise IndexAppendError(
                "batches must be added in file order without gaps",
                position=position,
                expected=f"a batch at byte {self._valid_bytes}",
                found=f"a batch at byte {position}",
            )
        # ensureOffsetInRange(batch.lastOffset): LogSegmentOffsetOverflowException
        rel = last_offset - self.base_offset
        if rel < 0 or rel > INT32_MAX:
            raise IndexAppendError(
                f"Detected offset overflow at offset {last_offset} in segment with base offset "
                f"{self.base_offset}",
                position=position,
                expected=f"an offset in [{self.base_offset}, {self.base_offset + INT32_MAX}]",
                found=last_offset,
            )
        # The max timestamp comes from the batch header; update it before indexing.
        if max_timestamp > self._max_timestamp:
            self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = last_offset
        # Strictly greater than the interval; the first batch (position 0) is never indexed.
        if self._valid_bytes - self._last_index_entry > self.index_interval_bytes:
            self._append_offset(last_offset, self._valid_bytes)
            self._maybe_append_time(self._max_timestamp, self._offset_of_max_timestamp)
            self._last_index_entry = self._valid_bytes
        self._valid_bytes += size

    # ---------------------------------------------------------------- the compiled loop
    def scan_state(self, take_transactional: bool) -> IndexScanState:
        """This builder's state as the :class:`IndexScanState` ``_speedups.index_v2`` reads and
        updates; ``take_transactional``: index transactional batches there too (the caller keeps
        no producer state). The index bytearrays are shared, not copied."""
        if self._finished:
            raise IndexAppendError("IndexBuilder.scan_state called after finish()")
        ts, off = self._last_time_entry
        return IndexScanState(
            base=self.base_offset, interval=self.index_interval_bytes, valid=self._valid_bytes,
            last_entry=self._last_index_entry, max_ts=self._max_timestamp, off_max_ts=self._offset_of_max_timestamp,
            off_entries=self._offset_entries, max_off_entries=self._max_offset_entries, last_offset=self._last_offset,
            time_entries=self._time_entries, max_time_entries=self._max_time_entries, last_time_ts=ts,
            last_time_off=off, offset_buf=self._offset, time_buf=self._time, take_txn=take_transactional,
        )

    def load_scan_state(self, st: IndexScanState) -> None:
        """Take the state the compiled loop left in ``st``."""
        self._valid_bytes = st.valid
        self._last_index_entry = st.last_entry
        self._max_timestamp = st.max_ts
        self._offset_of_max_timestamp = st.off_max_ts
        self._offset_entries = st.off_entries
        self._last_offset = st.last_offset
        self._time_entries = st.time_entries
        self._last_time_entry = (st.last_time_ts, st.last_time_off)

    def store_scan_state(self, st: IndexScanState) -> None:
        """Give the compiled loop this builder's state (after Python handled a batch)."""
        st.valid = self._valid_bytes
        st.last_entry = self._last_index_entry
        st.max_ts = self._max_timestamp
        st.off_max_ts = self._offset_of_max_timestamp
        st.off_entries = self._offset_entries
        st.max_off_entries = self._max_offset_entries
        st.last_offset = self._last_offset
        st.time_entries = self._time_entries
        st.max_time_entries = self._max_time_entries
        st.last_time_ts, st.last_time_off = self._last_time_entry

    @property
    def valid_bytes(self) -> int:
        """Bytes of the segment covered so far (where recovery would truncate)."""
        return self._valid_bytes

    @property
    def offset_entries(self) -> list[OffsetIndexEntry]:
        return list(IndexEntries(bytes(self._offset), OFFSET_ENTRY, OffsetIndexEntry))

    @property
    def time_entries(self) -> list[TimeIndexEntry]:
        return list(IndexEntries(bytes(self._time), TIME_ENTRY, TimeIndexEntry))

    def finish(self) -> tuple[bytes, bytes]:
        """Append the final time entry (``maybeAppend(..., skipFullCheck=true)``) and return the trimmed
        ``(offset index bytes, time index bytes)`` (§12.2 step 6). Calling it again returns the same bytes.
        """
        if not self._finished:
            self._maybe_append_time(self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True)
            self._finished = True
        return bytes(self._offset), bytes(self._time)
