"""``reindex`` planning and apply: rebuild a segment's ``.index``, ``.timeindex`` and ``.txnindex``
(spec §8.3, §9, §12.2).

Plan, then apply (STYLE.md). :func:`plan_reindex` only reads: it walks a segment the way the
broker's recovery does (:func:`kafkatool.repair.walk_as_recovery`), rebuilds its indexes with
:class:`~kafkatool.segment.index.IndexBuilder`, and compares them with the files on disk.
:func:`apply_reindex_partition` writes what the plans of one partition dir say through the
safety layer (:mod:`kafkatool.safety`): one whole-dir exchange, else the journal.

No click and no rich here: the CLI renders the plan and the report.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from kafkatool.errors import KafkaToolError
from kafkatool.record.control import ControlType, decode_control_key
from kafkatool.record.layout import CONTROL_BIT, TRANSACTIONAL_BIT
from kafkatool.record.records import first_batch_record
from kafkatool.repair import describe_stop, walk_as_recovery
from kafkatool.safety import (
    JOURNAL_SUFFIX,
    Backup,
    ExchangeUnavailable,
    PartitionRefused,
    RepairError,
    apply_locked,
    exchange_partition,
    exchange_unavailable,
    fault_point,
    find_pending_state,
    fsync_dir,
    journal_backup_dir,
    naming,
    read_or_none,
    remove_staging_dirs,
    replace_files,
    sha256_hex,
    unlink_all,
)
from kafkatool.safety.exchange import STAGE_CHUNK
from kafkatool.segment import files as names
from kafkatool.segment.index import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    OFFSET_ENTRY,
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY,
    TIME_ENTRY_SIZE,
    IndexBuilder,
)
from kafkatool.segment.snapshot import read_producer_snapshot
from kafkatool.segment.txnindex import TXN_ENTRY, TXN_ENTRY_SIZE, AbortedTxn, encode_txn_index
from kafkatool.segment.walk import SegmentWalker, WalkStop

__all__ = [
    "FileChange",
    "ReindexPlan",
    "ReindexReport",
    "plan_reindex",
    "plan_reindex_all",
    "refused_plan",
    "index_findings",
    "apply_reindex",
    "apply_reindex_partition",
    "apply_all",
    "COVERAGE_SLACK",
]


@dataclass(frozen=True, slots=True)
class FileChange:
    """What reindex does to one index file."""

    path: str
    kind: str
    """``index``, ``timeindex`` or ``txnindex``."""
    action: str
    """``unchanged`` (the file is the rebuild, byte for byte), ``keep`` (it differs from the rebuild
    but passes verify's index checks: left as it is unless ``--all``), ``rewrite`` or ``create``."""
    old_size: int | None
    new_size: int
    old_entries: int | None
    new_entries: int
    data: bytes = field(repr=False)
    old_sha256: str | None = None
    why: str | None = None
    """Why a ``rewrite``/``create`` is needed: ``missing``, the first of verify's findings on the
    file (``kind: message``), that the index does not cover the log, or ``--all``."""

    @property
    def writes(self) -> bool:
        return self.action in ("rewrite", "create")


@dataclass(frozen=True, slots=True)
class ReindexPlan:
    """The result of :func:`plan_reindex` for one segment. Pure data; nothing is written."""

    log_path: str
    base_offset: int
    index_interval_bytes: int
    log_size: int
    valid_bytes: int
    """Bytes covered by valid batches from byte 0: what the rebuilt indexes describe."""
    batches: int
    first_offset: int | None
    last_offset: int | None
    changes: tuple[FileChange, ...]
    bad_tail: str | None = None
    """Why the walk stopped before the end (a bad batch, a partial tail), or None."""
    txnindex: str | None = None
    """Path of the segment's ``.txnindex`` when there is one (left unchanged)."""
    leftovers: tuple[str, ...] = ()
    """Temp files and journals of an interrupted earlier reindex (or a truncate that never
    committed), removed by apply."""
    interrupted_backup: str | None = None
    """The backup dir an interrupted earlier run recorded in its journal."""
    txn_unavailable: str | None = None
    """Why the ``.txnindex`` cannot be rebuilt (the producer state at the base is unknown), or None."""
    staging_leftovers: tuple[str, ...] = ()
    """The staging dir an interrupted run left beside the partition dir (removed by apply)."""
    refused: str | None = None
    """Why nothing of this segment may be written (the run's exit status is then 1): a rebuild
    covering less than the index it would replace, another command's pending journal, a file
    that cannot be read or is not a regular file. Its ``changes`` say what a rebuild would do."""
    refused_kind: str | None = None
    """``bad_batch``, ``pending_truncate``, ``unreadable``, ``not_regular`` or ``changed``, with :attr:`refused`."""
    rebuild_all: bool = False
    """Planned with ``--all``: every index that differs from the rebuild is rewritten."""

    @property
    def partition_dir(self) -> str:
        return os.path.dirname(self.log_path)

    @property
    def needs_changes(self) -> bool:
        if self.refused is not None:
            return False
        return bool(self.leftovers or self.staging_leftovers) or any(c.writes for c in self.changes)

    @property
    def bad_tail_bytes(self) -> int:
        return self.log_size - self.valid_bytes


def refused_plan(log_path: str, kind: str, reason: str, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                 **fields) -> ReindexPlan:
    """A plan that writes nothing for ``log_path``, saying why (:attr:`ReindexPlan.refused`)."""
    try:
        base = names.parse_base_offset(log_path)
    except KafkaToolError:
        base = -1
    try:
        size = os.stat(log_path).st_size
    except OSError:
        size = 0
    return ReindexPlan(os.path.abspath(log_path), base, index_interval_bytes, size, 0, 0, None, None, (),
                       refused=reason, refused_kind=kind, **fields)


COVERAGE_SLACK = 1 << 20
"""How much further than a broker's ``.index`` a rebuilt one may reach before the broker's is
said not to cover the log: ``replica.fetch.max.bytes``' default (1 MiB). A broker indexes once
per append when more than ``index.interval.bytes`` have passed (§8.3), and a follower appends up
to that much at a time, so its last entry can lie up to about an interval and one append before
the last batch; a rebuild (one check per batch) lies at most an interval and one batch before it."""

_FINDING_PREFIXES = (("txnindex", "txnindex_"), ("timeindex", "timeindex_"), ("index", "index_"))


def index_findings(log_path: str, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES) -> dict[str, list[tuple[str, str]]]:
    """verify's verdict on a segment's index files: ``{"index"|"timeindex"|"txnindex": [(kind,
    message), ...]}`` for every finding of ``kafkatool verify`` on them that fails a run (its
    ``INFO_KINDS`` left out: a preallocated tail, a record offset of a broker <= 3.7, a missing
    ``.index``). reindex rewrites, by default, the files listed here, so the two commands agree.
    """
    from kafkatool.verify import INFO_KINDS, Finding, VerifyOptions, verify_paths

    targets = [log_path] + [str(names.sibling(log_path, s)) for s in (".index", ".timeindex", ".txnindex")
                            if os.path.lexists(names.sibling(log_path, s))]
    out: dict[str, list[tuple[str, str]]] = {}
    for f in verify_paths(targets, VerifyOptions(index_interval_bytes=index_interval_bytes)):
        if not isinstance(f, Finding) or f.kind in INFO_KINDS:
            continue
        for kind, prefix in _FINDING_PREFIXES:
            if f.kind.startswith(prefix):
                out.setdefault(kind, []).append((f.kind, f.message))
                break
    return out


class _NotRegular(RepairError):
    """An index file that is a symbolic link, a FIFO, a directory...: never read through, never replaced."""


def _read_side(path: str) -> bytes | None:
    """An index file's bytes (None when there is none), read without following a symbolic link
    and without blocking on a FIFO."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise _NotRegular(f"{what}: reindex reads and replaces regular files only", path=path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        chunks = []
        while True:
            piece = os.read(fd, STAGE_CHUNK)
            if not piece:
                break
            chunks.append(piece)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _offset_reach(data: bytes, log_size: int) -> int:
    """The furthest position inside the log an offset index points at (-1 when none does)."""
    usable = len(data) - len(data) % OFFSET_ENTRY_SIZE
    return max((p for _r, p in OFFSET_ENTRY.iter_unpack(data[:usable]) if 0 <= p < log_size), default=-1)


def _reaches_past(change: FileChange, old: bytes, base: int, valid_bytes: int, log_size: int, last: int | None) -> bool:
    """Whether the file ``change`` would replace describes more of the log than the rebuild:
    batches at or after the first bad one (byte ``valid_bytes``; ``last`` is the last valid offset)."""
    limit = base - 1 if last is None else last
    if change.kind == "index":
        return _offset_reach(old, log_size) >= valid_bytes
    if change.kind == "timeindex":
        usable = len(old) - len(old) % TIME_ENTRY_SIZE
        return any(base + rel > limit for _ts, rel in TIME_ENTRY.iter_unpack(old[:usable]))
    usable = len(old) - len(old) % TXN_ENTRY_SIZE
    return any(last_offset > limit for _v, _pid, _first, last_offset, _lso in TXN_ENTRY.iter_unpack(old[:usable]))


def plan_reindex(
    segment_log_path: str,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    *,
    rebuild_all: bool = False,
    pending: Sequence[tuple[str, str]] | None = None,
) -> ReindexPlan:
    """Plan the rebuild of one segment's ``.index``, ``.timeindex`` and ``.txnindex`` (§8.3, §9, §12.2). Reads only.

    The walk stops where recovery would: at the first entry failing the §3 walk, a CRC
    (``ensureValid``), or an offset the index cannot take. The rebuilt indexes then describe
    only the valid bytes before it, as the broker's would; :attr:`ReindexPlan.bad_tail` says why.

    Which files are rewritten: a missing ``.index`` or ``.timeindex`` is created; a file that
    differs from the rebuild is rewritten when ``kafkatool verify`` finds it wrong
    (:func:`index_findings`) or, for the ``.index``, when it does not cover the log (its last
    entry more than ``index.interval.bytes`` + :data:`COVERAGE_SLACK` before the rebuild's),
    else kept (a live broker indexes per append, the rebuild per batch: the spacing differs,
    the files are both right). ``rebuild_all`` rewrites every file that differs.

    The plan is refused (:attr:`ReindexPlan.refused`), whatever the mode, when a file to be
    rewritten describes batches after a bad batch the rebuild stops at (a rebuild never covers
    less of the log than the file it replaces: ``kafkatool truncate`` first), when another
    command's journal is pending in the partition dir (``pending``: :func:`find_pending_state`,
    computed when None), or when an index file is not a regular file.
    """
    log_path = os.path.abspath(segment_log_path)
    directory = os.path.dirname(log_path)
    if pending is None:
        pending = find_pending_state(directory)
    for p, what in pending:
        if what.startswith("truncate journal"):
            temps = sum(1 for _q, w in pending if w.startswith("pending temp file"))
            return refused_plan(
                log_path, "pending_truncate",
                f"an interrupted truncate is pending in this partition dir (its journal {os.path.basename(p)}"
                f"{f' and {temps} temp files it names' if temps else ''}); reindex never removes another "
                f"command's pending state: run `kafkatool truncate --execute {directory}` to finish the "
                "interrupted truncate, then reindex", index_interval_bytes, rebuild_all=rebuild_all)
    base = names.parse_base_offset(log_path)
    sides = [("index", ".index", OFFSET_ENTRY_SIZE), ("timeindex", ".timeindex", TIME_ENTRY_SIZE),
             ("txnindex", ".txnindex", TXN_ENTRY_SIZE)]
    olds: dict[str, bytes | None] = {}
    try:
        for kind, suffix, _size in sides:
            olds[kind] = _read_side(str(names.sibling(log_path, suffix)))
    except _NotRegular as e:
        return refused_plan(log_path, "not_regular", e.message, index_interval_bytes, rebuild_all=rebuild_all)
    builder = IndexBuilder(base, index_interval_bytes=index_interval_bytes, path=str(names.sibling(log_path, ".index")))
    ongoing, txn_unavailable = _producer_state_at(log_path, base)
    aborted: list[AbortedTxn] = []

    def track(batch, data) -> None:
        if batch.attributes & TRANSACTIONAL_BIT:
            _track_transactions(batch, data, ongoing, aborted)

    # transactional batches stay in Python while their transactions are tracked
    walker, batches, first, last, bad = walk_as_recovery(
        log_path, builder, take_transactional=ongoing is None, on_batch=None if ongoing is None else track
    )
    log_size = walker.file_size
    valid = builder.valid_bytes
    stop = describe_stop(walker, None if bad is None else bad[1], valid)
    new = dict(zip(("index", "timeindex"), builder.finish()))
    if ongoing is not None:  # the aborted-transaction index, as recovery rebuilds it from the control batches (§9)
        new["txnindex"] = encode_txn_index(aborted)
    changes: list[FileChange] = []
    verdict: dict[str, list[tuple[str, str]]] | None = None
    for kind, suffix, size in sides:
        if kind not in new:
            continue  # the .txnindex when the producer state at the base is unknown
        data, old = new[kind], olds[kind]
        why = None
        if old == data:
            action = "unchanged"
        elif old is None:
            if kind == "txnindex" and not data:
                continue  # no aborted transaction: Kafka creates no .txnindex either
            action, why = "create", "missing"
        elif rebuild_all:
            action, why = "rewrite", "--all"
        else:
            verdict = index_findings(log_path, index_interval_bytes) if verdict is None else verdict
            found = verdict.get(kind)
            if found:
                action, why = "rewrite", f"{found[0][0]}: {found[0][1]}" + (
                    f" (and {len(found) - 1} more findings)" if len(found) > 1 else "")
            else:
                action = "keep"
                if kind == "index":
                    reach_new = _offset_reach(data, log_size)
                    reach_old = _offset_reach(old, log_size)
                    if reach_new - max(reach_old, 0) > index_interval_bytes + COVERAGE_SLACK:
                        action = "rewrite"
                        why = ("index_not_covering: the index does not cover the log: "
                               + (f"its last entry points at byte {reach_old}" if reach_old >= 0 else "it has no entry")
                               + f", the rebuilt index's at byte {reach_new} of {log_size}")
        changes.append(FileChange(
            str(names.sibling(log_path, suffix)), kind, action,
            None if old is None else len(old), len(data),
            None if old is None else len(old) // size, len(data) // size,
            data, None if old is None else sha256_hex(old), why,
        ))
    refused = refused_kind = None
    if valid < log_size:
        losing = [c for c in changes if c.action == "rewrite"
                  and _reaches_past(c, olds[c.kind] or b"", base, valid, log_size, last)]
        if losing:
            what = " and ".join(os.path.basename(c.path) for c in losing)
            reason = (stop or "").split(": ", 1)[-1] if stop and stop.startswith(log_path) else (stop or "")
            refused_kind = "bad_batch"
            refused = (f"bad batch at byte {valid} ({reason}): a rebuild stops there, as recovery does, so the "
                       f"rebuilt {what} would cover less of the log than the {'files' if len(losing) > 1 else 'file'} "
                       f"on disk, which {'describe' if len(losing) > 1 else 'describes'} batches after it; "
                       f"run `kafkatool truncate --execute {directory}` first")
    mine = names.segment_file_name(base, ".")  # this segment's leftovers: <20 digits>.<anything>
    leftovers = []
    interrupted_backup = None
    for p, what in pending:
        if not os.path.basename(p).startswith(mine) or not what.startswith(("temp file", "reindex journal")):
            continue  # not this segment's, or another command's pending state (never removed)
        leftovers.append(p)
        if what.startswith("reindex journal") and (recorded := journal_backup_dir(p)) is not None:
            interrupted_backup = recorded
    txn = str(names.sibling(log_path, ".txnindex"))
    return ReindexPlan(
        log_path, base, index_interval_bytes, log_size, valid, batches, first, last,
        tuple(changes), stop, txn if olds["txnindex"] is not None else None, tuple(leftovers), interrupted_backup,
        txn_unavailable, tuple(p for p, what in pending if what.startswith("staging dir")),
        refused, refused_kind, rebuild_all,
    )


def plan_reindex_all(
    segments: Sequence[str],
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    on_plan: Callable[[ReindexPlan], None] | None = None,
    *,
    rebuild_all: bool = False,
) -> list[ReindexPlan]:
    """:func:`plan_reindex` for each segment; a leftover staging dir of a partition is named by
    the first plan of that partition only (one line in the plan, not one per segment). A
    segment that cannot be read gives a refused plan (``unreadable``), and the others go on."""
    plans = []
    pending_of: dict[str, list[tuple[str, str]]] = {}
    for s in segments:
        d = os.path.dirname(os.path.abspath(s))
        if d not in pending_of:
            pending_of[d] = find_pending_state(d)
            first = True
        else:
            first = False
        try:
            plan = plan_reindex(s, index_interval_bytes, rebuild_all=rebuild_all, pending=pending_of[d])
        except OSError as e:
            plan = refused_plan(s, "unreadable", f"cannot read {e.filename or s}: {e.strerror or e}",
                                index_interval_bytes, rebuild_all=rebuild_all)
        except KafkaToolError as e:
            plan = refused_plan(s, "unreadable", str(e), index_interval_bytes, rebuild_all=rebuild_all)
        if not first and plan.staging_leftovers:
            plan = replace(plan, staging_leftovers=())
        plans.append(plan)
        if on_plan is not None:
            on_plan(plan)
    return plans


def _producer_state_at(log_path: str, base: int) -> tuple[dict[int, int] | None, str | None]:
    """The open transactions (producer id -> first offset) at the segment's base, or
    ``(None, why)`` when they cannot be known (§9: a segment's txn index cannot be rebuilt
    from that segment alone).

    Like the broker's load (§12.4): the segment's own ``<base>.snapshot``, else a replay of
    the earlier segments from the latest snapshot at or below one of their bases (or from the
    partition's first segment, which starts with no open transaction).
    """
    directory = os.path.dirname(log_path)
    snapshot = os.path.join(directory, names.segment_file_name(base, ".snapshot"))
    if os.path.exists(snapshot):
        return _open_txns(snapshot)
    earlier = sorted(
        (names.parse_base_offset(n), os.path.join(directory, n))
        for n in os.listdir(directory)
        # 20-digit segment names only: a stray name that is not an offset is reported by scan_targets
        if names.classify(n) is names.FileKind.LOG and names.parse_base_offset(n) < base
    )
    if not earlier:
        return {}, None  # the log starts here: no transaction can be open yet
    start = 0
    state: dict[int, int] = {}
    for i in range(len(earlier) - 1, -1, -1):
        snap_path = os.path.join(directory, names.segment_file_name(earlier[i][0], ".snapshot"))
        if os.path.exists(snap_path):
            state, why = _open_txns(snap_path)
            if state is None:
                return None, why
            start = i
            break
    for _b, path in earlier[start:]:
        with SegmentWalker(path) as walker:
            for batch, data in walker:
                if batch.crc != batch.computed_crc:
                    return None, f"{path}:{batch.position}: a bad batch in an earlier segment hides the producer state"
                if batch.attributes & TRANSACTIONAL_BIT:
                    _track_transactions(batch, data, state, None)
            if walker.stop is WalkStop.ERROR:
                return None, f"{path}: an earlier segment cannot be read to its end ({walker.error})"
    return state, None


def _open_txns(snapshot_path: str) -> tuple[dict[int, int] | None, str | None]:
    try:
        snap = read_producer_snapshot(snapshot_path)
    except KafkaToolError as e:
        return None, f"the producer snapshot cannot be read: {e}"
    return {e.producer_id: e.current_txn_first_offset for e in snap.entries if e.current_txn_first_offset >= 0}, None


def _track_transactions(batch, data, ongoing: dict[int, int], aborted: list[AbortedTxn] | None) -> None:
    """Update the open transactions with one transactional batch; record ABORTs (§9)."""
    pid = batch.producer_id
    if pid < 0:
        return
    if not batch.attributes & CONTROL_BIT:
        ongoing.setdefault(pid, batch.offset)
        return
    if data is None:
        return
    try:
        first = first_batch_record(batch, data)
        kind = decode_control_key(first.key)[1] if first is not None else None
    except KafkaToolError:
        return  # a malformed marker: recovery would stop here; the walk's CRC check already passed
    if kind == ControlType.ABORT:
        began = ongoing.pop(pid, None)
        if began is not None and aborted is not None:
            marker = first.offset
            others = [o for p, o in ongoing.items() if p != pid]
            # lastStableOffset: the earliest still-open transaction of another producer, else marker + 1
            aborted.append(AbortedTxn(0, pid, began, marker, min(others) if others else marker + 1))
    elif kind == ControlType.COMMIT:
        ongoing.pop(pid, None)


# ----------------------------------------------------------------------------- reindex: apply


@dataclass(frozen=True, slots=True)
class ReindexReport:
    """What :func:`apply_reindex` did to one segment, after re-verifying it."""

    plan: ReindexPlan
    written: tuple[str, ...]
    removed_leftovers: tuple[str, ...]
    backup_dir: str | None
    verified: bool
    method: str | None = None
    """How the files were switched: ``exchange``, ``journal (<why no exchange>)``, or None (nothing written)."""


def apply_reindex(plan: ReindexPlan, backup: Backup | str) -> ReindexReport:
    """Apply one segment's plan (see :func:`apply_reindex_partition`)."""
    return apply_reindex_partition([plan], backup)[0]


def _check_reindex_plan(plan: ReindexPlan) -> None:
    """The plan was made before the lock was taken: make sure nothing moved since."""
    if os.path.getsize(plan.log_path) != plan.log_size:
        raise PartitionRefused("the segment changed since it was planned (a broker appended?); run again",
                               path=plan.log_path)
    for c in plan.changes:
        if not c.writes:
            continue
        try:
            now = _read_side(c.path)
        except _NotRegular as e:
            raise PartitionRefused(e.message, path=c.path) from None
        if (None if now is None else sha256_hex(now)) != c.old_sha256:
            raise PartitionRefused("the file changed since it was planned; run again", path=c.path)


def _refuse_pending(directory: str) -> list[tuple[str, str]]:
    """The partition's pending state, read again under the lock; raises :class:`PartitionRefused`
    when another command's journal is pending (it may have appeared since the plan)."""
    pending = find_pending_state(directory)
    for p, what in pending:
        if what.startswith("truncate journal"):
            raise PartitionRefused(
                f"an interrupted truncate is pending in this partition dir ({os.path.basename(p)}); reindex never "
                f"removes another command's pending state: run `kafkatool truncate --execute {directory}` to finish "
                "the interrupted truncate, then reindex", path=directory, kind="pending_truncate")
    return pending


def apply_reindex_partition(plans: Sequence[ReindexPlan], backup: Backup | str) -> list[ReindexReport]:
    """Apply the plans of the segments of one partition dir crash-safely, then re-read what was written.

    One :func:`exchange_partition` switches every rebuilt file of the partition at once (the
    journaled :func:`replace_files` when the exchange cannot be used; the report says which).
    The caller holds the :class:`LogDirLock`. Raises :class:`PartitionRefused`, before anything
    is written, when a segment or a file changed since it was planned or another command's
    journal is pending; :class:`RepairError` when the files on disk differ from the plans
    afterwards, or when a segment changed while they were written (then a second plan could
    differ). The files are derived from the ``.log`` only, so equal files and an unchanged
    ``.log`` (the same inode, size and mtime) mean a second run is a no-op, without walking
    the segment again.
    """
    if isinstance(backup, str):
        backup = Backup(backup)
    plans = [p for p in plans if p.refused is None]
    if not plans:
        return []
    directory = plans[0].partition_dir
    if any(p.partition_dir != directory for p in plans):
        raise RepairError("apply_reindex_partition needs plans of a single partition dir", path=directory)
    pending = _refuse_pending(directory)
    for plan in plans:
        _check_reindex_plan(plan)
    intervals = sorted({p.index_interval_bytes for p in plans})
    reason = f"reindex (index.interval.bytes={', '.join(map(str, intervals))})"
    todo = [(c.path, c.data) for plan in plans for c in plan.changes if c.writes]
    logs_before = {plan.log_path: os.stat(plan.log_path) for plan in plans}
    # leftovers as they are now (under the lock), and only those the plans named: never a
    # temp file another command's journal names
    now_removable = {p for p, what in pending if what.startswith(("temp file", "reindex journal"))}
    planned = [p for plan in plans for p in plan.leftovers if p in now_removable]
    temps = [p for p in planned if not p.endswith(JOURNAL_SUFFIX)]
    journals = [p for p in planned if p.endswith(JOURNAL_SUFFIX)]
    # a staging dir of an interrupted run first: the exchange needs its name
    removed = remove_staging_dirs(dict.fromkeys(s for plan in plans for s in plan.staging_leftovers))
    method = None

    def save_originals() -> None:
        with backup.batch():  # one manifest write for the partition, before the switch
            for path, data in todo:
                with naming(backup.root, f"while copying {path} into the backup"):
                    backup.save(path, data, reason)
                fault_point("after backup")

    like = {os.path.basename(c.path): os.path.basename(plan.log_path) for plan in plans for c in plan.changes}
    if todo:
        why = exchange_unavailable(directory)
        if why is None:
            try:
                exchange_partition(
                    directory,
                    write={os.path.basename(p): d for p, d in todo},
                    drop=[os.path.basename(p) for p in temps + journals],
                    like=like,
                    before_switch=save_originals,
                )
                method = "exchange"
                removed += temps + journals  # absent from the new partition dir
            except ExchangeUnavailable as e:
                why = e.message
        if why is not None:
            method = f"journal ({why})"
    if method != "exchange":
        # Leftovers first: a stale temp file must never be renamed; the bytes are re-derived instead.
        removed += unlink_all(temps)
        for plan in plans:
            mine = [(c.path, c.data) for c in plan.changes if c.writes]
            if mine:
                replace_files(mine, backup, reason=reason,
                              journal_prefix=names.segment_file_name(plan.base_offset, ""),
                              like={c.path: plan.log_path for c in plan.changes})
        removed += unlink_all(journals)  # only once every file is new: the journal marks an unfinished repair
        if temps or journals:
            fsync_dir(directory)
    reports = []
    told: set[str] = set()
    for plan in plans:
        for c in plan.changes:
            if not c.writes and c.action != "unchanged":
                continue  # kept as it is: not ours to check
            on_disk = read_or_none(c.path)
            if on_disk != c.data:
                raise RepairError(
                    "re-verification failed: the file on disk is not what was written",
                    path=c.path,
                    expected=f"{c.new_size} bytes sha256 {sha256_hex(c.data)[:16]}",
                    found="missing" if on_disk is None else f"{len(on_disk)} bytes sha256 {sha256_hex(on_disk)[:16]}",
                )
        before, after = logs_before[plan.log_path], os.stat(plan.log_path)
        if (after.st_ino, after.st_size, after.st_mtime_ns) != (before.st_ino, before.st_size, before.st_mtime_ns):
            raise RepairError("re-verification failed: the segment changed while its indexes were written",
                              path=plan.log_path)
        mine = tuple(c.path for c in plan.changes if c.writes)
        # a staging dir is the partition's: reported once, with the first segment that saw it
        gone = tuple(p for p in removed if p in plan.leftovers or (p in plan.staging_leftovers and p not in told))
        told.update(gone)
        reports.append(ReindexReport(plan, mine, gone, backup.root if mine else None, True,
                                     method if mine else None))
    return reports


def apply_all(plans: Sequence[ReindexPlan], backup_dir: Callable[[str], str] | str, **options) -> list[ReindexReport]:
    """Apply several reindex plans through the shared driver (:func:`~kafkatool.safety.apply_locked`:
    ``force``, ``allow_transitional``, ``on_report``, ``on_start``, ``on_refused``)."""
    return apply_locked(plans, backup_dir, apply_reindex_partition, Backup, **options)
