"""Producer state snapshot (``<offset>.snapshot``), spec §10.

A version-prefixed, non-flexible protocol message: int16 version (must be 1), uint32
CRC-32C over bytes [6, end of file), int32 entry count, then 46-byte entries. The CRC
covers any trailing bytes too, although only the declared entries are parsed.

Errors are :class:`CorruptSnapshotError` whose ``message`` is Kafka's exact text (§10,
§15.7): DumpLogSegments prints that text to stderr and carries on.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Iterable, NamedTuple

from kafkatool.errors import CorruptSnapshotError
from kafkatool.record.crc import crc32c
from kafkatool.record.layout import INT32_MAX

__all__ = [
    "ProducerSnapshotEntry",
    "ProducerSnapshot",
    "decode_producer_snapshot",
    "read_producer_snapshot",
    "encode_producer_snapshot",
    "SNAPSHOT_VERSION",
]

SNAPSHOT_VERSION = 1  # ProducerStateManager.PRODUCER_SNAPSHOT_VERSION

SNAPSHOT_HEADER = struct.Struct(
    ">"
    "h"  # version
    "I"  # crc: CRC-32C of bytes [6, EOF)
    "i"  # producer entry count
)
SNAPSHOT_ENTRY = struct.Struct(
    ">"
    "q"  # producerId
    "h"  # epoch
    "i"  # lastSequence
    "q"  # lastOffset (< 0: no batch metadata)
    "i"  # offsetDelta = lastSeq - firstSeq of the last batch
    "q"  # timestamp (both lastTimestamp and the batch timestamp)
    "i"  # coordinatorEpoch
    "q"  # currentTxnFirstOffset (< 0: none)
)
VERSION_SIZE = 2
CRC_OFFSET = 2
ENTRIES_OFFSET = 6  # PRODUCER_ENTRIES_OFFSET: where the CRC starts
HEADER_SIZE = SNAPSHOT_HEADER.size  # 10
ENTRY_SIZE = SNAPSHOT_ENTRY.size  # 46
_PREFIX = "Snapshot failed schema validation: "


class ProducerSnapshotEntry(NamedTuple):
    """One producer's state as stored in a snapshot (§10); field names follow Kafka's."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int

    @property
    def has_batch_metadata(self) -> bool:
        """Kafka keeps batch metadata only when the stored lastOffset is >= 0."""
        return self.last_offset >= 0

    @property
    def first_sequence(self) -> int:
        """``BatchMetadata.firstSeq``: lastSeq - offsetDelta, wrapping below 0 to Int.MAX (§10)."""
        if self.last_sequence < self.offset_delta:
            return INT32_MAX - (self.offset_delta - self.last_sequence) + 1
        return self.last_sequence - self.offset_delta

    @property
    def has_ongoing_txn(self) -> bool:
        """``currentTxnFirstOffset`` is present only when >= 0."""
        return self.current_txn_first_offset >= 0


@dataclass(frozen=True, slots=True)
class ProducerSnapshot:
    """A decoded snapshot file."""

    version: int
    crc: int
    """The stored CRC (unsigned)."""
    computed_crc: int
    """CRC-32C of bytes [6, EOF), trailing bytes included."""
    entries: tuple[ProducerSnapshotEntry, ...]
    trailing_bytes: int = 0
    """Bytes after the declared entries (covered by the CRC, never parsed)."""

    @property
    def crc_valid(self) -> bool:
        return self.crc == self.computed_crc


def decode_producer_snapshot(data: bytes | bytearray | memoryview, *, verify_crc: bool = True) -> ProducerSnapshot:
    """Decode a producer snapshot (§10). Pure.

    Checks, in order: the version (an empty or 1-byte file gives Kafka's
    ``Snapshot failed schema validation: null``), the structure (truncation), then the
    CRC. ``verify_crc=False`` returns a snapshot whose CRC does not match instead of
    raising (for tools that want to show the content anyway).
    Raises :class:`CorruptSnapshotError` with Kafka's message and a byte position.
    """
    view = memoryview(data)
    size = len(view)
    if size < VERSION_SIZE:
        # Reading the int16 version underflows the buffer; that exception has no message.
        raise CorruptSnapshotError(_PREFIX + "null", position=0)
    (version,) = struct.unpack_from(">h", view, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(
            _PREFIX + f"Snapshot contained an unknown file version {version}", position=0
        )
    if size < HEADER_SIZE:
        raise CorruptSnapshotError(
            _PREFIX + f"the snapshot header needs {HEADER_SIZE} bytes but the file has only {size}",
            position=size,
        )
    _, crc, count = SNAPSHOT_HEADER.unpack_from(view, 0)
    if count < 0:
        raise CorruptSnapshotError(
            _PREFIX + f"non-nullable field producerEntries was serialized with entry count {count}",
            position=ENTRIES_OFFSET,
        )
    available = (size - HEADER_SIZE) // ENTRY_SIZE
    if count > available:
        first_missing = HEADER_SIZE + available * ENTRY_SIZE
        raise CorruptSnapshotError(
            _PREFIX + f"the snapshot declares {count} producer entries but the file holds only "
            f"{available} complete {ENTRY_SIZE}-byte entries",
            position=first_missing,
        )
    end = HEADER_SIZE + count * ENTRY_SIZE
    computed = crc32c(view[ENTRIES_OFFSET:])
    if verify_crc and computed != crc:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}",
            position=CRC_OFFSET,
        )
    entries = tuple(
        ProducerSnapshotEntry(*fields) for fields in SNAPSHOT_ENTRY.iter_unpack(view[HEADER_SIZE:end])
    )
    return ProducerSnapshot(version, crc, computed, entries, size - end)


def read_producer_snapshot(path: str | os.PathLike[str], *, verify_crc: bool = True) -> ProducerSnapshot:
    """Read and decode a ``.snapshot`` file; errors are located in the file (``.message`` stays Kafka's)."""
    spath = os.fspath(path)
    with open(spath, "rb") as f:
        data = f.read()
    try:
        return decode_producer_snapshot(data, verify_crc=verify_crc)
    except CorruptSnapshotError as err:
        raise err.at(spath) from None


def encode_producer_snapshot(entries: Iterable[ProducerSnapshotEntry]) -> bytes:
    """The bytes of a version-1 snapshot holding ``entries``, CRC filled in (``writeSnapshot``)."""
    body = bytearray()
    count = 0
    for entry in entries:
        try:
            body += SNAPSHOT_ENTRY.pack(*entry)
        except struct.error:
            raise CorruptSnapshotError(
                "producer entry does not fit the snapshot layout",
                expected="int64/int16/int32 fields as in spec §10",
                found=tuple(entry),
            ) from None
        count += 1
    tail = struct.pack(">i", count) + bytes(body)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c(tail)) + tail
