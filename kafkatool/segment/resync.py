"""Resynchronisation: the next position where a whole entry with a valid CRC begins (spec §3, §4.1, §5.1).

After a region the batch walk cannot frame, good data resumes at the first position whose bytes
make a whole entry of any magic: a sane header, a size that fits the file, a plausible header
(or the end of the data) right after it, and a CRC that holds. The same search gives a parallel
reader a likely batch start near a byte position without walking the batches before it
(:meth:`kafkatool.segment.logdir.Segment.split` with ``exact=False``).

A match is probable, not proven: a record value can hold the bytes of a whole valid batch. A
reader that starts at one checks that the walk before it ends exactly there (verify's
``--jobs`` does); after damage, verify and truncate take it as where good data resumes.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from kafkatool.errors import KafkaToolError
from kafkatool.record.crc import crc32, crc32c
from kafkatool.record.layout import (
    DELETE_HORIZON_BIT,
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY,
    LEGACY_CRC_START,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
    V2,
    V2_CRC_START,
    V2_HEADER,
    V2_HEADER_SIZE,
)
from kafkatool.segment.zeros import zero_run_end, zero_run_end_in

__all__ = ["resync", "RESYNC_MAX_BATCH", "BadRegion", "bad_region"]


RESYNC_MAX_BATCH = 256 << 20
"""A candidate entry larger than this is not read and checksummed (random bytes make huge sizes)."""
_LEGACY_LENGTHS = struct.Struct(">i")
_UNUSED_ATTRIBUTE_BITS = 0xFF80
"""v2 attribute bits 7-15: unused, always zero in a batch Kafka wrote (§4.1)."""
_KEY_AND_VALUE_LENGTHS = 2 * _LEGACY_LENGTHS.size
"""The last bytes of a legacy message's overhead: its key length and its value length."""


def _plausible(buf: bytes, i: int, magic: int, size: int, n: int) -> bool:
    """Whether the header at ``buf[i]`` could be a real entry (checked before its CRC)."""
    if magic == 2:
        if i + V2_HEADER_SIZE > n:
            return True  # cannot tell from this window: let the CRC decide
        (_b, _l, _ple, _m, _crc, attrs, lod, bts, mts, pid, pepoch, bseq, count) = V2_HEADER.unpack_from(buf, i)
        return (
            lod >= 0 and 0 <= count <= lod + 1 and pid >= -1 and pepoch >= -1 and bseq >= -1
            and mts >= -1 and (bts >= -1 or attrs & DELETE_HORIZON_BIT) and not attrs & _UNUSED_ATTRIBUTE_BITS
        )
    # v0/v1: key and value lengths must add up to the message size
    head = RECORD_OVERHEAD_V1 if magic == 1 else RECORD_OVERHEAD_V0
    k_at = i + LOG_OVERHEAD + head - _KEY_AND_VALUE_LENGTHS  # the key length, then the value length
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
    """The first position in ``[start, end)`` where a whole entry with a valid CRC begins, or None.

    An entry running past ``end`` does not count. Zero runs are skipped at memory speed (no
    entry starts inside one: its size field would be 0). ``chunk`` is the read window; memory
    stays flat whatever the entry sizes (a candidate's CRC is streamed).
    """
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
                if total > RESYNC_MAX_BATCH or not _plausible(buf, i, magic, size, n):
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


class BadRegion(NamedTuple):
    """A byte range ``[start, end)`` of a ``.log`` no batch walk can read: its ``kind`` (one of
    ``kafkatool verify``'s finding kinds: ``invalid_size``, ``unknown_magic``, ``partial_batch``,
    ``trailing_bytes``, ``trailing_zeros``) and a message in verify's words. ``end`` is the size
    of the file when no valid batch follows, else where the next one starts."""

    start: int
    end: int
    kind: str
    message: str
    error: KafkaToolError | None = None
    """The walk's framing error that stopped it at ``start``, if it was one (None for a torn tail)."""


def bad_region(fd: int, path: str, pos: int, size: int, error: KafkaToolError | None) -> BadRegion:
    """The bad region at ``pos``, where a walk of the ``.log`` open as ``fd`` stopped short of
    ``size``: with ``error``, the walk's framing error (an entry it cannot frame); without, the
    walk's tail (a batch running past ``size``, or fewer bytes than a header).

    One rule for every reader that goes on after damage (``kafkatool verify`` reports these
    regions, ``kafkatool convert --skip-damaged`` converts around them): a zero run to the end
    is ``trailing_zeros`` (passed at memory speed); otherwise the region runs to the next entry
    :func:`resync` finds, or to the end of the file, and a size field pointing past the end is
    ``invalid_size`` when a valid batch follows (the size was damaged), ``partial_batch`` when
    none does (a torn write), ``trailing_bytes`` when too few bytes are left for a header.
    """
    if error is not None:
        kind = "unknown_magic" if error.kind == "unknown_magic" else "invalid_size"
        message = error.message
    else:
        head = os.pread(fd, LOG_OVERHEAD, pos)
        if len(head) == LOG_OVERHEAD:
            declared = int.from_bytes(head[V2.BATCH_LENGTH:LOG_OVERHEAD], "big", signed=True)
            message = f"a batch of {declared + LOG_OVERHEAD} bytes starts at {pos} but only {size - pos} bytes remain"
        else:
            message = f"{size - pos} bytes at the end are too short for a batch header"
        kind = "partial_batch"
    # a zero run (a preallocated tail, gigabytes of it, often a hole) is passed at memory speed:
    # no batch starts inside it (a batch's size field, bytes 8-11, is never zero)
    zeros_end = zero_run_end(fd, pos, size)
    if zeros_end >= size:
        return BadRegion(pos, size, "trailing_zeros", f"{size - pos} zero bytes after the last batch (preallocated or never written)", error)
    nxt = resync(path, max(pos + 1, zeros_end - MAGIC_OFFSET), size)
    if nxt is None:
        if size - pos <= HEADER_SIZE_UP_TO_MAGIC:
            kind = "trailing_bytes"
        return BadRegion(pos, size, kind, message, error)
    if kind == "partial_batch":
        kind = "invalid_size"
        message = f"the size field at {pos} points past the end of the file, but a valid batch starts at {nxt}"
    return BadRegion(pos, nxt, kind, f"{message}; {nxt - pos} unreadable bytes before the next valid batch at {nxt}", error)
