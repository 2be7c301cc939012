"""Resynchronisation after a bad region: the next position where a whole entry with a valid CRC begins.

Public: ``truncate`` finds where good data resumes with it too.
"""

from __future__ import annotations

import struct

from kafkatool.record.batch import LOG_OVERHEAD, RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1, V2_HEADER_SIZE
from kafkatool.record.crc import crc32, crc32c
from kafkatool.record.layout import DELETE_HORIZON_BIT, HEADER_SIZE_UP_TO_MAGIC, LEGACY, LEGACY_CRC_START, MAGIC_OFFSET, V2, V2_CRC_START
from kafkatool.record.v2 import HEADER as V2_HEADER
from kafkatool.segment.zeros import zero_run_end, zero_run_end_in

__all__ = ["resync"]


_RESYNC_MAX_BATCH = 256 << 20
_LEGACY_LENGTHS = struct.Struct(">i")


def _plausible(buf: bytes, i: int, magic: int, size: int, n: int) -> bool:
    """Whether the header at ``buf[i]`` could be a real entry (checked before its CRC)."""
    if magic == 2:
        if i + V2_HEADER_SIZE > n:
            return True  # cannot tell from this window: let the CRC decide
        (_b, _l, _ple, _m, _crc, attrs, lod, bts, mts, pid, pepoch, bseq, count) = V2_HEADER.unpack_from(buf, i)
        return (
            lod >= 0 and 0 <= count <= lod + 1 and pid >= -1 and pepoch >= -1 and bseq >= -1
            and mts >= -1 and (bts >= -1 or attrs & DELETE_HORIZON_BIT) and not attrs & 0xFF80
        )
    # v0/v1: key and value lengths must add up to the message size
    head = RECORD_OVERHEAD_V1 if magic == 1 else RECORD_OVERHEAD_V0
    k_at = i + LOG_OVERHEAD + head - 8  # the key length: the last 8 bytes of the overhead are the two lengths
    if k_at + 4 > n:
        return True
    (kl,) = _LEGACY_LENGTHS.unpack_from(buf, k_at)
    v_at = k_at + 4 + max(kl, 0)
    if kl < -1 or v_at + 4 > n:
        return kl >= -1
    (vl,) = _LEGACY_LENGTHS.unpack_from(buf, v_at)
    return vl >= -1 and size == head + max(kl, 0) + max(vl, 0)


def _next_header_plausible(f, at: int, end: int) -> bool:
    """A real entry is followed by the end of the data or by another entry's header."""
    if end - at <= HEADER_SIZE_UP_TO_MAGIC:
        return True
    f.seek(at)
    head = f.read(HEADER_SIZE_UP_TO_MAGIC)
    size = int.from_bytes(head[V2.BATCH_LENGTH : LOG_OVERHEAD], "big", signed=True)
    return len(head) == HEADER_SIZE_UP_TO_MAGIC and head[MAGIC_OFFSET] <= 2 and size >= RECORD_OVERHEAD_V0


def _crc_at(f, buf: bytes, i: int, n: int, p: int, total: int, magic: int) -> int:
    """The CRC of the candidate entry at file position ``p`` (streamed: memory stays flat)."""
    start = V2_CRC_START if magic == 2 else LEGACY_CRC_START
    fn = crc32c if magic == 2 else crc32
    if i + total <= n:
        return fn(memoryview(buf)[i + start : i + total])
    f.seek(p + start)
    left = total - start
    value = 0
    while left > 0:
        piece = f.read(min(1 << 20, left))
        if not piece:
            return -1
        value = fn(piece, value)
        left -= len(piece)
    return value


def resync(path: str, start: int, end: int, chunk: int = 1 << 20) -> int | None:
    """The next position >= start where a complete entry with a valid CRC begins, or None."""
    with open(path, "rb") as f:
        pos = start
        while pos < end - HEADER_SIZE_UP_TO_MAGIC:
            f.seek(pos)
            buf = f.read(min(chunk + 64, end - pos))
            n = len(buf)
            i = 0
            limit = n - HEADER_SIZE_UP_TO_MAGIC
            while i < limit:
                magic = buf[i + MAGIC_OFFSET]
                if magic > 2:
                    i += 1
                    continue
                size = int.from_bytes(buf[i + V2.BATCH_LENGTH : i + LOG_OVERHEAD], "big", signed=True)
                if size < RECORD_OVERHEAD_V0:
                    if size == 0 and buf[i] == 0:
                        # a zero run: no entry starts inside it (its size field would be 0);
                        # skip it at memory speed, across windows when it runs past this one
                        z = zero_run_end_in(buf, i, n)
                        if z == n:
                            z = zero_run_end(f.fileno(), pos + n, end) - pos
                            if pos + z >= end:
                                return None
                        skip_to = max(i + 1, z - MAGIC_OFFSET)
                        if skip_to >= limit:
                            i = skip_to
                            break
                        i = skip_to
                        continue
                    i += 1
                    continue
                total = size + LOG_OVERHEAD
                p = pos + i
                if p + total > end:
                    i += 1
                    continue
                if magic == 2 and total < V2_HEADER_SIZE or magic == 1 and size < RECORD_OVERHEAD_V1:
                    i += 1
                    continue
                # cheap plausibility before a CRC: random bytes rarely make a sane header, and a
                # false candidate with a huge size must not be read and checksummed
                if total > _RESYNC_MAX_BATCH or not _plausible(buf, i, magic, size, n):
                    i += 1
                    continue
                if not _next_header_plausible(f, p + total, end):
                    i += 1
                    continue
                stored = int.from_bytes(buf[i + V2.CRC : i + V2_CRC_START] if magic == 2 else buf[i + LEGACY.CRC : i + LEGACY_CRC_START], "big")
                if _crc_at(f, buf, i, n, p, total, magic) == stored:
                    return p
                i += 1
            pos += max(i, 1)
    return None
