"""What to check: command-line paths to targets, grouped by partition dir in segment order.

A target is a file to check, or something found that is reported without being opened (a
directory that cannot be listed, a FIFO named like a segment, what an interrupted
``reindex``/``truncate --execute`` left).
"""

from __future__ import annotations

import os
import stat
from typing import Iterable, NamedTuple

from kafkatool.segment import files as names
from kafkatool.segment.logdir import Entry, EntryType, entry_type_of, expand
from kafkatool.segment.logdir import Target as Found
from kafkatool.verify.findings import Finding, FindingKind

__all__ = ["Target", "PENDING_MARK", "expand_targets", "offset_name_finding"]


class Target(NamedTuple):
    """A file to check and the partition context it belongs to."""

    path: str
    partition: str | None
    state: str | None
    problem: tuple[str, str] | None = None
    """``(kind, message)`` of a target reported as found, never opened: a directory that
    cannot be listed, a FIFO named like a segment, what an interrupted repair left."""


#: Suffixes of the files Kafka keeps in a partition dir (a name with one is worth checking).
_KAFKA_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".checkpoint")
#: Kafka parses the offset in these names when it loads a partition (§2.1, §12.1).
_OFFSET_NAMED = (".log", ".index", ".timeindex", ".txnindex")
#: What ``safety.TEMP_SUFFIX`` and ``safety.JOURNAL_SUFFIX`` start with: a cheap test for
#: names an interrupted kafkatool run left (the repair modules are imported only then).
PENDING_MARK = ".kafkatool-"


#: Directories a log dir may hold besides partitions (``LogManager.loadLogs`` skips them):
#: tiered storage's index cache.
_LOG_DIR_SUBDIRS = frozenset({"remote-log-index-cache"})


def _is_kafka_name(name: str) -> bool:
    """Whether ``name`` is one Kafka (or an interrupted kafkatool repair) puts in a log dir."""
    if names.classify(name) is not names.FileKind.UNKNOWN:
        return True
    return names.file_suffix(name) in _KAFKA_SUFFIXES or PENDING_MARK in name


#: Suffixes of a partition dir's segment files: a directory holding one is checked as a partition.
_SEGMENT_SUFFIXES = (names.LOG_SUFFIX, names.INDEX_SUFFIX, names.TIME_INDEX_SUFFIX)


def _is_partition(t: Found) -> bool:
    """Whether the directory ``t`` is checked as a partition: holding segment files, or named like
    one and holding no partition dirs (``kafka-logs-1`` holding ``orders-0`` is a log dir)."""
    return (t.partition_dir is not None and not t.holds_partition_dirs) or any(
        names.file_suffix(e.name) in _SEGMENT_SUFFIXES for e in t.entries)


def _descender():
    """One search's ``descend``: which subdirectories a tree search enters: not below a partition,
    no symbolic links, and in a log dir only what the broker would load (a directory it refuses is
    reported instead). Each directory's partition test is made once, not once per entry it holds
    (a log dir of 4,000 partitions would otherwise make 16 M name tests)."""
    partition: dict[int, bool] = {}

    def descend(t: Found, e: Entry) -> bool:
        if e.is_symlink:
            return False
        is_part = partition.get(id(t))
        if is_part is None:
            is_part = partition[id(t)] = _is_partition(t)
        if is_part:
            return False
        return not (t.is_log_dir and e.partition_dir is None and e.name not in _LOG_DIR_SUBDIRS)

    return descend


def expand_targets(paths: Iterable[str], nothing_kafka: list[str] | None = None) -> list[list[Target]]:
    """Group the files to check by partition directory (cross-segment checks need order).

    A path may be a file, a partition directory or a log dir (searched recursively with
    :func:`kafkatool.segment.logdir.expand`, so a directory of log dirs is searched too). What
    cannot be read is not left out: a directory that cannot be listed, a non-regular file with
    a Kafka name, a directory in a log dir the broker would refuse (a log dir is one with
    ``meta.properties``), and what an interrupted kafkatool repair left are targets with a
    ``problem``, reported as findings. ``nothing_kafka`` (optional) receives every path in
    which nothing Kafka was found (no partition dir, no file with a Kafka name).
    """
    groups: list[list[Target]] = []
    found = [0]  # targets with something Kafka in them, over the whole run

    def problem(path: str, kind: FindingKind, message: str, state: str | None = None, kafka: bool = True) -> Target:
        if kafka:
            found[0] += 1
        return Target(path, path if os.path.isdir(path) else None, state, (kind, message))

    def regular_files(t: Found, out: list[Target], dirs: bool = False) -> list[str]:
        """The regular files in ``t``; a non-regular one with a Kafka name goes to ``out``
        (a directory too, with ``dirs``: in a partition dir, where the broker expects none)."""
        files = []
        for e in t.entries:
            if e.type is EntryType.MISSING:
                if e.is_symlink and _is_kafka_name(e.name):
                    out.append(problem(e.path, FindingKind.UNREADABLE, "a dangling symbolic link"))
            elif e.type is EntryType.FILE:
                files.append(e.path)
            elif (dirs or e.type is not EntryType.DIR) and _is_kafka_name(e.name):
                out.append(problem(e.path, FindingKind.NOT_REGULAR_FILE, f"a {e.type.value} named like a Kafka file: not opened (the broker does not load it either)"))
        return files

    def add_partition(t: Found) -> None:
        entries = [e.name for e in t.entries]
        pd = t.partition_dir
        state = pd.state if pd else None
        if state == "delete" and len(pd.unique_id or "") == 32 and _staging(t.path):
            groups.append([problem(t.path, FindingKind.KAFKATOOL_STAGING, _STAGING_MESSAGE, state)])
            return
        if t.named or any(_is_kafka_name(n) for n in entries):
            # a directory met in a tree search is Kafka's only with a Kafka file in it: /etc/dbus-1
            # is named like partition 1 of topic "dbus"
            found[0] += 1
        head: list[Target] = []
        if t.named or any(PENDING_MARK in n for n in entries):
            head = _pending_targets(t.path, staging=t.named)
            found[0] += len(head)
        tail: list[Target] = []
        reported = {x.path for x in head}
        files = sorted((p for p in regular_files(t, tail, dirs=True) if p not in reported), key=lambda p: names.segment_order(os.path.basename(p)))
        groups.append([*head, *(Target(p, t.path, state) for p in files), *tail])

    def walk_dir(t: Found, children: dict[int, list[Found]]) -> None:
        if t.error is not None:
            e = t.error.os_error
            # (one found while searching a tree counts as Kafka only when named like a partition)
            kafka = t.named or t.partition_dir is not None
            groups.append([problem(t.path, FindingKind.UNREADABLE, f"cannot list the directory: {e.strerror or e} (the broker cannot load it either: `Could not read file`)", kafka=kafka)])
            return
        if _is_partition(t):
            add_partition(t)
            return
        odd: list[Target] = []
        loose = regular_files(t, odd)
        found[0] += sum(1 for p in loose if _is_kafka_name(os.path.basename(p)))
        if loose or odd:
            groups.append([Target(p, None, None) for p in loose] + odd)
        kids = iter(children.get(id(t), ()))
        for e in t.entries:
            if e.type is not EntryType.DIR or e.is_symlink:
                continue
            if t.is_log_dir and e.partition_dir is None and e.name not in _LOG_DIR_SUBDIRS:
                # LogManager.loadLogs: "Found directory <dir>, '<name>' is not in the form of
                # topic-partition ..." (KafkaException): the whole log dir stays offline
                groups.append([problem(e.path, FindingKind.NOT_A_PARTITION_DIR, f"a directory in a log dir whose name is not <topic>-<partition>: the broker refuses to load the log dir ('{e.name}' is not in the form of topic-partition); move it out of the log dir")])
                continue
            walk_dir(next(kids), children)

    loose: dict[str, list[str]] = {}  # directory -> files given by name
    for p in paths:
        before = found[0]
        if os.path.isdir(p):
            targets = expand([p], descend=_descender())  # pre-order: each directory before what it holds
            children: dict[int, list[Found]] = {}
            for t in targets[1:]:
                children.setdefault(id(t.parent), []).append(t)
            walk_dir(targets[0], children)
        else:
            files = loose.setdefault(os.path.dirname(p), [])
            name = os.path.basename(p)
            try:
                mode = os.stat(p).st_mode
            except OSError as e:
                groups.append([problem(p, FindingKind.UNREADABLE, f"cannot read the file: {e.strerror or e}")])
                mode = None
            if mode is not None and not stat.S_ISREG(mode):
                groups.append([problem(p, FindingKind.NOT_REGULAR_FILE, f"a {entry_type_of(mode).value}, not a regular file: not opened", kafka=_is_kafka_name(name))])
            elif mode is not None:
                if names.file_suffix(name) in (".index", ".timeindex", ".txnindex"):
                    # a side file is checked against its segment: walk that too
                    log = str(names.sibling(p, ".log"))
                    if os.path.isfile(log) and log not in files:
                        files.append(log)
                if p not in files:
                    files.append(p)
                if _is_kafka_name(name):
                    found[0] += 1
        if found[0] == before and nothing_kafka is not None:
            nothing_kafka.append(p)
    for files in loose.values():
        if files:
            groups.append([Target(f, None, None) for f in sorted(files, key=lambda f: names.segment_order(os.path.basename(f)))])
    return groups


def offset_name_finding(t: Target) -> Finding | None:
    """``invalid_file_name`` for a segment or index file in a partition dir whose name Kafka
    cannot read an offset from (§2.1: ``Long.parseLong`` of the part before the first ``.``)."""
    name = os.path.basename(t.path)
    if names.file_suffix(name) not in _OFFSET_NAMED:
        return None
    if names.parse_partition_dir(os.path.basename(os.path.dirname(os.path.abspath(t.path)))) is None:
        return None  # a file outside a partition dir (a copy under any name) is checked as it is
    prefix = names.sibling(name, "")  # the name before its first '.'
    if names.java_parse_int(prefix, 64) is not None:
        return None
    return Finding(
        t.path, None, None, FindingKind.INVALID_FILE_NAME,
        f"{name!r} does not start with a signed 64-bit decimal offset: loading the partition, the broker reads "
        "the offset before the first '.' as a Java long and throws NumberFormatException; move the file out of "
        "the partition dir",
        expected="a signed 64-bit decimal before the first '.'", found=prefix,
    )


_STAGING_MESSAGE = (
    "the staging dir of an interrupted `kafkatool reindex --execute` or `kafkatool truncate --execute` "
    "(named like a partition being deleted; the partition dir itself is complete): run that command again "
    "before starting the broker, its dry run names this dir and `--execute` removes it (a broker recovering "
    "it could cut the partition's own segments, whose .log files it may share as hard links)"
)


def _staging(d: str) -> bool:
    """Whether ``d`` is a kafkatool staging dir (``<topic>-<p>.6b66746c<24 hex>-delete``)."""
    from kafkatool.safety import is_staging_dir

    return is_staging_dir(d)


def _pending_targets(d: str, staging: bool) -> list[Target]:
    """Targets for what interrupted kafkatool runs left for the partition dir ``d``
    (``repair.find_pending_state``): journals, temp files, and (``staging``) its staging dir."""
    from kafkatool.safety import find_pending_state

    out = []
    for path, what in find_pending_state(d):
        category = what.split(":", 1)[0]
        if category == "staging dir":
            if staging:
                out.append(Target(path, path, "delete", (FindingKind.KAFKATOOL_STAGING, _STAGING_MESSAGE)))
            continue
        if category.endswith("journal"):
            kind, way_out = FindingKind.PENDING_JOURNAL, _JOURNAL_WAY_OUT.get(category, "")
        else:
            kind, way_out = FindingKind.KAFKATOOL_TEMP, _TEMP_WAY_OUT.get(category, "")
        out.append(Target(path, d, None, (kind, what + way_out)))
    return out


_JOURNAL_WAY_OUT = {
    "journal": "; run the interrupted kafkatool command again with `--execute` before starting the broker",
}
_TEMP_WAY_OUT = {
    "pending temp file": "; do not remove it: finish that journal (see its own finding) before starting the broker",
    "temp file": "; the broker ignores it; a `kafkatool reindex` or `kafkatool truncate` dry run names it and `--execute` removes it",
}
