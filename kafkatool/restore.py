"""``restore``: put back what ``reindex``/``truncate --execute`` changed, from a backup dir (plan, then apply).

A backup dir's ``MANIFEST.json`` (format 2, :mod:`kafkatool.safety`) lists every change as an
entry: the file (relative to its log dir), the whole-file size and sha256 of the original and
of what the command left, and where the original's bytes are (a whole copy, or the removed
byte ranges of a cut ``.log``). Several runs may share a backup dir, and one file may have been
changed by several of them, so a file's entries form a chain: original -> result 1 = original
2 -> result 2 ... :func:`plan_restore` walks each file's chain from the newest entry back,
comparing the file on disk with each entry's result (undo it) or original (never applied, or
undone already: skip it), and refuses a file that is neither (the broker appended since, for
example). Every backup file a step needs is checked against its sha256 before anything is
written.

:func:`apply_restore` (the caller holds the :class:`~kafkatool.safety.LogDirLock`) undoes the
steps newest first, each atomically: the restored file is written beside the target as
``<name>.kafkatool-tmp`` with the original's owner, mode and mtime, its sha256 compared with the
original's, fsynced, renamed over the target, and the directory fsynced. Afterwards every file is
hashed again. A run killed at any point leaves each file at some state of its chain, so running
it again finishes the job; a second run of a complete restore changes nothing.

No click and no rich here.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from kafkatool.safety import (
    COPY_CHUNK,
    TEMP_SUFFIX,
    BackupEntry,
    FileState,
    Manifest,
    RepairError,
    fault_point,
    find_pending_state,
    fsync_dir,
    fsync_fd,
    is_staging_dir,
    iter_range,
    read_manifest,
    remove_staging_dirs,
    write_all,
    write_error,
)

__all__ = [
    "RestoreError",
    "RestoreStep",
    "FileRestore",
    "RestorePlan",
    "RestoreReport",
    "map_log_dirs",
    "plan_restore",
    "apply_restore",
]


class RestoreError(RepairError):
    """A restore refused to run (a file that is neither the original nor what kafkatool left, a
    damaged backup, pending state of an interrupted run), or found its own result wrong."""


@dataclass(frozen=True, slots=True)
class RestoreStep:
    """Undo one manifest entry: ``splice`` the removed ranges back into a cut ``.log``, ``copy``
    a whole original back, or ``remove`` a file the command created."""

    entry: BackupEntry
    action: str

    @property
    def backup_files(self) -> tuple[str, ...]:
        if self.action == "splice":
            return tuple(p.file for p in self.entry.pieces)
        return (self.entry.backup_file,) if self.action == "copy" and self.entry.backup_file else ()


@dataclass(frozen=True, slots=True)
class FileRestore:
    """One file of the backup: where it is now, what it is, and the steps that make it the original."""

    log_dir: str
    """The log dir it is restored into (the recorded one, or its ``--log-dir`` replacement)."""
    path: str
    """Relative to the log dir: ``<partition dir>/<file>``."""
    current: tuple[int, str] | None
    """``(size, sha256)`` of the file now (the sha256 is ``""`` when no entry has that size); None: absent."""
    steps: tuple[RestoreStep, ...]
    """Newest first; empty when the file is the original already."""
    final: FileState | None
    """The original: what the file is once the steps are done (None: no file)."""

    @property
    def target(self) -> str:
        return os.path.join(self.log_dir, self.path)

    @property
    def needs_changes(self) -> bool:
        return bool(self.steps)


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """What :func:`apply_restore` would do, file by file, and why it would refuse."""

    backup_dir: str
    manifest: Manifest
    log_dirs: dict[str, str]
    """Recorded log dir -> the log dir restored into."""
    files: tuple[FileRestore, ...]
    problems: tuple[RestoreError, ...]
    """Each names its file; a plan with problems is refused whole (nothing is written)."""
    notes: tuple[str, ...] = ()
    leftovers: tuple[str, ...] = ()
    """Uncommitted temp files and staging dirs interrupted kafkatool runs left (never a committed
    journal's): removed by :func:`apply_restore`, so the partition dir is the original and nothing else."""

    @property
    def needs_changes(self) -> bool:
        return bool(self.leftovers) or any(f.needs_changes for f in self.files)

    @property
    def partition_dirs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(os.path.dirname(f.target) for f in self.files if f.needs_changes))


@dataclass(frozen=True, slots=True)
class RestoreReport:
    """What :func:`apply_restore` did: every file restored, each hashed again afterwards."""

    plan: RestorePlan
    restored: tuple[str, ...]
    steps_done: int
    verified: bool = True
    ownership_kept: bool = True
    """False when the recorded owner could not be given back (not running as root)."""
    skipped_owner: tuple[str, ...] = field(default=())


# ----------------------------------------------------------------------------- planning


def map_log_dirs(manifest: Manifest, specs: Sequence[str]) -> dict[str, str]:
    """Recorded log dir -> the one to restore into, from ``--log-dir`` values: ``NEW`` (the backup
    covers one log dir) or ``OLD=NEW``. Unnamed log dirs stay where they were recorded."""
    recorded = manifest.log_dirs
    mapping = {d: d for d in recorded}
    for spec in specs:
        old, sep, new = spec.partition("=")
        if not sep:
            if len(recorded) != 1:
                raise RestoreError(
                    f"this backup covers {len(recorded)} log dirs ({', '.join(recorded)}): name the one to "
                    "move as --log-dir OLD=NEW", path=manifest.root)
            old, new = recorded[0], spec
        elif old not in mapping:
            matches = [d for d in recorded if os.path.realpath(d) == os.path.realpath(old)]
            if not matches:
                raise RestoreError(f"--log-dir {spec}: the backup records no log dir {old} "
                                   f"(it records {', '.join(recorded) or 'none'})", path=manifest.root)
            old = matches[0]
        mapping[old] = os.path.abspath(new)
    return mapping


class _Hashes:
    """sha256 of files, each read once (1 MiB at a time)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[int, str] | None] = {}

    def of(self, path: str) -> tuple[int, str] | None:
        if path not in self._cache:
            self._cache[path] = _hash(path)
        return self._cache[path]


def _hash(path: str) -> tuple[int, str] | None:
    """``(size, sha256)`` of a regular file, None when absent; a symlink or a non-regular file is an error."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise RestoreError(f"cannot read: {e.strerror}", path=path) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RestoreError("not a regular file", path=path)
        digest = hashlib.sha256()
        size = 0
        while True:
            try:
                piece = os.read(fd, COPY_CHUNK)
            except OSError as e:
                raise RestoreError(f"cannot read: {e.strerror}", path=path, position=size) from None
            if not piece:
                break
            digest.update(piece)
            size += len(piece)
        return size, digest.hexdigest()
    finally:
        os.close(fd)


def _same(state: tuple[int, str] | None, want: FileState | None) -> bool:
    if state is None or want is None:
        return state is None and want is None
    return state == (want.size, want.sha256)


def _current(path: str, sizes: set[int]) -> tuple[int, str] | None:
    """The file now: ``(size, sha256)``; the sha256 is only taken when some entry has that size."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise RestoreError(f"cannot read: {e.strerror}", path=path) from None
    if not stat.S_ISREG(st.st_mode):
        raise RestoreError("not a regular file (a symlink is never followed)", path=path)
    if st.st_size not in sizes:
        return st.st_size, ""
    return _hash(path)


def _describe(state: tuple[int, str] | None) -> str:
    if state is None:
        return "absent"
    return f"{state[0]} bytes" + (f", sha256 {state[1][:16]}" if state[1] else "")


def plan_restore(backup_dir: str, log_dirs: dict[str, str] | None = None,
                 *, on_file: Callable[[str], None] | None = None) -> RestorePlan:
    """Read the backup and the files it covers, and plan the steps that give back every original.

    ``log_dirs`` maps a recorded log dir to the one to restore into (see :func:`map_log_dirs`).
    Reads only. Hashes every file that has the size of one of its states and every backup file a
    step needs (so a damaged backup is found before anything is written).
    """

    manifest = read_manifest(backup_dir)
    mapping = {d: d for d in manifest.log_dirs}
    mapping.update(log_dirs or {})
    chains: dict[tuple[str, str], list[BackupEntry]] = {}
    for e in manifest.entries:
        chains.setdefault((e.log_dir, e.path), []).append(e)
    files: list[FileRestore] = []
    problems: list[RestoreError] = []
    notes: list[str] = []
    backup_hashes = _Hashes()
    missing_dirs: set[str] = set()
    for (recorded, rel), chain in chains.items():
        log_dir = mapping.get(recorded, recorded)
        target = os.path.join(log_dir, rel)
        if on_file is not None:
            on_file(target)
        part = os.path.dirname(target)
        if not os.path.isdir(part):
            if part not in missing_dirs:
                missing_dirs.add(part)
                problems.append(RestoreError(
                    "the partition dir is not there" + ("" if os.path.isdir(log_dir) else
                                                        f" (nor the log dir {log_dir}: moved? give --log-dir)"),
                    path=part))
            continue
        sizes = {s.size for e in chain for s in (e.original, e.result) if s is not None}
        try:
            now = _current(target, sizes)
        except RestoreError as err:
            problems.append(err)
            continue
        state = now
        steps: list[RestoreStep] = []
        broken = None
        for e in reversed(chain):
            if _same(state, e.result) and not _same(state, e.original):
                action = "remove" if e.original is None else ("splice" if e.action == "cut" else "copy")
                steps.append(RestoreStep(e, action))
                state = None if e.original is None else (e.original.size, e.original.sha256)
            elif _same(state, e.original):
                continue  # never applied (a run stopped before its switch), or undone already
            else:
                broken = e
                break
        if broken is not None:
            problems.append(RestoreError(
                f"is neither the original nor what {broken.tool or 'kafkatool'} left (entry {broken.seq}, run "
                f"{broken.run}): found {_describe(state)}, expected {_describe_state(broken.result)} or "
                f"{_describe_state(broken.original)}; the file changed since (a broker ran on it?); "
                "refusing to overwrite it", path=target))
            continue
        for step in steps:
            problems.extend(_check_backup(manifest.root, step, backup_hashes))
        files.append(FileRestore(log_dir, rel, now, tuple(steps), chain[0].original))
    # a committed journal: the partition dir may be a mix of two states, and that run's next
    # --execute would move files again after the restore; whether or not a file differs now
    leftovers: list[str] = []
    for part in dict.fromkeys(os.path.dirname(f.target) for f in files):
        for path, what in find_pending_state(part):
            if what.startswith(("truncate journal", "reindex journal", "journal", "pending temp file")):
                problems.append(RestoreError(
                    f"{what}; complete that run first (run its --execute again), then restore", path=path))
            elif what.startswith(("temp file", "staging dir")):
                leftovers.append(path)  # uncommitted: the partition's files do not depend on it
    return RestorePlan(manifest.root, manifest, mapping, tuple(files), tuple(problems), tuple(notes),
                       tuple(dict.fromkeys(leftovers)))


def _describe_state(state: FileState | None) -> str:
    return "absent" if state is None else f"{state.size} bytes, sha256 {state.sha256[:16]}"


def _check_backup(root: str, step: RestoreStep, hashes: _Hashes) -> list[RestoreError]:
    """The backup files a step reads must be there with their recorded sha256."""
    e = step.entry
    wanted: list[tuple[str, int, str]] = []
    if step.action == "copy":
        if e.backup_file is None or e.original is None:
            return [RestoreError(f"entry {e.seq} keeps no copy of the original", path=e.original_path)]
        wanted.append((e.backup_file, e.original.size, e.original.sha256))
    elif step.action == "splice":
        wanted.extend((p.file, p.end - p.start, p.sha256) for p in e.pieces)
    out = []
    for rel, size, sha in wanted:
        path = os.path.join(root, rel)
        try:
            got = hashes.of(path)
        except RestoreError as err:
            out.append(err)
            continue
        if got is None:
            out.append(RestoreError(f"the backup file of {e.path} is missing", path=path))
        elif got != (size, sha):
            out.append(RestoreError(
                f"the backup file of {e.path} does not match the manifest (found {got[0]} bytes, sha256 "
                f"{got[1][:16]}; expected {size} bytes, sha256 {sha[:16]})", path=path))
    return out


# ----------------------------------------------------------------------------- applying


def _give(fd: int, state: FileState, path: str) -> bool:
    """The recorded owner, mode and mtime on a restored file; False when the owner could not be
    given (not privileged: the file stays ours)."""
    owner = True
    if state.uid is not None and state.gid is not None:
        st = os.fstat(fd)
        if (st.st_uid, st.st_gid) != (state.uid, state.gid):
            try:
                os.fchown(fd, state.uid, state.gid)
            except PermissionError:
                owner = False
            except OSError as e:
                raise write_error(e, path, "chown") from None
    try:
        if state.mode is not None:
            os.fchmod(fd, state.mode)
        if state.mtime_ns is not None:
            os.utime(fd, ns=(state.mtime_ns, state.mtime_ns))
    except OSError as e:
        raise write_error(e, path, "set the mode of") from None
    return owner


def _open_temp(target: str) -> tuple[int, str]:
    tmp = target + TEMP_SUFFIX
    try:
        os.unlink(tmp)  # a leftover of an interrupted restore (uncommitted: the target is unchanged)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise write_error(e, tmp, "remove") from None
    try:
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600), tmp
    except OSError as e:
        raise write_error(e, tmp, "create") from None


def _copy(src: int, dst: int, start: int, end: int | None, digest, src_path: str, dst_path: str) -> None:
    for piece in iter_range(src, start, end, src_path):
        write_all(dst, piece, dst_path)
        digest.update(piece)


def _remove(path: str) -> None:
    """Remove a file (gone already is fine) and fsync its directory; an error names the file."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise write_error(e, path, "remove") from None
    fsync_dir(os.path.dirname(path))


def _open_read(path: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise RestoreError(f"cannot read: {e.strerror}", path=path) from None


def _undo(root: str, step: RestoreStep, log_dir: str) -> bool:
    """Undo one entry atomically; returns whether the owner was given back."""
    e = step.entry
    target = os.path.join(log_dir, e.path)
    directory = os.path.dirname(target)
    if step.action == "remove":
        _remove(target)
        return True
    assert e.original is not None
    fd, tmp = _open_temp(target)
    digest = hashlib.sha256()
    owner = True
    try:
        try:
            if step.action == "copy":
                assert e.backup_file is not None
                src_path = os.path.join(root, e.backup_file)
                src = _open_read(src_path)
                try:
                    _copy(src, fd, 0, None, digest, src_path, tmp)
                finally:
                    os.close(src)
            else:  # splice: the result's bytes with every removed range put back at its position
                src = _open_read(target)
                try:
                    pos_out = pos_in = 0
                    for p in sorted(e.pieces, key=lambda p: p.start):
                        n = p.start - pos_out
                        _copy(src, fd, pos_in, pos_in + n, digest, target, tmp)
                        pos_in += n
                        piece_path = os.path.join(root, p.file)
                        piece = _open_read(piece_path)
                        try:
                            _copy(piece, fd, 0, p.end - p.start, digest, piece_path, tmp)
                        finally:
                            os.close(piece)
                        pos_out = p.end
                    _copy(src, fd, pos_in, None, digest, target, tmp)
                finally:
                    os.close(src)
            size = os.fstat(fd).st_size
            if (size, digest.hexdigest()) != (e.original.size, e.original.sha256):
                raise RestoreError(
                    f"the rebuilt original does not match the manifest (found {size} bytes, sha256 "
                    f"{digest.hexdigest()[:16]}; expected {e.original.size} bytes, sha256 {e.original.sha256[:16]})",
                    path=target)
            owner = _give(fd, e.original, tmp)
            fsync_fd(fd, tmp)
        finally:
            os.close(fd)
        fault_point("after restore temp")
        try:
            os.rename(tmp, target)
        except OSError as err:
            raise write_error(err, target, "rename into place") from None
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(directory)
    return owner


def apply_restore(plan: RestorePlan) -> RestoreReport:
    """Do every step of ``plan``, newest entry first, then hash every restored file again.

    The caller holds the lock of every log dir of the plan. Raises :class:`RestoreError` when the
    plan has problems (nothing is written) or when a restored file is not the original afterwards.
    """
    if plan.problems:
        raise plan.problems[0]

    removed = remove_staging_dirs([p for p in plan.leftovers if is_staging_dir(p)])
    for p in plan.leftovers:
        if p not in removed:
            _remove(p)
            fault_point("after removing a leftover")
    todo = sorted(((step, f) for f in plan.files for step in f.steps), key=lambda sf: -sf[0].entry.seq)
    not_owned: list[str] = []
    for step, f in todo:
        if not _undo(plan.backup_dir, step, f.log_dir):
            not_owned.append(f.target)
        fault_point("after restore step")
    restored = []
    for f in plan.files:
        if not f.needs_changes:
            continue
        now = _hash(f.target)
        if not _same(now, f.final):
            raise RestoreError(f"re-verification failed: found {_describe(now)}, expected "
                               f"{_describe_state(f.final)}", path=f.target)
        restored.append(f.target)
    return RestoreReport(plan, tuple(restored), len(todo), True, not not_owned, tuple(dict.fromkeys(not_owned)))


def log_dirs_to_lock(plan: RestorePlan) -> tuple[str, ...]:
    """The log dirs whose ``.lock`` an ``--execute`` must hold: those of the files to restore."""

    dirs = [f.log_dir for f in plan.files if f.needs_changes]
    dirs += [os.path.dirname(p) if is_staging_dir(p) else os.path.dirname(os.path.dirname(p)) for p in plan.leftovers]
    return tuple(dict.fromkeys(dirs))


def iter_steps(plan: RestorePlan) -> Iterable[tuple[FileRestore, RestoreStep]]:
    for f in plan.files:
        for s in f.steps:
            yield f, s
