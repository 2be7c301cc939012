"""Repairs that write: the shared write-safety layer, and ``reindex`` planning (spec §2.1, §8.3, §11.5, §12).

Plan, then apply (STYLE.md). :func:`plan_reindex` only reads: it walks a segment the
way the broker's recovery does, rebuilds its ``.index``/``.timeindex`` with
:class:`~kafkatool.segment.index.IndexBuilder`, and compares them with the files on
disk. :func:`apply_reindex_partition` writes what the plans of one partition dir say
through the safety layer:

* :class:`LogDirLock` refuses to touch a log dir a live broker holds (§11.5: a POSIX
  ``fcntl`` lock on ``<logdir>/.lock``, held for the whole repair);
* :class:`Backup` copies every file before it is replaced into a backup directory, with a
  ``MANIFEST.json`` (original path, size, sha256, what replaced it) and a ``RESTORE.txt``;
* :func:`exchange_partition` switches the whole partition dir at once, so a crash at any
  point leaves it complete-old or complete-new. The new state is built as a sibling
  *staging* dir ``<topic>-<partition>.<32 hex>-delete`` in the same log dir (the name
  Kafka gives a partition being deleted, §2.1: a broker that finds one loads it, does not
  take it for a duplicate of the partition, and deletes it, where any other directory name
  would fail the whole log dir). Small files are written fresh and fsynced first (indexes
  are never hard-linked: the broker opens a loaded segment's indexes writable and resizes
  them), then every unchanged ``.log`` is hard-linked, so an interrupted staging dir never
  holds a ``.log`` without its indexes. After the backup is complete, one
  ``renameat2(RENAME_EXCHANGE)`` swaps the staging dir and the partition dir, and the
  staging dir, now holding the old state whose every byte is in the new state (hard links)
  or in the backup, is removed. The 32 hex start with :data:`STAGING_TAG`, so the next
  run (a dry run reports it) recognises and removes a leftover under the lock.
* When the exchange is impossible (not Linux, no ``renameat2``, a file system that refuses
  ``RENAME_EXCHANGE``, a hard link refused, a subdirectory in the partition dir, or
  ``$KAFKATOOL_NO_EXCHANGE`` set), :func:`replace_files` is the fallback: it writes
  ``<name>.kafkatool-tmp`` beside each target, fsyncs it, records a journal (the commit
  point), renames every temp file into place and fsyncs the directory. A crash leaves
  every file under its real name complete-old or complete-new; a crash after the commit
  point can leave one file new and its sibling old, which the journal records and the
  next run completes (the rebuilt bytes are a function of the ``.log``, so rolling forward
  is re-deriving them). Kafka's loader ignores the ``.kafkatool-tmp`` and
  ``.kafkatool-journal`` names (§12.3 only acts on ``.deleted``/``.cleaned``/``.swap``).

No click and no rich here: the CLI renders the plan and the report.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import struct
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator, Sequence

from kafkatool.errors import KafkaToolError
from kafkatool.segment import files as names
from kafkatool.segment.index import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    IX_BATCHES,
    IX_SHIFT,
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY_SIZE,
    IndexAppendError,
    IndexBuilder,
)
from kafkatool.record.batch import Batch
from kafkatool.record.control import ControlType, decode_control_key
from kafkatool.record.records import first_batch_record
from kafkatool.segment.snapshot import read_producer_snapshot
from kafkatool.segment.txnindex import TXN_ENTRY_SIZE, AbortedTxn, encode_txn_index
from kafkatool.segment.walk import SegmentWalker, WalkStop
from kafkatool.safety import (  # re-exported: the safety layer lived here first
    FAULT_ENV,
    JOURNAL_SUFFIX,
    TEMP_SUFFIX,
    Backup,
    LiveBrokerError,
    LogDirLock,
    RepairError,
    TransitionalDirError,
    check_backup_location,
    default_backup_dir,
    fault_point,
    fsync_dir,
    log_dir_of,
    real_log_dir_of,
    read_or_none,
    sha256_hex,
    take_owner,
)

from kafkatool.record.speedups import functions as _compiled  # the extension, unless not built or switched off

(_index_v2,) = _compiled("index_v2")  # the compiled indexing loop, or None

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
    "walk_as_recovery",
    "plan_reindex_all",
    "apply_reindex",
    "apply_reindex_partition",
    "exchange_partition",
    "exchange_unavailable",
    "ExchangeUnavailable",
    "staging_dir_name",
    "find_staging_dirs",
    "remove_staging_dirs",
    "is_staging_dir",
    "link_or_copy",
    "STAGING_TAG",
    "NO_EXCHANGE_ENV",
    "find_segments",
    "find_pending_state",
    "scan_targets",
    "Targets",
    "TargetProblem",
    "index_findings",
    "refused_plan",
    "PartitionRefused",
    "apply_locked",
    "apply_all",
    "COVERAGE_SLACK",
    "check_partition_dir",
    "default_backup_dir",
    "log_dir_of",
    "TEMP_SUFFIX",
    "JOURNAL_SUFFIX",
    "FAULT_ENV",
    "stage_file",
    "unlink_all",
]



# ----------------------------------------------------------------------------- atomic replace


def _journal_path(directory: str, prefix: str) -> str:
    return os.path.join(directory, prefix + JOURNAL_SUFFIX)


def replace_files(
    items: Sequence[tuple[str, bytes]], backup: Backup, *, reason: str = "", journal_prefix: str | None = None,
    like: dict[str, str] | None = None, tool: str = "kafkatool reindex",
) -> None:
    """Replace every ``(path, data)`` (all in one directory) crash-safely; see the module doc.

    Steps, each a fault point: back up each old file (fsynced); write and fsync each
    ``<path>.kafkatool-tmp``; write the journal (commit point); ``os.replace`` each into
    place; fsync the directory; remove the journal.

    A temp file is always a new file (``O_EXCL | O_NOFOLLOW``, after removing whatever had its
    name, a symbolic link included: nothing is ever written through a planted link), with the
    owner and mode of the file it replaces, or of ``like[path]`` (another path) for a new one,
    so that a broker running as another user can still open it writable. An ``OSError`` (a
    full disk) names the file; the temp files written so far are removed (the old state is
    untouched before the journal is committed).
    """
    if not items:
        return
    directory = os.path.dirname(os.path.abspath(items[0][0]))
    if any(os.path.dirname(os.path.abspath(p)) != directory for p, _ in items):
        raise RepairError("replace_files needs files of a single directory", path=directory)
    prefix = journal_prefix or os.path.basename(items[0][0]).split(".", 1)[0]
    like = dict(like or {})
    with backup.batch():  # one manifest write for all of them: nothing is replaced before it is on disk
        for path, data in items:
            with _naming(backup.root, f"while copying {path} into the backup"):
                backup.save(path, data, reason)
            fault_point("after backup")
    temps: list[tuple[str, str, bytes]] = []
    try:
        for path, data in items:
            path = os.path.abspath(path)
            tmp = path + TEMP_SUFFIX
            model = _stat_or_none(path) or _stat_or_none(like.get(path) or like.get(os.path.basename(path)) or "")
            _new_file(tmp, data, model)
            temps.append((tmp, path, data))
        journal = _journal_path(directory, prefix)
        record = {
            "tool": tool,
            "backup_dir": backup.root,
            "replace": [{"temp": os.path.basename(t), "target": os.path.basename(p), "size": len(d), "sha256": sha256_hex(d)}
                        for t, p, d in temps],
        }
        _new_file(journal + TEMP_SUFFIX, (json.dumps(record, indent=2) + "\n").encode(), None, fault=False)
        with _naming(journal):
            os.replace(journal + TEMP_SUFFIX, journal)
            fsync_dir(directory)  # commit point: the temp files and the journal are durable
    except BaseException:
        unlink_all([t for t, _p, _d in temps] + [_journal_path(directory, prefix) + TEMP_SUFFIX])
        raise
    fault_point("after journal")
    for tmp, path, _data in temps:
        os.replace(tmp, path)
        fault_point("after rename")
    fsync_dir(directory)
    fault_point("after directory fsync")
    os.unlink(journal)
    fsync_dir(directory)
    fault_point("after journal removal")


@contextmanager
def _naming(path: str, context: str = "") -> Iterator[None]:
    """An ``OSError`` without a file name (``write``, ``fsync``: a full disk) gets ``path``."""
    try:
        yield
    except OSError as e:
        if e.filename is None or context:
            strerror = (e.strerror or str(e)) + (f" ({context})" if context else "")
            raise OSError(e.errno, strerror, e.filename or path) from None
        raise


def _stat_or_none(path: str) -> os.stat_result | None:
    if not path:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _new_file(path: str, data: bytes, like: os.stat_result | None, *, fault: bool = True) -> None:
    """Create ``path`` afresh (whatever had its name is removed first, never followed), write
    ``data``, give it ``like``'s owner and mode, fsync it. Errors name ``path``."""
    with _naming(path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
                     0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if fault:
                fault_point("after temp write")
            if like is not None:
                take_owner(fd, like, times=False)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            unlink_all([path])
            raise
        os.close(fd)
    if fault:
        fault_point("after temp fsync")


def write_atomically(path: str, data: bytes, backup: Backup | str, *, reason: str = "") -> None:
    """Replace one file crash-safely, keeping the original in ``backup`` (a :class:`Backup` or a directory)."""
    if isinstance(backup, str):
        backup = Backup(backup)
    replace_files([(path, data)], backup, reason=reason, journal_prefix=os.path.basename(path))


# ----------------------------------------------------------------------------- whole-dir exchange

STAGING_TAG = "6b66746c"
"""The first 8 of the 32 hex digits of a staging dir name (ASCII ``kftl``): kafkatool's, not Kafka's."""
NO_EXCHANGE_ENV = "KAFKATOOL_NO_EXCHANGE"
"""``KAFKATOOL_NO_EXCHANGE=1`` forces the journaled fallback (tests keep both paths covered)."""

_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
# SYS_renameat2, for a libc without the renameat2 wrapper (glibc < 2.28)
_SYS_RENAMEAT2 = {"x86_64": 316, "aarch64": 276, "riscv64": 276, "i686": 353, "i386": 353, "armv7l": 382,
                  "ppc64le": 357, "ppc64": 357, "s390x": 347}
_NO_LINK = (errno.EPERM, errno.EXDEV, errno.EMLINK, errno.EOPNOTSUPP, errno.ENOTSUP)
_LOG_LIKE = (".log", ".log.deleted", ".log.cleaned", ".log.swap", ".checkpoint")
"""Segment data and KRaft snapshots (``__cluster_metadata-0``'s ``.checkpoint`` files, written
once, up to hundreds of MiB): hard-linked into a staging dir, never copied (a broker never
rewrites them in place, other than recovery cutting an invalid ``.log`` tail)."""
COPY_CHUNK = 8 << 20


class ExchangeUnavailable(RepairError):
    """The whole-dir exchange cannot be used here; the caller falls back to the journal."""


def staging_dir_name(partition_dir: str) -> str | None:
    """``<topic>-<partition>.<STAGING_TAG><24 hex>-delete`` for a partition dir (§2.1), or None
    when its name is not ``topic-partition``.

    The 24 hex are a digest of the partition dir's name, so the name is fixed per partition:
    a leftover is found with one ``lstat`` (no listing of a log dir of thousands of
    partitions per segment) and matched exactly even when the topic part is cut. As
    ``LocalLog.logDirNameWithSuffixCappedLength`` does, the topic is cut so the whole name
    is at most 255 characters.
    """
    name = os.path.basename(os.path.abspath(partition_dir))
    pd = names.parse_partition_dir(name)
    if pd is None or any(c.isspace() for c in name):
        return None
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:24]
    suffix = f"-{pd.partition}.{STAGING_TAG}{digest}{names.DELETE_DIR_SUFFIX}"
    topic = pd.topic[: max(0, 255 - len(suffix))]
    return topic + suffix


def is_staging_dir(path: str) -> bool:
    """Whether ``path``'s name is a kafkatool staging dir (a ``-delete`` dir tagged :data:`STAGING_TAG`)."""
    pd = names.parse_partition_dir(os.path.basename(os.path.abspath(path)))
    uid = pd.unique_id if pd is not None else None
    return (pd is not None and pd.state == "delete" and uid is not None and len(uid) == 32
            and uid.startswith(STAGING_TAG) and all(c in "0123456789abcdef" for c in uid))


def find_staging_dirs(partition_dir: str) -> tuple[str, ...]:
    """The staging dir an interrupted kafkatool run left beside ``partition_dir``, if any."""
    staging = staging_dir_name(partition_dir)
    if staging is None:
        return ()
    path = os.path.join(log_dir_of(partition_dir), staging)
    return (path,) if os.path.lexists(path) else ()


def remove_staging_dirs(paths: Iterable[str]) -> list[str]:
    """Remove kafkatool staging dirs (the caller holds the lock); fsync their log dirs.

    Always safe: before the exchange the partition dir still holds the old state complete,
    after it every byte of the staging dir is in the partition dir (hard links) or the backup.
    """
    removed = []
    for p in paths:
        if not is_staging_dir(p) or not os.path.lexists(p):
            continue
        if os.path.isdir(p) and not os.path.islink(p):
            _remove_staging(p)
        else:
            os.unlink(p)
        fsync_dir(os.path.dirname(os.path.abspath(p)))
        removed.append(p)
    return removed


def _remove_staging(path: str, fault: bool = False) -> None:
    """Remove a staging dir: its ``.log`` files first, so that a removal cut short never
    leaves a ``.log`` without its indexes (a broker recovers such a segment, and the
    ``.log`` may be a hard link of the partition's own)."""
    entries = sorted(os.listdir(path), key=lambda n: not n.endswith(_LOG_LIKE))
    for n in entries:
        p = os.path.join(path, n)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)
        if fault and n.endswith(_LOG_LIKE):
            fault_point("after unlinking an old .log")
    os.rmdir(path)


def _discard_staging(path: str) -> bool:
    """Best effort, on the way out of a failed build: what remains is a leftover the next run
    removes. Returns whether the staging dir is gone."""
    try:
        _remove_staging(path)
        fsync_dir(os.path.dirname(path))
    except FileNotFoundError:
        pass
    except OSError:
        pass
    return not os.path.lexists(path)


def _build_failed(e: OSError, staging: str, when: str) -> RepairError:
    """A write error before the switch (a full disk): the partition dir is the old state; the
    partial staging dir is removed, or left for the next run, and the message says which."""
    gone = _discard_staging(staging)
    return RepairError(
        f"{e.strerror or e} ({when}); nothing changed: the partition dir is the old state; "
        + ("the partial staging dir was removed" if gone
           else f"the partial staging dir {staging} is left behind (the next run removes it)"),
        path=e.filename or staging,
    )


_renameat2_cache: list = []


def _load_renameat2() -> Callable[[str, str, int], None] | str:
    """``renameat2(2)`` through ctypes (Python has no binding), or why it is not there."""
    if not sys.platform.startswith("linux"):
        return f"renameat2(RENAME_EXCHANGE) is Linux-only (this is {sys.platform})"
    import ctypes
    import platform

    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is not None:
        fn.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
        fn.restype = ctypes.c_int

        def call(old: bytes, new: bytes, flags: int) -> int:
            return fn(_AT_FDCWD, old, _AT_FDCWD, new, flags)
    else:  # glibc < 2.28: the raw system call
        nr = _SYS_RENAMEAT2.get(platform.machine())
        if nr is None:
            return f"this libc has no renameat2 and its system call number on {platform.machine()} is not known"
        syscall = libc.syscall
        syscall.restype = ctypes.c_long

        def call(old: bytes, new: bytes, flags: int) -> int:
            return syscall(ctypes.c_long(nr), ctypes.c_int(_AT_FDCWD), ctypes.c_char_p(old),
                           ctypes.c_int(_AT_FDCWD), ctypes.c_char_p(new), ctypes.c_uint(flags))

    def rename(old: str, new: str, flags: int) -> None:
        if call(os.fsencode(old), os.fsencode(new), flags) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), old, None, new)

    return rename


def _renameat2() -> Callable[[str, str, int], None]:
    """The ``renameat2`` callable ``(old, new, flags)``; raises :class:`ExchangeUnavailable` without one."""
    if not _renameat2_cache:
        _renameat2_cache.append(_load_renameat2())
    found = _renameat2_cache[0]
    if isinstance(found, str):
        raise ExchangeUnavailable(found)
    return found


def exchange_dirs(a: str, b: str) -> None:
    """Swap two directories of one file system atomically (``renameat2(RENAME_EXCHANGE)``)."""
    _renameat2()(a, b, _RENAME_EXCHANGE)


_exchange_probed: dict[int, str | None] = {}


def exchange_unavailable(partition_dir: str) -> str | None:
    """Why :func:`exchange_partition` cannot be used for ``partition_dir``, or None when it can.

    Checks what can be known before anything is written; a refused hard link is only found
    while building the staging dir (then :class:`ExchangeUnavailable` is raised before the
    backup is touched).
    """
    if os.environ.get(NO_EXCHANGE_ENV, "") not in ("", "0"):
        return f"${NO_EXCHANGE_ENV} is set"
    if os.path.islink(partition_dir):
        return "the partition dir is a symbolic link"
    if staging_dir_name(partition_dir) is None:
        return "the partition dir's name is not <topic>-<partition>"
    try:
        _renameat2()
    except ExchangeUnavailable as e:
        return e.message
    with os.scandir(partition_dir) as it:
        for entry in it:
            if not entry.is_file(follow_symlinks=False):
                return f"the partition dir holds {entry.name!r}, which is not a regular file"
    return None


def _probe_exchange(staging: str) -> None:
    """Try ``RENAME_EXCHANGE`` on two empty files inside the new staging dir (once per file system)."""
    dev = os.stat(staging).st_dev
    if dev not in _exchange_probed:
        a = os.path.join(staging, "probe-a" + TEMP_SUFFIX)
        b = os.path.join(staging, "probe-b" + TEMP_SUFFIX)
        for p in (a, b):
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        why = None
        try:
            exchange_dirs(a, b)
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
                raise
            why = f"the file system refuses renameat2(RENAME_EXCHANGE) ({os.strerror(e.errno)})"
        finally:
            for p in (a, b):
                os.unlink(p)
        _exchange_probed[dev] = why
    if _exchange_probed[dev] is not None:
        raise ExchangeUnavailable(_exchange_probed[dev])


def _copy_fd(src: int, dst: int, start: int, end: int | None, path: str | None = None) -> int:
    """Copy ``src[start:end]`` (to EOF when ``end`` is None) to ``dst``'s position; return the bytes
    copied. ``path`` names ``src`` in the error when it ends early."""
    pos, done = start, 0
    fast = hasattr(os, "copy_file_range")
    while end is None or pos < end:
        want = COPY_CHUNK if end is None else min(end - pos, 1 << 30)
        n = 0
        if fast:
            try:
                n = os.copy_file_range(src, dst, want, pos)
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM):
                    raise
                fast = False
                continue
        else:
            piece = os.pread(src, min(want, COPY_CHUNK), pos)
            view = memoryview(piece)
            while view:
                view = view[os.write(dst, view):]
            n = len(piece)
        if n == 0:
            if end is not None:
                raise RepairError(f"the file ended at byte {pos} while bytes up to {end} were being copied",
                                  path=path, position=pos)
            break
        pos += n
        done += n
    return done


def stage_file(dst: str, like: os.stat_result, *, data: bytes | None = None, source: str | None = None,
                ranges: Sequence[tuple[int, int]] | None = None) -> None:
    """Create ``dst`` (it must not exist) from ``data``, or from ``source`` whole or its ``ranges``;
    owner and mode of ``like``; fsynced. A whole copy keeps the source's timestamps."""
    with _naming(dst):
        _stage_file_named(dst, like, data, source, ranges)


def _stage_file_named(dst: str, like: os.stat_result, data: bytes | None, source: str | None,
                      ranges: Sequence[tuple[int, int]] | None) -> None:
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        if data is not None:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        elif source is not None:
            sfd = os.open(source, os.O_RDONLY)
            try:
                if ranges is None:
                    _copy_fd(sfd, fd, 0, None, source)
                else:
                    for s, e in ranges:
                        _copy_fd(sfd, fd, s, e, source)
            finally:
                os.close(sfd)
        take_owner(fd, like, times=False)
        os.fsync(fd)
    finally:
        os.close(fd)
    if source is not None and ranges is None:
        os.utime(dst, ns=(like.st_atime_ns, like.st_mtime_ns))


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError as e:
        if e.errno in _NO_LINK:
            raise ExchangeUnavailable(f"a hard link is refused ({os.strerror(e.errno)}): {src}") from None
        raise


def link_or_copy(src: str, dst: str, *, link: bool = True) -> str:
    """Put ``src`` at ``dst`` (which must not exist), fsynced: a hard link where the file system
    allows it (and ``link``), else a copy with the same owner, mode and times. Returns
    ``"link"`` or ``"copy"``. The caller fsyncs ``dst``'s directory."""
    if link:
        try:
            os.link(src, dst, follow_symlinks=False)
            return "link"
        except OSError as e:
            if e.errno not in _NO_LINK:
                raise
    tmp = dst + TEMP_SUFFIX
    if os.path.lexists(tmp):
        os.unlink(tmp)
    stage_file(tmp, os.stat(src), source=src)
    os.replace(tmp, dst)
    return "copy"


def exchange_partition(
    partition_dir: str,
    *,
    write: dict[str, bytes] | None = None,
    cut: dict[str, Sequence[tuple[int, int]]] | None = None,
    drop: Iterable[str] = (),
    like: dict[str, str] | None = None,
    before_switch: Callable[[], None] | None = None,
) -> None:
    """Replace the whole partition dir by its new state in one ``RENAME_EXCHANGE`` (module doc).

    The new state is the partition dir's files, except: ``write`` (name -> bytes: a file
    replaced or created), ``cut`` (name of a ``.log`` -> the byte ranges of the old file it
    keeps, in order) and ``drop`` (names absent from the new state). A created file takes the
    owner and mode of ``like[name]`` (another file's name) or else of the partition's files.
    ``before_switch`` runs once the staging dir is complete and durable: the backup goes
    there, so every removed byte is saved before the switch.

    Raises :class:`ExchangeUnavailable`, before ``before_switch`` ran and with nothing left
    behind, when a hard link or the exchange itself is refused; the caller then uses the
    journal. The caller holds the log dir's lock and has removed a leftover staging dir.
    """
    write = dict(write or {})
    cut = dict(cut or {})
    drop = set(drop)
    like = dict(like or {})
    partition_dir = os.path.abspath(partition_dir)
    log_dir = log_dir_of(partition_dir)
    staging_name = staging_dir_name(partition_dir)
    if staging_name is None:
        raise ExchangeUnavailable("the partition dir's name is not <topic>-<partition>")
    staging = os.path.join(log_dir, staging_name)
    if os.path.lexists(staging):
        raise RepairError("a staging dir of an earlier run is still there; run again", path=staging)
    dir_stat = os.stat(partition_dir)
    stats: dict[str, os.stat_result] = {}
    with os.scandir(partition_dir) as it:
        for entry in it:
            st = entry.stat(follow_symlinks=False)
            if not entry.is_file(follow_symlinks=False):
                raise ExchangeUnavailable(f"the partition dir holds {entry.name!r}, which is not a regular file")
            stats[entry.name] = st
    kept = sorted(n for n in stats if n not in drop)
    # a created file with no file to take after: like the partition's files (a .log), else the dir without x bits
    some = next((stats[n] for n in kept if n.endswith(".log")), next(iter(stats.values()), None))
    if some is None:
        some = os.stat_result((dir_stat.st_mode & ~0o111, *tuple(dir_stat)[1:]))
    logs = [n for n in kept if n.endswith(_LOG_LIKE) and n not in cut and n not in write]
    small = sorted((set(kept) | set(write)) - set(logs) - set(cut))
    os.mkdir(staging, 0o700)
    try:
        dfd = os.open(staging, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            take_owner(dfd, dir_stat, staging, times=False)
        finally:
            os.close(dfd)
        fsync_dir(log_dir)
        fault_point("after staging dir")
        _probe_exchange(staging)
        # 1. every small file of the new state, written fresh (never a hard link: see the module doc)
        for n in small:
            target = os.path.join(staging, n)
            st = stats.get(n) or stats.get(like.get(n, "")) or some
            if n in write:
                stage_file(target, st, data=write[n])
            else:
                stage_file(target, st, source=os.path.join(partition_dir, n))
            fault_point("after staged file")
        # 2. the cut .log files: new files holding the kept byte ranges
        for n, ranges in sorted(cut.items()):
            stage_file(os.path.join(staging, n), stats[n], source=os.path.join(partition_dir, n), ranges=ranges)
            fault_point("after staged file")
        # 3. last, the unchanged .log files: hard links, no copy
        for n in logs:
            _link(os.path.join(partition_dir, n), os.path.join(staging, n))
            fault_point("after staged link")
        fsync_dir(staging)
        fsync_dir(log_dir)
        fault_point("after staging fsync")
    except OSError as e:
        raise _build_failed(e, staging, "while the new partition dir was built") from None
    except BaseException:
        _discard_staging(staging)
        raise
    # 4. the backup: every byte the new state removes is saved before the switch
    if before_switch is not None:
        try:
            before_switch()
        except OSError as e:
            raise _build_failed(e, staging, "while the backup was written") from None
        except BaseException:
            _discard_staging(staging)
            raise
    # 5. the switch: afterwards the partition dir holds the new state, the staging dir the old one
    try:
        exchange_dirs(staging, partition_dir)
    except OSError as e:
        _discard_staging(staging)
        raise RepairError(f"renameat2(RENAME_EXCHANGE) failed ({e.strerror}); nothing changed", path=partition_dir) from None
    fault_point("after exchange")
    fsync_dir(log_dir)
    fault_point("after exchange fsync")
    # 6. the old state: every byte of it is in the partition dir (hard links) or in the backup
    _remove_staging(staging, fault=True)
    fault_point("after staging removal")
    fsync_dir(log_dir)
    fault_point("after log dir fsync")


# ----------------------------------------------------------------------------- pending state

TRUNCATE_JOURNAL_NAME = "kafkatool-truncate" + JOURNAL_SUFFIX
"""The partition-level journal of ``kafkatool truncate`` (:data:`kafkatool.truncate.TRUNCATE_JOURNAL`)."""


def _journal_temps(journal_path: str) -> set[str]:
    """The temp file names a committed journal still needs (its ``replace[].temp``); empty
    when it cannot be read (the caller reports the journal itself either way)."""
    try:
        with open(journal_path, "rb") as f:
            record = json.loads(f.read(1 << 20).decode("utf-8", "surrogateescape"))
        return {str(r["temp"]) for r in record.get("replace", ()) if isinstance(r, dict) and "temp" in r}
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        return set()


def find_pending_state(partition_dir: str) -> list[tuple[str, str]]:
    """What interrupted kafkatool runs left for ``partition_dir``: ``(path, what it is)`` pairs.

    * a committed journal, and whose: ``kafkatool-truncate.kafkatool-journal`` is truncate's
      (its next ``--execute`` completes it: the temp files it names are pending state no
      other command may remove); ``<base>.kafkatool-journal`` is reindex's (its next run
      re-derives the files, the journal only marks the unfinished repair);
    * an uncommitted journal (``*.kafkatool-journal.kafkatool-tmp``) and temp files
      (``*.kafkatool-tmp``): a run cut short before its commit point; the partition's files
      are the old state, complete;
    * the staging dir beside the partition dir (:func:`find_staging_dirs`).

    The second element starts with one of ``truncate journal``, ``reindex journal``,
    ``journal``, ``pending temp file``, ``temp file``, ``staging dir``. Reads only; a
    partition dir that cannot be listed gives ``[]``.
    """
    partition_dir = os.path.abspath(partition_dir)
    try:
        entries = sorted(os.listdir(partition_dir))
    except OSError:
        entries = []
    out: list[tuple[str, str]] = []
    pending: dict[str, str] = {}  # temp name -> the command whose committed journal names it
    for n in entries:
        if not n.endswith(JOURNAL_SUFFIX):
            continue
        p = os.path.join(partition_dir, n)
        if n == TRUNCATE_JOURNAL_NAME:
            out.append((p, "truncate journal: an interrupted `kafkatool truncate --execute` committed it; "
                           "`kafkatool truncate --execute` on this partition dir completes it"))
            pending.update(dict.fromkeys(_journal_temps(p), "truncate"))
        elif n[: -len(JOURNAL_SUFFIX)].split(".", 1)[0].isdigit():
            out.append((p, "reindex journal: an interrupted `kafkatool reindex --execute` committed it; "
                           "the next `kafkatool reindex --execute` rebuilds the files and removes it"))
        else:
            out.append((p, "journal: left by an interrupted kafkatool run"))
    for n in entries:
        if not n.endswith(TEMP_SUFFIX):
            continue
        p = os.path.join(partition_dir, n)
        if n.endswith(JOURNAL_SUFFIX + TEMP_SUFFIX):
            out.append((p, "temp file: an uncommitted journal of an interrupted kafkatool run (the partition's files are the old state)"))
        elif n in pending:
            out.append((p, f"pending temp file: named by the {pending[n]} journal, which puts it in place"))
        else:
            out.append((p, "temp file: left by an interrupted kafkatool run before its commit point"))
    for s in find_staging_dirs(partition_dir):
        out.append((s, "staging dir: of an interrupted kafkatool run, named like a partition being deleted; "
                       "the partition dir itself is complete"))
    return out


# ----------------------------------------------------------------------------- targets


@dataclass(frozen=True, slots=True)
class TargetProblem:
    """Something :func:`scan_targets` could not take as a segment, and why."""

    path: str
    kind: str
    """``usage`` (a path named on the command line that is not a segment, a partition dir or a log
    dir: refused, exit 2), ``unreadable`` (a directory that cannot be listed), ``invalid_segment_name``
    (a ``*.log`` whose name is not an offset: Kafka cannot load the log dir), ``not_regular`` (a
    ``.log`` that is a FIFO, a device, ...: never opened), or ``skipped`` (a note: a kafkatool
    backup dir, a transitional partition dir, a ``.log`` with a non-canonical name)."""
    message: str

    @property
    def is_finding(self) -> bool:
        """A problem that makes the run's exit status 1 (``usage`` makes it 2, ``skipped`` nothing)."""
        return self.kind in ("unreadable", "invalid_segment_name", "not_regular")


@dataclass(frozen=True, slots=True)
class Targets:
    """What :func:`scan_targets` found."""

    segments: tuple[str, ...]
    """The ``.log`` segments, absolute, their directories resolved (symlinks followed), in order."""
    problems: tuple[TargetProblem, ...]
    directories: int
    """How many directories were listed (for the "nothing found" message)."""
    files: int
    """How many files were seen in them."""

    @property
    def usage_errors(self) -> tuple[TargetProblem, ...]:
        return tuple(p for p in self.problems if p.kind == "usage")

    def nothing_found(self, paths: Sequence[str]) -> str | None:
        """A one-line message when ``paths`` hold nothing Kafka at all (no segment, no finding), else None."""
        if self.segments or any(p.kind != "skipped" for p in self.problems):
            return None
        where = ", ".join(paths)
        skipped = sum(1 for p in self.problems if p.kind == "skipped")
        return (f"{where}: no Kafka segment found ({self.directories} directories and {self.files} files searched"
                + (f", {skipped} skipped" if skipped else "")
                + "): expected <20-digit base offset>.log files in <topic>-<partition> directories, "
                  "or a log dir (or a directory of log dirs) holding them")


_SEGMENT_SIDE = (names.FileKind.INDEX, names.FileKind.TIMEINDEX, names.FileKind.TXNINDEX)
_SEGMENT_KINDS = (names.FileKind.LOG, *_SEGMENT_SIDE)


def _holds_segments(d: str, files: Sequence[str]) -> bool:
    """Whether ``d`` is a partition dir to plan: it holds a segment file (``<20 digits>.log``,
    ``.index``, ``.timeindex``, ``.txnindex``), or it is named ``<topic>-<partition>`` and holds
    some ``*.log``. A stray ``server.log`` in a log dir does not make the log dir a partition."""
    if any(names.classify(n) in _SEGMENT_KINDS for n in files):
        return True
    return names.parse_partition_dir(os.path.basename(d)) is not None and any(n.endswith(".log") for n in files)


def _is_backup_dir(entries: Sequence[str]) -> bool:
    """A kafkatool backup dir (its partition-named subdirectories hold copies, never live segments)."""
    return "MANIFEST.json" in entries and "RESTORE.txt" in entries


def _unloadable_name(name: str) -> bool:
    """A ``*.log`` Kafka's loader cannot parse (``Long.parseLong`` of the name up to the first ``.``)."""
    return names.java_parse_int(name.split(".", 1)[0], 64) is None


def scan_targets(paths: Iterable[str], *, allow_transitional: bool = True) -> Targets:
    """The segments named by ``paths`` (segment or side files, partition dirs, log dirs, directories
    of log dirs, searched recursively without following symbolic links below the named paths), and
    every problem met on the way, so that one bad directory or file name does not hide the rest.

    A named ``.index``/``.timeindex``/``.txnindex`` stands for its segment; KRaft ``.checkpoint``
    snapshots have no indexes and are skipped. Below a named directory, kafkatool's staging dirs
    and backup dirs are skipped, and so are ``-delete``/``-future``/``-stray`` partition dirs unless
    ``allow_transitional`` (a named one is kept: the caller refuses it or not). Reads directory
    listings only; never opens a file.
    """
    segments: list[str] = []
    seen: set[str] = set()
    problems: list[TargetProblem] = []
    counts = [0, 0]

    def add(path: str) -> None:
        if path not in seen:
            seen.add(path)
            segments.append(path)

    def regular(path: str) -> bool:
        try:
            mode = os.stat(path).st_mode
        except OSError as e:
            problems.append(TargetProblem(path, "unreadable", f"cannot stat the file: {e.strerror or e}"))
            return False
        if not stat.S_ISREG(mode):
            problems.append(TargetProblem(path, "not_regular", "a .log that is not a regular file (a FIFO, a "
                                                               "device, a directory...): not opened"))
            return False
        return True

    def partition(d: str, entries: Sequence[str], named: bool) -> None:
        pd = names.parse_partition_dir(os.path.basename(d))
        if not named and not allow_transitional and pd is not None and pd.state is not None:
            problems.append(TargetProblem(d, "skipped", f"a partition dir marked '-{pd.state}' (being deleted, "
                                                        "moved or stray); --allow-transitional includes it"))
            return
        for n in entries:
            if not n.endswith(".log"):
                continue
            p = os.path.join(d, n)
            if names.classify(n) is names.FileKind.LOG:
                if regular(p):
                    add(p)
            elif os.path.isfile(p) or not os.path.exists(p):
                if _unloadable_name(n):
                    problems.append(TargetProblem(p, "invalid_segment_name",
                                                  "the name is not a base offset (a signed 64-bit decimal before "
                                                  "the first '.'): Kafka cannot load this partition (its log "
                                                  "loading fails with NumberFormatException); not indexed"))
                else:
                    problems.append(TargetProblem(p, "skipped", "not a 20-digit segment name; not indexed"))

    def walk(d: str, named: bool) -> None:
        try:
            entries = sorted(os.listdir(d))
        except OSError as e:
            problems.append(TargetProblem(d, "unreadable", f"cannot list the directory: {e.strerror or e}"))
            return
        counts[0] += 1
        if is_staging_dir(d) and not named:
            return  # an interrupted run's staging dir: the plan of its partition removes it
        if not named and _is_backup_dir(entries):
            problems.append(TargetProblem(d, "skipped", "a kafkatool backup dir (copies, not live segments)"))
            return
        subdirs = []
        files = []
        for n in entries:
            try:
                is_dir = stat.S_ISDIR(os.lstat(os.path.join(d, n)).st_mode)
            except OSError:
                continue
            (subdirs if is_dir else files).append(n)
        counts[1] += len(files)
        if _holds_segments(d, files):
            partition(d, files, named)
            return
        for n in subdirs:
            walk(os.path.join(d, n), False)

    for raw in paths:
        path = os.path.abspath(raw)
        if os.path.isdir(path):
            walk(os.path.realpath(path), True)
            continue
        if not os.path.lexists(path) or not os.path.exists(path):
            problems.append(TargetProblem(path, "usage", "does not exist" if not os.path.lexists(path)
                                          else "a symbolic link to nothing (or a symbolic link loop)"))
            continue
        # a file: resolve its directory, keep its own name (a symlinked .log is read, never replaced)
        path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        n = os.path.basename(path)
        kind = names.classify(n)
        counts[1] += 1
        if kind is names.FileKind.LOG:
            if regular(path):
                add(path)
        elif kind in _SEGMENT_SIDE:
            log = str(names.sibling(path, ".log"))
            if os.path.isfile(log):
                add(log)
            else:
                problems.append(TargetProblem(path, "usage", f"its segment {os.path.basename(log)} does not exist "
                                                             "(the broker deletes an index without its .log)"))
        else:
            what = "its name is not a base offset" if n.endswith(".log") else "not a segment, an index or a directory"
            problems.append(TargetProblem(path, "usage", f"not a segment ({what}): expected a segment <20-digit base "
                                                         "offset>.log (or its .index, .timeindex, .txnindex), a partition "
                                                         "dir or a log dir"))
    return Targets(tuple(segments), tuple(problems), counts[0], counts[1])


def find_segments(paths: Iterable[str]) -> list[str]:
    """The ``.log`` segments named by ``paths`` (segment or side files, partition dirs, log dirs), in order.

    :func:`scan_targets` without its problems, except that a directory that cannot be listed
    raises the ``OSError`` (use :func:`scan_targets` to report it and go on).
    """
    found = scan_targets(paths)
    for p in found.problems:
        if p.kind == "unreadable":
            raise PermissionError(errno.EACCES, p.message, p.path)
    return list(found.segments)


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


def _describe_stop(walker: SegmentWalker, reason: str | None, position: int) -> str | None:
    if reason is not None:
        return reason
    if walker.stop is WalkStop.ERROR and walker.error is not None:
        return str(walker.error)
    if walker.stop is WalkStop.TAIL and walker.end > position:
        return f"{walker.path}:{position}: partial batch or short tail"
    return None


def walk_as_recovery(
    log_path: str,
    builder: IndexBuilder,
    *,
    start: int = 0,
    end: int | None = None,
    take_transactional: bool = True,
    check: Callable[[Batch], str | None] | None = None,
    on_batch: Callable[[Batch, object], None] | None = None,
    stop_after: Callable[[Batch, object], str | None] | None = None,
    on_refuse: Callable[[Batch, IndexAppendError | None], None] | None = None,
) -> tuple[SegmentWalker, int, int | None, int | None, tuple[int, str] | None]:
    """``LogSegment.recover``'s loop (§12.2) from ``start`` (to ``end``, a batch boundary, or the
    end of the file), feeding ``builder``: the batches go to its layout back to back after what
    it holds. Stops at the first batch recovery
    refuses: a CRC mismatch, ``check(batch)`` returning a reason, or one the index refuses
    (``on_refuse(batch, index error or None)`` is then called). ``stop_after(batch, data)``
    returning a reason stops the walk right after that batch, which is kept: recovery has
    already counted a batch whose producer-state update throws (a malformed transaction
    marker, §12.2 step 3); the bad position is then where the next batch starts.

    Every batch that needs nothing more is indexed by the compiled loop
    (``_speedups.index_v2``) when it is built; the others are handled here, with the loop's
    state synced around each. ``take_transactional=False`` keeps transactional batches here
    so that ``on_batch(batch, data)``, called for every batch indexed here, sees them all.

    Returns ``(walker, batches, first offset, last offset, (bad position, reason) or None)``;
    the walker (closed) says how the walk ended when no batch was refused.
    """
    batches, first, last = 0, None, None
    bad: tuple[int, str] | None = None
    shift = start - builder.valid_bytes  # file position minus the builder's layout position
    st = builder.scan_state(take_transactional) if _index_v2 is not None else None
    if st is not None:
        st[IX_SHIFT] = shift
    window_scan = None if st is None else (lambda buf, rel, lim, file_pos, batch_type: _index_v2(buf, rel, lim, file_pos, batch_type, st))
    with SegmentWalker(log_path, start=start, end=end, window_scan=window_scan) as walker:
        for batch, data in walker:
            if st is not None:  # what the compiled loop did up to this batch
                builder.load_scan_state(st)
                batches, first, last = st[IX_BATCHES:IX_SHIFT]
            # one unpack instead of property calls (a legacy entry's lastOffsetDelta is 0, so
            # offset + delta is its last offset too)
            (position, size, offset, _magic, crc, _attrs, lod, _bts, mts, _pid, _pepoch, _bseq, _count, _ple, computed) = batch
            if crc != computed:
                reason = f"{log_path}:{position}: batch CRC mismatch (stored crc {crc}, computed crc {computed})"
            else:
                reason = None if check is None else check(batch)
            index_error = None
            if reason is None:
                try:
                    builder.add_batch(position - shift, size, offset + lod, mts)
                except IndexAppendError as e:  # the builder is left as it was
                    reason = f"{log_path}:{position}: {e.message}"
                    index_error = e
            if reason is not None:
                bad = (position, reason)
                if on_refuse is not None:
                    on_refuse(batch, index_error)
                break
            batches += 1
            if first is None:
                first = offset
            last = offset + lod
            if on_batch is not None:
                on_batch(batch, data)
            if stop_after is not None and (reason := stop_after(batch, data)) is not None:
                bad = (position + size, reason)
                break
            if st is not None:
                builder.store_scan_state(st)
                st[IX_BATCHES:IX_SHIFT] = batches, first, last
        else:  # the compiled loop may have gone on after the last batch handled here
            if st is not None:
                builder.load_scan_state(st)
                batches, first, last = st[IX_BATCHES:IX_SHIFT]
    return walker, batches, first, last, bad


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
            piece = os.read(fd, COPY_CHUNK)
            if not piece:
                break
            chunks.append(piece)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _offset_reach(data: bytes, log_size: int) -> int:
    """The furthest position inside the log an offset index points at (-1 when none does)."""
    usable = len(data) - len(data) % OFFSET_ENTRY_SIZE
    return max((p for _r, p in struct.iter_unpack(">ii", data[:usable]) if 0 <= p < log_size), default=-1)


def _reaches_past(change: FileChange, old: bytes, base: int, valid_bytes: int, log_size: int, last: int | None) -> bool:
    """Whether the file ``change`` would replace describes more of the log than the rebuild:
    batches at or after the first bad one (byte ``valid_bytes``; ``last`` is the last valid offset)."""
    limit = base - 1 if last is None else last
    if change.kind == "index":
        return _offset_reach(old, log_size) >= valid_bytes
    if change.kind == "timeindex":
        usable = len(old) - len(old) % TIME_ENTRY_SIZE
        return any(base + rel > limit for _ts, rel in struct.iter_unpack(">qi", old[:usable]))
    usable = len(old) - len(old) % TXN_ENTRY_SIZE  # txnindex: lastOffset at bytes 18..26 of an entry
    return any(struct.unpack_from(">q", old, i + 18)[0] > limit for i in range(0, usable, TXN_ENTRY_SIZE))


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
        if batch.attributes & 0x10:
            _track_transactions(batch, data, ongoing, aborted)

    # transactional batches stay in Python while their transactions are tracked
    walker, batches, first, last, bad = walk_as_recovery(
        log_path, builder, take_transactional=ongoing is None, on_batch=None if ongoing is None else track
    )
    log_size = walker.file_size
    valid = builder.valid_bytes
    stop = _describe_stop(walker, None if bad is None else bad[1], valid)
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
    prefix = os.path.basename(log_path).split(".", 1)[0]
    leftovers = []
    interrupted_backup = None
    for p, what in pending:
        n = os.path.basename(p)
        if n.split(".", 1)[0] != prefix or not what.startswith(("temp file", "reindex journal")):
            continue  # not this segment's, or another command's pending state (never removed)
        leftovers.append(p)
        if what.startswith("reindex journal"):
            try:
                with open(p, "rb") as f:
                    interrupted_backup = json.loads(f.read(1 << 20).decode("utf-8", "surrogateescape")).get("backup_dir")
            except (OSError, ValueError, AttributeError):
                pass
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


class PartitionRefused(RepairError):
    """Apply found, under the lock, that one partition dir must not be written (it changed since
    it was planned, another command's journal appeared): nothing of it was written.
    :func:`apply_locked` reports it through ``on_refused`` and goes on with the other partitions."""

    kind: str = "changed"

    def __init__(self, message: str, *, kind: str = "changed", **kw) -> None:
        super().__init__(message, **kw)
        self.kind = kind


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


def unlink_all(paths: Iterable[str]) -> list[str]:
    removed = []
    for p in paths:
        try:
            os.unlink(p)
            removed.append(p)
        except FileNotFoundError:
            pass
    return removed


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
                with _naming(backup.root, f"while copying {path} into the backup"):
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
                              journal_prefix=os.path.basename(plan.log_path).split(".", 1)[0],
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


def apply_locked(
    plans: Sequence,
    backup_dir: Callable[[str], str] | str,
    apply: Callable,
    new_backup: Callable[[str], object],
    *,
    force: bool = False,
    allow_transitional: bool = False,
    on_report: Callable | None = None,
    on_start: Callable[[str], None] | None = None,
    on_refused: Callable[[Sequence, "PartitionRefused"], None] | None = None,
) -> list:
    """Apply the plans that need changes under one lock per log dir, every lock taken before
    the first write and held until the last (shared by reindex and truncate).

    ``apply(plans, backup)`` applies the plans of one partition dir (one exchange for all
    of them) and returns their reports; ``new_backup(root)`` makes the backup of a backup
    directory; ``backup_dir`` is a directory, or a function of the log dir giving one.
    ``on_start(partition_dir)`` is called before each partition is applied (for a report of
    what an interrupted run left where: :func:`kafkatool.cli.options.apply_states`). With
    ``on_refused``, a :class:`PartitionRefused` of one partition is handed to it with that
    partition's plans and the others go on; without it, it propagates.
    """
    for p in plans:
        check_partition_dir(p.partition_dir, allow_transitional)
    by_logdir: dict[str, list] = {}
    for p in plans:
        if p.needs_changes:
            by_logdir.setdefault(real_log_dir_of(p.partition_dir), []).append(p)  # symlinks resolved: the real .lock
    roots = {d: backup_dir(d) if callable(backup_dir) else backup_dir for d in by_logdir}
    for root in dict.fromkeys(roots.values()):
        check_backup_location(root, by_logdir)  # before anything is written, .lock included
    reports = []
    locks = [LogDirLock(d, force=force) for d in by_logdir]
    try:
        for lock in locks:  # every lock before the first write
            lock.acquire()
        backups: dict[str, object] = {}
        for log_dir, group in by_logdir.items():
            root = roots[log_dir]
            by_partition: dict[str, list] = {}
            for p in group:
                by_partition.setdefault(p.partition_dir, []).append(p)
            for partition_dir, partition_plans in by_partition.items():
                backup = backups.get(root)
                if backup is None:  # made on first use: a run that refuses everything leaves no backup dir
                    backup = backups[root] = new_backup(root)
                if on_start is not None:
                    on_start(partition_dir)
                try:
                    done = apply(partition_plans, backup)
                except PartitionRefused as e:
                    if on_refused is None:
                        raise
                    on_refused(partition_plans, e)
                    continue
                for report in done:
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
    on_start: Callable[[str], None] | None = None,
    on_refused: Callable[[Sequence[ReindexPlan], PartitionRefused], None] | None = None,
) -> list[ReindexReport]:
    """Apply several reindex plans (see :func:`apply_locked`)."""
    return apply_locked(
        plans, backup_dir, apply_reindex_partition, Backup,
        force=force, allow_transitional=allow_transitional, on_report=on_segment,
        on_start=on_start, on_refused=on_refused,
    )
