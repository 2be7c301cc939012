"""kafkatool verify: every finding kind, located exactly, on inputs built with kafkatool's own
encoders and damaged on purpose; deep versus shallow; the clean and the real fixtures; the CLI
(exit codes, filters, formats, --max-rate, read-only); and a property: a corrupted byte is
always inside a reported region (spec §3, §4, §5, §8-§11, §17).

Layout of the standard test segment (:func:`segment`): five uncompressed v2 batches of three
records, 109 bytes each, at positions 0, 109, 218, 327, 436 holding offsets 0-2, 3-5, 6-8,
9-11, 12-14; record timestamps are ``TS + offset``. Most tests write it as ``t-0/...0.log``
with an empty ``.index`` (what Kafka writes for a segment under 4096 bytes), so a clean run has
no finding at all and every assertion below is on the complete list of findings.

Tests marked ``xfail(strict=True, reason="verify bug: ...")`` pin down verify bugs found while
writing this module: each asserts the correct behaviour, so the fix makes it XPASS, which fails
the run until the mark is removed.
"""

from __future__ import annotations

import functools
import json
import os
import struct
import time
from pathlib import Path
from typing import Callable, NamedTuple

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kafkatool.record.compression import Codec, compress
from kafkatool.record.control import (
    ControlType,
    encode_control_key,
    encode_end_txn_marker,
    encode_leader_change,
    encode_snapshot_header,
)
from kafkatool.record.crc import crc32, crc32c
from kafkatool.record.legacy import encode_legacy, encode_message
from kafkatool.record.v2 import RecordSpec, encode_batch, encode_record
from kafkatool.segment.checkpoint import EpochEntry, encode_leader_epoch_checkpoint, encode_partition_metadata
from kafkatool.segment.index import IndexBuilder, encode_offset_index, encode_time_index
from kafkatool.segment.snapshot import ProducerSnapshotEntry, encode_producer_snapshot
from kafkatool.segment.txnindex import AbortedTxn, encode_txn_index
from kafkatool.segment.walk import SegmentWalker
from kafkatool.verify import INFO_KINDS, KINDS, SPLIT_MIN_BYTES, FileSummary, Finding, VerifyOptions, verify_paths

import kafkatool.verify as verify_module
import kafkatool.verify.workers as verify_workers
from conftest import FIXTURES

TS = 1_000_000
LOG = "00000000000000000000.log"
INDEX = "00000000000000000000.index"
TIMEINDEX = "00000000000000000000.timeindex"
TXNINDEX = "00000000000000000000.txnindex"
BATCH = 109  # bytes of one v2(first) batch
GZIP_BATCH = 117  # bytes of one v2(first, codec=GZIP) batch
V1 = 36  # bytes of one legacy v1 message from v1(offset)



@pytest.fixture(autouse=True, params=["compiled", "python"])
def scan_implementation(request, monkeypatch):
    """Every test runs twice: with the compiled shallow scan, and with the pure-Python one."""
    if request.param == "python":
        monkeypatch.setattr(verify_workers, "scan_v2", None)
    elif verify_workers.scan_v2 is None:
        pytest.skip("the compiled extension is not built")
    return request.param


# --------------------------------------------------------------------------- builders


def records(first: int, n: int = 3) -> list[RecordSpec]:
    return [RecordSpec(first + i, TS + first + i, b"k%d" % i, b"value-%d" % i) for i in range(n)]


def v2(first: int, n: int = 3, **kw) -> bytes:
    """One v2 batch of ``n`` records from offset ``first``."""
    return encode_batch(records(first, n), **kw)


def segment(count: int = 5, first: int = 0, epochs: tuple[int, ...] | None = None) -> list[bytes]:
    """``count`` three-record v2 batches from offset ``first`` (optionally with leader epochs)."""
    return [
        v2(first + 3 * k, partition_leader_epoch=-1 if epochs is None else epochs[k])
        for k in range(count)
    ]


def control(offset: int, type_id: int, value: bytes | None, *, key: bytes | None = None, **kw) -> bytes:
    """A one-record control batch (key: the control key of ``type_id`` unless given)."""
    key = encode_control_key(type_id) if key is None else key
    return encode_batch([RecordSpec(offset, TS + offset, key, value)], is_control=True, **kw)


def v1(offset: int) -> bytes:
    """One uncompressed legacy v1 message (36 bytes)."""
    return encode_legacy([RecordSpec(offset, TS + offset, b"k", b"v")], magic=1)


def fix_crc(entry: bytes | bytearray) -> bytes:
    """Recompute the stored CRC of one entry: CRC-32C of [21, end) at [17, 21) for v2, CRC-32 of
    [16, end) at [12, 16) for v0/v1."""
    b = bytearray(entry)
    if b[16] in (0, 1):
        b[12:16] = struct.pack(">I", crc32(bytes(b[16:])))
    else:
        b[17:21] = struct.pack(">I", crc32c(bytes(b[21:])))
    return bytes(b)


def patch(entry: bytes, at: int, fmt: str, value, *, crc: bool = True) -> bytes:
    """``entry`` with ``struct.pack(fmt, value)`` written at ``at``, CRC fixed unless ``crc=False``."""
    b = bytearray(entry)
    struct.pack_into(fmt, b, at, value)
    return fix_crc(b) if crc else bytes(b)


def flip(entry: bytes, at: int, mask: int = 0xFF) -> bytes:
    b = bytearray(entry)
    b[at] ^= mask
    return bytes(b)


def replace(batches: list[bytes], k: int, new: bytes) -> bytes:
    """The segment ``batches`` with batch ``k`` replaced by ``new``."""
    return b"".join(batches[:k] + [new] + batches[k + 1 :])


def wrapper(inner: bytes, offset: int, *, magic: int = 1, codec: int = Codec.GZIP, ts: int = TS) -> bytes:
    """A compressed legacy wrapper around ``inner`` (already encoded messages), offset ``offset``."""
    payload = compress(codec, inner, magic=magic) if codec != Codec.ZSTD else compress(codec, inner, magic=2)
    return encode_message(offset, magic, ts if magic else -1, None, payload, attributes=codec)


def index_files(batches: list[bytes], base: int = 0) -> tuple[bytes, bytes]:
    """The ``.index``/``.timeindex`` recovery would build with index.interval.bytes=100 (§8.3)."""
    builder = IndexBuilder(base, index_interval_bytes=100)
    pos = 0
    for b in batches:
        ((walked, _data),) = list(SegmentWalker(b))
        builder.add_batch(pos, len(b), walked.last_offset, walked.max_timestamp)
        pos += len(b)
    return builder.finish()


# --------------------------------------------------------------------------- running verify


def write_dir(root: Path, files: dict[str, bytes | str], name: str = "t-0") -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    for n, data in files.items():
        if isinstance(data, str):
            (d / n).write_text(data)
        else:
            (d / n).write_bytes(data)
    return d


def check(*paths: Path, deep: bool = False, **opts) -> list[Finding]:
    """Every finding of ``verify`` over ``paths`` (summaries dropped)."""
    items = list(verify_paths([str(p) for p in paths], VerifyOptions(deep=deep, **opts)))
    return [i for i in items if isinstance(i, Finding)]


def check_log(root: Path, data: bytes, *, name: str = LOG, deep: bool = False, **opts) -> list[Finding]:
    """Write ``data`` as ``t-0/<name>`` beside an empty ``.index`` and verify the partition."""
    prefix = name.split(".", 1)[0]
    return check(write_dir(root, {name: data, f"{prefix}.index": b""}), deep=deep, **opts)


def where(findings: list[Finding]) -> list[tuple[str, int | None, int | None]]:
    return [(f.kind, f.position, f.length) for f in findings]


def where_in(findings: list[Finding]) -> list[tuple[str, str, int | None, int | None]]:
    return [(Path(f.file).name, f.kind, f.position, f.length) for f in findings]


def failing(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.kind not in INFO_KINDS]


def test_the_test_segment_layout_and_a_clean_partition(tmp_path):
    batches = segment(epochs=(0, 0, 1, 1, 1))
    assert [len(b) for b in batches] == [BATCH] * 5
    assert len(v2(0, codec=Codec.GZIP)) == GZIP_BATCH and len(v1(0)) == V1
    index, timeindex = index_files(batches)
    part = write_dir(tmp_path, {
        LOG: b"".join(batches),
        INDEX: index,
        TIMEINDEX: timeindex,
        "00000000000000000015.snapshot": encode_producer_snapshot([]),
        "leader-epoch-checkpoint": encode_leader_epoch_checkpoint([EpochEntry(0, 0), EpochEntry(1, 6)]),
        "partition.metadata": encode_partition_metadata(bytes(range(1, 17))),
    })
    assert check(part) == []
    assert check(part, deep=True) == []
    summaries = [i for i in verify_paths([str(part)], VerifyOptions()) if isinstance(i, FileSummary)]
    assert [(Path(s.file).name, s.kind, s.batches) for s in summaries if s.kind == "log"] == [(LOG, "log", 5)]


# --------------------------------------------------------------------------- framing (§3, §17 A)


def test_crc_mismatch_in_the_middle_batch_walk_continues(tmp_path):
    batches = segment()
    found = check_log(tmp_path, replace(batches, 2, flip(batches[2], 70, 0x01)))
    assert where(found) == [("crc_mismatch", 218, BATCH)]
    f = found[0]
    assert (f.batch_index, f.first_offset, f.last_offset, f.batches_after) == (2, 6, 8, 2)
    assert f.found == struct.unpack_from(">I", batches[2], 17)[0]
    assert f.expected == crc32c(flip(batches[2], 70, 0x01)[21:])


def test_two_bad_crcs_count_the_good_batches_after_each(tmp_path):
    batches = segment()
    batches[1] = flip(batches[1], 100)
    batches[3] = flip(batches[3], 18)  # the stored CRC itself
    found = check_log(tmp_path, b"".join(batches))
    assert where(found) == [("crc_mismatch", 109, BATCH), ("crc_mismatch", 327, BATCH)]
    assert [f.batches_after for f in found] == [2, 1]
    assert [f.batch_index for f in found] == [1, 3]


def test_crc_mismatch_in_a_legacy_message(tmp_path):
    msgs = [v1(i) for i in range(5)]
    found = check_log(tmp_path, replace(msgs, 2, flip(msgs[2], 30, 0x01)))
    assert where(found) == [("crc_mismatch", 2 * V1, V1)]
    assert (found[0].batch_index, found[0].first_offset, found[0].batches_after) == (2, 2, 2)


@pytest.mark.parametrize("size", [13, 5, 0, -1, -2147483648])
def test_size_below_14_mid_file_resyncs_on_the_next_valid_batch(tmp_path, size):
    batches = segment()
    found = check_log(tmp_path, replace(batches, 1, patch(batches[1], 8, ">i", size, crc=False)))
    assert where(found) == [("invalid_size", 109, BATCH)]
    assert found[0].batches_after == 3
    assert f"size {size} " in found[0].message


def test_zero_run_mid_file_is_one_region(tmp_path):
    batches = segment()
    data = b"".join(batches[:2]) + bytes(200) + b"".join(batches[2:])
    found = check_log(tmp_path, data)
    assert where(found) == [("invalid_size", 218, 200)]
    assert found[0].batches_after == 3


def test_v2_size_below_the_61_byte_header_resyncs(tmp_path):
    batches = segment()
    found = check_log(tmp_path, replace(batches, 2, patch(batches[2], 8, ">i", 20, crc=False)))
    assert where(found) == [("invalid_size", 218, BATCH)]
    assert found[0].batches_after == 2


def test_legacy_size_below_14_resyncs(tmp_path):
    msgs = [v1(i) for i in range(5)]
    found = check_log(tmp_path, replace(msgs, 2, patch(msgs[2], 8, ">i", 3, crc=False)))
    assert where(found) == [("invalid_size", 2 * V1, V1)]
    assert found[0].batches_after == 2


def test_legacy_v1_size_below_the_v1_overhead_is_invalid_size(tmp_path):
    msgs = [v1(i) for i in range(5)]
    found = check_log(tmp_path, replace(msgs, 2, patch(msgs[2], 8, ">i", 15, crc=False)))
    assert where(found) == [("invalid_size", 2 * V1, V1)]
    assert found[0].batches_after == 2


@pytest.mark.parametrize("size", [0x7FFFFFFF, 100_000])
def test_huge_size_mid_file_resyncs(tmp_path, size):
    batches = segment()
    found = check_log(tmp_path, replace(batches, 1, patch(batches[1], 8, ">i", size, crc=False)))
    assert where(found) == [("invalid_size", 109, BATCH)]
    assert found[0].batches_after == 3
    assert "points past the end of the file" in found[0].message


def test_huge_size_in_the_last_batch_is_a_partial_batch(tmp_path):
    batches = segment()
    found = check_log(tmp_path, replace(batches, 4, patch(batches[4], 8, ">i", 0x7FFFFFFF, crc=False)))
    assert where(found) == [("partial_batch", 436, BATCH)]


@pytest.mark.parametrize("cut", [1, 10, BATCH - 18])
def test_partial_last_batch(tmp_path, cut):
    data = b"".join(segment())[:-cut]
    found = check_log(tmp_path, data)
    assert where(found) == [("partial_batch", 436, BATCH - cut)]


@pytest.mark.parametrize("tail", [b"\x01", b"\x00" * 16 + b"\x01", b"\xff" * 17, v2(15)[:17]])
def test_short_nonzero_tail_is_trailing_bytes(tmp_path, tail):
    found = check_log(tmp_path, b"".join(segment()) + tail)
    assert where(found) == [("trailing_bytes", 545, len(tail))]


def test_an_18_byte_tail_is_a_partial_batch(tmp_path):
    found = check_log(tmp_path, b"".join(segment()) + v2(15)[:18])
    assert where(found) == [("partial_batch", 545, 18)]


@pytest.mark.parametrize("zeros", [1, 17, 18, 4096, 100_000])
def test_zero_filled_preallocated_tail(tmp_path, zeros):
    found = check_log(tmp_path, b"".join(segment()) + bytes(zeros))
    assert where(found) == [("trailing_zeros", 545, zeros)]


def test_magic_3_with_a_valid_crc_is_unknown_magic(tmp_path):
    batches = segment()
    # the v2 CRC starts after the magic byte: the batch stays CRC-valid
    bad = flip(batches[2], 16, 0x02 ^ 0x03)
    assert fix_crc(bad) == bad
    found = check_log(tmp_path, replace(batches, 2, bad))
    assert where(found) == [("unknown_magic", 218 + 16, 1)]
    f = found[0]
    assert (f.batch_index, f.first_offset, f.last_offset, f.found) == (2, 6, 8, 3)


def test_negative_magic_mid_file_resyncs(tmp_path):
    batches = segment()
    found = check_log(tmp_path, replace(batches, 2, patch(batches[2], 16, ">b", -1, crc=False)))
    assert where(found) == [("unknown_magic", 218, BATCH)]
    assert found[0].batches_after == 2


def test_negative_magic_in_the_last_batch(tmp_path):
    batches = segment()
    found = check_log(tmp_path, replace(batches, 4, patch(batches[4], 16, ">b", -128, crc=False)))
    assert where(found) == [("unknown_magic", 436, BATCH)]


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_v2_codec_5_to_7_is_unknown_codec(tmp_path, codec):
    batches = segment()
    found = check_log(tmp_path, replace(batches, 2, patch(batches[2], 21, ">h", codec)))
    assert where(found) == [("unknown_codec", 218 + 22, 1)]  # the low byte of the attributes
    assert (found[0].batch_index, found[0].found) == (2, codec)


def test_zstd_in_a_v1_wrapper_is_unknown_codec(tmp_path):
    inner = b"".join(encode_message(i - 3, 1, TS + i, b"k", b"v") for i in range(3, 6))
    data = v1(0) + v1(1) + v1(2) + wrapper(inner, 5, codec=Codec.ZSTD) + v1(6)
    for deep in (False, True):
        found = check_log(tmp_path / str(deep), data, deep=deep)
        assert where(found) == [("unknown_codec", 3 * V1 + 17, 1)]
        assert (found[0].batch_index, found[0].first_offset, found[0].found) == (3, 5, 4)


def test_record_count_above_last_offset_delta_plus_one(tmp_path):
    batches = segment()
    found = check_log(tmp_path, replace(batches, 2, patch(batches[2], 23, ">i", 1)))
    assert where(found) == [("offset_delta_mismatch", 218 + 57, 4)]
    assert (found[0].expected, found[0].found) == ("0..2", 3)


def test_negative_last_offset_delta(tmp_path):
    batches = segment()
    bad = patch(patch(batches[2], 23, ">i", -1), 57, ">i", 0)
    found = check_log(tmp_path, replace(batches, 2, bad))
    assert where(found) == [("offset_delta_mismatch", 218 + 23, 4)]


# --------------------------------------------------------------------------- offsets, timestamps, producer fields


def test_offsets_not_monotonic_within_a_segment(tmp_path):
    batches = segment()
    found = check_log(tmp_path, replace(batches, 2, batches[1]))
    assert where(found) == [("offset_not_monotonic", 218, 8)]
    f = found[0]
    assert (f.batch_index, f.first_offset, f.last_offset, f.expected, f.found) == (2, 3, 5, "> 5", 3)


def test_offsets_not_monotonic_across_two_segments(tmp_path):
    part = write_dir(tmp_path, {
        LOG: b"".join(segment()),
        INDEX: b"",
        "00000000000000000012.log": b"".join(segment(2, first=12)),
        "00000000000000000012.index": b"",
    })
    found = check(part)
    assert where_in(found) == [("00000000000000000012.log", "offset_not_monotonic", 0, 8)]
    assert (found[0].batch_index, found[0].first_offset, found[0].expected) == (0, 12, "> 14")


def test_offset_below_the_file_name_base(tmp_path):
    found = check_log(tmp_path, b"".join(segment()), name="00000000000000000010.log")
    assert where(found) == [("offset_below_base", 0, 8), ("offset_below_base", 109, 8),
                            ("offset_below_base", 218, 8), ("offset_below_base", 327, 8)]
    assert [f.first_offset for f in found] == [0, 3, 6, 9]
    assert found[0].expected == ">= 10"


def test_legacy_wrapper_below_the_file_name_base(tmp_path):
    data = encode_legacy(records(3), magic=1, codec=Codec.GZIP) + v1(6)
    wrapper_size = len(data) - V1
    found = check_log(tmp_path, data, name="00000000000000000010.log")
    assert where(found) == [("offset_below_base", 0, 8), ("offset_below_base", wrapper_size, 8)]


def test_offset_more_than_int32_above_the_base(tmp_path):
    found = check_log(tmp_path, v2(0) + v2(2**31 - 1))
    assert where(found) == [("offset_overflow", 109, 8)]
    assert (found[0].first_offset, found[0].last_offset) == (2**31 - 1, 2**31 + 1)


@pytest.mark.parametrize("field_at, value, position, length", [
    (27, -5, 27, 16),  # baseTimestamp below -1
    (35, -2, 27, 16),  # maxTimestamp below -1
    (35, TS + 5, 35, 8),  # CreateTime maxTimestamp below baseTimestamp (TS + 6)
])
def test_v2_timestamps(tmp_path, field_at, value, position, length):
    batches = segment()
    found = check_log(tmp_path, replace(batches, 2, patch(batches[2], field_at, ">q", value)))
    assert where(found) == [("timestamp_invalid", 218 + position, length)]
    assert found[0].batch_index == 2


def test_v1_timestamp_below_minus_one(tmp_path):
    data = v1(0) + encode_message(1, 1, -7, b"k", b"v") + v1(2)
    found = check_log(tmp_path, data)
    assert where(found) == [("timestamp_invalid", V1 + 18, 8)]
    assert found[0].found == -7


@pytest.mark.parametrize("kw", [
    {"producer_id": -1, "is_transactional": True},
    {"producer_id": -5, "producer_epoch": 0, "base_sequence": 0},
    {"producer_id": 7, "producer_epoch": -2, "base_sequence": 0},
    {"producer_id": 7, "producer_epoch": 0, "base_sequence": -3},
])
def test_producer_fields_that_cannot_go_together(tmp_path, kw):
    batches = segment()
    found = check_log(tmp_path, replace(batches, 2, v2(6, **kw)))
    assert where(found) == [("producer_fields_invalid", 218 + 43, 14)]


@pytest.mark.parametrize("marker", [ControlType.COMMIT, ControlType.ABORT])
def test_transaction_marker_in_a_non_transactional_control_batch(tmp_path, marker):
    marker_batch = control(6, marker, encode_end_txn_marker(3), producer_id=4, producer_epoch=0)
    found = check_log(tmp_path, b"".join(segment(2)) + marker_batch + v2(7))
    assert where(found) == [("control_not_transactional", 218 + 21, 2)]
    assert found[0].batch_index == 2


def test_legitimate_edge_cases_are_not_findings(tmp_path):
    """Compaction leftovers, LogAppendTime, delete horizons, KRaft control batches, broker-written
    producer fields, offset gaps, sequence wrap, txn markers (§4.1, §17 B): nothing to report."""
    data = b"".join([
        encode_batch([], base_offset=0, last_offset_delta=2),  # emptied by the cleaner
        encode_batch(records(3), log_append_time=TS - 50),  # maxTimestamp below baseTimestamp is fine
        encode_batch(records(6), delete_horizon_ms=TS + 10_000),
        control(9, ControlType.LEADER_CHANGE, encode_leader_change(1, [1])),
        control(10, ControlType.SNAPSHOT_HEADER, encode_snapshot_header(TS)),
        encode_batch(records(11, 2), producer_id=-1, producer_epoch=-1, base_sequence=0),  # group coordinator
        encode_batch(simple(20, 25)),  # compacted gaps
        encode_batch(records(30), producer_id=9, producer_epoch=1, base_sequence=2147483647),
        encode_batch(records(40), producer_id=9, producer_epoch=1, base_sequence=2, is_transactional=True),
        control(43, ControlType.COMMIT, encode_end_txn_marker(0), producer_id=9, producer_epoch=1, is_transactional=True),
    ])
    assert check_log(tmp_path / "a", data) == []
    assert check_log(tmp_path / "b", data, deep=True) == []
    # legacy: v1 and v0 wrappers as brokers write them, a v0 tombstone, a LogAppendTime v1 wrapper
    legacy = b"".join([
        encode_legacy(records(0), magic=1, codec=Codec.GZIP),
        encode_message(3, 0, -1, b"k", None),
        encode_legacy(records(4, 2), magic=0, codec=Codec.SNAPPY),
        encode_legacy(records(6), magic=1, codec=Codec.LZ4, log_append_time=TS),
    ])
    assert check_log(tmp_path / "c", legacy, deep=True) == []


# --------------------------------------------------------------------------- deep (records)


class Damaged(NamedTuple):
    """A segment whose batch ``batch`` (at ``start``, ``size`` bytes) is damaged inside its records."""

    data: bytes
    kind: str
    position: int | None
    """Where the finding starts; None: anywhere inside the batch."""
    batch: int
    start: int
    size: int
    first: int
    last: int


def in_batch_2(bad: bytes, kind: str, at: int | None) -> Damaged:
    """segment() with batch 2 (offsets 6-8, at 218) replaced by ``bad``, damaged at its byte ``at``."""
    return Damaged(replace(segment(), 2, bad), kind, None if at is None else 218 + at, 2, 218, len(bad), 6, 8)


def simple(*offsets: int) -> list[RecordSpec]:
    return [RecordSpec(o, TS, b"k", b"v") for o in offsets]


def _count_too_small() -> Damaged:
    # two records are decoded, the third is left over at 61 + 2 * 16
    return in_batch_2(patch(v2(6), 57, ">i", 2), "record_count_mismatch", 93)


def _count_too_large() -> Damaged:
    # "premature EOF": the missing third record has no position of its own
    short = encode_batch(records(6, 2), last_offset_delta=2)
    return in_batch_2(patch(short, 57, ">i", 3), "record_count_mismatch", None)


def _corrupt_gzip() -> Damaged:
    return in_batch_2(fix_crc(flip(v2(6, codec=Codec.GZIP), 61 + 20)), "decompression_failed", 61)


def _long_varint() -> Damaged:
    # the second record's length varint: five bytes with the high bit set (§17 B.17)
    second = 61 + len(encode_record(0, 0, b"k0", b"value-0"))
    bad = bytearray(v2(6))
    bad[second : second + 5] = b"\xff" * 5
    return in_batch_2(fix_crc(bad), "invalid_record", second)


def _offset_delta_beyond_last() -> Damaged:
    return in_batch_2(encode_batch(simple(6, 7, 12), last_offset_delta=2), "record_offset_invalid", 0)


def _offset_deltas_not_increasing() -> Damaged:
    return in_batch_2(encode_batch(simple(6, 8, 7), last_offset_delta=2), "record_offset_invalid", 0)


def _record_timestamp_above_max() -> Damaged:
    # maxTimestamp TS + 7 is still >= baseTimestamp TS + 6: only the records show it is wrong
    return in_batch_2(patch(v2(6), 35, ">q", TS + 7), "record_timestamp_invalid", 0)


def _legacy(w: bytes, kind: str, position_in_wrapper: int, first: int = 5) -> Damaged:
    data = v1(0) + v1(1) + v1(2) + w + v1(6) + v1(7)
    return Damaged(data, kind, 3 * V1 + position_in_wrapper, 3, 3 * V1, len(w), first, first)


def _inner_crc() -> Damaged:
    inner = [bytearray(encode_message(i, 1, TS + i, b"k", b"v")) for i in range(3)]
    inner[1][13] ^= 0xFF  # the inner message's stored CRC; the outer CRC covers the compressed bytes
    return _legacy(wrapper(b"".join(map(bytes, inner)), 5), "inner_crc_mismatch", 0)


def _null_wrapper() -> Damaged:
    return _legacy(encode_message(5, 1, TS, None, None, attributes=Codec.GZIP), "invalid_wrapper", 0)


def _nested_wrapper() -> Damaged:
    inner = wrapper(b"".join(encode_message(i, 1, TS + i, b"k", b"v") for i in range(3)), 2)
    w = wrapper(inner, 5)
    return _legacy(w, "invalid_wrapper", len(w) - len(compress(Codec.GZIP, inner, magic=1)))


def _empty_wrapper() -> Damaged:
    w = wrapper(b"", 5)
    return _legacy(w, "invalid_wrapper", len(w) - len(compress(Codec.GZIP, b"", magic=1)))


def _inner_size_below_14() -> Damaged:
    inner = bytearray(b"".join(encode_message(i, 1, TS + i, b"k", b"v") for i in range(3)))
    struct.pack_into(">i", inner, V1 + 8, 3)
    w = wrapper(bytes(inner), 5)
    return _legacy(w, "invalid_wrapper", len(w) - len(compress(Codec.GZIP, bytes(inner), magic=1)))


def _wrapper_offset_below_last_inner() -> Damaged:
    # v1 wrapper offset 4 (not 0) below the last inner relative offset 5 (§17 C.25)
    w = wrapper(b"".join(encode_message(i, 1, TS + i, b"k", b"v") for i in (0, 1, 5)), 4)
    return _legacy(w, "invalid_wrapper", 0, first=4)


def _v0_wrapper_offset_not_last_inner() -> Damaged:
    data = b"".join(encode_message(i, 0, -1, b"k", b"v") for i in range(3))  # 28 bytes each
    w = wrapper(b"".join(encode_message(i, 0, -1, b"k", b"v") for i in range(3, 5)), 5, magic=0)
    tail = encode_message(6, 0, -1, b"k", b"v")
    return Damaged(data + w + tail, "invalid_wrapper", len(data), 3, len(data), len(w), 5, 5)


def _inner_offsets_not_increasing() -> Damaged:
    w = wrapper(b"".join(encode_message(i, 1, TS + i, b"k", b"v") for i in (0, 2, 1)), 5)
    return _legacy(w, "record_offset_invalid", 0)


def _control(type_id: int, value: bytes | None, key: bytes | None = None) -> Damaged:
    batch = control(6, type_id, value, key=key, is_transactional=True, producer_id=4, producer_epoch=0)
    return Damaged(b"".join(segment(2)) + batch + v2(7), "invalid_control_record", 218, 2, 218, len(batch), 6, 6)


DEEP_CASES: dict[str, Callable[[], Damaged]] = {
    "count_too_small": _count_too_small,
    "count_too_large": _count_too_large,
    "corrupt_gzip_payload": _corrupt_gzip,
    "varint_too_long": _long_varint,
    "offset_delta_beyond_last": _offset_delta_beyond_last,
    "offset_deltas_not_increasing": _offset_deltas_not_increasing,
    "record_timestamp_above_max": _record_timestamp_above_max,
    "inner_crc": _inner_crc,
    "null_wrapper": _null_wrapper,
    "nested_wrapper": _nested_wrapper,
    "empty_wrapper": _empty_wrapper,
    "inner_size_below_14": _inner_size_below_14,
    "wrapper_offset_below_last_inner": _wrapper_offset_below_last_inner,
    "v0_wrapper_offset_not_last_inner": _v0_wrapper_offset_not_last_inner,
    "inner_offsets_not_increasing": _inner_offsets_not_increasing,
    "abort_marker_value_too_short": lambda: _control(ControlType.ABORT, b"\x00\x00\x01"),
    "control_key_too_short": lambda: _control(ControlType.ABORT, encode_end_txn_marker(1), key=b"\x00"),
    "commit_marker_null_value": lambda: _control(ControlType.COMMIT, None),
    "snapshot_header_truncated": lambda: _control(ControlType.SNAPSHOT_HEADER, b"\x00"),
}


@pytest.mark.parametrize("name", DEEP_CASES)
def test_deep_finds_what_shallow_cannot(tmp_path, name):
    case = DEEP_CASES[name]()
    assert check_log(tmp_path / "shallow", case.data) == []
    found = check_log(tmp_path / "deep", case.data, deep=True)
    assert [f.kind for f in found] == [case.kind]
    f = found[0]
    if case.position is None:
        assert case.start <= f.position <= case.start + case.size
    else:
        assert f.position == case.position
    assert (f.batch_index, f.first_offset, f.last_offset) == (case.batch, case.first, case.last)


#: Deep findings located inside the batch rather than at its start.
INSIDE = ["count_too_small", "count_too_large", "corrupt_gzip_payload", "varint_too_long",
          "nested_wrapper", "empty_wrapper", "inner_size_below_14"]


@pytest.mark.parametrize("name", sorted(set(DEEP_CASES) - set(INSIDE)))
def test_deep_finding_at_the_batch_start_spans_the_batch(tmp_path, name):
    case = DEEP_CASES[name]()
    (f,) = check_log(tmp_path, case.data, deep=True)
    assert (f.position, f.length) == (case.start, case.size)


@pytest.mark.parametrize("name", INSIDE)
def test_deep_finding_inside_a_batch_stays_inside_it(tmp_path, name):
    case = DEEP_CASES[name]()
    (f,) = check_log(tmp_path, case.data, deep=True)
    end = case.start + case.size
    assert case.start <= f.position < end
    assert f.position + f.length == end


def test_decompression_bomb_is_capped(tmp_path):
    bomb = encode_batch([RecordSpec(6, TS + 6, b"k", bytes(4 << 20))], codec=Codec.GZIP)
    batches = segment()
    data = replace(batches, 2, bomb)
    assert check_log(tmp_path / "shallow", data, max_decompressed=1 << 20) == []
    assert check_log(tmp_path / "uncapped", data, deep=True) == []
    found = check_log(tmp_path / "deep", data, deep=True, max_decompressed=1 << 20)
    assert [(f.kind, f.position) for f in found] == [("decompressed_too_large", 218 + 61)]
    assert (found[0].batch_index, found[0].first_offset) == (2, 6)


def test_negative_record_count(tmp_path):
    batches = segment()
    data = replace(batches, 2, patch(batches[2], 57, ">i", -1))
    assert where(check_log(tmp_path / "s", data)) == [("offset_delta_mismatch", 218 + 57, 4)]
    found = check_log(tmp_path / "d", data, deep=True)
    assert [(f.kind, f.position) for f in found] == [("offset_delta_mismatch", 275), ("record_count_mismatch", 275)]


# --------------------------------------------------------------------------- .index / .timeindex (§8)


def indexed_partition(root: Path, index: bytes | None = None, timeindex: bytes | None = None) -> Path:
    batches = segment()
    good_index, good_timeindex = index_files(batches)
    return write_dir(root, {
        LOG: b"".join(batches),
        INDEX: good_index if index is None else index,
        TIMEINDEX: good_timeindex if timeindex is None else timeindex,
    })


def test_the_rebuilt_indexes_of_the_test_segment():
    index, timeindex = index_files(segment())
    assert index == encode_offset_index([(5, 109), (8, 218), (11, 327), (14, 436)])
    assert timeindex == encode_time_index([(TS + 5, 5), (TS + 8, 8), (TS + 11, 11), (TS + 14, 14)])


@pytest.mark.parametrize("entries, extra, expected", [
    ([(5, 109), (8, 218), (14, 545)], b"", [("index_entry_past_end", 16, 8)]),
    ([(5, 109), (8, 218), (14, 4000)], b"", [("index_entry_past_end", 16, 8)]),
    ([(5, 109), (8, 219)], b"", [("index_entry_not_batch_start", 8, 8)]),
    ([(5, 109), (7, 218)], b"", [("index_offset_mismatch", 8, 8)]),
    ([(2, 109)], b"", [("index_offset_mismatch", 0, 8)]),  # an earlier batch's offset is no follower entry
    ([(5, 109), (11, 327), (8, 218), (14, 436)], b"", [("index_not_monotonic", 16, 8)]),
    ([(5, 109), (8, 218)], b"\x00\x00\x00\x01", [("index_sanity_failed", 0, 20)]),
    ([(5, 109), (8, 218)], bytes(24), [("preallocated_index_tail", 16, 24)]),
])
def test_offset_index(tmp_path, entries, extra, expected):
    found = check(indexed_partition(tmp_path, index=encode_offset_index(entries) + extra))
    assert where(found) == expected
    assert all(Path(f.file).name == INDEX for f in found)


def test_offset_index_last_offset_below_base_fails_the_sanity_check(tmp_path):
    found = check(indexed_partition(tmp_path, index=encode_offset_index([(5, 109), (-1, 218)])))
    assert where(found) == [("index_sanity_failed", 0, 16), ("index_not_monotonic", 8, 8), ("index_offset_mismatch", 8, 8)]


def test_follower_multi_batch_index_entries_are_not_reported(tmp_path):
    # a follower appends a chunk of batches: position of its first batch, last offset of its last (§17 E.42)
    index = encode_offset_index([(8, 109), (14, 327)])
    timeindex = encode_time_index([(TS + 8, 8), (TS + 14, 14)])
    assert check(indexed_partition(tmp_path, index=index, timeindex=timeindex)) == []


@pytest.mark.parametrize("entries, extra, expected", [
    ([(TS + 5, 5), (TS + 11, 11), (TS + 8, 8), (TS + 14, 14)], b"", [("timeindex_not_monotonic", 24, 12)]),
    # offset 7 is a record inside the batch 6-8 (what brokers <= 3.7 wrote: information), but
    # its timestamp is not the largest up to that batch (TS + 8)
    ([(TS + 5, 5), (TS + 7, 7), (TS + 14, 14)], b"", [("timeindex_record_offset", 12, 12), ("timeindex_timestamp_mismatch", 12, 12)]),
    ([(TS + 5, 5), (TS + 9, 8), (TS + 14, 14)], b"", [("timeindex_timestamp_mismatch", 12, 12)]),
    ([(TS + 5, 5), (TS + 14, 14), (TS + 20, 20)], b"", [("timeindex_entry_past_end", 24, 12)]),
    ([(TS + 5, 5), (TS + 14, 14)], b"\x01", [("timeindex_sanity_failed", 0, 25)]),
])
def test_time_index(tmp_path, entries, extra, expected):
    found = check(indexed_partition(tmp_path, timeindex=encode_time_index(entries) + extra))
    assert where(found) == expected
    assert all(Path(f.file).name == TIMEINDEX for f in found)


def test_untrimmed_indexes_of_a_live_active_segment_are_only_info(tmp_path):
    index, timeindex = index_files(segment())
    found = check(indexed_partition(tmp_path, index=index + bytes(80), timeindex=timeindex + bytes(120)))
    assert where_in(found) == [(INDEX, "preallocated_index_tail", 32, 80), (TIMEINDEX, "preallocated_index_tail", 48, 120)]


def test_all_zero_indexes_of_a_fresh_active_segment_are_only_info(tmp_path):
    found = check(indexed_partition(tmp_path, index=bytes(80), timeindex=bytes(120)))
    assert where_in(found) == [(INDEX, "preallocated_index_tail", 0, 80), (TIMEINDEX, "preallocated_index_tail", 0, 120)]


def test_record_level_time_index_offsets_of_old_brokers_do_not_fail(tmp_path):
    batches = segment()
    # batch 2 (offsets 6-8): the max timestamp TS + 8 is on record 7, not on the last record
    batches[2] = encode_batch([RecordSpec(6, TS + 6, b"k", b"v"), RecordSpec(7, TS + 8, b"k", b"v"),
                               RecordSpec(8, TS + 7, b"k", b"v")])
    timeindex = encode_time_index([(TS + 5, 5), (TS + 8, 7), (TS + 14, 14)])
    part = write_dir(tmp_path, {LOG: b"".join(batches), INDEX: b"", TIMEINDEX: timeindex})
    assert failing(check(part)) == []


# --------------------------------------------------------------------------- .txnindex (§9)


def txn_segment(first: int = 0) -> bytes:
    """Two aborted transactions: producer 7 at offsets first..first+2 (ABORT at +3), producer 8
    at +4..+5 (ABORT at +6)."""
    def data(pid: int, start: int, n: int) -> bytes:
        return v2(start, n, producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)

    def abort(pid: int, offset: int) -> bytes:
        marker = encode_end_txn_marker(5)
        return control(offset, ControlType.ABORT, marker, producer_id=pid, producer_epoch=0, is_transactional=True)

    return data(7, first, 3) + abort(7, first + 3) + data(8, first + 4, 2) + abort(8, first + 6)


GOOD_TXNS = [AbortedTxn(0, 7, 0, 3, 0), AbortedTxn(0, 8, 4, 6, 4)]


def txn_partition(root: Path, txnindex: bytes, first: int = 0) -> Path:
    name = f"{first:020d}"
    return write_dir(root, {f"{name}.log": txn_segment(first), f"{name}.index": b"", f"{name}.txnindex": txnindex})


@pytest.mark.parametrize("txnindex, expected", [
    (encode_txn_index(GOOD_TXNS), []),
    # a damaged entry both points at no marker and leaves producer 8's real abort without its entry
    (encode_txn_index([GOOD_TXNS[0], AbortedTxn(0, 8, 4, 5, 4)]), [("txnindex_no_abort_marker", 34, 34), ("txnindex_missing_entry", None, None)]),
    (encode_txn_index([GOOD_TXNS[0], AbortedTxn(0, 9, 4, 6, 4)]), [("txnindex_no_abort_marker", 34, 34), ("txnindex_missing_entry", None, None)]),
    (encode_txn_index([GOOD_TXNS[0], AbortedTxn(1, 8, 4, 6, 4)]), [("txnindex_invalid", 34, 34)]),
    (encode_txn_index(GOOD_TXNS) + bytes(10), [("txnindex_invalid", 68, 10)]),
])
def test_txn_index(tmp_path, txnindex, expected):
    found = check(txn_partition(tmp_path, txnindex))
    assert where(found) == expected
    assert all(Path(f.file).name == TXNINDEX for f in found)


def test_txn_index_entry_below_the_segment_base(tmp_path):
    # the segment starts at offset 10; producer 7's entry still says lastOffset 3
    txns = encode_txn_index([AbortedTxn(0, 7, 0, 3, 0), AbortedTxn(0, 8, 14, 16, 14)])
    found = check(txn_partition(tmp_path, txns, first=10))
    # (and producer 7's abort at 13, which the segment holds whole, has no entry of its own)
    assert where(found) == [("txnindex_below_base", 0, 34), ("txnindex_missing_entry", None, None)]


def test_time_index_offset_in_no_batch(tmp_path):
    # offsets 0-2 and 10-12: a time index entry for offset 5 names no batch at all
    data = v2(0) + v2(10)
    found = check(write_dir(tmp_path, {LOG: data, INDEX: b"", TIMEINDEX: encode_time_index([(TS + 5, 5)])}))
    assert where(found) == [("timeindex_entry_not_found", 0, 12)]


def test_abort_marker_without_its_txn_index_entry(tmp_path):
    # the segment holds all of producer 8's aborted transaction, the index only producer 7's
    found = check(txn_partition(tmp_path, encode_txn_index(GOOD_TXNS[:1])))
    assert [f.kind for f in found] == ["txnindex_missing_entry"]


# --------------------------------------------------------------------------- producer snapshots (§10)


SNAPSHOT = encode_producer_snapshot([ProducerSnapshotEntry(7, 0, 2, 2, 2, TS + 2, -1, -1)])


@pytest.mark.parametrize("name, data, expected", [
    ("00000000000000000015.snapshot", SNAPSHOT, []),
    ("00000000000000000015.snapshot", flip(SNAPSHOT, 20, 0x01), [("snapshot_crc_mismatch", 2, 4)]),
    ("00000000000000000015.snapshot", SNAPSHOT + b"\x00", [("snapshot_crc_mismatch", 2, 4)]),
    ("00000000000000000015.snapshot", b"\x00\x02" + SNAPSHOT[2:], [("snapshot_invalid", 0, None)]),
    ("00000000000000000015.snapshot", b"", [("snapshot_invalid", 0, None)]),
    ("00000000000000000015.snapshot", SNAPSHOT[:30], [("snapshot_invalid", 10, None)]),
    ("00000000000000000016.snapshot", SNAPSHOT, [("snapshot_beyond_log_end", None, None)]),
])
def test_producer_snapshot(tmp_path, name, data, expected):
    found = check(write_dir(tmp_path, {LOG: b"".join(segment()), INDEX: b"", name: data}))
    assert where(found) == expected
    assert all(Path(f.file).name == name for f in found)


# --------------------------------------------------------------------------- checkpoints (§11)


def epoch_partition(root: Path, entries: list[tuple[int, int]]) -> Path:
    return write_dir(root, {
        LOG: b"".join(segment(epochs=(0, 0, 1, 1, 1))),
        INDEX: b"",
        "leader-epoch-checkpoint": encode_leader_epoch_checkpoint([EpochEntry(*e) for e in entries]),
    })


@pytest.mark.parametrize("entries, expected", [
    ([(0, 0), (1, 6)], 0),
    ([(0, 0), (1, 6), (2, 15)], 0),  # a new leader that has not appended yet
    ([(0, 0), (1, 3)], 1),  # epoch 1's first batch is at offset 6
    ([(0, 0)], 1),  # no entry for epoch 1
    ([(1, 6), (0, 0)], 1),  # entries not increasing
])
def test_leader_epoch_checkpoint_against_the_batches(tmp_path, entries, expected):
    found = check(epoch_partition(tmp_path, entries))
    assert where(found) == [("leader_epoch_mismatch", None, None)] * expected
    assert all(Path(f.file).name == "leader-epoch-checkpoint" for f in found)


@pytest.mark.parametrize("name, text, position", [
    ("leader-epoch-checkpoint", "0\n2\n0 0\n", 2),  # count line says 2, one entry
    ("leader-epoch-checkpoint", "0\n1\n0 x\n", 4),
    ("leader-epoch-checkpoint", "1\n0\n", 0),
    ("partition.metadata", "version: 0\ntopic_id: nope\n", 11),
    ("partition.metadata", "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n", 11),  # the all-zero uuid
])
def test_malformed_partition_checkpoints(tmp_path, name, text, position):
    found = check(write_dir(tmp_path, {LOG: b"".join(segment()), INDEX: b"", name: text}))
    assert where_in(found) == [(name, "checkpoint_invalid", position, None)]


@pytest.mark.parametrize("name, text, position", [
    ("recovery-point-offset-checkpoint", "0\n1\nt 0\n", 4),
    ("replication-offset-checkpoint", "0\n1\nt x 5\n", 4),
    ("log-start-offset-checkpoint", "7\n0\n", 0),
    ("quorum-state", "not json", 0),
    ("meta.properties", "version=1\nnode.id=\\uZZZZ\n", 10),
])
def test_malformed_log_dir_checkpoints(tmp_path, name, text, position):
    (tmp_path / name).write_text(text)
    found = check(tmp_path)
    assert where_in(found) == [(name, "checkpoint_invalid", position, None)]


def test_kraft_checkpoint_is_verified_as_a_batch_sequence(tmp_path):
    data = (FIXTURES / "bootstrap.checkpoint").read_bytes()
    (tmp_path / "bootstrap.checkpoint").write_bytes(data)
    assert check(tmp_path) == []
    first = next(iter(SegmentWalker(data)))[0]
    (tmp_path / "bootstrap.checkpoint").write_bytes(flip(data, first.size - 1))
    assert where(check(tmp_path)) == [("crc_mismatch", 0, first.size)]


# --------------------------------------------------------------------------- expected/found on side-file findings


BAD_CRC_SNAPSHOT = flip(SNAPSHOT, 20, 0x01)


def _crc_snapshot(root: Path) -> Path:
    return write_dir(root, {LOG: b"".join(segment()), INDEX: b"", "00000000000000000015.snapshot": BAD_CRC_SNAPSHOT})


def _index(entries: list[tuple[int, int]]) -> Callable[[Path], Path]:
    return lambda root: indexed_partition(root, index=encode_offset_index(entries))


def _timeindex(entries: list[tuple[int, int]]) -> Callable[[Path], Path]:
    return lambda root: indexed_partition(root, timeindex=encode_time_index(entries))


#: kind: (partition builder, expected, found)
SIDE_FILE_VALUES: dict[str, tuple[Callable[[Path], Path], object, object]] = {
    "index_entry_past_end": (_index([(14, 545)]), "< 545", 545),
    "index_entry_not_batch_start": (_index([(8, 219)]), "a batch start", 219),
    "index_offset_mismatch": (_index([(7, 218)]), 8, 7),
    "timeindex_timestamp_mismatch": (_timeindex([(TS + 9, 8)]), TS + 8, TS + 9),
    "timeindex_entry_past_end": (_timeindex([(TS + 20, 20)]), "<= 14", 20),
    "txnindex_no_abort_marker": (lambda root: txn_partition(root, encode_txn_index([GOOD_TXNS[0], AbortedTxn(0, 8, 4, 5, 4)])),
                                 "an ABORT marker", 5),
    "snapshot_crc_mismatch": (_crc_snapshot, crc32c(BAD_CRC_SNAPSHOT[6:]), struct.unpack_from(">I", SNAPSHOT, 2)[0]),
    "leader_epoch_mismatch": (lambda root: epoch_partition(root, [(0, 0), (1, 3)]), 6, 3),
}


@pytest.mark.parametrize("kind", SIDE_FILE_VALUES)
def test_side_file_findings_carry_expected_and_found(tmp_path, kind):
    build, expected, found = SIDE_FILE_VALUES[kind]
    (f, *_others) = [f for f in check(build(tmp_path)) if f.kind == kind]
    assert f.kind == kind
    assert (f.batch_index, f.first_offset, f.last_offset) == (None, None, None)
    assert (f.expected, f.found) == (expected, found)


# --------------------------------------------------------------------------- files present or missing


def test_orphan_index_files(tmp_path):
    index, timeindex = index_files(segment())
    found = check(write_dir(tmp_path, {INDEX: index, TIMEINDEX: timeindex, TXNINDEX: b""}))
    assert where_in(found) == [(INDEX, "orphan_index", None, None), (TIMEINDEX, "orphan_index", None, None),
                               (TXNINDEX, "orphan_index", None, None)]


def test_missing_index_is_informational(tmp_path):
    _, timeindex = index_files(segment())
    found = check(write_dir(tmp_path, {LOG: b"".join(segment()), TIMEINDEX: timeindex}))
    assert where_in(found) == [(LOG, "index_missing", None, None)]
    assert "index_missing" in INFO_KINDS and "preallocated_index_tail" in INFO_KINDS


@pytest.mark.parametrize("name", [INDEX, TIMEINDEX])
def test_an_index_file_given_alone_is_not_an_orphan(run, tmp_path, name):
    part = indexed_partition(tmp_path)
    assert check(part) == []
    found = check(part / name)
    assert "orphan_index" not in [f.kind for f in found]
    assert run("verify", "-q", str(part / name)).code == 0


def test_a_file_that_cannot_be_read(tmp_path):
    # e.g. a segment deleted by retention between the listing and the read
    found = check(tmp_path / "t-0" / LOG)
    assert where(found) == [("unreadable", None, None)]


def test_every_kind_has_a_test_above():
    """Every kind in KINDS is produced somewhere in this module or in test_verify_hardening.py
    (the kinds of issue 9: files and directories, interrupted repairs)."""
    text = Path(__file__).read_text() + Path(__file__).with_name("test_verify_hardening.py").read_text()
    assert [k for k in KINDS if f'"{k}"' not in text] == []


# --------------------------------------------------------------------------- large segments split across processes


@functools.cache
def large_batches() -> tuple[bytes, ...]:
    """520 one-record batches of 64 KiB: a segment above SPLIT_MIN_BYTES (32 MiB)."""
    value = bytes(range(256)) * 256
    batches = tuple(encode_batch([RecordSpec(i, TS + i, b"k", value)]) for i in range(520))
    assert len(batches[0]) * len(batches) >= SPLIT_MIN_BYTES
    return batches


def spy_on_chunks(monkeypatch) -> list[int]:
    """Record where each chunked scan ended (the segment size when every chunk merged), to make sure
    the split path ran."""
    import kafkatool.verify.segments as verify_segments

    ends: list[int] = []
    scan_chunks = verify_segments.scan_chunks

    def spy(scan, size):
        ends.append(scan_chunks(scan, size))
        return ends[-1]

    monkeypatch.setattr(verify_segments, "scan_chunks", spy)
    return ends


def test_a_large_segment_split_across_workers_gives_the_same_findings(tmp_path, monkeypatch):
    batches = list(large_batches())
    batches[300] = flip(batches[300], 1000)
    batches[400] = patch(batches[400], 0, ">q", 350)  # offsets going backwards
    index, timeindex = index_files(batches[:300])
    part = write_dir(tmp_path, {LOG: b"".join(batches), INDEX: index, TIMEINDEX: timeindex})
    serial = check(part)
    assert where(serial) == [("crc_mismatch", 300 * len(batches[0]), len(batches[0])),
                             ("offset_not_monotonic", 400 * len(batches[0]), 8)]
    ends = spy_on_chunks(monkeypatch)
    assert check(part, workers=2) == serial
    assert ends == [len(batches) * len(batches[0])]


def test_offsets_going_backwards_at_a_chunk_boundary(tmp_path):
    batches = list(large_batches())
    size = len(batches[0])
    k = -(-(size * len(batches) // 2) // size)  # the first batch at or after the middle starts the second chunk
    batches[k] = patch(batches[k], 0, ">q", k - 5)
    part = write_dir(tmp_path, {LOG: b"".join(batches), INDEX: b""})
    serial = check(part)
    assert where(serial) == [("offset_not_monotonic", k * size, 8)]
    assert check(part, workers=2) == serial


# --------------------------------------------------------------------------- the clean and the real fixtures


def test_clean_fixtures_have_no_failing_findings(run):
    for deep in (False, True):
        items = list(verify_paths([str(FIXTURES)], VerifyOptions(deep=deep)))
        assert [f for f in items if isinstance(f, Finding) and f.kind not in INFO_KINDS] == []
        logs = {Path(s.file) for s in items if isinstance(s, FileSummary) and s.kind == "log"}
        assert logs == set(FIXTURES.rglob("*.log")) | set(FIXTURES.rglob("*.checkpoint"))
    assert run("verify", "-q", str(FIXTURES)).code == 0
    assert run("verify", "-q", "--deep", str(FIXTURES)).code == 0


HEALTH_CHECK_LOG = "kaspersorensen__kafka-record-updater/src/test/resources/example-log-health-check.log"


def _real_expectations(real: Path) -> list[tuple[str, int, int]]:
    """The 90 CRC failures SOURCE.md describes: one per message of the health-check log."""
    path = real / HEALTH_CHECK_LOG
    assert "every message fails CRC32" in (real / "kaspersorensen__kafka-record-updater" / "SOURCE.md").read_text()
    walker = SegmentWalker(str(path))
    entries = [(b.position, b.size) for b, _ in walker]
    assert len(entries) == 90 and walker.position == path.stat().st_size
    return [(str(path), pos, size) for pos, size in entries]


@pytest.mark.parametrize("deep", [False, True])
def test_real_fixtures_report_exactly_the_documented_crc_failures(real, deep):
    expected = _real_expectations(real)
    found = check(real, deep=deep)
    bad = [f for f in found if f.kind not in INFO_KINDS]
    assert [(f.file, f.position, f.length) for f in bad] == expected
    assert {f.kind for f in bad} == {"crc_mismatch"}
    assert all(f.batches_after == 0 for f in bad)
    assert [f.batch_index for f in bad] == list(range(90))


def test_real_fixtures_with_two_jobs(real, run):
    expected = _real_expectations(real)
    r = run("verify", "--jobs", "2", "--format", "jsonl", "-q", str(real))
    assert r.code == 1
    objs = [json.loads(line) for line in r.lines]
    findings = [o for o in objs if o["type"] == "finding" and o["kind"] not in INFO_KINDS]
    assert [(o["file"], o["position"], o["length"]) for o in findings] == expected
    assert {o["kind"] for o in findings} == {"crc_mismatch"}
    assert objs[-1]["type"] == "summary" and objs[-1]["failing"] == 90


# --------------------------------------------------------------------------- CLI


def damaged_partition(root: Path) -> Path:
    """t-0: a bad CRC in batch 2 (two good batches follow) and no .index (info)."""
    batches = segment()
    return write_dir(root, {LOG: replace(batches, 2, flip(batches[2], 70, 0x01))})


def test_exit_codes(run, tmp_path):
    assert run("verify", "-q", str(FIXTURES / "v2-none-0")).code == 0
    assert run("verify", "-q", str(damaged_partition(tmp_path))).code == 1
    assert run("verify", "-q", str(tmp_path / "missing")).code == 2
    assert run("verify", "-q", "--fail-on", "crc_mismatch,bogus", str(FIXTURES)).code == 2
    assert run("verify", "-q", "--ignore", "no_such_kind", str(FIXTURES)).code == 2
    assert run("verify", "-q", "--max-rate", "fast", str(FIXTURES)).code == 2


def test_info_kinds_do_not_fail_unless_asked(run, tmp_path):
    part = write_dir(tmp_path, {LOG: b"".join(segment())})  # no .index
    assert run("verify", "-q", str(part)).code == 0
    assert run("verify", "-q", "--fail-on", "index_missing", str(part)).code == 1


def test_fail_on_and_ignore(run, tmp_path):
    part = write_dir(tmp_path, {LOG: b"".join(segment()) + bytes(4096), INDEX: b""})
    assert run("verify", "-q", str(part)).code == 1
    r = run("verify", "-q", "--format", "jsonl", "--ignore", "trailing_zeros", str(part))
    assert r.code == 0
    assert [json.loads(line)["type"] for line in r.lines] == ["summary"]
    r = run("verify", "-q", "--format", "jsonl", "--fail-on", "crc_mismatch", str(part))
    assert r.code == 0
    assert [json.loads(line).get("kind") for line in r.lines] == ["trailing_zeros", None]


def test_jsonl_format(run, tmp_path):
    part = damaged_partition(tmp_path)
    r = run("verify", "-q", "--format", "jsonl", str(part))
    assert r.code == 1
    objs = [json.loads(line) for line in r.lines]
    assert [o["type"] for o in objs] == ["finding", "finding", "summary"]
    keys = {"type", "file", "position", "length", "kind", "batchIndex", "offset", "expected", "found", "message",
            "batchesAfter"}
    assert all(set(o) == keys for o in objs[:2])
    info, crc = objs[:2]
    assert (info["kind"], info["position"], info["offset"], info["batchesAfter"]) == ("index_missing", None, None, None)
    assert crc["file"] == str(part / LOG)
    assert (crc["kind"], crc["position"], crc["length"], crc["batchIndex"]) == ("crc_mismatch", 218, BATCH, 2)
    assert crc["offset"] == {"first": 6, "last": 8}
    assert crc["batchesAfter"] == 2
    assert isinstance(crc["expected"], int) and isinstance(crc["found"], int) and crc["message"]
    summary = objs[2]
    assert (summary["findings"], summary["failing"], summary["kinds"]) == (2, 1, {"crc_mismatch": 1, "index_missing": 1})
    assert summary["files"] == 1 and summary["batches"] == 5 and summary["bytes"] == 5 * BATCH


def test_lines_format(run, tmp_path):
    part = damaged_partition(tmp_path)
    r = run("verify", "-q", "--format", "lines", str(part))
    assert r.code == 1
    assert len(r.lines) == 2
    assert r.lines[0].startswith(f"{part / LOG}: index_missing: ")
    assert r.lines[1].startswith(f"{part / LOG}:218: crc_mismatch: ")
    assert r.lines[1].endswith(" (2 good batches follow)")


def test_text_format_and_summary(run, tmp_path):
    r = run("verify", str(damaged_partition(tmp_path)))
    assert r.code == 1
    assert "crc_mismatch" in r.out and "218" in r.out
    assert "1 finding that fails the check" in r.err


def _timed(run, *args: str) -> tuple[int, float]:
    started = time.monotonic()
    code = run(*args).code
    return code, time.monotonic() - started


def test_max_rate_slows_the_read(run, tmp_path):
    value = bytes(4000)
    data = b"".join(encode_batch([RecordSpec(i, TS + i, b"k", value)]) for i in range(512))
    assert 2_000_000 < len(data) < 2_200_000
    part = write_dir(tmp_path, {LOG: data, INDEX: b""})
    code, fast = _timed(run, "verify", "-q", str(part))
    assert code == 0
    code, slow = _timed(run, "verify", "-q", "--max-rate", "4M", str(part))
    assert code == 0
    assert slow >= 0.3 and slow > fast + 0.2  # 2 MB at 4 MiB/s: about 0.5 s; unthrottled: milliseconds


def test_max_rate_slows_a_segment_of_few_large_batches(run, tmp_path):
    value = bytes(256 << 10)
    data = b"".join(encode_batch([RecordSpec(i, TS + i, b"k", value)]) for i in range(8))
    part = write_dir(tmp_path, {LOG: data, INDEX: b""})
    code, slow = _timed(run, "verify", "-q", "--max-rate", "4M", str(part))
    assert code == 0 and slow >= 0.3


def _tree(root: Path) -> dict[str, tuple]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            st_ = p.stat()
            out[str(p.relative_to(root))] = (st_.st_size if p.is_file() else None, st_.st_mtime_ns)
    out["."] = (None, root.stat().st_mtime_ns)
    return out


def test_verify_never_writes(run, tmp_path):
    batches = segment(epochs=(0, 0, 1, 1, 1))
    index, timeindex = index_files(batches)
    # a .timeindex without its .index: DumpLogSegments would create the .index (§17 E.46)
    write_dir(tmp_path, {LOG: replace(batches, 2, flip(batches[2], 70)), TIMEINDEX: timeindex}, "no-index-0")
    write_dir(tmp_path, {TIMEINDEX: timeindex, INDEX: index + bytes(800)}, "orphans-0")
    write_dir(tmp_path, {
        LOG: b"".join(batches) + bytes(100),
        INDEX: index + bytes(80),
        TIMEINDEX: timeindex + bytes(120),
        TXNINDEX: encode_txn_index([AbortedTxn(0, 7, 0, 3, 0)]),
        "00000000000000000099.snapshot": flip(SNAPSHOT, 20),
        "leader-epoch-checkpoint": "0\n2\n0 0\n",
    }, "t-0")
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 15\n")
    before = _tree(tmp_path)
    for args in ([], ["--deep"], ["--format", "jsonl"], ["--format", "lines"], ["--jobs", "2"], ["--max-rate", "1G"]):
        assert run("verify", "-q", *args, str(tmp_path)).code == 1
    # a .timeindex given alone (its exit code is test_an_index_file_given_alone_is_not_an_orphan's business)
    assert run("verify", "-q", str(tmp_path / "no-index-0" / TIMEINDEX)).code in (0, 1)
    list(verify_paths([str(tmp_path)], VerifyOptions(deep=True)))
    assert _tree(tmp_path) == before


# --------------------------------------------------------------------------- property: every corrupted byte is located


def _property_segment() -> tuple[bytes, list[int]]:
    batches = [
        v2(0),
        v2(3, codec=Codec.GZIP),
        encode_batch([RecordSpec(6, TS + 6, b"k", b"v", headers=[("h", b"x")]), RecordSpec(7, TS + 7, None, None)]),
        v2(8, producer_id=5, producer_epoch=0, base_sequence=0),
        v2(11),
    ]
    starts = [sum(len(b) for b in batches[:k]) for k in range(len(batches))]
    return b"".join(batches), starts


PROPERTY_SEGMENT, PROPERTY_STARTS = _property_segment()
LAST = PROPERTY_STARTS[-1]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """One directory for every hypothesis example (a module-scoped fixture is allowed with @given)."""
    return tmp_path_factory.mktemp("property")


def _field_of(position: int) -> int:
    """The byte's offset inside its batch."""
    start = max(s for s in PROPERTY_STARTS if s <= position)
    return position - start


def _located(work: Path, position: int, mask: int, deep: bool) -> list[Finding]:
    """The findings whose region holds ``position`` after XOR-ing that byte with ``mask``."""
    data = bytearray(PROPERTY_SEGMENT)
    data[position] ^= mask
    path = work / LOG
    path.write_bytes(bytes(data))
    found = check(path, deep=deep)
    return [f for f in found
            if f.position is not None and f.length is not None and f.position <= position < f.position + f.length]


# the partitionLeaderEpoch, bytes 12-15 of a v2 batch, is outside the CRC and unchecked (§4.1, §17 B.24)
EXEMPT = range(12, 16)
BYTES = st.integers(0, len(PROPERTY_SEGMENT) - 1).filter(lambda p: _field_of(p) not in EXEMPT)
FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.xfail(strict=True, reason="verify gap: the v2 baseOffset (batch bytes 0-7) is outside the CRC; "
                   "raising it within the int32 range is reported, if at all, at the NEXT batch "
                   "(offset_not_monotonic there), and in the last batch not at all")
@FUZZ
@given(position=BYTES, mask=st.integers(1, 255), deep=st.booleans())
@example(position=LAST + 7, mask=0x04, deep=False)  # last batch: baseOffset 11 -> 15, a silent gap
@example(position=LAST + 6, mask=0x01, deep=True)  # last batch: baseOffset 11 -> 267, a silent gap
@example(position=7, mask=0x04, deep=True)  # first batch 0 -> 4: blamed on the second batch
def test_a_corrupted_byte_is_inside_a_reported_region(work, position, mask, deep):
    assert _located(work, position, mask, deep)


@FUZZ
@given(position=BYTES.filter(lambda p: _field_of(p) >= 8), mask=st.integers(1, 255), deep=st.booleans())
def test_a_corrupted_byte_after_the_base_offset_is_inside_a_reported_region(work, position, mask, deep):
    """The property above without the baseOffset field, kept passing while the gap stands."""
    assert _located(work, position, mask, deep)


def test_the_exempt_partition_leader_epoch_is_really_unchecked(work):
    position = PROPERTY_STARTS[2] + 13
    assert _field_of(position) in EXEMPT
    assert _located(work, position, 0xFF, True) == []
    assert check(work / LOG, deep=True) == []
