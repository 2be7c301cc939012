"""The batch model shared by every magic (spec §3, §4.1, §5.2).

A :class:`Batch` is one entry of the §3 walk: a v2 record batch, or a legacy (v0/v1)
shallow entry with the fixed values Kafka reports for it. It is a NamedTuple so that
walking a segment builds one cheap immutable object per batch (PERF.md lesson 3).
"""

from __future__ import annotations

from typing import NamedTuple

from kafkatool.record.compression import codec_name

__all__ = ["Batch", "Record", "TIMESTAMP_TYPE_NAMES", "increment_sequence"]

LOG_OVERHEAD = 12
HEADER_SIZE_UP_TO_MAGIC = 17
V2_HEADER_SIZE = 61
RECORD_OVERHEAD_V0 = 14
RECORD_OVERHEAD_V1 = 22

NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1


#: Kafka's ``TimestampType.toString`` for each timestamp type id.
TIMESTAMP_TYPE_NAMES = {NO_TIMESTAMP_TYPE: "NoTimestampType", CREATE_TIME: "CreateTime", LOG_APPEND_TIME: "LogAppendTime"}


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: wraps past Int.MAX to 0 (§4.1)."""
    if sequence > 2147483647 - increment:
        return increment - (2147483647 - sequence) - 1
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
        return self.attributes & 0x07

    @property
    def codec_name(self) -> str:
        return codec_name(self.attributes & 0x07)

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & 0x08 else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & 0x20)

    @property
    def has_delete_horizon(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & 0x40)

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
