"""One segment converted into a new directory: its ``.log`` rewritten at another message format or
codec (offsets kept, spec §13), its ``.index``/``.timeindex`` built as recovery builds them (§8.3,
§12.2), its ``.txnindex`` and producer snapshot carried over where they stay valid (§9, §10).

:func:`convert_segment` drives the source walk (:func:`kafkatool.convert.source.converted_entries`,
which applies the damage policy) with one :class:`~kafkatool.convert.rules.BatchConverter`. Every
output entry goes through a bounded write buffer (:data:`WRITE_BUFFER`) to a temp file
(``<name>`` + :data:`~kafkatool.safety.durable.TEMP_SUFFIX`, which Kafka's loader ignores), and its
header feeds an :class:`~kafkatool.segment.index.IndexBuilder` with its position in the new file:
the indexes are what ``kafkatool reindex`` writes for the new ``.log``, without a second walk. Each
file is fsynced and renamed to its name; the directory is fsynced last. Memory: one source batch
(the walk's), the converter's pending output and the write buffer.

Before the converter sees an entry, :class:`OffsetGuard` checks its offsets as recovery and the
index would (within 2^31-1 of the segment's base, after the previous entry's): an entry that fails
is damage located at its source position, so the dry and the real run refuse the same segments.

With ``out_dir=None`` nothing is written: a dry converter counts the losses exactly as a real run
would (what ``--strict`` and the in-place plans ask first).

What happens to each side file (:class:`SideFile`):

* ``.index``/``.timeindex``: always ``rebuilt`` (positions change with the bytes);
* ``.txnindex`` (aborted transactions, §9): ``copied`` for v2 output, where every batch keeps its
  offsets, producer id and transactional flag and the control batches (the ABORT markers the
  entries point at) are kept, so each entry still names the same transaction; ``dropped`` below
  v2 (no control batches and no transactional flag below v2: no transaction is left to index,
  and a down-converting fetch hands aborted records out the same way, §13.1) and with
  ``--drop-aborted`` (the aborted records are gone: a read_committed consumer has nothing left to
  skip, and the markers of emptied transactions make no entry, §9);
* the producer snapshot named after the segment's base offset (§10): ``copied`` for v2 output
  (producer ids, epochs, sequences and offsets are kept batch for batch, so the state it holds is
  the state of the new log; with ``--drop-aborted`` an open transaction it names still ends at its
  marker); ``dropped`` below v2 (legacy batches carry no producer id, epoch or sequence: the
  snapshot would describe batches that no longer exist in that form; the broker starts with empty
  producer state, as it does for any log below v2, §12.4).
"""

from __future__ import annotations

import errno
import os
import struct
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator

from kafkatool.convert.options import ConvertOptions, Loss
from kafkatool.errors import InvalidRecordError, KafkaToolError
from kafkatool.record.layout import INT32_MAX, LEGACY_V1_TIMESTAMP, MAGIC_OFFSET, V2
from kafkatool.safety.durable import TEMP_SUFFIX, fsync_dir, fsync_fd, take_owner, write_all, write_error
from kafkatool.segment import files as names
from kafkatool.segment.index import DEFAULT_INDEX_INTERVAL_BYTES, IndexAppendError, IndexBuilder

if TYPE_CHECKING:
    from kafkatool.convert.aborted import AbortedSet
    from kafkatool.segment.logdir import Segment

__all__ = [
    "COPY_CHUNK",
    "OffsetGuard",
    "SegmentResult",
    "SideFile",
    "WRITE_BUFFER",
    "convert_segment",
    "copy_file",
    "index_fields",
    "needs_aborted",
    "snapshot_decision",
    "txnindex_decision",
    "write_file",
]

WRITE_BUFFER = 8 << 20
"""Output bytes gathered before one ``write``: big writes, memory bounded whatever the segment."""
COPY_CHUNK = 8 << 20

Progress = Callable[[int], None]


@dataclass(slots=True)
class SideFile:
    """What a conversion did with one file other than a ``.log`` it converted."""

    name: str
    """The file's name (in the source dir; the same name in the output)."""
    action: str
    """``rebuilt``, ``copied``, ``dropped`` (a file Kafka reads that no longer holds for the new
    data) or ``not copied`` (a file that is not part of the converted log)."""
    reason: str

    def as_dict(self) -> dict[str, str]:
        """JSON-ready, stable key order."""
        return {"name": self.name, "action": self.action, "reason": self.reason}


@dataclass(slots=True)
class SegmentResult:
    """One converted segment (or, with ``out_path`` None, one analysed)."""

    log_path: str
    out_path: str | None
    base_offset: int
    loss: Loss
    bytes_in: int
    bytes_out: int
    batches_out: int
    side_files: list[SideFile] = field(default_factory=list)


def needs_aborted(options: ConvertOptions) -> bool:
    """Whether the conversion must know the aborted transactions: to leave their records out
    (``--drop-aborted``), or to count the aborted records a down-conversion makes readable
    (``aborted_records_kept``: below v2 no marker is left to hide them, §13.1)."""
    return options.drop_aborted or options.magic < 2


# ----------------------------------------------------------------------------- side-file decisions


def txnindex_decision(options: ConvertOptions) -> tuple[str, str]:
    """``(action, reason)`` for a segment's ``.txnindex`` under ``options`` (module doc, §9)."""
    if options.magic < 2:
        return "dropped", (
            f"magic {options.magic} has no control batches and no transactional flag: the ABORT markers "
            "its entries point at are not carried over, so no aborted transaction is left to index (§9, §13.1)"
        )
    if options.drop_aborted:
        return "dropped", (
            "--drop-aborted left the aborted transactions' records out: a read_committed consumer has "
            "nothing left to skip, and an emptied transaction's marker makes no entry (§9)"
        )
    return "copied", (
        "v2 output keeps every batch's offsets, producer id, transactional flag and the control "
        "batches: each entry still names the same aborted transaction (§9)"
    )


def snapshot_decision(options: ConvertOptions) -> tuple[str, str]:
    """``(action, reason)`` for a producer snapshot (``<offset>.snapshot``) under ``options`` (§10)."""
    if options.magic < 2:
        return "dropped", (
            f"magic {options.magic} batches carry no producer id, epoch or sequence: the state the "
            "snapshot holds describes batches that no longer exist in that form; the broker starts "
            "with empty producer state, as for any log below v2 (§10, §12.4)"
        )
    return "copied", (
        "v2 output keeps every batch's producer id, epoch, sequences and offsets: the producer "
        "state it holds is the new log's (§10)"
    )


# ----------------------------------------------------------------------------- file writing


def _open_new(path: str) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags, 0o600)
    except OSError as e:
        raise write_error(e, path, "create") from None


def _finish(fd: int, tmp: str, final: str, like: os.stat_result | None, like_owner: bool) -> None:
    """Give the temp file ``like``'s mode (and owner), fsync it, close it, rename it to ``final``."""
    try:
        if like is not None:
            if like_owner:
                take_owner(fd, like, tmp, times=False)
            else:
                try:
                    os.fchmod(fd, like.st_mode & 0o7777)
                except OSError as e:
                    raise write_error(e, tmp, "set the mode of") from None
        else:
            os.fchmod(fd, 0o644)
        fsync_fd(fd, tmp)
    finally:
        os.close(fd)
    try:
        os.rename(tmp, final)
    except OSError as e:
        raise write_error(e, final, "rename a temp file to") from None


def _discard(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _stat(path: str | None) -> os.stat_result | None:
    if path is None:
        return None
    try:
        return os.stat(path)
    except OSError:
        return None


def _write_new(path: str, like: os.stat_result | None, like_owner: bool, fill: Callable[[int, str], None]) -> None:
    """Create ``path`` (which must not exist) under a temp name: ``fill(fd, temp path)`` writes
    it; then ``like``'s mode (and owner with ``like_owner``), fsync, rename. A failure removes
    the temp file. The caller fsyncs the dir."""
    tmp = path + TEMP_SUFFIX
    fd = _open_new(tmp)
    try:
        fill(fd, tmp)
    except BaseException:
        os.close(fd)
        _discard(tmp)
        raise
    try:
        _finish(fd, tmp, path, like, like_owner)
    except BaseException:
        _discard(tmp)
        raise


def write_file(path: str, data: bytes, like: os.stat_result | None, *, like_owner: bool = False) -> None:
    """Write ``data`` to ``path`` (which must not exist) under a temp name, with ``like``'s mode
    (and owner with ``like_owner``, when permitted), fsynced, renamed. The caller fsyncs the dir."""
    _write_new(path, like, like_owner, lambda fd, tmp: write_all(fd, data, tmp))


def copy_file(src: str, path: str, *, like_owner: bool = False) -> int:
    """Copy the file ``src`` to ``path`` (which must not exist) as :func:`write_file` writes, with
    the source's mode; returns the bytes copied. A symbolic link ``src`` is refused, never
    followed: a side file linked to a file elsewhere (``/etc/shadow`` named
    ``leader-epoch-checkpoint``) would put that file's bytes into DEST."""
    try:
        sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise KafkaToolError("a symbolic link where a side file belongs: kafkatool copies no file through a "
                                 "link; replace it with the file it points to, or move it away",
                                 path=src, kind="refused") from None
        raise KafkaToolError(f"cannot read: {e.strerror or e}", path=src, kind="unreadable") from None
    done = 0

    def fill(fd: int, tmp: str) -> None:
        nonlocal done
        while True:
            try:
                piece = os.read(sfd, COPY_CHUNK)
            except OSError as e:
                raise KafkaToolError(f"cannot read: {e.strerror or e}", path=src, position=done,
                                     kind="unreadable") from None
            if not piece:
                return
            write_all(fd, piece, tmp)
            done += len(piece)

    try:
        _write_new(path, os.fstat(sfd), like_owner, fill)
        return done
    finally:
        os.close(sfd)


# ----------------------------------------------------------------------------- the segment

_V2_INDEX_FIELDS = struct.Struct(
    ">"
    "q"  # baseOffset (§4.1)
    f"{V2.LAST_OFFSET_DELTA - 8}x"
    "i"  # lastOffsetDelta
    f"{V2.MAX_TIMESTAMP - V2.LAST_OFFSET_DELTA - 4}x"
    "q"  # maxTimestamp
)
_I64 = struct.Struct(">q")


def index_fields(entry: bytes) -> tuple[int, int, int]:
    """``(first offset, last offset, max timestamp)`` of one whole output entry, as recovery reads
    its header (§12.2: ``batch.lastOffset``, ``batch.maxTimestamp``): a v2 batch's base offset,
    base + lastOffsetDelta and maxTimestamp; a legacy entry's offset (a wrapper's: its last inner
    one) twice and its v1 timestamp (v0: -1). What :func:`kafkatool.record.batch.batch_from_header`
    gives, without building a Batch or a CRC: the entry was just encoded."""
    magic = entry[MAGIC_OFFSET]
    if 2 <= magic < 128:
        base, delta, max_timestamp = _V2_INDEX_FIELDS.unpack_from(entry)
        return base, base + delta, max_timestamp
    (offset,) = _I64.unpack_from(entry)
    return offset, offset, _I64.unpack_from(entry, LEGACY_V1_TIMESTAMP)[0] if magic == 1 else -1



class OffsetGuard:
    """The converter, behind a check of every entry's offsets before it is fed (one rule for the
    dry and the real run, so ``analyze`` refuses what the real run would).

    An entry whose last offset cannot be made relative to the segment's base (recovery's
    ``ensureOffsetInRange``, §12.2) or whose first offset does not follow the previous entry's
    last (offsets only increase in a log; an index append would refuse it, §8.3) is damage: an
    :class:`~kafkatool.errors.InvalidRecordError` the source walk locates at the entry and, with
    ``--skip-damaged``, converts around. Typical cause: a flipped bit in a legacy message's offset
    field, which its CRC does not cover.
    """

    __slots__ = ("converter", "base", "path", "last")

    def __init__(self, converter, base: int, path: str) -> None:
        self.converter = converter
        self.base = base
        self.path = path
        self.last: int | None = None

    def feed(self, batch, data, *, salvaged: bool = False) -> list[bytes]:
        """Check ``batch``'s offsets, then :meth:`BatchConverter.feed <kafkatool.convert.rules.BatchConverter.feed>`."""
        first, last = batch.offset, batch.last_offset
        if not 0 <= last - self.base <= INT32_MAX:
            raise InvalidRecordError(
                f"offset {last} cannot be stored in the segment of base offset {self.base} (an offset must "
                f"lie within 2^31-1 of it; recovery refuses this entry)",
                path=self.path, position=batch.position, expected=f"an offset in [{self.base}, {self.base + INT32_MAX}]",
                found=last, kind="offset_out_of_range",
            )
        if self.last is not None and first <= self.last:
            raise InvalidRecordError(
                f"offsets {first}-{last} do not follow the previous entry's last offset {self.last}",
                path=self.path, position=batch.position, expected=f"> {self.last}", found=first, kind="offset_out_of_order",
            )
        out = self.converter.feed(batch, data, salvaged=salvaged)
        self.last = last
        return out

    def flush(self) -> list[bytes]:
        """:meth:`BatchConverter.flush <kafkatool.convert.rules.BatchConverter.flush>`."""
        return self.converter.flush()



def convert_segment(
    segment: Segment,
    out_dir: str | None,
    options: ConvertOptions,
    *,
    aborted: AbortedSet | None = None,
    progress: Progress | None = None,
    like_owner: bool = False,
) -> SegmentResult:
    """Convert one segment into ``out_dir`` as ``<base offset>.log`` with its indexes and side files
    (module doc); with ``out_dir`` None, only count what the conversion would lose.

    ``aborted``: the partition's aborted transactions (:func:`kafkatool.convert.aborted.find_aborted`
    over all its segments); None when :func:`needs_aborted`: they are found in this segment alone.
    ``progress(n)`` is called as ``n`` more source bytes are done. ``like_owner``: every new file
    also takes its source file's owner where permitted (the mode always follows the source file).

    Raises the located :class:`~kafkatool.errors.KafkaToolError` of the first bad entry the damage
    policy does not convert around (offsets :class:`OffsetGuard` refuses included), or, as a last
    guard, of an output entry the offset/time index refuses (kind ``index_append``, §8.3); the temp
    file is removed, nothing is left under a final name.
    """
    from kafkatool.convert.rules import BatchConverter
    from kafkatool.convert.source import converted_entries

    log_path = segment.log_path
    base = segment.base_offset
    loss = Loss()
    log_stat = _stat(log_path)
    bytes_in = log_stat.st_size if log_stat is not None else 0
    try:
        if aborted is None and needs_aborted(options):
            from kafkatool.convert.aborted import find_aborted

            aborted = find_aborted([segment])
        threads = (options.threads or compress_threads()) if out_dir is not None and bytes_in >= POOL_MIN_BYTES else 1
        pool = ThreadPoolExecutor(threads, thread_name_prefix="kafkatool-compress") if threads > 1 else None
        try:
            converter = OffsetGuard(BatchConverter(options, loss, aborted=aborted, path=log_path, dry=out_dir is None,
                                                   pool=pool), base, log_path)
            if out_dir is None:
                for _entry in converted_entries(segment, converter, options, loss, progress=progress):
                    pass
            else:
                return _write_segment(segment, out_dir, options, converter, loss, log_stat, progress, like_owner)
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
    except OSError as e:
        if isinstance(e, KafkaToolError):
            raise  # a WriteError: already names the file written
        raise KafkaToolError(f"cannot read: {e.strerror or e}", path=e.filename or log_path,
                             kind="unreadable") from None
    return SegmentResult(log_path, None, base, loss, bytes_in, 0, loss.batches_out, _side_files(segment, options, None))


#: Output entries being compressed at once by the pool, at most (each one batch's output).
IN_FLIGHT_PER_THREAD = 4

#: A segment smaller than this is converted without a compression pool (starting threads costs
#: more than a few batches' compression).
POOL_MIN_BYTES = 1 << 20


def compress_threads() -> int:
    """Threads compressing output entries: the CPUs this process may use (the codecs release the
    GIL; the walk, decoding and encoding keep one thread busy meanwhile). 1 means no pool."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _in_order(entries: Iterator) -> Iterator[bytes]:
    """The entries' bytes in order, a :class:`~concurrent.futures.Future` (an entry the pool
    compresses) waited for only once the window of entries in flight is full or it is done."""
    window: deque = deque()
    limit = IN_FLIGHT_PER_THREAD * compress_threads()
    try:
        for entry in entries:
            if not isinstance(entry, Future):
                if not window:
                    yield entry
                    continue
                window.append(entry)
            else:
                window.append(entry)
            while window and (len(window) > limit or not isinstance(window[0], Future) or window[0].done()):
                first = window.popleft()
                yield first.result() if isinstance(first, Future) else first
        while window:
            first = window.popleft()
            yield first.result() if isinstance(first, Future) else first
    finally:
        for pending in window:
            if isinstance(pending, Future):
                pending.cancel()


def _write_segment(segment: Segment, out_dir: str, options: ConvertOptions, converter, loss: Loss,
                   log_stat: os.stat_result | None, progress: Progress | None, like_owner: bool) -> SegmentResult:
    """:func:`convert_segment`'s writing half: the new ``.log``, its indexes and side files."""
    from kafkatool.convert.source import converted_entries

    log_path = segment.log_path
    base = segment.base_offset
    bytes_in = log_stat.st_size if log_stat is not None else 0
    name = names.segment_file_name(base, names.LOG_SUFFIX)
    final = os.path.join(out_dir, name)
    index_path = os.path.join(out_dir, names.segment_file_name(base, names.INDEX_SUFFIX))
    builder = IndexBuilder(base, index_interval_bytes=DEFAULT_INDEX_INTERVAL_BYTES, path=index_path)
    position = 0
    batches = 0
    add, fields, limit = builder.add_batch, index_fields, WRITE_BUFFER  # one look-up per segment, not per entry

    def fill(fd: int, tmp: str) -> None:
        nonlocal position, batches
        buf = bytearray()
        for entry in _in_order(converted_entries(segment, converter, options, loss, progress=progress)):
            size = len(entry)
            first, last, max_timestamp = fields(entry)
            try:
                add(position, size, last, max_timestamp)
            except IndexAppendError as e:
                what = f"offset {first}" if first == last else f"offsets {first}-{last}"
                raise KafkaToolError(
                    f"the converted entry of {what} cannot be indexed "
                    f"({e.message}); recovery would refuse this segment too",
                    path=log_path, kind="index_append",
                ) from None
            buf += entry
            position += size
            batches += 1
            if len(buf) >= limit:
                write_all(fd, buf, tmp)
                buf.clear()
        if buf:
            write_all(fd, buf, tmp)

    _write_new(final, log_stat, like_owner, fill)
    offset_index, time_index = builder.finish()
    write_file(index_path, offset_index, _stat(segment.index_path) or log_stat, like_owner=like_owner)
    write_file(os.path.join(out_dir, names.segment_file_name(base, names.TIME_INDEX_SUFFIX)), time_index,
               _stat(segment.timeindex_path) or log_stat, like_owner=like_owner)
    sides = _side_files(segment, options, out_dir, like_owner)
    fsync_dir(out_dir)
    return SegmentResult(log_path, final, base, loss, bytes_in, position, batches, sides)


def _side_files(segment: Segment, options: ConvertOptions, out_dir: str | None, like_owner: bool = False) -> list[SideFile]:
    """The segment's side files: the two indexes rebuilt, the ``.txnindex`` and the snapshot at
    its base copied or dropped (copied into ``out_dir`` when given)."""
    base = segment.base_offset
    out = [
        SideFile(names.segment_file_name(base, names.INDEX_SUFFIX), "rebuilt",
                 "built from the new .log as recovery (and kafkatool reindex) builds it (§8.3, §12.2)"),
        SideFile(names.segment_file_name(base, names.TIME_INDEX_SUFFIX), "rebuilt",
                 "built from the new .log as recovery (and kafkatool reindex) builds it (§8.3, §12.2)"),
    ]
    for path, decide in ((segment.txnindex_path, txnindex_decision), (segment.snapshot_path, snapshot_decision)):
        if path is None:
            continue
        action, reason = decide(options)
        name = os.path.basename(path)
        if action == "copied" and out_dir is not None:
            copy_file(path, os.path.join(out_dir, name), like_owner=like_owner)
        out.append(SideFile(name, action, reason))
    return out
