"""CRC-32C (v2 batches, producer snapshots) and CRC-32 (v0/v1 messages), spec §1.

CRC-32C comes from the compiled extension's hardware implementation when it is built,
else from the hardware-accelerated ``crc32c`` package; both accept memoryview slices
without copying (PERF.md: 16-19 GB/s).
"""

from __future__ import annotations

import zlib

from kafkatool.record.speedups import functions as _compiled  # the extension, unless not built or switched off

# the extension's own hardware CRC-32C: same results, and no 20 ms package import
(_crc32c,) = _compiled("crc32c")
if _crc32c is None:  # pragma: no cover - depends on the build
    from crc32c import crc32c as _crc32c

__all__ = ["crc32c", "crc32"]


#: ``crc32c(data, value=0) -> int``: CRC-32C (Castagnoli) of ``data``, continuing from the CRC
#: ``value``; unsigned. The implementation itself, not a wrapper: the walk calls it once per batch.
crc32c = _crc32c


def crc32(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32 (zlib) of ``data``, continuing from ``value``; unsigned."""
    return zlib.crc32(data, value)
