"""The batch model shared by every magic (spec §3, §4.1, §5.2).

A :class:`Batch` is one entry of the §3 walk: a v2 record batch, or a legacy (v0/v1)
shallow entry with the fixed values Kafka reports for it. It is a NamedTuple so that
walking a segment builds one cheap immutable object per batch (PERF.md lesson 3).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafkatool.record.compression import codec_name
from kafkatool.record.crc import crc32, crc32c
from kafkatool.record.layout import (  # noqa: F401 - the sizes are also imported from here
    CODEC_MASK,
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    HEADER_SIZE_UP_TO_MAGIC,
    INT32_MAX,
    LEGACY_CRC_START,
    LEGACY_PREFIX,
    LEGACY_V1_TIMESTAMP,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    V2_CRC_START,
    V2_HEADER,
    V2_HEADER_SIZE,
)

__all__ = ["Batch", "Record", "TIMESTAMP_TYPE_NAMES", "batch_from_header", "increment_sequence"]

NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1


#: Kafka's ``TimestampType.toString`` for each timestamp type id.
TIMESTAMP_TYPE_NAMES = {NO_TIMESTAMP_TYPE: "NoTimestampType", CREATE_TIME: "CreateTime", LOG_APPEND_TIME: "LogAppendTime"}


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: wraps past Int.MAX to 0 (§4.1)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


class Batch(NamedTuple):
    """One entry of the log walk. Field names follow Kafka's (snake_case)."""

    position: int
    """Byte position of the entry in the file (or slice)."""
    size: int
    """Total size including the 12-byte log overhead."""
    offset: int
    """int64 at byte 0: v2 baseOffset; legacy: the message offset (last inner offset for a wrapper)."""
    magic: int
    crc: int
    """Stored CRC, unsigned (CRC-32C for v2, outer CRC-32 for legacy)."""
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int | None
    """Header record count (v2); None for legacy entries (Kafka's countOrNull)."""
    partition_leader_epoch: int
    computed_crc: int
    """CRC computed over the bytes the stored CRC covers."""

    # ----------------------------------------------------------------- derived values
    @property
    def is_legacy(self) -> bool:
        return self.magic < 2

    @property
    def crc_valid(self) -> bool:
        return self.crc == self.computed_crc

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def codec_name(self) -> str:
        return codec_name(self.attributes & CODEC_MASK)

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & DELETE_HORIZON_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def last_offset(self) -> int:
        if self.magic >= 2:
            return self.offset + self.last_offset_delta
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        if self.magic < 2 or self.base_sequence == -1:
            return -1
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def end(self) -> int:
        return self.position + self.size


_v2_fields = V2_HEADER.unpack_from
_legacy_fields = LEGACY_PREFIX.unpack_from
_timestamp = struct.Struct(">q").unpack_from
_new = tuple.__new__  # skips NamedTuple's Python-level __new__ (one batch per entry walked)


def batch_from_header(buf: memoryview, pos: int, position: int, total: int, computed_crc: int | None = None) -> Batch:
    """The :class:`Batch` of the ``total``-byte entry whose header is at ``buf[pos:]``.

    Every Batch built in Python comes from here. ``position`` is the entry's file position.
    The magic byte picks the layout: a v2 header (§4.1), or a legacy message prefix (§5.1)
    with the fixed values Kafka reports for a shallow legacy entry (§5.2: no producer, no
    leader epoch, a null count, the v1 timestamp as both timestamps). ``computed_crc`` is the
    CRC over the bytes the stored one covers (CRC-32C from the attributes for v2, CRC-32 from
    the magic for legacy); None computes it from ``buf``, which must then hold the whole
    entry. The header must be valid as :func:`kafkatool.record.framing.frame_entry` checks it.
    ``buf`` is best a memoryview: the CRC then reads it without a copy.
    """
    magic = buf[pos + MAGIC_OFFSET]
    if 2 <= magic < 128:
        b, _length, ple, mg, crc, attrs, lod, bts, mts, pid, pep, bseq, cnt = _v2_fields(buf, pos)
        if computed_crc is None:
            computed_crc = crc32c(buf[pos + V2_CRC_START : pos + total])
        # the attributes are read signed (int16) and kept as the unsigned 16 bits
        return _new(Batch, (position, total, b, mg, crc, attrs & 0xFFFF, lod, bts, mts, pid, pep, bseq, cnt, ple, computed_crc))
    offset, _size, crc, mg, attrs = _legacy_fields(buf, pos)
    ts = _timestamp(buf, pos + LEGACY_V1_TIMESTAMP)[0] if mg == 1 else -1
    if computed_crc is None:
        computed_crc = crc32(buf[pos + LEGACY_CRC_START : pos + total])
    return _new(Batch, (position, total, offset, mg, crc, attrs & 0xFF, 0, ts, ts, -1, -1, -1, None, -1, computed_crc))


class Record(NamedTuple):
    """One decoded record (a v2 record, or a legacy message seen by deep iteration)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[bytes, bytes | None], ...] = ()
    sequence: int = -1
    attributes: int = 0
    crc: int | None = None
    """Legacy only: the message's own stored CRC-32."""
    crc_valid: bool | None = None
    """Legacy only: whether the message's own CRC-32 checks."""
    magic: int = 2
