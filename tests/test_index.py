"""kafkatool.segment.index: .index/.timeindex reading, sanity checks, lookups and the recovery rebuild (spec §8)."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.errors import CorruptIndexError, KafkaToolError
from kafkatool.render.sidefiles import offset_index_line, time_index_line
from kafkatool.segment.index import (
    IndexAppendError,
    IndexBuilder,
    OffsetIndexEntry,
    TimeIndexEntry,
    decode_offset_index,
    decode_time_index,
    encode_offset_index,
    encode_time_index,
    lookup_offset,
    lookup_time,
    read_offset_index,
    read_time_index,
    sanity_check_offset_index,
    sanity_check_time_index,
)

from conftest import real_fixture as fixture


def walk_v2_headers(data: bytes) -> Iterator[tuple[int, int, int, int]]:
    """An independent §3 walk for v2 segments: (position, size, lastOffset, maxTimestamp) per batch."""
    pos = 0
    while pos < len(data) - 17:
        base_offset, size = struct.unpack_from(">qi", data, pos)
        if pos > len(data) - 12 - size:
            break
        (last_offset_delta,) = struct.unpack_from(">i", data, pos + 23)
        (max_timestamp,) = struct.unpack_from(">q", data, pos + 35)
        yield pos, 12 + size, base_offset + last_offset_delta, max_timestamp
        pos += 12 + size


# The three batches of spec §16.1/§16.2: (position, size incl. overhead, lastOffset, maxTimestamp).
GOLDEN_BATCHES = [(0, 86, 1, 1700000000005), (86, 70, 2, 1700000000010), (156, 78, 3, 1700000000020)]


# ----------------------------------------------------------------------------- §16.3 golden vectors


def test_golden_rebuild_interval_128() -> None:
    builder = IndexBuilder(0, index_interval_bytes=128)
    for batch in GOLDEN_BATCHES:
        builder.add_batch(*batch)
    offset_bytes, time_bytes = builder.finish()
    assert offset_bytes == bytes.fromhex("00000003 0000009c")
    assert time_bytes == bytes.fromhex("0000018bcfe56814 00000003")
    assert builder.finish() == (offset_bytes, time_bytes)  # idempotent
    index = decode_offset_index(offset_bytes, 0)
    assert [offset_index_line(o, p) for o, p in index.iter_dump_entries()] == ["offset: 3 position: 156"]
    tindex = decode_time_index(time_bytes, 0)
    assert [time_index_line(t, o) for t, o in tindex.iter_dump_entries()] == ["timestamp: 1700000000020 offset: 3"]
    sanity_check_offset_index(index, "/data/t-0/00000000000000000000.index")
    sanity_check_time_index(tindex, "/data/t-0/00000000000000000000.timeindex")


def test_golden_rebuild_default_interval() -> None:
    builder = IndexBuilder(0)
    for batch in GOLDEN_BATCHES:
        builder.add_batch(*batch)
    offset_bytes, time_bytes = builder.finish()
    assert offset_bytes == b""
    assert time_bytes == bytes.fromhex("0000018bcfe56814 00000003")
    assert builder.valid_bytes == 234


# ----------------------------------------------------------------------------- reading and counting (§8.2)


def test_entry_counting_trusts_the_length() -> None:
    data = encode_offset_index([OffsetIndexEntry(3, 156)]) + bytes(8 * 3) + b"\x01\x02\x03"
    index = decode_offset_index(data, 100)
    assert index.file_length == 35
    assert index.entry_count == 4  # zero-filled slots count
    assert index.remainder == 3
    assert list(index.entries) == [OffsetIndexEntry(3, 156)] + [OffsetIndexEntry(0, 0)] * 3
    assert index.entries[0].absolute_offset(100) == 103
    assert index.entries[-1] == OffsetIndexEntry(0, 0)
    assert index.entries[1:3] == [OffsetIndexEntry(0, 0)] * 2
    with pytest.raises(IndexError):
        index.entries[4]
    assert list(index.iter_absolute()) == [(103, 156), (100, 0), (100, 0), (100, 0)]
    assert index.last_offset == 100


def test_empty_index() -> None:
    index = decode_offset_index(b"", 7)
    assert index.entry_count == 0 and index.last_offset == 7
    assert list(index.iter_dump_entries()) == []
    sanity_check_offset_index(index, "x.index")
    tindex = decode_time_index(b"", 7)
    assert tindex.last_entry == (-1, 7)
    sanity_check_time_index(tindex, "x.timeindex")


def test_zero_tail_stop_rule() -> None:
    # §17.E.36: an untrimmed index; the dump stops at the first entry i > 0 with relative offset 0.
    real = [OffsetIndexEntry(10, 4200), OffsetIndexEntry(20, 8500)]
    index = decode_offset_index(encode_offset_index(real) + bytes(8 * 1000), 50)
    assert index.entry_count == 1002
    assert list(index.iter_dump_entries()) == [(60, 4200), (70, 8500)]
    times = [TimeIndexEntry(1700000000000, 10), TimeIndexEntry(1700000000005, 20)]
    tindex = decode_time_index(encode_time_index(times) + bytes(12 * 1000), 50)
    assert list(tindex.iter_dump_entries()) == [(1700000000000, 60), (1700000000005, 70)]


def test_all_zero_index_prints_one_bogus_entry() -> None:
    # §17.E.36
    assert list(decode_offset_index(bytes(80), 5).iter_dump_entries()) == [(5, 0)]
    assert list(decode_time_index(bytes(120), 5).iter_dump_entries()) == [(0, 5)]


def test_first_entry_with_relative_offset_zero_is_printed() -> None:
    entries = [OffsetIndexEntry(0, 0), OffsetIndexEntry(5, 4200), OffsetIndexEntry(0, 0)]
    assert list(decode_offset_index(encode_offset_index(entries), 0).iter_dump_entries()) == [(0, 0), (5, 4200)]


def test_read_from_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(encode_offset_index([OffsetIndexEntry(3, 156)]))
    index = read_offset_index(path)
    assert index.base_offset == 100 and index.path == str(path)
    assert list(index.iter_dump_entries()) == [(103, 156)]
    assert read_offset_index(path, base_offset=0).last_offset == 3
    tpath = tmp_path / "00000000000000000100.timeindex"
    tpath.write_bytes(encode_time_index([TimeIndexEntry(1700000000020, 3)]))
    assert read_time_index(tpath).last_entry == (1700000000020, 103)


def test_read_missing_file_raises_oserror_and_creates_nothing(tmp_path: Path) -> None:
    # §17.E.46: a read-only tool must not create the missing file.
    path = tmp_path / "00000000000000000000.index"
    with pytest.raises(OSError):
        read_offset_index(path)
    assert not path.exists()


# ----------------------------------------------------------------------------- sanity checks (§8.4)


def test_offset_index_last_offset_below_base() -> None:
    index = decode_offset_index(encode_offset_index([OffsetIndexEntry(5, 0), OffsetIndexEntry(-3, 100)]), 10)
    with pytest.raises(CorruptIndexError) as info:
        sanity_check_offset_index(index, "/data/t-0/00000000000000000010.index")
    assert info.value.message == (
        "Corrupt index found, index file /data/t-0/00000000000000000010.index has non-zero size but the last "
        "offset is 7 which is less than the base offset 10"
    )
    assert str(info.value) == info.value.message  # path=None: the caller decides


def test_offset_index_length_not_multiple_of_8() -> None:
    # §17.E.39
    index = decode_offset_index(encode_offset_index([OffsetIndexEntry(5, 0)]) + b"\x00\x00\x00", 0)
    with pytest.raises(CorruptIndexError) as info:
        sanity_check_offset_index(index, "/data/t-0/00000000000000000000.index")
    assert info.value.message == (
        "Index file /data/t-0/00000000000000000000.index is corrupt, found 11 bytes which is neither positive "
        "nor a multiple of 8"
    )


def test_five_byte_files() -> None:
    # §17.E.38: a 5-byte .index has 0 entries (DumpLogSegments says "is empty."); a 5-byte .timeindex fails.
    index = decode_offset_index(b"\x00" * 5, 0)
    assert index.entry_count == 0 and index.remainder == 5
    with pytest.raises(CorruptIndexError, match="found 5 bytes which is neither positive nor a multiple of 8"):
        sanity_check_offset_index(index, "/d/00000000000000000000.index")
    tindex = decode_time_index(b"\x00" * 5, 0)
    with pytest.raises(CorruptIndexError) as info:
        sanity_check_time_index(tindex, "/d/00000000000000000000.timeindex")
    assert info.value.message == (
        "Time index file /d/00000000000000000000.timeindex is corrupt, found 5 bytes which is neither positive "
        "nor a multiple of 12"
    )


def test_untrimmed_offset_index_passes_and_time_index_fails() -> None:
    # §17.E.37
    index = decode_offset_index(encode_offset_index([OffsetIndexEntry(10, 4200)]) + bytes(8 * 10), 0)
    sanity_check_offset_index(index, "/d/00000000000000000000.index")
    tindex = decode_time_index(encode_time_index([TimeIndexEntry(1700000000000, 10)]) + bytes(12 * 10), 0)
    with pytest.raises(CorruptIndexError) as info:
        sanity_check_time_index(tindex, "/d/00000000000000000000.timeindex")
    assert info.value.message == (
        "Corrupt time index found, time index file (/d/00000000000000000000.timeindex) has non-zero size but the "
        "last timestamp is 0 which is less than the first timestamp 1700000000000"
    )


def test_time_index_last_offset_below_base() -> None:
    tindex = decode_time_index(encode_time_index([TimeIndexEntry(5, 1), TimeIndexEntry(6, -1)]), 100)
    with pytest.raises(CorruptIndexError) as info:
        sanity_check_time_index(tindex, "/d/00000000000000000100.timeindex")
    assert info.value.message == (
        "Corrupt time index found, time index file (/d/00000000000000000100.timeindex) has non-zero size but the "
        "last offset is 99 which is less than the first offset 100"
    )


def test_sanity_check_uses_the_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("00000000000000000000.index").write_bytes(b"\x00" * 12)
    index = read_offset_index("00000000000000000000.index")
    with pytest.raises(CorruptIndexError) as info:
        sanity_check_offset_index(index)
    assert f"Index file {os.path.join(str(tmp_path), '00000000000000000000.index')} is corrupt" in info.value.message


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.integers(min_value=0, max_value=2**62))
def test_garbage_only_raises_corrupt_index_error(data: bytes, base: int) -> None:
    index = decode_offset_index(data, base)
    tindex = decode_time_index(data, base)
    assert index.entry_count == len(data) // 8 and tindex.entry_count == len(data) // 12
    list(index.iter_dump_entries())
    list(tindex.iter_dump_entries())
    for check, target in ((sanity_check_offset_index, index), (sanity_check_time_index, tindex)):
        try:
            check(target, "/x")  # type: ignore[operator]
        except CorruptIndexError:
            pass
    index.lookup(base + 5)
    tindex.lookup(1700000000000)


# ----------------------------------------------------------------------------- lookups (§8.2)


def test_lookup_offset_defaults_and_bounds() -> None:
    entries = [OffsetIndexEntry(10, 100), OffsetIndexEntry(20, 200), OffsetIndexEntry(30, 300)]
    assert lookup_offset([], 1000, 1005) == (1000, 0)
    assert lookup_offset(entries, 1000, 1005) == (1000, 0)
    assert lookup_offset(entries, 1000, 1010) == (1010, 100)
    assert lookup_offset(entries, 1000, 1025) == (1020, 200)
    assert lookup_offset(entries, 1000, 5000) == (1030, 300)


def test_lookup_time_defaults_and_bounds() -> None:
    entries = [TimeIndexEntry(100, 1), TimeIndexEntry(200, 5)]
    assert lookup_time([], 50, 150) == (-1, 50)
    assert lookup_time(entries, 50, 99) == (-1, 50)
    assert lookup_time(entries, 50, 100) == (100, 51)
    assert lookup_time(entries, 50, 199) == (100, 51)
    assert lookup_time(entries, 50, 10**15) == (200, 55)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=2**31 - 1), unique=True, max_size=3000).map(sorted),
    st.integers(min_value=-10, max_value=2**31 + 10),
)
def test_lookup_matches_brute_force_on_sorted_indexes(rels: list[int], target_rel: int) -> None:
    # Sizes above 1024 entries exercise Kafka's warm-section search.
    base = 1000
    entries = [OffsetIndexEntry(r, i * 10) for i, r in enumerate(rels)]
    lower = [e for e in entries if base + e.relative_offset <= base + target_rel]
    expected = (base + lower[-1].relative_offset, lower[-1].position) if lower else (base, 0)
    assert lookup_offset(entries, base, base + target_rel) == expected
    index = decode_offset_index(encode_offset_index(entries), base)
    assert index.lookup(base + target_rel) == expected


def test_lookup_on_zero_tailed_index_follows_kafka() -> None:
    # Read from disk, an untrimmed index counts its zero slots, and Kafka's binary search (warm
    # section first) can land in the zero tail: the answer is then (base, 0), a safe start.
    entries = [OffsetIndexEntry(i * 10 + 10, i * 4200) for i in range(5)] + [OffsetIndexEntry(0, 0)] * 10
    assert lookup_offset(entries, 0, 10) == (10, 0)
    assert lookup_offset(entries, 0, 5) == (0, 0)
    assert lookup_offset(entries, 0, 25) == (0, 0)
    big = entries[:5] + [OffsetIndexEntry(0, 0)] * 2000
    assert lookup_offset(big, 0, 10) == (0, 0)  # the warm-section probe hits a zero slot first


# ----------------------------------------------------------------------------- encode / decode


@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1))))
def test_offset_index_round_trip(pairs: list[tuple[int, int]]) -> None:
    entries = [OffsetIndexEntry(*p) for p in pairs]
    data = encode_offset_index(entries)
    assert len(data) == 8 * len(entries)
    assert list(decode_offset_index(data, 0).entries) == entries


@given(st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**31), 2**31 - 1))))
def test_time_index_round_trip(pairs: list[tuple[int, int]]) -> None:
    entries = [TimeIndexEntry(*p) for p in pairs]
    data = encode_time_index(entries)
    assert len(data) == 12 * len(entries)
    assert list(decode_time_index(data, 0).entries) == entries


def test_encode_out_of_range_raises_our_error() -> None:
    with pytest.raises(CorruptIndexError):
        encode_offset_index([OffsetIndexEntry(2**31, 0)])
    with pytest.raises(CorruptIndexError):
        encode_time_index([TimeIndexEntry(2**63, 0)])


# ----------------------------------------------------------------------------- IndexBuilder append rules (§8.3)


def test_builder_never_indexes_the_first_batch_and_counts_strictly_greater() -> None:
    builder = IndexBuilder(0, index_interval_bytes=100)
    builder.add_batch(0, 100, 0, 10)  # p=0: never indexed
    builder.add_batch(100, 100, 1, 20)  # 100 - 0 > 100? no
    builder.add_batch(200, 100, 2, 30)  # 200 > 100: yes
    builder.add_batch(300, 100, 3, 40)  # 300 - 200 > 100? no
    offset_bytes, time_bytes = builder.finish()
    assert list(decode_offset_index(offset_bytes, 0).entries) == [OffsetIndexEntry(2, 200)]
    assert list(decode_time_index(time_bytes, 0).entries) == [TimeIndexEntry(30, 2), TimeIndexEntry(40, 3)]


def test_builder_time_entry_uses_the_first_batch_holding_the_max() -> None:
    builder = IndexBuilder(0, index_interval_bytes=0)
    builder.add_batch(0, 100, 4, 500)
    builder.add_batch(100, 100, 9, 400)  # older timestamp: the max stays at offset 4
    builder.add_batch(200, 100, 14, 500)  # equal timestamp: not an update
    offset_bytes, time_bytes = builder.finish()
    assert list(decode_offset_index(offset_bytes, 0).entries) == [OffsetIndexEntry(9, 100), OffsetIndexEntry(14, 200)]
    assert list(decode_time_index(time_bytes, 0).entries) == [TimeIndexEntry(500, 4)]


def test_builder_v0_only_segment_has_an_empty_time_index() -> None:
    # §17.E.44: timestamps -1 never enter the time index.
    builder = IndexBuilder(0, index_interval_bytes=10)
    for i in range(5):
        builder.add_batch(i * 31, 31, i, -1)
    offset_bytes, time_bytes = builder.finish()
    assert len(offset_bytes) == 8 * 4 and time_bytes == b""


def test_builder_rejects_non_increasing_offsets() -> None:
    builder = IndexBuilder(0, index_interval_bytes=0, path="/d/00000000000000000000.index")
    builder.add_batch(0, 100, 5, 1)
    builder.add_batch(100, 100, 6, 2)
    with pytest.raises(IndexAppendError) as info:
        builder.add_batch(200, 100, 6, 3)
    assert info.value.message == (
        "Attempt to append an offset 6 to position 1 no larger than the last offset appended (6) "
        "to /d/00000000000000000000.index"
    )
    assert isinstance(info.value, KafkaToolError)


def test_builder_rejects_offsets_outside_the_segment() -> None:
    builder = IndexBuilder(100)
    with pytest.raises(IndexAppendError, match="Detected offset overflow at offset 99"):
        builder.add_batch(0, 100, 99, 1)
    builder = IndexBuilder(0)
    with pytest.raises(IndexAppendError, match="offset overflow"):
        builder.add_batch(0, 100, 2**31, 1)


def test_builder_requires_contiguous_batches() -> None:
    builder = IndexBuilder(0)
    builder.add_batch(0, 100, 0, 1)
    with pytest.raises(IndexAppendError) as info:
        builder.add_batch(150, 100, 1, 1)
    assert info.value.position == 150


def test_builder_full_indexes() -> None:
    builder = IndexBuilder(0, index_interval_bytes=0, max_index_size=16)  # 2 offset slots, 1 time slot
    builder.add_batch(0, 10, 0, 1)
    with pytest.raises(IndexAppendError, match=r"Attempt to append to a full time index \(size = 0\)\."):
        builder.add_batch(10, 10, 1, 2)
    # Timestamps -1 never append, but the full check runs before the append decision.
    builder = IndexBuilder(0, index_interval_bytes=0, max_index_size=24)  # 3 offset slots, 2 time slots
    builder.add_batch(0, 10, 0, -1)
    builder.add_batch(10, 10, 1, -1)
    builder.add_batch(20, 10, 2, -1)
    builder.add_batch(30, 10, 3, -1)
    with pytest.raises(IndexAppendError, match=r"Attempt to append to a full index \(size = 3\)\."):
        builder.add_batch(40, 10, 4, -1)


def test_builder_after_finish() -> None:
    builder = IndexBuilder(0)
    builder.finish()
    with pytest.raises(IndexAppendError):
        builder.add_batch(0, 100, 0, 1)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(61, 5000), st.integers(1, 50), st.integers(-1, 10**6)), max_size=60),
    st.sampled_from([0, 128, 4096]),
)
def test_builder_output_is_consistent(batches: list[tuple[int, int, int]], interval: int) -> None:
    base = 1000
    builder = IndexBuilder(base, index_interval_bytes=interval)
    layout: dict[int, int] = {}  # position -> lastOffset
    max_ts: dict[int, int] = {}  # lastOffset -> batch max timestamp
    position, offset = 0, base - 1
    for size, count, ts in batches:
        offset += count
        builder.add_batch(position, size, offset, ts)
        layout[position] = offset
        max_ts[offset] = ts
        position += size
    offset_bytes, time_bytes = builder.finish()
    index = decode_offset_index(offset_bytes, base)
    tindex = decode_time_index(time_bytes, base)
    sanity_check_offset_index(index, "/x.index")
    sanity_check_time_index(tindex, "/x.timeindex")
    for abs_offset, pos in index.iter_absolute():
        assert layout[pos] == abs_offset and pos > 0
    stamps = list(tindex.iter_absolute())
    assert all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(stamps, stamps[1:]))
    for ts, abs_offset in stamps:
        assert max_ts[abs_offset] == ts
    real = [ts for ts in max_ts.values() if ts > -1]
    if real:
        assert stamps[-1][0] == max(real)
    else:
        assert stamps == []


# ----------------------------------------------------------------------------- real broker files


def test_real_consumer_offsets_indexes() -> None:
    d = fixture("William0423__kafka/kafka-logs/__consumer_offsets-28")
    index = read_offset_index(d / "00000000000000000000.index")
    tindex = read_time_index(d / "00000000000000000000.timeindex")
    assert index.file_length == 2032 and index.entry_count == 254 and index.remainder == 0
    assert tindex.file_length == 3096 and tindex.entry_count == 258
    sanity_check_offset_index(index)
    sanity_check_time_index(tindex)
    assert len(list(index.iter_dump_entries())) == 254
    assert len(list(tindex.iter_dump_entries())) == 258
    batches = {pos: (last, ts) for pos, _, last, ts in walk_v2_headers((d / "00000000000000000000.log").read_bytes())}
    by_last = {last: ts for last, ts in batches.values()}
    # Every offset entry points at a batch start whose lastOffset is the entry's offset.
    for offset, position in index.iter_absolute():
        assert batches[position][0] == offset
    # Every time entry names a batch lastOffset whose max timestamp is the entry's timestamp.
    for ts, offset in tindex.iter_absolute():
        assert by_last[offset] == ts
    # Lookups land on real batch starts.
    for target in (0, 31, 32, 5000, 8201, 10**9):
        found_offset, position = index.lookup(target)
        assert found_offset <= max(target, 0) and (position == 0 or position in batches)
    assert tindex.lookup(0) == (-1, 0)
    assert tindex.lookup(10**15) == tindex.last_entry


def test_real_rebuild_reproduces_the_broker_offset_index() -> None:
    # SOURCE.md: for data/kafka3 the recover-path rebuild reproduces the broker's 500 entries exactly.
    d = fixture("greenlemonT__kafka-temp/data/kafka3/__cluster_metadata-0")
    builder = IndexBuilder(0, path=str(d / "00000000000000000000.index"))
    for batch in walk_v2_headers((d / "00000000000000000000.log").read_bytes()):
        builder.add_batch(*batch)
    offset_bytes, time_bytes = builder.finish()
    broker_offset = (d / "00000000000000000000.index").read_bytes()
    assert len(broker_offset) == 4000
    assert offset_bytes == broker_offset
    # The time index differs where the broker appended roll/close entries; the final entry agrees.
    rebuilt = decode_time_index(time_bytes, 0)
    broker = read_time_index(d / "00000000000000000000.timeindex")
    assert broker.entry_count == 502
    sanity_check_time_index(rebuilt, "/x.timeindex")
    assert rebuilt.last_entry == broker.last_entry


def test_real_rebuild_is_consistent_where_the_broker_indexed_per_request() -> None:
    # SOURCE.md: the broker indexed per produce request (254 entries); recovery gives 256.
    d = fixture("William0423__kafka/kafka-logs/__consumer_offsets-28")
    builder = IndexBuilder(0)
    batches = list(walk_v2_headers((d / "00000000000000000000.log").read_bytes()))
    for batch in batches:
        builder.add_batch(*batch)
    offset_bytes, time_bytes = builder.finish()
    rebuilt = decode_offset_index(offset_bytes, 0)
    assert rebuilt.entry_count == 256
    starts = {pos: last for pos, _, last, _ in batches}
    assert all(starts[pos] == offset for offset, pos in rebuilt.iter_absolute())
    broker = read_time_index(d / "00000000000000000000.timeindex")
    assert decode_time_index(time_bytes, 0).last_entry == broker.last_entry
