"""``kafkatool transactions``: which transaction blocks read_committed consumers, from segments alone.

Two sources, joined by producer id:

* the transaction coordinator's log, ``__transaction_state``: every transactional id's latest
  state (:class:`TxnState`), replayed in offset order as the coordinator loads it (the latest
  value of a key wins, a tombstone removes the key), each record read by the
  ``transaction-log`` decoder of :mod:`kafkatool.record.topics`;
* the data partitions' transactional batches and their control batches (COMMIT/ABORT
  markers): per partition, a producer id with transactional data after its last marker has an
  open transaction (:class:`OpenPartition`), whose first offset is where the partition's last
  stable offset stays until a marker is written: a read_committed consumer cannot read past it.

A partition is replayed as the broker's ``ProducerStateManager`` does: the first
transactional data batch of a producer id opens its transaction (its first offset), a
marker closes it whatever the epochs (a marker of a higher epoch is the coordinator aborting
a fenced producer's transaction, or any end under transaction version 2), and data of a new epoch while one is open does not reset
the first offset. A partition whose first segment does not start at offset 0 lost its older
data to retention: the producer snapshot named after that first segment (when the broker
kept one) says which transactions were open there, and from which offset.

Only batch headers are read, except a control batch's first record (its marker) and the
records of ``__transaction_state``. Memory grows with the open transactions, the producer
ids that wrote markers in a partition and the transactional ids, never with the records.
A damaged region is a located :class:`Problem` in ``kafkatool verify``'s words, and the walk
reads on after it (:func:`kafkatool.segment.logdir.batches_and_regions`).

When several log dirs hold the same partition (replicas), the copy with the highest log end
offset is read and the others are named in its :class:`PartitionScan`.
"""

from __future__ import annotations

import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterable, Iterator

from kafkatool.errors import KafkaToolError
from kafkatool.record.batch import Batch
from kafkatool.record.control import ControlType, decode_control_key, decode_end_txn_marker
from kafkatool.record.layout import CONTROL_BIT, DELETE_HORIZON_BIT, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT
from kafkatool.segment.logdir import BadRegion, FileKind, Partition, Segment, batches_and_regions, best_copy, open_log
from kafkatool.stats import Problem, listed_segments

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "MAX_OPEN_PRODUCERS",
    "ACTIVE_STATES",
    "Verdict",
    "Problem",
    "TxnState",
    "OpenPartition",
    "OpenTransaction",
    "PartitionScan",
    "TransactionsOptions",
    "TransactionsReport",
    "parse_time",
    "scan_data_partition",
    "replay_transaction_state",
    "producer_names",
    "choose_replicas",
    "transactions_report",
    "Found",
    "find_partitions",
]

TRANSACTION_STATE_TOPIC = "__transaction_state"

MAX_OPEN_PRODUCERS = 100_000
"""Open transactions tracked at once per partition: a log with more (a broken or hostile one; a
real broker has a few) is a problem, and memory stays bounded whatever the log holds."""

#: Coordinator states in which the coordinator still owes the partitions of the transaction
#: their markers (it writes them when it runs: at once for the Prepare states, at the
#: transaction timeout for Ongoing).
ACTIVE_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


class Verdict:
    """What an open transaction in a partition is, once joined with its coordinator's state."""

    HANGING = "hanging"
    """No marker will come: the coordinator has no transactional id for the producer id, has
    completed the transaction (CompleteCommit/CompleteAbort, Empty, Dead), moved the
    transactional id on to another producer id, or its active transaction does not include this
    partition. Only ``kafka-transactions.sh abort`` closes it."""
    ONGOING = "ongoing"
    """The coordinator's Ongoing transaction includes this partition, within its timeout."""
    TIMED_OUT = "timed-out"
    """As ongoing, but open longer than the transaction timeout at ``--now``: a running
    coordinator aborts it (on a stopped cluster, once it is back)."""
    COMPLETING = "completing"
    """The coordinator is in PrepareCommit, PrepareAbort or PrepareEpochFence with this
    partition: it writes the marker when it runs."""
    UNKNOWN = "unknown"
    """No ``__transaction_state`` partition was read: the coordinator's side is not known."""

    ORDER = (HANGING, TIMED_OUT, UNKNOWN, COMPLETING, ONGOING)
    """From the most to the least alarming (an unknown one may be hanging): a transaction's
    verdict is its worst partition's, and transactions are listed in this order."""


@dataclass(frozen=True, slots=True)
class TxnState:
    """One transactional id as ``__transaction_state`` last recorded it (``TransactionLogValue``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    previous_producer_id: int
    """-1 when none (value version 0 has no such field)."""
    next_producer_id: int
    state: str
    """Kafka's name of the state (``Ongoing``, ``CompleteCommit`` ...)."""
    timeout_ms: int
    partitions: tuple[tuple[str, int], ...]
    """The transaction's partitions, in the record's order."""
    start_timestamp: int
    """When the current transaction started (epoch ms; -1 when none)."""
    last_update_timestamp: int
    client_transaction_version: int
    version: int
    """The value's version (0 or 1)."""
    partition_dir: str
    """The ``__transaction_state`` partition dir it was read from."""
    offset: int
    """The offset of the record in that partition."""


@dataclass(frozen=True, slots=True)
class OpenPartition:
    """One producer id's open transaction in one partition: transactional data after its last marker."""

    topic: str
    partition: int
    partition_dir: str
    first_offset: int
    """The first offset of the open transaction: the partition's last stable offset cannot pass it."""
    last_offset: int
    """The last offset of its data (the producer snapshot's when no data of it is left; -1 when unknown)."""
    first_timestamp: int
    """The first record's timestamp of its first batch (-1 when not known: first offset from a snapshot)."""
    last_timestamp: int
    """The largest timestamp of its last batch (or the producer snapshot's)."""
    batches: int
    records: int
    producer_epoch: int
    """The epoch of its last batch."""
    first_epoch: int
    """The epoch of its first batch; lower than :attr:`producer_epoch` when a new epoch wrote
    data without a marker closing the older transaction first."""
    coordinator_epoch: int
    """The coordinator epoch of this producer id's last marker in the partition (or the
    producer snapshot's); -1 when none was seen."""
    from_snapshot: bool
    """The first offset comes from the producer snapshot at the log start: the transaction
    began in data retention deleted."""
    start_uncertain: bool
    """The first batch read is this transaction's and the log starts above 0 without a
    producer snapshot there: it may have begun in deleted data."""
    log_start_offset: int | None
    log_end_offset: int | None
    verdict: str = Verdict.UNKNOWN
    reason: str = ""


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """One producer id's open transactions, over every partition (grouped as
    ``kafka-transactions.sh find-hanging`` groups them), joined with the coordinator's state."""

    producer_id: int
    producer_epoch: int
    """The highest epoch of its open data."""
    partitions: tuple[OpenPartition, ...]
    transactional_id: str | None
    """The transactional id whose state names this producer id (None when none does)."""
    coordinator: TxnState | None
    verdict: str
    """The worst of its partitions' (:attr:`Verdict.ORDER`)."""
    first_timestamp: int
    """The earliest known first timestamp of its partitions (-1 when none is known)."""
    last_timestamp: int
    age_ms: int | None
    """``now`` minus :attr:`first_timestamp` (None when not known)."""
    idle_ms: int | None
    """``now`` minus :attr:`last_timestamp`: how long it has written nothing (what find-hanging measures)."""
    age_at_newest_ms: int | None
    """The newest timestamp in the log dirs minus :attr:`first_timestamp`: its age when the
    cluster last wrote (a stopped cluster's clock)."""


@dataclass(frozen=True, slots=True)
class PartitionScan:
    """What one partition's transactional batches showed."""

    topic: str
    partition: int
    partition_dir: str
    log_start_offset: int | None
    """The first offset read (None: no batch)."""
    log_end_offset: int | None
    batches: int
    transactional_batches: int
    committed: int
    """Transactions closed by a COMMIT marker."""
    aborted: int
    """Transactions closed by an ABORT marker."""
    fenced: int
    """Of the aborted, those whose ABORT marker has a higher epoch than their data (a fenced
    producer's transaction, aborted by its coordinator after an epoch bump)."""
    markers_without_data: int
    """Markers for a producer id with no open transaction: data deleted by retention, or a
    partition added to a transaction that wrote nothing there."""
    open: int
    newest_timestamp: int | None
    other_copies: tuple[tuple[str, int | None], ...] = ()
    """Other copies of this partition (replicas in other log dirs) not read: (dir, log end)."""


@dataclass(frozen=True, slots=True)
class TransactionsOptions:
    transactional_id: str | None = None
    """Only this transactional id (its state and the open transactions of its producer ids)."""
    open_only: bool = False
    """Only open transactions, and the transactional ids with an active state or an open transaction."""
    topics: frozenset[str] | None = None
    """Only these topics' partitions are searched for open transactions (``__transaction_state`` is always read)."""
    now_ms: int | None = None
    """The time ages are measured to (epoch ms); None: the current time."""
    transaction_state_partitions: int = 50
    """How many partitions ``__transaction_state`` has (the broker's
    ``transaction.state.log.num.partitions``, 50 by default; more when more are found). A
    producer id no transactional id names is hanging only when all of them were read: otherwise
    its id may be in a partition that was not given (verdict unknown)."""


@dataclass
class TransactionsReport:
    """Everything :func:`transactions_report` found, filtered by the options."""

    states: list[TxnState]
    open: list[OpenTransaction]
    partitions: list[PartitionScan]
    problems: list[Problem]
    now_ms: int
    newest_timestamp: int | None
    """The largest batch timestamp in the partitions read (a stopped cluster's last write)."""
    coordinator_partitions: int
    """``__transaction_state`` partitions read."""
    transactional_ids: int
    """Transactional ids in ``__transaction_state`` (before filtering)."""
    batches: int
    bytes: int
    seconds: float = 0.0
    coordinator_partitions_missing: list[int] = field(default_factory=list)
    """``__transaction_state`` partitions not read (of ``transaction_state_partitions``)."""


# ----------------------------------------------------------------------------- times


_ISO = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?"
    r"(Z|[+-]\d{2}:?\d{2})?$"
)


def parse_time(text: str) -> int:
    """Epoch milliseconds from ``text``: an integer (epoch ms), ``now``, or ISO 8601
    (``2024-05-01``, ``2024-05-01T12:00:00Z``, ``2024-05-01T12:00:00.250+02:00``; no zone is UTC).
    Raises ValueError naming what it expected."""
    s = text.strip()
    if s == "now":
        return int(time.time() * 1000)
    if re.fullmatch(r"-?\d+", s):
        return int(s)
    m = _ISO.match(s)
    if not m:
        raise ValueError(f"{text!r} is neither epoch milliseconds nor an ISO 8601 time such as 2024-05-01T12:00:00Z")
    year, month, day, hour, minute, second, frac, zone = m.groups()
    offset = timedelta(0)
    if zone and zone != "Z":
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:])) * (1 if zone[0] == "+" else -1)
    try:  # (datetime checks every field: no February 30th, no hour 25)
        when = datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0),
                        tzinfo=timezone(offset))
    except ValueError:
        raise ValueError(f"{text!r} is not a valid date and time") from None
    delta = when - _UNIX_EPOCH
    return delta.days * 86_400_000 + delta.seconds * 1000 + int((frac or "0").ljust(3, "0")[:3])


_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


# ----------------------------------------------------------------------------- one partition's walk


_FIRST_IS_MAX = TIMESTAMP_TYPE_BIT | DELETE_HORIZON_BIT  # a batch whose base timestamp is not its first record's


def _walk(partition: Partition, segments: list[Segment], problems: list[Problem]
          ) -> Iterator[tuple[Batch, "memoryview | bytes | None", str]]:
    """Every batch of ``segments`` in order, with its bytes and its file; each damaged region a
    :class:`Problem` in ``problems``, the walk going on after it."""
    for seg in segments:
        path = seg.log_path
        with _reading(seg, problems) as opened:
            if opened is None:
                continue
            fd, size = opened
            for item in batches_and_regions(seg, fd, 0, size, size):
                if isinstance(item, BadRegion):
                    problems.append(_region_problem(path, item))
                    continue
                yield item[0], item[1], path


def _segments(partition: Partition, problems: list[Problem]) -> list[Segment]:
    """A partition dir's segments; its listing's problems (it cannot be listed, a FIFO or a
    dangling link named like a segment) as ``kafkatool stats`` reports them."""
    listed, segments = listed_segments(partition)
    problems.extend(listed)
    return segments


def _problem(e: BaseException, path: str, kind: str = "unreadable", position: int | None = None) -> Problem:
    """A located :class:`Problem` for an error met reading ``path`` (its own location when it has one)."""
    if isinstance(e, KafkaToolError):
        return Problem(e.path or path, position if e.position is None else e.position, e.message, e.kind or kind)
    if isinstance(e, OSError):
        return Problem(e.filename or path, position, e.strerror or str(e), kind)
    return Problem(path, position, str(e), kind)


def _region_problem(path: str, region: BadRegion) -> Problem:
    """A damaged region, in ``kafkatool verify``'s words (its finding kind and message)."""
    return Problem(path, region.start, region.message, region.kind)


@contextmanager
def _reading(seg: Segment, problems: list[Problem]) -> Iterator[tuple[int, int] | None]:
    """The segment's ``.log`` open for the block as ``(fd, size)`` (None: it cannot be opened, a
    problem says why); an error reading it in the block becomes a problem and ends the block."""
    try:
        f = open_log(seg.log_path)
    except KafkaToolError as e:
        problems.append(_problem(e, seg.log_path))
        yield None
        return
    try:
        yield f.fileno(), os.fstat(f.fileno()).st_size
    except (KafkaToolError, OSError) as e:  # not about the bytes: the file cannot be read
        problems.append(_problem(e, seg.log_path))
    finally:
        f.close()


def _marker(batch: Batch, data, path: str) -> tuple[int, int]:
    """``(control type, coordinator epoch)`` of a control batch's first record (coordinator
    epoch -1 for a record that is no transaction marker). Raises a located KafkaToolError."""
    from kafkatool.record.records import first_batch_record

    if data is None:
        raise KafkaToolError(f"a control batch of {batch.size} bytes, larger than the walk holds, is not opened",
                             path=path, position=batch.position, kind="batch_too_large")
    try:
        record = first_batch_record(batch, data)
        if record is None:
            return ControlType.UNKNOWN, -1
        _version, type_id = decode_control_key(record.key)
        if type_id not in (ControlType.ABORT, ControlType.COMMIT):
            return type_id, -1
        _version, coordinator_epoch = decode_end_txn_marker(record.value)
    except KafkaToolError as e:
        raise e.at(path, batch.position) from None
    return type_id, coordinator_epoch


def _snapshot_seed(partition: Partition, base_offset: int, problems: list[Problem]) -> dict[int, list]:
    """The transactions open at ``base_offset`` (the log start) as the producer snapshot named
    after it records them: ``{producer id: open row}``; empty without such a snapshot."""
    from kafkatool.segment.snapshot import read_producer_snapshot

    try:
        listing = partition.listing()
    except KafkaToolError:
        return {}
    for e in listing:
        if e.kind is FileKind.PRODUCER_SNAPSHOT and e.is_file and e.base_offset == base_offset:
            try:
                snap = read_producer_snapshot(e.path)
            except KafkaToolError as err:
                problems.append(_problem(err, e.path, "corrupt_snapshot"))
                return {}
            except OSError as err:
                problems.append(_problem(err, e.path))
                return {}
            seeded = {}
            for s in snap.entries:
                if s.current_txn_first_offset >= 0:
                    seeded[s.producer_id] = _row(s.current_txn_first_offset, s.last_offset, -1, s.timestamp, s.epoch,
                                                 0, 0, s.coordinator_epoch, True)
            return seeded
    return {}


# an open transaction's row, mutable while the walk runs (a list: one per open producer id)
_FIRST, _LAST, _FIRST_TS, _LAST_TS, _FIRST_EPOCH, _EPOCH, _BATCHES, _RECORDS, _COORD, _SNAP = range(10)


def _row(first: int, last: int, first_ts: int, last_ts: int, epoch: int, batches: int, records: int,
         coordinator_epoch: int, from_snapshot: bool) -> list:
    return [first, last, first_ts, last_ts, epoch, epoch, batches, records, coordinator_epoch, from_snapshot]


def scan_data_partition(partition: Partition, problems: list[Problem], *, other_copies=(),
                        max_open: int = MAX_OPEN_PRODUCERS) -> tuple[PartitionScan, list[OpenPartition]]:
    """Replay one partition's transactional batches: its counts, and the transactions still open
    at its log end (not yet joined with the coordinator: verdict unknown). At most ``max_open``
    producer ids are tracked at once (and as many coordinator epochs): past that, a problem."""
    segments = _segments(partition, problems)
    topic, number = partition.topic or "", partition.partition if partition.partition is not None else -1
    open_: dict[int, list] = {}
    coordinator_epochs: dict[int, int] = {}  # producer id -> its last marker's coordinator epoch
    if segments and segments[0].base_offset > 0:
        open_ = _snapshot_seed(partition, segments[0].base_offset, problems)
        for pid, row in open_.items():
            coordinator_epochs[pid] = row[_COORD]
    batches = transactional = committed = aborted = fenced = empty = untracked = 0
    first_offset: int | None = None
    last: Batch | None = None
    newest = -1
    for seg in segments:
        path = seg.log_path
        with _reading(seg, problems) as opened:
            if opened is None:
                continue
            fd, size = opened
            # the walk is inlined here (no generator of our own per batch): this loop is the cost
            for item in batches_and_regions(seg, fd, 0, size, size):
                if item.__class__ is BadRegion:
                    problems.append(_region_problem(path, item))  # type: ignore[arg-type]
                    continue
                b, data = item  # type: ignore[misc]
                (_pos, _size, offset, magic, crc, attrs, lod, base_ts, max_ts, pid, epoch, _seq, count, _ple,
                 computed) = b
                batches += 1
                if first_offset is None:
                    first_offset = offset if magic >= 2 else b.last_offset
                last = b
                if max_ts > newest:
                    newest = max_ts
                if magic < 2 or not attrs & TRANSACTIONAL_BIT:
                    continue  # (transactions exist only in v2 batches; a legacy entry has no such bit)
                transactional += 1
                if crc != computed:
                    problems.append(Problem(path, b.position,
                                            f"the batch's bytes do not match its CRC (stored crc {crc}, computed crc "
                                            f"{computed}; the batch spans {b.size} bytes): its header is used all the same",
                                            "crc_mismatch"))
                if attrs & CONTROL_BIT:
                    try:
                        type_id, coordinator_epoch = _marker(b, data, path)
                    except KafkaToolError as e:
                        found = _problem(e, path, "invalid_record", b.position)
                        problems.append(replace(found, message=f"a control batch whose marker does not decode: "
                                                               f"{found.message}"))
                        continue
                    if type_id != ControlType.ABORT and type_id != ControlType.COMMIT:
                        continue
                    if len(coordinator_epochs) < max_open or pid in coordinator_epochs:
                        coordinator_epochs[pid] = coordinator_epoch
                    row = open_.pop(pid, None)
                    if row is None:
                        empty += 1
                        continue
                    if type_id == ControlType.COMMIT:
                        committed += 1  # (under transaction version 2 every marker carries a bumped epoch)
                    else:
                        aborted += 1
                        if epoch > row[_EPOCH]:
                            fenced += 1
                    continue
                # transactional data: the first batch opens the producer's transaction
                row = open_.get(pid)
                if row is None:
                    if len(open_) >= max_open:
                        untracked += 1  # (a hostile or broken log: memory stays bounded)
                        continue
                    open_[pid] = [offset, offset + lod, max_ts if attrs & _FIRST_IS_MAX else base_ts, max_ts, epoch,
                                  epoch, 1, count, coordinator_epochs.get(pid, -1), False]
                else:
                    row[_LAST] = offset + lod
                    if row[_FIRST_TS] < 0:
                        row[_FIRST_TS] = max_ts if attrs & _FIRST_IS_MAX else base_ts
                    if max_ts > row[_LAST_TS]:
                        row[_LAST_TS] = max_ts
                    row[_EPOCH] = epoch
                    row[_BATCHES] += 1
                    row[_RECORDS] += count
    if untracked:
        problems.append(Problem(partition.path, None,
                                f"more than {max_open} producer ids with an open transaction at once: {untracked} "
                                f"transactional batches of other producer ids were not tracked", "too_many_producers"))
    log_end = _end(last, segments)
    log_start = first_offset if first_offset is not None else (segments[0].base_offset if segments else None)
    opened = []
    for pid, row in open_.items():
        uncertain = (not row[_SNAP] and first_offset is not None and row[_FIRST] == first_offset
                     and first_offset > 0)
        opened.append((pid, OpenPartition(
            topic=topic, partition=number, partition_dir=partition.path, first_offset=row[_FIRST],
            last_offset=row[_LAST], first_timestamp=row[_FIRST_TS], last_timestamp=row[_LAST_TS],
            batches=row[_BATCHES], records=row[_RECORDS], producer_epoch=row[_EPOCH], first_epoch=row[_FIRST_EPOCH],
            coordinator_epoch=row[_COORD], from_snapshot=row[_SNAP], start_uncertain=uncertain,
            log_start_offset=log_start, log_end_offset=log_end)))
    scan = PartitionScan(topic, number, partition.path, log_start, log_end, batches, transactional, committed,
                         aborted, fenced, empty, len(opened), None if newest < 0 else newest, tuple(other_copies))
    return scan, opened  # type: ignore[return-value]


# ----------------------------------------------------------------------------- __transaction_state


def _states_by_id() -> dict[int, str]:
    from kafkatool.record.topics import txnlog

    return dict(txnlog.STATES)


def _txn_state(decoded, version: int, partition_dir: str, offset: int, states: dict[int, str]) -> TxnState:
    key = decoded.key.data
    v = decoded.value.data
    parts = tuple((p["Topic"], pid) for p in (v.get("TransactionPartitions") or ()) for pid in p["PartitionIds"])
    status = v["TransactionStatus"]
    return TxnState(
        transactional_id=key["TransactionalId"],
        producer_id=v["ProducerId"],
        producer_epoch=v["ProducerEpoch"],
        previous_producer_id=v.get("PreviousProducerId", -1),
        next_producer_id=v.get("NextProducerId", -1),
        state=states.get(status, f"Unknown({status})"),
        timeout_ms=v["TransactionTimeoutMs"],
        partitions=parts,
        start_timestamp=v["TransactionStartTimestampMs"],
        last_update_timestamp=v["TransactionLastUpdateTimestampMs"],
        client_transaction_version=v.get("ClientTransactionVersion", 0),
        version=version,
        partition_dir=partition_dir,
        offset=offset,
    )


def _state_records(partition: Partition, problems: list[Problem], scan: list | None = None
                   ) -> Iterator[tuple[object, str, int]]:
    """Every record of a ``__transaction_state`` partition with its file and batch position;
    ``scan`` (when given) gets ``[batches, first offset, last batch, newest timestamp, segments]``."""
    from kafkatool.record.records import batch_record_chunks

    segments = _segments(partition, problems)
    batches, first_offset, last, newest = 0, None, None, -1
    try:
        for b, data, path in _walk(partition, segments, problems):
            batches += 1
            if first_offset is None:
                first_offset = b.offset if b.magic >= 2 else b.last_offset
            last = b
            if b.max_timestamp > newest:
                newest = b.max_timestamp
            if b.magic >= 2 and b.attributes & CONTROL_BIT:
                continue
            if data is None:
                problems.append(Problem(path, b.position,
                                        f"a batch of {b.size} bytes, larger than the walk holds, is not opened",
                                        "batch_too_large"))
                continue
            try:
                for chunk in batch_record_chunks(b, data):
                    for r in chunk:
                        yield r, path, b.position
            except KafkaToolError as e:
                e = e.at(path, b.position)
                problems.append(_problem(e, path, "invalid_record"))
    finally:
        if scan is not None:
            scan[:] = [batches, first_offset, last, newest, segments]


def _skipped_key(d) -> bool:
    """A key of an unknown version: the coordinator's loader skips it (and so do we)."""
    return d.key is None and not d.fatal and (d.key_text or "").startswith("unknown::version=")


def _undecodable(d, offset: int, path: str, position: int) -> Problem:
    return Problem(path, position, f"offset {offset}: {d.error or d.key_text}", "undecodable_record")


def replay_transaction_state(partition: Partition, problems: list[Problem]
                             ) -> tuple[dict[str, TxnState], PartitionScan]:
    """Replay one ``__transaction_state`` partition as the coordinator loads it: ``(latest state
    per transactional id, the partition's scan (offsets, batches, newest time))``.

    Each record's key is read as it comes (the latest value of a key wins, a tombstone removes
    it), and only the surviving values are decoded at the end: a value overwritten later is never
    read, so it costs nothing and cannot fail. A surviving record that does not decode is a
    problem (the decoder's wording, file and offset); the replay goes on without it.
    """
    from kafkatool.record.topics import decoder

    decode = decoder("transaction-log")
    states_by_id = _states_by_id()
    raw: dict[str, tuple] = {}  # transactional id -> (key, value, offset, file, batch position)
    scan: list = []
    for r, path, position in _state_records(partition, problems, scan):
        d = decode(r.key, None, r.offset)  # the key alone: cheap
        if d.key is None:
            if not _skipped_key(d):
                problems.append(_undecodable(d, r.offset, path, position))
            continue
        txn_id = d.key.data["TransactionalId"]
        if r.value is None:
            raw.pop(txn_id, None)  # a tombstone: the coordinator forgets the id
        else:
            raw[txn_id] = (r.key, r.value, r.offset, path, position)
    latest: dict[str, TxnState] = {}
    for txn_id, (key, value, offset, path, position) in raw.items():
        d = decode(key, value, offset)
        if d.error is not None or d.key is None or d.value is None:
            problems.append(_undecodable(d, offset, path, position))
            continue
        latest[txn_id] = _txn_state(d, d.value.version, partition.path, offset, states_by_id)
    batches, first_offset, last, newest, segments = scan
    summary = PartitionScan(partition.topic or "", partition.partition if partition.partition is not None else -1,
                            partition.path, first_offset, _end(last, segments), batches, 0, 0, 0, 0, 0, 0,
                            None if newest < 0 else newest)
    return latest, summary


def producer_names(partition: Partition, producer_ids: Iterable[int], problems: list[Problem]) -> dict[int, str]:
    """``{producer id: transactional id}`` for each of ``producer_ids`` that a record of a
    ``__transaction_state`` partition names (as its producer id, previous or next producer id),
    overwritten records included: a transactional id that moved on to a new producer id still
    names its old one there until compaction. Every value is decoded: called only for producer
    ids the latest states do not name. Problems are not repeated (the replay reported them)."""
    from kafkatool.record.topics import decoder

    decode = decoder("transaction-log")
    wanted = set(producer_ids)
    named: dict[int, str] = {}
    for r, _path, _position in _state_records(partition, []):
        d = decode(r.key, r.value, r.offset)
        if d.value is None or d.key is None:
            continue
        v = d.value.data
        for pid in (v["ProducerId"], v.get("PreviousProducerId", -1), v.get("NextProducerId", -1)):
            if pid in wanted:
                named[pid] = d.key.data["TransactionalId"]
    return named


def _end(last: Batch | None, segments: list[Segment]) -> int | None:
    """The log end: the last batch's next offset, or the last segment's base offset when no batch was read."""
    if last is not None:
        return last.next_offset
    return segments[-1].base_offset if segments else None


# ----------------------------------------------------------------------------- replicas


def choose_replicas(partitions: Iterable[Partition]
                    ) -> list[tuple[Partition, tuple[tuple[str, int | None], ...]]]:
    """One copy per live ``(topic, partition)``: the one with the highest log end offset (the
    first given on a tie), with the other copies and their log ends. Partitions being deleted,
    moved (``-future``) or stray are left out. Sorted by topic and partition."""
    groups: dict[tuple[str, int], list[Partition]] = {}
    for p in partitions:
        if p.topic is None or p.partition is None or p.state is not None:
            continue
        groups.setdefault((p.topic, p.partition), []).append(p)
    out = []
    for key in sorted(groups):
        copies = groups[key]
        if len(copies) == 1:
            out.append((copies[0], ()))
            continue
        best, ends = best_copy(copies)
        out.append((copies[best], tuple((p.path, ends[i]) for i, p in enumerate(copies) if i != best)))
    return out


# ----------------------------------------------------------------------------- the report


def _join(pid: int, op: OpenPartition, st: TxnState | None, txn_id: str | None, missing: list[int],
          expected: int, now_ms: int) -> OpenPartition:
    if len(missing) == expected:
        return replace(op, verdict=Verdict.UNKNOWN, reason="no __transaction_state partition was read")
    if st is None and txn_id:
        return replace(op, verdict=Verdict.HANGING, reason=f"producer id {pid} belonged to transactional id "
                                                          f"{txn_id!r}, which __transaction_state no longer holds")
    if st is None and missing:
        # its transactional id may live in a __transaction_state partition of another broker's log dir
        return replace(op, verdict=Verdict.UNKNOWN,
                       reason=f"no transactional id in the __transaction_state partitions read names producer id {pid}, "
                              f"and {len(missing)} of {expected} were not read (give every broker's log dirs)")
    if st is None:
        return replace(op, verdict=Verdict.HANGING,
                       reason=f"no transactional id in __transaction_state names producer id {pid}")
    if st.producer_id != pid:
        return replace(op, verdict=Verdict.HANGING,
                       reason=f"{st.transactional_id!r} moved on to producer id {st.producer_id} "
                              f"(epoch {st.producer_epoch}, {st.state}): the coordinator no longer tracks producer id {pid}")
    if st.state not in ACTIVE_STATES:
        return replace(op, verdict=Verdict.HANGING,
                       reason=f"the coordinator's state of {st.transactional_id!r} is {st.state} "
                              f"(epoch {st.producer_epoch}), but this partition has no marker")
    if (op.topic, op.partition) not in st.partitions:
        return replace(op, verdict=Verdict.HANGING,
                       reason=f"the coordinator's {st.state} transaction of {st.transactional_id!r} "
                              f"(epoch {st.producer_epoch}) does not include this partition")
    if st.state != "Ongoing":
        return replace(op, verdict=Verdict.COMPLETING,
                       reason=f"the coordinator is in {st.state}: it writes the marker when it runs")
    started = st.start_timestamp if st.start_timestamp >= 0 else op.first_timestamp
    if started >= 0 and now_ms - started > st.timeout_ms:
        return replace(op, verdict=Verdict.TIMED_OUT,
                       reason=f"open longer than its timeout ({st.timeout_ms} ms): a running coordinator aborts it")
    return replace(op, verdict=Verdict.ONGOING, reason="the coordinator's Ongoing transaction includes this partition")


def transactions_report(partitions: Iterable[Partition], options: TransactionsOptions = TransactionsOptions(), *,
                        on_partition: Callable[[Partition], None] | None = None,
                        problems: Iterable[Problem] = ()) -> TransactionsReport:
    """Scan ``partitions`` (those of the log dirs given: replicas chosen by :func:`choose_replicas`),
    replay ``__transaction_state``, join, and filter by ``options``. ``on_partition`` is called
    before each partition is read (for progress); ``problems`` met before (:attr:`Found.problems`)
    come first in the report's."""
    started = time.monotonic()
    now_ms = options.now_ms if options.now_ms is not None else int(time.time() * 1000)
    problems = list(problems)
    chosen = choose_replicas(partitions)
    coordinator = [(p, others) for p, others in chosen if p.topic == TRANSACTION_STATE_TOPIC]
    data = [(p, others) for p, others in chosen if p.topic != TRANSACTION_STATE_TOPIC
            and (options.topics is None or p.topic in options.topics)]
    scans: list[PartitionScan] = []
    opened: list[tuple[int, OpenPartition]] = []
    newest = -1
    total_batches = 0
    total_bytes = 0
    for p, others in data:
        if on_partition is not None:
            on_partition(p)
        scan, found = scan_data_partition(p, problems, other_copies=others)
        scans.append(scan)
        opened.extend(found)  # type: ignore[arg-type]
        total_batches += scan.batches
        total_bytes += _bytes(p)
        if scan.newest_timestamp is not None and scan.newest_timestamp > newest:
            newest = scan.newest_timestamp
    states: dict[str, TxnState] = {}
    for p, others in coordinator:
        if on_partition is not None:
            on_partition(p)
        latest, scan = replay_transaction_state(p, problems)
        for txn_id, st in latest.items():
            before = states.get(txn_id)
            if before is None or st.last_update_timestamp >= before.last_update_timestamp:
                states[txn_id] = st
        total_batches += scan.batches
        total_bytes += _bytes(p)
        if scan.newest_timestamp is not None and scan.newest_timestamp > newest:
            newest = scan.newest_timestamp
        scans.append(replace(scan, other_copies=others))
    # producer id -> the transactional id whose latest state names it (current, previous or next)
    by_pid: dict[int, TxnState] = {}
    for st in states.values():
        for pid in (st.previous_producer_id, st.next_producer_id, st.producer_id):
            if pid >= 0:
                by_pid[pid] = st
    grouped: dict[int, list[OpenPartition]] = {}
    for pid, op in opened:
        grouped.setdefault(pid, []).append(op)
    # producer ids no latest state names: an overwritten record may (a second, full read; rare)
    named: dict[int, str] = {}
    unnamed = [pid for pid in grouped if pid not in by_pid]
    for p, _others in coordinator if unnamed else ():
        named.update(producer_names(p, unnamed, problems))
    read = {p.partition for p, _o in coordinator}
    expected = max(options.transaction_state_partitions, max(read, default=-1) + 1)
    missing = [n for n in range(expected) if n not in read]
    transactions = []
    for pid, ops in grouped.items():
        st = by_pid.get(pid)
        txn_id = st.transactional_id if st is not None else named.get(pid)
        if st is None and txn_id is not None:
            st = states.get(txn_id)  # an earlier record named it: the id has moved on to another producer id
        joined = tuple(sorted((_join(pid, op, st, txn_id, missing, expected, now_ms) for op in ops),
                              key=lambda o: (o.topic, o.partition)))
        verdict = min((o.verdict for o in joined), key=Verdict.ORDER.index)
        firsts = [o.first_timestamp for o in joined if o.first_timestamp >= 0]
        lasts = [o.last_timestamp for o in joined if o.last_timestamp >= 0]
        first_ts = min(firsts) if firsts else -1
        last_ts = max(lasts) if lasts else -1
        transactions.append(OpenTransaction(
            producer_id=pid, producer_epoch=max(o.producer_epoch for o in joined), partitions=joined,
            transactional_id=txn_id, coordinator=st, verdict=verdict, first_timestamp=first_ts, last_timestamp=last_ts,
            age_ms=None if first_ts < 0 else now_ms - first_ts, idle_ms=None if last_ts < 0 else now_ms - last_ts,
            age_at_newest_ms=None if first_ts < 0 or newest < 0 else newest - first_ts))
    transactions.sort(key=lambda t: (Verdict.ORDER.index(t.verdict), t.first_timestamp if t.first_timestamp >= 0
                                     else -1, t.producer_id))
    shown_states = sorted(states.values(), key=lambda s: s.transactional_id)
    if options.transactional_id is not None:
        shown_states = [s for s in shown_states if s.transactional_id == options.transactional_id]
        transactions = [t for t in transactions if t.transactional_id == options.transactional_id]
    if options.open_only:
        owners = {t.transactional_id for t in transactions}
        shown_states = [s for s in shown_states if s.state in ACTIVE_STATES or s.transactional_id in owners]
    scans.sort(key=lambda s: (s.topic, s.partition))
    return TransactionsReport(
        states=shown_states, open=transactions, partitions=scans, problems=problems, now_ms=now_ms,
        newest_timestamp=None if newest < 0 else newest, coordinator_partitions=len(coordinator),
        coordinator_partitions_missing=missing,
        transactional_ids=len(states), batches=total_batches, bytes=total_bytes,
        seconds=time.monotonic() - started)


def _bytes(p: Partition) -> int:
    total = 0
    try:
        for seg in p.segments():
            try:
                total += os.stat(seg.log_path).st_size
            except OSError:
                pass
    except KafkaToolError:
        pass
    return total


@dataclass
class Found:
    """What :func:`find_partitions` found in the command line's paths."""

    partitions: list[Partition]
    problems: list[Problem]
    """Paths that could not be read (a directory that cannot be listed)."""
    nothing: list[str]
    """Named paths holding no partition dir (a usage error for the command)."""
    files: list[str]
    """Named files: transactions reads partition dirs and log dirs, not lone segments."""


def find_partitions(paths: Iterable[str]) -> Found:
    """The partition dirs in ``paths`` (log dirs, directories of log dirs, partition dirs), found as
    ``kafkatool stats`` finds them (:func:`kafkatool.stats.find_targets`); only listings are read."""
    from kafkatool.stats import find_targets

    found, run = find_targets(list(paths))
    out = Found([], [], list(run.nothing), list(run.not_segments))
    for item in found:
        if isinstance(item, Partition):
            out.partitions.append(item)
        elif isinstance(item, Segment):
            out.files.append(item.log_path)
        else:  # a path that cannot be read: its problems
            out.problems.extend(item.problems)
    return out
