"""What ``convert`` is asked to do (:class:`ConvertOptions`) and what it could not carry over
(:class:`Loss`, with the :class:`DamagedRange` and :class:`Salvaged` entries it lists).

A :class:`Loss` is plain counters: the rules (:mod:`kafkatool.convert.rules`) add to them batch by
batch, a partition merges its segments' losses, and the report renders :meth:`Loss.lines` (text) or
:meth:`Loss.as_dict` (jsonl). ``--strict`` asks :meth:`Loss.any`. The two lists keep at most
:data:`MAX_LISTED` entries each (a segment of garbage must not grow memory without bound); their
``*_count`` totals keep counting past it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_LISTED = 1000
"""Entries each of :attr:`Loss.damaged` and :attr:`Loss.salvaged` keeps; the totals go on."""

DEFAULT_MAX_BATCH_BYTES = 1048588
"""Kafka's ``message.max.bytes`` default: the largest v2 batch a run of legacy messages becomes."""


@dataclass(frozen=True, slots=True)
class ConvertOptions:
    """One conversion's settings (spec §13)."""

    magic: int
    """Target message format: 0, 1 or 2."""
    codec: int | None = None
    """A :class:`~kafkatool.record.compression.Codec`; None keeps each source batch's codec."""
    level: int | None = None
    """Compression level; None = Kafka's default for the codec."""
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    """Largest v2 batch (log overhead included) a run of uncompressed legacy messages becomes."""
    drop_aborted: bool = False
    """Leave out the records of aborted transactions (as a read_committed consumer sees them)."""
    skip_damaged: bool = False
    """Convert around bad entries (each listed as a :class:`DamagedRange`) instead of stopping."""
    salvage: bool = False
    """Implies ``skip_damaged``; a batch whose CRC fails but whose records decode is kept."""
    strict: bool = False
    """Any loss is an error before anything is written."""
    max_decompressed_bytes: int = 1 << 30
    """A batch decompressing to more is a located error (bomb guard)."""
    threads: int | None = None
    """Threads compressing output entries while the next batches are converted; None: one per
    CPU this process may use; 1: none (everything in the calling thread)."""

    @property
    def skips_damaged(self) -> bool:
        """True when bad entries are converted around (``--skip-damaged`` or ``--salvage``)."""
        return self.skip_damaged or self.salvage


@dataclass(slots=True)
class DamagedRange:
    """Bytes ``[start, end)`` of ``path`` that were not converted, and why."""

    path: str
    start: int
    end: int
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, stable key order."""
        return {"path": self.path, "start": self.start, "end": self.end, "reason": self.reason}


@dataclass(slots=True)
class Salvaged:
    """A batch at ``position`` of ``path`` kept although its stored CRC was wrong (re-encoded)."""

    path: str
    position: int
    offset: int
    stored_crc: int
    computed_crc: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, stable key order."""
        return {
            "path": self.path,
            "position": self.position,
            "offset": self.offset,
            "stored_crc": self.stored_crc,
            "computed_crc": self.computed_crc,
        }


COUNTERS = (
    "batches_in",
    "batches_out",
    "records_in",
    "records_out",
    "headers_dropped",
    "header_count",
    "producer_fields_dropped",
    "control_batches_dropped",
    "control_records_dropped",
    "timestamps_dropped",
    "empty_batches_dropped",
    "aborted_records_kept",
    "aborted_records_dropped",
)

"""The counter fields of :class:`Loss`, in report order."""

# Counters that are not losses: what went in and came out.
_THROUGHPUT = frozenset({"batches_in", "batches_out", "records_in", "records_out", "header_count"})


@dataclass(slots=True)
class Loss:
    """What a conversion could not carry over, as counts (every counter 0 by default)."""

    batches_in: int = 0
    batches_out: int = 0
    records_in: int = 0
    records_out: int = 0
    headers_dropped: int = 0
    """Records that had at least one header (all dropped below v2)."""
    header_count: int = 0
    """Headers those records had, in all."""
    producer_fields_dropped: int = 0
    """Batches whose producer id/epoch/sequence, leader epoch or transactional flag was lost."""
    control_batches_dropped: int = 0
    control_records_dropped: int = 0
    timestamps_dropped: int = 0
    """Records whose timestamp (not -1) v0 cannot hold."""
    empty_batches_dropped: int = 0
    """v2 batches left with no records (compacted away) that a legacy format cannot hold."""
    aborted_records_kept: int = 0
    """Records of aborted transactions that a down-conversion makes readable."""
    aborted_records_dropped: int = 0
    """Records of aborted transactions left out (``--drop-aborted``)."""
    damaged: list[DamagedRange] = field(default_factory=list)
    damaged_count: int = 0
    salvaged: list[Salvaged] = field(default_factory=list)
    salvaged_count: int = 0

    def add_damaged(self, item: DamagedRange) -> None:
        """Count a damaged range; list it while fewer than :data:`MAX_LISTED` are listed."""
        self.damaged_count += 1
        if len(self.damaged) < MAX_LISTED:
            self.damaged.append(item)

    def add_salvaged(self, item: Salvaged) -> None:
        """Count a salvaged batch; list it while fewer than :data:`MAX_LISTED` are listed."""
        self.salvaged_count += 1
        if len(self.salvaged) < MAX_LISTED:
            self.salvaged.append(item)

    def counters(self) -> tuple[int, ...]:
        """The counters' values, in :data:`COUNTERS` order (what :meth:`restore` takes back)."""
        return tuple(getattr(self, name) for name in COUNTERS)

    def restore(self, values: tuple[int, ...]) -> None:
        """Set the counters back to ``values`` (from :meth:`counters`): an entry that failed
        half-way leaves no count behind."""
        for name, value in zip(COUNTERS, values):
            setattr(self, name, value)

    def merge(self, other: Loss) -> None:
        """Add ``other``'s counters and entries to this one (lists still capped)."""
        for name in COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        room = MAX_LISTED - len(self.damaged)
        if room > 0:
            self.damaged.extend(other.damaged[:room])
        self.damaged_count += other.damaged_count
        room = MAX_LISTED - len(self.salvaged)
        if room > 0:
            self.salvaged.extend(other.salvaged[:room])
        self.salvaged_count += other.salvaged_count

    def any(self) -> bool:
        """True when anything was lost (what ``--strict`` refuses): a nonzero loss counter, a
        damaged range or a salvaged batch. Batches and records in/out (and ``header_count``, the
        detail of ``headers_dropped``) are not losses. ``aborted_records_dropped`` is one: records
        left the log, even if ``--drop-aborted`` asked for it."""
        if self.damaged_count or self.salvaged_count:
            return True
        return any(getattr(self, name) for name in COUNTERS if name not in _THROUGHPUT)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, stable key order: the counters, then the two counts and lists."""
        out: dict[str, Any] = {name: getattr(self, name) for name in COUNTERS}
        out["damaged_count"] = self.damaged_count
        out["damaged"] = [d.as_dict() for d in self.damaged]
        out["salvaged_count"] = self.salvaged_count
        out["salvaged"] = [s.as_dict() for s in self.salvaged]
        return out

    def lines(self) -> list[str]:
        """Human text, one line per nonzero item (throughput counters are not losses and are
        left to the report's summary)."""
        out: list[str] = []
        if self.headers_dropped:
            out.append(
                f"{self.headers_dropped} {_plural(self.headers_dropped, 'record')} lost "
                f"{_plural(self.headers_dropped, 'its', 'their')} headers ({self.header_count} {_plural(self.header_count, 'header')})"
            )
        if self.producer_fields_dropped:
            n = self.producer_fields_dropped
            out.append(
                f"{n} {_plural(n, 'batch', 'batches')} lost producer fields (producer id/epoch, "
                "base sequence, leader epoch, transactional flag)"
            )
        if self.control_batches_dropped:
            n = self.control_batches_dropped
            out.append(
                f"{n} control {_plural(n, 'batch', 'batches')} dropped "
                f"({self.control_records_dropped} control "
                f"{_plural(self.control_records_dropped, 'record')})"
            )
        if self.timestamps_dropped:
            n = self.timestamps_dropped
            out.append(f"{n} {_plural(n, 'record')} lost {_plural(n, 'its timestamp', 'their timestamps')} (magic 0 has none)")
        if self.empty_batches_dropped:
            n = self.empty_batches_dropped
            out.append(
                f"{n} empty {_plural(n, 'batch', 'batches')} dropped (no records left after "
                "compaction; a legacy format cannot hold an empty batch)"
            )
        if self.aborted_records_kept:
            n = self.aborted_records_kept
            out.append(
                f"{n} {_plural(n, 'record')} of aborted transactions kept and now readable "
                "(use --drop-aborted to leave them out)"
            )
        if self.aborted_records_dropped:
            n = self.aborted_records_dropped
            out.append(f"{n} {_plural(n, 'record')} of aborted transactions dropped")
        if self.damaged_count:
            n = self.damaged_count
            out.append(f"{n} damaged {_plural(n, 'range')} skipped")
            for d in self.damaged:
                out.append(f"  {d.path}: bytes {d.start}-{d.end}: {d.reason}")
            if n > len(self.damaged):
                out.append(f"  … and {n - len(self.damaged)} more")
        if self.salvaged_count:
            n = self.salvaged_count
            out.append(f"{n} {_plural(n, 'batch', 'batches')} salvaged despite a bad CRC")
            for s in self.salvaged:
                out.append(
                    f"  {s.path}:{s.position}: offset {s.offset} "
                    f"(stored crc {s.stored_crc}, computed crc {s.computed_crc})"
                )
            if n > len(self.salvaged):
                out.append(f"  … and {n - len(self.salvaged)} more")
        return out


def _plural(n: int, one: str, many: str | None = None) -> str:
    if n == 1:
        return one
    return many if many is not None else one + "s"
