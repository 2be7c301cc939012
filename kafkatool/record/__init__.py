"""Record bytes in, values out: varints, CRCs, codecs, v2 batches, legacy messages, control records.

Nothing in this package does I/O. Errors carry positions relative to the bytes given;
the segment layer locates them in a file.
"""
