"""Which segments a command line names: :func:`scan_targets` (reindex and truncate)."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import Iterable, Sequence

from kafkatool.segment import files as names
from kafkatool.segment.logdir import Entry, Target, expand
from kafkatool.safety.exchange import is_staging_dir


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
    return names.java_parse_int(names.sibling(name, ""), 64) is None


def _files(t: Target) -> list[str]:
    """The names in a directory's listing that are not directories themselves (a symbolic link
    to one is a file here: it is never searched)."""
    return [e.name for e in t.entries if not (e.is_dir and not e.is_symlink)]


def _descend(t: Target, entry: Entry) -> bool:
    """Search a subdirectory of ``t``: a real directory (not a symbolic link), below a directory
    that is none of a partition dir (:func:`_holds_segments`), an interrupted run's staging dir
    or a kafkatool backup dir found below the named path."""
    if entry.is_symlink:
        return False
    if not t.named and (is_staging_dir(t.path) or _is_backup_dir([e.name for e in t.entries])):
        return False
    return not _holds_segments(t.path, _files(t))


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

    def search(d: str) -> None:
        """A named directory and every directory below it (the log-dir model's :func:`expand`,
        pre-order, name order, symbolic links below it not followed)."""
        for t in expand([d], descend=_descend):
            if t.error is not None:
                problems.append(TargetProblem(t.path, "unreadable", t.error.message))
                continue
            counts[0] += 1
            if is_staging_dir(t.path) and not t.named:
                continue  # an interrupted run's staging dir: the plan of its partition removes it
            if not t.named and _is_backup_dir([e.name for e in t.entries]):
                problems.append(TargetProblem(t.path, "skipped", "a kafkatool backup dir (copies, not live segments)"))
                continue
            files = _files(t)
            counts[1] += len(files)
            if _holds_segments(t.path, files):
                partition(t.path, files, t.named)

    for raw in paths:
        path = os.path.abspath(raw)
        if os.path.isdir(path):
            search(os.path.realpath(path))
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
