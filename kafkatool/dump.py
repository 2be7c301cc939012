"""The dump operation: what ``kafkatool dump`` (and kafka-dump-log) reports for each file.

:func:`iter_dump` walks the given paths and yields model items (batches with their
records, index entries, snapshot entries, notes, errors and the end-of-run summaries);
``kafkatool.render`` turns them into Kafka's text, JSON Lines or Rich tables. Nothing
here prints. Where Kafka's tool would crash or create files (spec §15, §17.G), an
:class:`FileError` item names the file and byte position and the run goes on with the
next file.
"""

from __future__ import annotations

import os
import re
import stat
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterator, NamedTuple

from kafkatool.errors import InvalidRecordError, KafkaToolError
from kafkatool.record import topics
from kafkatool.record.batch import Batch, Record
from kafkatool.record.compression import DEFAULT_MAX_DECOMPRESSED
from kafkatool.record.control import (
    ControlType,
    decode_control_key,
    decode_end_txn_marker,
    decode_kraft_control,
)
from kafkatool.record.layout import CODEC_MASK, CONTROL_BIT, INT32_MAX, LEGACY, V2
from kafkatool.record.records import batch_record_chunks
from kafkatool.record.topics import Decoded
from kafkatool.segment import checkpoint as ckpt
from kafkatool.segment import files as names
from kafkatool.segment import index as idx
from kafkatool.segment import snapshot as snap
from kafkatool.segment import txnindex as txn
from kafkatool.segment.logdir import Target, descend_partition_named, expand
from kafkatool.segment.walk import SegmentWalker, WalkStop

__all__ = ["BatchText", "DumpOptions", "Rendered", "header_base_offset", "iter_dump", "normalize_display_path"]

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
DEFAULT_MAX_BYTES = INT32_MAX


@dataclass(frozen=True, slots=True)
class DumpOptions:
    """Switches of a dump run (kafka-dump-log's, plus kafkatool's seek options)."""

    deep: bool = False
    print_data: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_bytes: int = DEFAULT_MAX_BYTES
    skip_record_metadata: bool = False
    start_offset: int | None = None
    end_offset: int | None = None
    start_time: int | None = None
    end_time: int | None = None
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
    decoder: str | None = None
    """An internal-topic decoder (a key of ``kafkatool.record.topics.NAMES``), or None."""


# --------------------------------------------------------------------------- items


class FileHeader(NamedTuple):
    """``Dumping <path>`` and, for logs and snapshots, the second header line."""

    path: str
    kind: str
    second_line: str | None = None


class Control(NamedTuple):
    """What a control record says: its type and, by type, its decoded value."""

    type_id: int
    coordinator_epoch: int | None = None
    label: str | None = None
    fields: dict | None = None


class BatchItem(NamedTuple):
    path: str
    batch: Batch
    records: list[Record] | None
    controls: list[Control] | None = None
    base_offset: int | None = None
    """First record offset (legacy wrappers: needs decompression; None if unknown)."""
    continued: bool = False
    """More records of the batch of the item before (its line is out): a batch's records
    come a few thousand at a time, so memory stays flat whatever its record count."""
    decoded: list[Decoded] | None = None
    """With an internal-topic decoder (:attr:`DumpOptions.decoder`): what it made of each
    record, aligned with ``records``; None for control batches, which are never decoded."""


def header_base_offset(batch: Batch) -> int | None:
    """A batch's first offset when its header says it: v2, or an uncompressed legacy message;
    None for a legacy wrapper (its first inner offset is known once decompressed, §5.2)."""
    return batch.offset if batch.magic >= 2 or not batch.attributes & CODEC_MASK else None


class Rendered(NamedTuple):
    """Consecutive batches of one file already rendered by the renderer's ``batch_text``
    (see :func:`iter_dump`): their text, and the file position after the last of them."""

    path: str
    texts: list[str]
    end: int


BatchText = Callable[[Batch, memoryview, bool], "tuple[str, int, int] | None"]
"""A renderer's whole text of one batch under a deep dump: ``(text, first_offset,
last_offset)``, or None for a batch it leaves to the model items."""

#: Rendered texts are yielded every this many batches, or this many characters.
_RENDERED_BATCHES = 64
_RENDERED_CHARS = 1 << 20


class Batches(NamedTuple):
    """Consecutive batches of one file dumped without records (the shallow fast path)."""

    path: str
    batches: list[Batch]


class BatchItems(NamedTuple):
    """Consecutive :class:`BatchItem` of one file (deep dumps go out in chunks)."""

    path: str
    items: list[BatchItem]


def _flush(pending: list[BatchItem]) -> Iterator["BatchItems"]:
    if pending:
        yield BatchItems(pending[0].path, pending)


class Note(NamedTuple):
    """A fixed informational line (``... is empty.``, ``... passed sanity check.``)."""

    path: str
    text: str
    stderr: bool = False
    kind: str = "note"


class IndexEntryItem(NamedTuple):
    path: str
    offset: int
    position: int


class TimeIndexEntryItem(NamedTuple):
    path: str
    timestamp: int
    offset: int


class SnapshotEntryItem(NamedTuple):
    path: str
    entry: object


class TxnEntryItem(NamedTuple):
    path: str
    entry: object


class CheckpointItem(NamedTuple):
    """One entry of a text checkpoint file, as ordered name/value pairs."""

    path: str
    kind: str
    fields: tuple[tuple[str, object], ...]


class TrailingBytes(NamedTuple):
    path: str
    name: str
    position: int
    length: int


class FileError(NamedTuple):
    path: str
    error: KafkaToolError


class IndexMismatches(NamedTuple):
    abs_path: str
    pairs: list[tuple[int, int]]
    """(indexOffset, logOffset), in Kafka's print order (reverse discovery)."""


class TimeIndexProblems(NamedTuple):
    abs_path: str
    kind: str
    """``mismatch``, ``out_of_order`` or ``not_found``."""
    pairs: list[tuple[int, int]]


class DecodeFailures(NamedTuple):
    """After a file: its records the internal-topic decoder could not decode (spec §15.3, §17.J).

    Counts every record with a :attr:`Decoded.error`: those kafka-dump-log reports in its
    line and goes on from, and the ``fatal`` ones, where it would have stopped."""

    path: str
    decoder: str
    """The decoder's name (a key of :data:`kafkatool.record.topics.NAMES`)."""
    count: int
    first_offset: int
    first_error: str
    fatal_count: int = 0
    first_fatal_offset: int | None = None


class NonConsecutive(NamedTuple):
    abs_path: str
    pairs: list[tuple[int, int]]
    """(prev, cur), in Kafka's print order (reverse discovery): the last ``MAX_PAIRS`` found."""
    omitted: int = 0
    """Pairs found before those (Kafka would print them after): not kept, so that memory
    stays flat whatever a file's records say."""


#: Non-consecutive pairs kept per file (a batch's writer chooses every record offset).
MAX_PAIRS = 100_000


# --------------------------------------------------------------------------- helpers

_DUP_SLASH = re.compile(r"/{2,}")


def normalize_display_path(path: str) -> str:
    """java.io.File's normalisation: collapse repeated ``/``, drop a trailing one."""
    p = _DUP_SLASH.sub("/", path)
    if len(p) > 1 and p.endswith("/"):
        p = p[:-1]
    return p


def absolute_path(path: str) -> str:
    """java.io.File.getAbsolutePath: prefix the working directory, no further cleaning."""
    p = normalize_display_path(path)
    return p if p.startswith("/") else os.path.join(os.getcwd(), p)


class NothingToDump(KafkaToolError):
    """A target that holds nothing kafkatool dumps (an empty dir, /etc): a usage error, before any output."""


_FILE_TYPES = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _not_regular(mode: int) -> str | None:
    """What a non-regular file is ("a FIFO", ...), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _FILE_TYPES if test(mode)), "not a regular file")


def _io_error(e: OSError, path: str, why: str = "") -> KafkaToolError:
    """An OSError as a one-line error naming the file that could not be read (not the one being dumped)."""
    failed = os.fsdecode(e.filename) if isinstance(e.filename, (str, bytes)) else path
    return KafkaToolError(f"cannot read file: {e.strerror or e}{why}", path=normalize_display_path(failed))


def _refusal(path: str, what: str, why: str) -> KafkaToolError:
    return KafkaToolError(
        f"is {what}, not a regular file: refusing to read it (it could block or never end){why}",
        path=normalize_display_path(path),
    )


def check_regular(path: str, why: str = "") -> None:
    """Refuse anything but a regular file before it is opened: a FIFO named ``*.log`` would block."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise _io_error(e, path, why) from None
    what = _not_regular(mode)
    if what is not None:
        raise _refusal(path, what, why)


def open_regular(path: str, why: str = ""):
    """``path`` opened for reading (unbuffered), refused unless it is a regular file.

    The file is opened with O_NONBLOCK (no effect on a regular file), so that a FIFO put in
    its place after :func:`check_regular` still cannot block the open; fstat then refuses it.
    """
    check_regular(path, why)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise _io_error(e, path, why) from None
    try:
        what = _not_regular(os.fstat(fd).st_mode)
        if what is not None:
            raise _refusal(path, what, why)
        f = os.fdopen(fd, "rb", buffering=0)
        f.name = path  # type: ignore[misc]  # not the descriptor: the walker names it in errors
        return f
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str, why: str = "") -> bytes:
    """The whole content of a regular file (see :func:`open_regular`)."""
    with open_regular(path, why) as f:
        try:
            return f.read()
        except OSError as e:
            raise _io_error(e, path, why) from None


@dataclass
class _DecodeTally:
    """The records of the file being dumped that its decoder could not decode."""

    count: int = 0
    first_offset: int = -1
    first_error: str = ""
    fatal_count: int = 0
    first_fatal_offset: int | None = None

    def add(self, offset: int, decoded: Decoded) -> None:
        if not self.count:
            self.first_offset, self.first_error = offset, decoded.error or ""
        self.count += 1
        if decoded.fatal:
            if not self.fatal_count:
                self.first_fatal_offset = offset
            self.fatal_count += 1

    def item(self, path: str, decoder: str) -> DecodeFailures:
        return DecodeFailures(
            path, decoder, self.count, self.first_offset, self.first_error, self.fatal_count, self.first_fatal_offset
        )


@dataclass
class _RunState:
    opts: DumpOptions
    batch_text: BatchText | None = None
    decode: Callable[[bytes | None, bytes | None, int], Decoded] | None = None
    """The internal-topic decoder of ``opts.decoder``, or None."""
    tally: _DecodeTally = field(default_factory=_DecodeTally)
    index_mismatches: list[IndexMismatches] = field(default_factory=list)
    ts_mismatch: list[TimeIndexProblems] = field(default_factory=list)
    ts_out_of_order: list[TimeIndexProblems] = field(default_factory=list)
    ts_not_found: list[TimeIndexProblems] = field(default_factory=list)
    non_consecutive: list[NonConsecutive] = field(default_factory=list)
    errors: int = 0


#: Files a directory listing leaves out (named on the command line, they are still dumped).
_NOT_DUMPED = {
    names.FileKind.LOCK,
    names.FileKind.CLEAN_SHUTDOWN,
    names.FileKind.DELETED,
    names.FileKind.CLEANED,
    names.FileKind.SWAP,
    names.FileKind.UNKNOWN,
}


def expand_paths(paths: list[str]) -> list[str | FileError]:
    """A directory becomes its dumpable files, in segment order; a log dir also its partition dirs.

    Files given by name are kept as given (and dumped even when kafkatool would skip them
    in a directory listing, like kafka-dump-log). A directory given that holds nothing
    dumpable, but whose subdirectories are log dirs (``/var/lib/kafka`` over ``data-1``,
    ``data-2``), stands for those log dirs. A partition dir that cannot be listed becomes a
    :class:`FileError` in its place, and the others are still dumped.

    Raises :class:`NothingToDump` for a directory given with nothing Kafka in it, and
    :class:`KafkaToolError` for one that cannot be listed: both before any output.
    """
    out: list[str | FileError] = []
    for p in paths:
        if not (p and os.path.isdir(p)):
            out.append(p)
            continue
        targets = expand([p], descend=descend_partition_named)
        if targets[0].error is not None:
            raise _dir_error(targets[0])
        found = _add_files(targets, out)
        if not found:
            for sub in _log_dirs_under(p):
                found = _add_files(expand([sub], descend=descend_partition_named), out) or found
            if not found:
                raise NothingToDump(
                    "nothing Kafka here: no segment, index, snapshot or checkpoint files, no partition "
                    "directories and no log dirs below it",
                    path=normalize_display_path(p),
                )
    return out


def _dir_error(target: Target) -> KafkaToolError:
    e = target.error.os_error
    return KafkaToolError(f"cannot read directory: {e.strerror or e}", path=normalize_display_path(target.path))


def _add_files(targets: list[Target], out: list) -> bool:
    """Append the dumpable files of each directory target (or its error); whether any was appended.

    The targets come from :func:`expand` with :func:`descend_partition_named`: a directory
    first, then its partition dirs (and theirs), each in name order.
    """
    before = len(out)
    for t in targets:
        if t.error is not None:
            out.append(FileError(t.path, _dir_error(t)))
            continue
        # FIFOs and devices too: dump refuses them by name, it does not skip them
        files = [e for e in t.entries if not e.is_dir and e.kind not in _NOT_DUMPED]
        files.sort(key=lambda e: names.segment_order(e.name, snapshots_last=True))
        out.extend(e.path for e in files)
    return len(out) > before


def _log_dirs_under(p: str) -> list[str]:
    """The subdirectories of ``p`` that are log dirs (a ``meta.properties``, or partition dirs in them)."""
    return [
        t.path
        for t in expand([p], descend=lambda t, _e: t.named)[1:]
        if t.error is None and (t.is_log_dir or t.holds_partition_dirs)
    ]


def iter_dump(
    targets: list[str | FileError], opts: DumpOptions, batch_text: BatchText | None = None
) -> Iterator[object]:
    """Dump every target of :func:`expand_paths` in order, then yield the end-of-run summaries (spec §15.9).

    ``batch_text`` (the text renderer's compiled formatter, passed in so that this layer
    does not depend on the renderer) is offered each batch of a deep dump that is not
    filtered: when it returns ``(text, first, last)`` the batch goes out in a
    :class:`Rendered` item instead of a :class:`BatchItem`, and only ``first``/``last``
    enter the non-consecutive check; when it returns None the batch takes the usual path.

    With ``opts.decoder`` (an internal-topic decoder, which implies a deep dump and no
    ``batch_text``), each record of a data batch is decoded and its :class:`Decoded` goes
    out with it (:attr:`BatchItem.decoded`); after a file where some did not decode, a
    :class:`DecodeFailures` item (before the file's :class:`FileError`, if it has one).
    """
    state = _RunState(opts, batch_text, topics.decoder(opts.decoder) if opts.decoder is not None else None)
    for path in targets:
        if type(path) is FileError:
            state.errors += 1
            yield path
            continue
        failed: FileError | None = None
        try:
            yield from _dump_one(path, state)
        except KafkaToolError as e:
            state.errors += 1
            failed = FileError(path, e if e.path else e.at(normalize_display_path(path)))
        except OSError as e:
            state.errors += 1
            failed = FileError(path, _io_error(e, path))
        if state.tally.count:
            # the records that did not decode came before what stopped the file, if anything did
            yield state.tally.item(normalize_display_path(path), opts.decoder or "")
            state.tally = _DecodeTally()
        if failed is not None:
            yield failed
    yield from state.index_mismatches
    yield from state.ts_mismatch
    yield from state.ts_out_of_order
    yield from state.ts_not_found
    yield from state.non_consecutive


def _dump_one(path: str, state: _RunState) -> Iterator[object]:
    display = normalize_display_path(path)
    name = os.path.basename(display)
    if path == "":
        yield FileHeader(display, "unknown")
        raise KafkaToolError("empty file name in the file list")
    kind = names.classify(name)
    # DumpLogSegments dispatches on the suffix from the last '.' (§15.2); the text
    # checkpoint files (which it cannot read) are recognised by their exact names.
    suffix = names.file_suffix(name)
    if kind in _CHECKPOINT_KINDS:
        yield FileHeader(display, "checkpoint")
        yield from _dump_text_checkpoint(path, display, kind)
    elif os.path.isdir(path):
        yield FileHeader(display, "unknown")
        raise KafkaToolError("is a directory with no dumpable files", path=display)
    elif suffix in (".log", ".checkpoint"):
        yield from _dump_log(path, display, name, state)
    elif suffix == ".index":
        yield FileHeader(display, "index")
        yield from _dump_index(path, display, name, state)
    elif suffix == ".timeindex":
        yield FileHeader(display, "timeindex")
        yield from _dump_time_index(path, display, name, state)
    elif suffix == ".snapshot":
        yield FileHeader(display, "snapshot")
        yield from _dump_snapshot(path, display)
    elif suffix == ".txnindex":
        yield FileHeader(display, "txnindex")
        yield from _dump_txn_index(path, display)
    elif suffix is None:
        yield FileHeader(display, "unknown")
        raise KafkaToolError(
            "the file name has no suffix, so its kind is unknown (kafka-dump-log crashes here)", path=display
        )
    else:
        yield FileHeader(display, "unknown")
        yield Note(display, f"Ignoring unknown file {display}", stderr=True, kind="ignored")


# --------------------------------------------------------------------------- .log / .checkpoint


def _log_second_line(name: str) -> str:
    """The second header line of a .log or .checkpoint dump (§15.3)."""
    if name.endswith(".log"):
        return f"Log starting offset: {names.parse_base_offset(name)}"
    if name == "bootstrap.checkpoint":
        return "KRaft bootstrap snapshot"
    end_offset, epoch = names.parse_checkpoint_name(name)
    return f"Snapshot end offset: {end_offset}, epoch: {epoch}"


_CHUNK = 1024


_LAST_CODEC = 4  # zstd: codec ids 5-7 fail CompressionType.forId (§17 B.23)


def _unknown_codec(batch: Batch, display: str) -> InvalidRecordError:
    # CompressionType.forId fails as soon as the codec is queried (§17 B.23); the position
    # is the attributes byte that holds the codec bits (the low byte of v2's int16).
    return InvalidRecordError(
        f"Unknown compression type id: {batch.codec}",
        path=display,
        position=batch.position + (V2.ATTRIBUTES + 1 if batch.magic >= 2 else LEGACY.ATTRIBUTES),
    )


def _decode_controls(records: list[Record]) -> list[Control]:
    out = []
    for r in records:
        _version, type_id = decode_control_key(r.key)
        if type_id in (ControlType.ABORT, ControlType.COMMIT):
            _v, epoch = decode_end_txn_marker(r.value)
            out.append(Control(type_id, coordinator_epoch=epoch))
        else:
            decoded = decode_kraft_control(type_id, r.value)
            if decoded is None:
                out.append(Control(type_id))
            else:
                out.append(Control(type_id, label=decoded[0], fields=decoded[1]))
    return out


_SHOW, _SKIP, _STOP = "show", "skip", "stop"


def _legacy_verdict(batch: Batch, data, opts: DumpOptions, *, decode: bool) -> str:
    """Whether a legacy (v0/v1) entry is inside --start/--end: ``_SHOW``, ``_SKIP`` or ``_STOP``.

    An uncompressed entry is one message, its offset and timestamp in the header. A
    wrapper's offset is its last inner offset, its timestamp the newest inner one (or, under
    LogAppendTime, every inner one); its first offset and the other inner timestamps are
    known only once decompressed. With ``decode`` (a shallow dump) a wrapper is decompressed
    when --end-offset or --end-time needs it; without (a deep dump), the caller filters the
    decoded records. A wrapper that does not decode is shown: its line is what a shallow
    dump prints for it anyway.
    """
    so, eo, st, et = opts.start_offset, opts.end_offset, opts.start_time, opts.end_time
    offset = batch.offset
    ts = batch.max_timestamp
    if not batch.attributes & CODEC_MASK:
        if eo is not None and offset > eo:
            return _STOP
        if (so is not None and offset < so) or (st is not None and ts < st) or (et is not None and ts > et):
            return _SKIP
        return _SHOW
    if (so is not None and offset < so) or (st is not None and ts < st):
        return _SKIP
    if not decode or (eo is None and et is None) or data is None:
        return _SHOW
    first = None
    try:
        for chunk in batch_record_chunks(batch, data, max_decompressed=opts.max_decompressed):
            for r in chunk:
                if first is None:
                    first = r.offset
                if (
                    (so is None or r.offset >= so)
                    and (eo is None or r.offset <= eo)
                    and (st is None or r.timestamp >= st)
                    and (et is None or r.timestamp <= et)
                ):
                    return _SHOW
    except KafkaToolError:
        return _SHOW
    if eo is not None and first is not None and first > eo:
        return _STOP
    return _SKIP


def _seek_start(path: str, name: str, opts: DumpOptions, size: int) -> int:
    """File position to start at for --start-offset/--start-time, via the indexes (or 0)."""
    if opts.start_offset is None and opts.start_time is None:
        return 0
    try:
        base = names.parse_base_offset(name)
        oindex = idx.decode_offset_index(read_regular(names.sibling(path, ".index")), base)
        idx.sanity_check_offset_index(oindex)
        target = opts.start_offset
        if opts.start_time is not None:
            tindex = idx.decode_time_index(read_regular(names.sibling(path, ".timeindex")), base)
            idx.sanity_check_time_index(tindex)
            _ts, toff = tindex.lookup(opts.start_time)
            target = toff if target is None else max(target, toff)
        _off, position = oindex.lookup(target)
        if position > size:
            return 0
        return position
    except (KafkaToolError, OSError):
        return 0  # no usable index (missing, unreadable, not a regular file, insane): scan from the start


def _dump_log(path: str, display: str, name: str, state: _RunState) -> Iterator[object]:
    opts = state.opts
    try:
        second = _log_second_line(name)
    except KafkaToolError as e:
        # kafka-dump-log dies here (NumberFormatException); the batches are still readable
        # (a renamed copy of a segment, a test file), so say so and dump them.
        yield FileHeader(display, "log")
        yield Note(
            display,
            f"kafkatool: warning: {e}; dumping the batches anyway (kafka-dump-log would stop here)",
            stderr=True,
            kind="warning",
        )
    else:
        yield FileHeader(display, "log", second)
    if opts.max_bytes < 0:
        raise KafkaToolError(f"Invalid size: {opts.max_bytes} in read from FileRecords", path=display)
    log_file = open_regular(path)
    size = os.fstat(log_file.fileno()).st_size
    start = _seek_start(path, name, opts, size)
    deep = opts.deep
    want_controls = deep and not opts.skip_record_metadata
    so, eo, st, et = opts.start_offset, opts.end_offset, opts.start_time, opts.end_time
    filtering = so is not None or eo is not None or st is not None or et is not None
    pairs: deque[tuple[int, int]] = deque(maxlen=MAX_PAIRS)
    gaps = 0
    prev: int | None = None
    max_dec = opts.max_decompressed
    walker = SegmentWalker(log_file, start=start, end=min(size, opts.max_bytes), path=display)
    # the renderer's whole-batch text, for batches that need nothing from the model (the
    # fast path of a deep dump: no Record, no BatchItem)
    fast = state.batch_text if deep and not filtering and opts.decoder is None else None
    decode, tally = state.decode, state.tally
    print_data = opts.print_data
    with log_file, walker:
        if not deep and not filtering:
            # The batch-lines-only fast path: batches go out in chunks, so that the
            # per-batch cost is the walk and one formatted line (PERF.md lesson 3).
            chunk: list[Batch] = []
            for batch, _data in walker:
                if batch.attributes & CODEC_MASK > _LAST_CODEC:
                    if chunk:
                        yield Batches(display, chunk)
                    raise _unknown_codec(batch, display)
                chunk.append(batch)
                if len(chunk) >= _CHUNK:
                    yield Batches(display, chunk)
                    chunk = []
            if chunk:
                yield Batches(display, chunk)
        else:
            # Deep (or filtered) dumps: items go out in chunks too, so that a segment of
            # one-record batches does not pay a generator hop and a write per batch.
            pending: list[BatchItem] = []
            pending_records = 0
            texts: list[str] = []  # rendered batches (fast), never pending at the same time as BatchItems
            text_chars = 0
            text_batch: Batch | None = None  # the last batch in texts
            passed_end = False  # a legacy entry at or past --end-offset was seen: the next one is after it
            for batch, data in walker:
                if fast is not None:
                    rendered = fast(batch, data, print_data) if data is not None else None
                    if rendered is not None:
                        if pending:
                            yield BatchItems(display, pending)
                            pending = []
                            pending_records = 0
                        text, first, last = rendered
                        if prev is not None and first != prev + 1:
                            pairs.append((prev, first))
                            gaps += 1
                        prev = last
                        texts.append(text)
                        text_chars += len(text)
                        text_batch = batch
                        if len(texts) >= _RENDERED_BATCHES or text_chars >= _RENDERED_CHARS:
                            yield Rendered(display, texts, text_batch.end)
                            texts = []
                            text_chars = 0
                        continue
                    if texts:
                        yield Rendered(display, texts, text_batch.end)
                        texts = []
                        text_chars = 0
                attrs = batch.attributes
                if attrs & CODEC_MASK > _LAST_CODEC:
                    yield from _flush(pending)
                    raise _unknown_codec(batch, display)
                magic = batch.magic
                if filtering:
                    if magic >= 2:
                        if eo is not None and batch.offset > eo:
                            break
                        if so is not None and batch.last_offset < so:
                            continue
                        if st is not None and batch.max_timestamp < st:
                            continue
                        if et is not None and batch.base_timestamp > et and not batch.has_delete_horizon:
                            continue
                    else:
                        if passed_end:
                            break
                        passed_end = eo is not None and batch.offset >= eo
                        verdict = _legacy_verdict(batch, data, opts, decode=not deep)
                        if verdict is _STOP:
                            break
                        if verdict is _SKIP:
                            continue
                base_offset = header_base_offset(batch)
                if not deep:
                    pending.append(BatchItem(display, batch, None, None, base_offset))
                    if len(pending) >= 64:
                        yield BatchItems(display, pending)
                        pending = []
                    continue
                if data is None:
                    pending.append(BatchItem(display, batch, None))
                    yield from _flush(pending)
                    raise KafkaToolError(
                        f"batch of {batch.size} bytes is larger than the in-memory limit; records not decoded",
                        path=display,
                        position=batch.position,
                    )
                # The records come a few thousand at a time (a batch may say it holds
                # millions): the first chunk goes out with the batch line, the others as
                # continued items.
                shown = False
                first_inner = None
                try:
                    for records in batch_record_chunks(batch, data, max_decompressed=max_dec):
                        controls = _decode_controls(records) if want_controls and attrs & CONTROL_BIT and magic >= 2 else None
                        if filtering:
                            if first_inner is None and records and magic < 2:
                                first_inner = records[0].offset
                            records = [
                                r
                                for r in records
                                if (so is None or r.offset >= so)
                                and (eo is None or r.offset <= eo)
                                and (st is None or r.timestamp >= st)
                                and (et is None or r.timestamp <= et)
                            ]
                            if not records:
                                continue
                            if controls is not None and len(controls) != len(records):
                                controls = _decode_controls(records)
                        if records:
                            first = records[0].offset
                            if prev is not None and first != prev + 1:
                                pairs.append((prev, first))
                                gaps += 1
                            last = records[-1].offset
                            if last - first != len(records) - 1:  # a gap inside the chunk: look closer
                                p = first
                                for r in records[1:]:
                                    if r.offset != p + 1:
                                        pairs.append((p, r.offset))
                                        gaps += 1
                                    p = r.offset
                            prev = last
                            pending_records += len(records)
                            if base_offset is None:
                                base_offset = first
                        decoded = None
                        if decode is not None and not (attrs & CONTROL_BIT and magic >= 2):
                            # an internal-topic decoder: control records are never passed to it (§17.J 73)
                            decoded = [decode(r.key, r.value, r.offset) for r in records]
                            for r, dec in zip(records, decoded):
                                if dec.error is not None:
                                    tally.add(r.offset, dec)
                        pending.append(BatchItem(display, batch, records, controls, base_offset, shown, decoded))
                        shown = True
                        if len(pending) >= 64 or pending_records >= 256:
                            yield BatchItems(display, pending)
                            pending = []
                            pending_records = 0
                except KafkaToolError as e:
                    if not shown:
                        pending.append(BatchItem(display, batch, None))
                    yield from _flush(pending)
                    raise e.at(display, batch.position) from None
                if not shown:
                    if filtering and magic < 2:
                        # a legacy entry shows only for the records it holds in the range
                        if eo is not None and first_inner is not None and first_inner > eo:
                            break
                        continue
                    pending.append(BatchItem(display, batch, [], None, base_offset))
                    if len(pending) >= 64:
                        yield BatchItems(display, pending)
                        pending = []
                        pending_records = 0
            if texts:
                yield Rendered(display, texts, text_batch.end)
            yield from _flush(pending)
    if walker.stop is WalkStop.ERROR:
        assert walker.error is not None
        if pairs:
            state.non_consecutive.append(NonConsecutive(absolute_path(path), list(reversed(pairs)), gaps - len(pairs)))
        raise walker.error
    trailing = walker.trailing_bytes
    if trailing > 0 and opts.max_bytes == DEFAULT_MAX_BYTES and not filtering:
        yield TrailingBytes(display, name, walker.position, trailing)
    if pairs:
        state.non_consecutive.append(NonConsecutive(absolute_path(path), list(reversed(pairs)), gaps - len(pairs)))


# --------------------------------------------------------------------------- .index / .timeindex


def _sibling_log(path: str, display: str) -> str:
    log_path = str(names.sibling(path, ".log"))
    if not os.path.lexists(log_path):
        raise KafkaToolError(
            f"the segment file {normalize_display_path(str(log_path))} is missing; an index can only be checked against its log",
            path=display,
        )
    return log_path


def _first_batch_at(log_file, size: int, position: int, max_size: int, display: str) -> tuple[Batch, memoryview | None] | None:
    if position > size:
        raise KafkaToolError(
            f"index entry points past the end of the log (position {position}, log size {size})",
            path=display,
        )
    walker = SegmentWalker(log_file, start=position, end=min(size, position + max_size), path=log_file.name)
    for batch, data in walker:
        return batch, (bytes(data) if data is not None else None)
    if walker.error is not None:
        raise walker.error
    return None


def _open_log_for(log_path: str, display: str):
    """The segment an index is checked against, opened (errors name the segment, not the index)."""
    f = open_regular(log_path, f" (needed to check {display})")
    f.name = normalize_display_path(log_path)  # type: ignore[misc]  # for error messages
    return f


def _sanity_checked(check, index, path: str, display: str) -> Note:
    """--index-sanity-check: Kafka's sanity check of an offset or time index (``check``), and the
    line saying that it passed; the error of a failed check is located in the index file."""
    try:
        check(index, path=absolute_path(path))
    except KafkaToolError as e:
        raise e.at(display, 0) if e.path is None else e
    return Note(display, f"{display} passed sanity check.", kind="sanity_ok")


def _dump_index(path: str, display: str, name: str, state: _RunState) -> Iterator[object]:
    opts = state.opts
    base = names.parse_base_offset(name)
    log_path = _sibling_log(path, display)
    index = idx.decode_offset_index(read_regular(path), base, path)
    if index.entry_count == 0:
        yield Note(display, f"{display} is empty.", kind="empty")
        return
    if opts.index_sanity_check:
        yield _sanity_checked(idx.sanity_check_offset_index, index, path, display)
        return
    mismatches: list[tuple[int, int]] = []
    with _open_log_for(log_path, display) as log_file:
        log_size = os.fstat(log_file.fileno()).st_size
        for i, (offset, position) in enumerate(index.iter_dump_entries()):
            found = _first_batch_at(log_file, log_size, position, opts.max_message_size, display)
            if found is None:
                raise KafkaToolError(
                    f"no complete batch at log position {position} within --max-message-size {opts.max_message_size}"
                    + (" (position is at the end of the log)" if position == log_size else ""),
                    path=display,
                    position=i * idx.OFFSET_ENTRY_SIZE,
                )
            batch, _data = found
            if batch.last_offset != offset:
                mismatches.append((offset, batch.last_offset))
            if not opts.verify_index_only:
                yield IndexEntryItem(display, offset, position)
    if mismatches:
        state.index_mismatches.append(IndexMismatches(absolute_path(path), mismatches[::-1]))


def _max_record_timestamp(batch: Batch, data, opts: DumpOptions) -> int:
    chunks = batch_record_chunks(batch, data, max_decompressed=opts.max_decompressed)
    return max((r.timestamp for chunk in chunks for r in chunk), default=-1)


def _dump_time_index(path: str, display: str, name: str, state: _RunState) -> Iterator[object]:
    opts = state.opts
    base = names.parse_base_offset(name)
    log_path = _sibling_log(path, display)
    tindex = idx.decode_time_index(read_regular(path), base, path)
    if opts.index_sanity_check:
        yield _sanity_checked(idx.sanity_check_time_index, tindex, path, display)
        return
    index_path = str(names.sibling(path, ".index"))
    if not os.path.lexists(index_path):
        # kafka-dump-log creates an empty .index here (a write, §17.E.46); kafkatool creates
        # nothing, prints the entries and says that they were not checked.
        yield Note(
            display,
            f"kafkatool: warning: {display}: the offset index {normalize_display_path(index_path)} is missing, so the "
            "check of these entries against the offset index and the log was skipped (kafka-dump-log would create "
            "an empty one)",
            stderr=True,
            kind="warning",
        )
        if not opts.verify_index_only:
            for ts, offset in tindex.iter_dump_entries():
                yield TimeIndexEntryItem(display, ts, offset)
        return
    oindex = idx.decode_offset_index(read_regular(index_path, f" (needed to check {display})"), base, index_path)
    mismatch: list[tuple[int, int]] = []
    out_of_order: list[tuple[int, int]] = []
    not_found: list[tuple[int, int]] = []
    prev_ts = -1
    with _open_log_for(log_path, display) as log_file:
        log_size = os.fstat(log_file.fileno()).st_size
        for ts, offset in tindex.iter_dump_entries():
            _o, position = oindex.lookup(offset)
            found_batch = None
            found_data = None
            if position <= log_size:
                walker = SegmentWalker(log_file, start=position, path=log_file.name)
                for batch, data in walker:
                    if batch.last_offset >= offset:
                        found_batch, found_data = batch, data
                        break
                if found_batch is None and walker.error is not None:
                    raise walker.error
                if found_batch is None:
                    not_found.append((offset, -1))
                elif found_batch.last_offset != offset:
                    not_found.append((offset, found_batch.last_offset))
                else:
                    if found_data is None:
                        raise KafkaToolError("batch too large to decode", path=display)
                    try:
                        log_ts = _max_record_timestamp(found_batch, found_data, opts)
                    except KafkaToolError as e:
                        raise e.at(normalize_display_path(str(log_path)), found_batch.position) from None
                    if log_ts != ts:
                        mismatch.append((ts, log_ts))
                    if prev_ts >= ts:
                        out_of_order.append((ts, prev_ts))
            else:
                not_found.append((offset, -1))
            if not opts.verify_index_only:
                yield TimeIndexEntryItem(display, ts, offset)
            prev_ts = ts
    ap = absolute_path(path)
    if mismatch:
        state.ts_mismatch.append(TimeIndexProblems(ap, "mismatch", mismatch))
    if out_of_order:
        state.ts_out_of_order.append(TimeIndexProblems(ap, "out_of_order", out_of_order))
    if not_found:
        state.ts_not_found.append(TimeIndexProblems(ap, "not_found", not_found))


# --------------------------------------------------------------------------- snapshots, txn index, text checkpoints


def _dump_snapshot(path: str, display: str) -> Iterator[object]:
    data = read_regular(path)
    try:
        snapshot = snap.decode_producer_snapshot(data)
    except KafkaToolError as e:
        # Kafka prints CorruptSnapshotException's message on stderr and goes on (§15.7).
        yield Note(display, e.message, stderr=True, kind="corrupt_snapshot")
        return
    for entry in snapshot.entries:
        yield SnapshotEntryItem(display, entry)


def _dump_txn_index(path: str, display: str) -> Iterator[object]:
    if not os.path.lexists(path):
        return  # Kafka prints nothing for a missing .txnindex
    data = read_regular(path)
    # entries print until a bad one, which raises (as Kafka's iteration does)
    for entry in txn.iter_txn_index(data, absolute_path(path)):
        yield TxnEntryItem(display, entry)


_CHECKPOINT_KINDS = {
    names.FileKind.LEADER_EPOCH_CHECKPOINT,
    names.FileKind.PARTITION_METADATA,
    names.FileKind.QUORUM_STATE,
    names.FileKind.OFFSET_CHECKPOINT,
    names.FileKind.META_PROPERTIES,
}


def _dump_text_checkpoint(path: str, display: str, kind) -> Iterator[object]:
    K = names.FileKind
    data = read_regular(path)
    where = os.path.abspath(path)  # Kafka's CheckpointFile names its absolute path in every message
    if kind is K.LEADER_EPOCH_CHECKPOINT:
        for e in ckpt.decode_leader_epoch_checkpoint(data, where):
            yield CheckpointItem(display, "leader_epoch", (("epoch", e.epoch), ("startOffset", e.start_offset)))
    elif kind is K.OFFSET_CHECKPOINT:
        for topic, partition, offset in ckpt.decode_offset_checkpoint(data, where):
            yield CheckpointItem(display, "offset_checkpoint", (("topic", topic), ("partition", partition), ("offset", offset)))
    elif kind is K.PARTITION_METADATA:
        pm = ckpt.decode_partition_metadata(data, where)
        yield CheckpointItem(display, "partition_metadata", (("version", pm.version), ("topicId", pm.topic_id)))
    elif kind is K.QUORUM_STATE:
        state = ckpt.decode_quorum_state(data, where)
        yield CheckpointItem(display, "quorum_state", tuple(state.items()))
    elif kind is K.META_PROPERTIES:
        props = ckpt.decode_properties(data, where)
        yield CheckpointItem(display, "meta_properties", tuple(props.items()))
