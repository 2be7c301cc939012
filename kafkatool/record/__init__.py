"""Record bytes in, values out: varints, CRCs, codecs, v2 batches, legacy messages, control records.

Nothing in this package does I/O. Errors carry positions relative to the bytes given;
the segment layer locates them in a file. Where an entry ends is :mod:`~kafkatool.record.framing`'s
one answer; the header fields and attribute bits by name are in :mod:`~kafkatool.record.layout`;
every :class:`~kafkatool.record.batch.Batch` is built by :func:`~kafkatool.record.batch.batch_from_header`.
"""
