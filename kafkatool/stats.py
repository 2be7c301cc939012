"""``kafkatool stats``: what a partition holds, from its batch headers, in one pass.

Per partition (:class:`PartitionStats`): the first and last offset and the log end, record
and batch counts, bytes, the time range, codecs and magics, the producers (id, epoch, last
sequence), transactional and control batches (commit and abort markers), and the log end
compared with the log dir's ``recovery-point-offset-checkpoint``,
``replication-offset-checkpoint`` and ``log-start-offset-checkpoint``
(:class:`CheckpointComparison`).

Written only against the public API (:mod:`kafkatool.segment.logdir` and the record
types), as a proof that the model is enough for an operation: :func:`iter_stats` takes
command-line paths, :func:`partition_stats` one :class:`~kafkatool.segment.logdir.Partition`.

Shallow: only batch headers are read (the model's batch iteration, which rides the
compiled window walk); nothing is decompressed, except the first record of a control batch
(its marker type) and, for the first offset, a legacy compressed wrapper that opens a
partition. ``deep=True`` also opens every legacy compressed wrapper to count its records.
Memory per partition is bounded whatever the input: the producer table keeps at most
``max_producers`` ids and the distinct producers are counted exactly only up to
:data:`PRODUCER_COUNT_LIMIT`.

Bad input never raises: a corrupt region stops its segment, as the walk does, and is a
located :class:`Problem` (file and byte position) of its partition; a malformed checkpoint
is a problem too, and a missing checkpoint (or entry) is shown as such.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

from kafkatool.errors import KafkaToolError
from kafkatool.record.batch import TIMESTAMP_TYPE_NAMES, Batch
from kafkatool.record.compression import Codec, codec_name
from kafkatool.record.layout import CONTROL_BIT, DELETE_HORIZON_BIT, TIMESTAMP_TYPE_BIT
from kafkatool.segment.logdir import (
    BatchReader, Entry, EntryType, FileKind, LogDir, Partition, Segment, Target, expand, segments_of,
)

__all__ = [
    "CHECKPOINTS",
    "DEFAULT_MAX_PRODUCERS",
    "PRODUCER_COUNT_LIMIT",
    "CheckpointCache",
    "CheckpointComparison",
    "CheckpointState",
    "PartitionStats",
    "Problem",
    "ProducerStats",
    "StatsOptions",
    "StatsRun",
    "combine_stats",
    "compare_checkpoint",
    "find_targets",
    "iter_stats",
    "partition_stats",
    "segment_stats",
    "stats_of",
]

#: The log dir's offset checkpoints a partition's log end is compared with (spec §11.3), in the order shown.
CHECKPOINTS = ("recovery-point-offset-checkpoint", "replication-offset-checkpoint", "log-start-offset-checkpoint")

DEFAULT_MAX_PRODUCERS = 10
"""Producers listed per partition by default (the others are counted)."""
PRODUCER_COUNT_LIMIT = 100_000
"""Distinct producer ids counted exactly per partition; past it the count is a lower bound
(a hostile segment of millions of ids must not grow memory without bound)."""


# ----------------------------------------------------------------------------- the result model


class CheckpointState(enum.Enum):
    """How a partition's log end stands against one checkpoint's entry for it."""

    EQUAL = "equal"
    BEHIND = "behind"
    """The log end is below the checkpointed offset (data the broker had recorded is missing)."""
    AHEAD = "ahead"
    """The log end is past the checkpointed offset."""
    NO_FILE = "no_file"
    """The log dir holds no such checkpoint."""
    NO_ENTRY = "no_entry"
    """The checkpoint has no line for this partition (normal for ``log-start-offset-checkpoint``:
    Kafka writes a partition there only once its log start moved past its first segment)."""
    UNREADABLE = "unreadable"
    """The checkpoint is malformed or cannot be read (the partition's problems say why)."""
    NOT_COMPARED = "not_compared"
    """No log end, or no log dir to look in: a lone segment file, a ``-delete``/``-stray``
    dir (its topic-partition's entries belong to the live dir), an empty partition."""


@dataclass(frozen=True, slots=True)
class CheckpointComparison:
    """One checkpoint's entry for a partition, and the log end against it."""

    name: str
    """The checkpoint file's name (``recovery-point-offset-checkpoint`` ...)."""
    offset: int | None
    """The entry's offset; None when there is none to show (see :attr:`state`)."""
    state: CheckpointState


@dataclass(frozen=True, slots=True)
class Problem:
    """Bad input met while reading a partition, located: ``file:position: message``."""

    file: str
    position: int | None
    message: str
    kind: str
    """What went wrong, as data (the error's kind: ``corrupt_batch``, ``crc_mismatch``, ``checkpoint``, ...)."""

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"

    @property
    def where(self) -> str:
        """``file:position`` (``file`` when the position is unknown)."""
        return self.file if self.position is None else f"{self.file}:{self.position}"

    def verify_line(self) -> str:
        """``file:position: kind: message``, as ``kafkatool verify`` words a finding."""
        return f"{self.where}: {self.kind}: {self.message}"


@dataclass(frozen=True, slots=True)
class ProducerStats:
    """One producer id's batches in a partition: its epoch and last sequence are those of its
    last batch (in log order), as Kafka's producer state keeps them."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    batches: int
    records: int


@dataclass(frozen=True, slots=True)
class PartitionStats:
    """What :func:`partition_stats` found in one partition dir (or one segment file)."""

    path: str
    """The partition dir (or the ``.log`` named on the command line: :attr:`is_file`)."""
    topic: str | None
    partition: int | None
    state: str | None
    """None for a live partition, else ``delete``, ``future`` or ``stray``."""
    is_file: bool
    segments: int
    bytes: int
    """Bytes of the ``.log`` files."""
    batch_bytes: int
    """Bytes in the batches read (the rest: trailing bytes and corrupt regions)."""
    batches: int
    records: int
    """Records in the batches read; a legacy compressed wrapper's count only when opened
    (``deep``): see :attr:`unopened_wrappers`."""
    unopened_wrappers: int
    """Legacy compressed wrappers whose records :attr:`records` does not count."""
    first_offset: int | None
    last_offset: int | None
    log_end: int | None
    """The next offset: the last batch's last offset + 1, or the last segment's base offset
    when it holds no batch (what the broker's log end would be after recovery)."""
    min_timestamp: int | None
    """The smallest batch first-record timestamp (a record inside a batch may be older)."""
    max_timestamp: int | None
    magics: dict[int, int]
    """Batches per magic."""
    codecs: dict[str, int]
    """Batches per codec name (``none``, ``gzip`` ...)."""
    timestamp_types: dict[str, int]
    """Batches per timestamp type (``CreateTime``, ``LogAppendTime``, ``NoTimestampType``)."""
    transactional_batches: int
    """Transactional batches, control batches (markers) included."""
    control_batches: int
    control_types: dict[str, int]
    """Control batches per marker type (``COMMIT``, ``ABORT``, ``LEADER_CHANGE``, ...)."""
    crc_mismatches: int
    producers: tuple[ProducerStats, ...]
    """At most ``max_producers``, in order of first appearance."""
    producer_count: int
    """Distinct producer ids (>= 0); a lower bound when not :attr:`producer_count_exact`."""
    producer_count_exact: bool
    idempotent_batches: int
    """Batches with a producer id (>= 0)."""
    checkpoints: tuple[CheckpointComparison, ...]
    trailing_bytes: int
    """Bytes after the last whole batch of a segment that ended in a tail (not corruption)."""
    problems: tuple[Problem, ...]
    problems_not_listed: int = 0
    """Problems past ``max_problems``, counted but not kept."""

    @property
    def producers_not_listed(self) -> int:
        return self.producer_count - len(self.producers)

    @property
    def ok(self) -> bool:
        """No problem: every byte read as batches (or as a tail), every CRC right, every checkpoint readable."""
        return not self.problems


@dataclass(frozen=True, slots=True)
class StatsOptions:
    deep: bool = False
    """Open legacy compressed wrappers to count their records."""
    max_producers: int = DEFAULT_MAX_PRODUCERS
    max_problems: int = 20
    """Problems kept per partition (the rest are counted in one last problem)."""
    max_batch_bytes: int | None = None
    """A batch larger than this is counted from its header but never opened (None: the model's
    default, 256 MiB): a marker or a wrapper that large is reported instead."""


@dataclass
class StatsRun:
    """What :func:`iter_stats` was given: the paths with nothing Kafka in them, filled as it goes."""

    nothing: list[str] = field(default_factory=list)
    """Named paths in which nothing to count was found (a usage error for the command)."""
    not_segments: list[str] = field(default_factory=list)
    """Named files that are not a segment ``.log``."""


# ----------------------------------------------------------------------------- checkpoints


def compare_checkpoint(name: str, entries: dict[tuple[str, int], int] | None, topic: str, partition: int,
                       log_end: int | None) -> CheckpointComparison:
    """The comparison of ``log_end`` with ``entries`` (a checkpoint's ``{(topic, partition): offset}``,
    None when the file is absent)."""
    if entries is None:
        return CheckpointComparison(name, None, CheckpointState.NO_FILE)
    offset = entries.get((topic, partition))
    if offset is None:
        return CheckpointComparison(name, None, CheckpointState.NO_ENTRY)
    if log_end is None:
        return CheckpointComparison(name, offset, CheckpointState.NOT_COMPARED)
    state = CheckpointState.EQUAL if log_end == offset else CheckpointState.BEHIND if log_end < offset else CheckpointState.AHEAD
    return CheckpointComparison(name, offset, state)


class CheckpointCache:
    """The three offset checkpoints (:data:`CHECKPOINTS`) of each log dir, each read once for a
    whole run; :meth:`compare` gives a partition's comparisons (a partition dir's log dir is its
    parent directory)."""

    def __init__(self) -> None:
        self._dirs: dict[str, LogDir] = {}
        self._read: dict[tuple[str, str], tuple[dict | None, KafkaToolError | OSError | None]] = {}

    def log_dir(self, partition_path: str) -> LogDir:
        parent = os.path.dirname(os.path.abspath(partition_path))
        d = self._dirs.get(parent)
        if d is None:
            d = self._dirs[parent] = LogDir(parent)
        return d

    def entries(self, log_dir: LogDir, name: str) -> tuple[dict | None, KafkaToolError | OSError | None]:
        key = (log_dir.path, name)
        got = self._read.get(key)
        if got is None:
            try:
                got = (log_dir.offset_checkpoint(name), None)
            except (KafkaToolError, OSError) as e:
                got = (None, e)
            self._read[key] = got
        return got

    def compare(self, partition: Partition, log_end: int | None, problems: list[Problem]) -> tuple[CheckpointComparison, ...]:
        """The log end against each checkpoint's entry for ``partition``; a checkpoint that
        cannot be read adds its located problem to ``problems``."""
        topic, number = partition.topic, partition.partition
        if topic is None or number is None or partition.state in ("delete", "stray"):
            return tuple(CheckpointComparison(n, None, CheckpointState.NOT_COMPARED) for n in CHECKPOINTS)
        log_dir = self.log_dir(partition.path)
        out = []
        for name in CHECKPOINTS:
            entries, error = self.entries(log_dir, name)
            if error is not None:
                problems.append(_problem(error, os.path.join(log_dir.path, name), "checkpoint"))
                out.append(CheckpointComparison(name, None, CheckpointState.UNREADABLE))
            else:
                out.append(compare_checkpoint(name, entries, topic, number, log_end))
        return tuple(out)


def _problem(error: BaseException, file: str, kind: str | None = None) -> Problem:
    if isinstance(error, KafkaToolError):
        return Problem(error.path or file, error.position, error.message, kind or error.kind or "error")
    if isinstance(error, OSError):
        return Problem(error.filename or file, None, error.strerror or str(error), kind or "unreadable")
    return Problem(file, None, str(error), kind or "error")


# ----------------------------------------------------------------------------- the pass over batches


class _Tally:
    """Running totals over one partition's batches. :meth:`add_segment` is the hot loop."""

    __slots__ = ("opts", "batches", "batch_bytes", "records", "unopened", "first_offset", "last", "tmin", "inner_tmin",
                 "tmax", "kinds", "samples", "controls", "crc_bad", "idempotent", "producers", "others", "others_saturated",
                 "problems", "problems_dropped", "trailing", "segment_flags")

    def __init__(self, opts: StatsOptions) -> None:
        self.opts = opts
        self.batches = 0
        self.batch_bytes = 0
        self.records = 0
        self.unopened = 0
        self.first_offset: int | None = None
        self.last: Batch | None = None
        self.tmin = _NO_TIME
        self.inner_tmin = _NO_TIME  # the oldest record of the legacy wrappers opened (deep)
        self.tmax = -1
        self.kinds: dict[int, int] = {}  # (magic << 16 | attributes) -> batches
        self.samples: dict[int, Batch] = {}  # (magic << 16 | attributes) -> the first such batch
        self.controls: dict[str, int] = {}
        self.crc_bad = 0
        self.idempotent = 0
        self.producers: dict[int, list[int]] = {}  # id -> [epoch, last sequence, last offset, batches, records]
        self.others: set[int] = set()  # ids past the table, counted up to PRODUCER_COUNT_LIMIT
        self.others_saturated = False
        self.problems: list[Problem] = []
        self.problems_dropped = 0
        self.trailing = 0
        self.segment_flags = 0  # what the segment being read has reported already

    def problem(self, p: Problem) -> None:
        if len(self.problems) < self.opts.max_problems:
            self.problems.append(p)
        else:
            self.problems_dropped += 1

    def add_segment(self, segment: Segment) -> None:
        """Count the batches of ``segment`` (in file order)."""
        path = segment.log_path
        n = records = 0
        tmin, tmax = self.tmin, self.tmax
        kinds = self.kinds
        run_key, run_n = -1, 0
        # the producer whose batches are being read: its id, its table row, its batch and record counts
        pid_now, row, pid_batches, pid_records, pid_last = -1, None, 0, 0, None
        first = last = None
        seen: set[int] = set()  # the kinds of batch (magic << 16 | attributes) met in this segment
        self.segment_flags = 0
        limit = self.opts.max_batch_bytes
        batches = segment.batches() if limit is None else segment.batches(max_batch_bytes=limit)
        reader = _EntryReader(path, batches)
        try:
            for b in batches:
                (_pos, _size, offset, magic, crc, attrs, _lod, first_ts, max_ts, pid, epoch, _seq, count, _ple, computed) = b
                n += 1
                key = magic << 16 | attrs
                if key == run_key:
                    run_n += 1
                else:
                    if run_n:
                        kinds[run_key] = kinds.get(run_key, 0) + run_n
                    run_key, run_n = key, 1
                    if key not in seen:  # a kind of batch this segment had not shown yet
                        seen.add(key)
                        self._new_kind(path, key, b)
                if magic >= 2:
                    records += count
                    if attrs & CONTROL_BIT:
                        # a marker ends its producer's run of data batches; it sets the producer's
                        # epoch but not its sequence or last data offset (Kafka's ProducerStateEntry)
                        if pid_batches:
                            self._producer_run(pid_now, row, pid_last, pid_batches, pid_records)
                        pid_now, pid_batches, pid_records = _NO_PRODUCER_RUN, 0, 0
                        self._control(reader, b)
                    else:
                        if pid != pid_now:
                            if pid_batches:
                                self._producer_run(pid_now, row, pid_last, pid_batches, pid_records)
                            pid_now, pid_batches, pid_records = pid, 0, 0
                            row = self._producer_row(pid) if pid >= 0 else None
                        pid_batches += 1
                        pid_records += count
                        pid_last = b
                else:
                    records += self._legacy(reader, b)
                if max_ts > tmax:
                    tmax = max_ts
                # the first record's timestamp: a v2 batch's base timestamp, unless it is the delete
                # horizon or the batch is LogAppendTime (then every record has the max timestamp, §4.1);
                # a legacy entry has one timestamp (-1 for magic 0)
                low = max_ts if attrs & _MAX_IS_FIRST else first_ts
                if low < tmin and low >= 0:
                    tmin = low
                if crc != computed:
                    self._crc(path, b)
                if first is None:
                    first = b
                    if self.first_offset is None:
                        self.first_offset = self._first_offset(reader, b)
                last = b
        except KafkaToolError as e:
            self.problem(_problem(e, path))
        except OSError as e:
            self.problem(_problem(e, path, "unreadable"))
        finally:
            self.trailing += batches.trailing_bytes
            if run_n:
                kinds[run_key] = kinds.get(run_key, 0) + run_n
            if pid_batches:
                self._producer_run(pid_now, row, pid_last, pid_batches, pid_records)
            self.batches += n
            if last is not None:  # the walk is contiguous: its batches fill [first, last.end)
                self.batch_bytes += last.end - first.position
            self.records += records
            self.tmin, self.tmax = tmin, tmax
            if last is not None:
                self.last = last

    # ---- the slow paths, each for a batch that needs a closer look

    def _producer_row(self, pid: int) -> list[int] | None:
        row = self.producers.get(pid)
        if row is None:
            if len(self.producers) < self.opts.max_producers:
                row = self.producers[pid] = [-1, -1, -1, 0, 0]
            elif not self.others_saturated:
                self.others.add(pid)
                if len(self.others) >= PRODUCER_COUNT_LIMIT:
                    self.others_saturated = True
        return row

    def _producer_run(self, pid: int, row: list[int] | None, last: Batch, batches: int, records: int) -> None:
        """The end of a run of batches from one producer (``last`` its last batch)."""
        if pid < 0:
            return
        self.idempotent += batches
        if row is not None:
            row[0] = last.producer_epoch
            row[1] = last.last_sequence
            row[2] = last.last_offset
            row[3] += batches
            row[4] += records

    def _control(self, reader: _EntryReader, b: Batch) -> None:
        """The marker type of a control batch (its first record's key, §6); its producer's epoch."""
        if b.producer_id >= 0:
            self.idempotent += 1
            row = self._producer_row(b.producer_id)
            if row is not None:
                row[0] = b.producer_epoch
                row[3] += 1
                row[4] += b.count
        from kafkatool.record.control import control_type_name, decode_control_key

        try:
            record = reader.first_record(b)
            name = "EMPTY" if record is None else control_type_name(decode_control_key(record.key)[1])
        except KafkaToolError as e:
            self.problem(_problem(e.at(reader.path, b.position), reader.path))
            name = "UNREADABLE"
        self.controls[name] = self.controls.get(name, 0) + 1

    def _legacy(self, reader: _EntryReader, b: Batch) -> int:
        """The records of a legacy entry: 1, or a wrapper's inner count when opened (``deep``)."""
        if not b.codec:
            return 1
        if not self.opts.deep:
            self.unopened += 1
            return 0
        n, low = 0, self.inner_tmin
        try:
            for chunk in reader.record_chunks(b):
                n += len(chunk)
                for r in chunk:
                    if 0 <= r.timestamp < low:
                        low = r.timestamp
            self.inner_tmin = low
            return n
        except KafkaToolError as e:
            self.problem(_problem(e.at(reader.path, b.position), reader.path))
            self.unopened += 1
            return 0

    def _first_offset(self, reader: _EntryReader, b: Batch) -> int:
        """The first offset of the partition's first batch; a legacy wrapper's offset is its
        LAST inner offset, so its first record is read."""
        if b.magic >= 2 or not b.codec:
            return b.offset
        try:
            record = reader.first_record(b)
        except KafkaToolError as e:
            self.problem(_problem(e.at(reader.path, b.position), reader.path))
            return b.offset
        return b.offset if record is None else record.offset

    def _new_kind(self, path: str, key: int, b: Batch) -> None:
        self.samples.setdefault(key, b)
        if b.codec > _LAST_CODEC and not self.segment_flags & _CODEC_REPORTED:
            # CompressionType.forId fails on the batch (its header is counted all the same); the
            # first of each segment is reported
            self.segment_flags |= _CODEC_REPORTED
            self.problem(Problem(path, b.position, f"Unknown compression type id: {b.codec}", "unknown_codec"))

    def _crc(self, path: str, b: Batch) -> None:
        if not self.segment_flags & _CRC_REPORTED:  # the first of each segment is reported
            self.segment_flags |= _CRC_REPORTED
            which = "CRC-32C" if b.magic >= 2 else "CRC-32"
            self.problem(Problem(path, b.position, f"batch {which} mismatch (stored crc {b.crc}, computed crc {b.computed_crc}); "
                                                   "the counts include this batch and any others like it", "crc_mismatch"))
        self.crc_bad += 1

    # ---- the result

    def kind_counts(self) -> tuple[dict[int, int], dict[str, int], dict[str, int], int, int]:
        """Batches per magic, per codec name and per timestamp type (each in id order), and the
        transactional and control batch counts, from the counts per (magic, attributes): each
        kind's first batch answers for the kind through the record type's own properties."""
        magics: dict[int, int] = {}
        codecs: dict[int, int] = {}
        ts_types: dict[int, int] = {}
        transactional = control = 0
        for key, n in self.kinds.items():
            b = self.samples[key]
            magics[b.magic] = magics.get(b.magic, 0) + n
            codecs[b.codec] = codecs.get(b.codec, 0) + n
            ts_types[b.timestamp_type] = ts_types.get(b.timestamp_type, 0) + n
            transactional += n if b.is_transactional else 0
            control += n if b.is_control else 0
        return (
            dict(sorted(magics.items())),
            {_codec_label(c): n for c, n in sorted(codecs.items())},
            {TIMESTAMP_TYPE_NAMES[t]: n for t, n in sorted(ts_types.items())},
            transactional,
            control,
        )

    def producer_table(self) -> tuple[tuple[ProducerStats, ...], int, bool]:
        listed = tuple(ProducerStats(pid, *row) for pid, row in self.producers.items())
        count = len(self.producers) + len(self.others)
        return listed, count, not self.others_saturated


_NO_TIME = 1 << 63


def _codec_label(codec: int) -> str:
    """``none``, ``gzip`` ...; ``unknown(5)`` for an id no codec has."""
    return codec_name(codec) if codec <= _LAST_CODEC else f"unknown({codec})"

_LAST_CODEC = max(Codec)  # zstd (4): ids 5-7 name no codec
_UNKNOWN_BASE = -1  # a segment file named alone whose name is not its base offset
_NO_PRODUCER_RUN = -2
_CRC_REPORTED, _CODEC_REPORTED = 1, 2  # _Tally.segment_flags  # below every producer id (-1: none): the next data batch starts a run

_MAX_IS_FIRST = TIMESTAMP_TYPE_BIT | DELETE_HORIZON_BIT
"""Attribute bits under which a batch's first record's timestamp is its max timestamp (or, for
a delete horizon, not known from the header: the max bounds it). A legacy entry's two header
timestamps are one and the same."""


class _EntryReader:
    """The bytes of the batch just read (the model's ``BatchReader.data``), for the few batches
    that need a closer look: a control batch's marker, a legacy wrapper's first or every record."""

    def __init__(self, path: str, batches: BatchReader) -> None:
        self.path = path
        self.batches = batches

    def read(self, b: Batch) -> memoryview:
        data = self.batches.data
        if data is None:
            # larger than the walk holds (max_batch_bytes): reading it whole would break the flat
            # memory, and its header is counted all the same
            raise KafkaToolError(f"a batch of {b.size} bytes, larger than the walk holds, is not opened",
                                 path=self.path, position=b.position, kind="batch_too_large")
        return data

    def first_record(self, b: Batch):
        """The first record of a batch (None when it has none): one chunk decoded, not the whole batch."""
        for chunk in self.record_chunks(b):
            return chunk[0] if chunk else None
        return None

    def record_chunks(self, b: Batch):
        """The records of a batch in lists of at most a few thousand (memory flat)."""
        # the record decoders are imported for the first batch that needs them: a log of plain
        # v2 batches never does
        from kafkatool.record.records import batch_record_chunks

        return batch_record_chunks(b, self.read(b))


# ----------------------------------------------------------------------------- partitions and paths


def segment_stats(segment: Segment, opts: StatsOptions = StatsOptions()) -> PartitionStats:
    """The stats of one segment file on its own (no log dir: checkpoints are not compared)."""
    return _stats(segment.log_path, None, [segment], opts, None, None)


def partition_stats(partition: Partition, opts: StatsOptions = StatsOptions(), *,
                    checkpoints: CheckpointCache | None = None) -> PartitionStats:
    """The stats of one partition dir, its log end compared with its log dir's checkpoints (the
    log dir is the partition dir's parent; ``checkpoints`` keeps them read across calls)."""
    problems, segments = listed_segments(partition)
    return _stats(partition.path, partition, segments, opts, checkpoints or CheckpointCache(), problems)


def listed_segments(partition: Partition) -> tuple[list[Problem], list[Segment]]:
    """A partition dir's segments, and the problems its listing shows: the dir cannot be listed,
    or a FIFO, a directory or a dangling link is named like a segment (never opened, but said).
    What :func:`partition_stats` reads; a parallel reader passes the problems to
    :func:`combine_stats`."""
    problems: list[Problem] = []
    try:
        listing = partition.listing()
    except KafkaToolError as e:
        problems.append(_problem(e, partition.path, "unreadable"))
        listing = []
    for e in listing:
        if e.kind is FileKind.LOG and not e.is_file:
            what = "symbolic link to nothing" if e.type is EntryType.MISSING else e.type.value
            problems.append(Problem(e.path, None, f"named like a segment but a {what}: not read",
                                    "not_regular_file"))
    return problems, segments_of(listing)


def _stats(path: str, partition: Partition | None, segments: list[Segment], opts: StatsOptions,
           checkpoints: CheckpointCache | None, early: list[Problem] | None) -> PartitionStats:
    tally = _Tally(opts)
    for p in early or ():
        tally.problem(p)
    size = 0
    end_of_last: int | None = None
    for segment in segments:
        try:
            file_size = os.stat(segment.log_path).st_size
        except OSError as e:
            tally.problem(_problem(e, segment.log_path, "unreadable"))
            continue
        size += file_size
        before = tally.last
        tally.add_segment(segment)
        if tally.last is not before and tally.last is not None:
            end_of_last = tally.last.next_offset
        else:  # an empty segment: the log end is its base offset
            end_of_last = segment.base_offset if segment.base_offset != _UNKNOWN_BASE else None
    last = tally.last
    magics, codecs, ts_types, transactional, control = tally.kind_counts()
    producers, producer_count, exact = tally.producer_table()
    problems = list(tally.problems)
    if checkpoints is not None and partition is not None:
        cps = checkpoints.compare(partition, end_of_last, problems)
    else:
        cps = tuple(CheckpointComparison(n, None, CheckpointState.NOT_COMPARED) for n in CHECKPOINTS)
    return PartitionStats(
        path=path,
        topic=partition.topic if partition is not None else None,
        partition=partition.partition if partition is not None else None,
        state=partition.state if partition is not None else None,
        is_file=partition is None,
        segments=len(segments),
        bytes=size,
        batch_bytes=tally.batch_bytes,
        batches=tally.batches,
        records=tally.records,
        unopened_wrappers=tally.unopened,
        first_offset=tally.first_offset,
        last_offset=None if last is None else last.last_offset,
        log_end=end_of_last,
        min_timestamp=None if min(tally.tmin, tally.inner_tmin) == _NO_TIME else min(tally.tmin, tally.inner_tmin),
        max_timestamp=None if tally.tmax < 0 else tally.tmax,
        magics=magics,
        codecs=codecs,
        timestamp_types=ts_types,
        transactional_batches=transactional,
        control_batches=control,
        control_types=dict(sorted(tally.controls.items())),
        crc_mismatches=tally.crc_bad,
        producers=producers,
        producer_count=producer_count,
        producer_count_exact=exact,
        idempotent_batches=tally.idempotent,
        checkpoints=cps,
        trailing_bytes=tally.trailing,
        problems=tuple(problems),
        problems_not_listed=tally.problems_dropped,
    )


def combine_stats(parts: Sequence[PartitionStats], partition: Partition | None = None, *,
                  opts: StatsOptions = StatsOptions(), checkpoints: CheckpointCache | None = None,
                  listing_problems: Sequence[Problem] = ()) -> PartitionStats:
    """One result from the stats of consecutive pieces of a partition, in offset order: what
    parallel readers give (the Spark source's stats: :func:`segment_stats` of each segment on
    the executors, combined on the driver), equal to :func:`partition_stats` of the whole.

    With ``partition``, the result is that partition dir's, its log end compared with its log
    dir's checkpoints. The producers are exact when every piece listed all of its own (give
    the pieces ``max_producers`` large enough); otherwise a producer listed by one piece may
    miss the batches another did not list, and the count is a lower bound. ``listing_problems``
    (:func:`listed_segments`) come first, as :func:`partition_stats` lists them.
    """
    if not parts:
        raise ValueError("combine_stats needs at least one piece")
    problems = [*listing_problems, *(p for part in parts for p in part.problems)]
    kept, dropped = problems[:opts.max_problems], len(problems) - opts.max_problems
    producers: dict[int, ProducerStats] = {}
    for part in parts:
        for p in part.producers:
            before = producers.get(p.producer_id)
            if before is not None:  # the later piece's epoch; its sequence and offset if it wrote data
                data = p if p.last_offset >= 0 else before
                p = ProducerStats(p.producer_id, p.producer_epoch, data.last_sequence, data.last_offset,
                                  before.batches + p.batches, before.records + p.records)
            producers[p.producer_id] = p
    all_listed = all(part.producer_count_exact and not part.producers_not_listed for part in parts)
    count = len(producers) if all_listed else max(len(producers), *(part.producer_count for part in parts))
    last = next((part for part in reversed(parts) if part.last_offset is not None), None)
    early: list[Problem] = []
    cps = (checkpoints or CheckpointCache()).compare(partition, parts[-1].log_end, early) if partition is not None else \
        tuple(CheckpointComparison(n, None, CheckpointState.NOT_COMPARED) for n in CHECKPOINTS)
    lows = [part.min_timestamp for part in parts if part.min_timestamp is not None]
    highs = [part.max_timestamp for part in parts if part.max_timestamp is not None]
    return PartitionStats(
        path=partition.path if partition is not None else parts[0].path,
        topic=partition.topic if partition is not None else None,
        partition=partition.partition if partition is not None else None,
        state=partition.state if partition is not None else None,
        is_file=partition is None,
        segments=sum(part.segments for part in parts),
        bytes=sum(part.bytes for part in parts),
        batch_bytes=sum(part.batch_bytes for part in parts),
        batches=sum(part.batches for part in parts),
        records=sum(part.records for part in parts),
        unopened_wrappers=sum(part.unopened_wrappers for part in parts),
        first_offset=next((part.first_offset for part in parts if part.first_offset is not None), None),
        last_offset=None if last is None else last.last_offset,
        log_end=parts[-1].log_end,
        min_timestamp=min(lows) if lows else None,
        max_timestamp=max(highs) if highs else None,
        magics=_summed(part.magics for part in parts),
        codecs=_summed((part.codecs for part in parts), order=_codec_order),
        timestamp_types=_summed((part.timestamp_types for part in parts), order=_TIMESTAMP_TYPE_ORDER.get),
        transactional_batches=sum(part.transactional_batches for part in parts),
        control_batches=sum(part.control_batches for part in parts),
        control_types=_summed(part.control_types for part in parts),
        crc_mismatches=sum(part.crc_mismatches for part in parts),
        producers=tuple(producers.values())[:opts.max_producers],
        producer_count=count,
        producer_count_exact=all_listed,
        idempotent_batches=sum(part.idempotent_batches for part in parts),
        checkpoints=cps,
        trailing_bytes=sum(part.trailing_bytes for part in parts),
        problems=tuple(kept + early),
        problems_not_listed=max(dropped, 0) + sum(part.problems_not_listed for part in parts),
    )


_TIMESTAMP_TYPE_ORDER = {name: type_id for type_id, name in TIMESTAMP_TYPE_NAMES.items()}


def _codec_order(label: str) -> int:
    """A codec label's id (``unknown(5)``: 5), to keep codecs in id order."""
    for codec in Codec:
        if codec_name(codec) == label:
            return int(codec)
    return int(label[len("unknown("):-1])


def _summed(counts: Iterable[dict], order=None) -> dict:
    """Counts per key summed over ``counts``, in key order (or ``order(key)``)."""
    total: dict = {}
    for c in counts:
        for k, n in c.items():
            total[k] = total.get(k, 0) + n
    return dict(sorted(total.items(), key=(lambda kv: kv[0]) if order is None else (lambda kv: order(kv[0]))))


def iter_stats(paths: Iterable[str], opts: StatsOptions = StatsOptions(), run: StatsRun | None = None, *,
               jobs: int = 1) -> Iterator[PartitionStats]:
    """The stats of every partition dir (and named segment file) found in ``paths``: files,
    partition dirs, log dirs, directories of log dirs (:func:`~kafkatool.segment.logdir.expand`).

    :func:`find_targets` then :func:`stats_of`; ``run`` (when given) gets the paths that hold
    nothing to count.
    """
    found, what = find_targets(paths)
    if run is not None:
        run.nothing.extend(what.nothing)
        run.not_segments.extend(what.not_segments)
    return stats_of(found, opts, jobs=jobs)


def find_targets(paths: Iterable[str]) -> tuple[list["Partition | Segment | PartitionStats"], StatsRun]:
    """What ``paths`` hold to read, in the order the search finds it: partition dirs, segment
    files named alone, and (as results with a problem) paths that cannot be read; and the
    named paths that hold nothing to count. Only directory listings are read."""
    run = StatsRun()
    return list(_found(paths, run)), run


def stats_of(found: Iterable["Partition | Segment | PartitionStats"], opts: StatsOptions = StatsOptions(), *,
             jobs: int = 1) -> Iterator[PartitionStats]:
    """The stats of each of ``found`` (:func:`find_targets`), in order; each log dir's
    checkpoints are read once. With ``jobs`` > 1 the segments are read in that many processes
    (:func:`segment_stats` each, combined per partition with :func:`combine_stats`): the same
    results, in the same order."""
    checkpoints = CheckpointCache()
    if jobs <= 1:
        for item in found:
            yield item if isinstance(item, PartitionStats) else _read(item, opts, checkpoints)
        return
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_leave_interrupts_to_the_parent)
    try:
        pending = []  # (item, its listing problems, its segments' futures), in output order
        for item in found:
            if isinstance(item, Partition):
                listed, segments = listed_segments(item)
                pending.append((item, listed, [pool.submit(segment_stats, seg, opts) for seg in segments]))
            elif isinstance(item, Segment):
                pending.append((item, [], [pool.submit(segment_stats, item, opts)]))
            else:
                pending.append((item, [], []))
        for item, listed, futures in pending:
            if isinstance(item, Partition) and futures:
                yield combine_stats([f.result() for f in futures], item, opts=opts, checkpoints=checkpoints,
                                    listing_problems=listed)
            elif isinstance(item, Segment):
                yield futures[0].result()
            else:
                yield item if isinstance(item, PartitionStats) else _read(item, opts, checkpoints)
    finally:
        # on Ctrl-C, or a reader that stopped early: no waiting for segments nobody will see
        pool.shutdown(wait=False, cancel_futures=True)


def _leave_interrupts_to_the_parent() -> None:
    """A worker ignores Ctrl-C: the parent reports it once (no traceback per worker)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _read(item: "Partition | Segment", opts: StatsOptions, checkpoints: CheckpointCache) -> PartitionStats:
    if isinstance(item, Partition):
        return partition_stats(item, opts, checkpoints=checkpoints)
    return segment_stats(item, opts)


def _found(paths: Iterable[str], run: StatsRun) -> Iterator["Partition | Segment | PartitionStats"]:
    """What ``paths`` hold to read, in order: partition dirs, segment files named alone, and the
    results of paths that cannot be read; ``run`` gets the paths that hold nothing."""
    targets = expand(list(paths), descend=_descend)
    found: set[int] = set()  # ids of the named targets something was found in
    for t in targets:
        top = t
        while top.parent is not None:
            top = top.parent
        if not t.is_dir:
            found.add(id(top))
            if t.error is not None:
                yield _unreadable(t.path, t.error)
            elif t.path.endswith(".log") and t.type is EntryType.FILE:
                try:
                    yield Segment.at(t.path)
                except KafkaToolError:  # a copy not named after its base offset: read all the same
                    yield Segment.at(t.path, base_offset=_UNKNOWN_BASE)
            else:
                run.not_segments.append(t.path)
            continue
        if t.error is not None:
            if t.named or t.partition_dir is not None:
                found.add(id(top))
                yield _unreadable(t.path, t.error)
            continue
        if _is_partition(t):
            found.add(id(top))
            yield t.partition()
        elif _is_log_dir(t):
            found.add(id(top))  # a log dir without partitions is Kafka all the same
    for t in targets:
        if t.named and id(t) not in found:
            run.nothing.append(t.path)


def _is_log_dir(t: Target) -> bool:
    """A directory holding ``meta.properties`` or a log dir's offset checkpoint (a log dir of a
    broker too old to write ``meta.properties`` everywhere)."""
    return t.is_log_dir or any(e.name in CHECKPOINTS for e in t.entries or ())


def _is_partition(t: Target) -> bool:
    """A directory holding segment files, or named ``<topic>-<partition>`` and not a log dir (a log
    dir named ``data-1`` or ``kafka-logs-2``, as JBOD setups name them, or one holding partition
    dirs without ``meta.properties``, is searched instead) that
    was named on the command line or sits in a log dir: ``/etc/dbus-1`` is no partition."""
    if t.holds_segments:
        return True
    if t.partition_dir is None or _is_log_dir(t) or t.holds_partition_dirs:
        return False
    return t.named or (t.parent is not None and _is_log_dir(t.parent))


def _descend(target: Target, entry: Entry) -> bool:
    """Search every subdirectory except below a partition dir; symbolic links are not followed."""
    return not entry.is_symlink and not _is_partition(target)


def _unreadable(path: str, error: KafkaToolError) -> PartitionStats:
    return _stats(path, None, [], StatsOptions(), None, [_problem(error, path, "unreadable")])
