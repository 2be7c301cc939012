"""The shallow per-batch checks, and the scanner that runs them over a segment's batches.

:class:`Scanner` walks one segment: a healthy v2 data batch is handled inline (the same
predicate the compiled scan applies in C), every other batch goes to :func:`check_batch`.
What it carries from batch to batch is a :class:`ScanState`, the object the compiled scan
reads and updates by attribute (``kafkatool.verify.workers``).
"""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass, field

from kafkatool.errors import KafkaToolError
from kafkatool.record.batch import Batch
from kafkatool.record.layout import (
    CODEC_MASK, CONTROL_BIT, DELETE_HORIZON_BIT, INT32_MAX, LEGACY, LEGACY_V1_TIMESTAMP, MAGIC_OFFSET, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT, V2,
)
from kafkatool.segment import files as names
from kafkatool.verify.deep import check_records
from kafkatool.verify.findings import Finding, FindingAdder, FindingKind
from kafkatool.verify.options import VerifyOptions, throttle

__all__ = ["PartitionFacts", "SegmentFacts", "read_wanted", "ScanState", "Scanner", "check_batch"]


@dataclass
class PartitionFacts:
    """What later files of a partition need from earlier ones."""

    last_offset: int | None = None
    log_end: int | None = None
    epochs: dict[int, int] = field(default_factory=dict)
    """leader epoch -> first offset seen with it."""
    segments: dict[int, "SegmentFacts"] = field(default_factory=dict)
    on_bytes: object = None


@dataclass
class SegmentFacts:
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


def read_wanted(path: str, base: int, facts: SegmentFacts) -> None:
    """Read the positions and offsets the segment's index files refer to."""
    index_path, timeindex_path = names.sibling(path, names.INDEX_SUFFIX), names.sibling(path, names.TIME_INDEX_SUFFIX)
    if not (os.path.exists(index_path) or os.path.exists(timeindex_path)):
        return
    from kafkatool.segment import index as idx

    try:
        for offset, position in idx.read_offset_index(index_path, base).iter_absolute():
            facts.wanted_positions.add(position)
            facts.wanted_offsets.add(offset)
    except OSError:
        pass
    try:
        for _ts, offset in idx.read_time_index(timeindex_path, base).iter_absolute():
            facts.wanted_offsets.add(offset)
    except OSError:
        pass
    facts.wanted_sorted = sorted(facts.wanted_offsets)


class ScanState:
    """What the shallow scan of one segment carries from batch to batch, by name.

    The compiled scan (``_speedups.scan_fd``/``scan_v2``) reads every attribute when it is
    called and writes back what it changed when it returns; the pure-Python walk
    (:meth:`Scanner.run`) keeps its counters in the same object. The dicts are the
    partition's and the segment's own (updated in place); ``prev_last`` and
    ``first_offset``/``first_last`` mirror ``PartitionFacts.last_offset`` and the
    segment's first batch, and are copied across around each compiled call
    (:meth:`Scanner.share`, :meth:`Scanner.take`).
    """

    __slots__ = (
        "prev_last",  # int | None: last offset of the previous batch of the partition
        "base",  # int | None: the segment's base offset (None: not known)
        "good",  # int: batches with a valid CRC
        "max_ts",  # int: largest maxTimestamp so far (-1 before any)
        "first_offset",  # int | None: first offset of the segment's first batch
        "first_last",  # int | None: last offset of that batch
        "epochs",  # dict: leader epoch -> first offset seen with it
        "want_positions",  # array('q') | None: sorted positions the .index names (compiled scan)
        "position_cursor",  # int: entries of want_positions below the next batch's position
        "at_position",  # dict: wanted position -> last offset of the batch there
        "want_offsets",  # array('q') | None: sorted offsets the indexes name (compiled scan)
        "offset_cursor",  # int: entries of the wanted offsets already passed
        "by_last_offset",  # dict: wanted batch last offset -> (position, max timestamp so far)
        "containing",  # dict: wanted offset inside a batch -> (position, last offset, max timestamp)
        "batches",  # int: batches walked
    )

    def __init__(self, part: PartitionFacts, facts: SegmentFacts, base: int | None) -> None:
        self.prev_last = part.last_offset
        self.base = base
        self.good = 0
        self.max_ts = -1
        self.first_offset = facts.first_offset
        self.first_last = facts.first_last
        self.epochs = part.epochs
        self.want_positions = None
        self.position_cursor = 0
        self.at_position = facts.at_position
        self.want_offsets = None
        self.offset_cursor = 0
        self.by_last_offset = facts.by_last_offset
        self.containing = facts.containing
        self.batches = 0


class Scanner:
    """Walks batches of one segment, running the per-batch checks and keeping the counters
    that the bad-region accounting and the index checks need (in :attr:`state`)."""

    def __init__(self, path: str, base: int | None, opts: VerifyOptions, part: PartitionFacts, facts: SegmentFacts, findings: list[Finding]) -> None:
        self.path = path
        self.base = base
        self.opts = opts
        self.part = part
        self.facts = facts
        self.findings = findings
        self.state = ScanState(part, facts, base)
        self.bad_regions: list[tuple[int, int]] = []  # (finding index, good batches before it)
        self.reported = 0
        self._shared_batches = 0  # state.batches at the last share() or take()

    def share(self) -> None:
        """Copy what :meth:`run` keeps on the partition and the segment into :attr:`state`,
        before the compiled scan goes on."""
        st, facts = self.state, self.facts
        st.prev_last = self.part.last_offset
        st.first_offset, st.first_last = facts.first_offset, facts.first_last
        self._shared_batches = st.batches

    def take(self) -> None:
        """Copy what the compiled scan changed in :attr:`state` out to the partition and the segment."""
        st, facts = self.state, self.facts
        self.part.last_offset = st.prev_last
        if st.prev_last is not None and st.batches != self._shared_batches:  # it walked batches of this segment
            facts.last_offset = st.prev_last
        facts.first_offset, facts.first_last = st.first_offset, st.first_last
        self._shared_batches = st.batches

    def run(self, walker, throttled: bool = True) -> None:
        """Check every ``(batch, data)`` of ``walker`` (a :class:`SegmentWalker` or any iterable of them)."""
        path, base, opts, part, facts, findings = self.path, self.base, self.opts, self.part, self.facts, self.findings
        wanted_positions = facts.wanted_positions
        wanted_offsets = facts.wanted_offsets
        at_position = facts.at_position
        by_last_offset = facts.by_last_offset
        on_bytes = part.on_bytes
        st = self.state
        batches, good, max_ts = st.batches, st.good, st.max_ts
        bad_regions = self.bad_regions
        check = check_batch
        containing = facts.containing
        wanted_sorted = facts.wanted_sorted
        nwanted = len(wanted_sorted)
        wi = st.offset_cursor
        rate = opts.max_rate if throttled else None
        deep = opts.deep
        epochs = part.epochs
        # (attribute masks as locals: this loop runs once per batch of the pure-Python walk)
        txn_or_control, codec_mask = TRANSACTIONAL_BIT | CONTROL_BIT, CODEC_MASK
        log_append_or_horizon = TIMESTAMP_TYPE_BIT | DELETE_HORIZON_BIT
        try:
            for batch, data in walker:
                (position, _size, first, magic, crc, attrs, lod, bts, mts, pid, pepoch, bseq, count, ple, computed) = batch
                prev = part.last_offset
                lo = first + lod
                if (
                    # a healthy, non-transactional v2 data batch: check_batch's fast path, inlined
                    not deep
                    and magic == 2
                    and crc == computed
                    and not attrs & txn_or_control
                    and attrs & codec_mask <= 4
                    and lod >= 0
                    and 0 <= count <= lod + 1
                    and bts >= -1
                    and mts >= -1
                    and (attrs & log_append_or_horizon or count == 0 or mts >= bts)
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
                    throttle(rate, batch[1])
                if batches & 255 == 0 and on_bytes is not None:
                    on_bytes(batch.end - self.reported)
                    self.reported = batch.end
        finally:
            st.batches, st.good, st.max_ts = batches, good, max_ts
            st.offset_cursor = wi



def check_batch(
    b: Batch,
    data,
    path: str,
    index: int,
    base: int | None,
    part: PartitionFacts,
    facts: SegmentFacts,
    out: list[Finding],
    opts: VerifyOptions,
) -> None:
    """The per-batch checks; findings are appended to ``out``."""
    # (Scanner.run handles healthy v2 data batches inline; everything else comes here)
    pos, first, magic = b.position, b.offset, b.magic
    prev = part.last_offset
    last = b.last_offset
    add = FindingAdder(out, path, b, index)

    if magic > 2:
        add(FindingKind.UNKNOWN_MAGIC, f"magic byte {magic} (Kafka parses it as v2; the CRC does not cover it)", "0, 1 or 2", magic, pos + MAGIC_OFFSET, 1)
    if b.crc != b.computed_crc:
        # expected = computed from the bytes, found = stored on disk (the convention of errors.py)
        add(FindingKind.CRC_MISMATCH, f"the batch's bytes do not match its CRC (stored crc {b.crc}, computed crc {b.computed_crc}; the batch spans {b.size} bytes)", b.computed_crc, b.crc)
        return  # the other fields cannot be trusted
    codec = b.attributes & CODEC_MASK
    if codec > 4 or (codec == 4 and magic < 2):
        add(FindingKind.UNKNOWN_CODEC, f"compression codec id {codec} is not valid with magic {magic}", "0-4 (zstd only with magic 2)", codec, pos + (V2.ATTRIBUTES + 1 if magic >= 2 else LEGACY.ATTRIBUTES), 1)
        return
    if magic >= 2:
        if b.count < 0 or b.count > b.last_offset_delta + 1:
            add(FindingKind.OFFSET_DELTA_MISMATCH, f"count {b.count} with lastOffsetDelta {b.last_offset_delta}", f"0..{b.last_offset_delta + 1}", b.count, pos + V2.RECORDS_COUNT, 4)
        if b.last_offset_delta < 0:
            add(FindingKind.OFFSET_DELTA_MISMATCH, f"negative lastOffsetDelta {b.last_offset_delta}", ">= 0", b.last_offset_delta, pos + V2.LAST_OFFSET_DELTA, 4)
        if b.base_timestamp < -1 or b.max_timestamp < -1:
            add(FindingKind.TIMESTAMP_INVALID, f"timestamps below -1 (base {b.base_timestamp}, max {b.max_timestamp})", ">= -1", (b.base_timestamp, b.max_timestamp), pos + V2.BASE_TIMESTAMP, V2.PRODUCER_ID - V2.BASE_TIMESTAMP)
        elif (
            not b.attributes & TIMESTAMP_TYPE_BIT
            and not b.has_delete_horizon
            and b.count > 0
            and b.max_timestamp < b.base_timestamp
        ):
            add(FindingKind.TIMESTAMP_INVALID, f"CreateTime maxTimestamp {b.max_timestamp} below baseTimestamp {b.base_timestamp}", f">= {b.base_timestamp}", b.max_timestamp, pos + V2.MAX_TIMESTAMP, 8)
        pid, epoch, seq = b.producer_id, b.producer_epoch, b.base_sequence
        # (brokers write pid -1 with baseSequence 0, e.g. the group coordinator: not a finding)
        if pid < -1 or epoch < -1 or seq < -1 or (pid < 0 and b.is_transactional):
            add(FindingKind.PRODUCER_FIELDS_INVALID, f"producerId {pid}, producerEpoch {epoch}, baseSequence {seq}, transactional {b.is_transactional}", "consistent producer fields", (pid, epoch, seq), pos + V2.PRODUCER_ID, V2.RECORDS_COUNT - V2.PRODUCER_ID)
        if b.partition_leader_epoch >= 0 and b.partition_leader_epoch not in part.epochs:
            part.epochs[b.partition_leader_epoch] = first
    elif magic == 1 and b.max_timestamp < -1:
        add(FindingKind.TIMESTAMP_INVALID, f"timestamp {b.max_timestamp} below -1", ">= -1", b.max_timestamp, pos + LEGACY_V1_TIMESTAMP, 8)
    # offsets
    # (a v0/v1 wrapper's first offset needs its records; its entry offset is its last offset)
    if prev is not None and first <= prev and (magic >= 2 or not codec):
        add(FindingKind.OFFSET_NOT_MONOTONIC, f"first offset {first} is not above the previous batch's last offset {prev}", f"> {prev}", first, pos, 8)
    elif prev is not None and magic < 2 and codec and last <= prev:
        add(FindingKind.OFFSET_NOT_MONOTONIC, f"offset {last} is not above the previous batch's last offset {prev}", f"> {prev}", last, pos, 8)
    if base is not None:
        if first < base and (magic >= 2 or not codec):
            add(FindingKind.OFFSET_BELOW_BASE, f"offset {first} below the segment base offset {base}", f">= {base}", first, pos, 8)
        elif magic < 2 and codec and last < base:  # a wrapper's entry offset is its last inner offset
            add(FindingKind.OFFSET_BELOW_BASE, f"wrapper offset {last} below the segment base offset {base}", f">= {base}", last, pos, 8)
        elif last - base > INT32_MAX:
            add(FindingKind.OFFSET_OVERFLOW, f"offset {last} is more than 2^31-1 above the segment base offset {base}", f"<= {base + INT32_MAX}", last, pos, 8)
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
                        add(FindingKind.CONTROL_NOT_TRANSACTIONAL, f"a {'ABORT' if type_id == 0 else 'COMMIT'} marker in a control batch without the transactional flag", "attributes & 0x10", b.attributes, pos + V2.ATTRIBUTES, 2)
                    # The producer state reads a marker batch's first marker only (Kafka writes
                    # one); more, a batch's writer could make millions of, and keeping them all
                    # would grow memory with the record count.
                    break
        except KafkaToolError:
            pass  # reported by the deep checks
    if opts.deep:
        check_records(b, data, path, index, out, opts)
