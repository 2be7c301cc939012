"""Deep iteration for any magic: one entry point over v2 and legacy decoders."""

from __future__ import annotations

from kafkatool.record.batch import Batch, Record
from kafkatool.record.compression import DEFAULT_MAX_DECOMPRESSED
from kafkatool.record.legacy import iter_legacy_records
from kafkatool.record.v2 import iter_batch_records

__all__ = ["decode_batch_records"]


def decode_batch_records(
    batch: Batch, data: bytes | memoryview, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> list[Record]:
    """Every record of ``batch`` (whole entry bytes in ``data``), decompressing as needed.

    Raises :class:`~kafkatool.errors.InvalidRecordError` /
    :class:`~kafkatool.errors.CorruptRecordError` with a position relative to the
    entry start; the caller locates it in its file.
    """
    if batch.magic >= 2:
        return iter_batch_records(batch, data, max_decompressed=max_decompressed)
    return iter_legacy_records(batch, data, max_decompressed=max_decompressed)
