"""Where one log entry ends: the framing step of the §3 walk, free of I/O.

Every walk over log entries (the window walk over memory, the file walk, the compiled
``_speedups.walk_v2``) asks the same question at each position: given the bytes at hand,
what is the entry there? :func:`frame_entry` is the one answer, in the manner of a
sans-I/O parser (h11): it never reads a file and never raises for what it finds. Its
answer is a tuple ``(kind, size, magic, error)``:

``(ENTRY, total, magic, None)``
    a complete entry of ``total`` bytes (log overhead included) is at hand; ``magic`` is
    its magic byte, signed (0/1 legacy, 2..127 v2).
``(NEED, more, magic, None)``
    the entry is not all at hand: ``more`` bytes more are needed after the ``avail``
    given. ``magic`` is None while the 17 bytes up to the magic are not at hand yet
    (then ``more`` counts up to them; ask again with them for the entry's size).
``(TAIL, left, None, None)``
    Kafka stops here silently (§3: at most 17 bytes left, or an entry whose size runs
    past ``end``); DumpLogSegments calls the ``left`` bytes invalid bytes.
``(END, 0, None, None)``
    nothing left.
``(ERROR, size, magic, error)``
    Kafka throws here: a size below 14, an entry shorter than its own header (v2 below
    61 bytes, v1 below 22), a negative magic. ``error`` is a :class:`~kafkatool.errors.KafkaToolError`
    located at the entry (``path``, ``base + pos``); ``size`` is the size field read;
    ``magic`` is None for a bad size (Kafka never looks at it then).

The checks run in Kafka's order (``ByteBufferLogInputStream.nextBatch``, then the batch's
own size check), and an entry is judged by its magic only when its header is at hand, so
a window walk that refills on NEED ends exactly where one pass over the whole buffer does.
"""

from __future__ import annotations

import enum
import struct

from kafkatool.errors import CorruptRecordError, InvalidRecordError, KafkaToolError
from kafkatool.record.layout import (
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    V2,
    V2_HEADER_SIZE,
)

__all__ = [
    "Frame",
    "FrameKind",
    "ENTRY",
    "NEED",
    "TAIL",
    "END",
    "ERROR",
    "frame_entry",
    "size_error",
    "short_v2_error",
    "short_v1_error",
    "magic_error",
]


class FrameKind(enum.IntEnum):
    """What :func:`frame_entry` found at a position."""

    ENTRY = 0
    NEED = 1
    TAIL = 2
    END = 3
    ERROR = 4


ENTRY = FrameKind.ENTRY
NEED = FrameKind.NEED
TAIL = FrameKind.TAIL
END = FrameKind.END
ERROR = FrameKind.ERROR

_SIZE_AT = V2.BATCH_LENGTH
assert _SIZE_AT == LEGACY.SIZE_FIELD and MAGIC_OFFSET == LEGACY.MAGIC
_MAGIC_AFTER_SIZE = MAGIC_OFFSET - _SIZE_AT - 4
#: the size field and the magic byte (signed), read together
_size_and_magic = struct.Struct(f">i{_MAGIC_AFTER_SIZE}xb").unpack_from
_END_ANSWER = (END, 0, None, None)

#: An answer of :func:`frame_entry`: ``(kind, size, magic, error)`` (a plain tuple: one per entry walked).
Frame = tuple[FrameKind, int, int | None, KafkaToolError | None]


def frame_entry(buf, pos: int, avail: int, end: int, base: int = 0, path: str = "<memory>") -> Frame:
    """What the entry at ``buf[pos:]`` is (see the module docstring for the answers).

    ``buf[pos:avail]`` are the bytes at hand; ``end`` (``>= avail``) is where the walk ends:
    bytes between ``avail`` and ``end`` exist but are not in ``buf`` yet. ``base`` is the
    file position of ``buf[0]`` and ``path`` the file's name, both only to locate an error.
    Only ``buf[pos:avail]`` is read.
    """
    left = end - pos
    if left <= HEADER_SIZE_UP_TO_MAGIC:  # Kafka's `position >= end - HEADER_SIZE_UP_TO_MAGIC`
        return _END_ANSWER if left <= 0 else (TAIL, left, None, None)
    have = avail - pos
    if have < HEADER_SIZE_UP_TO_MAGIC:
        return (NEED, HEADER_SIZE_UP_TO_MAGIC - have, None, None)
    size, magic = _size_and_magic(buf, pos + _SIZE_AT)
    if size < RECORD_OVERHEAD_V0:
        return (ERROR, size, None, size_error(size, path).at(path, base + pos))
    total = size + LOG_OVERHEAD
    if total > left:
        return (TAIL, left, None, None)
    if magic >= 2:
        if total < V2_HEADER_SIZE:
            return (ERROR, size, magic, short_v2_error(total).at(path, base + pos))
    elif magic < 0:
        return (ERROR, size, magic, magic_error(magic).at(path, base + pos))
    elif magic == 1 and size < RECORD_OVERHEAD_V1:
        return (ERROR, size, magic, short_v1_error(size).at(path, base + pos))
    if total > have:
        return (NEED, total - have, magic, None)
    return (ENTRY, total, magic, None)


# The messages are Kafka's (``ByteBufferLogInputStream``, ``DefaultRecordBatch``, ``LegacyRecord``).


def size_error(size: int, path: str) -> CorruptRecordError:
    """A size field below the smallest entry (14)."""
    return CorruptRecordError(
        f"Found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0}) in file {path}.",
        kind="invalid_size",
    )


def short_v2_error(total: int) -> CorruptRecordError:
    """A v2 entry of ``total`` bytes, shorter than its own header."""
    return CorruptRecordError(
        f"Record batch is corrupt (the size {total} is smaller than the minimum allowed overhead {V2_HEADER_SIZE})",
        kind="invalid_size",
    )


def short_v1_error(size: int) -> CorruptRecordError:
    """A v1 message whose size field is below the v1 overhead."""
    return CorruptRecordError(
        f"Record is corrupt (the size {size} is smaller than the magic v1 message overhead {RECORD_OVERHEAD_V1})",
        kind="invalid_size",
    )


def magic_error(magic: int) -> InvalidRecordError:
    """A negative magic: no format has one (Kafka tries it as a legacy message and fails)."""
    return InvalidRecordError(f"Invalid magic used in LegacyRecord: {magic}", kind="unknown_magic")

