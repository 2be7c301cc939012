"""Repairs that write: the shared write-safety layer, and ``reindex`` planning (spec §8.3, §11.5, §12).

Plan, then apply (STYLE.md). :func:`plan_reindex` only reads: it walks a segment the
way the broker's recovery does, rebuilds its ``.index``/``.timeindex`` with
:class:`~kafkatool.segment.index.IndexBuilder`, and compares them with the files on
disk. :func:`apply_reindex` writes what the plan says through the safety layer:

* :class:`LogDirLock` refuses to touch a log dir a live broker holds (§11.5: a POSIX
  ``fcntl`` lock on ``<logdir>/.lock``, held for the whole repair);
* :class:`Backup` copies every file before it is replaced into a backup directory, with a
  ``MANIFEST.json`` (original path, size, sha256, what replaced it) and a ``RESTORE.txt``;
* :func:`replace_files` writes ``<name>.kafkatool-tmp`` beside each target, fsyncs it,
  records a journal (the commit point), renames every temp file into place and fsyncs the
  directory. A crash leaves every file under its real name either complete-old or
  complete-new; a crash after the commit point can leave one file new and its sibling
  old (POSIX has no multi-file rename), which the journal records and the next run
  completes (the rebuilt bytes are a function of the ``.log``, so rolling forward is
  re-deriving them). Kafka's loader ignores both the ``.kafkatool-tmp`` and the
  ``.kafkatool-journal`` names (§12.3 only acts on ``.deleted``/``.cleaned``/``.swap``);
  the next run deletes leftovers.

No click and no rich here: the CLI renders the plan and the report.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shlex
import signal
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from kafkatool.errors import KafkaToolError
from kafkatool.segment import files as names
from kafkatool.segment.index import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY_SIZE,
    IndexAppendError,
    IndexBuilder,
)
from kafkatool.record.control import ControlType, decode_control_key
from kafkatool.record.records import decode_batch_records
from kafkatool.segment.snapshot import read_producer_snapshot
from kafkatool.segment.txnindex import TXN_ENTRY_SIZE, AbortedTxn, encode_txn_index
from kafkatool.segment.walk import SegmentWalker, WalkStop

__all__ = [
    "RepairError",
    "LiveBrokerError",
    "TransitionalDirError",
    "LogDirLock",
    "Backup",
    "replace_files",
    "write_atomically",
    "FileChange",
    "ReindexPlan",
    "ReindexReport",
    "plan_reindex",
    "apply_reindex",
    "find_segments",
    "check_partition_dir",
    "default_backup_dir",
    "log_dir_of",
    "TEMP_SUFFIX",
    "JOURNAL_SUFFIX",
    "FAULT_ENV",
]

TEMP_SUFFIX = ".kafkatool-tmp"
"""Suffix of a new file being written beside its target; Kafka's loader ignores it (§12.3)."""
JOURNAL_SUFFIX = ".kafkatool-journal"
"""``<segment prefix>.kafkatool-journal``: present between the commit point and the last rename."""
FAULT_ENV = "KAFKATOOL_FAULT_AT"
"""Test hook: ``KAFKATOOL_FAULT_AT=n`` makes the n-th write step SIGKILL the process."""


class RepairError(KafkaToolError):
    """A repair refused to run, or found its own output wrong."""


class LiveBrokerError(RepairError):
    """A live Kafka holds the log dir's ``.lock`` (§11.5)."""


class TransitionalDirError(RepairError):
    """A ``-delete``/``-future``/``-stray`` partition dir (§2.1) the user did not ask to repair."""


# ----------------------------------------------------------------------------- fault injection

_fault_count = 0


def _fault_point(label: str) -> None:
    """Count a step of an apply; die by SIGKILL at step ``$KAFKATOOL_FAULT_AT`` (crash-safety tests)."""
    global _fault_count
    target = os.environ.get(FAULT_ENV)
    if not target:
        return
    _fault_count += 1
    if _fault_count == int(target):
        os.kill(os.getpid(), signal.SIGKILL)


# ----------------------------------------------------------------------------- small file helpers


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_or_none(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _write_durably(path: str, data: bytes, *, exclusive: bool = False) -> None:
    """Write ``data`` to ``path`` and fsync it (not the directory)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def log_dir_of(partition_dir: str) -> str:
    """The log dir holding a partition dir: its parent (§2.1)."""
    return os.path.dirname(os.path.abspath(partition_dir))


# ----------------------------------------------------------------------------- the lock (§11.5)


class LogDirLock:
    """Hold ``<log_dir>/.lock`` with a POSIX record lock for the whole repair (§11.5).

    The broker locks that file with ``FileChannel.tryLock``, which on Linux is
    ``fcntl(F_SETLK)``; ``flock(2)`` would not see it. The file is opened once, O_RDWR
    without O_CREAT: Python drops every POSIX lock of a file as soon as *any* descriptor of
    it in the process is closed. A missing ``.lock`` means no broker holds the dir; it is
    then created and locked so that a broker starting meanwhile fails to lock it. With
    ``force=True`` nothing is checked (for a copy the operator knows is offline).
    """

    def __init__(self, log_dir: str, *, force: bool = False) -> None:
        self.log_dir = os.path.abspath(log_dir)
        self.path = os.path.join(self.log_dir, names.LOCK)
        self.force = force
        self._fd: int | None = None
        self.created = False

    def acquire(self) -> None:
        if self.force or self._fd is not None:
            return
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                self.created = True
            except FileExistsError:  # a broker created it just now: test it like any other
                fd = os.open(self.path, os.O_RDWR)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES):
                raise LiveBrokerError(
                    "a live Kafka broker (or another process) holds the lock on this log dir; "
                    "stop the broker first, or use --force only on a copy you know is offline",
                    path=self.path,
                ) from None
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor drops the lock

    def __enter__(self) -> "LogDirLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# ----------------------------------------------------------------------------- backups


def default_backup_dir(log_dir: str, now: float | None = None) -> str:
    """``<parent of log dir>/kafkatool-backup-<log dir name>-<UTC timestamp>``.

    Beside the log dir, not inside it: the broker takes every directory in a log dir for a
    partition and refuses a name that is not ``topic-partition`` (as with ``lost+found``).
    """
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{int((now % 1) * 1e6):06d}Z"
    log_dir = os.path.abspath(log_dir)
    return os.path.join(os.path.dirname(log_dir), f"kafkatool-backup-{os.path.basename(log_dir)}-{stamp}")


@dataclass
class BackupEntry:
    original_path: str
    action: str
    """``rewritten`` (the original is in the backup), ``created`` (there was none) or ``removed``."""
    backup_file: str | None
    size: int | None
    sha256: str | None
    new_size: int | None = None
    new_sha256: str | None = None
    reason: str = ""


class Backup:
    """A backup directory: originals under ``<partition dir name>/<file name>``, a
    ``MANIFEST.json`` and a ``RESTORE.txt``, both rewritten (fsynced) after every file."""

    def __init__(self, root: str, tool: str = "kafkatool") -> None:
        self.root = os.path.abspath(root)
        self.tool = tool
        self.entries: list[BackupEntry] = []

    def _ensure(self, sub: str) -> str:
        d = os.path.join(self.root, sub) if sub else self.root
        if not os.path.isdir(d):
            os.makedirs(d, exist_ok=True)
            for x in {d, self.root, os.path.dirname(self.root)}:
                _fsync_dir(x)
        return d

    def save(self, path: str, new_data: bytes | None, reason: str = "") -> BackupEntry:
        """Copy ``path`` (if it exists) into the backup, fsynced, before anything replaces it."""
        path = os.path.abspath(path)
        old = _read_or_none(path)
        new_meta = (None, None) if new_data is None else (len(new_data), _sha256(new_data))
        if old is None:
            entry = BackupEntry(path, "created", None, None, None, *new_meta, reason=reason)
        else:
            sub = os.path.basename(os.path.dirname(path))
            d = self._ensure(sub)
            target = os.path.join(d, os.path.basename(path))
            n = 0
            while os.path.exists(target):  # never overwrite an earlier original
                n += 1
                target = os.path.join(d, f"{os.path.basename(path)}.{n}")
            _write_durably(target, old, exclusive=True)
            _fsync_dir(d)
            action = "removed" if new_data is None else "rewritten"
            entry = BackupEntry(
                path, action, os.path.relpath(target, self.root), len(old), _sha256(old), *new_meta, reason=reason
            )
        self.entries.append(entry)
        self._write_index()
        return entry

    def _write_index(self) -> None:
        self._ensure("")
        manifest = {
            "tool": self.tool,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "files": [e.__dict__ for e in self.entries],
        }
        for name, text in (("MANIFEST.json", json.dumps(manifest, indent=2) + "\n"), ("RESTORE.txt", self.restore_text())):
            tmp = os.path.join(self.root, name + TEMP_SUFFIX)
            _write_durably(tmp, text.encode())
            os.replace(tmp, os.path.join(self.root, name))
        _fsync_dir(self.root)

    def restore_text(self) -> str:
        lines = [
            "# How to put back the files kafkatool replaced (stop the broker first).",
            "# Each original is copied back over the rebuilt file; files kafkatool created are removed.",
            "# MANIFEST.json lists the size and sha256 of every original; check with `sha256sum -c` style tools.",
            "",
        ]
        for e in self.entries:
            if e.backup_file is not None:
                lines.append(f"cp -p {shlex.quote(os.path.join(self.root, e.backup_file))} {shlex.quote(e.original_path)}")
            else:
                lines.append(f"rm -f {shlex.quote(e.original_path)}")
        return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- atomic replace


def _journal_path(directory: str, prefix: str) -> str:
    return os.path.join(directory, prefix + JOURNAL_SUFFIX)


def replace_files(
    items: Sequence[tuple[str, bytes]], backup: Backup, *, reason: str = "", journal_prefix: str | None = None
) -> None:
    """Replace every ``(path, data)`` (all in one directory) crash-safely; see the module doc.

    Steps, each a fault point: back up each old file (fsynced); write and fsync each
    ``<path>.kafkatool-tmp``; write the journal (commit point); ``os.replace`` each into
    place; fsync the directory; remove the journal.
    """
    if not items:
        return
    directory = os.path.dirname(os.path.abspath(items[0][0]))
    if any(os.path.dirname(os.path.abspath(p)) != directory for p, _ in items):
        raise RepairError("replace_files needs files of a single directory", path=directory)
    prefix = journal_prefix or os.path.basename(items[0][0]).split(".", 1)[0]
    for path, data in items:
        backup.save(path, data, reason)
        _fault_point("after backup")
    temps = []
    for path, data in items:
        tmp = os.path.abspath(path) + TEMP_SUFFIX
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        fd = os.open(tmp, flags, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            _fault_point("after temp write")
            os.fsync(fd)
        finally:
            os.close(fd)
        _fault_point("after temp fsync")
        temps.append((tmp, os.path.abspath(path), data))
    journal = _journal_path(directory, prefix)
    record = {
        "backup_dir": backup.root,
        "replace": [{"temp": os.path.basename(t), "target": os.path.basename(p), "size": len(d), "sha256": _sha256(d)} for t, p, d in temps],
    }
    _write_durably(journal + TEMP_SUFFIX, (json.dumps(record, indent=2) + "\n").encode())
    os.replace(journal + TEMP_SUFFIX, journal)
    _fsync_dir(directory)  # commit point: the temp files and the journal are durable
    _fault_point("after journal")
    for tmp, path, _data in temps:
        os.replace(tmp, path)
        _fault_point("after rename")
    _fsync_dir(directory)
    _fault_point("after directory fsync")
    os.unlink(journal)
    _fsync_dir(directory)
    _fault_point("after journal removal")


def write_atomically(path: str, data: bytes, backup: Backup | str, *, reason: str = "") -> None:
    """Replace one file crash-safely, keeping the original in ``backup`` (a :class:`Backup` or a directory)."""
    if isinstance(backup, str):
        backup = Backup(backup)
    replace_files([(path, data)], backup, reason=reason, journal_prefix=os.path.basename(path))


# ----------------------------------------------------------------------------- targets


def find_segments(paths: Iterable[str]) -> list[str]:
    """The ``.log`` segments named by ``paths`` (segment or side files, partition dirs, log dirs), in order.

    An ``.index``/``.timeindex``/``.txnindex`` stands for its segment. KRaft ``.checkpoint``
    snapshots have no indexes and are skipped.
    """
    from kafkatool.verify import expand_targets

    out: list[str] = []
    seen: set[str] = set()
    for group in expand_targets(paths):
        for target in group:
            p = target.path
            kind = names.classify(p)
            if kind in (names.FileKind.INDEX, names.FileKind.TIMEINDEX, names.FileKind.TXNINDEX):
                p = str(names.sibling(p, ".log"))
                if not os.path.isfile(p):
                    continue
            elif kind is not names.FileKind.LOG:
                continue
            p = os.path.abspath(p)
            if p not in seen:
                seen.add(p)
                out.append(p)
    return out


def check_partition_dir(partition_dir: str, allow_transitional: bool = False) -> None:
    """Refuse a ``-delete``/``-future``/``-stray`` partition dir unless asked (§2.1, §19)."""
    pd = names.parse_partition_dir(os.path.basename(os.path.abspath(partition_dir)))
    if pd is not None and pd.state is not None and not allow_transitional:
        raise TransitionalDirError(
            f"partition dir is marked '-{pd.state}' (being deleted, moved or stray); "
            "pass --allow-transitional to repair it anyway",
            path=partition_dir,
        )


# ----------------------------------------------------------------------------- reindex: plan


@dataclass(frozen=True, slots=True)
class FileChange:
    """What reindex does to one index file."""

    path: str
    kind: str
    """``index`` or ``timeindex``."""
    action: str
    """``unchanged``, ``rewrite`` or ``create``."""
    old_size: int | None
    new_size: int
    old_entries: int | None
    new_entries: int
    data: bytes = field(repr=False)
    old_sha256: str | None = None


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
    """Temp files and journals of an interrupted earlier run, removed by apply."""
    interrupted_backup: str | None = None
    """The backup dir an interrupted earlier run recorded in its journal."""
    txn_unavailable: str | None = None
    """Why the ``.txnindex`` cannot be rebuilt (the producer state at the base is unknown), or None."""

    @property
    def partition_dir(self) -> str:
        return os.path.dirname(self.log_path)

    @property
    def needs_changes(self) -> bool:
        return bool(self.leftovers) or any(c.action != "unchanged" for c in self.changes)

    @property
    def bad_tail_bytes(self) -> int:
        return self.log_size - self.valid_bytes


def _describe_stop(walker: SegmentWalker, reason: str | None, position: int) -> str | None:
    if reason is not None:
        return reason
    if walker.stop is WalkStop.ERROR and walker.error is not None:
        return str(walker.error)
    if walker.stop is WalkStop.TAIL and walker.end > position:
        return f"{walker.path}:{position}: partial batch or short tail"
    return None


def plan_reindex(
    segment_log_path: str,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
) -> ReindexPlan:
    """Plan the rebuild of one segment's ``.index`` and ``.timeindex`` (§8.3, §12.2). Reads only.

    The walk stops where recovery would: at the first entry failing the §3 walk, a CRC
    (``ensureValid``), or an offset the index cannot take. The indexes then describe only
    the valid bytes before it, as the broker's would; :attr:`ReindexPlan.bad_tail` says why.
    """
    log_path = os.path.abspath(segment_log_path)
    base = names.parse_base_offset(log_path)
    builder = IndexBuilder(base, index_interval_bytes=index_interval_bytes, path=str(names.sibling(log_path, ".index")))
    batches = 0
    first = last = None
    reason: str | None = None
    ongoing, txn_unavailable = _producer_state_at(log_path, base)
    aborted: list[AbortedTxn] = []
    with SegmentWalker(log_path) as walker:
        add_batch = builder.add_batch
        for batch, data in walker:
            # one unpack instead of property calls: this runs once per batch of the segment
            # (a legacy entry's lastOffsetDelta is 0, so offset + delta is its last offset too)
            (position, size, offset, _magic, crc, _attrs, lod, _bts, mts, _pid, _pepoch, _bseq, _count, _ple, computed) = batch
            if crc != computed:
                reason = f"{log_path}:{position}: batch CRC mismatch (expected {crc}, found {computed})"
                break
            try:
                add_batch(position, size, offset + lod, mts)
            except IndexAppendError as e:
                reason = f"{log_path}:{position}: {e.message}"
                break
            batches += 1
            if first is None:
                first = offset
            last = offset + lod
            if _attrs & 0x10 and ongoing is not None:
                _track_transactions(batch, data, ongoing, aborted)
        log_size = walker.file_size
        stop = _describe_stop(walker, reason, builder.valid_bytes)
    new_index, new_time = builder.finish()
    changes = []
    for kind, suffix, data, size in (
        ("index", ".index", new_index, OFFSET_ENTRY_SIZE),
        ("timeindex", ".timeindex", new_time, TIME_ENTRY_SIZE),
    ):
        path = str(names.sibling(log_path, suffix))
        old = _read_or_none(path)
        if old is None:
            action = "create"
        elif old == data:
            action = "unchanged"
        else:
            action = "rewrite"
        changes.append(
            FileChange(
                path, kind, action,
                None if old is None else len(old), len(data),
                None if old is None else len(old) // size, len(data) // size,
                data, None if old is None else _sha256(old),
            )
        )
    txn = str(names.sibling(log_path, ".txnindex"))
    if ongoing is not None:
        # the aborted-transaction index, as recovery rebuilds it from the control batches (§9)
        data = encode_txn_index(aborted)
        old = _read_or_none(txn)
        if old is None:
            action = "create" if data else None
        else:
            action = "unchanged" if old == data else "rewrite"
        if action is not None:
            changes.append(FileChange(
                txn, "txnindex", action, None if old is None else len(old), len(data),
                None if old is None else len(old) // TXN_ENTRY_SIZE, len(data) // TXN_ENTRY_SIZE,
                data, None if old is None else _sha256(old),
            ))
    prefix = os.path.basename(log_path).split(".", 1)[0]
    directory = os.path.dirname(log_path)
    leftovers = []
    interrupted_backup = None
    for n in sorted(os.listdir(directory)):
        if n.split(".", 1)[0] == prefix and (n.endswith(TEMP_SUFFIX) or n.endswith(JOURNAL_SUFFIX)):
            leftovers.append(os.path.join(directory, n))
            if n.endswith(JOURNAL_SUFFIX):
                try:
                    with open(os.path.join(directory, n), encoding="utf-8") as f:
                        interrupted_backup = json.load(f).get("backup_dir")
                except (OSError, ValueError):
                    pass
    return ReindexPlan(
        log_path, base, index_interval_bytes, log_size, builder.valid_bytes, batches, first, last,
        tuple(changes), stop, txn if os.path.exists(txn) else None, tuple(leftovers), interrupted_backup,
        txn_unavailable,
    )


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
        if n.endswith(".log") and n.split(".", 1)[0].isdigit() and names.parse_base_offset(n) < base
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
                if batch.attributes & 0x10:
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
    if not batch.attributes & 0x20:
        ongoing.setdefault(pid, batch.offset)
        return
    if data is None:
        return
    try:
        records = decode_batch_records(batch, data)
        kind = decode_control_key(records[0].key)[1] if records else None
    except KafkaToolError:
        return  # a malformed marker: recovery would stop here; the walk's CRC check already passed
    if kind == ControlType.ABORT:
        began = ongoing.pop(pid, None)
        if began is not None and aborted is not None:
            marker = records[0].offset
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


def apply_reindex(plan: ReindexPlan, backup: Backup | str) -> ReindexReport:
    """Apply ``plan`` crash-safely, then re-read what was written.

    The caller holds the :class:`LogDirLock`. Raises :class:`RepairError` when the files
    on disk differ from the plan afterwards, or when the segment changed while they were
    written (then a second plan could differ). The files are derived from the ``.log`` only,
    so equal files and an unchanged ``.log`` mean a second run is a no-op, without walking
    the segment again.
    """
    if isinstance(backup, str):
        backup = Backup(backup)
    # The plan was made before the lock was taken: make sure nothing moved since.
    if os.path.getsize(plan.log_path) != plan.log_size:
        raise RepairError("the segment changed since it was planned; run again", path=plan.log_path)
    for c in plan.changes:
        now = _read_or_none(c.path)
        if (None if now is None else _sha256(now)) != c.old_sha256 and c.action != "unchanged":
            raise RepairError("the file changed since it was planned; run again", path=c.path)
    todo = [(c.path, c.data) for c in plan.changes if c.action != "unchanged"]
    log_before = os.stat(plan.log_path)
    prefix = os.path.basename(plan.log_path).split(".", 1)[0]
    # Leftovers first: a stale temp file must never be renamed; the bytes are re-derived instead.
    removed = []
    journals = []
    for p in plan.leftovers:
        if p.endswith(JOURNAL_SUFFIX):
            journals.append(p)
            continue
        try:
            os.unlink(p)
            removed.append(p)
        except FileNotFoundError:
            pass
    if todo:
        replace_files(todo, backup, reason=f"reindex (index.interval.bytes={plan.index_interval_bytes})", journal_prefix=prefix)
    for p in journals:  # only once every file is new: the journal marks an unfinished repair
        try:
            os.unlink(p)
            removed.append(p)
        except FileNotFoundError:
            pass
    if removed:
        _fsync_dir(plan.partition_dir)
    for c in plan.changes:
        on_disk = _read_or_none(c.path)
        if on_disk != c.data:
            raise RepairError(
                "re-verification failed: the file on disk is not what was written",
                path=c.path,
                expected=f"{c.new_size} bytes sha256 {_sha256(c.data)[:16]}",
                found="missing" if on_disk is None else f"{len(on_disk)} bytes sha256 {_sha256(on_disk)[:16]}",
            )
    log_after = os.stat(plan.log_path)
    if (log_after.st_size, log_after.st_mtime_ns) != (log_before.st_size, log_before.st_mtime_ns):
        raise RepairError("re-verification failed: the segment changed while its indexes were written", path=plan.log_path)
    return ReindexReport(plan, tuple(p for p, _ in todo), tuple(removed), backup.root if todo else None, True)


def apply_locked(
    plans: Sequence,
    backup_dir: Callable[[str], str] | str,
    apply: Callable,
    new_backup: Callable[[str], object],
    *,
    force: bool = False,
    allow_transitional: bool = False,
    on_report: Callable | None = None,
) -> list:
    """Apply the plans that need changes under one lock per log dir, every lock taken before
    the first write and held until the last (shared by reindex and truncate).

    ``apply(plan, backup)`` applies one plan; ``new_backup(root)`` makes the backup of a
    backup directory; ``backup_dir`` is a directory, or a function of the log dir giving one.
    """
    for p in plans:
        check_partition_dir(p.partition_dir, allow_transitional)
    by_logdir: dict[str, list] = {}
    for p in plans:
        if p.needs_changes:
            by_logdir.setdefault(log_dir_of(p.partition_dir), []).append(p)
    reports = []
    locks = [LogDirLock(d, force=force) for d in by_logdir]
    try:
        for lock in locks:  # every lock before the first write
            lock.acquire()
        backups: dict[str, object] = {}
        for log_dir, group in by_logdir.items():
            root = backup_dir(log_dir) if callable(backup_dir) else backup_dir
            backup = backups.get(root)
            if backup is None:
                backup = backups[root] = new_backup(root)
            for p in group:
                report = apply(p, backup)
                reports.append(report)
                if on_report is not None:
                    on_report(report)
    finally:
        for lock in locks:
            lock.release()
    return reports


def apply_all(
    plans: Sequence[ReindexPlan],
    backup_dir: Callable[[str], str] | str,
    *,
    force: bool = False,
    allow_transitional: bool = False,
    on_segment: Callable[[ReindexReport], None] | None = None,
) -> list[ReindexReport]:
    """Apply several reindex plans (see :func:`apply_locked`)."""
    return apply_locked(
        plans, backup_dir, apply_reindex, Backup,
        force=force, allow_transitional=allow_transitional, on_report=on_segment,
    )
