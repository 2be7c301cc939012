"""verify hardened for issue 9: zero runs at memory speed (segment.zeros), stray and
non-regular files, unreadable partition dirs, targets with nothing Kafka in them, pending
kafkatool journals and temp files, the --format vocabulary and the stderr summary, and the
stored/computed CRC wording.

Expected values are hand-derived (byte positions chosen at chunk boundaries, sizes of
files written here), never taken from kafkatool's own output.
"""

from __future__ import annotations

import os

import pytest

from kafkatool.segment import zeros
from kafkatool.segment.zeros import zero_run_end

MIB = 1 << 20


# --------------------------------------------------------------------------- zero_run_end


def _file(tmp_path, size: int, nonzero: dict[int, int] | None = None, sparse: bool = True):
    p = tmp_path / "z.bin"
    with open(p, "wb") as f:
        if sparse:
            f.truncate(size)
        else:
            f.write(bytes(size))
        for at, value in (nonzero or {}).items():
            f.seek(at)
            f.write(bytes([value]))
    return p


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize(
    "start, at",
    [
        (0, 0),  # the first byte itself
        (0, 1),
        (0, MIB - 1),  # the last byte of the first chunk
        (0, MIB),  # the first byte of the second chunk
        (0, MIB + 1),
        (5, 5),  # non-zero exactly at an unaligned start
        (5, MIB + 4),  # start+1MiB-1 from an unaligned start
        (5, MIB + 5),  # start+1MiB
        (3 * MIB - 7, 3 * MIB - 1),  # end-1
    ],
)
def test_zero_run_end_finds_the_first_nonzero_byte(tmp_path, sparse, start, at):
    end = 3 * MIB
    p = _file(tmp_path, end, {at: 0x80}, sparse)
    fd = os.open(p, os.O_RDONLY)
    try:
        assert zero_run_end(fd, start, end) == at
        # a byte before start is not seen; one at or after end is not reported
        assert zero_run_end(fd, start, at) == at
        if at + 1 < end:
            assert zero_run_end(fd, at + 1, end) == end
    finally:
        os.close(fd)


@pytest.mark.parametrize("sparse", [True, False])
def test_zero_run_end_all_zeros(tmp_path, sparse):
    size = 2 * MIB + 3
    p = _file(tmp_path, size, sparse=sparse)
    fd = os.open(p, os.O_RDONLY)
    try:
        assert zero_run_end(fd, 0, size) == size
        assert zero_run_end(fd, 17, size) == size
        assert zero_run_end(fd, size, size) == size  # empty range
        assert zero_run_end(fd, size - 1, size) == size
    finally:
        os.close(fd)


def test_zero_run_end_stops_at_a_byte_before_a_hole_and_after_one(tmp_path):
    # data, a hole of 8 MiB, data: the hole is skipped, the data after it is found
    p = tmp_path / "holes.bin"
    with open(p, "wb") as f:
        f.write(bytes(100))  # written zeros
        f.seek(8 * MIB + 12345)
        f.write(b"\0\0\x07")
        f.seek(16 * MIB)
        f.write(b"\x01")
    fd = os.open(p, os.O_RDONLY)
    try:
        assert zero_run_end(fd, 0, 16 * MIB + 1) == 8 * MIB + 12347
        assert zero_run_end(fd, 8 * MIB + 12348, 16 * MIB + 1) == 16 * MIB
        assert zero_run_end(fd, 8 * MIB + 12348, 16 * MIB) == 16 * MIB
    finally:
        os.close(fd)


def test_zero_run_end_past_the_end_of_the_file(tmp_path):
    p = _file(tmp_path, 1000)
    fd = os.open(p, os.O_RDONLY)
    try:
        # the file ends before `end`: the run ends at the file's size
        assert zero_run_end(fd, 0, 5000) == 1000
        assert zero_run_end(fd, 10, 5000) == 1000
    finally:
        os.close(fd)
    p2 = tmp_path / "data.bin"
    p2.write_bytes(bytes(1000))
    fd = os.open(p2, os.O_RDONLY)
    try:
        assert zero_run_end(fd, 0, 5000) == 1000
    finally:
        os.close(fd)


def test_zero_run_end_is_fast_on_a_large_hole(tmp_path):
    import time

    size = 8 << 30
    p = _file(tmp_path, size)
    fd = os.open(p, os.O_RDONLY)
    try:
        t = time.monotonic()
        assert zero_run_end(fd, 0, size) == size
        assert time.monotonic() - t < 1.0
    finally:
        os.close(fd)


def test_zero_run_end_chunk_is_one_mib():
    assert zeros.CHUNK == MIB


def test_zero_run_end_without_seek_data(tmp_path, monkeypatch):
    # a platform or file system without SEEK_DATA reads everything: same answers
    monkeypatch.setattr(zeros, "_SEEK_DATA", None)
    p = _file(tmp_path, 3 * MIB, {MIB: 1})
    fd = os.open(p, os.O_RDONLY)
    try:
        assert zero_run_end(fd, 0, 3 * MIB) == MIB
        assert zero_run_end(fd, MIB + 1, 3 * MIB) == 3 * MIB
        assert zero_run_end(fd, MIB + 1, 5 * MIB) == 3 * MIB
    finally:
        os.close(fd)
