"""The log-dir model: log dirs, partition dirs and segments on disk, found and read lazily (spec §2).

This is the one way kafkatool finds the files it reads:

* :class:`LogDir` is a broker's log dir (``log.dirs``): its partition dirs and its offset
  checkpoints;
* :class:`Partition` is a partition dir (``<topic>-<partition>``, split on the LAST ``-``,
  with the ``-delete``/``-future``/``-stray`` states): every entry classified, its segments;
* :class:`Segment` is one ``.log`` with its side files, in base-offset order;
* :func:`expand` turns command-line paths (files, partition dirs, log dirs, directories of
  log dirs) into :class:`Target` s, an unreadable directory being a target with an error
  rather than an exception, so one bad directory never hides the others.

Nothing is read until asked: constructing any of these touches no file. Listings are read
with one ``scandir`` per directory (a file's type comes with the listing; only symbolic
links and special files cost a ``stat``). Names that are not UTF-8 arrive as ``str`` with
surrogate escapes (``os.fsencode`` gives the bytes back).
"""

from __future__ import annotations

import enum
import os
import stat
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from kafkatool.errors import KafkaToolError
from kafkatool.segment import files as names
from kafkatool.segment.files import FileKind, PartitionDir

__all__ = [
    "DirectoryError",
    "Entry",
    "EntryType",
    "LogDir",
    "Partition",
    "Segment",
    "SEGMENT_FILE_KINDS",
    "Target",
    "descend_all",
    "descend_partition_named",
    "expand",
    "holds_segment_files",
    "list_dir",
]


class DirectoryError(KafkaToolError):
    """A directory that cannot be listed (permissions, gone, not a directory).

    ``os_error`` is the :class:`OSError` (its ``strerror`` for messages that quote it);
    the message reads ``PATH: cannot list the directory: Permission denied``.
    """

    os_error: OSError | None = None


def _directory_error(e: OSError, path: str) -> DirectoryError:
    err = DirectoryError(f"cannot list the directory: {e.strerror or e}", path=path)
    err.os_error = e
    err.__cause__ = e
    return err


# ----------------------------------------------------------------------------- entries


class EntryType(enum.Enum):
    """What a directory entry is on disk (following a symbolic link, see :attr:`Entry.is_symlink`)."""

    FILE = "regular file"
    DIR = "directory"
    FIFO = "FIFO"
    SOCKET = "socket"
    CHAR_DEVICE = "character device"
    BLOCK_DEVICE = "block device"
    OTHER = "special file"
    MISSING = "missing"
    """A dangling symbolic link, or an entry gone between the listing and its ``stat``."""


_MODE_TYPES = (
    (stat.S_ISREG, EntryType.FILE),
    (stat.S_ISDIR, EntryType.DIR),
    (stat.S_ISFIFO, EntryType.FIFO),
    (stat.S_ISSOCK, EntryType.SOCKET),
    (stat.S_ISCHR, EntryType.CHAR_DEVICE),
    (stat.S_ISBLK, EntryType.BLOCK_DEVICE),
)


def entry_type_of(mode: int) -> EntryType:
    """The :class:`EntryType` of an ``st_mode``."""
    return next((t for test, t in _MODE_TYPES if test(mode)), EntryType.OTHER)


#: The files that make up a segment (spec §2.1): the ``.log`` and its three indexes.
SEGMENT_FILE_KINDS = frozenset({FileKind.LOG, FileKind.INDEX, FileKind.TIMEINDEX, FileKind.TXNINDEX})


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a directory listing, classified by its name (:func:`files.classify`)."""

    path: str
    """The directory's path joined with :attr:`name` (as given: not made absolute)."""
    name: str
    kind: FileKind
    type: EntryType
    """What it is, following a symbolic link (:attr:`EntryType.MISSING` when that leads nowhere)."""
    is_symlink: bool = False

    @property
    def is_file(self) -> bool:
        """A regular file (or a symbolic link to one)."""
        return self.type is EntryType.FILE

    @property
    def is_dir(self) -> bool:
        """A directory (or a symbolic link to one)."""
        return self.type is EntryType.DIR

    @property
    def suffix(self) -> str | None:
        """The name from its last ``.`` (:func:`files.file_suffix`)."""
        return names.file_suffix(self.name)

    @property
    def base_offset(self) -> int | None:
        """The offset a segment, index or snapshot file is named after; None for other kinds."""
        if self.kind in SEGMENT_FILE_KINDS or self.kind is FileKind.PRODUCER_SNAPSHOT:
            return int(self.name[:20])
        return None

    @property
    def partition_dir(self) -> PartitionDir | None:
        """The name parsed as a partition dir's (:func:`files.parse_partition_dir`), or None."""
        return names.parse_partition_dir(self.name)


def _entry(d: os.DirEntry[str], path: str) -> Entry:
    name = d.name
    kind = names.classify(name)
    # The listing's d_type answers for regular files and directories without a stat.
    if d.is_file(follow_symlinks=False):
        return Entry(path, name, kind, EntryType.FILE)
    if d.is_dir(follow_symlinks=False):
        return Entry(path, name, kind, EntryType.DIR)
    symlink = d.is_symlink()
    try:
        mode = d.stat(follow_symlinks=True).st_mode
    except OSError:
        return Entry(path, name, kind, EntryType.MISSING, symlink)
    return Entry(path, name, kind, entry_type_of(mode), symlink)


def list_dir(path: str) -> list[Entry]:
    """Every entry of directory ``path``, classified, sorted by name (code-point order).

    Raises :class:`DirectoryError` when the directory cannot be listed.
    """
    prefix = path if path.endswith("/") or path == "" else path + "/"
    try:
        with os.scandir(path or ".") as it:
            out = [_entry(d, prefix + d.name if path else d.name) for d in it]
    except OSError as e:
        raise _directory_error(e, path) from None
    out.sort(key=lambda e: e.name)
    return out


def holds_segment_files(entries: Iterable[Entry]) -> bool:
    """Whether a listing holds a file Kafka names as part of a segment (``<20 digits>.log``,
    ``.index``, ``.timeindex``, ``.txnindex``)."""
    return any(e.kind in SEGMENT_FILE_KINDS for e in entries)


# ----------------------------------------------------------------------------- segments


@dataclass(frozen=True, slots=True)
class Segment:
    """One segment: a ``<base offset>.log`` and the side files named after the same offset.

    A side file's path is None when the file is absent. Build one from a partition's listing
    (:meth:`Partition.segments`) or from a ``.log`` path (:meth:`Segment.at`).
    """

    base_offset: int
    log_path: str
    index_path: str | None = None
    timeindex_path: str | None = None
    txnindex_path: str | None = None
    snapshot_path: str | None = None
    """The producer snapshot named after this segment's base offset, if any."""

    @classmethod
    def at(cls, log_path: str) -> "Segment":
        """The segment of the ``.log`` at ``log_path``, its side files found beside it.

        The base offset is read from the name (:func:`files.parse_base_offset`, which raises
        :class:`~kafkatool.errors.FileNameError` for a name Kafka could not load).
        """
        base = names.parse_base_offset(log_path)

        def side(suffix: str) -> str | None:
            p = names.sibling(log_path, suffix)
            return p if os.path.isfile(p) else None

        return cls(
            base,
            log_path,
            side(names.INDEX_SUFFIX),
            side(names.TIME_INDEX_SUFFIX),
            side(names.TXN_INDEX_SUFFIX),
            side(names.PRODUCER_SNAPSHOT_SUFFIX),
        )

    @property
    def size(self) -> int:
        """The ``.log``'s size in bytes (a ``stat``)."""
        return os.stat(self.log_path).st_size


_SIDE_FIELDS = {
    FileKind.INDEX: "index_path",
    FileKind.TIMEINDEX: "timeindex_path",
    FileKind.TXNINDEX: "txnindex_path",
    FileKind.PRODUCER_SNAPSHOT: "snapshot_path",
}


def segments_of(entries: Iterable[Entry]) -> list[Segment]:
    """The segments in a partition dir's listing, in base-offset order.

    One per ``<20 digits>.log`` that is a regular file (a FIFO named like a segment is never a
    segment); side files are matched by base offset and must be regular files too.
    """
    logs: dict[int, str] = {}
    side: dict[int, dict[str, str]] = {}
    for e in entries:
        if not e.is_file:
            continue
        if e.kind is FileKind.LOG:
            logs[int(e.name[:20])] = e.path
        elif e.kind in _SIDE_FIELDS:
            side.setdefault(int(e.name[:20]), {})[_SIDE_FIELDS[e.kind]] = e.path
    return [Segment(base, logs[base], **side.get(base, {})) for base in sorted(logs)]


# ----------------------------------------------------------------------------- partitions


class Partition:
    """A partition directory. Nothing is read until asked.

    ``topic``/``partition``/``state``/``unique_id`` come from the directory name as Kafka
    parses it (``LocalLog.parseTopicPartitionName``: the split is at the last ``-``;
    ``<topic>-<p>.<uuid>-delete|-future|-stray`` carry a state). A directory whose name
    Kafka would refuse (a copy named ``backup``) is still a Partition: ``topic`` and
    ``partition`` are then None.
    """

    __slots__ = ("path", "name", "parsed", "log_dir", "_listing")

    def __init__(self, path: str | os.PathLike[str], *, log_dir: "LogDir | None" = None) -> None:
        self.path: str = os.fspath(path)
        self.name: str = os.path.basename(os.path.abspath(self.path))
        self.parsed: PartitionDir | None = names.parse_partition_dir(self.name)
        self.log_dir = log_dir
        self._listing: list[Entry] | None = None

    def __repr__(self) -> str:
        return f"Partition({self.path!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Partition) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    @property
    def topic(self) -> str | None:
        return self.parsed.topic if self.parsed else None

    @property
    def partition(self) -> int | None:
        return self.parsed.partition if self.parsed else None

    @property
    def state(self) -> str | None:
        """None for a live partition, else ``"delete"``, ``"future"`` or ``"stray"``."""
        return self.parsed.state if self.parsed else None

    @property
    def unique_id(self) -> str | None:
        return self.parsed.unique_id if self.parsed else None

    def sort_key(self) -> tuple:
        """``(topic, partition, state, name)``, None sorting first."""
        return (self.topic or "", -1 if self.partition is None else self.partition, self.state or "", self.name)

    def listing(self, *, refresh: bool = False) -> list[Entry]:
        """Every entry of the directory, classified, in segment order
        (:func:`files.segment_order`: each segment's files by base offset, then the rest by name).

        Read once and kept (``refresh`` reads it again). Raises :class:`DirectoryError`.
        """
        if self._listing is None or refresh:
            entries = list_dir(self.path)
            entries.sort(key=lambda e: names.segment_order(e.name))
            self._listing = entries
        return self._listing

    def segments(self) -> list[Segment]:
        """The segments, in base-offset order, each with its side files (see :func:`segments_of`)."""
        return segments_of(self.listing())

    def find_file(self, name: str) -> str | None:
        """The path of the regular file ``name`` in this dir (``leader-epoch-checkpoint`` ...), or None."""
        for e in self.listing():
            if e.name == name and e.is_file:
                return e.path
        return None


# ----------------------------------------------------------------------------- log dirs


class LogDir:
    """A broker's log dir (one entry of ``log.dirs``). Nothing is read until asked."""

    __slots__ = ("path", "_listing")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path: str = os.fspath(path)
        self._listing: list[Entry] | None = None

    def __repr__(self) -> str:
        return f"LogDir({self.path!r})"

    def listing(self, *, refresh: bool = False) -> list[Entry]:
        """Every entry of the log dir, classified, sorted by name. Raises :class:`DirectoryError`."""
        if self._listing is None or refresh:
            self._listing = list_dir(self.path)
        return self._listing

    def partitions(self) -> list[Partition]:
        """The partition dirs Kafka would load or mark (a directory named ``<topic>-<partition>``,
        with or without a ``-delete``/``-future``/``-stray`` state), sorted by
        ``(topic, partition, state, name)``. Other directories (``remote-log-index-cache``, a
        stray copy) are not partitions."""
        out = [Partition(e.path, log_dir=self) for e in self.listing() if e.is_dir and e.partition_dir is not None]
        out.sort(key=Partition.sort_key)
        return out

    def partition(self, topic: str, partition: int) -> Partition | None:
        """The live partition dir of ``topic``/``partition``, or None."""
        for p in self.partitions():
            if p.topic == topic and p.partition == partition and p.state is None:
                return p
        return None

    def _file(self, name: str) -> str | None:
        for e in self.listing():
            if e.name == name and e.is_file:
                return e.path
        return None

    def offset_checkpoint(self, name: str) -> dict[tuple[str, int], int] | None:
        """The entries of the offset checkpoint ``name`` as ``{(topic, partition): offset}``, or
        None when the log dir has none. ``name`` is ``recovery-point-offset-checkpoint``,
        ``replication-offset-checkpoint``, ``log-start-offset-checkpoint`` or
        ``cleaner-offset-checkpoint``. Raises :class:`~kafkatool.errors.CheckpointError` for a
        malformed file (Kafka's message, with the line's byte position).
        """
        if name not in names.OFFSET_CHECKPOINTS:
            raise ValueError(f"not an offset checkpoint name: {name!r} (one of {sorted(names.OFFSET_CHECKPOINTS)})")
        path = self._file(name)
        if path is None:
            return None
        from kafkatool.segment.checkpoint import read_offset_checkpoint

        return {(e.topic, e.partition): e.offset for e in read_offset_checkpoint(path)}

    def meta_properties(self) -> dict[str, str] | None:
        """``meta.properties`` (broker/node id, cluster id, version) as strings, or None when absent."""
        path = self._file(names.META_PROPERTIES)
        if path is None:
            return None
        from kafkatool.segment.checkpoint import read_meta_properties

        return read_meta_properties(path)


# ----------------------------------------------------------------------------- command-line paths


@dataclass(frozen=True, slots=True, eq=False)
class Target:
    """One path :func:`expand` found: a path named on the command line, or a directory reached.

    For a directory, :attr:`entries` is its classified listing (sorted by name), or
    :attr:`error` says why it could not be listed. For a path named that is not a directory,
    :attr:`entries` is None, and :attr:`type` says what it is (:attr:`EntryType.MISSING` when
    it does not exist: :attr:`error` then holds the ``stat`` failure).
    """

    path: str
    named: bool
    """Given on the command line (not found below one)."""
    type: EntryType
    entries: tuple[Entry, ...] | None = None
    error: KafkaToolError | None = None
    parent: "Target | None" = field(default=None, repr=False)
    """The directory target this one was found in (None for a named path)."""

    @property
    def is_dir(self) -> bool:
        return self.type is EntryType.DIR

    @property
    def name(self) -> str:
        return os.path.basename(os.path.abspath(self.path)) if self.path else ""

    @property
    def partition_dir(self) -> PartitionDir | None:
        """The name parsed as a partition dir's, or None."""
        return names.parse_partition_dir(self.name)

    @property
    def is_log_dir(self) -> bool:
        """A directory holding ``meta.properties``: every broker writes one in each log dir at start."""
        return self.entries is not None and any(e.name == names.META_PROPERTIES for e in self.entries)

    @property
    def holds_segments(self) -> bool:
        """A directory holding a segment file (:func:`holds_segment_files`)."""
        return self.entries is not None and holds_segment_files(self.entries)

    @property
    def depth(self) -> int:
        """0 for a named path, 1 for a directory found in it, ..."""
        n, t = 0, self.parent
        while t is not None:
            n, t = n + 1, t.parent
        return n

    def partition(self) -> Partition:
        """This directory as a :class:`Partition` (its listing already read)."""
        p = Partition(self.path)
        if self.entries is not None:
            listing = list(self.entries)
            listing.sort(key=lambda e: names.segment_order(e.name))
            p._listing = listing  # noqa: SLF001 - the same class family; the listing is read once
        return p


#: ``descend(directory_target, subdirectory_entry) -> bool``: whether :func:`expand` goes into a subdirectory.
Descend = Callable[[Target, Entry], bool]


def descend_all(target: Target, entry: Entry) -> bool:
    """Go into every subdirectory that is not a symbolic link, except below a directory holding
    segment files (a partition dir has no subdirectories Kafka reads). A directory named like a
    partition is searched too: ``/var/lib/kafka/data-1`` is a log dir, not partition 1 of "data"."""
    return not entry.is_symlink and not target.holds_segments


def descend_partition_named(target: Target, entry: Entry) -> bool:
    """Go into subdirectories named like partition dirs, following symbolic links."""
    return entry.partition_dir is not None


def expand(paths: Iterable[str], *, descend: Descend = descend_all) -> list[Target]:
    """The targets of command-line ``paths``: files, partition dirs, log dirs, directories of log dirs.

    Each path gives one :class:`Target`; a directory is then searched, pre-order in name
    order, every subdirectory for which ``descend(directory, entry)`` is true giving its own
    target (found below it, :attr:`Target.parent` set). :func:`descend_all` (the default)
    searches a whole tree without following symbolic links and stops at segment-holding dirs;
    :func:`descend_partition_named` follows only ``<topic>-<partition>`` names (symbolic links
    included). A directory is visited once even when two links lead to it.

    Nothing raises for a bad path: a directory that cannot be listed is a target with an
    :attr:`~Target.error` (a :class:`DirectoryError`), a named path that does not exist one
    with ``type`` MISSING and an error; the others are still searched. Only listings and a
    ``stat`` per named path are read; no file is opened.
    """
    out: list[Target] = []

    def visit(path: str, named: bool, parent: Target | None, above: frozenset[tuple[int, int]]) -> None:
        try:
            st = os.stat(path)
        except OSError:
            pass
        else:
            key = (st.st_dev, st.st_ino)
            if key in above:
                return  # a symbolic link to a directory above it: the search would never end
            above = above | {key}
        try:
            entries = tuple(list_dir(path))
        except DirectoryError as e:
            out.append(Target(path, named, EntryType.DIR, None, e, parent))
            return
        t = Target(path, named, EntryType.DIR, entries, None, parent)
        out.append(t)
        for e in entries:
            if e.is_dir and descend(t, e):
                visit(e.path, False, t, above)

    for p in paths:
        p = os.fspath(p)
        try:
            mode = os.stat(p).st_mode
        except (OSError, ValueError) as e:  # ValueError: an embedded NUL
            err = KafkaToolError(f"cannot read the file: {getattr(e, 'strerror', None) or e}", path=p)
            err.__cause__ = e
            out.append(Target(p, True, EntryType.MISSING, None, err))
            continue
        if mode is not None and stat.S_ISDIR(mode):
            visit(p, True, None, frozenset())
        else:
            out.append(Target(p, True, entry_type_of(mode)))
    return out


def iter_partitions(targets: Iterable[Target]) -> Iterator[Partition]:
    """The partition dirs among ``targets``: directories holding segment files or named ``<topic>-<partition>``."""
    for t in targets:
        if t.is_dir and t.error is None and (t.holds_segments or t.partition_dir is not None):
            yield t.partition()
