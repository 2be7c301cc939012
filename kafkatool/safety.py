"""The write-safety layer every command that writes goes through (spec §11.5).

* :class:`LogDirLock` refuses to touch a log dir a live broker holds (a POSIX ``fcntl``
  lock on ``<logdir>/.lock``, held for the whole write);
* :class:`Backup` keeps every byte a command removes or replaces, outside the log dir,
  with a ``MANIFEST.json`` and a ``RESTORE.txt``; :class:`TruncateBackup` adds removed
  byte ranges and whole moved files;
* small durable-write helpers (:func:`write_durably`, :func:`fsync_dir`) and the
  crash-test hook :func:`fault_point`.

No click and no rich here.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shlex
import signal
import struct
import time
from dataclasses import dataclass

from kafkatool.errors import KafkaToolError
from kafkatool.segment import files as names

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


# ----------------------------------------------------------------------------- small file helpers


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_or_none(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def write_durably(path: str, data: bytes, *, exclusive: bool = False) -> None:
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
    """The log dir holding a partition dir: its parent (§2.1), as the path names it."""
    return os.path.dirname(os.path.abspath(partition_dir))


def real_log_dir_of(partition_dir: str) -> str:
    """The log dir that really holds a partition dir: the parent of its real path.

    A partition dir named through a symlink (``/tmp/p -> /data/kafka/t-0``) belongs to
    ``/data/kafka``, not ``/tmp``: the lock and the backup-location checks use this one.
    """
    return os.path.dirname(os.path.realpath(partition_dir))


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
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
                self.created = True
            except FileExistsError:  # a broker created it just now: test it like any other
                fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
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
                fsync_dir(x)
        return d

    def save(self, path: str, new_data: bytes | None, reason: str = "") -> BackupEntry:
        """Copy ``path`` (if it exists) into the backup, fsynced, before anything replaces it."""
        path = os.path.abspath(path)
        old = read_or_none(path)
        new_meta = (None, None) if new_data is None else (len(new_data), sha256_hex(new_data))
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
            write_durably(target, old, exclusive=True)
            fsync_dir(d)
            action = "removed" if new_data is None else "rewritten"
            entry = BackupEntry(
                path, action, os.path.relpath(target, self.root), len(old), sha256_hex(old), *new_meta, reason=reason
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
            write_durably(tmp, text.encode())
            os.replace(tmp, os.path.join(self.root, name))
        fsync_dir(self.root)

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



@dataclass
class RangeEntry(BackupEntry):
    """A removed byte range ``[start, end)`` of ``original_path`` (MANIFEST.json, action ``bytes-removed``)."""

    start: int = 0
    end: int = 0
    original_size: int = 0
    result_size: int = 0


_SPLICE = r"""
import hashlib, os, sys
target, orig_size, new_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pieces = [(int(a), b) for a, b in zip(sys.argv[4::2], sys.argv[5::2])]
size = os.path.getsize(target)
if size == orig_size:
    print("already restored: " + target); sys.exit(0)
if size != new_size:
    sys.exit("refusing: %s is %d bytes, expected the truncated %d" % (target, size, new_size))
tmp = target + ".restore-tmp"
with open(target, "rb") as src, open(tmp, "wb") as out:
    for start, piece in pieces:
        n = start - out.tell()
        while n > 0:
            b = src.read(min(n, 1 << 20)); out.write(b); n -= len(b)
        with open(piece, "rb") as p:
            while True:
                b = p.read(1 << 20)
                if not b: break
                out.write(b)
    while True:
        b = src.read(1 << 20)
        if not b: break
        out.write(b)
    out.flush(); os.fsync(out.fileno())
if os.path.getsize(tmp) != orig_size:
    os.unlink(tmp); sys.exit("refusing: the spliced file has the wrong size")
os.replace(tmp, target)
print("restored " + target)
"""


class TruncateBackup(Backup):
    """A :class:`Backup` that also holds removed byte ranges and whole moved files.

    ``RESTORE.txt`` is a shell script: it splices every ``.bytes`` range back into its
    ``.log`` at its original position (a small embedded Python program), then copies the
    rewritten and moved originals back. Running it twice is harmless.
    """

    def save_range(self, log_path: str, start: int, src, size: int, original_size: int, result_size: int, reason: str) -> RangeEntry:
        """Copy ``size`` bytes of ``src`` (an open file of ``log_path``) from ``start`` into the
        backup, streamed (memory stays flat), fsynced, and record where they came from."""
        log_path = os.path.abspath(log_path)
        d = self._ensure(os.path.basename(os.path.dirname(log_path)))
        target = os.path.join(d, f"{os.path.basename(log_path)}.{start}-{start + size}.bytes")
        n = 0
        while os.path.exists(target):
            n += 1
            target = os.path.join(d, f"{os.path.basename(log_path)}.{start}-{start + size}.{n}.bytes")
        digest = hashlib.sha256()
        src.seek(start)
        left = size
        with open(target, "xb") as f:
            while left > 0:
                piece = src.read(min(left, COPY_CHUNK))
                if not piece:
                    raise RepairError(f"{log_path}: the file ended while backing up bytes [{start}, {start + size})")
                f.write(piece)
                digest.update(piece)
                left -= len(piece)
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(d)
        entry = RangeEntry(log_path, "bytes-removed", os.path.relpath(target, self.root), size, digest.hexdigest(),
                           reason=reason, start=start, end=start + size, original_size=original_size,
                           result_size=result_size)
        self.entries.append(entry)
        self._write_index()
        return entry

    def plan_move(self, path: str, reason: str) -> tuple[BackupEntry, str]:
        """Record a file that will be moved into the backup; return the entry and its destination."""
        path = os.path.abspath(path)
        d = self._ensure(os.path.basename(os.path.dirname(path)))
        target = os.path.join(d, os.path.basename(path))
        n = 0
        while os.path.exists(target) or any(e.backup_file == os.path.relpath(target, self.root) for e in self.entries):
            n += 1
            target = os.path.join(d, f"{os.path.basename(path)}.{n}")
        entry = BackupEntry(path, "moved", os.path.relpath(target, self.root), os.path.getsize(path), None, reason=reason)
        self.entries.append(entry)
        self._write_index()
        return entry, target

    def restore_text(self) -> str:
        q = shlex.quote
        lines = [
            "#!/bin/sh",
            "# Put back what `kafkatool truncate` removed or replaced. Stop the broker first.",
            "# Run it with: sh RESTORE.txt   (it is safe to run twice)",
            "# 1. Every removed byte range of a .log goes back at its original position.",
            "# 2. Every rewritten file is copied back; every file moved here is copied back.",
            "# MANIFEST.json lists each range (start, end) and file with its size and sha256.",
            "set -e",
            "KAFKATOOL_SPLICE=" + q(_SPLICE),
        ]
        ranges: dict[str, list[RangeEntry]] = {}
        for e in self.entries:
            if isinstance(e, RangeEntry):
                ranges.setdefault(e.original_path, []).append(e)
        for path, rs in ranges.items():
            rs.sort(key=lambda r: r.start)
            args = " ".join(f"{r.start} {q(os.path.join(self.root, r.backup_file or ''))}" for r in rs)
            lines.append(f'python3 -c "$KAFKATOOL_SPLICE" {q(path)} {rs[0].original_size} {rs[0].result_size} {args}')
        for e in self.entries:
            if isinstance(e, RangeEntry):
                continue
            if e.backup_file is not None:
                src = q(os.path.join(self.root, e.backup_file))
                lines.append(f"if [ -e {src} ]; then cp -p {src} {q(e.original_path)}; fi")
            else:
                lines.append(f"rm -f {q(e.original_path)}")
        return "\n".join(lines) + "\n"
