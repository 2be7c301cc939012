"""Zero runs in a file, found at memory speed.

A broker with ``log.preallocate=true`` creates each segment at its full size and writes
into it; after an unclean shutdown the segment keeps a zero-filled tail that can be
gigabytes long (often a hole of a sparse file). Walking that tail one batch header at a
time costs seconds per gigabyte; :func:`zero_run_end` skips holes with ``SEEK_DATA`` and
compares the data it must read against a preallocated zero buffer, 1 MiB at a time.
"""

from __future__ import annotations

import errno
import os

__all__ = ["zero_run_end", "zero_run_end_in", "CHUNK"]

#: Bytes read and compared at a time.
CHUNK = 1 << 20

_ZEROS = bytes(CHUNK)
_SEEK_DATA = getattr(os, "SEEK_DATA", None)


def _next_data(fd: int, pos: int, end: int) -> int:
    """The first position >= ``pos`` that is not inside a hole (``end`` when none before it)."""
    if _SEEK_DATA is None:
        return pos
    try:
        data = os.lseek(fd, pos, _SEEK_DATA)
    except OSError as e:
        if e.errno == errno.ENXIO:  # no data from pos to the end of the file
            return min(end, os.fstat(fd).st_size)
        return pos  # SEEK_DATA not supported here (EINVAL on some file systems): read it all
    return min(data, end)


def zero_run_end_in(buf, start: int, end: int) -> int:
    """The index of the first non-zero byte of ``buf[start:end]``, or ``end`` if none.

    The cost grows with the length of the zero run, not with ``end - start``: the run is
    compared in windows that double from 64 bytes, so a scan that meets many short runs
    (a size field of zero in random bytes) pays little for each.
    """
    zeros = _ZEROS
    pos = start
    step = 64
    while pos < end:
        stop = min(end, pos + step)
        piece = bytes(buf[pos:stop])
        if piece != zeros[: len(piece)]:
            return pos + len(piece) - len(piece.lstrip(b"\0"))
        pos = stop
        step = min(step * 2, CHUNK)
    return end


def zero_run_end(fd: int, start: int, end: int) -> int:
    """The position of the first non-zero byte in ``[start, end)`` of ``fd``, or ``end`` if none.

    Holes of a sparse file are skipped without reading (``SEEK_DATA``); data is read with
    ``pread`` in :data:`CHUNK`-sized pieces. The file offset of ``fd`` is left as it was (a
    buffered file object over ``fd`` stays usable). A file that ends before ``end`` ends
    the run at its size.
    """
    if start >= end:
        return end
    saved = os.lseek(fd, 0, os.SEEK_CUR) if _SEEK_DATA is not None else None
    try:
        return _run_end(fd, start, end)
    finally:
        if saved is not None:
            os.lseek(fd, saved, os.SEEK_SET)


def _run_end(fd: int, start: int, end: int) -> int:
    pos = start
    zeros = _ZEROS
    pread = os.pread
    while pos < end:
        data = _next_data(fd, pos, end)
        if data >= end:
            return end
        pos = data
        # read up to the next CHUNK boundary of the file, so later reads stay aligned
        want = min(CHUNK - pos % CHUNK, end - pos)
        chunk = pread(fd, want, pos)
        if not chunk:  # the file is shorter than end
            return pos
        if chunk != zeros[: len(chunk)]:
            return pos + len(chunk) - len(chunk.lstrip(b"\0"))
        pos += len(chunk)
    return end
