"""The verify operation: every damaged region of segments, partitions and log dirs.

:func:`verify_paths` yields :class:`Finding` items (and one :class:`FileSummary` per file)
for segment files, side files, partition directories and whole log dirs. It is
read-only: nothing is written or created, and a directory a live broker holds can be
checked.

Checks (stable kind names in :data:`KINDS`):

* per batch, shallow: the §3 framing, size bounds, magic, codec id, CRC-32C / CRC-32,
  offsets (lastOffsetDelta vs count, monotonic within and across segments, inside the
  segment's base offset and the int32 relative range), timestamps, producer fields;
* ``deep``: every record decoded (count, varints, lengths, offset and timestamp deltas,
  headers, legacy inner CRCs, control records), with a cap on decompressed size;
* after a bad region the walk *resynchronises*: it searches forward for the next position
  where a batch with a valid CRC begins, reports the bad region's start and length, and
  goes on, counting the good batches Kafka's recovery would throw away;
* side files: ``.index``/``.timeindex`` (Kafka's sanity check and a full check against the
  log), ``.txnindex`` against the ABORT markers, producer ``.snapshot`` files,
  ``leader-epoch-checkpoint`` against the batches' leader epochs, text checkpoints;
* the files and directories themselves: what cannot be read, names the broker cannot parse,
  non-regular files with Kafka names, directories a log dir must not hold, and what an
  interrupted ``reindex``/``truncate --execute`` left (journals, temp files, staging dirs).

A zero-filled tail (``log.preallocate=true``) is passed at memory speed (``segment.zeros``).
"""

from __future__ import annotations

import os
import stat
import struct
from array import array
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator, NamedTuple

from kafkatool.errors import CompressionError, CorruptRecordError, InvalidRecordError, KafkaToolError
from kafkatool.record.batch import LOG_OVERHEAD, RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1, V2_HEADER_SIZE, Batch
from kafkatool.record.compression import DEFAULT_MAX_DECOMPRESSED
from kafkatool.record.crc import crc32, crc32c
from kafkatool.record.v2 import HEADER as V2_HEADER
from kafkatool.segment import files as names
from kafkatool.segment.walk import SCAN_BUFFER, CompiledScan, SegmentWalker, WalkStop
from kafkatool.segment.zeros import zero_run_end, zero_run_end_in

# Record decoding (control batches, --deep) and the side-file readers are imported where
# they are first needed: checking one .log needs neither, and start-up is a large share of
# a short run.

from kafkatool.record.speedups import functions as _compiled  # the extension, unless not built or switched off

_scan_fd, _scan_v2 = _compiled("scan_fd", "scan_v2")  # the compiled shallow scan, or None

__all__ = ["KINDS", "INFO_KINDS", "Finding", "FileSummary", "VerifyOptions", "verify_paths", "expand_targets", "resync"]

INT32_MAX = 2147483647

#: Every finding kind, with what it means. The names are stable: scripts match on them.
KINDS: dict[str, str] = {
    # framing (§3)
    "invalid_size": "a batch size field below the minimum for its format (Kafka's walk throws), or pointing past the end of the file while valid batches follow",
    "partial_batch": "the last batch runs past the end of the file (an interrupted write); Kafka's recovery truncates it",
    "trailing_bytes": "a tail too short to hold a batch header (at most 17 bytes) that is not all zeros",
    "trailing_zeros": "a zero-filled tail: preallocated or never written space after the last batch",
    "unknown_magic": "a magic byte other than 0, 1 or 2 (a v2 CRC does not cover it)",
    "unknown_codec": "compression codec id 5-7, or zstd in a v0/v1 message",
    "crc_mismatch": "the stored CRC does not match the bytes (CRC-32C for v2, CRC-32 for v0/v1)",
    # offsets, timestamps, producer fields
    "offset_delta_mismatch": "a v2 header's record count exceeds lastOffsetDelta + 1, or is negative",
    "offset_not_monotonic": "a batch's first offset is not above the previous batch's last offset (within or across segments)",
    "offset_below_base": "a batch offset below the segment's base offset (the file name)",
    "offset_overflow": "an offset more than 2^31-1 above the segment's base offset",
    "timestamp_invalid": "a timestamp below -1, or a CreateTime maxTimestamp below the base timestamp",
    "producer_fields_invalid": "producer id, epoch and sequence that cannot go together",
    "control_not_transactional": "a control batch without the transactional flag",
    # deep (records)
    "decompression_failed": "the compressed records cannot be decompressed",
    "decompressed_too_large": "the records decompress past the configured cap (a decompression bomb)",
    "record_count_mismatch": "the records do not fill the batch exactly as its header count says",
    "invalid_record": "a record's varints, lengths or headers are malformed",
    "record_offset_invalid": "record offset deltas outside 0..lastOffsetDelta or not increasing",
    "record_timestamp_invalid": "a CreateTime record timestamp above the batch maxTimestamp",
    "inner_crc_mismatch": "a message inside a compressed v0/v1 wrapper fails its own CRC",
    "invalid_wrapper": "a compressed v0/v1 wrapper that cannot be iterated (null value, no inner messages, nested compression, bad offsets)",
    "invalid_control_record": "a control record whose key or marker value is malformed",
    # offset and time index (§8)
    "index_sanity_failed": "the .index fails Kafka's sanity check",
    "index_entry_past_end": "an index entry points at or past the end of the log",
    "index_entry_not_batch_start": "an index entry's position is not the start of a batch",
    "index_offset_mismatch": "an index entry's offset is not the last offset of a batch at or after its position",
    "index_not_monotonic": "index entries do not strictly increase",
    "preallocated_index_tail": "an index file with zero-filled preallocated slots (an unclean shutdown, or a live active segment)",
    "timeindex_sanity_failed": "the .timeindex fails Kafka's sanity check",
    "timeindex_not_monotonic": "time index timestamps or offsets do not strictly increase",
    "timeindex_entry_not_found": "a time index offset is in no batch at all",
    "timeindex_record_offset": "a time index offset that is a record inside a batch, as brokers <= 3.7 wrote for uncompressed batches (benign)",
    "timeindex_timestamp_mismatch": "a time index timestamp differs from the largest timestamp up to its batch",
    "timeindex_entry_past_end": "a time index offset is beyond the log's last offset",
    "index_missing": "a segment without its .index (the broker rebuilds it on start)",
    "orphan_index": "an index, time index or txn index file without its .log (the broker deletes it)",
    # transaction index, snapshots, checkpoints (§9-11)
    "txnindex_invalid": "a .txnindex with an unknown version or a partial entry",
    "txnindex_below_base": "a .txnindex entry whose lastOffset is below the segment base (the broker recovers the segment)",
    "txnindex_no_abort_marker": "a .txnindex entry with no ABORT marker of its producer at its lastOffset",
    "txnindex_missing_entry": "an ABORT marker completing a transaction whose entry is not in the .txnindex (when the segment holds the whole transaction)",
    "snapshot_crc_mismatch": "a producer snapshot whose CRC-32C does not match",
    "snapshot_invalid": "a producer snapshot that cannot be parsed",
    "snapshot_beyond_log_end": "a producer snapshot above the log end offset (the broker deletes it)",
    "checkpoint_invalid": "a text checkpoint file Kafka cannot read (the broker takes the log dir offline)",
    "leader_epoch_mismatch": "leader-epoch-checkpoint disagrees with the batches' partition leader epochs",
    # the files and directories themselves (§2, §12.1, §12.3)
    "unreadable": "a file that cannot be read or a directory that cannot be listed (the broker's load fails with `Could not read file`)",
    "not_regular_file": "a FIFO, socket, device or directory named like a Kafka file (.log, .index, ...): not opened",
    "invalid_file_name": "a .log, .index, .timeindex or .txnindex in a partition dir whose name does not start with a signed 64-bit offset (the broker throws NumberFormatException loading it)",
    "not_a_partition_dir": "a directory in a log dir not named <topic>-<partition> (e.g. lost+found or a backup): the broker refuses to load the log dir",
    # what an interrupted kafkatool repair left (reindex/truncate --execute)
    "pending_journal": "a kafkatool journal: a reindex or truncate --execute was interrupted after its commit point (the message says which and how to finish it)",
    "kafkatool_temp": "a *.kafkatool-tmp file an interrupted kafkatool run left (the message says whether a journal still needs it)",
    "kafkatool_staging": "the staging dir <topic>-<partition>.6b66746c...-delete of an interrupted reindex or truncate --execute",
}


#: Kinds that describe a state rather than damage: reported, but they do not fail a run
#: unless ``--fail-on`` names them.
INFO_KINDS = frozenset({"index_missing", "preallocated_index_tail", "timeindex_record_offset"})


class Finding(NamedTuple):
    """One problem found. ``position``/``length`` locate it in ``file`` (bytes)."""

    file: str
    position: int | None
    length: int | None
    kind: str
    message: str
    batch_index: int | None = None
    first_offset: int | None = None
    last_offset: int | None = None
    expected: object = None
    found: object = None
    batches_after: int | None = None
    """For a bad region: how many good batches follow it in the file (Kafka's recovery drops them)."""


class FileSummary(NamedTuple):
    """What was checked in one file."""

    file: str
    kind: str
    bytes: int
    batches: int
    findings: int
    state: str | None = None
    """``delete``/``future``/``stray`` for a partition dir in that state."""


@dataclass(frozen=True, slots=True)
class VerifyOptions:
    deep: bool = False
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
    max_rate: float | None = None
    """Read bandwidth cap in bytes per second (None: unlimited)."""
    index_interval_bytes: int = 4096
    workers: int = 1
    """Processes a large segment is split across (see :data:`SPLIT_MIN_BYTES`)."""


# --------------------------------------------------------------------------- targets


class _Target(NamedTuple):
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
_PENDING_MARK = ".kafkatool-"


#: Directories a log dir may hold besides partitions (``LogManager.loadLogs`` skips them):
#: tiered storage's index cache.
_LOG_DIR_SUBDIRS = frozenset({"remote-log-index-cache"})


def _is_kafka_name(name: str) -> bool:
    """Whether ``name`` is one Kafka (or an interrupted kafkatool repair) puts in a log dir."""
    if names.classify(name) is not names.FileKind.UNKNOWN:
        return True
    return names.file_suffix(name) in _KAFKA_SUFFIXES or _PENDING_MARK in name


def _is_log_dir(entries: list[str]) -> bool:
    """Whether a directory holding ``entries`` is a broker's log dir: it has ``meta.properties``
    (every broker writes one at start). A directory that only holds copies of partition dirs
    is not one: anything else in it is not the broker's concern."""
    return "meta.properties" in entries


def expand_targets(paths: Iterable[str], nothing_kafka: list[str] | None = None) -> list[list[_Target]]:
    """Group the files to check by partition directory (cross-segment checks need order).

    A path may be a file, a partition directory or a log dir (searched recursively, so a
    directory of log dirs is searched too). What cannot be read is not left out: a
    directory that cannot be listed, a non-regular file with a Kafka name, a directory in
    a log dir the broker would refuse, and what an interrupted kafkatool repair left are
    targets with a ``problem``, reported as findings. ``nothing_kafka`` (optional) receives
    every path in which nothing Kafka was found (no partition dir, no file with a Kafka name).
    """
    groups: list[list[_Target]] = []
    found = [0]  # targets with something Kafka in them, over the whole run

    def problem(path: str, kind: str, message: str, state: str | None = None, kafka: bool = True) -> _Target:
        if kafka:
            found[0] += 1
        return _Target(path, path if os.path.isdir(path) else None, state, (kind, message))

    def listdir(d: str, direct: bool) -> list[str] | None:
        try:
            return sorted(os.listdir(d))
        except OSError as e:
            # (one found while searching a tree counts as Kafka only when named like a partition)
            kafka = direct or names.parse_partition_dir(os.path.basename(os.path.abspath(d))) is not None
            groups.append([problem(d, "unreadable", f"cannot list the directory: {e.strerror or e} (the broker cannot load it either: `Could not read file`)", kafka=kafka)])
            return None

    def regular_files(d: str, entries: list[str], out: list[_Target], dirs: bool = False) -> list[str]:
        """The regular files among ``entries``; a non-regular one with a Kafka name goes to ``out``
        (a directory too, with ``dirs``: in a partition dir, where the broker expects none)."""
        files = []
        for n in entries:
            p = os.path.join(d, n)
            try:
                st = os.stat(p)
            except OSError:
                if os.path.islink(p) and _is_kafka_name(n):
                    out.append(problem(p, "unreadable", "a dangling symbolic link"))
                continue
            if stat.S_ISREG(st.st_mode):
                files.append(p)
            elif (dirs or not stat.S_ISDIR(st.st_mode)) and _is_kafka_name(n):
                out.append(problem(p, "not_regular_file", f"a {_file_type(st.st_mode)} named like a Kafka file: not opened (the broker does not load it either)"))
        return files

    def add_partition(d: str, entries: list[str], direct: bool) -> None:
        pd = names.parse_partition_dir(os.path.basename(os.path.abspath(d)))
        state = pd.state if pd else None
        if state == "delete" and len(pd.unique_id or "") == 32 and _staging(d):
            groups.append([problem(d, "kafkatool_staging", _STAGING_MESSAGE, state)])
            return
        if direct or any(_is_kafka_name(n) for n in entries):
            # a directory met in a tree search is Kafka's only with a Kafka file in it: /etc/dbus-1
            # is named like partition 1 of topic "dbus"
            found[0] += 1
        head: list[_Target] = []
        if direct or any(_PENDING_MARK in n for n in entries):
            head = _pending_targets(d, staging=direct)
            found[0] += len(head)
        tail: list[_Target] = []
        reported = {t.path for t in head}
        files = sorted((p for p in regular_files(d, entries, tail, dirs=True) if p not in reported), key=lambda p: _order(os.path.basename(p)))
        groups.append([*head, *(_Target(p, d, state) for p in files), *tail])

    def walk_dir(d: str, direct: bool) -> None:
        entries = listdir(d, direct)
        if entries is None:
            return
        has_segments = any(names.file_suffix(n) in (".log", ".index", ".timeindex") for n in entries)
        if has_segments or names.parse_partition_dir(os.path.basename(os.path.abspath(d))):
            add_partition(d, entries, direct)
            return
        odd: list[_Target] = []
        loose = regular_files(d, entries, odd)
        found[0] += sum(1 for p in loose if _is_kafka_name(os.path.basename(p)))
        if loose or odd:
            groups.append([_Target(p, None, None) for p in loose] + odd)
        log_dir = _is_log_dir(entries)
        for n in entries:
            sub = os.path.join(d, n)
            if not os.path.isdir(sub) or os.path.islink(sub):
                continue
            if log_dir and names.parse_partition_dir(n) is None and n not in _LOG_DIR_SUBDIRS:
                # LogManager.loadLogs: "Found directory <dir>, '<name>' is not in the form of
                # topic-partition ..." (KafkaException): the whole log dir stays offline
                groups.append([problem(sub, "not_a_partition_dir", f"a directory in a log dir whose name is not <topic>-<partition>: the broker refuses to load the log dir ('{n}' is not in the form of topic-partition); move it out of the log dir")])
                continue
            walk_dir(sub, False)

    loose: dict[str, list[str]] = {}  # directory -> files given by name
    for p in paths:
        before = found[0]
        if os.path.isdir(p):
            walk_dir(p, True)
        else:
            files = loose.setdefault(os.path.dirname(p), [])
            name = os.path.basename(p)
            try:
                mode = os.stat(p).st_mode
            except OSError as e:
                groups.append([problem(p, "unreadable", f"cannot read the file: {e.strerror or e}")])
                mode = None
            if mode is not None and not stat.S_ISREG(mode):
                groups.append([problem(p, "not_regular_file", f"a {_file_type(mode)}, not a regular file: not opened", kafka=_is_kafka_name(name))])
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
            groups.append([_Target(f, None, None) for f in sorted(files, key=lambda f: _order(os.path.basename(f)))])
    return groups


def _offset_name_finding(t: _Target) -> Finding | None:
    """``invalid_file_name`` for a segment or index file in a partition dir whose name Kafka
    cannot read an offset from (§2.1: ``Long.parseLong`` of the part before the first ``.``)."""
    name = os.path.basename(t.path)
    if names.file_suffix(name) not in _OFFSET_NAMED:
        return None
    if names.parse_partition_dir(os.path.basename(os.path.dirname(os.path.abspath(t.path)))) is None:
        return None  # a file outside a partition dir (a copy under any name) is checked as it is
    if names.java_parse_int(name.split(".", 1)[0], 64) is not None:
        return None
    return Finding(
        t.path, None, None, "invalid_file_name",
        f"{name!r} does not start with a signed 64-bit decimal offset: loading the partition, the broker reads "
        "the offset before the first '.' as a Java long and throws NumberFormatException; move the file out of "
        "the partition dir",
        expected="a signed 64-bit decimal before the first '.'", found=name.split(".", 1)[0],
    )


def _file_type(mode: int) -> str:
    for test, what in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISDIR, "directory")):
        if test(mode):
            return what
    return "special file"


_STAGING_MESSAGE = (
    "the staging dir of an interrupted `kafkatool reindex --execute` or `kafkatool truncate --execute` "
    "(named like a partition being deleted; the partition dir itself is complete): run that command again "
    "before starting the broker, its dry run names this dir and `--execute` removes it (a broker recovering "
    "it could cut the partition's own segments, whose .log files it may share as hard links)"
)


def _staging(d: str) -> bool:
    """Whether ``d`` is a kafkatool staging dir (``<topic>-<p>.6b66746c<24 hex>-delete``)."""
    from kafkatool.repair import is_staging_dir

    return is_staging_dir(d)


def _pending_targets(d: str, staging: bool) -> list[_Target]:
    """Targets for what interrupted kafkatool runs left for the partition dir ``d``
    (``repair.find_pending_state``): journals, temp files, and (``staging``) its staging dir."""
    from kafkatool.repair import find_pending_state

    out = []
    for path, what in find_pending_state(d):
        category = what.split(":", 1)[0]
        if category == "staging dir":
            if staging:
                out.append(_Target(path, path, "delete", ("kafkatool_staging", _STAGING_MESSAGE)))
            continue
        if category.endswith("journal"):
            kind, way_out = "pending_journal", _JOURNAL_WAY_OUT.get(category, "")
        else:
            kind, way_out = "kafkatool_temp", _TEMP_WAY_OUT.get(category, "")
        out.append(_Target(path, d, None, (kind, what + way_out)))
    return out


_JOURNAL_WAY_OUT = {
    "journal": "; run the interrupted kafkatool command again with `--execute` before starting the broker",
}
_TEMP_WAY_OUT = {
    "pending temp file": "; do not remove it: finish that journal (see its own finding) before starting the broker",
    "temp file": "; the broker ignores it; a `kafkatool reindex` or `kafkatool truncate` dry run names it and `--execute` removes it",
}


_RANK = {".log": 0, ".checkpoint": 0, ".index": 1, ".timeindex": 2, ".txnindex": 3, ".snapshot": 4}


def _order(name: str) -> tuple:
    suffix = names.file_suffix(name) or ""
    prefix = name.split(".", 1)[0].split("-", 1)[0]
    if suffix in _RANK and prefix.isdigit():
        return (0, int(prefix), _RANK[suffix], name)
    return (1, 0, 0, name)


# --------------------------------------------------------------------------- the run


@dataclass
class _Partition:
    """What later files of a partition need from earlier ones."""

    last_offset: int | None = None
    log_end: int | None = None
    epochs: dict[int, int] = field(default_factory=dict)
    """leader epoch -> first offset seen with it."""
    segments: dict[int, "_SegmentFacts"] = field(default_factory=dict)
    on_bytes: object = None


@dataclass
class _SegmentFacts:
    """Per segment, what the side-file checks compare against.

    Only the batches the segment's own index files point at are remembered (a segment of
    millions of tiny batches must not cost memory per batch): ``wanted_positions`` and
    ``wanted_offsets`` come from the ``.index``/``.timeindex`` before the walk.
    """

    base: int
    size: int
    valid_end: int = 0
    wanted_positions: set[int] = field(default_factory=set)
    wanted_offsets: set[int] = field(default_factory=set)
    at_position: dict[int, int] = field(default_factory=dict)
    """batch start position -> its last offset (for wanted positions)."""
    by_last_offset: dict[int, tuple[int, int]] = field(default_factory=dict)
    """batch last offset -> (position, largest timestamp up to it) (for wanted offsets)."""
    containing: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    """wanted offset inside a batch -> (position, batch last offset, largest timestamp up to it)."""
    wanted_sorted: list[int] = field(default_factory=list)
    open_txns: dict[int, int] = field(default_factory=dict)
    """producer id -> first offset of its open transaction (seen in this segment)."""
    expected_aborts: list[tuple[int, int, int]] = field(default_factory=list)
    """(producer id, first offset, ABORT marker offset) of transactions aborted within this segment."""
    abort_markers: set[tuple[int, int]] = field(default_factory=set)
    """(producer id, offset) of every ABORT marker."""
    first_offset: int | None = None
    first_last: int | None = None
    """last offset of the segment's first batch"""
    last_offset: int | None = None

    def sorted_arrays(self) -> tuple[array | None, array | None]:
        """The wanted positions and offsets as sorted int64 arrays (None when there are none)."""
        pos = array("q", sorted(self.wanted_positions)) if self.wanted_positions else None
        off = array("q", self.wanted_sorted) if self.wanted_sorted else None
        return pos, off

    def release(self) -> None:
        """Drop what only the segment's own index checks need (they have run)."""
        self.wanted_positions = set()
        self.wanted_offsets = set()
        self.wanted_sorted = []
        self.at_position = {}
        self.by_last_offset = {}
        self.containing = {}
        self.abort_markers = set()


def _wanted(path: str, base: int, facts: _SegmentFacts) -> None:
    """Read the positions and offsets the segment's index files refer to."""
    prefix = os.path.join(os.path.dirname(path), os.path.basename(path).split(".", 1)[0])
    if not (os.path.exists(prefix + ".index") or os.path.exists(prefix + ".timeindex")):
        return
    from kafkatool.segment import index as idx

    try:
        for offset, position in idx.read_offset_index(prefix + ".index", base).iter_absolute():
            facts.wanted_positions.add(position)
            facts.wanted_offsets.add(offset)
    except OSError:
        pass
    try:
        for _ts, offset in idx.read_time_index(prefix + ".timeindex", base).iter_absolute():
            facts.wanted_offsets.add(offset)
    except OSError:
        pass
    facts.wanted_sorted = sorted(facts.wanted_offsets)


def verify_paths(paths: Iterable[str], opts: VerifyOptions, on_bytes=None) -> Iterator[Finding | FileSummary]:
    """Check every file under ``paths``; yield findings, then a summary, per file.

    ``on_bytes(n)`` (optional) is called as segment bytes are checked, for progress bars.
    """
    start_rate_clock()
    for group in expand_targets(paths):
        yield from verify_group(group, opts, on_bytes)


def verify_group(group: list[_Target], opts: VerifyOptions, on_bytes=None) -> Iterator[Finding | FileSummary]:
    """Check the files of one partition directory (or loose files) in segment order."""
    part = _Partition()
    part.on_bytes = on_bytes
    present: set[str] = set()
    for d in {os.path.dirname(t.path) for t in group if t.problem is None}:
        try:
            present.update(os.listdir(d or "."))
        except OSError:
            pass
    # Each segment, then at once its own index files (while its facts are at hand: they are
    # dropped afterwards, so memory does not grow with the number of segments); then the rest
    # (snapshots and checkpoints, which need the whole partition's log end and epochs).
    logs = [t for t in group if t.problem is None and names.file_suffix(os.path.basename(t.path)) == ".log"]
    side: dict[str, list[_Target]] = {}
    others = []
    log_prefixes = {os.path.join(os.path.dirname(t.path), os.path.basename(t.path).split(".", 1)[0]) for t in logs}
    for t in group:
        if t in logs or t.problem is not None:
            continue
        prefix = os.path.join(os.path.dirname(t.path), os.path.basename(t.path).split(".", 1)[0])
        if names.file_suffix(os.path.basename(t.path)) in (".index", ".timeindex", ".txnindex") and prefix in log_prefixes:
            side.setdefault(prefix, []).append(t)
        else:
            others.append(t)
    for t in group:
        if t.problem is not None:
            kind, message = t.problem
            yield Finding(t.path, None, None, kind, message)
            yield FileSummary(t.path, kind, 0, 0, 1, t.state)
    for t in logs:
        yield from _guard(t, lambda t=t: _verify_log(t, opts, part, present))
        prefix = os.path.join(os.path.dirname(t.path), os.path.basename(t.path).split(".", 1)[0])
        for s in side.get(prefix, ()):
            yield from _guard(s, lambda s=s: _verify_other(s, opts, part, present))
        for facts in part.segments.values():
            facts.release()
    for t in others:
        yield from _guard(t, lambda t=t: _verify_other(t, opts, part, present))


def _guard(t: _Target, fn) -> Iterator[Finding | FileSummary]:
    try:
        yield from fn()
    except OSError as e:
        yield Finding(t.path, None, None, "unreadable", f"cannot read the file: {e.strerror or e}")
        yield FileSummary(t.path, "unreadable", 0, 0, 1, t.state)


# --------------------------------------------------------------------------- segments


_RATE_CLOCK = [0.0, 0]  # [start time, bytes read] of this process's run


def start_rate_clock() -> None:
    """Start the --max-rate clock of a run (called once per run, before its first group)."""
    _RATE_CLOCK[0] = time.monotonic()
    _RATE_CLOCK[1] = 0


def _throttle(rate: float, nbytes: int) -> None:
    """Account ``nbytes`` read and sleep so the run stays under ``rate`` bytes/s (--max-rate)."""
    clock = _RATE_CLOCK
    if clock[0] == 0.0:
        clock[0] = time.monotonic()
    clock[1] += nbytes
    ahead = clock[1] / rate - (time.monotonic() - clock[0])
    if ahead > 0.005:
        time.sleep(ahead)


#: A segment at least this large is split across processes when ``VerifyOptions.workers`` > 1.
SPLIT_MIN_BYTES = 32 << 20


#: The compiled file scan's buffer (an entry larger than this is walked in Python) and the
#: bytes it scans between two returns to Python (progress, --max-rate).
_SCAN_BUFFER = SCAN_BUFFER
_SCAN_BUDGET = 64 << 20

# slots of the state list shared with the compiled scans (_speedups.scan_v2, scan_fd)
(
    _S_PREV_LAST, _S_BASE, _S_GOOD, _S_MAX_TS, _S_FIRST, _S_FIRST_LAST, _S_EPOCHS, _S_WANT_POS,
    _S_POS_CURSOR, _S_AT_POSITION, _S_WANT_OFF, _S_OFF_CURSOR, _S_BY_LAST, _S_CONTAINING, _S_BATCHES,
) = range(15)


class _Scanner:
    """Walks batches of one segment, running the per-batch checks and keeping the counters
    that the bad-region accounting and the index checks need."""

    def __init__(self, path: str, base: int | None, opts: VerifyOptions, part: _Partition, facts: _SegmentFacts, findings: list[Finding]) -> None:
        self.path = path
        self.base = base
        self.opts = opts
        self.part = part
        self.facts = facts
        self.findings = findings
        self.batches = 0
        self.good = 0
        self.max_ts = -1
        self.bad_regions: list[tuple[int, int]] = []  # (finding index, good batches before it)
        self.reported = 0
        self.wanted_at = 0  # pointer into facts.wanted_sorted
        self.position_at = 0  # pointer into the sorted wanted positions (compiled scan)

    def walk(self, path: str, start: int, end: int) -> SegmentWalker:
        """Walk ``[start, end)`` of ``path`` through this scanner; return the finished walker."""
        if _scan_v2 is None or self.opts.deep:
            walker = SegmentWalker(path, start=start, end=end)
            with walker:
                self.run(walker)
            return walker
        return self._run_compiled(path, start, end)

    def _run_compiled(self, path: str, start: int, end: int) -> SegmentWalker:
        """:meth:`run` with the healthy-batch path in C.

        ``_speedups.scan_fd`` reads the file itself (128 KiB preads, each scanned while
        it is still in the CPU cache) and applies the same predicate as :meth:`run`'s
        fast path, updating the state list in place; it returns any other batch, which is
        checked here by :meth:`run`'s slow path with the state copied out and back. Where
        it stops for good (the end, a tail, a legacy or damaged entry, an entry larger
        than its buffer), the generic walk goes on, with ``_speedups.scan_v2`` over its
        windows, and its walker is returned.
        """
        part, facts = self.part, self.facts
        want_pos, want_off = facts.sorted_arrays()
        st = [
            part.last_offset, self.base, self.good, self.max_ts, facts.first_offset, facts.first_last,
            part.epochs, want_pos, self.position_at, facts.at_position, want_off, self.wanted_at,
            facts.by_last_offset, facts.containing, self.batches,
        ]
        on_bytes = part.on_bytes
        rate = self.opts.max_rate

        def progress(done: int) -> None:
            if on_bytes is not None:
                on_bytes(done - self.reported)
                self.reported = done

        def check(batch, data) -> None:
            self._load(st)
            self.run(((batch, data),), throttle=False)
            self._store(st)

        pos = start
        if _scan_fd is not None:
            def paced(before: int, after: int) -> None:
                if rate:  # bytes the scan moved past, slow batches included
                    _throttle(rate, after - before)
                progress(after)

            # pauses let the progress bar and --max-rate act; a rate paces in tenths of a second
            budget = max(1 << 20, int(rate) // 10) if rate else _SCAN_BUDGET
            fast = CompiledScan(path, start, end, _scan_fd, st, budget=budget, on_progress=paced, buffer_size=_SCAN_BUFFER)
            try:
                for batch, data in fast:
                    check(batch, data)
            finally:
                self._load(st)
            pos = fast.position

        scan = _scan_v2

        def window_scan(buf, rel, lim, file_pos, batch_type):
            out = scan(buf, rel, lim, file_pos, batch_type, st)
            if rate:  # bytes the walk moved past, slow batches included
                _throttle(rate, out[1] - rel)
            progress(file_pos + out[1] - rel)
            return out

        walker = SegmentWalker(path, start=pos, end=end, window_scan=window_scan)
        try:
            with walker:
                for batch, data in walker:
                    check(batch, data)
        finally:
            self._load(st)
        return walker

    def _load(self, st: list) -> None:
        """Copy the compiled scan's state out to this scanner, its facts and its partition."""
        part, facts = self.part, self.facts
        part.last_offset = st[_S_PREV_LAST]
        if st[_S_PREV_LAST] is not None and st[_S_BATCHES] != self.batches:
            facts.last_offset = st[_S_PREV_LAST]
        self.good, self.max_ts, self.batches = st[_S_GOOD], st[_S_MAX_TS], st[_S_BATCHES]
        facts.first_offset, facts.first_last = st[_S_FIRST], st[_S_FIRST_LAST]
        self.position_at, self.wanted_at = st[_S_POS_CURSOR], st[_S_OFF_CURSOR]

    def _store(self, st: list) -> None:
        part, facts = self.part, self.facts
        st[_S_PREV_LAST] = part.last_offset
        st[_S_GOOD], st[_S_MAX_TS], st[_S_BATCHES] = self.good, self.max_ts, self.batches
        st[_S_FIRST], st[_S_FIRST_LAST] = facts.first_offset, facts.first_last
        st[_S_OFF_CURSOR] = self.wanted_at

    def run(self, walker, throttle: bool = True) -> None:
        """Check every ``(batch, data)`` of ``walker`` (a :class:`SegmentWalker` or any iterable of them)."""
        path, base, opts, part, facts, findings = self.path, self.base, self.opts, self.part, self.facts, self.findings
        wanted_positions = facts.wanted_positions
        wanted_offsets = facts.wanted_offsets
        at_position = facts.at_position
        by_last_offset = facts.by_last_offset
        on_bytes = part.on_bytes
        batches, good, max_ts = self.batches, self.good, self.max_ts
        bad_regions = self.bad_regions
        check = _check_batch
        containing = facts.containing
        wanted_sorted = facts.wanted_sorted
        nwanted = len(wanted_sorted)
        wi = self.wanted_at
        rate = opts.max_rate if throttle else None
        deep = opts.deep
        epochs = part.epochs
        try:
            for batch, data in walker:
                (position, _size, first, magic, crc, attrs, lod, bts, mts, pid, pepoch, bseq, count, ple, computed) = batch
                prev = part.last_offset
                lo = first + lod
                if (
                    # a healthy, non-transactional v2 data batch: _check_batch's fast path, inlined
                    not deep
                    and magic == 2
                    and crc == computed
                    and not attrs & 0x30
                    and attrs & 0x07 <= 4
                    and lod >= 0
                    and 0 <= count <= lod + 1
                    and bts >= -1
                    and mts >= -1
                    and (attrs & 0x48 or count == 0 or mts >= bts)
                    and pid >= -1
                    and pepoch >= -1
                    and bseq >= -1
                    and (prev is None or first > prev)
                    and (base is None or (first >= base and lo - base <= INT32_MAX))
                ):
                    if ple >= 0 and ple not in epochs:
                        epochs[ple] = first
                    part.last_offset = lo
                    if facts.first_offset is None:
                        facts.first_offset = first
                        facts.first_last = lo
                    facts.last_offset = lo
                    good += 1
                    if mts > max_ts:
                        max_ts = mts
                else:
                    before = len(findings)
                    check(batch, data, path, batches, base, part, facts, findings, opts)
                    if crc == computed:
                        good += 1
                        if mts > max_ts:
                            max_ts = mts
                    elif len(findings) > before:
                        bad_regions.append((before, good))
                    lo = batch.last_offset
                if wanted_positions and position in wanted_positions:
                    at_position[position] = lo
                if wanted_offsets:
                    if lo in wanted_offsets:
                        by_last_offset[lo] = (batch[0], max_ts)
                    # offsets the indexes name inside a batch (not its last): old brokers' time entries
                    first = batch[2] if batch[3] >= 2 else lo
                    while wi < nwanted and wanted_sorted[wi] < first:
                        wi += 1
                    while wi < nwanted and wanted_sorted[wi] <= lo:
                        if wanted_sorted[wi] != lo:
                            containing[wanted_sorted[wi]] = (batch[0], lo, max_ts)
                        wi += 1
                batches += 1
                if rate:
                    _throttle(rate, batch[1])
                if batches & 255 == 0 and on_bytes is not None:
                    on_bytes(batch.end - self.reported)
                    self.reported = batch.end
        finally:
            self.batches, self.good, self.max_ts = batches, good, max_ts
            self.wanted_at = wi


def _verify_log(t: _Target, opts: VerifyOptions, part: _Partition, present: set[str]) -> Iterator[Finding | FileSummary]:
    path = t.path
    name = os.path.basename(path)
    size = os.path.getsize(path)
    findings: list[Finding] = []
    try:
        base = names.parse_base_offset(name)
    except KafkaToolError:
        base = None
    prefix = name.split(".", 1)[0]
    if base is not None and t.partition is not None and f"{prefix}.index" not in present:
        findings.append(Finding(path, None, None, "index_missing", f"{prefix}.index is missing: the broker will recover (rebuild and truncate) this segment at start"))
    bad_name = _offset_name_finding(t)
    if bad_name is not None:
        findings.append(bad_name)
    facts = _SegmentFacts(base or 0, size)
    if base is not None:
        _wanted(path, base, facts)
    scan = _Scanner(path, base, opts, part, facts, findings)
    pos = 0
    if opts.workers > 1 and size >= SPLIT_MIN_BYTES and not opts.max_rate:
        pos = _scan_chunks(scan, size)
    while pos < size:
        walker = scan.walk(path, pos, size)
        pos = walker.position
        if walker.stop is WalkStop.END:
            break
        # the walk stopped short of the end: a bad region starts at pos
        region_kind, message = _stop_reason(walker, path, pos, size)
        # a zero run (a preallocated tail, gigabytes of it, often a hole) is passed at memory
        # speed; no batch starts inside it: a batch's size field (bytes 8-11) is never zero
        zeros_end = _zero_run_end(path, pos, size)
        if zeros_end >= size:
            scan.bad_regions.append((len(findings), scan.good))
            findings.append(Finding(path, pos, size - pos, "trailing_zeros", f"{size - pos} zero bytes after the last batch (preallocated or never written)"))
            break
        nxt = resync(path, max(pos + 1, zeros_end - 16), size)
        if nxt is None:
            scan.bad_regions.append((len(findings), scan.good))
            if region_kind == "partial_batch" or size - pos <= 17:
                kind = "trailing_bytes" if size - pos <= 17 else "partial_batch"
                findings.append(Finding(path, pos, size - pos, kind, message))
            else:
                findings.append(Finding(path, pos, size - pos, region_kind, message))
            break
        if region_kind == "partial_batch":
            region_kind = "invalid_size"
            message = f"the size field at {pos} points past the end of the file, but a valid batch starts at {nxt}"
        scan.bad_regions.append((len(findings), scan.good))
        findings.append(Finding(path, pos, nxt - pos, region_kind, f"{message}; {nxt - pos} unreadable bytes before the next valid batch at {nxt}"))
        if facts.valid_end == 0:
            facts.valid_end = pos
        pos = nxt
    # how many good batches lie beyond each bad region: data Kafka's recovery would drop
    for fi, good_before in scan.bad_regions:
        findings[fi] = findings[fi]._replace(batches_after=scan.good - good_before)
    if part.on_bytes is not None:
        part.on_bytes(size - scan.reported)
    if facts.valid_end == 0:
        facts.valid_end = pos
    if facts.expected_aborts and t.partition is not None and f"{prefix}.txnindex" not in present:
        for pid, began, marker in facts.expected_aborts:
            findings.append(Finding(path, None, None, "txnindex_missing_entry", f"producer {pid}'s transaction {began}..{marker} was aborted in this segment but {prefix}.txnindex does not exist", expected=(pid, began, marker), found=None))
    part.segments[facts.base] = facts
    if facts.last_offset is not None:
        part.log_end = facts.last_offset + 1
    yield from findings
    yield FileSummary(path, "log", size, scan.batches, len(findings), t.state)


def _scan_chunks(scan: _Scanner, size: int) -> int:
    """Check a large segment in ``opts.workers`` processes, one chunk each.

    Chunks start at the first batch with a valid CRC at or after each split point. A chunk
    that does not end exactly where the next one starts (damage, or a split point that was
    not a real batch start) stops the merge there: the caller walks on serially from the
    returned position, with full resynchronisation.
    """
    path, opts = scan.path, scan.opts
    workers = opts.workers
    bounds = [0]
    for i in range(1, workers):
        b = resync(path, max(i * size // workers, bounds[-1] + 1), size)
        if b is None:
            break
        bounds.append(b)
    bounds.append(size)
    if len(bounds) < 3:
        return 0
    facts = scan.facts
    jobs = [
        (path, bounds[i], bounds[i + 1], scan.base, opts, facts.wanted_positions, facts.wanted_offsets)
        for i in range(len(bounds) - 1)
    ]
    # forked children take the later chunks; this process checks the first one meanwhile
    children = [_fork_worker(job) for job in jobs[1:]]
    results = [_chunk_worker(jobs[0]), *(_collect(child) for child in children)]
    part, findings = scan.part, scan.findings
    for (_p, start, end, *_rest), r in zip(jobs, results):
        if not r["clean"]:
            return start
        if r["first_offset"] is not None and part.last_offset is not None and r["first_offset"] <= part.last_offset:
            findings.append(Finding(path, start, 8, "offset_not_monotonic", f"first offset {r['first_offset']} is not above the previous batch's last offset {part.last_offset}", scan.batches, r["first_offset"], r["first_last"], f"> {part.last_offset}", r["first_offset"]))
        base_index = len(findings)
        for f in r["findings"]:
            findings.append(f._replace(batch_index=None if f.batch_index is None else f.batch_index + scan.batches))
        scan.bad_regions.extend((base_index + fi, scan.good + gb) for fi, gb in r["bad_regions"])
        for lo, (p, local_max) in r["by_last_offset"].items():
            facts.by_last_offset[lo] = (p, max(local_max, scan.max_ts))
        for o, (p, lo, local_max) in r["containing"].items():
            facts.containing[o] = (p, lo, max(local_max, scan.max_ts))
        facts.at_position.update(r["at_position"])
        facts.abort_markers |= r["abort_markers"]
        for epoch, first in r["epochs"].items():
            part.epochs.setdefault(epoch, first)
        if facts.first_offset is None:
            facts.first_offset = r["first_offset"]
        if r["last_offset"] is not None:
            facts.last_offset = r["last_offset"]
            part.last_offset = r["last_offset"] if part.last_offset is None else max(part.last_offset, r["last_offset"])
        scan.batches += r["batches"]
        scan.good += r["good"]
        scan.max_ts = max(scan.max_ts, r["max_ts"])
        if part.on_bytes is not None:
            part.on_bytes(end - start)
        scan.reported = end
    return size


def _fork_worker(job) -> tuple[int, int]:
    """Run :func:`_chunk_worker` in a forked child; return ``(pid, read end of its pipe)``.

    A bare fork and a pipe: a process pool costs more than the chunk a child saves.
    """
    import pickle

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            os.close(r)
            try:
                payload = pickle.dumps(("ok", _chunk_worker(job)), protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                payload = pickle.dumps(("error", f"{type(e).__name__}: {e}"))
                code = 1
            with os.fdopen(w, "wb") as f:
                f.write(payload)
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _collect(child: tuple[int, int]) -> dict:
    """The result a :func:`_fork_worker` child sent; an unclean one if it failed."""
    import pickle

    pid, r = child
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    try:
        status, result = pickle.loads(data)
    except Exception:  # noqa: BLE001 - a child that died: walk that chunk serially instead
        return {"clean": False}
    return result if status == "ok" else {"clean": False}


def _chunk_worker(job) -> dict:
    path, start, end, base, opts, wanted_positions, wanted_offsets = job
    part = _Partition()
    facts = _SegmentFacts(
        base or 0, os.path.getsize(path), wanted_positions=wanted_positions, wanted_offsets=wanted_offsets,
        wanted_sorted=sorted(wanted_offsets),
    )
    findings: list[Finding] = []
    scan = _Scanner(path, base, opts, part, facts, findings)
    walker = scan.walk(path, start, end)
    return {
        "clean": walker.stop is WalkStop.END and walker.position == end,
        "findings": findings,
        "bad_regions": scan.bad_regions,
        "batches": scan.batches,
        "good": scan.good,
        "max_ts": scan.max_ts,
        "at_position": facts.at_position,
        "by_last_offset": facts.by_last_offset,
        "abort_markers": facts.abort_markers,
        "epochs": part.epochs,
        "first_offset": facts.first_offset,
        "first_last": facts.first_last,
        "last_offset": facts.last_offset,
        "containing": facts.containing,
    }


def _stop_reason(walker: SegmentWalker, path: str, pos: int, size: int) -> tuple[str, str]:
    if walker.stop is WalkStop.ERROR and walker.error is not None:
        msg = walker.error.message
        if msg.startswith("Invalid magic used in LegacyRecord"):
            return "unknown_magic", msg
        return "invalid_size", msg
    header = _read(path, pos, 12)
    if len(header) == 12:
        declared = int.from_bytes(header[8:12], "big", signed=True)
        return "partial_batch", f"a batch of {declared + 12} bytes starts at {pos} but only {size - pos} bytes remain"
    return "partial_batch", f"{size - pos} bytes at the end are too short for a batch header"


def _read(path: str, pos: int, n: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(pos)
        return f.read(n)


def _zero_run_end(path: str, start: int, end: int) -> int:
    """The first non-zero byte at or after ``start`` in ``path`` (``end`` if none)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return zero_run_end(fd, start, end)
    finally:
        os.close(fd)


_RESYNC_MAX_BATCH = 256 << 20
_LEGACY_LENGTHS = struct.Struct(">i")


def _plausible(buf: bytes, i: int, magic: int, size: int, n: int) -> bool:
    """Whether the header at ``buf[i]`` could be a real entry (checked before its CRC)."""
    if magic == 2:
        if i + V2_HEADER_SIZE > n:
            return True  # cannot tell from this window: let the CRC decide
        (_b, _l, _ple, _m, _crc, attrs, lod, bts, mts, pid, pepoch, bseq, count) = V2_HEADER.unpack_from(buf, i)
        return (
            lod >= 0 and 0 <= count <= lod + 1 and pid >= -1 and pepoch >= -1 and bseq >= -1
            and mts >= -1 and (bts >= -1 or attrs & 0x40) and not attrs & 0xFF80
        )
    # v0/v1: key and value lengths must add up to the message size
    head = RECORD_OVERHEAD_V1 if magic == 1 else RECORD_OVERHEAD_V0
    k_at = i + 12 + head - 8
    if k_at + 4 > n:
        return True
    (kl,) = _LEGACY_LENGTHS.unpack_from(buf, k_at)
    v_at = k_at + 4 + max(kl, 0)
    if kl < -1 or v_at + 4 > n:
        return kl >= -1
    (vl,) = _LEGACY_LENGTHS.unpack_from(buf, v_at)
    return vl >= -1 and size == head + max(kl, 0) + max(vl, 0)


def _next_header_plausible(f, at: int, end: int) -> bool:
    """A real entry is followed by the end of the data or by another entry's header."""
    if end - at <= 17:
        return True
    f.seek(at)
    head = f.read(17)
    size = int.from_bytes(head[8:12], "big", signed=True)
    return len(head) == 17 and head[16] <= 2 and size >= RECORD_OVERHEAD_V0


def _crc_at(f, buf: bytes, i: int, n: int, p: int, total: int, magic: int) -> int:
    """The CRC of the candidate entry at file position ``p`` (streamed: memory stays flat)."""
    start = 21 if magic == 2 else 16
    fn = crc32c if magic == 2 else crc32
    if i + total <= n:
        return fn(memoryview(buf)[i + start : i + total])
    f.seek(p + start)
    left = total - start
    value = 0
    while left > 0:
        piece = f.read(min(1 << 20, left))
        if not piece:
            return -1
        value = fn(piece, value)
        left -= len(piece)
    return value


def resync(path: str, start: int, end: int, chunk: int = 1 << 20) -> int | None:
    """The next position >= start where a complete entry with a valid CRC begins, or None."""
    with open(path, "rb") as f:
        pos = start
        while pos < end - 17:
            f.seek(pos)
            buf = f.read(min(chunk + 64, end - pos))
            n = len(buf)
            i = 0
            limit = n - 17
            while i < limit:
                magic = buf[i + 16]
                if magic > 2:
                    i += 1
                    continue
                size = int.from_bytes(buf[i + 8 : i + 12], "big", signed=True)
                if size < RECORD_OVERHEAD_V0:
                    if size == 0 and buf[i] == 0:
                        # a zero run: no entry starts inside it (its size field would be 0);
                        # skip it at memory speed, across windows when it runs past this one
                        z = zero_run_end_in(buf, i, n)
                        if z == n:
                            z = zero_run_end(f.fileno(), pos + n, end) - pos
                            if pos + z >= end:
                                return None
                        skip_to = max(i + 1, z - 16)
                        if skip_to >= limit:
                            i = skip_to
                            break
                        i = skip_to
                        continue
                    i += 1
                    continue
                total = size + LOG_OVERHEAD
                p = pos + i
                if p + total > end:
                    i += 1
                    continue
                if magic == 2 and total < V2_HEADER_SIZE or magic == 1 and size < RECORD_OVERHEAD_V1:
                    i += 1
                    continue
                # cheap plausibility before a CRC: random bytes rarely make a sane header, and a
                # false candidate with a huge size must not be read and checksummed
                if total > _RESYNC_MAX_BATCH or not _plausible(buf, i, magic, size, n):
                    i += 1
                    continue
                if not _next_header_plausible(f, p + total, end):
                    i += 1
                    continue
                stored = int.from_bytes(buf[i + 17 : i + 21] if magic == 2 else buf[i + 12 : i + 16], "big")
                if _crc_at(f, buf, i, n, p, total, magic) == stored:
                    return p
                i += 1
            pos += max(i, 1)
    return None


class _Adder:
    """Appends findings about one batch, located at the batch unless told otherwise."""

    __slots__ = ("out", "path", "b", "index")

    def __init__(self, out: list[Finding], path: str, b: Batch, index: int) -> None:
        self.out = out
        self.path = path
        self.b = b
        self.index = index

    def __call__(self, kind: str, message: str, expected=None, found=None, position=None, length=None) -> None:
        b = self.b
        if position is None:
            position = b.position
        elif position >= b.position + b.size:  # e.g. "premature EOF": the batch's last byte
            position = b.position + b.size - 1
        if length is None:  # to the end of the batch: a finding never runs past its batch
            length = max(1, b.position + b.size - position)
        self.out.append(
            Finding(
                self.path,
                position,
                length,
                kind,
                message,
                self.index,
                b.offset,
                b.last_offset,
                expected,
                found,
            )
        )


def _check_batch(
    b: Batch,
    data,
    path: str,
    index: int,
    base: int | None,
    part: _Partition,
    facts: _SegmentFacts,
    out: list[Finding],
    opts: VerifyOptions,
) -> None:
    """The per-batch checks; findings are appended to ``out``."""
    # (_Scanner.run handles healthy v2 data batches inline; everything else comes here)
    pos, first, magic = b.position, b.offset, b.magic
    prev = part.last_offset
    last = b.last_offset
    add = _Adder(out, path, b, index)

    if magic > 2:
        add("unknown_magic", f"magic byte {magic} (Kafka parses it as v2; the CRC does not cover it)", "0, 1 or 2", magic, pos + 16, 1)
    if b.crc != b.computed_crc:
        # expected = computed from the bytes, found = stored on disk (the convention of errors.py)
        add("crc_mismatch", f"the batch's bytes do not match its CRC (stored crc {b.crc}, computed crc {b.computed_crc}; the batch spans {b.size} bytes)", b.computed_crc, b.crc)
        return  # the other fields cannot be trusted
    codec = b.attributes & 0x07
    if codec > 4 or (codec == 4 and magic < 2):
        add("unknown_codec", f"compression codec id {codec} is not valid with magic {magic}", "0-4 (zstd only with magic 2)", codec, pos + (22 if magic >= 2 else 17), 1)
        return
    if magic >= 2:
        if b.count < 0 or b.count > b.last_offset_delta + 1:
            add("offset_delta_mismatch", f"count {b.count} with lastOffsetDelta {b.last_offset_delta}", f"0..{b.last_offset_delta + 1}", b.count, pos + 57, 4)
        if b.last_offset_delta < 0:
            add("offset_delta_mismatch", f"negative lastOffsetDelta {b.last_offset_delta}", ">= 0", b.last_offset_delta, pos + 23, 4)
        if b.base_timestamp < -1 or b.max_timestamp < -1:
            add("timestamp_invalid", f"timestamps below -1 (base {b.base_timestamp}, max {b.max_timestamp})", ">= -1", (b.base_timestamp, b.max_timestamp), pos + 27, 16)
        elif (
            not b.attributes & 0x08
            and not b.has_delete_horizon
            and b.count > 0
            and b.max_timestamp < b.base_timestamp
        ):
            add("timestamp_invalid", f"CreateTime maxTimestamp {b.max_timestamp} below baseTimestamp {b.base_timestamp}", f">= {b.base_timestamp}", b.max_timestamp, pos + 35, 8)
        pid, epoch, seq = b.producer_id, b.producer_epoch, b.base_sequence
        # (brokers write pid -1 with baseSequence 0, e.g. the group coordinator: not a finding)
        if pid < -1 or epoch < -1 or seq < -1 or (pid < 0 and b.is_transactional):
            add("producer_fields_invalid", f"producerId {pid}, producerEpoch {epoch}, baseSequence {seq}, transactional {b.is_transactional}", "consistent producer fields", (pid, epoch, seq), pos + 43, 14)
        if b.partition_leader_epoch >= 0 and b.partition_leader_epoch not in part.epochs:
            part.epochs[b.partition_leader_epoch] = first
    elif magic == 1 and b.max_timestamp < -1:
        add("timestamp_invalid", f"timestamp {b.max_timestamp} below -1", ">= -1", b.max_timestamp, pos + 18, 8)
    # offsets
    # (a v0/v1 wrapper's first offset needs its records; its entry offset is its last offset)
    if prev is not None and first <= prev and (magic >= 2 or not codec):
        add("offset_not_monotonic", f"first offset {first} is not above the previous batch's last offset {prev}", f"> {prev}", first, pos, 8)
    elif prev is not None and magic < 2 and codec and last <= prev:
        add("offset_not_monotonic", f"offset {last} is not above the previous batch's last offset {prev}", f"> {prev}", last, pos, 8)
    if base is not None:
        if first < base and (magic >= 2 or not codec):
            add("offset_below_base", f"offset {first} below the segment base offset {base}", f">= {base}", first, pos, 8)
        elif magic < 2 and codec and last < base:  # a wrapper's entry offset is its last inner offset
            add("offset_below_base", f"wrapper offset {last} below the segment base offset {base}", f">= {base}", last, pos, 8)
        elif last - base > INT32_MAX:
            add("offset_overflow", f"offset {last} is more than 2^31-1 above the segment base offset {base}", f"<= {base + INT32_MAX}", last, pos, 8)
    part.last_offset = last if prev is None else max(prev, last)
    if facts.first_offset is None:
        facts.first_offset = first
        facts.first_last = last
    facts.last_offset = last
    if magic >= 2 and b.is_transactional and not b.is_control and b.producer_id >= 0:
        facts.open_txns.setdefault(b.producer_id, first)
    if b.is_control and magic >= 2 and data is not None and b.count > 0:
        from kafkatool.record.control import ControlType, decode_control_key
        from kafkatool.record.records import batch_record_chunks

        try:
            chunks = batch_record_chunks(b, data, max_decompressed=opts.max_decompressed)
            if type(chunks) is not tuple:  # streamed: nothing counts unless the whole batch decodes
                for _chunk in chunks:
                    pass
                chunks = batch_record_chunks(b, data, max_decompressed=opts.max_decompressed)
            for r in (r for records in chunks for r in records):
                _v, type_id = decode_control_key(r.key)
                if type_id == ControlType.ABORT:
                    facts.abort_markers.add((b.producer_id, r.offset))
                if type_id in (ControlType.ABORT, ControlType.COMMIT):
                    began = facts.open_txns.pop(b.producer_id, None)
                    if type_id == ControlType.ABORT and began is not None:
                        facts.expected_aborts.append((b.producer_id, began, r.offset))
                    if not b.is_transactional:
                        # transaction markers live in transactional control batches (KRaft's do not)
                        add("control_not_transactional", f"a {'ABORT' if type_id == 0 else 'COMMIT'} marker in a control batch without the transactional flag", "attributes & 0x10", b.attributes, pos + 21, 2)
                    # The producer state reads a marker batch's first marker only (Kafka writes
                    # one); more, a batch's writer could make millions of, and keeping them all
                    # would grow memory with the record count.
                    break
        except KafkaToolError:
            pass  # reported by the deep checks
    if opts.deep:
        _deep_checks(b, data, path, index, out, opts)


def _deep_checks(b: Batch, data, path: str, index: int, out: list[Finding], opts: VerifyOptions) -> None:
    from kafkatool.record.records import batch_record_chunks

    pos = b.position
    add = _Adder(out, path, b, index)

    if data is None:
        add("decompressed_too_large", f"a batch of {b.size} bytes is too large to decode in memory")
        return
    # The records are checked as they are decoded, a few thousand at a time, so memory stays
    # flat whatever the batch's record count; their findings count only if the whole batch
    # decodes (else the decoding error is the one finding, as when it was decoded first).
    mark = len(out)
    try:
        chunks = batch_record_chunks(b, data, max_decompressed=opts.max_decompressed)
        if b.magic >= 2:
            _check_v2_records(b, chunks, add)
        else:
            _check_legacy_records(b, chunks, add)
    except CompressionError as e:
        del out[mark:]
        kind = "decompressed_too_large" if "exceeds the limit" in e.message else "decompression_failed"
        add(kind, e.message, position=pos + (e.position or 0))
        return
    except (InvalidRecordError, CorruptRecordError) as e:
        del out[mark:]
        msg = e.message
        where = pos + (e.position or 0)
        if "record count" in msg or "declared batch size" in msg:
            add("record_count_mismatch", msg, position=where)
        elif "wrapper" in msg or "inner" in msg.lower() or "Inner" in msg or "compressed record set" in msg:
            add("invalid_wrapper", msg, position=where)
        else:
            add("invalid_record", msg, position=where)
        return


def _check_v2_records(b: Batch, chunks, add: _Adder) -> None:
    """The record checks of a v2 batch, chunk by chunk; at most one finding per check, in
    a fixed order (offsets, timestamps, control records)."""
    lod = b.last_offset_delta
    base = b.offset
    max_ts = b.max_timestamp
    prev_delta = -1
    offsets_bad = timestamps_bad = controls_bad = None
    check_timestamps = not b.attributes & 0x08 and not b.has_delete_horizon
    check_controls = b.is_control
    for records in chunks:
        if offsets_bad is None:
            for r in records:
                delta = r.offset - base
                if delta < 0 or delta > lod or delta <= prev_delta:
                    offsets_bad = ("record_offset_invalid", f"record offset {r.offset} (delta {delta}) outside 0..{lod} or not increasing", f"{prev_delta + 1}..{lod}", delta)
                    break
                prev_delta = delta
        if check_timestamps and timestamps_bad is None:
            for r in records:
                if r.timestamp > max_ts:
                    timestamps_bad = ("record_timestamp_invalid", f"record {r.offset} has timestamp {r.timestamp} above the batch maxTimestamp {max_ts}", f"<= {max_ts}", r.timestamp)
                    break
        if check_controls and controls_bad is None:
            from kafkatool.record.control import ControlType, decode_control_key, decode_end_txn_marker, decode_kraft_control

            for r in records:
                try:
                    _v, type_id = decode_control_key(r.key)
                    if type_id in (ControlType.ABORT, ControlType.COMMIT):
                        decode_end_txn_marker(r.value)
                    else:
                        decode_kraft_control(type_id, r.value)
                except KafkaToolError as e:
                    controls_bad = ("invalid_control_record", f"control record {r.offset}: {e.message}", None, None)
                    break
    for bad in (offsets_bad, timestamps_bad, controls_bad):
        if bad is not None:
            add(bad[0], bad[1], expected=bad[2], found=bad[3])


def _check_legacy_records(b: Batch, chunks, add: _Adder) -> None:
    """The record checks of a legacy entry (a wrapper's inner messages), chunk by chunk."""
    prev_off = None
    looking = True
    last_off = None
    for records in chunks:
        if looking:
            for r in records:
                if r.crc_valid is False:
                    add("inner_crc_mismatch", f"inner message {r.offset} fails its CRC (stored crc {r.crc}, not the crc computed over its bytes) inside a wrapper whose outer CRC is valid", found=r.crc)
                    looking = False
                    break
                if prev_off is not None and r.offset <= prev_off:
                    add("record_offset_invalid", f"inner message offsets not increasing ({prev_off} then {r.offset})")
                    looking = False
                    break
                prev_off = r.offset
        if records:
            last_off = records[-1].offset
    if b.attributes & 0x07 and last_off is not None and last_off != b.offset and b.offset != 0:
        # (a wrapper offset of 0 is the librdkafka quirk Kafka accepts, §17 C.25)
        add("invalid_wrapper", f"wrapper offset {b.offset} is not its last inner offset {last_off}", expected=last_off, found=b.offset)


# --------------------------------------------------------------------------- side files


def _verify_other(t: _Target, opts: VerifyOptions, part: _Partition, present: set[str]) -> Iterator[Finding | FileSummary]:
    from kafkatool.segment import checkpoint as ckpt

    path = t.path
    name = os.path.basename(path)
    suffix = names.file_suffix(name)
    kind = names.classify(name)
    K = names.FileKind
    findings: list[Finding] = []
    size = os.path.getsize(path)
    label = kind.value
    bad_name = _offset_name_finding(t) if suffix in (".index", ".timeindex", ".txnindex") else None
    if bad_name is not None:
        findings.append(bad_name)  # Kafka throws before it would delete it as an orphan
    elif suffix in (".index", ".timeindex", ".txnindex"):
        prefix = name.split(".", 1)[0]
        if f"{prefix}.log" not in present:
            findings.append(Finding(path, None, None, "orphan_index", f"{prefix}.log does not exist: the broker deletes this file at start"))
        else:
            try:
                base = names.parse_base_offset(name)
            except KafkaToolError as e:
                findings.append(Finding(path, None, None, "invalid_file_name", f"{e.message}: its entries cannot be checked without the base offset", expected=e.expected, found=e.found))
                base = None
            facts = part.segments.get(base) if base is not None else None
            if facts is not None:
                if suffix == ".index":
                    _check_offset_index(path, facts, findings, opts)
                elif suffix == ".timeindex":
                    _check_time_index(path, facts, findings)
                else:
                    _check_txn_index(path, facts, findings)
    elif suffix == ".snapshot":
        _check_snapshot(path, part, findings)
    elif suffix == ".checkpoint":
        # KRaft snapshots and bootstrap.checkpoint are batch sequences: verify them as logs
        sub = _Partition()
        yield from _verify_log(_Target(path, None, t.state), opts, sub, set())
        return
    elif kind is K.LEADER_EPOCH_CHECKPOINT:
        _check_leader_epochs(path, part, findings)
    elif kind in (K.OFFSET_CHECKPOINT, K.PARTITION_METADATA, K.QUORUM_STATE, K.META_PROPERTIES):
        reader = {
            K.OFFSET_CHECKPOINT: ckpt.read_offset_checkpoint,
            K.PARTITION_METADATA: ckpt.read_partition_metadata,
            K.QUORUM_STATE: ckpt.read_quorum_state,
            K.META_PROPERTIES: ckpt.read_meta_properties,
        }[kind]
        try:
            reader(path)
        except KafkaToolError as e:
            findings.append(Finding(path, e.position, None, "checkpoint_invalid", e.message))
    else:
        label = "skipped"
    yield from findings
    yield FileSummary(path, label, size, 0, len(findings), t.state)


def _real_entries(data: bytes, entry_size: int) -> int:
    """Entries before the zero-filled preallocated tail (every slot after them all zeros)."""
    whole = len(data) - len(data) % entry_size
    used = len(data[:whole].rstrip(b"\x00"))
    return -(-used // entry_size)


def _index_entries(path: str, index, entry_size: int, decode, sanity, sanity_kind: str, out: list[Finding]) -> tuple[list, int]:
    """The entries of an offset or time index and how many precede its zero-filled tail.

    Kafka's sanity check runs on the entries a broker wrote: a live or crashed broker's
    index keeps its preallocated zero tail (an untrimmed time index always fails the check,
    §8.4, which the broker has not run since 2.3): that tail is a state, reported as such.
    """
    entries = list(index.iter_absolute())
    real = _real_entries(index.data, entry_size)
    checked = index if real == len(entries) else decode(index.data[: real * entry_size], index.base_offset, path)
    try:
        sanity(checked, path=path)
    except KafkaToolError as e:
        out.append(Finding(path, 0, index.file_length, sanity_kind, e.message))
    if real < len(entries):
        out.append(Finding(path, real * entry_size, (len(entries) - real) * entry_size, "preallocated_index_tail", f"{len(entries) - real} zero-filled preallocated slots after {real} entries"))
    return entries, real


def _check_offset_index(path: str, facts: _SegmentFacts, out: list[Finding], opts: VerifyOptions) -> None:
    from kafkatool.segment import index as idx

    index = idx.read_offset_index(path, facts.base)
    entries, real = _index_entries(path, index, idx.OFFSET_ENTRY_SIZE, idx.decode_offset_index, idx.sanity_check_offset_index, "index_sanity_failed", out)
    prev = None
    for i, (offset, position) in enumerate(entries[:real]):
        where = i * 8
        if prev is not None and offset <= prev:
            out.append(Finding(path, where, 8, "index_not_monotonic", f"entry {i} offset {offset} is not above the previous {prev}", expected=f"> {prev}", found=offset))
        prev = offset
        if position >= facts.valid_end or position >= facts.size:
            out.append(Finding(path, where, 8, "index_entry_past_end", f"entry {i} (offset {offset}) points at position {position}, past the last valid batch (log ends at {facts.valid_end})", expected=f"< {facts.valid_end}", found=position))
            continue
        batch_last = facts.at_position.get(position)
        if batch_last is None:
            out.append(Finding(path, where, 8, "index_entry_not_batch_start", f"entry {i} (offset {offset}) points at position {position}, which is not a batch start", expected="a batch start", found=position))
            continue
        if batch_last != offset:
            # follower appends index the first batch's position with the chunk's last offset (§17 E.42)
            later = facts.by_last_offset.get(offset)
            if later is not None and later[0] > position:
                continue
            out.append(Finding(path, where, 8, "index_offset_mismatch", f"entry {i} says offset {offset} at position {position}, the batch there ends at {batch_last}", expected=batch_last, found=offset))


def _check_time_index(path: str, facts: _SegmentFacts, out: list[Finding]) -> None:
    from kafkatool.segment import index as idx

    tindex = idx.read_time_index(path, facts.base)
    entries, real = _index_entries(path, tindex, idx.TIME_ENTRY_SIZE, idx.decode_time_index, idx.sanity_check_time_index, "timeindex_sanity_failed", out)
    prev_ts = prev_off = None
    for i, (ts, offset) in enumerate(entries[:real]):
        where = i * 12
        if prev_ts is not None and (ts <= prev_ts or offset < prev_off):
            out.append(Finding(path, where, 12, "timeindex_not_monotonic", f"entry {i} ({ts}, {offset}) does not follow ({prev_ts}, {prev_off})", expected=f"> ({prev_ts}, {prev_off})", found=(ts, offset)))
        prev_ts, prev_off = ts, offset
        if facts.last_offset is None or offset > facts.last_offset:
            out.append(Finding(path, where, 12, "timeindex_entry_past_end", f"entry {i} offset {offset} is beyond the log's last offset {facts.last_offset}", expected=f"<= {facts.last_offset}", found=offset))
            continue
        found = facts.by_last_offset.get(offset)
        if found is None:
            inside = facts.containing.get(offset)
            if inside is not None:
                # brokers <= 3.7 indexed the max-timestamp record itself (§17 E.43): benign
                out.append(Finding(path, where, 12, "timeindex_record_offset", f"entry {i} offset {offset} is a record inside the batch ending at {inside[1]} (written by a broker <= 3.7)", expected=inside[1], found=offset))
                if inside[2] != ts:
                    out.append(Finding(path, where, 12, "timeindex_timestamp_mismatch", f"entry {i} timestamp {ts} differs from the largest timestamp up to the batch holding offset {offset}, {inside[2]}", expected=inside[2], found=ts))
                continue
            out.append(Finding(path, where, 12, "timeindex_entry_not_found", f"entry {i} offset {offset} is not in any batch", expected="a batch's last offset", found=offset))
            continue
        if found[1] != ts:
            out.append(Finding(path, where, 12, "timeindex_timestamp_mismatch", f"entry {i} timestamp {ts} differs from the largest timestamp up to offset {offset}, {found[1]}", expected=found[1], found=ts))


def _check_txn_index(path: str, facts: _SegmentFacts, out: list[Finding]) -> None:
    from kafkatool.segment import txnindex as txn

    with open(path, "rb") as f:
        data = f.read()
    try:
        entries = list(txn.iter_txn_index(data, os.path.abspath(path)))
    except KafkaToolError as e:
        out.append(Finding(path, e.position, 34, "txnindex_invalid", e.message))
        return
    if len(data) % 34:
        out.append(Finding(path, len(data) - len(data) % 34, len(data) % 34, "txnindex_invalid", f"{len(data) % 34} bytes of a partial entry at the end (ignored by Kafka)"))
    for i, e in enumerate(entries):
        where = i * 34
        if e.last_offset < facts.base:
            out.append(Finding(path, where, 34, "txnindex_below_base", f"entry {i} lastOffset {e.last_offset} is below the segment base {facts.base}", expected=f">= {facts.base}", found=e.last_offset))
        elif (e.producer_id, e.last_offset) not in facts.abort_markers:
            out.append(Finding(path, where, 34, "txnindex_no_abort_marker", f"entry {i}: no ABORT marker of producer {e.producer_id} at offset {e.last_offset}", expected="an ABORT marker", found=e.last_offset))
    listed = {(e.producer_id, e.last_offset) for e in entries}
    for pid, began, marker in facts.expected_aborts:
        if (pid, marker) not in listed:
            out.append(Finding(path, None, None, "txnindex_missing_entry", f"producer {pid}'s transaction {began}..{marker} was aborted in this segment but has no entry", expected=(pid, began, marker), found=None))


def _check_snapshot(path: str, part: _Partition, out: list[Finding]) -> None:
    from kafkatool.segment import snapshot as snap

    name = os.path.basename(path)
    try:
        s = snap.read_producer_snapshot(path, verify_crc=False)
    except KafkaToolError as e:
        out.append(Finding(path, e.position, None, "snapshot_invalid", e.message))
        return
    if not s.crc_valid:
        out.append(Finding(path, 2, 4, "snapshot_crc_mismatch", f"Snapshot is corrupt (CRC is no longer valid) (stored crc {s.crc}, computed crc {s.computed_crc})", expected=s.computed_crc, found=s.crc))
    try:
        at = names.parse_base_offset(name)
    except KafkaToolError:
        return
    if part.log_end is not None and at > part.log_end:
        out.append(Finding(path, None, None, "snapshot_beyond_log_end", f"snapshot at offset {at} is above the log end offset {part.log_end} (the broker deletes it)", expected=f"<= {part.log_end}", found=at))


def _check_leader_epochs(path: str, part: _Partition, out: list[Finding]) -> None:
    from kafkatool.segment import checkpoint as ckpt

    try:
        entries = ckpt.read_leader_epoch_checkpoint(path)
    except KafkaToolError as e:
        out.append(Finding(path, e.position, None, "checkpoint_invalid", e.message))
        return
    prev = None
    for e in entries:
        if prev is not None and (e.epoch <= prev.epoch or e.start_offset < prev.start_offset):
            out.append(Finding(path, None, None, "leader_epoch_mismatch", f"entries not increasing: epoch {prev.epoch}@{prev.start_offset} then {e.epoch}@{e.start_offset}"))
        prev = e
        seen = part.epochs.get(e.epoch)
        if seen is not None and seen != e.start_offset and e.start_offset >= min(part.epochs.values()):
            out.append(Finding(path, None, None, "leader_epoch_mismatch", f"epoch {e.epoch} starts at offset {e.start_offset} in the checkpoint, but its first batch in the log is at {seen}", expected=seen, found=e.start_offset))
    known = {e.epoch for e in entries}
    for epoch, first in sorted(part.epochs.items()):
        if epoch not in known and entries and epoch > entries[0].epoch:
            out.append(Finding(path, None, None, "leader_epoch_mismatch", f"batches carry leader epoch {epoch} (from offset {first}) but the checkpoint has no entry for it", expected=None, found=epoch))
