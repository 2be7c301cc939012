"""``truncate``: the broker's recovery cut, offline, losing nothing (spec §3, §9–§12.2, §17.H, §19).

Plan, then apply (STYLE.md). :func:`plan_truncate` only reads. It walks each segment as
``LogSegment.recover`` does (§12.2): the first entry that fails the §3 walk (size < 14, a
partial or absurd size, a short tail) or its integrity check (CRC; an offset the segment
cannot hold) is the cut point. Like recovery after an unclean shutdown (§12.1, §17.H 61), the
later segments of the partition are removed too, and what depends on the log end is trimmed
(§19): the cut segment's ``.index``/``.timeindex`` are rebuilt, producer ``.snapshot`` files
above the new log end are removed, ``leader-epoch-checkpoint`` entries with startOffset >=
the new log end and ``.txnindex`` entries with lastOffset >= it are dropped.

With ``keep_valid_after`` only the bad regions are removed: after each one the next entry with
a valid CRC is found with verify's resync, and every intact batch is kept, in order, at its
own offsets (the gap is reported). Later segments then stay.

Nothing is deleted. :func:`apply_truncate` first writes every removed byte range of a
``.log`` to ``<backup>/<partition>/<file>.<start>-<end>.bytes`` and every rewritten small file
whole, with ``MANIFEST.json`` and a ``RESTORE.txt`` that splices the ranges back; files the
new state drops (later segments, snapshots above the new end) are put into the backup, a
``.log`` as a hard link when the backup is on the same file system, anything else as a copy.

Crash safety is :mod:`kafkatool.repair`'s whole-dir exchange: the new partition dir is built
beside the old one as a staging dir named like a partition being deleted (small files
written fresh, the cut ``.log`` written from its kept ranges, unchanged ``.log`` files
hard-linked last), the backup above is completed, and one ``renameat2(RENAME_EXCHANGE)``
switches the two dirs; the old state is then removed. A crash at any point leaves the
partition dir complete-old or complete-new; the next run (a dry run reports it) removes a
leftover staging dir. Where the exchange cannot be used (the report's ``method`` says why),
the journaled fallback runs: new files beside the old ones as ``*.kafkatool-tmp``, fsynced,
then a journal ``kafkatool-truncate.kafkatool-journal`` committed in the partition dir, then
the renames and moves, then the journal is removed. A crash before the commit leaves the old
state (plus temp files the next run deletes); after it, the next run completes the journal
(roll forward: rename the temps that remain, move the files that remain).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from dataclasses import dataclass, field
from typing import Callable, Sequence

from kafkatool.errors import KafkaToolError
from kafkatool.repair import (
    JOURNAL_SUFFIX,
    TEMP_SUFFIX,
    ExchangeUnavailable,
    apply_locked,
    RepairError,
    _unlink_all,
    exchange_partition,
    exchange_unavailable,
    find_segments,
    find_staging_dirs,
    link_or_copy,
    remove_staging_dirs,
    walk_as_recovery,
)
from kafkatool.safety import (
    COPY_CHUNK,
    TruncateBackup,
    fault_point,
    fsync_dir,
    read_or_none,
    sha256_hex,
)
from kafkatool.segment import files as names
from kafkatool.segment.checkpoint import decode_leader_epoch_checkpoint, encode_leader_epoch_checkpoint
from kafkatool.segment.index import DEFAULT_INDEX_INTERVAL_BYTES, IndexBuilder
from kafkatool.segment.txnindex import TXN_ENTRY_SIZE, encode_txn_index, iter_txn_index
from kafkatool.segment.walk import SegmentWalker, WalkStop


__all__ = [
    "Region",
    "SegmentCut",
    "FileRewrite",
    "FileMove",
    "TruncatePlan",
    "TruncateReport",
    "TruncateBackup",
    "plan_truncate",
    "plan_truncate_paths",
    "apply_truncate",
    "apply_truncate_all",
    "TRUNCATE_JOURNAL",
]

TRUNCATE_JOURNAL = "kafkatool-truncate" + JOURNAL_SUFFIX
"""The partition-level journal: present between the commit point and the last rename/move."""
_INT32_MAX = 2147483647
_SEGMENT_KINDS = (names.FileKind.LOG, names.FileKind.INDEX, names.FileKind.TIMEINDEX, names.FileKind.TXNINDEX)


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
    """Intact batches (valid CRC, found by resync) inside the removed ranges: data lost without --keep-valid-after."""
    dropped_offsets: tuple[int, int] | None
    """First and last offset of those intact batches."""
    gaps: tuple[tuple[int, int], ...]
    """``(last offset before, first offset after)`` around each removed region between kept batches."""

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

    @property
    def needs_changes(self) -> bool:
        return bool(self.cuts or self.rewrites or self.moves or self.leftovers or self.interrupted_journal
                    or self.staging_leftovers)

    @property
    def removed_bytes(self) -> int:
        return sum(r.size for c in self.cuts for r in c.removed)


def _bad_reason(walker: SegmentWalker, path: str, position: int) -> str:
    if walker.stop is WalkStop.ERROR and walker.error is not None:
        return str(walker.error)
    return f"{path}:{position}: partial batch, size field past the end of the file, or a short tail"


#: A builder that counts intact batches after a cut and indexes none (its interval is never reached).
_NEVER_INDEX = 1 << 62


def _walk_run(log_path: str, base: int, builder: IndexBuilder, pos: int):
    """Walk from ``pos`` as recovery does, feeding ``builder`` (laid out back to back after
    what it holds) until the first batch recovery refuses or the end of the walk.

    Returns ``(batches, first offset, last offset, (bad position, reason) or None)``.
    """

    def fits(batch) -> str | None:  # an offset the segment cannot hold: recovery refuses the batch
        rel = batch.last_offset - base
        if rel < 0 or rel > _INT32_MAX:
            return f"{log_path}:{batch.position}: offset {batch.last_offset} does not fit a segment with base offset {base}"
        return None

    walker, batches, first, last, bad = walk_as_recovery(log_path, builder, start=pos, check=fits)
    if bad is None and walker.position < walker.end:
        bad = (walker.position, _bad_reason(walker, log_path, walker.position))
    return batches, first, last, bad


def _scan_segment(log_path: str, keep_valid_after: bool, index_interval_bytes: int):
    """Walk one segment as recovery does; return ``(cut or None, offset index, time index)``.

    The index bytes describe the *new* layout (the kept batches, back to back). Memory stays
    flat: the kept byte ranges, gaps and counts are kept as the walk goes, not per batch.
    """
    from kafkatool.verify import _resync  # the resync verify uses after a bad region

    base = names.parse_base_offset(log_path)
    size = os.path.getsize(log_path)
    mtime = os.stat(log_path).st_mtime_ns
    builder = IndexBuilder(base, index_interval_bytes=index_interval_bytes, path=str(names.sibling(log_path, ".index")))
    counter = IndexBuilder(base, index_interval_bytes=_NEVER_INDEX)  # after a cut: intact batches, counted only
    kept: list[tuple[int, int]] = []
    gaps: list[tuple[int, int]] = []
    removed: list[Region] = []
    batches_kept = 0
    first = last = None
    dropped = 0
    dropped_first = dropped_last = None
    pos = 0
    cutting = False  # after the first bad region without keep_valid_after: resync only to count
    while pos < size:
        if cutting:
            n, run_first, run_last, bad = _walk_run(log_path, base, counter, pos)
            if n:
                dropped += n
                dropped_first = run_first if dropped_first is None else dropped_first
                dropped_last = run_last
        else:
            before = builder.valid_bytes
            n, run_first, run_last, bad = _walk_run(log_path, base, builder, pos)
            if n:
                run_end = pos + builder.valid_bytes - before
                if kept and kept[-1][1] == pos:
                    kept[-1] = (kept[-1][0], run_end)
                else:
                    if last is not None and run_first != last + 1:
                        gaps.append((last, run_first))
                    kept.append((pos, run_end))
                batches_kept += n
                first = run_first if first is None else first
                last = run_last
        if bad is None:
            break
        bad_at, reason = bad
        nxt = _resync(log_path, bad_at + 1, size)
        end = size if nxt is None else nxt
        if not cutting:
            stop = end if keep_valid_after else size  # recovery drops everything after the first bad batch
            if removed and removed[-1].end == bad_at:  # adjacent bad regions are one
                removed[-1] = Region(removed[-1].start, stop, removed[-1].reason)
            else:
                removed.append(Region(bad_at, stop, reason))
            cutting = not keep_valid_after
        if nxt is None:
            break
        pos = nxt
    if not removed:
        return None, *builder.finish()
    cut = SegmentCut(
        log_path, base, size, mtime, tuple(kept), tuple(removed), batches_kept, first, last,
        dropped, None if dropped_first is None else (dropped_first, dropped_last), tuple(gaps),
    )
    return cut, *builder.finish()


def _partition_segments(partition_dir: str) -> list[str]:
    out = []
    for n in os.listdir(partition_dir):
        if names.classify(n) is names.FileKind.LOG:
            out.append(os.path.join(partition_dir, n))
    return sorted(out, key=names.parse_base_offset)


def _leftovers(partition_dir: str) -> tuple[list[str], str | None]:
    temps, journal = [], None
    for n in sorted(os.listdir(partition_dir)):
        if n == TRUNCATE_JOURNAL:
            journal = os.path.join(partition_dir, n)
        elif n.endswith(TEMP_SUFFIX):
            temps.append(os.path.join(partition_dir, n))
    return temps, journal


def _small_rewrite(path: str, kind: str, data: bytes, detail: str) -> FileRewrite | None:
    old = read_or_none(path)
    if old == data:
        return None
    return FileRewrite(path, kind, None if old is None else len(old), None if old is None else sha256_hex(old), data, detail)


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
    target = os.path.abspath(partition_or_segment)
    if os.path.isdir(target):
        partition_dir = target
        all_segments = _partition_segments(partition_dir)
        wanted = [os.path.abspath(s) for s in segments] if segments is not None else all_segments
    else:
        partition_dir = os.path.dirname(target)
        all_segments = _partition_segments(partition_dir)
        wanted = [os.path.abspath(s) for s in segments] if segments is not None else find_segments([target])
    temps, journal = _leftovers(partition_dir)
    staging = find_staging_dirs(partition_dir)
    if journal is not None:
        return TruncatePlan(partition_dir, keep_valid_after, 0, (), (), (), None,
                            (f"an interrupted truncate committed its journal {journal}; it is completed first",),
                            tuple(temps), journal, staging)
    cuts: list[SegmentCut] = []
    rewrites: list[FileRewrite] = []
    notes: list[str] = []
    checked = 0
    for log in sorted(wanted, key=names.parse_base_offset):
        checked += 1
        cut, index, timeindex = _scan_segment(log, keep_valid_after, index_interval_bytes)
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
                    moves.append(FileMove(p, os.path.getsize(p), "a later segment: recovery after an unclean "
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
                    moves.append(FileMove(p, os.path.getsize(p), f"producer snapshot above the new log end {new_end}"))
        lec = os.path.join(partition_dir, names.LEADER_EPOCH_CHECKPOINT)
        old = read_or_none(lec)
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
            data = read_or_none(txn)
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
) -> list[TruncatePlan]:
    """One plan per partition dir named by ``paths`` (segments, partition dirs, log dirs).

    ``on_plan(plan, segment_bytes)`` (optional) is called after each partition, for progress bars.
    ``segments`` is ``find_segments(paths)`` when the caller already has it.
    """
    by_dir: dict[str, list[str]] = {}
    for s in find_segments(paths) if segments is None else segments:
        by_dir.setdefault(os.path.dirname(s), []).append(s)
    for p in paths:  # a partition dir holding only leftovers of an interrupted run
        p = os.path.abspath(p)
        if os.path.isdir(p) and (os.path.exists(os.path.join(p, TRUNCATE_JOURNAL)) or find_staging_dirs(p)):
            by_dir.setdefault(p, [])
    plans = []
    for d, segs in by_dir.items():
        plans.append(plan_truncate(d, keep_valid_after, index_interval_bytes, segments=segs))
        if on_plan is not None:
            on_plan(plans[-1], sum(os.path.getsize(s) for s in segs))
    return plans


# ----------------------------------------------------------------------------- the backup


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


def _move(src: str, dst: str) -> None:
    """Move one file into the backup: a rename, or copy + fsync + unlink across file systems."""
    try:
        os.rename(src, dst)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        tmp = dst + TEMP_SUFFIX
        shutil.copyfile(src, tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dst)
        fsync_dir(os.path.dirname(dst))
        os.unlink(src)


def _roll_forward(journal_path: str) -> list[str]:
    """Complete a committed journal: rename the temps that remain, move the files that remain."""
    with open(journal_path, encoding="utf-8") as f:
        record = json.load(f)
    directory = os.path.dirname(journal_path)
    done = []
    for r in record["replace"]:
        tmp, target = os.path.join(directory, r["temp"]), os.path.join(directory, r["target"])
        if os.path.exists(tmp):
            os.replace(tmp, target)
            fault_point("after rename")
            done.append(target)
        elif not os.path.exists(target) or os.path.getsize(target) != r["size"] or (
            r["sha256"] is not None and sha256_hex(read_or_none(target) or b"") != r["sha256"]
        ):
            raise RepairError("the journal names a temp file that is gone and the target is not the new file",
                              path=target)
    for m in record["move"]:
        src = os.path.join(directory, m["source"])
        if os.path.exists(src):
            if os.path.exists(m["dest"]) and os.path.getsize(m["dest"]) == os.path.getsize(src):
                os.unlink(src)  # a cross-device copy finished before the crash
            else:
                _move(src, m["dest"])
            fault_point("after move")
            done.append(src)
    fsync_dir(directory)
    for d in {os.path.dirname(m["dest"]) for m in record["move"]}:
        fsync_dir(d)
    fault_point("after directory fsync")
    os.unlink(journal_path)
    fsync_dir(directory)
    fault_point("after journal removal")
    return done


def _copy_range(src, out, start: int, end: int) -> None:
    src.seek(start)
    n = end - start
    while n > 0:
        b = src.read(min(n, COPY_CHUNK))
        if not b:
            raise RepairError("the segment shrank while it was being copied", path=getattr(src, "name", None))
        out.write(b)
        n -= len(b)


def _write_temp(path: str, data: bytes | None = None, ranges: tuple[tuple[int, int], ...] = (), source: str | None = None) -> str:
    tmp = path + TEMP_SUFFIX
    with open(tmp, "wb") as out:
        if source is not None:
            with open(source, "rb") as src:
                for s, e in ranges:
                    _copy_range(src, out, s, e)
        else:
            out.write(data or b"")
        out.flush()
        fault_point("after temp write")
        os.fsync(out.fileno())
    fault_point("after temp fsync")
    return tmp


def _backup_everything(plan: TruncatePlan, backup: TruncateBackup) -> list[tuple[str, str]]:
    """Step 1 of both paths: every removed byte range, every rewritten file whole, and the
    record of every move (``(source, destination)`` pairs returned)."""
    for c in plan.cuts:
        # one streamed pass per .log: the removed ranges, and the sha256 of the whole original and of the result
        backup.save_cut(c.log_path, [(r.start, r.end, r.reason) for r in c.removed], c.old_size, c.new_size,
                        "truncate: cut")
        fault_point("after backup")
    for r in plan.rewrites:
        backup.save(r.path, r.data, f"truncate: {r.kind} {r.detail}")
        fault_point("after backup")
    move_dests = []
    for m in plan.moves:
        _entry, dest = backup.plan_move(m.path, m.reason)
        move_dests.append((m.path, dest))
    return move_dests


def _apply_by_exchange(plan: TruncatePlan, backup: TruncateBackup) -> None:
    """Build the new partition dir beside the old one and switch them at once
    (:func:`kafkatool.repair.exchange_partition`); the backup is complete before the switch."""

    def save_before_switch() -> None:
        for src, dest in _backup_everything(plan, backup):
            # a .log is hard-linked when the backup is on the same file system (no copy of a
            # 1 GiB segment); anything else is copied, since a broker that started on the
            # old state would open its indexes writable and resize them
            link_or_copy(src, dest, link=src.endswith(".log"))
            fsync_dir(os.path.dirname(dest))
            fault_point("after backup")

    def segment_log(path: str) -> str | None:
        if names.classify(path) in _SEGMENT_KINDS:
            return names.segment_file_name(names.parse_base_offset(path), ".log")
        return None

    exchange_partition(
        plan.partition_dir,
        write={os.path.basename(r.path): r.data for r in plan.rewrites},
        cut={os.path.basename(c.log_path): c.kept for c in plan.cuts},
        drop=[os.path.basename(m.path) for m in plan.moves] + [os.path.basename(t) for t in plan.leftovers],
        like={os.path.basename(r.path): log for r in plan.rewrites if (log := segment_log(r.path)) is not None},
        before_switch=save_before_switch,
    )


def apply_truncate(
    plan: TruncatePlan, backup: TruncateBackup | str, *, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
) -> TruncateReport:
    """Apply ``plan`` crash-safely (module doc), then re-plan: the result must need nothing more.

    The caller holds the :class:`~kafkatool.repair.LogDirLock`. Raises :class:`RepairError`
    when a file changed since the plan, or when re-verification fails.
    """
    if isinstance(backup, str):
        backup = TruncateBackup(backup, tool="kafkatool truncate")
    directory = plan.partition_dir
    # a staging dir of an interrupted run first: always safe to remove, and the exchange needs its name
    removed_leftovers: list[str] = remove_staging_dirs(plan.staging_leftovers)
    if plan.interrupted_journal is not None:
        try:
            with open(plan.interrupted_journal, encoding="utf-8") as f:
                earlier_backup = json.load(f).get("backup_dir")
        except (OSError, ValueError) as e:
            raise RepairError(f"cannot read the journal of an interrupted truncate ({e})", path=plan.interrupted_journal) from None
        _roll_forward(plan.interrupted_journal)
        removed_leftovers += _unlink_all(plan.leftovers)
        # the completed state is the earlier run's new state; anything still needed is planned afresh
        again = plan_truncate(directory, plan.keep_valid_after, index_interval_bytes)
        if again.needs_changes:
            more = apply_truncate(again, backup, index_interval_bytes=index_interval_bytes)
            return TruncateReport(plan, more.written, more.moved, tuple(removed_leftovers) + more.removed_leftovers,
                                  more.backup_dir, True, more.verified, more.method)
        return TruncateReport(plan, (), (), tuple(removed_leftovers), earlier_backup, True, True)
    # the plan was made before the lock was taken: make sure nothing moved since
    for c in plan.cuts:
        st = os.stat(c.log_path)
        if st.st_size != c.old_size or st.st_mtime_ns != c.old_mtime_ns:
            raise RepairError("the segment changed since it was planned; run again", path=c.log_path)
    for r in plan.rewrites:
        now = read_or_none(r.path)
        if (None if now is None else sha256_hex(now)) != r.old_sha256:
            raise RepairError("the file changed since it was planned; run again", path=r.path)
    for m in plan.moves:
        if not os.path.exists(m.path):
            raise RepairError("the file is gone since it was planned; run again", path=m.path)
    if not (plan.cuts or plan.rewrites or plan.moves):
        gone = _unlink_all(plan.leftovers)  # temps of a run that never committed: the old state is intact
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
    if again.needs_changes:
        raise RepairError("re-verification failed: a second plan still finds changes", path=directory)
    written = tuple(c.log_path for c in plan.cuts) + tuple(r.path for r in plan.rewrites)
    return TruncateReport(plan, written, tuple(m.path for m in plan.moves), tuple(removed_leftovers), backup.root,
                          False, True, "exchange" if why is None else f"journal ({why})")


def _apply_by_journal(plan: TruncatePlan, backup: TruncateBackup, removed_leftovers: list[str]) -> None:
    """The fallback when the exchange cannot be used: temp files beside the old ones, a journal
    (the commit point), then the renames and moves (module doc)."""
    directory = plan.partition_dir
    removed_leftovers += _unlink_all(plan.leftovers)  # temps of a run that never committed: the old state is intact
    # 1. the backup: removed ranges, whole originals of rewritten files, the moves to come
    move_dests = _backup_everything(plan, backup)
    # 2. the new files beside the old ones
    temps = []
    for c in plan.cuts:
        temps.append((_write_temp(c.log_path, ranges=c.kept, source=c.log_path), c.log_path))
    for r in plan.rewrites:
        temps.append((_write_temp(r.path, r.data), r.path))
    # 3. the commit point
    record = {
        "tool": "kafkatool truncate",
        "backup_dir": backup.root,
        "replace": [
            {"temp": os.path.basename(t), "target": os.path.basename(p), "size": os.path.getsize(t),
             "sha256": sha256_hex(read_or_none(t) or b"") if os.path.getsize(t) < (64 << 20) else None}
            for t, p in temps
        ],
        "move": [{"source": os.path.basename(s), "dest": d} for s, d in move_dests],
    }
    journal = os.path.join(directory, TRUNCATE_JOURNAL)
    with open(journal + TEMP_SUFFIX, "w", encoding="utf-8") as f:
        f.write(json.dumps(record, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(journal + TEMP_SUFFIX, journal)
    fsync_dir(directory)
    fault_point("after journal")
    # 4. renames and moves, then the journal goes
    _roll_forward(journal)


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
        if read_or_none(r.path) != r.data:
            raise RepairError("re-verification failed: the file on disk is not what was written", path=r.path)
    for m in plan.moves:
        if os.path.exists(m.path):
            raise RepairError("re-verification failed: a file to move is still there", path=m.path)


def apply_truncate_all(
    plans: Sequence[TruncatePlan],
    backup_dir: Callable[[str], str] | str,
    *,
    force: bool = False,
    allow_transitional: bool = False,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    on_partition: Callable[[TruncateReport], None] | None = None,
) -> list[TruncateReport]:
    """Apply several truncate plans (see :func:`kafkatool.repair.apply_locked`)."""
    return apply_locked(
        plans,
        backup_dir,
        lambda ps, backup: [apply_truncate(p, backup, index_interval_bytes=index_interval_bytes) for p in ps],
        lambda root: TruncateBackup(root, tool="kafkatool truncate"),
        force=force,
        allow_transitional=allow_transitional,
        on_report=on_partition,
    )
