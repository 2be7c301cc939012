"""Backups: every byte a command removes or replaces, kept outside the log dir with a
``MANIFEST.json`` (:mod:`~kafkatool.safety.manifest`), a ``RESTORE.txt`` and a ``SHA256SUMS``
(:mod:`~kafkatool.safety.restore_script`)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import time
from typing import Iterable, Sequence

from kafkatool.segment import files as names
from kafkatool.safety.durable import (
    RepairError,
    TEMP_SUFFIX,
    WriteError,
    fault_point,
    fsync_dir,
    fsync_fd,
    iter_range,
    sha256_hex,
    take_owner,
    write_all,
    write_error,
)
from kafkatool.safety.manifest import (
    DIR_MODE,
    MANIFEST,
    MANIFEST_FORMAT,
    RESTORE_SCRIPT,
    SUMS,
    BackupEntry,
    FileState,
    Piece,
    mode_text,
    parse_manifest,
)
from kafkatool.safety.restore_script import render_restore_script, render_sums

__all__ = [
    "Backup",
    "BackupLocationError",
    "TruncateBackup",
    "check_backup_location",
    "default_backup_dir",
]


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


class BackupLocationError(RepairError):
    """The backup dir is a log dir or lies inside one the run changes, or it is not safe to write."""


def check_backup_location(backup_dir: str, log_dirs: Iterable[str]) -> None:
    """Refuse a backup dir that is one of ``log_dirs`` or lies anywhere inside one, after
    resolving symlinks on both sides.

    Inside a partition dir or equal to the log dir, the whole-dir exchange swaps the backup
    out with the old state and removes it; anywhere else inside the log dir, a broker refuses
    to load the log dir (a directory that is not a partition). A directory holding
    ``meta.properties`` above the backup dir is a log dir too (another one of the broker's).
    Call it before anything is written: before the lock (which may create ``.lock``) and
    before the first backup.
    """
    given = os.path.abspath(backup_dir)
    real = os.path.realpath(backup_dir)
    log_dirs = list(log_dirs)
    # any other log dir of the broker (JBOD) too: a directory holding meta.properties
    ancestor = real
    while True:
        if os.path.isfile(os.path.join(ancestor, names.META_PROPERTIES)):
            log_dirs.append(ancestor)
            break
        parent = os.path.dirname(ancestor)
        if parent == ancestor:
            break
        ancestor = parent
    for log_dir in log_dirs:
        real_log = os.path.realpath(log_dir)
        inside = real == real_log or real.startswith(real_log.rstrip(os.sep) + os.sep)
        if not inside:
            continue
        where = "is the log dir" if real == real_log else "lies inside the log dir"
        shown = "" if real == given else f" (really {real})"
        raise BackupLocationError(
            f"refusing this backup dir{shown}: it {where} {real_log}; a partition's exchange would remove it "
            "with the old files, and a broker refuses a log dir holding a directory that is not a partition. "
            "Choose a --backup-dir outside the log dir",
            path=given,
        )


def _split_name(name: str) -> tuple[str, str]:
    """``00.log.0-9.bytes`` -> (``00.log.0-9``, ``.bytes``): a numbered variant goes before ``.bytes``."""
    return (name[: -len(".bytes")], ".bytes") if name.endswith(".bytes") else (name, "")


_RUN_SEQ = 0


def _new_run_id(now: float) -> str:
    global _RUN_SEQ
    _RUN_SEQ += 1
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{int((now % 1) * 1e6):06d}Z"
    return f"{stamp}-{os.getpid()}-{_RUN_SEQ}"


class Backup:
    """A backup directory that several partitions and several runs may share.

    Layout: ``<partition dir name>/<file>`` for whole originals, ``<partition dir name>/<file>.<start>-<end>.bytes``
    for removed ranges, and ``MANIFEST.json``, ``RESTORE.txt``, ``SHA256SUMS`` at the top. The
    three are rewritten (a temp file, fsync, rename) after every file is saved (once per
    :meth:`batch`, which a command wraps around the backup step of a partition), under an
    exclusive ``flock`` on the backup dir: the manifest on disk is read and this run's entries
    are added to those already there (other runs' entries are never dropped, a file is never
    overwritten: O_EXCL|O_NOFOLLOW, a numbered name when one exists, so a symlink planted in
    the backup dir is never followed). An entry is recorded only once every byte it names is
    fsynced, so an interrupted or failed backup never looks more complete than it is.

    Directories are created ``0700``; each backed-up file gets the original's mode, mtime and
    (when privileged) owner. Every write error names its file (:class:`WriteError`).
    """

    def __init__(self, root: str, tool: str = "kafkatool") -> None:
        self.root = os.path.abspath(root)
        self.tool = tool
        self.entries: list[BackupEntry] = []
        now = time.time()
        self.run = _new_run_id(now)
        self.started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        self._fd: int | None = None
        self._subdirs: dict[str, int] = {}
        self._others: tuple[list[BackupEntry], list[dict], dict] | None = None  # other runs' part of the manifest
        self._written: tuple[int, ...] | None = None  # (dev, ino, size, mtime) of the manifest this object wrote last
        self._lock_depth = 0
        self._batching = 0
        self._dirty = False
        self._unsynced: set[str] = set()

    # ------------------------------------------------------------------ the directory

    def _root_fd(self) -> int:
        if self._fd is None:
            existed = os.path.isdir(self.root)
            try:
                os.makedirs(self.root, mode=DIR_MODE, exist_ok=True)
                fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as e:
                raise write_error(e, self.root, "create the backup dir") from None
            st = os.fstat(fd)
            if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
                os.close(fd)
                raise BackupLocationError(
                    f"refusing a backup dir that others can write to (mode {mode_text(st.st_mode)}): "
                    "they could change the backup; chmod go-w it or choose another", path=self.root)
            if not existed:
                fsync_dir(os.path.dirname(self.root))
            self._fd = fd
        return self._fd

    def _subdir(self, name: str) -> int:
        """The backup's directory for one partition dir, created 0700; a symlink is refused."""
        fd = self._subdirs.get(name)
        if fd is not None:
            return fd
        root = self._root_fd()
        where = os.path.join(self.root, name)
        created = False
        try:
            os.mkdir(name, DIR_MODE, dir_fd=root)
            created = True
        except FileExistsError:
            pass
        except OSError as e:
            raise write_error(e, where, "create the directory") from None
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise BackupLocationError("refusing: this name in the backup dir is taken by something that is "
                                          "not a directory (a symlink is never followed)", path=where) from None
            raise write_error(e, where, "open the directory") from None
        if not created:
            st = os.fstat(fd)
            if st.st_uid != os.geteuid() or st.st_mode & 0o022:
                os.close(fd)
                raise BackupLocationError(
                    f"refusing: this directory of the backup dir belongs to uid {st.st_uid} (mode "
                    f"{mode_text(st.st_mode)}), who could change the backup", path=where)
        else:
            fsync_dir(self.root)
        self._subdirs[name] = fd
        return fd

    def close(self) -> None:
        for fd in [*self._subdirs.values(), *([] if self._fd is None else [self._fd])]:
            os.close(fd)
        self._subdirs.clear()
        self._fd = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _where(self, path: str) -> tuple[str, str, str]:
        """``(real log dir, partition dir name, path relative to the log dir)`` of a file to back up;
        refuses when the backup dir lies inside that log dir."""
        real_dir = os.path.realpath(os.path.dirname(os.path.abspath(path)))
        log_dir, part = os.path.split(real_dir)
        check_backup_location(self.root, [log_dir])
        return log_dir, part, os.path.join(part, os.path.basename(path))

    def _create(self, sub: int, name: str, taken: set[str]) -> tuple[int, str]:
        """Create a new file ``name`` (or ``name.1``, ``name.2``, ...) in ``sub``: O_EXCL|O_NOFOLLOW,
        never a name that exists or that ``taken`` reserves. Returns ``(fd, name chosen)``."""
        stem, suffix = _split_name(name)
        n = 0
        while True:
            candidate = name if n == 0 else f"{stem}.{n}{suffix}"
            n += 1
            if candidate in taken:
                continue
            try:
                fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=sub)
                return fd, candidate
            except FileExistsError:
                continue
            except OSError as e:
                raise write_error(e, os.path.join(self.root, candidate), "create") from None

    def _taken(self, part: str) -> set[str]:
        """Names in ``part`` that entries of any run reserve (a file to be moved there later)."""
        others = self._others[0] if self._others else []
        out = set()
        for e in [*others, *self.entries]:
            for f in ([e.backup_file] if e.backup_file else []) + [p.file for p in e.pieces]:
                head, _, tail = f.partition(os.sep)
                if head == part:
                    out.add(tail)
        return out

    def _discard(self, sub: int, name: str) -> None:
        """Remove a file this run created but could not complete (best effort): no partial file stays."""
        try:
            os.unlink(name, dir_fd=sub)
        except OSError:
            pass

    # ------------------------------------------------------------------ the manifest

    @contextlib.contextmanager
    def _locked(self):
        """An exclusive flock on the backup dir, with the other runs' part of the manifest loaded
        (re-entrant: a :meth:`batch` holds it for its whole block)."""
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        root = self._root_fd()
        try:
            fcntl.flock(root, fcntl.LOCK_EX)
        except OSError as e:
            raise write_error(e, self.root, "lock") from None
        self._lock_depth = 1
        try:
            self._load_others(root)
            yield
        finally:
            self._lock_depth = 0
            fcntl.flock(root, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def batch(self):
        """Save several files, publishing MANIFEST.json, RESTORE.txt and SHA256SUMS once at the end
        of the block instead of after every file (one manifest write, not one per file: the
        manifest grows with the files, so per-file writes cost O(n^2)).

        The caller must not remove or replace anything the block backs up before the block ends:
        until then the manifest on disk does not cover those files. The backup dir's flock is held
        for the block, so a concurrent run's backup waits (and no name this run reserves can be
        taken meanwhile). If the block raises, what was saved completely is still published (best
        effort) and the error propagates.
        """
        with self._locked():
            self._batching += 1
            failed = False
            try:
                yield self
            except BaseException:
                failed = True
                raise
            finally:
                self._batching -= 1
                if not self._batching and self._dirty:
                    try:
                        self._publish()
                    except Exception:
                        if not failed:
                            raise

    def _load_others(self, root: int) -> None:
        try:
            st = os.stat(MANIFEST, dir_fd=root, follow_symlinks=False)
        except FileNotFoundError:
            if self._others is None:
                self._others = ([], [], {})
            return
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
            raise BackupLocationError("refusing: MANIFEST.json here is not a regular file", path=self.root)
        if self._others is not None and self._written == (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns):
            return  # nobody else wrote it since: what we know is current
        fd = os.open(MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root)
        with os.fdopen(fd, "rb") as f:
            data = f.read()
        parsed = parse_manifest(data, self.root)
        top = json.loads(data.decode("utf-8"))
        self._others = ([e for e in parsed.entries if e.run != self.run],
                        [r for r in parsed.runs if r.get("run") != self.run], {"created": top.get("created")})

    def _record(self, entry: BackupEntry) -> BackupEntry:
        """Add ``entry`` (the caller holds :meth:`_locked`) and publish the three index files
        (at the end of a :meth:`batch`)."""
        others = self._others[0] if self._others else []
        entry.seq = max([e.seq for e in others] + [e.seq for e in self.entries] + [0]) + 1
        entry.run, entry.tool = self.run, self.tool
        self.entries.append(entry)
        if self._batching:
            self._dirty = True
            return entry
        try:
            self._publish()
        except BaseException:
            self.entries.pop()
            raise
        return entry

    def all_entries(self) -> list[BackupEntry]:
        """Every entry of the backup dir (other runs' as last read, and this run's), in order."""
        others = self._others[0] if self._others else []
        return sorted([*others, *self.entries], key=lambda e: e.seq)

    def _publish(self) -> None:
        root = self._root_fd()
        for part in sorted(self._unsynced):  # the names of the files saved in a batch
            fsync_dir(part, dir_fd=root)
        self._unsynced.clear()
        self._dirty = False
        entries = self.all_entries()
        other_runs = self._others[1] if self._others else []
        created = (self._others[2].get("created") if self._others else None) or self.started
        runs = [*other_runs, {"run": self.run, "tool": self.tool, "pid": os.getpid(), "started": self.started}]
        head = {
            "format": MANIFEST_FORMAT,
            "tool": "kafkatool",
            "created": created,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "runs": runs,
        }
        # compact JSON, one file entry per line (greppable); lone surrogates of non-UTF-8 names as \udcXX
        text = json.dumps(head, separators=(",", ":"))[:-1] + ',"files":[\n' + ",\n".join(
            json.dumps(e.to_json(), separators=(",", ":")) for e in entries) + "\n]}\n"
        self._replace(MANIFEST, text.encode("ascii"))
        st = os.stat(MANIFEST, dir_fd=root, follow_symlinks=False)
        self._written = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        self._replace(RESTORE_SCRIPT, render_restore_script(self.root, entries))
        self._replace(SUMS, render_sums(entries))
        fsync_dir(self.root)

    def _replace(self, name: str, data: bytes) -> None:
        """Write ``name`` at the top of the backup dir atomically (temp file, fsync, rename)."""
        root = self._root_fd()
        tmp = name + TEMP_SUFFIX
        path = os.path.join(self.root, name)
        try:
            os.unlink(tmp, dir_fd=root)  # a leftover of a run killed while writing it (we hold the flock)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise write_error(e, os.path.join(self.root, tmp), "remove") from None
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=root)
        except OSError as e:
            raise write_error(e, path, "create") from None
        try:
            try:
                write_all(fd, data, path)
                fsync_fd(fd, path)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=root, dst_dir_fd=root)
        except OSError as e:
            self._discard(root, tmp)
            raise (e if isinstance(e, WriteError) else write_error(e, path, "replace")) from None
        except BaseException:
            self._discard(root, tmp)
            raise

    # ------------------------------------------------------------------ saving files

    def _copy_in(self, src_fd: int, src_path: str, st: os.stat_result, part: str, name: str, start: int, end: int,
                 hashers: Sequence = ()) -> tuple[str, str]:
        """Copy ``[start, end)`` of ``src_fd`` into a new file of the backup (the original's owner,
        mode and mtime; fsynced); return ``(name relative to the backup dir, sha256 of the copy)``.
        ``hashers`` are fed the same bytes. A failure removes the partial copy."""
        sub = self._subdir(part)
        fd, chosen = self._create(sub, name, self._taken(part))
        where = os.path.join(self.root, part, chosen)
        digest = hashlib.sha256()
        try:
            try:
                for piece in iter_range(src_fd, start, end, src_path):
                    write_all(fd, piece, where)
                    digest.update(piece)
                    for h in hashers:
                        h.update(piece)
                take_owner(fd, st, where)
                fsync_fd(fd, where)
            finally:
                os.close(fd)
            if self._batching:
                self._unsynced.add(part)  # once, before the manifest names the file
            else:
                fsync_dir(part, dir_fd=self._root_fd())
        except BaseException:
            self._discard(sub, chosen)
            raise
        return os.path.join(part, chosen), digest.hexdigest()

    def save(self, path: str, new_data: bytes | None, reason: str = "", *,
             result: FileState | None = None) -> BackupEntry:
        """Keep ``path`` (if it exists) whole in the backup, fsynced, before ``new_data`` replaces it
        (None: the file is going away). Records the original's and the result's size and sha256.
        ``result`` gives the new file's size and sha256 instead of ``new_data`` (a file too big to
        hold: ``convert --in-place`` hashes the new ``.log`` once, streaming)."""
        path = os.path.abspath(path)
        log_dir, part, rel = self._where(path)
        if result is None and new_data is not None:
            result = FileState(len(new_data), sha256_hex(new_data))
        try:
            src = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            with self._locked():
                return self._record(BackupEntry("created", log_dir, rel, reason, None, result))
        except OSError as e:
            raise RepairError(f"cannot read: {e.strerror}", path=path) from None
        try:
            st = os.fstat(src)
            with self._locked():
                name, sha = self._copy_in(src, path, st, part, os.path.basename(path), 0, st.st_size)
                action = "removed" if result is None else "rewritten"
                return self._record(BackupEntry(action, log_dir, rel, reason, FileState.of(st, sha), result, name))
        finally:
            os.close(src)

    def restore_text(self) -> str:
        """RESTORE.txt as text (lone surrogates of non-UTF-8 names kept)."""
        return render_restore_script(self.root, self.all_entries()).decode("utf-8", "surrogateescape")


class TruncateBackup(Backup):
    """A :class:`Backup` that also holds removed byte ranges (:meth:`save_cut`) and whole files
    moved out of the partition (:meth:`plan_move`)."""

    def save_cut(self, log_path: str, removed: Sequence[tuple[int, int, str]], original_size: int,
                 result_size: int, reason: str = "") -> BackupEntry:
        """Keep the ``removed`` ranges ``(start, end, reason)`` of ``log_path`` in the backup, each
        as ``<file>.<start>-<end>.bytes`` (fsynced), in one streamed pass over the file that also
        takes the sha256 of the whole original and of the result (the bytes outside the ranges):
        a multi-GiB ``.log`` is read once, 1 MiB at a time."""
        log_path = os.path.abspath(log_path)
        log_dir, part, rel = self._where(log_path)
        ranges = sorted(removed)
        pos = 0
        for start, end, _why in ranges:
            if start < pos or end < start or end > original_size:
                raise RepairError(f"bad byte range [{start}, {end}) to back up", path=log_path)
            pos = end
        try:
            src = os.open(log_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            raise RepairError(f"cannot read: {e.strerror}", path=log_path) from None
        whole, kept = hashlib.sha256(), hashlib.sha256()
        kept_size = 0
        pieces: list[Piece] = []
        try:
            st = os.fstat(src)
            if st.st_size != original_size:
                raise RepairError("the segment changed since it was planned; run again", path=log_path,
                                  expected=f"{original_size} bytes", found=f"{st.st_size} bytes")
            pos = 0
            for start, end, why in ranges:
                kept_size += self._hash_range(src, pos, start, (whole, kept), log_path)
                name, sha = self._copy_in(src, log_path, st, part, f"{os.path.basename(log_path)}.{start}-{end}.bytes",
                                          start, end, (whole,))
                pieces.append(Piece(start, end, name, sha, why))
                fault_point("after backup piece")
                pos = end
            kept_size += self._hash_range(src, pos, original_size, (whole, kept), log_path)
        finally:
            os.close(src)
        if kept_size != result_size:
            raise RepairError("the ranges to remove do not leave the planned size", path=log_path,
                              expected=result_size, found=kept_size)
        with self._locked():
            return self._record(BackupEntry("cut", log_dir, rel, reason, FileState.of(st, whole.hexdigest()),
                                            FileState(result_size, kept.hexdigest()), None, tuple(pieces)))

    @staticmethod
    def _hash_range(fd: int, start: int, end: int, hashers: Sequence, path: str) -> int:
        for piece in iter_range(fd, start, end, path):
            for h in hashers:
                h.update(piece)
        return end - start

    def save_range(self, log_path: str, start: int, src, size: int, original_size: int, result_size: int,
                   reason: str) -> BackupEntry:
        """One removed range (see :meth:`save_cut`, which takes every range of a file in one pass)."""
        return self.save_cut(log_path, [(start, start + size, reason)], original_size, result_size, reason)

    def plan_move(self, path: str, reason: str) -> tuple[BackupEntry, str]:
        """Record a file that will be moved into the backup (its sha256 taken now, by streaming);
        return the entry and its destination, a name no file and no other entry has."""
        path = os.path.abspath(path)
        log_dir, part, rel = self._where(path)
        try:
            src = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            raise RepairError(f"cannot read: {e.strerror}", path=path) from None
        try:
            st = os.fstat(src)
            digest = hashlib.sha256()
            self._hash_range(src, 0, st.st_size, (digest,), path)
        finally:
            os.close(src)
        sub = self._subdir(part)
        with self._locked():
            taken = self._taken(part)
            stem, suffix = _split_name(os.path.basename(path))
            n = 0
            while True:
                name = os.path.basename(path) if n == 0 else f"{stem}.{n}{suffix}"
                n += 1
                if name in taken:
                    continue
                try:
                    os.stat(name, dir_fd=sub, follow_symlinks=False)
                except FileNotFoundError:
                    break
            entry = self._record(BackupEntry("moved", log_dir, rel, reason, FileState.of(st, digest.hexdigest()),
                                             None, os.path.join(part, name)))
        return entry, os.path.join(self.root, part, name)
