"""The log dir's lock (spec §11.5): a live broker holds a POSIX ``fcntl`` lock on ``<logdir>/.lock``."""

from __future__ import annotations

import errno
import fcntl
import os
import struct

from kafkatool.segment import files as names
from kafkatool.safety.durable import LiveBrokerError, RepairError

__all__ = [
    "LogDirLock",
    "describe_pid",
    "lock_holder",
    "held_elsewhere",
]


# ----------------------------------------------------------------------------- the lock (§11.5)

# struct flock on Linux LP64 (x86_64, aarch64, ...): short l_type, short l_whence, off_t l_start,
# off_t l_len, pid_t l_pid, padded to 8 bytes ("0q").
_FLOCK = struct.Struct("hhqqi0q")
_HELD: dict[tuple[int, int], list[int]] = {}
"""``(st_dev, st_ino)`` of every ``.lock`` the :class:`LogDirLock` objects of this process hold -> their descriptors."""
_CLOSE_LATER: dict[tuple[int, int], list[int]] = {}
"""Descriptors of released :class:`LogDirLock` objects whose file another one still holds."""
_KEPT_FDS: list[int] = []
"""Descriptors :func:`lock_holder` must never close (closing one would drop this process's own lock)."""


def lock_holder(log_dir: str) -> int | None:
    """The PID of the process holding ``<log_dir>/.lock``, or None when nobody holds it.

    Asks the kernel about the lock itself (``fcntl(F_OFD_GETLK)``, falling back to
    ``F_GETLK``, on a ``struct flock`` for the whole file): the broker's lock is a POSIX record
    lock (``FileChannel.tryLock``), which ``flock(2)`` would not see. Returns -1 when the file
    is locked but its holder's PID is not visible from here (a process in another PID
    namespace, such as a broker in a container, or an open-file-description lock); compare
    the result with None. The log dir's real path is used (symlinks resolved). ``.lock`` is
    never created, and a lock this process holds is never dropped: its PID is returned.
    """
    path = os.path.join(os.path.realpath(log_dir), names.LOCK)
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if (st.st_dev, st.st_ino) in _HELD:
        return os.getpid()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    keep = False
    try:
        query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        try:
            # an OFD query also reports a lock of this very process (F_GETLK would not)
            answer = fcntl.fcntl(fd, getattr(fcntl, "F_OFD_GETLK", fcntl.F_GETLK), query)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
        l_type, _whence, _start, _len, pid = _FLOCK.unpack(answer)
        if l_type == fcntl.F_UNLCK:
            return None
        if pid == os.getpid():
            keep = True  # closing any descriptor of the file would drop our own lock
            _KEPT_FDS.append(fd)
        return pid if pid > 0 else -1
    finally:
        if not keep:
            os.close(fd)


def describe_pid(pid: int) -> str:
    """``PID 1234 (java)`` from ``/proc``, or ``an unknown process`` for -1."""
    if pid <= 0:
        return "a process whose PID is not visible here (another PID namespace?)"
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            comm = f.read().strip().decode("utf-8", "replace")
        return f"PID {pid} ({comm})"
    except OSError:
        return f"PID {pid}"


def held_elsewhere(log_dir: str) -> str | None:
    """``PID 1234 (java) holds the lock on this log dir (<real log dir>/.lock)`` when a process
    other than this one holds it, else None: why a plan made without the lock met files that
    moved under it (another kafkatool run switching them, or a broker)."""
    log_dir = os.path.realpath(log_dir)
    holder = lock_holder(log_dir)
    if holder is None or holder == os.getpid():
        return None
    return f"{describe_pid(holder)} holds the lock on this log dir ({os.path.join(log_dir, names.LOCK)})"


class LogDirLock:
    """Hold ``<log_dir>/.lock`` with a POSIX record lock for the whole repair (§11.5).

    The broker locks that file with ``FileChannel.tryLock``, which on Linux is
    ``fcntl(F_SETLK)``; ``flock(2)`` would not see it. The file is opened once, O_RDWR
    without O_CREAT: Python drops every POSIX lock of a file as soon as *any* descriptor of
    it in the process is closed. A missing ``.lock`` means no broker holds the dir; it is
    then created and locked so that a broker starting meanwhile fails to lock it. With
    ``force=True`` nothing is checked (for a copy the operator knows is offline).

    ``log_dir`` is resolved to its real path first: the lock of a log dir named through a
    symlink is the real directory's (give a partition dir's log dir as
    :func:`real_log_dir_of`). A refusal names the process holding the lock.
    """

    def __init__(self, log_dir: str, *, force: bool = False) -> None:
        self.log_dir = os.path.realpath(log_dir)
        self.path = os.path.join(self.log_dir, names.LOCK)
        self.force = force
        self._fd: int | None = None
        self._key: tuple[int, int] | None = None
        self.created = False

    def acquire(self) -> None:
        if self.force or self._fd is not None:
            return
        try:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                try:
                    fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
                    self.created = True
                except FileExistsError:  # a broker created it just now: test it like any other
                    fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except OSError as e:  # a read-only file system or .lock, a .lock that is a dir, ...
            raise RepairError(f"cannot open the lock file to lock it: {e.strerror}", path=self.path) from None
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        if key in _HELD:  # another LogDirLock of this process holds it: share it (closing fd would drop it)
            _HELD[key].append(fd)
            self._fd, self._key = fd, key
            return
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES):
                holder = lock_holder(self.log_dir)
                who = "another process" if holder is None else describe_pid(holder)
                raise LiveBrokerError(
                    f"{who} holds the lock on this log dir (a live Kafka broker?); "
                    "stop the broker first, or use --force only on a copy you know is offline",
                    path=self.path,
                ) from None
            raise RepairError(f"cannot lock: {e.strerror}", path=self.path) from None
        self._fd, self._key = fd, key
        _HELD[key] = [fd]

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fds = _HELD.get(self._key, [])
            if fd in fds:
                fds.remove(fd)
            if fds:  # another LogDirLock of this process still holds the file: close later
                _CLOSE_LATER.setdefault(self._key, []).append(fd)
                return
            _HELD.pop(self._key, None)
            for other in _CLOSE_LATER.pop(self._key, []) + [fd]:
                os.close(other)  # closing the descriptors drops the lock

    def __enter__(self) -> "LogDirLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
