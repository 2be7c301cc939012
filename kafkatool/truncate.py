"""``truncate``: the broker's recovery cut, offline, losing nothing (spec §3, §9–§12.5, §17.H, §19).

Plan, then apply (STYLE.md). :func:`plan_truncate` only reads. It walks each segment as
``LogSegment.recover`` does (§12.2) and cuts where recovery would:

* at the first entry that fails the §3 walk (size < 14, a partial or absurd size, a short
  tail) or its CRC (``ensureValid``);
* right **after** a control batch of a producer whose first record is not a readable
  COMMIT/ABORT marker (``EndTransactionMarker.deserialize`` throws InvalidRecordException
  after recovery has counted the batch in ``validBytes``);
* where an offset index entry would go backwards (``InvalidOffsetException``): the loader
  then truncates the segment to its base offset (``LogLoader.recoverLog``), which empties it
  unless its partly rebuilt index already holds an entry for the base offset (the cut is
  where ``OffsetIndex.lookup(baseOffset)`` points).

Where recovery does not cut but fails or rewrites, nothing is planned for the partition and
the plan says why (:class:`Refusal`): an offset the segment cannot hold (§12.5: the broker
splits a segment whose last batch overflows and fails to load it otherwise; kafkatool does not
split), a control record of a producer that is not a transaction marker or has no key or
value (the load fails), a full index.

Like recovery after an unclean shutdown (§12.1, §17.H 61), the later segments of the
partition are removed too, and what depends on the log end is trimmed (§19): the cut
segment's ``.index``/``.timeindex`` are rebuilt, producer ``.snapshot`` files above the new
log end are removed, ``leader-epoch-checkpoint`` entries with startOffset >= the new log end
and ``.txnindex`` entries with lastOffset >= it are dropped.

With ``keep_valid_after`` (no broker does this) only the bad regions are removed: a batch
recovery would refuse (a bad CRC, a malformed marker, offsets going backwards) is removed on
its own, and after a region that cannot be framed the next entry with a valid CRC is found
with verify's resync. A resync candidate is kept only when it fits: inside a damaged batch
whose declared size leads to a valid batch, candidates are record content unless they lead
there themselves; and of the candidate runs, the ones kept form the longest sequence (by
batches) whose offsets increase from the last batch before the damage; the others are
reported (:class:`Rejected`) and removed. Later segments then stay. Zero-filled tails (a
preallocated segment after an unclean shutdown) are skipped at memory speed
(:func:`kafkatool.segment.zeros.zero_run_end`).

Nothing is deleted. :func:`apply_truncate` first writes every removed byte range of a
``.log`` to ``<backup>/<partition>/<file>.<start>-<end>.bytes`` and every rewritten small file
whole, with ``MANIFEST.json`` and a ``RESTORE.txt`` that splices the ranges back; files the
new state drops (later segments, snapshots above the new end) are put into the backup, a
``.log`` as a hard link when the backup is on the same file system, anything else as a copy.

Crash safety is the safety layer's whole-dir exchange (:func:`kafkatool.safety.exchange_partition`):
the new partition dir is built beside the old one as a staging dir named like a partition
being deleted (small files written fresh, the cut ``.log`` written from its kept ranges,
unchanged ``.log`` files hard-linked last), the backup above is completed, and one
``renameat2(RENAME_EXCHANGE)`` switches the two dirs; the old state is then removed. A crash
at any point leaves the partition dir complete-old or complete-new; the next run (a dry run
reports it) removes a leftover staging dir. Where the exchange cannot be used (the report's
``method`` says why), the journaled fallback runs (:mod:`kafkatool.safety.journal`, the one
journal format): new files beside the old ones as ``*.kafkatool-tmp`` (created exclusively,
never through an existing name, with the owner and mode of the file they replace), fsynced,
then a journal ``kafkatool-truncate.kafkatool-journal`` committed in the
partition dir, then the renames and moves, then the journal is removed. The journal records
the size, mtime and inode (and the sha256 of files up to 16 MiB) of every file it will
replace or move and of every temp file. A crash before the commit leaves the old state (plus
temp files the next run deletes); after it, the next run completes the journal (roll forward)
if, and only if, every file it still has to replace or move is exactly as recorded: a broker
that ran on the partition in between (and appended, recovered or rebuilt an index) makes it
refuse, naming the file and what changed, with the way out.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from typing import Callable, Sequence

from kafkatool.errors import InvalidRecordError, KafkaToolError
from kafkatool.record.control import control_type_name, decode_control_key, decode_end_txn_marker
from kafkatool.record.records import first_batch_record
from kafkatool.record.v2 import decode_records
from kafkatool.record.varint import decode_varint
from kafkatool.record.layout import CONTROL_BIT, INT32_MAX, LOG_OVERHEAD, V2_HEADER_SIZE, codec_of
from kafkatool.repair import walk_as_recovery
from kafkatool.safety import (
    TEMP_SUFFIX,
    TRUNCATE_JOURNAL,
    ExchangeUnavailable,
    PartitionRefused,
    RepairError,
    StaleJournalError,
    TruncateBackup,
    apply_locked,
    commit_journal,
    exchange_partition,
    exchange_unavailable,
    fault_point,
    find_staging_dirs,
    fsync_dir,
    held_elsewhere,
    identity,
    journal_record,
    journal_work,
    link_or_copy,
    make_temp,
    read_journal,
    real_log_dir_of,
    remove_staging_dirs,
    roll_forward,
    sha256_hex,
    unlink_all,
)
from kafkatool.segment import files as names
from kafkatool.segment.checkpoint import decode_leader_epoch_checkpoint, encode_leader_epoch_checkpoint
from kafkatool.segment.logdir import DirectoryError, Partition
from kafkatool.segment.index import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    IndexAppendError,
    IndexBuilder,
    OffsetIndexEntry,
    lookup_offset,
)
from kafkatool.segment.txnindex import TXN_ENTRY_SIZE, encode_txn_index, iter_txn_index
from kafkatool.segment.walk import SegmentWalker, WalkStop
from kafkatool.segment.zeros import zero_run_end


__all__ = [
    "Region",
    "Rejected",
    "Refusal",
    "SegmentCut",
    "FileRewrite",
    "FileMove",
    "TruncatePlan",
    "TruncateReport",
    "TruncateBackup",
    "StaleJournalError",
    "plan_truncate",
    "plan_truncate_paths",
    "apply_truncate",
    "apply_truncate_all",
    "describe_state",
    "TRUNCATE_JOURNAL",
]

_SEGMENT_KINDS = (names.FileKind.LOG, names.FileKind.INDEX, names.FileKind.TIMEINDEX, names.FileKind.TXNINDEX)
_MARKER_READ_LIMIT = 16 << 20
"""A control batch larger than this is not read for its marker (a transaction marker is 78 bytes)."""
_MAX_HEADER_ZEROS = LOG_OVERHEAD - 1
"""An entry's first non-zero byte is at most its 12th: offset (8 bytes, may be 0) and a size >= 14 (its last byte is not 0)."""


# ----------------------------------------------------------------------------- the plan


@dataclass(frozen=True, slots=True)
class Region:
    """A byte range ``[start, end)`` of the original ``.log`` that is removed, and why."""

    start: int
    end: int
    reason: str

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Rejected:
    """CRC-valid batches found by resync inside a removed region that are not kept (they do not
    fit the offsets around them, or they lie inside a damaged batch's declared extent)."""

    start: int
    end: int
    batches: int
    first_offset: int
    last_offset: int
    reason: str


@dataclass(frozen=True, slots=True)
class Refusal:
    """A segment truncate will not change, and what the broker does with it instead."""

    path: str
    position: int | None
    reason: str
    """The whole message, located (``PATH:POSITION: what``)."""

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True, slots=True)
class SegmentCut:
    """What truncate does to one ``.log``: the byte ranges kept and removed (original positions)."""

    log_path: str
    base_offset: int
    old_size: int
    old_mtime_ns: int
    kept: tuple[tuple[int, int], ...]
    removed: tuple[Region, ...]
    batches_kept: int
    first_offset: int | None
    last_offset: int | None
    """Last offset of the last kept batch, or None when nothing is kept."""
    batches_dropped: int
    """Intact batches (valid CRC, found by resync, fitting the offsets) inside the removed ranges:
    data lost without --keep-valid-after."""
    dropped_offsets: tuple[int, int] | None
    """First and last offset of those intact batches."""
    gaps: tuple[tuple[int, int], ...]
    """``(last offset before, first offset after)`` around each removed region between kept batches."""
    rejected: tuple[Rejected, ...] = ()
    """With keep_valid_after: CRC-valid candidates inside removed regions that are not kept."""
    old_ino: int = 0

    @property
    def new_size(self) -> int:
        return sum(e - s for s, e in self.kept)

    @property
    def next_offset(self) -> int:
        """The segment's log end after the cut (base offset when no batch is kept)."""
        return self.base_offset if self.last_offset is None else self.last_offset + 1


@dataclass(frozen=True, slots=True)
class FileRewrite:
    """A small file replaced whole (``.index``, ``.timeindex``, ``.txnindex``, ``leader-epoch-checkpoint``)."""

    path: str
    kind: str
    old_size: int | None
    old_sha256: str | None
    data: bytes = field(repr=False)
    detail: str = ""

    @property
    def new_size(self) -> int:
        return len(self.data)


@dataclass(frozen=True, slots=True)
class FileMove:
    """A whole file moved into the backup (a later segment's file, a producer snapshot)."""

    path: str
    size: int
    reason: str


@dataclass(frozen=True, slots=True)
class TruncatePlan:
    """The result of :func:`plan_truncate` for one partition dir. Pure data; nothing is written."""

    partition_dir: str
    keep_valid_after: bool
    segments_checked: int
    cuts: tuple[SegmentCut, ...]
    rewrites: tuple[FileRewrite, ...]
    moves: tuple[FileMove, ...]
    new_log_end: int | None
    """The partition's log end offset after the change, when it changes (None otherwise)."""
    notes: tuple[str, ...] = ()
    leftovers: tuple[str, ...] = ()
    """Temp files of an interrupted run that never committed: deleted by apply."""
    interrupted_journal: str | None = None
    """A committed journal of an interrupted run: apply completes it first."""
    staging_leftovers: tuple[str, ...] = ()
    """The staging dir an interrupted run left beside the partition dir: removed by apply."""
    refusals: tuple[Refusal, ...] = ()
    """Why nothing is planned for this partition (then cuts, rewrites and moves are empty)."""

    @property
    def refused(self) -> bool:
        return bool(self.refusals)

    @property
    def needs_changes(self) -> bool:
        if self.refusals:
            return False
        return bool(self.cuts or self.rewrites or self.moves or self.leftovers or self.interrupted_journal
                    or self.staging_leftovers)

    @property
    def removed_bytes(self) -> int:
        return sum(r.size for c in self.cuts for r in c.removed)


# ----------------------------------------------------------------------------- recovery's rules


def _first_record(batch, data) -> tuple[bytes | None, bytes | None]:
    """``(key, value)`` of the first record of a control batch, read as recovery reads it.

    Uncompressed: only the first record is decoded (``DefaultRecordBatch.RecordIterator``;
    with a count of 1 the bytes after it must be none). Compressed: every record is
    decompressed and decoded first, as ``DefaultRecordBatch.iterator`` does.
    """
    if codec_of(batch.attributes):
        first = first_batch_record(batch, data)
        return (first.key, first.value) if first is not None else (None, None)
    end = batch.size
    length, i = decode_varint(data, V2_HEADER_SIZE)
    stop = end if batch.count == 1 or length < 0 or i + length > end else i + length
    ((_attrs, _tsd, _od, key, value, _headers),) = decode_records(data, V2_HEADER_SIZE, stop, 1)
    return key, value


def _marker_problem(batch, data) -> tuple[str, str] | None:
    """What recovery's producer-state update (§12.2 step 2.6, ``ProducerAppendInfo.append``)
    makes of a control batch of a producer: None when it reads a COMMIT/ABORT marker (or the
    batch is anything else), ``("after", why)`` when it throws InvalidRecordException (the
    loop stops right after the batch, which ``validBytes`` already counts), ``("fatal", why)``
    when it throws anything else (the log fails to load)."""
    magic = batch.magic
    if magic < 2 or magic >= 128 or not batch.attributes & CONTROL_BIT or batch.producer_id < 0 or not batch.count:
        return None  # hasProducerId is producerId > -1; an empty control batch is skipped
    if data is None:
        return "fatal", (f"a control batch of {batch.size} bytes is too large for kafkatool to read its "
                         "transaction marker (recovery would read it)")
    stops = ("recovery reads it as a transaction marker and fails (InvalidRecordException): it keeps this "
             "batch and cuts right after it")
    try:
        if batch.count < 0:
            raise InvalidRecordError(f"Found invalid record count {batch.count} in magic v2 batch")
        key, value = _first_record(batch, data)
    except KafkaToolError as e:
        return "after", f"the control batch's first record cannot be read ({e.message}); {stops}"
    if key is None:
        return "fatal", ("a control record of a producer without a key: recovery fails reading it as a transaction "
                         "marker (NullPointerException) and the log does not load")
    try:
        _version, type_id = decode_control_key(key)
    except InvalidRecordError as e:
        return "after", f"{e.message}; {stops}"
    if type_id not in (0, 1):
        return "fatal", (f"a control record of type {control_type_name(type_id)} ({type_id}) from a producer: recovery "
                         "fails reading it as a transaction marker (IllegalArgumentException) and the log does not load")
    if value is None:
        return "fatal", ("a transaction marker without a value: recovery fails reading it (NullPointerException) "
                         "and the log does not load")
    try:
        decode_end_txn_marker(value)
    except InvalidRecordError as e:
        return "after", f"{e.message}; {stops}"
    return None


@dataclass(slots=True)
class _Walk:
    """One stretch of valid batches from ``start`` and what ended it."""

    start: int
    end: int
    """Where the valid batches end (the recovery cut when the walk started at 0)."""
    batches: int
    first: int | None
    last: int | None
    stop: int | None
    """Position of what ended the walk (a batch, a bad header, a tail); None at the end of the file."""
    kind: str = "end"
    """``end``; ``bad`` (a CRC, a size < 14, a partial or short tail); ``refused`` (a CRC-valid
    batch a rule refuses: its frame is sure); ``after`` (a malformed marker kept, the walk ending
    after it); ``invalid_offset``; ``overflow``; ``fatal`` (the broker's load fails)."""
    reason: str = ""
    frame_end: int | None = None
    """Where the entry at ``stop`` ends when its header could be read (a CRC-bad or refused batch)."""
    index_entries: tuple = ()
    """For ``invalid_offset``: the offset index as the broker holds it when the append throws."""
    hint: str = ""
    """For ``fatal``/``overflow``: what the user can do."""


def _walk(log_path: str, base: int, builder: IndexBuilder, start: int, *, markers: str,
          end: int | None = None) -> _Walk:
    """``LogSegment.recover``'s loop from ``start`` (to ``end``, a batch boundary, or the end of
    the file) feeding ``builder`` (:func:`walk_as_recovery`), classified as the broker would treat
    what ended it.

    ``markers``: ``after`` keeps a control batch with a malformed marker and ends the walk
    after it (recovery); ``refuse`` ends the walk before it (--keep-valid-after removes it).
    """
    found: dict = {}
    fds: list[int] = []

    def check(batch) -> str | None:
        rel = batch.offset + batch.last_offset_delta - base
        if rel < 0 or rel > INT32_MAX:
            found["kind"] = "overflow"
            return (f"offset {batch.offset + batch.last_offset_delta} does not fit a segment with base offset {base} "
                    f"(relative offsets 0..{INT32_MAX}): the broker's recovery splits such a segment when its last "
                    "batch overflows (§12.5) and fails to load it otherwise; kafkatool does not split segments")
        if markers == "refuse" and batch.attributes & CONTROL_BIT and batch.producer_id >= 0:
            if not fds:
                fds.append(os.open(log_path, os.O_RDONLY))
            data = os.pread(fds[0], batch.size, batch.position) if batch.size <= _MARKER_READ_LIMIT else None
            problem = _marker_problem(batch, data)
            if problem is not None:
                found["kind"] = "marker"
                return problem[1]
        return None

    def marker(batch, data) -> str | None:
        problem = _marker_problem(batch, data)
        if problem is None:
            return None
        found["kind"] = "fatal_marker" if problem[0] == "fatal" else "after"
        found["marker"] = (batch.position, batch.size)
        return problem[1]

    def refused(batch, error: IndexAppendError | None) -> None:
        found["batch"] = batch
        found["error"] = error

    before = builder.valid_bytes
    try:
        walker, n, first, last, bad = walk_as_recovery(
            log_path, builder, start=start, end=end, check=check,
            stop_after=marker if markers == "after" else None, on_refuse=refused,
        )
    finally:
        for fd in fds:
            os.close(fd)
    stopped = start + builder.valid_bytes - before
    if bad is None:
        if walker.position < walker.end:  # a bad header, a partial or short tail: the walk's own stop
            if walker.stop is WalkStop.ERROR and walker.error is not None:
                reason = str(walker.error)
            else:
                reason = (f"{log_path}:{walker.position}: partial batch, size field past the end of the file, "
                          "or a short tail")
            return _Walk(start, stopped, n, first, last, walker.position, "bad", reason)
        return _Walk(start, stopped, n, first, last, None)
    pos, reason = bad
    kind = found.get("kind")
    if kind == "after" and pos >= walker.end:  # the malformed marker is the last batch: nothing to cut
        return _Walk(start, stopped, n, first, last, None)
    if kind in ("after", "fatal_marker"):
        mpos, msize = found["marker"]
        if kind == "fatal_marker":
            return _Walk(start, stopped, n, first, last, mpos, "fatal", f"{log_path}:{mpos}: {reason}", mpos + msize,
                         hint="--keep-valid-after removes just that batch")
        return _Walk(start, stopped, n, first, last, pos, "after", f"{log_path}:{mpos}: {reason}", pos)
    batch = found.get("batch")
    frame_end = None if batch is None else batch.position + batch.size
    if kind == "overflow":
        return _Walk(start, stopped, n, first, last, pos, "overflow", f"{log_path}:{pos}: {reason}", frame_end)
    if kind == "marker":
        return _Walk(start, stopped, n, first, last, pos, "refused", f"{log_path}:{pos}: {reason}", frame_end)
    error: IndexAppendError | None = found.get("error")
    if error is None:  # a CRC mismatch: the frame may be wrong
        return _Walk(start, stopped, n, first, last, pos, "bad", reason, frame_end)
    if error.kind in ("offset_index_invalid_offset", "time_index_invalid_offset"):
        # InvalidOffsetException, from OffsetIndex.append or TimeIndex.maybeAppend (§8.3); in the
        # second case the offset index already took the entry when the time index threw
        entries = tuple(builder.offset_entries)
        if error.kind == "time_index_invalid_offset":
            entries += (OffsetIndexEntry(batch.offset + batch.last_offset_delta - base, builder.valid_bytes),)
        return _Walk(start, stopped, n, first, last, pos, "invalid_offset", reason, frame_end, entries)
    # a full index, a timestamp going backwards: IllegalArgumentException / IllegalStateException
    return _Walk(start, stopped, n, first, last, pos, "fatal",
                 f"{reason}: the broker's recovery throws here and the log does not load", frame_end)


def _refusal(log_path: str, w: _Walk) -> Refusal:
    return Refusal(log_path, w.stop, f"{w.reason}; nothing is changed in this partition" + (f" ({w.hint})" if w.hint else ""))


def _new_builder(log_path: str, base: int, interval: int) -> IndexBuilder:
    return IndexBuilder(base, index_interval_bytes=interval, path=str(names.sibling(log_path, ".index")))


#: A builder that counts intact batches and indexes none (its interval is never reached).
_NEVER_INDEX = 1 << 62


def _counter(base: int) -> IndexBuilder:
    return IndexBuilder(base, index_interval_bytes=_NEVER_INDEX)


def _valid_entry_at(log_path: str, pos: int, size: int) -> bool:
    """Whether a complete entry with a valid CRC starts at ``pos`` (or ``pos`` is the end of the file)."""
    if pos >= size:
        return pos == size
    with SegmentWalker(log_path, start=pos) as walker:
        for batch, _data in walker:
            return batch.crc == batch.computed_crc
    return False


def _resync_from(log_path: str, fd: int, pos: int, size: int) -> int | None:
    """The next position >= ``pos`` where a complete entry with a valid CRC begins, or None.

    A zero run (a preallocated tail) is skipped at memory speed first: no entry can start more
    than :data:`_MAX_HEADER_ZEROS` bytes before its first non-zero byte.
    """
    from kafkatool.verify import resync  # the resync verify uses after a bad region

    if pos >= size:
        return None
    z = zero_run_end(fd, pos, size)
    if z >= size:
        return None
    return resync(log_path, max(pos, z - _MAX_HEADER_ZEROS), size)


def _next_candidate(log_path: str, fd: int, w: _Walk, size: int,
                    rejected: list[Rejected]) -> int | None:
    """Where to look for intact batches after what ended ``w``.

    A batch that is sure of its frame (CRC-valid, refused by a rule) is skipped whole. After a
    CRC-bad batch whose declared size leads to a valid entry (or the end of the file), a resync
    candidate inside that extent is record content (CRC-valid batches embedded in a record value)
    unless its own batches lead exactly to that entry: then the size field was the damage.
    Anything else is resynced from the next byte.
    """
    assert w.stop is not None
    if w.kind in ("after", "refused", "invalid_offset", "overflow", "fatal") and w.frame_end is not None:
        return w.frame_end if w.frame_end < size else None
    q = _resync_from(log_path, fd, w.stop + 1, size)
    f = w.frame_end
    if q is None or f is None or q >= f or not _valid_entry_at(log_path, f, size):
        return q
    # a candidate inside the damaged batch's declared extent [stop, f): does it lead to f?
    with SegmentWalker(log_path, start=q, end=f) as inner:
        n, first, last, clean = 0, None, None, True
        for batch, _data in inner:
            if batch.crc != batch.computed_crc:
                clean = False
                break
            n += 1
            first = batch.offset if first is None else first
            last = batch.offset + batch.last_offset_delta
        reached = clean and inner.position == f
    if reached:
        return q
    if n:
        rejected.append(Rejected(q, inner.position, n, first, last,
                                 f"inside the declared extent [{w.stop}, {f}) of the damaged batch at byte {w.stop}, "
                                 f"whose size leads to a valid batch at byte {f}: record content, not batches"))
    return f if f < size else None


def _runs_after(log_path: str, fd: int, base: int, w: _Walk, size: int,
                rejected: list[Rejected]) -> list[_Walk]:
    """Every stretch of intact batches after ``w`` (counted, not indexed), in file order."""
    runs: list[_Walk] = []
    while w.stop is not None:
        pos = _next_candidate(log_path, fd, w, size, rejected)
        if pos is None:
            break
        w = _walk(log_path, base, _counter(base), pos, markers="refuse")
        if w.batches:
            runs.append(w)
    return runs


def _chain(runs: Sequence[_Walk], after: int) -> list[int]:
    """Indexes of the runs to keep: the sequence holding the most bytes whose offsets increase,
    in file order, from ``after`` (the last offset kept before them). O(n log n).

    Bytes, not batches: CRC-valid batches embedded in a damaged batch's record value are bounded
    by that batch's size, while the real data after the damage usually runs on to the end."""
    candidates = [i for i, r in enumerate(runs) if r.first is not None and r.first > after]
    if not candidates:
        return []
    # best[i] = bytes of the best chain ending with run i; the prefix maximum over runs whose
    # last offset is below a run's first offset is a Fenwick tree over the sorted last offsets
    lasts = sorted({runs[i].last for i in candidates})
    rank = {v: k + 1 for k, v in enumerate(lasts)}
    tree: list[tuple[int, int]] = [(0, -1)] * (len(lasts) + 1)
    best: dict[int, tuple[int, int]] = {}
    from bisect import bisect_left

    for i in candidates:
        r = runs[i]
        k = bisect_left(lasts, r.first)  # lasts < r.first: ranks 1..k
        top = (0, -1)
        while k > 0:
            if tree[k] > top:
                top = tree[k]
            k -= k & -k
        best[i] = (top[0] + r.end - r.start, top[1])
        k = rank[r.last]
        value = (best[i][0], i)
        while k <= len(lasts):
            if value > tree[k]:
                tree[k] = value
            k += k & -k
    end = max(candidates, key=lambda i: (best[i][0], -i))
    chain = []
    while end != -1:
        chain.append(end)
        end = best[end][1]
    return chain[::-1]


def _scan_segment(log_path: str, keep_valid_after: bool, index_interval_bytes: int):
    """Walk one segment as recovery does; return ``(cut, refusal, offset index, time index)``.

    ``cut`` is None when the segment stays as it is; ``refusal`` is not None when truncate must
    not touch it. The index bytes describe the *new* layout (the kept batches, back to back).
    """
    base = names.parse_base_offset(log_path)
    st = os.lstat(log_path)
    if stat.S_ISLNK(st.st_mode):
        raise RepairError(f"a symbolic link (to {os.readlink(log_path)}): truncate neither cuts a file through a link "
                          "nor replaces the link; nothing is changed in this partition", path=log_path)
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block the open: never opened
        raise RepairError("not a regular file (a FIFO, a device, a directory...): not opened; nothing is changed in "
                          "this partition", path=log_path)
    fd = os.open(log_path, os.O_RDONLY)
    try:
        if keep_valid_after:
            return _scan_keeping(log_path, fd, base, st, index_interval_bytes)
        return _scan_cutting(log_path, fd, base, st, index_interval_bytes)
    finally:
        os.close(fd)


def _cut_for(log_path, base, st, kept, removed, n, first, last, dropped_runs, gaps=(), rejected=()):
    dropped = sum(r.batches for r in dropped_runs)
    dropped_offsets = (dropped_runs[0].first, dropped_runs[-1].last) if dropped_runs else None
    return SegmentCut(log_path, base, st.st_size, st.st_mtime_ns, tuple(kept), tuple(removed), n, first, last,
                      dropped, dropped_offsets, tuple(gaps), tuple(rejected), st.st_ino)


def _final_entry_refused(builder: IndexBuilder) -> IndexAppendError | None:
    """recover()'s last step, ``timeIndex.maybeAppend(max ts, its offset, skipFullCheck)`` (§12.2
    step 6): None when it is taken, else the InvalidOffsetException it throws (the offset of the
    maximum timestamp is below the last time entry's: offsets went backwards between entries)."""
    try:
        builder.finish()
    except IndexAppendError as e:
        return e
    return None


def _finish_or_empty(builder: IndexBuilder) -> tuple[bytes, bytes]:
    """The rebuilt index files, or two empty ones when recovery's final time entry is refused: what
    the broker leaves after truncating such a segment to its base offset (every entry removed)."""
    try:
        return builder.finish()
    except IndexAppendError:
        return b"", b""


def _scan_cutting(log_path: str, fd: int, base: int, st: os.stat_result, interval: int):
    """Recovery's cut: everything from the first batch it refuses to the end of the file."""
    size = st.st_size
    builder = _new_builder(log_path, base, interval)
    w = _walk(log_path, base, builder, 0, markers="after")
    if w.kind in ("overflow", "fatal"):
        return None, _refusal(log_path, w), b"", b""
    n, first, last, cut, reason = w.batches, w.first, w.last, w.end, w.reason
    resume = w
    to_base = None  # LogLoader.recoverLog: InvalidOffsetException, segment.truncateTo(baseOffset)
    if w.kind == "invalid_offset":
        # thrown by an index append in the loop: the index as recovery left it
        to_base, entries = w.reason, w.index_entries
    else:
        final = _final_entry_refused(builder)
        if final is None and w.stop is None:
            return None, None, *builder.finish()
        if final is not None:
            # recover() has already cut the log at validBytes when its last step throws
            to_base, entries = f"{log_path}: the final time index entry: {final.message}", tuple(builder.offset_entries)
    if to_base is not None:
        # truncateTo(baseOffset) cuts where OffsetIndex.lookup(baseOffset) points (usually byte 0: emptied)
        _off, cut = lookup_offset(entries, base, base)
        reason = (f"{to_base}: the broker's recovery fails here (InvalidOffsetException) and truncates the segment "
                  f"to its base offset {base}" + (f", which its partly rebuilt index places at byte {cut}" if cut else
                                                   ", emptying it"))
        builder = _new_builder(log_path, base, interval)
        again = _walk(log_path, base, builder, 0, markers="after", end=cut) if cut else None
        n, first, last = (again.batches, again.first, again.last) if again else (0, None, None)
        resume = _Walk(cut, cut, 0, None, None, cut, "after", reason, cut)
    removed = [Region(cut, size, reason)]
    runs = _runs_after(log_path, fd, base, resume, size, [])
    chain = [runs[i] for i in _chain(runs, base - 1 if last is None else last)]
    kept = [(0, cut)] if cut else []
    return _cut_for(log_path, base, st, kept, removed, n, first, last, chain), None, *_finish_or_empty(builder)


def _final_refusal(log_path: str, final: IndexAppendError) -> Refusal:
    return Refusal(log_path, None, (
        f"{log_path}: the final time index entry of the batches --keep-valid-after would keep is refused "
        f"({final.message}): the broker's recovery fails on them (InvalidOffsetException) and empties the "
        "segment; run without --keep-valid-after to cut as recovery does; nothing is changed in this partition"))


def _scan_keeping(log_path: str, fd: int, base: int, st: os.stat_result, interval: int):
    """--keep-valid-after: remove only what recovery refuses, keep every intact batch that fits."""
    size = st.st_size
    # the batches before the first damage: indexed as they are walked (a clean segment is read once)
    builder = _new_builder(log_path, base, interval)
    w = _walk(log_path, base, builder, 0, markers="refuse")
    if w.kind in ("overflow", "fatal"):
        return None, _refusal(log_path, w), b"", b""
    if w.stop is None:
        final = _final_entry_refused(builder)
        return (None, None, *builder.finish()) if final is None else (None, _final_refusal(log_path, final), b"", b"")
    rejected: list[Rejected] = []
    runs = _runs_after(log_path, fd, base, w, size, rejected)
    last_before = base - 1 if w.last is None else w.last
    chosen = set(_chain(runs, last_before))
    for i, r in enumerate(runs):
        if i not in chosen:
            why = (f"offsets {r.first}-{r.last} do not come after offset {last_before}, the last kept before the damage"
                   if r.first <= last_before else
                   f"offsets {r.first}-{r.last} do not fit between the intact batches around them")
            rejected.append(Rejected(r.start, r.end, r.batches, r.first, r.last, why))
    # the kept runs, indexed for their new layout after the first ones; a batch the index refuses
    # is removed on its own
    kept: list[tuple[int, int]] = [(0, w.end)] if w.batches else []
    events: list[tuple[int, str]] = [(w.stop, w.reason)]  # (position, why) of what each removed region starts with
    gaps: list[tuple[int, int]] = []
    n, first, last = w.batches, w.first, w.last
    todo = [runs[i] for i in sorted(chosen)]
    for r in runs:
        if r.stop is not None:
            events.append((r.stop, r.reason))
    for rej in rejected:
        events.append((rej.start, f"CRC-valid batches at bytes [{rej.start}, {rej.end}) not kept: {rej.reason}"))
    for run in todo:
        pos = run.start
        while pos < run.end:
            part = _walk(log_path, base, builder, pos, markers="refuse", end=run.end)
            if part.batches:
                if last is not None and part.first != last + 1:
                    gaps.append((last, part.first))
                if kept and kept[-1][1] == pos:
                    kept[-1] = (kept[-1][0], part.end)
                else:
                    kept.append((pos, part.end))
                n += part.batches
                first = part.first if first is None else first
                last = part.last
            if part.stop is None or part.stop >= run.end:
                break
            if part.kind == "fatal":
                return None, _refusal(log_path, part), b"", b""
            events.append((part.stop, part.reason))
            pos = part.frame_end if part.frame_end is not None else run.end
    final = _final_entry_refused(builder)
    if final is not None:
        return None, _final_refusal(log_path, final), b"", b""
    removed: list[Region] = []
    at = 0
    for s, e in kept + [(size, size)]:
        if s > at:
            why = next((r for p, r in sorted(events) if at <= p < s), "not an intact batch")
            removed.append(Region(at, s, why))
        at = e
    if not removed:
        return None, None, *builder.finish()
    return _cut_for(log_path, base, st, kept, removed, n, first, last, [], gaps, rejected), None, *builder.finish()


# ----------------------------------------------------------------------------- planning a partition


def _partition_segments(partition_dir: str) -> list[str]:
    """Every ``<20 digits>.log`` of the partition dir in base-offset order, whatever it is on disk
    (a FIFO named like a segment is planned, then refused by name, not skipped unseen)."""
    try:
        listing = Partition(partition_dir).listing()
    except DirectoryError as e:
        raise (e.os_error or OSError(errno.EIO, str(e), partition_dir)) from None  # callers report an OSError
    return [e.path for e in listing if e.kind is names.FileKind.LOG]


def _leftovers(partition_dir: str) -> tuple[list[str], str | None]:
    temps, journal = [], None
    for n in sorted(os.listdir(partition_dir)):
        if n == TRUNCATE_JOURNAL:
            journal = os.path.join(partition_dir, n)
        elif n.endswith(TEMP_SUFFIX):
            temps.append(os.path.join(partition_dir, n))
    return temps, journal


def _read_small(path: str) -> bytes | None:
    """A side file's bytes, or None when there is none; a FIFO, a device or a directory under its
    name is refused (opened without blocking, never read), so that no plan hangs or writes over it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RepairError("not a regular file (a FIFO, a device, a directory...): truncate does not read, "
                              "replace or move it; nothing is changed in this partition", path=path)
        chunks = []
        while piece := os.read(fd, 1 << 20):
            chunks.append(piece)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _regular_size(path: str) -> int:
    """The size of a file to move into the backup; anything but a regular file is refused."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise RepairError("not a regular file (a FIFO, a device, a directory, a symbolic link...): truncate does "
                          "not move it into the backup; nothing is changed in this partition", path=path)
    return st.st_size


def _small_rewrite(path: str, kind: str, data: bytes, detail: str) -> FileRewrite | None:
    old = _read_small(path)
    if old == data:
        return None
    return FileRewrite(path, kind, None if old is None else len(old), None if old is None else sha256_hex(old), data, detail)


def _resolve(path: str) -> str:
    """A directory resolved (a partition dir named through a symlink is the real one); a file keeps its name."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        return os.path.realpath(path)
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def plan_truncate(
    partition_or_segment: str,
    keep_valid_after: bool = False,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    segments: Sequence[str] | None = None,
) -> TruncatePlan:
    """Plan the truncation of one partition dir, or of one segment of it. Reads only.

    A segment path (or ``segments``, paths inside one partition dir) limits which segments are
    examined; the later segments of the partition are removed whenever one is cut (§12.1).
    """
    target = _resolve(partition_or_segment)
    if os.path.isdir(target):
        partition_dir = target
        all_segments = _partition_segments(partition_dir)
        wanted = [_resolve(s) for s in segments] if segments is not None else all_segments
    else:
        partition_dir = os.path.dirname(target)
        all_segments = _partition_segments(partition_dir)
        wanted = [_resolve(s) for s in segments] if segments is not None else [target]
    temps, journal = _leftovers(partition_dir)
    staging = find_staging_dirs(partition_dir)
    if journal is not None:
        try:
            journal_work(journal)
        except RepairError as e:
            refusal = _journal_refusal(partition_dir, journal, e)
            if refusal is None:  # the run that wrote it completed it meanwhile: plan what is there now
                return plan_truncate(partition_or_segment, keep_valid_after, index_interval_bytes, segments=segments)
            return TruncatePlan(partition_dir, keep_valid_after, 0, (), (), (), None, (), tuple(temps), journal, staging,
                                (refusal,))
        return TruncatePlan(partition_dir, keep_valid_after, 0, (), (), (), None,
                            (f"an interrupted truncate committed its journal {journal}; it is completed first",),
                            tuple(temps), journal, staging)
    try:
        return _plan_partition(partition_dir, all_segments, wanted, keep_valid_after, index_interval_bytes,
                               temps, staging)
    except RepairError as e:  # a file truncate must not read or touch (a FIFO named like a segment...)
        return TruncatePlan(partition_dir, keep_valid_after, 0, (), (), (), None, (), tuple(temps), None, staging,
                            (Refusal(e.path or partition_dir, e.position, str(e)),))


def _plan_partition(partition_dir: str, all_segments: list[str], wanted: list[str], keep_valid_after: bool,
                    index_interval_bytes: int, temps: list[str], staging: tuple[str, ...]) -> TruncatePlan:
    cuts: list[SegmentCut] = []
    rewrites: list[FileRewrite] = []
    notes: list[str] = []
    checked = 0
    for log in sorted(wanted, key=names.parse_base_offset):
        checked += 1
        cut, refusal, index, timeindex = _scan_segment(log, keep_valid_after, index_interval_bytes)
        if refusal is not None:
            return TruncatePlan(partition_dir, keep_valid_after, checked, (), (), (), None, (), tuple(temps), None,
                                staging, (refusal,))
        if cut is None:
            continue
        cuts.append(cut)
        for kind, suffix, data in (("index", ".index", index), ("timeindex", ".timeindex", timeindex)):
            r = _small_rewrite(str(names.sibling(log, suffix)), kind, data,
                               f"rebuilt for the new .log (index.interval.bytes={index_interval_bytes})")
            if r is not None:
                rewrites.append(r)
        if not keep_valid_after:
            break  # recovery stops here: everything after is removed
    moves: list[FileMove] = []
    new_end = None
    if cuts:
        last_cut = cuts[-1]
        later = [s for s in all_segments if names.parse_base_offset(s) > last_cut.base_offset]
        changes_end = not keep_valid_after or not later
        if not keep_valid_after and later:
            later_bases = {names.parse_base_offset(s) for s in later}
            for n in sorted(os.listdir(partition_dir)):
                if names.classify(n) in _SEGMENT_KINDS and names.parse_base_offset(n) in later_bases:
                    p = os.path.join(partition_dir, n)
                    moves.append(FileMove(p, _regular_size(p), "a later segment: recovery after an unclean "
                                          "shutdown deletes every segment after one it truncated (§12.1)"))
        if changes_end and last_cut.removed and last_cut.removed[-1].end == last_cut.old_size:
            new_end = last_cut.next_offset
    if new_end is not None:
        for n in sorted(os.listdir(partition_dir)):
            if names.classify(n) is names.FileKind.PRODUCER_SNAPSHOT:
                try:
                    off = names.parse_base_offset(n)
                except KafkaToolError:
                    continue
                if off > new_end:
                    p = os.path.join(partition_dir, n)
                    moves.append(FileMove(p, _regular_size(p), f"producer snapshot above the new log end {new_end}"))
        lec = os.path.join(partition_dir, names.LEADER_EPOCH_CHECKPOINT)
        old = _read_small(lec)
        if old is not None:
            try:
                entries = decode_leader_epoch_checkpoint(old, lec)
            except KafkaToolError as e:
                notes.append(f"{lec} left unchanged: it cannot be read ({e})")
            else:
                keep = [e for e in entries if e.start_offset < new_end]
                if len(keep) != len(entries):
                    r = _small_rewrite(lec, "leader-epoch-checkpoint", encode_leader_epoch_checkpoint(keep).encode(),
                                       f"{len(entries) - len(keep)} entries with startOffset >= {new_end} dropped")
                    if r is not None:
                        rewrites.append(r)
        moved = {m.path for m in moves}
        for log in all_segments:
            txn = str(names.sibling(log, ".txnindex"))
            data = _read_small(txn)
            if data is None or txn in moved:
                continue
            try:
                entries = list(iter_txn_index(data, txn))
            except KafkaToolError as e:
                notes.append(f"{txn} left unchanged: it cannot be read ({e})")
                continue
            keep = [e for e in entries if e.last_offset < new_end]
            if len(keep) != len(entries) or len(data) % TXN_ENTRY_SIZE:
                r = _small_rewrite(txn, "txnindex", encode_txn_index(keep),
                                   f"{len(entries) - len(keep)} aborted transactions with lastOffset >= {new_end} dropped")
                if r is not None:
                    rewrites.append(r)
    return TruncatePlan(partition_dir, keep_valid_after, checked, tuple(cuts), tuple(rewrites), tuple(moves),
                        new_end, tuple(notes), tuple(temps), None, staging)


def plan_truncate_paths(
    paths: Sequence[str],
    keep_valid_after: bool = False,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    on_plan: Callable[[TruncatePlan, int], None] | None = None,
    segments: Sequence[str] | None = None,
    on_error: Callable[[str, Exception], None] | None = None,
) -> list[TruncatePlan]:
    """One plan per partition dir named by ``paths`` (segments, partition dirs, log dirs).

    ``on_plan(plan, segment_bytes)`` (optional) is called after each partition, for progress bars.
    ``segments`` is ``scan_targets(paths).segments`` when the caller already has it.
    ``on_error(partition_dir, error)``: a partition that cannot be read (an OSError) is reported
    there and skipped, so the others are still planned; without it the error propagates.
    """
    from kafkatool.targets import scan_targets

    by_dir: dict[str, list[str]] = {}
    for s in scan_targets(paths).segments if segments is None else segments:
        by_dir.setdefault(os.path.dirname(s), []).append(s)
    for p in paths:  # a partition dir holding only leftovers of an interrupted run
        p = _resolve(p)
        if os.path.isdir(p) and (os.path.exists(os.path.join(p, TRUNCATE_JOURNAL)) or find_staging_dirs(p)):
            by_dir.setdefault(p, [])
    plans = []
    for d, segs in by_dir.items():
        try:
            try:
                plan = plan_truncate(d, keep_valid_after, index_interval_bytes, segments=segs)
            except FileNotFoundError as e:  # a file went while planning: another run, or a broker
                _changed_while_planned(d, e)
                plan = plan_truncate(d, keep_valid_after, index_interval_bytes,
                                     segments=[s for s in segs if os.path.lexists(s)] if segs else segs)
        except OSError as e:  # the partition dir or a segment cannot be read: the others go on
            if on_error is None:
                raise
            on_error(d, e)
            continue
        plans.append(plan)
        if on_plan is not None:
            on_plan(plan, sum(_size_or_zero(s) for s in segs))
    return plans


def _changed_while_planned(partition_dir: str, error: FileNotFoundError) -> None:
    """A file of ``partition_dir`` went while it was being planned. Raise when another process
    holds the log dir's lock (a truncate or reindex is switching its files: say so, not "cannot
    read"); otherwise return, and the caller plans once more from what is there now."""
    held = held_elsewhere(real_log_dir_of(partition_dir))
    if held is not None:
        raise FileNotFoundError(
            error.errno, f"{error.strerror} (it went while this run planned: {held}; run again when it is done)",
            error.filename) from None


def _size_or_zero(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


# ----------------------------------------------------------------------------- the journal


def _journal_refusal(partition_dir: str, journal: str, error: RepairError) -> Refusal | None:
    """Why a plan made without the lock refuses a journal whose files do not match it.

    A journal is not necessarily an interrupted run's: another truncate may be between its
    commit point and its last rename right now, holding the log dir's lock. Then the journal
    is in progress, not stale. None when the journal is gone by now (that run completed)."""
    held = held_elsewhere(real_log_dir_of(partition_dir))
    if held is not None:
        return Refusal(journal, None, f"{held} and is completing this journal; run again when it is done")
    if not os.path.lexists(journal):
        return None
    return Refusal(journal, None, str(error))



# ----------------------------------------------------------------------------- apply


@dataclass(frozen=True, slots=True)
class TruncateReport:
    """What :func:`apply_truncate` did to one partition dir, after re-verifying it."""

    plan: TruncatePlan
    written: tuple[str, ...]
    moved: tuple[str, ...]
    removed_leftovers: tuple[str, ...]
    backup_dir: str | None
    completed_journal: bool
    verified: bool
    method: str | None = None
    """How the files were switched: ``exchange``, ``journal (<why no exchange>)``, or None (nothing written)."""


def _backup_everything(plan: TruncatePlan, backup: TruncateBackup) -> list[tuple[str, str]]:
    """Step 1 of both paths: every removed byte range, every rewritten file whole, and the
    record of every move (``(source, destination)`` pairs returned)."""
    move_dests = []
    with backup.batch():  # one manifest write for the partition; nothing is removed before it is on disk
        for c in plan.cuts:
            # one streamed pass per .log: the removed ranges, and the sha256 of the whole original and of the result
            backup.save_cut(c.log_path, [(r.start, r.end, r.reason) for r in c.removed], c.old_size, c.new_size,
                            "truncate: cut")
            fault_point("after backup")
        for r in plan.rewrites:
            backup.save(r.path, r.data, f"truncate: {r.kind} {r.detail}")
            fault_point("after backup")
        for m in plan.moves:
            _entry, dest = backup.plan_move(m.path, m.reason)
            move_dests.append((m.path, dest))
    return move_dests


def _segment_log(path: str) -> str | None:
    if names.classify(path) in _SEGMENT_KINDS:
        return names.segment_file_name(names.parse_base_offset(path), ".log")
    return None


def _apply_by_exchange(plan: TruncatePlan, backup: TruncateBackup) -> None:
    """Build the new partition dir beside the old one and switch them at once
    (:func:`kafkatool.safety.exchange_partition`); the backup is complete before the switch."""

    def save_before_switch() -> None:
        for src, dest in _backup_everything(plan, backup):
            # a .log is hard-linked when the backup is on the same file system (no copy of a
            # 1 GiB segment); anything else is copied, since a broker that started on the
            # old state would open its indexes writable and resize them
            link_or_copy(src, dest, link=src.endswith(".log"))
            fsync_dir(os.path.dirname(dest))
            fault_point("after backup")

    exchange_partition(
        plan.partition_dir,
        write={os.path.basename(r.path): r.data for r in plan.rewrites},
        cut={os.path.basename(c.log_path): c.kept for c in plan.cuts},
        drop=[os.path.basename(m.path) for m in plan.moves] + [os.path.basename(t) for t in plan.leftovers],
        like={os.path.basename(r.path): log for r in plan.rewrites if (log := _segment_log(r.path)) is not None},
        before_switch=save_before_switch,
    )


def _check_unchanged(plan: TruncatePlan) -> None:
    """The plan was made before the lock was taken: make sure nothing moved since."""
    for c in plan.cuts:
        st = os.lstat(c.log_path)
        if (st.st_size, st.st_mtime_ns) != (c.old_size, c.old_mtime_ns) or (c.old_ino and st.st_ino != c.old_ino):
            raise PartitionRefused("the segment changed since it was planned (a broker appended?); run again",
                                   path=c.log_path, expected=f"{c.old_size} bytes", found=f"{st.st_size} bytes")
    for r in plan.rewrites:
        now = _read_small(r.path)
        if (None if now is None else sha256_hex(now)) != r.old_sha256:
            raise PartitionRefused("the file changed since it was planned; run again", path=r.path)
    for m in plan.moves:
        try:
            size = os.lstat(m.path).st_size
        except FileNotFoundError:
            raise PartitionRefused("the file is gone since it was planned; run again", path=m.path) from None
        if size != m.size:
            raise PartitionRefused("the file changed since it was planned (a broker appended?); run again",
                                   path=m.path, expected=f"{m.size} bytes", found=f"{size} bytes")


def apply_truncate(
    plan: TruncatePlan, backup: TruncateBackup | str, *, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
) -> TruncateReport:
    """Apply ``plan`` crash-safely (module doc), then re-plan: the result must need nothing more.

    The caller holds the :class:`~kafkatool.safety.LogDirLock`. Raises :class:`RepairError`
    when a file changed since the plan, when an interrupted run's journal is stale
    (:class:`StaleJournalError`), or when re-verification fails.
    """
    if isinstance(backup, str):
        backup = TruncateBackup(backup, tool="kafkatool truncate")
    if plan.refusals:
        raise PartitionRefused(str(plan.refusals[0]), kind="refused")
    directory = plan.partition_dir
    # a staging dir of an interrupted run first: always safe to remove, and the exchange needs its name
    removed_leftovers: list[str] = remove_staging_dirs(plan.staging_leftovers)
    if plan.interrupted_journal is not None:
        earlier_backup = read_journal(plan.interrupted_journal).get("backupDir")
        roll_forward(plan.interrupted_journal)
        removed_leftovers += unlink_all(plan.leftovers)
        # the completed state is the earlier run's new state; anything still needed is planned afresh
        again = plan_truncate(directory, plan.keep_valid_after, index_interval_bytes)
        if again.refusals:
            raise RepairError(str(again.refusals[0]))
        if again.needs_changes:
            more = apply_truncate(again, backup, index_interval_bytes=index_interval_bytes)
            return TruncateReport(plan, more.written, more.moved, tuple(removed_leftovers) + more.removed_leftovers,
                                  more.backup_dir, True, more.verified, more.method)
        return TruncateReport(plan, (), (), tuple(removed_leftovers), earlier_backup, True, True)
    _check_unchanged(plan)
    if not (plan.cuts or plan.rewrites or plan.moves):
        gone = unlink_all(plan.leftovers)  # temps of a run that never committed: the old state is intact
        if gone:
            fsync_dir(directory)
        return TruncateReport(plan, (), (), tuple(removed_leftovers + gone), None, False, True)
    why = exchange_unavailable(directory)
    if why is None:
        try:
            _apply_by_exchange(plan, backup)
            removed_leftovers += plan.leftovers  # absent from the new partition dir
        except ExchangeUnavailable as e:
            why = e.message
    if why is not None:
        _apply_by_journal(plan, backup, removed_leftovers)
    # re-verify: exactly the intended bytes, and a second plan finds nothing
    _verify(plan)
    again = plan_truncate(directory, plan.keep_valid_after, index_interval_bytes,
                          segments=[c.log_path for c in plan.cuts])
    if again.needs_changes or again.refusals:
        raise RepairError("re-verification failed: a second plan still finds changes", path=directory)
    written = tuple(c.log_path for c in plan.cuts) + tuple(r.path for r in plan.rewrites)
    return TruncateReport(plan, written, tuple(m.path for m in plan.moves), tuple(removed_leftovers), backup.root,
                          False, True, "exchange" if why is None else f"journal ({why})")


def _like(path: str, partition_dir: str) -> os.stat_result:
    """The file whose owner and mode a new file takes: the one it replaces, else its segment's
    ``.log``, else any ``.log`` of the partition, else the partition dir without its x bits."""
    for p in (path, None if (log := _segment_log(path)) is None else os.path.join(partition_dir, log)):
        if p is not None:
            try:
                return os.stat(p)
            except FileNotFoundError:
                pass
    for n in sorted(os.listdir(partition_dir)):
        if n.endswith(".log"):
            try:
                return os.stat(os.path.join(partition_dir, n))
            except FileNotFoundError:
                pass
    st = os.stat(partition_dir)
    return os.stat_result((st.st_mode & ~0o111 & ~stat.S_IFDIR | stat.S_IFREG, *tuple(st)[1:]))


def _apply_by_journal(plan: TruncatePlan, backup: TruncateBackup, removed_leftovers: list[str]) -> None:
    """The fallback when the exchange cannot be used: temp files beside the old ones, a journal
    (the commit point), then the renames and moves (module doc)."""
    directory = plan.partition_dir
    removed_leftovers += unlink_all(plan.leftovers)  # temps of a run that never committed: the old state is intact
    # 1. the backup: removed ranges, whole originals of rewritten files, the moves to come
    move_dests = _backup_everything(plan, backup)
    # 2. the new files beside the old ones, each with the owner and mode of the file it replaces
    replace = []
    for c in plan.cuts:
        old = identity(c.log_path)
        tmp = make_temp(c.log_path, os.stat(c.log_path), source=c.log_path, ranges=c.kept)
        replace.append((tmp, c.log_path, old))
    for r in plan.rewrites:
        old = identity(r.path)
        tmp = make_temp(r.path, _like(r.path, directory), data=r.data)
        replace.append((tmp, r.path, old))
    # 3. the commit point: what every file is now, so that completing it later can tell a broker ran since
    journal = os.path.join(directory, TRUNCATE_JOURNAL)
    commit_journal(journal, journal_record("kafkatool truncate", backup.root, replace, move_dests), _like(journal, directory))
    # 4. renames and moves, then the journal goes
    roll_forward(journal)


def _verify(plan: TruncatePlan) -> None:
    for c in plan.cuts:
        if os.path.getsize(c.log_path) != c.new_size:
            raise RepairError("re-verification failed: the .log has the wrong size", path=c.log_path,
                              expected=c.new_size, found=os.path.getsize(c.log_path))
        n = 0
        with SegmentWalker(c.log_path) as w:
            for b, _ in w:
                if not b.crc_valid:
                    raise RepairError("re-verification failed: a bad batch remains", path=c.log_path, position=b.position)
                n += 1
            if w.position != c.new_size:
                raise RepairError("re-verification failed: the walk stops early", path=c.log_path, position=w.position)
        if n != c.batches_kept:
            raise RepairError("re-verification failed: wrong batch count", path=c.log_path,
                              expected=c.batches_kept, found=n)
    for r in plan.rewrites:
        if _read_small(r.path) != r.data:
            raise RepairError("re-verification failed: the file on disk is not what was written", path=r.path)
    for m in plan.moves:
        if os.path.lexists(m.path):
            raise RepairError("re-verification failed: a file to move is still there", path=m.path)


def describe_state(plan: TruncatePlan) -> str:
    """In what state an interrupted ``--execute`` left a partition dir (read from the disk)."""
    directory = plan.partition_dir
    journal = os.path.join(directory, TRUNCATE_JOURNAL)
    if os.path.lexists(journal):
        return (f"committed but not complete: the journal {journal} records the change; run "
                "`kafkatool truncate --execute` on it to complete it (a broker must not start on it before)")
    staging = find_staging_dirs(directory)

    def is_new() -> bool:
        return (all(os.path.getsize(c.log_path) == c.new_size for c in plan.cuts if os.path.exists(c.log_path))
                and not any(os.path.lexists(m.path) for m in plan.moves))

    def is_old() -> bool:
        return (all(os.path.getsize(c.log_path) == c.old_size for c in plan.cuts if os.path.exists(c.log_path))
                and all(os.path.lexists(m.path) for m in plan.moves))

    try:
        state = "unchanged (the old state, complete)" if is_old() else (
            "changed (the new state, complete)" if is_new() else "neither the old nor the new state (check it)")
    except OSError as e:
        state = f"unknown ({e})"
    temps = [n for n in os.listdir(directory) if n.endswith(TEMP_SUFFIX)] if os.path.isdir(directory) else []
    left = []
    if staging:
        left.append(f"the staging dir {staging[0]}")
    if temps:
        left.append(f"{len(temps)} temp file{'s' if len(temps) != 1 else ''} (*{TEMP_SUFFIX})")
    if left:
        state += "; " + " and ".join(left) + " left, which the next run (or `kafkatool truncate --execute`) removes"
    return state


def apply_truncate_all(
    plans: Sequence[TruncatePlan],
    backup_dir: Callable[[str], str] | str,
    *,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    **options,
) -> list[TruncateReport]:
    """Apply several truncate plans through the shared driver (:func:`kafkatool.safety.apply_locked`:
    ``force``, ``allow_transitional``, ``on_report``, ``on_start``, ``on_refused``); refused plans
    are skipped. With ``on_refused``, a partition refused under the lock (it changed since it was
    planned, its journal is stale) is reported there and the others go on."""
    return apply_locked(
        [p for p in plans if not p.refusals],
        backup_dir,
        lambda ps, backup: [apply_truncate(p, backup, index_interval_bytes=index_interval_bytes) for p in ps],
        lambda root: TruncateBackup(root, tool="kafkatool truncate"),
        **options,
    )
