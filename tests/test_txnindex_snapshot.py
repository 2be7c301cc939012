"""kafkatool.segment.txnindex and .snapshot: spec §9, §10, §15.7, §15.8, §16.5, §16.6, §17.F."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.errors import CorruptIndexError, CorruptSnapshotError
from kafkatool.record.batch import increment_sequence
from kafkatool.render.sidefiles import snapshot_entry_line, txn_entry_line
from kafkatool.segment.snapshot import (
    ProducerSnapshotEntry,
    decode_producer_snapshot,
    encode_producer_snapshot,
    read_producer_snapshot,
)
from kafkatool.segment.txnindex import (
    AbortedTxn,
    decode_txn_index,
    encode_txn_index,
    iter_txn_index,
    read_txn_index,
    sanity_check_txn_index,
)

from conftest import real_fixture as fixture


# §16.6
TXN_GOLDEN = bytes.fromhex("0000 00000000000003e8 000000000000000a 0000000000000014 000000000000000a")
# §16.5
SNAPSHOT_GOLDEN = bytes.fromhex(
    "0001 c5e8776b 00000001 00000000000003e8 0000 00000000 0000000000000002 00000000"
    " 0000018bcfe5680a 00000005 ffffffffffffffff"
)

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)

# ============================================================================= .txnindex


def test_txn_golden() -> None:
    index = decode_txn_index(TXN_GOLDEN)
    assert index.entries == (AbortedTxn(0, 1000, 10, 20, 10),)
    assert index.trailing_bytes == 0 and index.file_length == 34
    assert txn_entry_line(index.entries[0]) == (
        "version: 0 producerId: 1000 firstOffset: 10 lastOffset: 20 lastStableOffset: 10"
    )
    assert encode_txn_index(index.entries) == TXN_GOLDEN


def test_txn_trailing_partial_entry_is_ignored_but_reported() -> None:
    # §17.F.47
    index = decode_txn_index(TXN_GOLDEN + TXN_GOLDEN[:33])
    assert len(index.entries) == 1 and index.trailing_bytes == 33
    assert decode_txn_index(TXN_GOLDEN[:20]).entries == ()
    assert decode_txn_index(b"").entries == ()


def test_txn_version_reads_the_high_byte_only() -> None:
    # §17.F.47: 0x0001 reads as version 0.
    low = b"\x00\x01" + TXN_GOLDEN[2:]
    assert decode_txn_index(low).entries[0].version == 0
    # A negative high byte passes Kafka's "> 0" check and prints as such.
    negative = b"\xff\x00" + TXN_GOLDEN[2:]
    entry = decode_txn_index(negative).entries[0]
    assert entry.version == -1
    assert txn_entry_line(entry).startswith("version: -1 producerId: 1000")


def test_txn_version_error(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(TXN_GOLDEN + b"\x01\x00" + TXN_GOLDEN[2:])
    with pytest.raises(CorruptIndexError) as info:
        read_txn_index(path)
    assert info.value.message == (
        f"Unexpected aborted transaction version 1 in transaction index {os.path.abspath(path)}, "
        "current version is 0"
    )
    assert info.value.path == str(path) and info.value.position == 34


def test_txn_iteration_yields_entries_before_the_bad_one() -> None:
    # DumpLogSegments prints the good entries, then fails (§15.8).
    it = iter_txn_index(TXN_GOLDEN + b"\x07\x00" + TXN_GOLDEN[2:], "/d/x.txnindex")
    assert next(it) == AbortedTxn(0, 1000, 10, 20, 10)
    with pytest.raises(CorruptIndexError, match="Unexpected aborted transaction version 7 in transaction index /d/x"):
        next(it)


def test_txn_sanity_check() -> None:
    # §17.F.48
    entries = [AbortedTxn(0, 1000, 10, 20, 10), AbortedTxn(0, 7, 3, 4, 5)]
    sanity_check_txn_index(entries[:1], 20, "/d/00000000000000000020.txnindex")
    with pytest.raises(CorruptIndexError) as info:
        sanity_check_txn_index(entries, 5, "/d/00000000000000000005.txnindex")
    assert info.value.message == (
        "Last offset of aborted transaction AbortedTxn(version=0, producerId=7, firstOffset=3, lastOffset=4, "
        "lastStableOffset=5) in index /d/00000000000000000005.txnindex is less than start offset 5"
    )
    assert str(info.value) == info.value.message


def test_txn_missing_file_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        read_txn_index(tmp_path / "00000000000000000000.txnindex")


@given(st.lists(st.builds(AbortedTxn, st.integers(-128, 0), int64, int64, int64, int64), max_size=20))
def test_txn_round_trip(entries: list[AbortedTxn]) -> None:
    data = encode_txn_index(entries)
    assert len(data) == 34 * len(entries)
    assert decode_txn_index(data).entries == tuple(entries)


@settings(max_examples=200)
@given(st.binary(max_size=300))
def test_txn_garbage_only_raises_our_error(data: bytes) -> None:
    try:
        index = decode_txn_index(data)
    except CorruptIndexError:
        return
    assert len(index.entries) == len(data) // 34 and index.trailing_bytes == len(data) % 34


def test_txn_encode_out_of_range() -> None:
    with pytest.raises(CorruptIndexError):
        encode_txn_index([AbortedTxn(300, 0, 0, 0, 0)])


# ============================================================================= producer snapshots


def test_snapshot_golden() -> None:
    snapshot = decode_producer_snapshot(SNAPSHOT_GOLDEN)
    assert len(SNAPSHOT_GOLDEN) == 56
    assert snapshot.version == 1 and snapshot.crc == snapshot.computed_crc == 3320346475
    assert snapshot.crc_valid and snapshot.trailing_bytes == 0
    (entry,) = snapshot.entries
    assert entry == ProducerSnapshotEntry(1000, 0, 0, 2, 0, 1700000000010, 5, -1)
    assert entry.has_batch_metadata and entry.first_sequence == 0 and not entry.has_ongoing_txn
    assert snapshot_entry_line(entry) == (
        "producerId: 1000 producerEpoch: 0 coordinatorEpoch: 5 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1700000000010 firstSequence: 0 lastSequence: 0 lastOffset: 2 offsetDelta: 0 "
        "timestamp: 1700000000010"
    )
    assert encode_producer_snapshot(snapshot.entries) == SNAPSHOT_GOLDEN


def test_snapshot_line_without_batch_metadata_ends_with_a_space() -> None:
    # §17.F.50
    entry = ProducerSnapshotEntry(7, 3, -1, -1, 0, 1700000000000, 2, 42)
    assert not entry.has_batch_metadata
    assert snapshot_entry_line(entry) == (
        "producerId: 7 producerEpoch: 3 coordinatorEpoch: 2 currentTxnFirstOffset: OptionalLong[42] "
        "lastTimestamp: 1700000000000 "
    )


def test_first_sequence_wraps() -> None:
    # §10: lastSeq < delta wraps through Int.MAX, the inverse of the batch sequence increment.
    entry = ProducerSnapshotEntry(1, 0, 1, 5, 3, 0, 0, -1)
    assert entry.first_sequence == 2147483646
    assert increment_sequence(entry.first_sequence, entry.offset_delta) == entry.last_sequence
    assert ProducerSnapshotEntry(1, 0, 10, 5, 3, 0, 0, -1).first_sequence == 7


def test_empty_snapshot_file() -> None:
    # §17.F.49
    with pytest.raises(CorruptSnapshotError) as info:
        decode_producer_snapshot(b"")
    assert info.value.message == "Snapshot failed schema validation: null"


@pytest.mark.parametrize("version, shown", [(b"\x00\x02", 2), (b"\x00\x00", 0), (b"\xff\xff", -1)])
def test_unknown_version(version: bytes, shown: int) -> None:
    with pytest.raises(CorruptSnapshotError) as info:
        decode_producer_snapshot(version + SNAPSHOT_GOLDEN[2:])
    assert info.value.message == (
        f"Snapshot failed schema validation: Snapshot contained an unknown file version {shown}"
    )


def test_crc_covers_trailing_bytes() -> None:
    # §17.F.49: trailing bytes are hashed, so they break the CRC.
    data = SNAPSHOT_GOLDEN + b"\x00"
    computed = crc32c.crc32c(data[6:])
    with pytest.raises(CorruptSnapshotError) as info:
        decode_producer_snapshot(data)
    assert info.value.message == (
        f"Snapshot is corrupt (CRC is no longer valid). Stored crc: 3320346475. Computed crc: {computed}"
    )
    lenient = decode_producer_snapshot(data, verify_crc=False)
    assert lenient.trailing_bytes == 1 and not lenient.crc_valid and len(lenient.entries) == 1


def test_flipped_bit_breaks_the_crc() -> None:
    data = bytearray(SNAPSHOT_GOLDEN)
    data[20] ^= 0x10
    with pytest.raises(CorruptSnapshotError) as info:
        decode_producer_snapshot(bytes(data))
    assert info.value.message.startswith("Snapshot is corrupt (CRC is no longer valid). Stored crc: 3320346475. ")


def test_every_prefix_is_a_schema_error() -> None:
    for n in range(len(SNAPSHOT_GOLDEN)):
        with pytest.raises(CorruptSnapshotError) as info:
            decode_producer_snapshot(SNAPSHOT_GOLDEN[:n])
        assert info.value.message.startswith("Snapshot failed schema validation: ")
        assert info.value.message == "Snapshot failed schema validation: null" or n >= 2


def test_negative_entry_count() -> None:
    body = struct.pack(">i", -1)
    data = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    with pytest.raises(CorruptSnapshotError) as info:
        decode_producer_snapshot(data)
    assert info.value.message.startswith("Snapshot failed schema validation: ")
    assert info.value.position == 6


def test_read_snapshot_locates_errors(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000003.snapshot"
    path.write_bytes(b"")
    with pytest.raises(CorruptSnapshotError) as info:
        read_producer_snapshot(path)
    assert info.value.message == "Snapshot failed schema validation: null"
    assert str(info.value).startswith(str(path) + ":")
    path.write_bytes(SNAPSHOT_GOLDEN)
    assert read_producer_snapshot(path).entries[0].producer_id == 1000


entries_strategy = st.lists(
    st.builds(ProducerSnapshotEntry, int64, int16, int32, int64, int32, int64, int32, int64), max_size=10
)


@given(entries_strategy)
def test_snapshot_round_trip(entries: list[ProducerSnapshotEntry]) -> None:
    data = encode_producer_snapshot(entries)
    assert len(data) == 10 + 46 * len(entries)
    snapshot = decode_producer_snapshot(data)
    assert snapshot.entries == tuple(entries) and snapshot.crc_valid
    for entry in entries:
        snapshot_entry_line(entry)


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_snapshot_garbage_only_raises_our_error(data: bytes) -> None:
    try:
        decode_producer_snapshot(data)
    except CorruptSnapshotError:
        pass


@given(entries_strategy, st.binary(min_size=1, max_size=20))
def test_snapshot_with_trailing_bytes(entries: list[ProducerSnapshotEntry], extra: bytes) -> None:
    data = encode_producer_snapshot(entries) + extra
    snapshot = decode_producer_snapshot(data, verify_crc=False)
    assert snapshot.entries == tuple(entries) and snapshot.trailing_bytes == len(extra)


def test_snapshot_encode_out_of_range() -> None:
    with pytest.raises(CorruptSnapshotError):
        encode_producer_snapshot([ProducerSnapshotEntry(0, 2**15, 0, 0, 0, 0, 0, 0)])


# ----------------------------------------------------------------------------- real broker snapshots


def test_real_snapshot_with_one_producer() -> None:
    path = fixture("greenlemonT__kafka-temp/data/kafka3/payment-create-request-0/00000000000000000001.snapshot")
    snapshot = read_producer_snapshot(path)
    assert snapshot.crc_valid and snapshot.trailing_bytes == 0
    (entry,) = snapshot.entries
    assert entry == ProducerSnapshotEntry(0, 0, 0, 0, 0, 0x01948E88DE2B, -1, -1)
    assert snapshot_entry_line(entry) == (
        "producerId: 0 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1737558122027 firstSequence: 0 lastSequence: 0 lastOffset: 0 offsetDelta: 0 "
        "timestamp: 1737558122027"
    )
    assert encode_producer_snapshot(snapshot.entries) == path.read_bytes()


def test_real_empty_snapshots() -> None:
    d = fixture("William0423__kafka/kafka-logs/__consumer_offsets-28")
    paths = sorted(d.glob("*.snapshot"))
    assert [p.name for p in paths] == [
        "00000000000000000142.snapshot",
        "00000000000000001693.snapshot",
        "00000000000000001715.snapshot",
        "00000000000000008202.snapshot",
    ]
    for path in paths:
        snapshot = read_producer_snapshot(path)
        assert snapshot.entries == () and snapshot.crc_valid
        assert path.read_bytes() == encode_producer_snapshot([])
