"""Which transactional batches belong to aborted transactions (spec §6, §10): what
``convert --drop-aborted`` leaves out, as a read_committed consumer never sees it.

:func:`find_aborted` makes one pre-pass over a partition's segments, in offset order, reading
batch headers and the one record of each control batch (the transaction marker). A producer's
transaction opens at its first transactional data batch after the previous marker of that
producer and closes at its next marker: an ABORT marker makes every offset from the open
transaction's first offset up to the marker an aborted range of that producer, as the
``.txnindex`` records it (``AbortedTxn``: producer id, first offset, last offset). A transaction
still open at the end (no marker yet) is not aborted: the batches stay, as they do on disk.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from typing import Sequence

from kafkatool.errors import KafkaToolError
from kafkatool.record.batch import Batch
from kafkatool.record.control import ControlType, decode_control_key
from kafkatool.record.records import first_batch_record
from kafkatool.segment.logdir import Segment

__all__ = ["AbortedSet", "find_aborted"]


class AbortedSet:
    """The aborted transactions of a partition, as ranges per producer id.

    Memory grows with the number of ABORT markers (two int64 per aborted transaction, in
    :mod:`array` arrays), as the ``.txnindex`` does; not with the number of batches.
    """

    __slots__ = ("_ranges", "count")

    def __init__(self) -> None:
        # producer id -> (first offsets, last offsets), each ascending: a producer's
        # transactions follow one another in the log.
        self._ranges: dict[int, tuple[array, array]] = {}
        self.count = 0
        """Aborted transactions found."""

    def add(self, producer_id: int, first_offset: int, last_offset: int) -> None:
        """Record that ``producer_id``'s transaction over ``[first_offset, last_offset]`` aborted
        (``last_offset``: its ABORT marker's offset). Ranges come in offset order."""
        firsts, lasts = self._ranges.setdefault(producer_id, (array("q"), array("q")))
        firsts.append(first_offset)
        lasts.append(last_offset)
        self.count += 1

    def is_aborted(self, batch: Batch) -> bool:
        """True for a transactional, non-control v2 batch of an aborted transaction."""
        if batch.magic < 2 or not batch.is_transactional or batch.is_control:
            return False
        ranges = self._ranges.get(batch.producer_id)
        if ranges is None:
            return False
        firsts, lasts = ranges
        i = bisect_right(firsts, batch.offset) - 1
        return i >= 0 and batch.offset <= lasts[i]

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0


def find_aborted(segments: Sequence[Segment]) -> AbortedSet:
    """The aborted transactions of ``segments`` (one partition's, in offset order), from the
    ABORT and COMMIT markers of its control batches.

    A segment's pass stops at its first bad entry (one that cannot be framed, a CRC that does
    not hold, a marker that does not decode): the main pass reports it; a transaction whose
    marker lies beyond it stays open, so its batches are not taken as aborted. Memory: the
    open transactions (one entry per producer with one open) and :class:`AbortedSet`.
    """
    aborted = AbortedSet()
    open_first: dict[int, int] = {}  # producer id -> first offset of its open transaction
    for segment in segments:
        reader = segment.batches()
        try:
            for batch in reader:
                if batch.magic < 2 or not batch.is_transactional:
                    continue
                if batch.crc != batch.computed_crc:
                    break
                pid = batch.producer_id
                if not batch.is_control:
                    if pid not in open_first:
                        open_first[pid] = batch.offset
                    continue
                record = first_batch_record(batch, reader.data)
                if record is None:
                    continue
                _version, type_id = decode_control_key(record.key)
                if type_id not in (ControlType.ABORT, ControlType.COMMIT):
                    continue
                first = open_first.pop(pid, None)
                if type_id == ControlType.ABORT and first is not None:
                    aborted.add(pid, first, batch.offset)
        except KafkaToolError:
            continue  # this segment's pass ends at its first bad entry
    return aborted
