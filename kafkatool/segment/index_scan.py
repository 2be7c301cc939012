"""The state the compiled indexing loop shares with :class:`~kafkatool.segment.index.IndexBuilder`.

``_speedups.index_v2`` (recovery's indexing loop in C, spec §8.3, §12.2) indexes every batch
that needs nothing more, and hands any other batch back to Python. Between the two, the
builder's state travels in one :class:`IndexScanState`: C reads its attributes once when a call
starts and writes back the ones it changed when it returns (by attribute, with interned
names), and :class:`IndexBuilder` loads or stores the same attributes around each batch it
handles itself. No positional slots: every field has its name.
"""

from __future__ import annotations

__all__ = ["IndexScanState"]


class IndexScanState:
    """One indexing walk's state, by name (see the module doc).

    The first fields are :class:`~kafkatool.segment.index.IndexBuilder`'s (Kafka's names in
    the comments); ``batches``, ``first``, ``last`` count what the walk indexed, and ``shift``
    maps the builder's layout to the file (a repair that leaves bytes out before the walk).
    """

    __slots__ = (
        "base",  # the segment's base offset
        "interval",  # index.interval.bytes
        "valid",  # validBytes: where the next batch must start in the builder's layout
        "last_entry",  # validBytes when the last offset entry was appended (lastIndexEntry)
        "max_ts",  # maxTimestampSoFar
        "off_max_ts",  # offsetOfMaxTimestampSoFar
        "off_entries",  # offset index entries
        "max_off_entries",  # what segment.index.bytes allows
        "last_offset",  # the offset index's last offset
        "time_entries",  # time index entries
        "max_time_entries",
        "last_time_ts",  # the time index's last entry: timestamp
        "last_time_off",  # ... and offset
        "offset_buf",  # bytearray: the offset index so far (shared with the builder, never copied)
        "time_buf",  # bytearray: the time index so far
        "take_txn",  # index transactional data batches in C too (the caller keeps no producer state)
        "batches",  # batches indexed by the walk
        "first",  # the first batch's base offset, or None
        "last",  # the last batch's last offset, or None
        "shift",  # file position minus the builder's layout position
    )

    def __init__(self, *, base: int, interval: int, valid: int, last_entry: int, max_ts: int, off_max_ts: int,
                 off_entries: int, max_off_entries: int, last_offset: int, time_entries: int, max_time_entries: int,
                 last_time_ts: int, last_time_off: int, offset_buf: bytearray, time_buf: bytearray, take_txn: bool,
                 batches: int = 0, first: int | None = None, last: int | None = None, shift: int = 0) -> None:
        self.base = base
        self.interval = interval
        self.valid = valid
        self.last_entry = last_entry
        self.max_ts = max_ts
        self.off_max_ts = off_max_ts
        self.off_entries = off_entries
        self.max_off_entries = max_off_entries
        self.last_offset = last_offset
        self.time_entries = time_entries
        self.max_time_entries = max_time_entries
        self.last_time_ts = last_time_ts
        self.last_time_off = last_time_off
        self.offset_buf = offset_buf
        self.time_buf = time_buf
        self.take_txn = take_txn
        self.batches = batches
        self.first = first
        self.last = last
        self.shift = shift

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__ if n not in ("offset_buf", "time_buf"))
        return f"IndexScanState({fields}, {len(self.offset_buf)}+{len(self.time_buf)} index bytes)"
