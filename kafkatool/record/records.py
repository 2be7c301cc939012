"""Deep iteration for any magic: one entry point over v2 and legacy decoders."""

from __future__ import annotations

from typing import Iterable

from kafkatool.record.batch import Batch, Record
from kafkatool.record.compression import DEFAULT_MAX_DECOMPRESSED
from kafkatool.record.layout import CODEC_MASK
from kafkatool.record.legacy import iter_legacy_record_chunks, iter_legacy_records
from kafkatool.record.v2 import CHUNK_RECORDS, iter_batch_record_chunks, iter_batch_records

__all__ = ["decode_batch_records", "batch_record_chunks", "first_batch_record"]


def decode_batch_records(
    batch: Batch, data: bytes | memoryview, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> list[Record]:
    """Every record of ``batch`` (whole entry bytes in ``data``) in one list, decompressing as needed.

    Raises :class:`~kafkatool.errors.InvalidRecordError` /
    :class:`~kafkatool.errors.CorruptRecordError` with a position relative to the
    entry start; the caller locates it in its file. The list grows with the record
    count, which a batch's writer chooses: to read batches from a file, use
    :func:`batch_record_chunks`.
    """
    if batch.magic >= 2:
        return iter_batch_records(batch, data, max_decompressed=max_decompressed)
    return iter_legacy_records(batch, data, max_decompressed=max_decompressed)


def batch_record_chunks(
    batch: Batch, data: bytes | memoryview, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> Iterable[list[Record]]:
    """The records of ``batch`` in lists of at most a few thousand, as they are decoded.

    Memory stays bounded by a constant whatever the batch's record count (a compressed
    batch is decompressed and decoded as a stream). The lists joined, or the error
    raised after them, are what :func:`decode_batch_records` returns or raises; the
    error may come from this call or from the iteration, so wrap both. A small
    uncompressed batch is decoded here, as one list in a tuple (no generator per batch
    on the hot path of a deep dump).
    """
    if batch.magic >= 2:
        if not batch.attributes & CODEC_MASK and batch.count <= CHUNK_RECORDS:
            return (iter_batch_records(batch, data, max_decompressed=max_decompressed),)
        return iter_batch_record_chunks(batch, data, max_decompressed=max_decompressed)
    return iter_legacy_record_chunks(batch, data, max_decompressed=max_decompressed)


def first_batch_record(
    batch: Batch, data: bytes | memoryview, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> Record | None:
    """The first record of ``batch`` (None for an empty one), after reading the rest to the end.

    What ``decode_batch_records(batch, data)[0]`` gives, and the same error when any record
    fails, with memory bounded by a constant: a control batch's marker is one record, but its
    writer chooses the record count (a compressed "marker" of millions of records).
    """
    first = None
    for chunk in batch_record_chunks(batch, data, max_decompressed=max_decompressed):
        if first is None and chunk:
            first = chunk[0]
    return first

