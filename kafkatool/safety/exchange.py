"""Writing a partition dir's new state: staged files, and the whole-dir exchange (spec §2.1, §12.3).

:func:`exchange_partition` switches a whole partition dir at once, so a crash at any point
leaves it complete-old or complete-new. The new state is built as a sibling *staging* dir
``<topic>-<partition>.<32 hex>-delete`` in the same log dir (the name Kafka gives a partition
being deleted, §2.1: a broker that finds one loads it, does not take it for a duplicate of the
partition, and deletes it, where any other directory name would fail the whole log dir). Small
files are written fresh and fsynced first (indexes are never hard-linked: the broker opens a
loaded segment's indexes writable and resizes them), then every unchanged ``.log`` is
hard-linked, so an interrupted staging dir never holds a ``.log`` without its indexes. After
the backup is complete, one ``renameat2(RENAME_EXCHANGE)`` swaps the staging dir and the
partition dir, and the staging dir, now holding the old state whose every byte is in the new
state (hard links) or in the backup, is removed. The 32 hex start with :data:`STAGING_TAG`,
so the next run (a dry run reports it) recognises and removes a leftover under the lock.
A command that rewrites whole files (``convert --in-place``) hands :func:`exchange_partition`
a ``build`` callback that writes them straight into the staging dir.

When the exchange is impossible (not Linux, no ``renameat2``, a file system that refuses
``RENAME_EXCHANGE``, a hard link refused, a subdirectory in the partition dir, or
``$KAFKATOOL_NO_EXCHANGE`` set), :class:`ExchangeUnavailable` sends the caller to the
journal (:mod:`kafkatool.safety.journal`).
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import sys
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Sequence

from kafkatool.segment import files as names
from kafkatool.safety.durable import RepairError, TEMP_SUFFIX, fault_point, fsync_dir, log_dir_of, take_owner

__all__ = [
    "NO_EXCHANGE_ENV",
    "STAGING_TAG",
    "ExchangeUnavailable",
    "exchange_dirs",
    "exchange_partition",
    "exchange_unavailable",
    "find_staging_dirs",
    "is_staging_dir",
    "link_or_copy",
    "naming",
    "new_file",
    "rename_noreplace",
    "remove_staging_dirs",
    "stage_file",
    "staging_dir_name",
    "stat_or_none",
    "unlink_all",
]


@contextmanager
def naming(path: str, context: str = "") -> Iterator[None]:
    """An ``OSError`` without a file name (``write``, ``fsync``: a full disk) gets ``path``."""
    try:
        yield
    except OSError as e:
        if e.filename is None or context:
            strerror = (e.strerror or str(e)) + (f" ({context})" if context else "")
            raise OSError(e.errno, strerror, e.filename or path) from None
        raise


def stat_or_none(path: str) -> os.stat_result | None:
    if not path:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def new_file(path: str, data: bytes, like: os.stat_result | None, *, fault: bool = True) -> None:
    """Create ``path`` afresh (whatever had its name is removed first, never followed), write
    ``data``, give it ``like``'s owner and mode, fsync it. Errors name ``path``."""
    with naming(path):
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
STAGE_CHUNK = 8 << 20


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


_RENAME_NOREPLACE = 1  # linux/fs.h


def rename_noreplace(old: str, new: str) -> None:
    """Rename ``old`` to ``new`` atomically unless ``new`` exists (``renameat2(RENAME_NOREPLACE)``:
    even an empty directory at ``new`` is an ``OSError`` EEXIST, where ``os.rename`` replaces it).

    Raises :class:`ExchangeUnavailable` when there is no ``renameat2`` or the file system refuses
    the flag (the caller falls back to ``os.rename``); other errors are ``OSError`` naming both paths.
    """
    try:
        _renameat2()(old, new, _RENAME_NOREPLACE)
    except ExchangeUnavailable:
        raise
    except OSError as e:
        if e.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
            raise ExchangeUnavailable(f"renameat2(RENAME_NOREPLACE) is refused here ({os.strerror(e.errno)})",
                                      path=old) from None
        raise


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
        want = STAGE_CHUNK if end is None else min(end - pos, 1 << 30)
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
            piece = os.pread(src, min(want, STAGE_CHUNK), pos)
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
    with naming(dst):
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
    build: Callable[[str], Iterable[str]] | None = None,
    keep_unbuilt: bool = True,
) -> None:
    """Replace the whole partition dir by its new state in one ``RENAME_EXCHANGE`` (module doc).

    The new state is the partition dir's files, except: ``write`` (name -> bytes: a file
    replaced or created), ``cut`` (name of a ``.log`` -> the byte ranges of the old file it
    keeps, in order) and ``drop`` (names absent from the new state). A created file takes the
    owner and mode of ``like[name]`` (another file's name) or else of the partition's files.
    ``before_switch`` runs once the staging dir is complete and durable: the backup goes
    there, so every removed byte is saved before the switch.

    ``build(staging)`` fills the staging dir itself with whole files written straight into it
    (a converted 1 GiB ``.log`` is written once, never held in memory) and returns their
    names; it runs first, right after the staging dir is made, while the staging dir is still
    empty. A built file replaces the partition's file of that name. The staging dir must then
    hold exactly the names returned, each a regular file (no temp file, no subdirectory, no
    link: else :class:`RepairError` and nothing changed); each is fsynced here. With
    ``keep_unbuilt=False`` the new state is the built files (plus ``write`` and ``cut``) only:
    every other file of the partition dir is absent from it (``before_switch`` backs it up).

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
    kept = sorted(n for n in stats if n not in drop and (keep_unbuilt or n in write or n in cut))
    # a created file with no file to take after: like the partition's files (a .log), else the dir without x bits
    some = next((stats[n] for n in kept if n.endswith(".log")), next(iter(stats.values()), None))
    if some is None:
        some = os.stat_result((dir_stat.st_mode & ~0o111, *tuple(dir_stat)[1:]))
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
        # 0. the files a builder writes straight into the staging dir (before anything else is there)
        built = set() if build is None else _built_files(staging, build(staging), set(write) | set(cut))
        logs = [n for n in kept if n.endswith(_LOG_LIKE) and n not in cut and n not in write and n not in built]
        small = sorted((set(kept) | set(write)) - set(logs) - set(cut) - built)
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


def _built_files(staging: str, names_built: Iterable[str], taken: set[str]) -> set[str]:
    """Check what a ``build`` callback left in the staging dir: exactly the names it returned,
    each a plain name of a regular file, none of them also written or cut; fsync each one."""
    built: list[str] = []
    for n in names_built:
        if not isinstance(n, str) or n in ("", ".", "..") or os.sep in n or "\0" in n:
            raise RepairError(f"the builder named {n!r}, which is not a file name of the staging dir", path=staging)
        built.append(n)
    if len(set(built)) != len(built):
        raise RepairError("the builder named a file twice", path=staging)
    clash = sorted(set(built) & taken)
    if clash:
        raise RepairError(f"the builder wrote {clash[0]!r}, which is also written or cut", path=staging)
    present = set(os.listdir(staging))
    extra, missing = sorted(present - set(built)), sorted(set(built) - present)
    if extra or missing:
        what = (f"holds {extra[0]!r}, which the builder did not name" if extra
                else f"lacks {missing[0]!r}, which the builder named")
        raise RepairError(f"the staging dir {what}; nothing changed", path=staging)
    for n in sorted(built, key=lambda n: n.endswith(_LOG_LIKE)):  # the .log files last, as when staging
        p = os.path.join(staging, n)
        try:
            fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                         | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise RepairError("the builder left a symbolic link, not a file", path=p) from None
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise RepairError("the builder left something that is not a regular file", path=p)
            with naming(p):
                os.fsync(fd)
        finally:
            os.close(fd)
        fault_point("after built file")
    return set(built)


def unlink_all(paths: Iterable[str]) -> list[str]:
    removed = []
    for p in paths:
        try:
            os.unlink(p)
            removed.append(p)
        except FileNotFoundError:
            pass
    return removed
