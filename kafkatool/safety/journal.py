"""The journal: the commit point of a change that cannot use the whole-dir exchange.

New files are written beside the old ones as ``<name>.kafkatool-tmp`` (created exclusively,
never through an existing name, with the owner and mode of the file they replace), fsynced;
then a journal is committed in the partition dir; then the renames (and the moves into the
backup) are done and the journal is removed. One format for every command (version 2)::

    {"tool": "kafkatool truncate", "version": 2, "backupDir": "/abs/backup",
     "replace": [{"temp": "<name>.kafkatool-tmp", "target": "<name>", "old": IDENTITY, "new": IDENTITY}],
     "move": [{"source": "<name>", "dest": "/abs/backup/...", "old": IDENTITY}]}

where IDENTITY is ``{size, mtimeNs, ino, regular[, sha256]}`` (:func:`identity`) or null for
a file that did not exist. A crash before the commit leaves the old state (plus temp files the
next run deletes); after it, :func:`roll_forward` completes the journal if, and only if, every
file it still has to replace or move is exactly as recorded.

``kafkatool truncate`` names its journal ``kafkatool-truncate.kafkatool-journal`` (one per
partition) and rolls it forward on its next run. ``kafkatool reindex`` names one
``<base offset>.kafkatool-journal`` per segment (:func:`replace_files`); its files are a
function of the ``.log``, so its next run re-derives them instead and removes the journal
(a reindex journal of an older kafkatool, ``{"tool", "backup_dir", "replace": [{temp, target,
size, sha256}]}``, is read for its backup dir the same way). Kafka's loader ignores the
``.kafkatool-tmp`` and ``.kafkatool-journal`` names (§12.3 only acts on
``.deleted``/``.cleaned``/``.swap``).
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import stat
from typing import Sequence
from kafkatool.safety.backup import Backup
from kafkatool.segment import files as names
from kafkatool.safety.durable import JOURNAL_SUFFIX, PartitionRefused, RepairError, TEMP_SUFFIX, fault_point, fsync_dir
from kafkatool.safety.exchange import naming, new_file, stage_file, stat_or_none, unlink_all

__all__ = [
    "JOURNAL_VERSION",
    "StaleJournalError",
    "commit_journal",
    "describe_identity",
    "differs",
    "identity",
    "journal_backup_dir",
    "journal_path",
    "journal_record",
    "journal_temps",
    "journal_work",
    "make_temp",
    "move_file",
    "named",
    "plain_name",
    "read_journal",
    "replace_files",
    "roll_forward",
    "sha256_nofollow",
    "way_out",
    "write_atomically",
]


JOURNAL_VERSION = 2
"""Version 2 journals record the identity of every file (size, mtime, inode, small files' sha256)."""
HASH_LIMIT = 16 << 20
"""Files up to this size get a sha256 in the journal (indexes, snapshots, small segments)."""


def journal_path(directory: str, prefix: str) -> str:
    """``<directory>/<prefix>.kafkatool-journal``."""
    return os.path.join(directory, prefix + JOURNAL_SUFFIX)


def journal_record(tool: str, backup_dir: str, replace: Sequence[tuple[str, str, dict | None]],
                   moves: Sequence[tuple[str, str]] = ()) -> dict:
    """The journal of a change (module doc): ``replace`` holds ``(temp path, target path, the
    target's identity before)``, ``moves`` ``(source path, destination in the backup)``. The
    temps' and sources' identities are taken now: call it once every temp file is fsynced."""
    return {
        "tool": tool,
        "version": JOURNAL_VERSION,
        "backupDir": backup_dir,
        "replace": [
            {"temp": os.path.basename(t), "target": os.path.basename(p), "old": old, "new": identity(t)}
            for t, p, old in replace
        ],
        "move": [{"source": os.path.basename(s), "dest": d, "old": identity(s)} for s, d in moves],
    }


def commit_journal(path: str, record: dict, like: os.stat_result | None) -> None:
    """Write ``record`` as the journal ``path`` and make it durable: the commit point.

    The journal is written to ``<path>.kafkatool-tmp`` (created afresh, never through an
    existing name, with ``like``'s owner and mode), fsynced, renamed into place, and the
    directory is fsynced. ASCII JSON: any file name is escaped. Errors name the file."""
    pending = path + TEMP_SUFFIX
    new_file(pending, json.dumps(record, separators=(",", ":")).encode("ascii"), like, fault=False)
    with naming(path):
        os.replace(pending, path)
        fsync_dir(os.path.dirname(path))
    fault_point("after journal")


def replace_files(
    items: Sequence[tuple[str, bytes]], backup: Backup, *, reason: str = "", journal_prefix: str | None = None,
    like: dict[str, str] | None = None, tool: str = "kafkatool reindex",
) -> None:
    """Replace every ``(path, data)`` (all in one directory) crash-safely; see the module doc.

    Steps, each a fault point: back up each old file (fsynced); write and fsync each
    ``<path>.kafkatool-tmp``; commit the journal ``<journal_prefix>.kafkatool-journal``;
    ``os.replace`` each into place; fsync the directory; remove the journal.

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
    prefix = journal_prefix or names.sibling(os.path.basename(items[0][0]), "")  # the name up to its first "."
    like = dict(like or {})
    with backup.batch():  # one manifest write for all of them: nothing is replaced before it is on disk
        for path, data in items:
            with naming(backup.root, f"while copying {path} into the backup"):
                backup.save(path, data, reason)
            fault_point("after backup")
    journal = journal_path(directory, prefix)
    temps: list[tuple[str, str, dict | None]] = []
    try:
        for path, data in items:
            path = os.path.abspath(path)
            tmp = path + TEMP_SUFFIX
            old = identity(path)
            model = stat_or_none(path) or stat_or_none(like.get(path) or like.get(os.path.basename(path)) or "")
            new_file(tmp, data, model)
            temps.append((tmp, path, old))
        commit_journal(journal, journal_record(tool, backup.root, temps), None)
    except BaseException:
        unlink_all([t for t, _p, _o in temps] + [journal + TEMP_SUFFIX])
        raise
    roll_forward(journal, command=tool.rsplit(" ", 1)[-1])


def write_atomically(path: str, data: bytes, backup: Backup | str, *, reason: str = "") -> None:
    """Replace one file crash-safely, keeping the original in ``backup`` (a :class:`Backup` or a directory)."""
    if isinstance(backup, str):
        backup = Backup(backup)
    replace_files([(path, data)], backup, reason=reason, journal_prefix=os.path.basename(path))


def journal_backup_dir(path: str) -> str | None:
    """The backup dir a journal records (``backupDir``; ``backup_dir`` in a reindex journal of an
    older kafkatool), or None when the journal cannot be read or records none."""
    try:
        with open(path, "rb") as f:
            record = json.loads(f.read(1 << 20).decode("utf-8", "surrogateescape"))
        found = record.get("backupDir", record.get("backup_dir"))
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None


def journal_temps(path: str) -> set[str]:
    """The temp file names a committed journal still needs (its ``replace[].temp``, the same in
    every format); empty when it cannot be read (the caller reports the journal itself either way)."""
    try:
        with open(path, "rb") as f:
            record = json.loads(f.read(1 << 20).decode("utf-8", "surrogateescape"))
        return {str(r["temp"]) for r in record.get("replace", ()) if isinstance(r, dict) and "temp" in r}
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        return set()


class StaleJournalError(PartitionRefused):
    """A committed journal whose files changed since it was written: completing it would move or
    overwrite data written since (a broker ran on the partition). Nothing was changed."""

    def __init__(self, message: str, **kw) -> None:
        super().__init__(message, kind="stale_journal", **kw)


def identity(path: str, *, digest: bool = True) -> dict | None:
    """``{size, mtimeNs, ino}`` of ``path`` itself (a link is not followed), plus ``sha256`` for a
    regular file up to 16 MiB when ``digest``; None when it does not exist."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    ident = {"size": st.st_size, "mtimeNs": st.st_mtime_ns, "ino": st.st_ino, "regular": stat.S_ISREG(st.st_mode)}
    if digest and ident["regular"] and st.st_size <= HASH_LIMIT:
        ident["sha256"] = sha256_nofollow(path)
    return ident


def sha256_nofollow(path: str) -> str | None:
    import hashlib

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    h = hashlib.sha256()
    try:
        while piece := os.read(fd, 1 << 20):
            h.update(piece)
    finally:
        os.close(fd)
    return h.hexdigest()


def differs(now: dict | None, recorded: dict | None) -> str | None:
    """What changed between a recorded identity and the file now, or None when nothing did."""
    if recorded is None:
        return None if now is None else f"it did not exist, and now it does ({describe_identity(now)})"
    if now is None:
        return f"it is gone (recorded {describe_identity(recorded)})"
    changed = [w for k, w in (("size", "size"), ("mtimeNs", "mtime"), ("ino", "inode")) if now.get(k) != recorded.get(k)]
    if not now.get("regular", True):
        changed.append("type")
    if recorded.get("sha256") and now.get("sha256") and now["sha256"] != recorded["sha256"]:
        changed.append("content")
    if not changed:
        return None
    what = changed[0] if len(changed) == 1 else ", ".join(changed[:-1]) + " and " + changed[-1]
    return f"its {what} changed (recorded {describe_identity(recorded)}; found {describe_identity(now)})"


def describe_identity(ident: dict) -> str:
    import time

    ns = ident.get("mtimeNs", 0)
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 1_000_000_000)) + f".{ns % 1_000_000_000:09d}Z"
    text = f"{ident.get('size')} bytes, mtime {when}, inode {ident.get('ino')}"
    if not ident.get("regular", True):
        text += ", not a regular file"
    return text


def plain_name(name: object) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\0" not in name


def read_journal(path: str, *, command: str = "truncate") -> dict:
    """The journal, checked for shape: names of files of its own directory, moves into its backup dir."""
    temps = [os.path.join(os.path.dirname(path), n) for n in sorted(os.listdir(os.path.dirname(path)))
             if n.endswith(TEMP_SUFFIX)]
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ValueError("not a regular file")
            record = json.loads(f.read(64 << 20).decode("utf-8", "surrogateescape"))
    except (OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise StaleJournalError(f"cannot read this journal of an interrupted {command} ({why}). "
                                + way_out(path, temps, command=command), path=path) from None
    if not isinstance(record, dict) or record.get("version") != JOURNAL_VERSION:
        raise StaleJournalError(
            f"this journal of an interrupted {command} was written by an older kafkatool: it records no size, mtime "
            "and inode of the files it moves, so completing it could move data a broker wrote since. "
            + way_out(path, temps, command=command), path=path)
    backup_dir = record.get("backupDir")
    ok = isinstance(backup_dir, str) and os.path.isabs(backup_dir)
    for r in record.get("replace", ()) if ok else ():
        ok = ok and isinstance(r, dict) and plain_name(r.get("temp")) and plain_name(r.get("target")) \
            and r["temp"] == r["target"] + TEMP_SUFFIX
    for m in record.get("move", ()) if ok else ():
        dest = m.get("dest") if isinstance(m, dict) else None
        ok = ok and plain_name(m.get("source")) and isinstance(dest, str) and os.path.isabs(dest) \
            and os.path.commonpath([os.path.normpath(dest), backup_dir]) == os.path.normpath(backup_dir) \
            and ".." not in dest.split("/")
    if not ok or not isinstance(record.get("replace"), list) or not isinstance(record.get("move"), list):
        raise StaleJournalError(f"this journal of an interrupted {command} is malformed. " + way_out(path, temps, command=command),
                                path=path)
    return record


def way_out(path: str, temps: Sequence[str], backup_dir: str | None = None, *, command: str = "truncate") -> str:
    """How to start over when a journal cannot be completed (nothing was changed)."""
    rm = " ".join(shlex.quote(p) for p in [path, *temps])
    kept = f" (the earlier backup {backup_dir} still holds what the interrupted run removed)" if backup_dir else ""
    return (f"Nothing was changed. To start over from what is on disk{kept}: rm -- {rm}; then run "
            f"kafkatool {command} again")


def journal_work(path: str, *, command: str = "truncate") -> tuple[dict, list[tuple[str, str]], list[tuple[str, str]]]:
    """The work a committed journal still has: ``(record, renames (temp, target), moves (source, dest))``.

    Raises :class:`StaleJournalError` when a file it still has to rename or move is not exactly
    as recorded, or when work remains and a file it already renamed or moved changed since
    (then a broker ran on a mix of old and new files, and the rest of the journal no longer
    applies). A journal with nothing left to do is fine whatever happened since.
    """
    record = read_journal(path, command=command)
    directory = os.path.dirname(path)
    renames: list[tuple[str, str]] = []
    moves: list[tuple[str, str]] = []
    problems: list[tuple[str, str]] = []
    settled: list[tuple[str, str]] = []  # what changed after a step that was done
    temps = [os.path.join(directory, r["temp"]) for r in record["replace"]]
    for r in record["replace"]:
        tmp, target = os.path.join(directory, r["temp"]), os.path.join(directory, r["target"])
        tmp_now = identity(tmp)
        if tmp_now is not None:
            why = differs(tmp_now, r.get("new"))
            if why is not None:
                problems.append((tmp, f"the new file the journal wrote: {why}"))
                continue
            why = differs(identity(target), r.get("old"))
            if why is not None:
                problems.append((target, f"changed since the interrupted {command}'s journal recorded it: {why}"))
                continue
            renames.append((tmp, target))
        else:
            why = differs(identity(target, digest=False), {k: v for k, v in (r.get("new") or {}).items() if k != "sha256"})
            if why is not None:
                settled.append((target, f"renamed into place by the interrupted run, then {why}"))
    for m in record["move"]:
        src, dest = os.path.join(directory, m["source"]), m["dest"]
        src_now = identity(src, digest=bool((m.get("old") or {}).get("sha256")))
        if src_now is not None:
            why = differs(src_now, m.get("old"))
            if why is not None:
                problems.append((src, f"changed since the interrupted {command}'s journal recorded it: {why}"))
            elif not os.path.isdir(os.path.dirname(dest)):
                problems.append((dest, "the backup dir the journal moves this file into is gone"))
            else:
                moves.append((src, dest))
        elif not os.path.lexists(dest):
            settled.append((src, "the journal moves it to the backup, but it is neither here nor there"))
    if not problems and (renames or moves) and settled:
        problems = settled
    if problems:
        bad, why = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise StaleJournalError(
            f"{why}{more}: a broker has probably run on this partition since the {command} that wrote the journal "
            f"{path} was interrupted, and completing that journal would move or overwrite what it wrote. "
            + way_out(path, [t for t in temps if os.path.lexists(t)], record.get("backupDir"), command=command),
            path=bad)
    return record, renames, moves


def named(e: OSError, path: str) -> OSError:
    """``e`` naming ``path`` when the system named no file (a full disk found by a write or an fsync)."""
    if e.filename is None:
        return OSError(e.errno, e.strerror or str(e), path)
    return e


def make_temp(target: str, like: os.stat_result, *, data: bytes | None = None, source: str | None = None,
               ranges: Sequence[tuple[int, int]] | None = None) -> str:
    """``<target>.kafkatool-tmp`` holding the new content, created exclusively (an existing name,
    even a symbolic link, is removed first and never written through), with the owner and mode
    of ``like``, fsynced. A failed write removes the partial file and names it."""
    tmp = target + TEMP_SUFFIX
    if os.path.lexists(tmp):
        os.unlink(tmp)
    try:
        stage_file(tmp, like, data=data, source=source, ranges=ranges)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise named(e, tmp) from None
    fault_point("after temp fsync")
    return tmp


def move_file(src: str, dst: str) -> None:
    """Move one file into the backup: a rename, or copy + fsync + unlink across file systems."""
    try:
        os.rename(src, dst)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        tmp = dst + TEMP_SUFFIX
        if os.path.lexists(tmp):
            os.unlink(tmp)
        try:
            stage_file(tmp, os.lstat(src), source=src)
        except OSError as e2:
            raise named(e2, tmp) from None
        os.replace(tmp, dst)
        fsync_dir(os.path.dirname(dst))
        os.unlink(src)


def roll_forward(path: str, *, command: str = "truncate") -> list[str]:
    """Complete a committed journal (rename the temps that remain, move the files that remain),
    after checking that every one of them is as recorded (:func:`journal_work`)."""
    record, renames, moves = journal_work(path, command=command)
    directory = os.path.dirname(path)
    done = []
    for tmp, target in renames:
        os.replace(tmp, target)
        fault_point("after rename")
        done.append(target)
    for src, dest in moves:
        if os.path.lexists(dest) and os.path.getsize(dest) == os.lstat(src).st_size:
            os.unlink(src)  # a cross-device copy finished before the crash
        else:
            move_file(src, dest)
        fault_point("after move")
        done.append(src)
    fsync_dir(directory)
    for d in {os.path.dirname(m["dest"]) for m in record["move"]}:
        if os.path.isdir(d):
            fsync_dir(d)
    fault_point("after directory fsync")
    os.unlink(path)
    fsync_dir(directory)
    fault_point("after journal removal")
    return done
