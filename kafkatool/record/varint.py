"""Protobuf-style varints as Kafka uses them (spec §1).

``decode_varint(buf, pos) -> (value, pos)`` follows kafka-python's shape. Zig-zag
varints are used inside v2 records; unsigned varints in KRaft/flexible messages.
"""

from __future__ import annotations

from kafkatool.errors import InvalidRecordError

__all__ = [
    "decode_zigzag",
    "decode_varint",
    "decode_varlong",
    "decode_uvarint",
    "encode_varint",
    "encode_varlong",
    "encode_uvarint",
    "size_of_uvarint",
    "size_of_varint",
    "size_of_varlong",
]


def decode_zigzag(
    buf: bytes | bytearray | memoryview, pos: int, end: int, max_bytes: int, too_long: str, past_end: str
) -> tuple[int, int]:
    """Decode a zig-zag varint of at most ``max_bytes`` bytes (5: varint, 10: varlong) in
    ``buf[pos:end]``; return ``(value, next_pos)``.

    Kafka only checks the top bit of the last allowed byte (the bits above 32 or 64 overflow
    silently, §1): the result is truncated the same way. ``too_long`` and ``past_end`` are the
    messages of the two errors, located at ``pos``: each caller words them as Kafka does there.
    """
    raw = 0
    shift = 0
    i = pos
    while True:
        if i >= end:
            raise InvalidRecordError(past_end, position=pos)
        b = buf[i]
        i += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if i - pos >= max_bytes:
            raise InvalidRecordError(too_long, position=pos)
    raw &= 0xFFFFFFFF if max_bytes <= 5 else 0xFFFFFFFFFFFFFFFF  # an int32 or an int64
    return (raw >> 1) ^ -(raw & 1), i


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint (at most 5 bytes) at ``pos``; return ``(value, next_pos)``.

    Kafka only checks the top bit of the 5th byte (bits 4-6 overflow silently, §1):
    the result is truncated to 32 bits the same way.
    """
    if 0 <= pos < len(buf) and (b := buf[pos]) < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    return decode_zigzag(buf, pos, len(buf), 5, "Varint is too long, the most significant bit in the 5th byte is set",
                         "Found invalid record structure (varint runs past the end)")


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varlong (at most 10 bytes) at ``pos``; return ``(value, next_pos)``."""
    if 0 <= pos < len(buf) and (b := buf[pos]) < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    return decode_zigzag(buf, pos, len(buf), 10, "Varlong is too long, most significant bit in the 10th byte is set",
                         "Found invalid record structure (varlong runs past the end)")


def decode_uvarint(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Decode a plain (unsigned, no zig-zag) varint; return ``(value, next_pos)``."""
    raw = 0
    shift = 0
    i = pos
    try:
        while True:
            if i - pos >= max_bytes:
                raise InvalidRecordError("Unsigned varint is too long", position=pos)
            b = buf[i]
            i += 1
            raw |= (b & 0x7F) << shift
            if b < 0x80:
                return raw, i
            shift += 7
    except IndexError:
        raise InvalidRecordError("Unsigned varint runs past the end of the buffer", position=pos) from None


def encode_uvarint(value: int) -> bytes:
    """Encode an unsigned varint."""
    if value < 0x80:
        if value < 0:
            raise ValueError(f"unsigned varint cannot hold {value}")
        return bytes((value,))  # one byte: most lengths, deltas and counts
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Encode a zig-zag varint (32-bit)."""
    return encode_uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """Encode a zig-zag varlong (64-bit)."""
    return encode_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def size_of_uvarint(value: int) -> int:
    """Bytes :func:`encode_uvarint` would produce for ``value`` (not negative)."""
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


def size_of_varint(value: int) -> int:
    """Bytes :func:`encode_varint` would produce for ``value``."""
    return size_of_uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def size_of_varlong(value: int) -> int:
    """Bytes :func:`encode_varlong` would produce for ``value``."""
    return size_of_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)
