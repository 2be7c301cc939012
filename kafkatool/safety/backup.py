"""Backups: every byte a command removes or replaces, kept outside the log dir with a
``MANIFEST.json``, a ``RESTORE.txt`` (``sh -e``) and a ``SHA256SUMS``."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shlex
import stat
import time
from dataclasses import dataclass
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


# ----------------------------------------------------------------------------- backups


MANIFEST = "MANIFEST.json"
"""The backup's index: every file a command changed, how to get the original back, and checksums."""
RESTORE_SCRIPT = "RESTORE.txt"
"""A shell script (``sh -e RESTORE.txt``) that puts everything back without kafkatool."""
SUMS = "SHA256SUMS"
"""``sha256sum -c`` input for the originals, paths relative to the log dir."""
MANIFEST_FORMAT = 2
"""Format 2: whole-file sha256 of every original and result, paths relative to the log dir, owner and mode."""
DIR_MODE = 0o700
"""A backup holds a partition's records: only its owner may read it."""
_RESERVED_NAMES = (MANIFEST, RESTORE_SCRIPT, SUMS)


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


def _mode_text(mode: int) -> str:
    return f"{mode & 0o7777:04o}"


@dataclass(frozen=True, slots=True)
class FileState:
    """A file's bytes by size and whole-file sha256; for an original also its owner, mode and mtime."""

    size: int
    sha256: str
    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    mtime_ns: int | None = None

    @classmethod
    def of(cls, st: os.stat_result, sha256: str, size: int | None = None) -> "FileState":
        return cls(st.st_size if size is None else size, sha256, st.st_mode & 0o7777, st.st_uid, st.st_gid,
                   st.st_mtime_ns)

    def to_json(self) -> dict:
        obj: dict = {"size": self.size, "sha256": self.sha256}
        if self.mode is not None:
            obj.update(mode=_mode_text(self.mode), uid=self.uid, gid=self.gid, mtimeNs=self.mtime_ns)
        return obj

    @classmethod
    def from_json(cls, obj: dict | None) -> "FileState | None":
        if obj is None:
            return None
        mode = obj.get("mode")
        state = cls(int(obj["size"]), _sha(obj["sha256"]), None if mode is None else int(str(mode), 8),
                    _opt_int(obj.get("uid")), _opt_int(obj.get("gid")), _opt_int(obj.get("mtimeNs"), negative=True))
        if state.size < 0 or (state.mode is not None and not 0 <= state.mode <= 0o7777):
            raise ValueError(f"a size {state.size} or mode {mode!r} out of range")
        return state


def _sha(value: object) -> str:
    text = str(value)
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise ValueError(f"{text!r} is not a sha256")
    return text


def _opt_int(value: object, *, negative: bool = False) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or (value < 0 and not negative):
        raise ValueError(f"{value!r} is not a whole number" + ("" if negative else " >= 0"))
    return value


@dataclass(frozen=True, slots=True)
class Piece:
    """A removed byte range ``[start, end)`` of an original ``.log``, kept in the backup as ``file``."""

    start: int
    end: int
    file: str
    sha256: str
    reason: str = ""

    def to_json(self) -> dict:
        return {"start": self.start, "end": self.end, "file": self.file, "sha256": self.sha256, "reason": self.reason}

    @classmethod
    def from_json(cls, obj: dict) -> "Piece":
        return cls(int(obj["start"]), int(obj["end"]), _two_names(obj["file"]), _sha(obj["sha256"]),
                   str(obj.get("reason", "")))


ACTIONS = ("rewritten", "created", "removed", "moved", "cut")
"""What a command did to a file: ``rewritten`` (the original is kept whole as ``backupFile``),
``created`` (there was none), ``removed`` / ``moved`` (the original is ``backupFile``, nothing
is left in its place), ``cut`` (byte ranges removed from a ``.log``, kept as ``pieces``)."""


@dataclass
class BackupEntry:
    """One file a command changed: MANIFEST.json's ``files`` entry.

    ``path`` is relative to ``log_dir`` (the real log dir when the backup was taken), so a
    restore still works when the mount moved; ``original``/``result`` give the whole file's
    size and sha256 before and after (None: there was no file, or none is left).
    """

    action: str
    log_dir: str
    path: str
    reason: str = ""
    original: FileState | None = None
    result: FileState | None = None
    backup_file: str | None = None
    pieces: tuple[Piece, ...] = ()
    seq: int = 0
    run: str = ""
    tool: str = ""

    @property
    def original_path(self) -> str:
        return os.path.join(self.log_dir, self.path)

    def to_json(self) -> dict:
        obj = {
            "seq": self.seq, "run": self.run, "tool": self.tool, "action": self.action,
            "logDir": self.log_dir, "path": self.path, "originalPath": self.original_path, "reason": self.reason,
            "original": None if self.original is None else self.original.to_json(),
            "result": None if self.result is None else self.result.to_json(),
            "backupFile": self.backup_file,
        }
        if self.action == "cut":
            obj["pieces"] = [p.to_json() for p in self.pieces]
        return obj

    @classmethod
    def from_json(cls, obj: dict) -> "BackupEntry":
        """An entry of MANIFEST.json, checked: a restore writes where it says, so every path must
        stay where it belongs (``<partition dir>/<file>`` below the log dir and the backup dir)."""
        action = obj["action"]
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        entry = cls(action, str(obj["logDir"]), _two_names(obj["path"]), str(obj.get("reason", "")),
                    FileState.from_json(obj.get("original")), FileState.from_json(obj.get("result")),
                    None if obj.get("backupFile") is None else _two_names(obj["backupFile"]),
                    tuple(Piece.from_json(p) for p in obj.get("pieces", ())),
                    int(obj["seq"]), str(obj.get("run", "")), str(obj.get("tool", "")))
        if not os.path.isabs(entry.log_dir):
            raise ValueError(f"logDir {entry.log_dir!r} is not absolute")
        if action == "cut":
            if entry.original is None or entry.result is None or not entry.pieces:
                raise ValueError(f"a cut of {entry.path} without its original, result or pieces")
            pos = removed = 0
            for piece in sorted(entry.pieces, key=lambda x: x.start):
                if piece.start < pos or piece.end <= piece.start or piece.end > entry.original.size:
                    raise ValueError(f"a piece [{piece.start}, {piece.end}) of {entry.path} out of order or range")
                pos = piece.end
                removed += piece.end - piece.start
            if entry.original.size - removed != entry.result.size:
                raise ValueError(f"the pieces of {entry.path} do not add up to its original size")
        return entry


def _two_names(value: object) -> str:
    """``dir/name``: exactly two plain names (no ``..``, no absolute path), as MANIFEST.json writes them."""
    text = str(value)
    parts = text.split(os.sep)
    if len(parts) != 2 or any(p in ("", ".", "..") or "\0" in p for p in parts):
        raise ValueError(f"the path {text!r} is not <directory>/<file>")
    return text


@dataclass(frozen=True, slots=True)
class Manifest:
    """A parsed MANIFEST.json: its runs and its entries in the order they were recorded."""

    root: str
    runs: tuple[dict, ...]
    entries: tuple[BackupEntry, ...]

    @property
    def log_dirs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.log_dir for e in self.entries))


def parse_manifest(data: bytes, root: str) -> Manifest:
    """MANIFEST.json's bytes as a :class:`Manifest`; a :class:`RepairError` naming the file when it
    is not a format-2 kafkatool manifest."""
    path = os.path.join(root, MANIFEST)
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise RepairError(f"not valid JSON ({e}): a damaged backup?", path=path) from None
    if not isinstance(obj, dict) or "files" not in obj:
        raise RepairError("not a kafkatool MANIFEST.json", path=path)
    if obj.get("format") != MANIFEST_FORMAT:
        raise RepairError(
            f"written by an older kafkatool (format {obj.get('format', 1)}, this one reads {MANIFEST_FORMAT}); "
            "restore it with its RESTORE.txt (sh -e RESTORE.txt), and choose a new backup dir", path=path)
    try:
        entries = tuple(sorted((BackupEntry.from_json(e) for e in obj["files"]), key=lambda e: e.seq))
    except (KeyError, TypeError, ValueError) as e:
        raise RepairError(f"a malformed entry ({e!r})", path=path) from None
    return Manifest(root, tuple(obj.get("runs", ())), entries)


def read_manifest(backup_dir: str) -> Manifest:
    """Read ``<backup_dir>/MANIFEST.json`` (a symlink is not followed)."""
    root = os.path.abspath(backup_dir)
    path = os.path.join(root, MANIFEST)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise RepairError("no MANIFEST.json here: not a kafkatool backup dir, or a backup that "
                          "never got its first file", path=root) from None
    except OSError as e:
        raise RepairError(f"cannot read: {e.strerror}", path=path) from None
    with os.fdopen(fd, "rb") as f:
        return parse_manifest(f.read(), root)


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
                    f"refusing a backup dir that others can write to (mode {_mode_text(st.st_mode)}): "
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
                    f"{_mode_text(st.st_mode)}), who could change the backup", path=where)
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

    def save(self, path: str, new_data: bytes | None, reason: str = "") -> BackupEntry:
        """Keep ``path`` (if it exists) whole in the backup, fsynced, before ``new_data`` replaces it
        (None: the file is going away). Records the original's and the result's size and sha256."""
        path = os.path.abspath(path)
        log_dir, part, rel = self._where(path)
        result = None if new_data is None else FileState(len(new_data), sha256_hex(new_data))
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
                action = "removed" if new_data is None else "rewritten"
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


# ----------------------------------------------------------------------------- RESTORE.txt and SHA256SUMS

_SPLICE = r"""
import hashlib, os, sys
def digest(path):
    h, n = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b); n += len(b)
    return n, h.hexdigest()
a = sys.argv[1:]
target, orig, left, mtime = a[0], (int(a[1]), a[2]), (int(a[3]), a[4]), int(a[5])
pieces = [(int(a[i]), int(a[i + 1]), a[i + 2], a[i + 3]) for i in range(6, len(a), 4)]
now = digest(target)
if now == orig:
    print("already the original: " + target); sys.exit(0)
if now != left:
    sys.exit("refusing: %s is neither the original nor what kafkatool left (%d bytes, sha256 %s)" % (target, now[0], now[1]))
for start, end, piece, sha in pieces:
    if digest(piece) != (end - start, sha):
        sys.exit("refusing: the backup piece %s does not match its sha256" % piece)
tmp = target + ".kafkatool-tmp"
if os.path.lexists(tmp):
    os.unlink(tmp)
h = hashlib.sha256()
with open(target, "rb") as src, os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "wb") as out:
    def copy(f, n):
        while n is None or n > 0:
            b = f.read(1 << 20 if n is None else min(n, 1 << 20))
            if not b:
                if n is None: return
                sys.exit("refusing: %s ended early" % target)
            out.write(b); h.update(b)
            if n is not None: n -= len(b)
    pos = 0
    for start, end, piece, sha in pieces:
        copy(src, start - pos)
        with open(piece, "rb") as p:
            copy(p, None)
        pos = end
    copy(src, None)
    out.flush(); os.fsync(out.fileno())
if (os.path.getsize(tmp), h.hexdigest()) != orig:
    os.unlink(tmp); sys.exit("refusing: the spliced %s is not the original" % target)
os.utime(tmp, ns=(mtime, mtime))
os.replace(tmp, target)
d = os.open(os.path.dirname(target) or ".", os.O_RDONLY); os.fsync(d); os.close(d)
print("restored " + target)
"""

_SHELL_FUNCTIONS = r"""sum_of() {  # the sha256 of a file, or "absent"
  if [ -e "$1" ]; then sha256sum < "$1" | cut -c1-64; else echo absent; fi
}
put_back() {  # BACKUP_FILE TARGET ORIGINAL_SHA256 LEFT_SHA256 (what kafkatool left there, or "absent")
  now=$(sum_of "$2")
  if [ "$now" = "$3" ]; then echo "already the original: $2"; return 0; fi
  if [ "$now" != "$4" ]; then echo "refusing: $2 is neither the original nor what kafkatool left (sha256 $now)" >&2; exit 1; fi
  if [ "$(sum_of "$1")" != "$3" ]; then echo "refusing: the backup $1 does not match its sha256" >&2; exit 1; fi
  rm -f "$2.kafkatool-tmp"
  cp -p "$1" "$2.kafkatool-tmp"
  mv -f "$2.kafkatool-tmp" "$2"
  echo "restored $2"
}
settle() {  # DIR: refuse a journal an interrupted kafkatool run committed; remove its uncommitted temp files
  for j in "$1"/*.kafkatool-journal; do
    if [ -e "$j" ]; then echo "refusing: $j: an interrupted kafkatool run committed this journal; run its --execute again first" >&2; exit 1; fi
  done
  for t in "$1"/*.kafkatool-tmp; do
    if [ -e "$t" ]; then rm -f "$t"; echo "removed $t (left by an interrupted kafkatool run)"; fi
  done
}
drop() {  # TARGET CREATED_SHA256: remove a file kafkatool created
  now=$(sum_of "$1")
  if [ "$now" = absent ]; then return 0; fi
  if [ "$now" != "$2" ]; then echo "refusing: $1 is not the file kafkatool created (sha256 $now)" >&2; exit 1; fi
  rm -f "$1"
  echo "removed $1"
}
"""


def _comment(text: str) -> str:
    """A shell comment line: a newline or other control character in a name cannot end it."""
    return "".join("?" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in text)


def _log_dir_vars(entries: Sequence[BackupEntry]) -> dict[str, str]:
    dirs = list(dict.fromkeys(e.log_dir for e in entries))
    if len(dirs) <= 1:
        return {d: "LOG_DIR" for d in dirs}
    return {d: f"LOG_DIR_{i}" for i, d in enumerate(dirs, 1)}


def render_restore_script(root: str, entries: Sequence[BackupEntry]) -> bytes:
    """RESTORE.txt: a ``sh -e`` script that undoes every entry, newest first, each step checking the
    sha256 of what it replaces and of what it puts back, then restores owner and mode. Bytes:
    non-UTF-8 names are written as they are on disk."""
    q = shlex.quote
    variables = _log_dir_vars(entries)
    lines = [
        "#!/bin/sh",
        "# Put back every file kafkatool changed (MANIFEST.json lists them). Stop the broker first.",
        "# Run it with:  sh -e RESTORE.txt    (it is safe to run twice; `kafkatool restore BACKUP_DIR` does the same)",
        "# Newest change first: each step checks the sha256 of the file it replaces and refuses a file",
        "# that is neither the original nor what kafkatool left; removed byte ranges are spliced back",
        "# into their .log by a short embedded Python program; owners and modes are restored.",
        "# (kafkatool restore checks every file before it writes any; this script checks each file",
        "# just before it writes it, so a refusal can leave earlier steps done: fix, then run it again.)",
        "# Moved mount or backup: LOG_DIR=/new/log/dir BACKUP=/new/backup/dir sh -e RESTORE.txt",
        "# Check the originals afterwards from the log dir:  cd \"$LOG_DIR\" && sha256sum -c \"$BACKUP/SHA256SUMS\"",
        "set -e",
        f"BACKUP=${{BACKUP:-{q(root)}}}",
        *(f"{var}=${{{var}:-{q(d)}}}" for d, var in variables.items()),
        "KAFKATOOL_SPLICE=" + q(_SPLICE.strip() + "\n"),
        _SHELL_FUNCTIONS.rstrip("\n"),
    ]
    for log_dir, part in dict.fromkeys((e.log_dir, os.path.dirname(e.path)) for e in entries):
        lines.append(f'settle "${variables[log_dir]}"/{q(part)}')
    for e in sorted(entries, key=lambda e: -e.seq):
        target = f'"${variables[e.log_dir]}"/{q(e.path)}'
        left = "absent" if e.result is None else e.result.sha256
        lines.append(_comment(f"# {e.seq}: {e.tool} {e.action} {e.path}" + (f" ({e.reason})" if e.reason else "")))
        if e.action == "created" or e.original is None:
            if e.result is not None:
                lines.append(f"drop {target} {left}")
            continue
        if e.action == "cut":
            assert e.result is not None
            args = " ".join(f'{p.start} {p.end} "$BACKUP"/{q(p.file)} {p.sha256}' for p in sorted(e.pieces, key=lambda p: p.start))
            lines.append(f'python3 -c "$KAFKATOOL_SPLICE" {target} {e.original.size} {e.original.sha256} '
                         f"{e.result.size} {e.result.sha256} {e.original.mtime_ns or 0} {args}")
        elif e.backup_file is not None:
            lines.append(f'put_back "$BACKUP"/{q(e.backup_file)} {target} {e.original.sha256} {left}')
        if e.original.uid is not None:
            lines.append(f"chown {e.original.uid}:{e.original.gid} {target}")
        if e.original.mode is not None:
            lines.append(f"chmod {_mode_text(e.original.mode)} {target}")
    lines.append("sync")
    if len(variables) == 1:
        (var,) = variables.values()
        lines.append(f'(cd "${var}" && sha256sum --quiet -c "$BACKUP"/{SUMS}) && echo "the originals match {SUMS}"')
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")


def _sums_line(sha256: str, name: str) -> str:
    """One line of ``sha256sum`` output: a name with a backslash or a newline is escaped and the
    line starts with a backslash (GNU coreutils)."""
    if "\\" in name or "\n" in name or "\r" in name:
        return "\\" + sha256 + "  " + name.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return f"{sha256}  {name}"


def render_sums(entries: Sequence[BackupEntry]) -> bytes:
    """SHA256SUMS of the originals (each path's state before the first recorded change), relative to
    the log dir (``cd LOG_DIR && sha256sum -c SHA256SUMS``); absolute when several log dirs share it."""
    first: dict[tuple[str, str], BackupEntry] = {}
    for e in sorted(entries, key=lambda e: e.seq):
        first.setdefault((e.log_dir, e.path), e)
    relative = len({e.log_dir for e in entries}) <= 1
    lines = []
    for (log_dir, path), e in sorted(first.items()):
        if e.original is None:
            continue
        lines.append(_sums_line(e.original.sha256, path if relative else os.path.join(log_dir, path)))
    return ("".join(line + "\n" for line in lines)).encode("utf-8", "surrogateescape")
