"""Byte layouts of a log entry, by name: header field offsets and attribute bits (spec §3, §4.1, §5.1).

Every offset here is derived from the struct format that decodes the field, so a layout is
written once: ``V2.MAGIC`` is where :data:`V2_HEADER` reads ``magic``. Code that looks at a
raw entry (``entry[V2.ATTRIBUTES + 1] & CODEC_MASK``) names what it reads with these instead
of writing ``batch[22]`` or ``pos + 57``.
"""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Sequence

__all__ = [
    "INT32_MAX",
    "LOG_OVERHEAD",
    "HEADER_SIZE_UP_TO_MAGIC",
    "MAGIC_OFFSET",
    "RECORD_OVERHEAD_V0",
    "RECORD_OVERHEAD_V1",
    "V2_HEADER",
    "V2_HEADER_SIZE",
    "V2",
    "V2_CRC_START",
    "LEGACY_PREFIX",
    "LEGACY",
    "LEGACY_CRC_START",
    "LEGACY_V1_TIMESTAMP",
    "CODEC_MASK",
    "TIMESTAMP_TYPE_BIT",
    "TRANSACTIONAL_BIT",
    "CONTROL_BIT",
    "DELETE_HORIZON_BIT",
    "LEGACY_CODEC_MASK",
    "LEGACY_TIMESTAMP_TYPE_BIT",
    "codec_of",
]

INT32_MAX = 2**31 - 1
"""Java's ``Integer.MAX_VALUE``: sizes, relative offsets, positions and sequences wrap or stop here."""


def _layout(fields: Sequence[tuple[str, str]]) -> tuple[struct.Struct, SimpleNamespace]:
    """The big-endian struct of ``fields`` (``(NAME, code)`` in order) and each field's offset."""
    fmt, offsets = ">", {}
    for name, code in fields:
        offsets[name] = struct.calcsize(fmt)
        fmt += code
    offsets["SIZE"] = struct.calcsize(fmt)
    return struct.Struct(fmt), SimpleNamespace(**offsets)


#: The 61-byte v2 batch header (§4.1), one field per line.
V2_HEADER, V2 = _layout((
    ("BASE_OFFSET", "q"),
    ("BATCH_LENGTH", "i"),  # = total size - LOG_OVERHEAD
    ("PARTITION_LEADER_EPOCH", "i"),  # not covered by the CRC
    ("MAGIC", "b"),
    ("CRC", "I"),  # CRC-32C of bytes [V2_CRC_START, end)
    ("ATTRIBUTES", "h"),  # only the low byte has meaning
    ("LAST_OFFSET_DELTA", "i"),
    ("BASE_TIMESTAMP", "q"),  # or the delete horizon (DELETE_HORIZON_BIT)
    ("MAX_TIMESTAMP", "q"),
    ("PRODUCER_ID", "q"),
    ("PRODUCER_EPOCH", "h"),
    ("BASE_SEQUENCE", "i"),
    ("RECORDS_COUNT", "i"),
))
V2_HEADER_SIZE: int = V2.SIZE
V2_CRC_START: int = V2.ATTRIBUTES
"""The v2 CRC covers everything from the attributes to the end of the batch."""

#: Log overhead and the message prefix common to v0 and v1 (§3, §5.1). v1 follows it with an
#: int64 timestamp (at :data:`LEGACY_V1_TIMESTAMP`); then both have the key and the value.
LEGACY_PREFIX, LEGACY = _layout((
    ("OFFSET", "q"),  # the last inner offset for a compressed wrapper
    ("SIZE_FIELD", "i"),
    ("CRC", "I"),  # CRC-32 from the magic to the end of the value
    ("MAGIC", "b"),
    ("ATTRIBUTES", "b"),
))
LEGACY_CRC_START: int = LEGACY.MAGIC
LEGACY_V1_TIMESTAMP: int = LEGACY.SIZE
"""Where a v1 message keeps its timestamp (v0 has none)."""
_KEY_AND_VALUE_LENGTHS = 4 + 4  # int32 key length + int32 value length

LOG_OVERHEAD: int = V2.PARTITION_LEADER_EPOCH
"""offset (int64) + size (int32) in front of every entry of every magic."""
MAGIC_OFFSET: int = V2.MAGIC
"""Every magic keeps its magic byte here (§3): the walk reads it before it knows the layout."""
HEADER_SIZE_UP_TO_MAGIC: int = MAGIC_OFFSET + 1
RECORD_OVERHEAD_V0: int = LEGACY.SIZE + _KEY_AND_VALUE_LENGTHS - LOG_OVERHEAD
"""The smallest v0 message, size field value (Kafka's ``LegacyRecord.RECORD_OVERHEAD_V0``)."""
RECORD_OVERHEAD_V1: int = RECORD_OVERHEAD_V0 + struct.calcsize(">q")  # + timestamp
"""The smallest v1 message, size field value (``LegacyRecord.RECORD_OVERHEAD_V1``)."""

assert (V2.MAGIC, V2.CRC, V2.ATTRIBUTES, V2.RECORDS_COUNT, V2_HEADER_SIZE) == (16, 17, 21, 57, 61)
assert (LEGACY.MAGIC, LEGACY.ATTRIBUTES, LEGACY_V1_TIMESTAMP, RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1) == (16, 17, 18, 14, 22)
assert LEGACY.MAGIC == MAGIC_OFFSET and LOG_OVERHEAD == LEGACY.CRC

# ----------------------------------------------------------------------------- attributes (§4.1, §5.1)
CODEC_MASK = 0x07
"""Attribute bits 0-2: the compression codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
TIMESTAMP_TYPE_BIT = 0x08
"""v2 attribute bit 3: LogAppendTime when set, CreateTime otherwise."""
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40
"""v2 attribute bit 6: the base timestamp is the delete horizon (KIP-534)."""
LEGACY_CODEC_MASK = CODEC_MASK
LEGACY_TIMESTAMP_TYPE_BIT = 0x08
"""v1 attribute bit 3: LogAppendTime (v0 has no timestamp)."""


def codec_of(attributes: int) -> int:
    """The codec id in an entry's attributes (any magic)."""
    return attributes & CODEC_MASK
