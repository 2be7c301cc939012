"""The write-safety layer's ground floor: its errors, durable small writes, and the crash-test hook.

Every step of an apply that writes calls :func:`fault_point`, so the crash-safety tests can
SIGKILL a run at each step in turn (``$KAFKATOOL_FAULT_AT``).
"""

from __future__ import annotations

import hashlib
import os
import signal
from typing import Iterator

from kafkatool.errors import KafkaToolError

__all__ = [
    "COPY_CHUNK",
    "FAULT_ENV",
    "JOURNAL_SUFFIX",
    "TEMP_SUFFIX",
    "LiveBrokerError",
    "PartitionRefused",
    "RepairError",
    "TransitionalDirError",
    "WriteError",
    "fault_point",
    "fsync_dir",
    "fsync_fd",
    "hash_file",
    "iter_range",
    "log_dir_of",
    "read_or_none",
    "real_log_dir_of",
    "reset_fault_count",
    "sha256_hex",
    "take_owner",
    "write_all",
    "write_durably",
    "write_error",
]


TEMP_SUFFIX = ".kafkatool-tmp"
"""Suffix of a new file being written beside its target; Kafka's loader ignores it (§12.3)."""
JOURNAL_SUFFIX = ".kafkatool-journal"
"""``<segment prefix>.kafkatool-journal``: present between the commit point and the last rename."""
FAULT_ENV = "KAFKATOOL_FAULT_AT"
"""Test hook: ``KAFKATOOL_FAULT_AT=n`` makes the n-th write step SIGKILL the process."""
COPY_CHUNK = 1 << 20


class RepairError(KafkaToolError):
    """A repair refused to run, or found its own output wrong."""


class LiveBrokerError(RepairError):
    """A live Kafka holds the log dir's ``.lock`` (§11.5)."""


class TransitionalDirError(RepairError):
    """A ``-delete``/``-future``/``-stray`` partition dir (§2.1) the user did not ask to repair."""


class PartitionRefused(RepairError):
    """Apply found, under the lock, that one partition dir must not be written (it changed since
    it was planned, another command's journal appeared): nothing of it was written.
    :func:`apply_locked` reports it through ``on_refused`` and goes on with the other partitions."""

    kind: str = "changed"

    def __init__(self, message: str, *, kind: str = "changed", **kw) -> None:
        super().__init__(message, **kw)
        self.kind = kind


# ----------------------------------------------------------------------------- fault injection

_fault_count = 0


def fault_point(label: str) -> None:
    """Count a step of an apply; die by SIGKILL at step ``$KAFKATOOL_FAULT_AT`` (crash-safety tests)."""
    global _fault_count
    target = os.environ.get(FAULT_ENV)
    if not target:
        return
    _fault_count += 1
    if _fault_count == int(target):
        os.kill(os.getpid(), signal.SIGKILL)


def reset_fault_count() -> None:
    """Start counting :func:`fault_point` steps from zero again (a crash test's forked child)."""
    global _fault_count
    _fault_count = 0


# ----------------------------------------------------------------------------- small file helpers


class WriteError(RepairError, OSError):
    """A write of the safety layer failed: a full disk, a read-only file system, a permission.

    The message names the file (``PATH: cannot write: No space left on device``); it is also
    an :class:`OSError` with the original ``errno``, so a caller catching OSError still does.
    """


def write_error(e: OSError, path: str, doing: str = "write") -> WriteError:
    """``e`` as a :class:`WriteError` that names ``path`` and what was being done."""
    err = WriteError(f"cannot {doing}: {e.strerror or e}", path=path)
    err.errno, err.strerror, err.filename = e.errno, e.strerror, path
    return err


def fsync_dir(path: str, *, dir_fd: int | None = None) -> None:
    """fsync a directory (``dir_fd``: ``path`` is relative to it); an error names the directory."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise write_error(e, path, "fsync the directory") from None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_or_none(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def write_all(fd: int, data: bytes | memoryview, path: str) -> None:
    """Write every byte of ``data`` to ``fd``; an error (a full disk) names ``path``."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as e:
        raise write_error(e, path) from None


def fsync_fd(fd: int, path: str) -> None:
    """fsync ``fd``: a full disk may only show here (delayed allocation); the error names ``path``."""
    try:
        os.fsync(fd)
    except OSError as e:
        raise write_error(e, path, "fsync") from None


def write_durably(path: str, data: bytes, *, exclusive: bool = False, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` and fsync it (not the directory); an error names ``path``.

    With ``exclusive`` the file must not exist and a symlink at ``path`` is not followed.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_EXCL | os.O_NOFOLLOW if exclusive else os.O_TRUNC)
    try:
        fd = os.open(path, flags, mode)
    except OSError as e:
        raise write_error(e, path, "create") from None
    try:
        write_all(fd, data, path)
        fsync_fd(fd, path)
    finally:
        os.close(fd)


def hash_file(path: str, *, dir_fd: int | None = None) -> tuple[int, str]:
    """``(size, sha256 hex)`` of a file, read 1 MiB at a time (memory stays flat); symlinks not followed."""
    digest = hashlib.sha256()
    size = 0
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        while True:
            piece = os.read(fd, COPY_CHUNK)
            if not piece:
                break
            digest.update(piece)
            size += len(piece)
    finally:
        os.close(fd)
    return size, digest.hexdigest()


def iter_range(fd: int, start: int, end: int | None, path: str) -> Iterator[bytes]:
    """The bytes ``[start, end)`` of ``fd`` (to its end when ``end`` is None), 1 MiB at a time; a read
    error or a file that ends before ``end`` is a :class:`RepairError` naming ``path`` and the position."""
    pos = start
    while end is None or pos < end:
        try:
            piece = os.pread(fd, COPY_CHUNK if end is None else min(COPY_CHUNK, end - pos), pos)
        except OSError as e:
            raise RepairError(f"cannot read: {e.strerror}", path=path, position=pos) from None
        if not piece:
            if end is None:
                return
            raise RepairError(f"the file ended at byte {pos}, before byte {end}", path=path, position=pos)
        yield piece
        pos += len(piece)


def log_dir_of(partition_dir: str) -> str:
    """The log dir holding a partition dir: its parent (§2.1), as the path names it."""
    return os.path.dirname(os.path.abspath(partition_dir))


def real_log_dir_of(partition_dir: str) -> str:
    """The log dir that really holds a partition dir: the parent of its real path.

    A partition dir named through a symlink (``/tmp/p -> /data/kafka/t-0``) belongs to
    ``/data/kafka``, not ``/tmp``: the lock and the backup-location checks use this one.
    """
    return os.path.dirname(os.path.realpath(partition_dir))


def take_owner(fd: int, st: os.stat_result, path: str | None = None, *, times: bool = True) -> None:
    """Give the file (or directory) open as ``fd`` the owner and mode of ``st`` (the original's
    stat), and with ``times`` its mtime: a backup file, a restored one, a file of a staging dir.
    chown needs privileges, so a PermissionError there leaves it ours (as a plain copy would);
    the mode is set after it (chown clears set-id bits), the mtime last. Other errors name
    ``path``."""
    where = path if path is not None else f"<fd {fd}>"
    mine = os.fstat(fd)
    if (mine.st_uid, mine.st_gid) != (st.st_uid, st.st_gid):
        try:
            os.fchown(fd, st.st_uid, st.st_gid)
        except PermissionError:
            pass
        except OSError as e:
            raise write_error(e, where, "chown") from None
    try:
        os.fchmod(fd, st.st_mode & 0o7777)
        if times:
            os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
    except OSError as e:
        raise write_error(e, where, "set the mode of") from None
