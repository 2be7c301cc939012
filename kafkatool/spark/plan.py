"""What a ``kafka_segments`` read covers, and how it is cut into Spark input partitions.

Pure planning on the driver: paths to partition dirs and segments (directory listings and
``stat`` only), segments pruned by the offset bounds (and rolled ones by their ``.timeindex``'s
last entry against a start time), large segments split at proven batch
starts, and the pieces bin-packed into tasks. No pyspark and no pyarrow here; the objects
made are small, frozen and picklable (Spark ships each task to an executor).

* :class:`ReadOptions` is the reader's options (``from_options`` parses Spark's strings;
  ``restrict`` intersects the bounds pushed-down filters give);
* :func:`expand_paths` turns a load path (``a,b``, globs) into existing paths;
* :func:`plan` gives the :class:`ReadTask` s of the ``records``/``batches`` kinds,
  :func:`plan_stats` those of ``stats``, :func:`plan_findings` the :class:`FindingsTask` s of
  ``findings`` (the groups of ``kafkatool verify``, in its order).

Damaged data never makes planning fail: a split that meets damage gives fewer ranges (the
rest of the segment stays one range), and a directory or segment that cannot be listed or
``stat``-ed becomes a :class:`SegmentSlice` with an ``error`` that the reader turns into an
error row, so one bad partition does not fail a cluster-wide job. What is a usage mistake
(a path that does not exist, a glob that matches nothing, a path with nothing Kafka in it,
a bad option) raises ``ValueError`` naming the path or option.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import glob
import math
import os
import re
import stat
import struct
from dataclasses import dataclass, field, replace
from typing import Iterable, Iterator, Mapping, Sequence

from kafkatool.errors import KafkaToolError
from kafkatool.segment import files as names
from kafkatool.segment.logdir import DirectoryError, EntryType, Partition, Segment, batch_at, segments_of

__all__ = [
    "KINDS",
    "DEFAULT_MAX_PARTITION_BYTES",
    "MIN_MAX_PARTITION_BYTES",
    "OPEN_COST_BYTES",
    "UNKNOWN_BASE_OFFSET",
    "OPTION_NAMES",
    "ReadOptions",
    "SegmentSlice",
    "ReadTask",
    "FindingsTask",
    "expand_paths",
    "segment_may_hold",
    "rolled_max_timestamp",
    "plan",
    "plan_stats",
    "plan_findings",
    "stats_targets",
]

KINDS = ("records", "batches", "findings", "stats")
DEFAULT_MAX_PARTITION_BYTES = 128 << 20
"""Spark's own ``spark.sql.files.maxPartitionBytes`` default."""
MIN_MAX_PARTITION_BYTES = 1 << 10
OPEN_COST_BYTES = 4 << 20
"""What opening one more file counts for when packing (Spark's ``spark.sql.files.openCostInBytes``):
4,000 tiny segments make about 4000 * 4 MiB / 128 MiB = 125 tasks, not one."""
UNKNOWN_BASE_OFFSET = -1
"""The base offset of a ``.log`` named alone whose name is not an offset (a copy): it is read
whole, never pruned (as ``kafkatool stats`` reads such a copy)."""

_PREFIX = "kafka_segments"

#: The options, by their lower-case key (Spark hands the reader a case-insensitive map).
OPTION_NAMES = {n.lower(): n for n in (
    "kind", "topics", "partitions", "startOffset", "endOffset", "startTime", "endTime",
    "includeHeaders", "verifyCrc", "deep", "maxPartitionBytes",
)}
#: Keys Spark sets itself (``load(path)`` / ``load([paths])``): not options of ours.
_SPARK_KEYS = frozenset({"path", "paths"})
#: Options of Spark's own Kafka source that users carry over: refused with the one to use.
_KAFKA_SOURCE_OPTIONS = {
    "startingoffsets": "startOffset", "endingoffsets": "endOffset",
    "startingtimestamp": "startTime", "endingtimestamp": "endTime",
    "startingoffsetsbytimestamp": "startTime", "endingoffsetsbytimestamp": "endTime",
    "subscribe": "topics", "subscribepattern": "topics", "assign": "topics and partitions",
}


def _option_error(name: str, value: object, why: str) -> ValueError:
    return ValueError(f"{_PREFIX}: option {name}={value!r}: {why}")


# ----------------------------------------------------------------------------- options


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """What a read covers and how. Offsets and times are half-open: ``[start, end)``;
    None is unbounded. Times are milliseconds since the epoch, as Kafka stores them."""

    kind: str = "records"
    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    start_offset: int | None = None
    end_offset: int | None = None
    start_time: int | None = None
    end_time: int | None = None
    include_headers: bool = True
    verify_crc: bool = True
    deep: bool = True
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{_PREFIX}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if not isinstance(self.max_partition_bytes, int) or self.max_partition_bytes < MIN_MAX_PARTITION_BYTES:
            raise ValueError(f"{_PREFIX}: max_partition_bytes {self.max_partition_bytes!r} is below "
                             f"{MIN_MAX_PARTITION_BYTES}")
        # sets given as any iterable are kept as frozensets (the dataclass is hashable and picklable)
        if self.topics is not None and not isinstance(self.topics, frozenset):
            object.__setattr__(self, "topics", frozenset(self.topics))
        if self.partitions is not None and not isinstance(self.partitions, frozenset):
            object.__setattr__(self, "partitions", frozenset(self.partitions))

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> "ReadOptions":
        """The options of ``spark.read.format("kafka_segments").option(...)``.

        Keys are matched without regard to case. ``path``/``paths`` (Spark's) and keys that
        resemble none of ours are ignored; a key close to one of ours (``startOfset``) and
        the options of Spark's own Kafka source (``startingOffsets``, ``subscribe`` ...) are
        refused with the option meant. Values: ``kind`` one of :data:`KINDS`; ``topics`` and
        ``partitions`` comma-separated; offsets non-negative integers; ``startTime``/
        ``endTime`` milliseconds since the epoch or ISO-8601 (``2023-11-14T22:13:20Z``; no
        zone means UTC; a fraction of a millisecond rounds up, the bounds being ``>= start``
        and ``< end``); booleans ``true``/``false``; ``maxPartitionBytes`` bytes, or with a
        binary unit (``128m``, ``1g``, ``512k``). A bad value raises ``ValueError`` naming
        the option and the value.
        """
        given: dict[str, tuple[str, str]] = {}  # canonical name -> (key as given, value)
        for key, value in options.items():
            low = str(key).lower()
            if low in _SPARK_KEYS:
                continue
            name = OPTION_NAMES.get(low)
            if name is None:
                if low in _KAFKA_SOURCE_OPTIONS:
                    raise _option_error(key, value, f"an option of Spark's Kafka source; kafka_segments takes "
                                                    f"{_KAFKA_SOURCE_OPTIONS[low]}")
                close = difflib.get_close_matches(low, OPTION_NAMES, n=1, cutoff=0.8)
                if close:
                    raise _option_error(key, value, f"unknown option; did you mean {OPTION_NAMES[close[0]]}?")
                continue  # someone else's option (Spark's generic reader options): not ours to refuse
            if name in given:
                raise _option_error(key, value, f"given twice (also as {given[name][0]}={given[name][1]!r})")
            if value is None:
                raise _option_error(name, value, "no value")
            given[name] = (key, str(value))
        v = {name: value for name, (_key, value) in given.items()}
        kw: dict[str, object] = {}
        if "kind" in v:
            kind = v["kind"].strip().lower()
            if kind not in KINDS:
                raise _option_error("kind", v["kind"], f"not one of {', '.join(KINDS)}")
            kw["kind"] = kind
        if "topics" in v:
            kw["topics"] = _parse_topics(v["topics"])
        if "partitions" in v:
            kw["partitions"] = _parse_partitions(v["partitions"])
        for name, attr in (("startOffset", "start_offset"), ("endOffset", "end_offset")):
            if name in v:
                kw[attr] = _parse_offset(name, v[name])
        for name, attr in (("startTime", "start_time"), ("endTime", "end_time")):
            if name in v:
                kw[attr] = _parse_time(name, v[name])
        for name, attr in (("includeHeaders", "include_headers"), ("verifyCrc", "verify_crc"), ("deep", "deep")):
            if name in v:
                kw[attr] = _parse_bool(name, v[name])
        if "maxPartitionBytes" in v:
            kw["max_partition_bytes"] = _parse_bytes("maxPartitionBytes", v["maxPartitionBytes"])
        for lo, hi in (("startOffset", "endOffset"), ("startTime", "endTime")):
            a, b = kw.get(_ATTR[lo]), kw.get(_ATTR[hi])
            if a is not None and b is not None and b < a:  # type: ignore[operator]
                raise _option_error(hi, v[hi], f"below {lo}={v[lo]!r} (the range is [{lo}, {hi}))")
        return cls(**kw)  # type: ignore[arg-type]

    def restrict(
        self,
        *,
        topics: Iterable[str] | None = None,
        partitions: Iterable[int] | None = None,
        offsets: tuple[int | None, int | None] | None = None,
        times: tuple[int | None, int | None] | None = None,
    ) -> "ReadOptions":
        """These options with their bounds intersected with the ones given (what pushed-down
        filters allow): ``topics``/``partitions`` sets, ``offsets``/``times`` as half-open
        ``(lo, hi)`` with None for unbounded. The result may select nothing (:attr:`empty`)."""
        new_topics = self.topics
        if topics is not None:
            t = frozenset(topics)
            new_topics = t if new_topics is None else new_topics & t
        new_parts = self.partitions
        if partitions is not None:
            p = frozenset(partitions)
            new_parts = p if new_parts is None else new_parts & p
        so, eo = _intersect((self.start_offset, self.end_offset), offsets)
        st, et = _intersect((self.start_time, self.end_time), times)
        return replace(self, topics=new_topics, partitions=new_parts, start_offset=so, end_offset=eo,
                       start_time=st, end_time=et)

    @property
    def empty(self) -> bool:
        """Whether the bounds select nothing at all (an empty set, or ``end <= start``)."""
        return (self.topics == frozenset() or self.partitions == frozenset()
                or _empty_range(self.start_offset, self.end_offset) or _empty_range(self.start_time, self.end_time))

    def selects(self, topic: str | None, partition: int | None) -> bool:
        """Whether a partition is wanted by the ``topics``/``partitions`` sets (a partition dir
        whose name gives no topic or partition is wanted only when no set is given, as SQL's
        ``topic IN (...)`` is false for a null topic)."""
        if self.topics is not None and topic not in self.topics:
            return False
        if self.partitions is not None and partition not in self.partitions:
            return False
        return True


_ATTR = {"startOffset": "start_offset", "endOffset": "end_offset", "startTime": "start_time", "endTime": "end_time"}


def _intersect(have: tuple[int | None, int | None], more: tuple[int | None, int | None] | None) -> tuple[int | None, int | None]:
    if more is None:
        return have
    lo, hi = have
    mlo, mhi = more
    if mlo is not None:
        lo = mlo if lo is None else max(lo, mlo)
    if mhi is not None:
        hi = mhi if hi is None else min(hi, mhi)
    return lo, hi


def _empty_range(lo: int | None, hi: int | None) -> bool:
    return lo is not None and hi is not None and hi <= lo


def _parse_topics(value: str) -> frozenset[str]:
    items = [t.strip() for t in value.split(",")]
    if any(not t for t in items):
        raise _option_error("topics", value, "an empty topic name (comma-separated names, e.g. orders,payments)")
    return frozenset(items)


def _parse_partitions(value: str) -> frozenset[int]:
    out = set()
    for item in value.split(","):
        s = item.strip()
        if not re.fullmatch(r"[0-9]+", s):
            raise _option_error("partitions", value, f"{s!r} is not a partition number (comma-separated "
                                                     "non-negative integers, e.g. 0,1,7)")
        out.add(int(s))
    return frozenset(out)


def _parse_offset(name: str, value: str) -> int:
    s = value.strip()
    if not re.fullmatch(r"[+]?[0-9]+", s):
        raise _option_error(name, value, "not an offset (a non-negative integer)")
    return int(s)


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _parse_time(name: str, value: str) -> int:
    s = value.strip()
    if re.fullmatch(r"[+-]?[0-9]+", s):
        return int(s)
    try:
        t = _dt.datetime.fromisoformat(s)
    except ValueError:
        raise _option_error(name, value, "neither milliseconds since the epoch nor an ISO-8601 time "
                                         "(e.g. 1700000000000 or 2023-11-14T22:13:20Z)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    micros = (t - _EPOCH) // _dt.timedelta(microseconds=1)
    return -(-micros // 1000)  # up: both bounds compare timestamp >= start and < end


def _parse_bool(name: str, value: str) -> bool:
    s = value.strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise _option_error(name, value, "not a boolean (true or false)")


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _parse_bytes(name: str, value: str) -> int:
    m = re.fullmatch(r"([0-9]+)\s*([kmgt]?)(?:i?b)?", value.strip().lower())
    if m is None:
        raise _option_error(name, value, "not a byte size (e.g. 134217728, 128m, 1g)")
    n = int(m.group(1)) * _UNITS[m.group(2)]
    if n < MIN_MAX_PARTITION_BYTES:
        raise _option_error(name, value, f"below the minimum of {MIN_MAX_PARTITION_BYTES} bytes")
    return n


# ----------------------------------------------------------------------------- plan objects


@dataclass(frozen=True, slots=True)
class SegmentSlice:
    """A byte range of one segment for one reader: ``[start, end)`` of ``log_path``.

    ``start`` is a batch start (0, or a cut proven by framing, its batch whole with its CRC
    holding); ``end`` None reads to the end of the file (whatever it holds then). ``bytes``
    is the range's size when planned. A segment is known to hold offsets in
    ``[base_offset, next_base_offset)`` (``next_base_offset`` None for the last segment).

    ``error`` set: nothing to read here; the reader yields one error row with this message
    (a directory that cannot be listed, a file named like a segment that is not a regular
    file, a segment that cannot be ``stat``-ed). ``log_path`` is then the path concerned;
    the message does not repeat it (``cannot list the directory: Permission denied``).

    ``partition_path`` is the partition dir; for a ``.log`` named alone it is ``log_path``
    itself (as ``kafkatool stats`` reports such a file on its own); ``topic``/``partition``
    then still come from the parent directory's name when it parses.
    """

    topic: str | None
    partition: int | None
    partition_path: str
    log_path: str
    base_offset: int
    start: int
    end: int | None
    next_base_offset: int | None
    error: str | None = None
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class ReadTask:
    """One Spark input partition: slices to read in order (a partition's slices in offset
    order). ``bytes`` is the sum of the slices' ``bytes``."""

    slices: tuple[SegmentSlice, ...]
    bytes: int


@dataclass(frozen=True, slots=True)
class FindingsTask:
    """One Spark input partition of the ``findings`` kind: whole verify groups.

    ``groups`` are :func:`kafkatool.verify.expand_targets` groups (tuples of
    :class:`kafkatool.verify.Target`), as the driver found them: running
    ``verify_group(list(group), opts)`` on each, in order, and concatenating the tasks in
    order gives exactly what ``kafkatool verify PATHS`` reports. ``paths`` names each group
    (its partition dir, or its first file for loose files); ``bytes`` is the ``.log`` and
    ``.checkpoint`` bytes the groups hold.
    """

    paths: tuple[str, ...]
    bytes: int
    groups: tuple[tuple, ...] = field(default=(), repr=False)


def segment_may_hold(base_offset: int, next_base_offset: int | None, start_offset: int | None,
                     end_offset: int | None) -> bool:
    """Whether a segment holding offsets ``[base_offset, next_base_offset)`` can hold an offset
    in ``[start_offset, end_offset)`` (None bounds are open). A segment whose base offset is
    unknown (:data:`UNKNOWN_BASE_OFFSET`) may hold any."""
    if base_offset == UNKNOWN_BASE_OFFSET:
        return True
    if end_offset is not None and base_offset >= end_offset:
        return False
    if start_offset is not None and next_base_offset is not None and next_base_offset <= start_offset:
        return False
    return True


_TIME_ENTRY = struct.Struct(">qi")  # (timestamp, relative offset): a .timeindex entry (spec §8.1)


def rolled_max_timestamp(seg: Segment, next_base_offset: int) -> int | None:
    """The largest timestamp of a rolled segment (one followed by ``next_base_offset``) as its
    ``.timeindex`` states it, or None when that is not known this way.

    When a segment is rolled (``LogSegment.onBecomeInactiveSegment``), cleaned or recovered,
    the broker appends its max timestamp so far as the last time index entry; the broker
    loads a segment's ``maxTimestampSoFar`` from that entry and time-based retention and
    ``ListOffsets`` by time go by it. Only the first and last entries are read (24 bytes).
    None: no ``.timeindex``, an empty one, one whose size is no multiple of 12, an untrimmed
    one (zero last entry), one failing ``TimeIndex.sanityCheck`` (last timestamp below the
    first), or a last entry whose offset lies outside ``[base, next_base)`` or without a
    timestamp.
    """
    path = seg.timeindex_path
    if path is None:
        return None
    size = _TIME_ENTRY.size
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size == 0 or st.st_size % size:
                return None
            first = os.pread(fd, size, 0)
            last = os.pread(fd, size, st.st_size - size)
        finally:
            os.close(fd)
    except OSError:
        return None
    if len(first) != size or len(last) != size:
        return None
    first_ts, _ = _TIME_ENTRY.unpack(first)
    last_ts, last_rel = _TIME_ENTRY.unpack(last)
    if last == bytes(size) or last_ts < 0 or last_ts < first_ts:
        return None
    if not 0 <= last_rel < next_base_offset - seg.base_offset:
        return None
    return last_ts


# ----------------------------------------------------------------------------- paths


def _has_magic(s: str) -> bool:
    return any(c in s for c in "*?[")


def expand_paths(path: str | Sequence[str]) -> list[str]:
    """The existing paths a load path names: comma-separated parts (each stripped of
    surrounding blanks; a whole path that exists is taken as is, commas and all), each a
    path or a glob (matches in sorted order). Duplicates are dropped, the first kept.

    Raises ``ValueError`` naming the path that does not exist or the glob that matches
    nothing.
    """
    parts: list[str] = []
    for p in ([path] if isinstance(path, (str, os.PathLike)) else path):
        p = os.fspath(p)
        if os.path.lexists(p):
            parts.append(p)
        else:
            parts.extend(q.strip() for q in p.split(","))
    out: list[str] = []
    kept: set[str] = set()
    for p in parts:
        if not p:
            continue
        if os.path.lexists(p):
            found = [p]
        elif _has_magic(p):
            found = sorted(glob.glob(p))
            if not found:
                raise ValueError(f"{_PREFIX}: {p}: no path matches this pattern")
        else:
            raise ValueError(f"{_PREFIX}: {p}: no such file or directory")
        for f in found:
            if not os.path.exists(f):
                raise ValueError(f"{_PREFIX}: {f}: a symbolic link to nothing")
            if f not in kept:
                kept.add(f)
                out.append(f)
    if not out:
        raise ValueError(f"{_PREFIX}: no path given (load(PATH): a log dir, several comma-separated, a glob, "
                         "a partition dir or a .log file)")
    return out


def stats_targets(paths: str | Sequence[str]):
    """What ``kafkatool stats`` would report for ``paths`` (after :func:`expand_paths`), in its
    order: :func:`kafkatool.stats.find_targets` ``(items, run)``. The stats driver combines the
    pieces of :func:`plan_stats` per item: a :class:`~kafkatool.segment.logdir.Partition`'s are
    the slices whose ``partition_path`` is its ``path`` (none for a partition without
    segments: ``partition_stats`` it on the driver), a named ``Segment``'s the slice whose
    ``partition_path`` is its ``log_path``; a ``PartitionStats`` (a path that cannot be read)
    is the result as it is."""
    from kafkatool.stats import find_targets

    return find_targets(expand_paths(paths))


def _targets(expanded: list[str]):
    from kafkatool.stats import find_targets

    items, run = find_targets(expanded)
    if run.not_segments:
        p = run.not_segments[0]
        raise ValueError(f"{_PREFIX}: {p}: not a segment (.log) file, a partition dir or a log dir")
    if run.nothing:
        p = run.nothing[0]
        raise ValueError(f"{_PREFIX}: {p}: nothing Kafka found here (no partition dir, no segment, not a log dir)")
    return items


def _parent_partition(log_path: str) -> tuple[str | None, int | None]:
    parsed = names.parse_partition_dir(os.path.basename(os.path.dirname(os.path.abspath(log_path))))
    return (parsed.topic, parsed.partition) if parsed else (None, None)


# ----------------------------------------------------------------------------- planning


def plan(paths: str | Sequence[str], opts: ReadOptions, *, parallelism: int | None = None) -> list[ReadTask]:
    """The tasks of a ``records``/``batches`` read (``stats``: :func:`plan_stats`).

    Paths (:func:`expand_paths`) are searched as ``kafkatool stats`` searches them (log dirs,
    directories of log dirs, partition dirs, ``.log`` files). Read: every partition dir Kafka
    would load (named ``<topic>-<partition>``, no ``-delete``/``-future``/``-stray`` state),
    and any partition dir or ``.log`` named in the paths. ``topics``/``partitions`` filter;
    a segment that cannot hold an offset in ``[start_offset, end_offset)`` is left out
    (:func:`segment_may_hold`, as the broker finds a segment by base offsets). With
    ``start_time``, a segment that is not its partition's last is left out when its
    ``.timeindex`` says its largest timestamp is below it (:func:`rolled_max_timestamp`: the
    broker's own knowledge of a rolled segment, which its retention and ``ListOffsets`` by
    time trust, as the reader's seek does); ``end_time`` prunes nothing (nothing bounds a
    segment's smallest timestamp without reading it). The reader applies both bounds exactly.

    A segment larger than the task size is split at proven batch starts
    (``Segment.split(n, exact=True)``, each cut checked to start a whole batch with a valid
    CRC); the slices are packed in order (each partition's in offset order) into tasks of at
    most the task size, each file counting :data:`OPEN_COST_BYTES` more, a larger slice
    alone. The task size is ``max_partition_bytes``, or with ``parallelism`` (Spark's default
    parallelism) as Spark sizes file splits: ``min(max_partition_bytes, max(OPEN_COST_BYTES,
    total / parallelism))``. Deterministic for the same files.
    """
    if opts.kind == "stats":
        return plan_stats(paths, opts, parallelism=parallelism)
    if opts.kind not in ("records", "batches"):
        raise ValueError(f"{_PREFIX}: kind {opts.kind!r} is planned by plan_findings, not plan")
    expanded = expand_paths(paths)
    items = _targets(expanded)
    if opts.empty:
        return []
    named = {os.path.abspath(p) for p in expanded}
    found: list[tuple[Segment | None, SegmentSlice]] = []  # (segment to size/split or None, whole slice)
    seen: set[str] = set()
    for item in items:
        if isinstance(item, Partition):
            key = os.path.realpath(item.path)
            if key in seen:
                continue
            seen.add(key)
            if (item.parsed is None or item.state is not None) and os.path.abspath(item.path) not in named:
                # Kafka does not load it (being deleted, a future replica, a stray; a copy under
                # another name): read only when named
                continue
            if not opts.selects(item.topic, item.partition):
                continue
            found.extend(_partition_slices(item, opts))
        elif isinstance(item, Segment):
            key = os.path.realpath(item.log_path)
            if key in seen:
                continue
            seen.add(key)
            topic, partition = _parent_partition(item.log_path)
            if not opts.selects(topic, partition):
                continue
            if not segment_may_hold(item.base_offset, None, opts.start_offset, opts.end_offset):
                continue
            found.append((item, SegmentSlice(topic, partition, item.log_path, item.log_path, item.base_offset,
                                             0, None, None)))
        else:  # a PartitionStats: a named path or partition dir that cannot be listed
            parsed = names.parse_partition_dir(os.path.basename(os.path.abspath(item.path)))
            topic, partition = (parsed.topic, parsed.partition) if parsed else (None, None)
            if not opts.selects(topic, partition):
                continue
            for problem in item.problems:
                found.append((None, SegmentSlice(topic, partition, item.path, problem.file,
                                                 UNKNOWN_BASE_OFFSET, 0, None, None, error=problem.message)))
    sized = [(seg, _sized(seg, s)) for seg, s in found]
    limit = _task_size(opts.max_partition_bytes, (s.bytes for _seg, s in sized), parallelism)
    slices: list[SegmentSlice] = []
    for seg, s in sized:
        if seg is None or s.error is not None or s.bytes <= limit:
            slices.append(s)
        else:
            slices.extend(_split(seg, s, limit))
    return _pack(slices, limit)


def _partition_slices(p: Partition, opts: ReadOptions) -> Iterator[tuple[Segment | None, SegmentSlice]]:
    """The whole-segment slices of a partition dir wanted by the offset bounds, in offset order;
    an error slice when it cannot be listed or holds a non-regular file named like a segment."""
    try:
        listing = p.listing()
    except DirectoryError as e:
        yield None, SegmentSlice(p.topic, p.partition, p.path, p.path, UNKNOWN_BASE_OFFSET, 0, None, None,
                                 error=e.message)
        return
    segments = segments_of(listing)
    bases = [s.base_offset for s in segments]
    odd = []  # a FIFO, a directory, a dangling link named like a segment: said, never opened
    for e in listing:
        if e.kind is names.FileKind.LOG and not e.is_file:
            odd.append(e)
    for i, seg in enumerate(segments):
        nxt = bases[i + 1] if i + 1 < len(bases) else None
        if not segment_may_hold(seg.base_offset, nxt, opts.start_offset, opts.end_offset):
            continue
        if opts.start_time is not None and nxt is not None:
            top = rolled_max_timestamp(seg, nxt)
            if top is not None and top < opts.start_time:
                continue
        yield seg, SegmentSlice(p.topic, p.partition, p.path, seg.log_path, seg.base_offset, 0, None, nxt)
    for e in odd:
        base = e.base_offset if e.base_offset is not None else UNKNOWN_BASE_OFFSET
        after = [b for b in bases if b > base]
        nxt = after[0] if after else None
        if not segment_may_hold(base, nxt, opts.start_offset, opts.end_offset):
            continue
        what = "symbolic link to nothing" if e.type is EntryType.MISSING else e.type.value
        yield None, SegmentSlice(p.topic, p.partition, p.path, e.path, base, 0, None, nxt,
                                 error=f"named like a segment but a {what}: not read")


def _sized(seg: Segment | None, s: SegmentSlice) -> SegmentSlice:
    """The slice with its size, or an error slice when the segment cannot be ``stat``-ed."""
    if seg is None or s.error is not None:
        return s
    try:
        size = os.stat(seg.log_path).st_size
    except OSError as e:
        return replace(s, error=f"cannot read the file: {e.strerror or e}")
    return replace(s, bytes=size)


def _task_size(max_bytes: int, sizes: Iterable[int], parallelism: int | None) -> int:
    if not parallelism or parallelism < 1:
        return max_bytes
    sizes = list(sizes)
    total = sum(sizes) + OPEN_COST_BYTES * len(sizes)
    return max(MIN_MAX_PARTITION_BYTES, min(max_bytes, max(OPEN_COST_BYTES, total // parallelism)))


def _split(seg: Segment, whole: SegmentSlice, limit: int) -> list[SegmentSlice]:
    """``whole`` (a segment of ``whole.bytes`` bytes) cut into slices of about ``limit`` bytes
    at proven batch starts; the whole segment as one slice when no cut is found or the file
    cannot be read (the reader then reports what is wrong)."""
    size = whole.bytes
    n = math.ceil(size / limit)
    try:
        ranges = seg.split(n, exact=True)
    except (KafkaToolError, OSError, ValueError, struct.error):
        return [whole]
    cuts = [start for start, _end in ranges[1:] if 0 < start < size and batch_at(seg.log_path, start) is not None]
    bounds = [0, *cuts]
    out = []
    for i, start in enumerate(bounds):
        end = bounds[i + 1] if i + 1 < len(bounds) else None
        out.append(replace(whole, start=start, end=end, bytes=(end if end is not None else size) - start))
    return out


def _pack(slices: Sequence[SegmentSlice], limit: int) -> list[ReadTask]:
    """Consecutive slices into tasks whose weight (bytes plus :data:`OPEN_COST_BYTES` per slice)
    stays within ``limit``; a slice heavier than ``limit`` fills a task alone. In order: each
    partition's slices stay in offset order, and the tasks in the order of the slices."""
    tasks: list[ReadTask] = []
    current: list[SegmentSlice] = []
    weight = 0
    for s in slices:
        w = s.bytes + OPEN_COST_BYTES
        if current and weight + w > limit:
            tasks.append(ReadTask(tuple(current), sum(x.bytes for x in current)))
            current, weight = [], 0
        current.append(s)
        weight += w
    if current:
        tasks.append(ReadTask(tuple(current), sum(x.bytes for x in current)))
    return tasks


def plan_stats(paths: str | Sequence[str], opts: ReadOptions = ReadOptions(kind="stats"), *,
               parallelism: int | None = None) -> list[ReadTask]:
    """The tasks of a ``stats`` read: one whole-segment slice (``start`` 0, ``end`` None) per
    segment of every partition ``kafkatool stats`` reads (every state: ``-delete`` dirs too)
    and of every ``.log`` named alone, in :func:`stats_targets` order, packed as :func:`plan`
    packs (never split: a segment's stats are read whole). ``topics``/``partitions`` filter;
    offsets and times do not (stats cover whole segments). Paths that cannot be read give
    no slice: :func:`stats_targets` holds their results."""
    items = _targets(expand_paths(paths))
    if opts.topics == frozenset() or opts.partitions == frozenset():
        return []
    slices: list[SegmentSlice] = []
    for item in items:
        if isinstance(item, Partition):
            if not opts.selects(item.topic, item.partition):
                continue
            try:
                segments = item.segments()
            except DirectoryError:
                continue  # partition_stats reports it on the driver
            for i, seg in enumerate(segments):
                nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
                s = SegmentSlice(item.topic, item.partition, item.path, seg.log_path, seg.base_offset, 0, None, nxt)
                slices.append(_stat_size(s))
        elif isinstance(item, Segment):
            topic, partition = _parent_partition(item.log_path)
            if not opts.selects(topic, partition):
                continue
            slices.append(_stat_size(SegmentSlice(topic, partition, item.log_path, item.log_path,
                                                  item.base_offset, 0, None, None)))
    limit = _task_size(opts.max_partition_bytes, (s.bytes for s in slices), parallelism)
    return _pack(slices, limit)


def _stat_size(s: SegmentSlice) -> SegmentSlice:
    try:
        return replace(s, bytes=os.stat(s.log_path).st_size)
    except OSError:
        return s  # segment_stats reports it as unreadable


def plan_findings(paths: str | Sequence[str], opts: ReadOptions = ReadOptions(kind="findings"), *,
                  parallelism: int | None = None, nothing_kafka: list[str] | None = None) -> list[FindingsTask]:
    """The tasks of a ``findings`` read: the groups of :func:`kafkatool.verify.expand_targets`
    (one partition dir, or loose files) packed whole and in order into tasks of at most the
    task size (see :func:`plan`), so that the findings of the tasks, concatenated in order,
    are ``kafkatool verify``'s. ``nothing_kafka`` given: receives the paths holding nothing
    Kafka (``kafkatool verify`` exits 2 for them); else such a path raises ``ValueError``."""
    from kafkatool.verify import expand_targets

    expanded = expand_paths(paths)
    nothing: list[str] = []
    groups = expand_targets(expanded, nothing)
    if nothing_kafka is not None:
        nothing_kafka.extend(nothing)
    elif nothing:
        raise ValueError(f"{_PREFIX}: {nothing[0]}: nothing Kafka found here (no partition directory, segment, "
                         "index, snapshot or checkpoint file)")
    sized = []
    for g in groups:
        size = 0
        for t in g:
            if t.problem is None and t.path.endswith((".log", ".checkpoint")):
                try:
                    size += os.stat(t.path).st_size
                except OSError:
                    pass
        sized.append((tuple(g), size, len(g)))
    limit = _task_size(opts.max_partition_bytes, (s for _g, s, _n in sized), parallelism)
    tasks: list[FindingsTask] = []
    current: list[tuple[tuple, int]] = []
    weight = 0
    for g, size, files in sized:
        w = size + OPEN_COST_BYTES * max(1, files)
        if current and weight + w > limit:
            tasks.append(_findings_task(current))
            current, weight = [], 0
        current.append((g, size))
        weight += w
    if current:
        tasks.append(_findings_task(current))
    return tasks


def _group_path(group: tuple) -> str:
    if not group:
        return ""
    first = group[0]
    return first.partition or first.path


def _findings_task(groups: list[tuple[tuple, int]]) -> FindingsTask:
    return FindingsTask(tuple(_group_path(g) for g, _s in groups), sum(s for _g, s in groups),
                        tuple(g for g, _s in groups))
