"""segment.resync.bad_region: the one rule verify and convert --skip-damaged share for where a
bad region of a .log ends and what it is called (batches built with kafka-python; sizes and
positions derived by hand)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkatool.errors import CorruptRecordError
from kafkatool.segment.resync import bad_region

HEADER_UP_TO_MAGIC = 17  # offset 8 + length 4 + leader epoch 4 + magic 1 (spec §3)


def _batch(offset: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    b.append(0, timestamp=1_700_000_000_000, key=b"k", value=b"value", headers=[])
    raw = bytearray(b.build())
    raw[0:8] = offset.to_bytes(8, "big")
    return bytes(raw)


def _region(tmp_path: Path, data: bytes, pos: int, error=None):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        return bad_region(fd, str(path), pos, len(data), error)
    finally:
        os.close(fd)


def test_a_zero_tail_is_trailing_zeros(tmp_path: Path) -> None:
    good = _batch(0)
    r = _region(tmp_path, good + bytes(100), len(good))
    assert (r.start, r.end, r.kind) == (len(good), len(good) + 100, "trailing_zeros")
    assert r.message == "100 zero bytes after the last batch (preallocated or never written)"


@pytest.mark.parametrize(("tail", "kind"), [(HEADER_UP_TO_MAGIC, "trailing_bytes"), (HEADER_UP_TO_MAGIC + 1, "partial_batch")])
def test_a_short_tail_is_trailing_bytes_up_to_a_header_and_partial_batch_after(tmp_path: Path, tail: int, kind: str) -> None:
    good = _batch(0)
    torn = _batch(1)[:tail]  # the first bytes of a real batch: its size field points past the end
    r = _region(tmp_path, good + torn, len(good))
    assert (r.start, r.end, r.kind) == (len(good), len(good) + tail, kind)
    declared = len(_batch(1))
    assert r.message == f"a batch of {declared} bytes starts at {len(good)} but only {tail} bytes remain"


def test_a_size_pointing_past_the_end_with_a_valid_batch_after_it_is_invalid_size(tmp_path: Path) -> None:
    good, nxt = _batch(0), _batch(7)
    bad = bytearray(_batch(1))
    bad[8:12] = (1 << 30).to_bytes(4, "big")  # the size field, damaged
    data = good + bytes(bad) + nxt
    start, resume = len(good), len(good) + len(bad)
    r = _region(tmp_path, data, start)
    assert (r.start, r.end, r.kind) == (start, resume, "invalid_size")
    assert r.message == (f"the size field at {start} points past the end of the file, but a valid batch starts at "
                         f"{resume}; {resume - start} unreadable bytes before the next valid batch at {resume}")


def test_a_framing_error_keeps_its_message_and_runs_to_the_next_valid_batch(tmp_path: Path) -> None:
    good, nxt = _batch(0), _batch(9)
    junk = b"\x01" * 40
    err = CorruptRecordError("Record size 5 is less than the minimum record overhead (14)", kind="invalid_size")
    r = _region(tmp_path, good + junk + nxt, len(good), err)
    assert (r.start, r.end, r.kind) == (len(good), len(good) + 40, "invalid_size")
    assert r.message == f"{err.message}; 40 unreadable bytes before the next valid batch at {len(good) + 40}"
    magic = CorruptRecordError("Unknown magic -1", kind="unknown_magic")
    r = _region(tmp_path, good + junk, len(good), magic)  # nothing valid after it: to the end, its own kind
    assert (r.start, r.end, r.kind, r.message) == (len(good), len(good) + 40, "unknown_magic", "Unknown magic -1")
