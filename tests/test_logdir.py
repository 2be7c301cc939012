"""The log-dir model (kafkatool.segment.logdir): discovery, listings, checkpoints, reading, split.

Expected values are hand-derived from the file names and bytes (spec §2, §3), from the real broker
files' own checkpoints, or from kafka-python's reader; never from kafkatool's encoder.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from conftest import FIXTURES, real_fixture
from kafkatool.errors import FileNameError, KafkaToolError
from kafkatool.segment.files import FileKind
from kafkatool.segment.logdir import (
    DirectoryError,
    EntryType,
    LogDir,
    Partition,
    Segment,
    descend_partition_named,
    expand,
    list_dir,
)

Z = "0" * 20


def seg(offset: int, suffix: str) -> str:
    return f"{offset:020d}{suffix}"


def touch(d: Path, *names: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        (d / n).write_bytes(b"")
    return d


# ----------------------------------------------------------------------------- partitions and log dirs


def test_partition_from_dir_name_split_on_last_dash(tmp_path):
    p = Partition(touch(tmp_path / "my-topic-name-12"))
    assert (p.topic, p.partition, p.state, p.unique_id) == ("my-topic-name", 12, None, None)
    uid = "0123456789abcdef0123456789abcdef"
    for state in ("delete", "future", "stray"):
        q = Partition(tmp_path / f"t-x-3.{uid}-{state}")
        assert (q.topic, q.partition, q.state, q.unique_id) == ("t-x", 3, state, uid)
    odd = Partition(tmp_path / "backup")
    assert (odd.topic, odd.partition, odd.state) == (None, None, None)
    # a path given with a trailing slash names the same directory
    assert Partition(str(tmp_path / "my-topic-name-12") + "/").topic == "my-topic-name"


def test_partition_listing_classifies_every_entry_and_groups_segments(tmp_path):
    d = touch(
        tmp_path / "t-0",
        seg(0, ".log"), seg(0, ".index"), seg(0, ".timeindex"),
        seg(50, ".log"), seg(50, ".index"), seg(50, ".txnindex"), seg(50, ".snapshot"),
        seg(70, ".snapshot"), seg(30, ".log.deleted"), "leader-epoch-checkpoint", "notes.txt",
        "5.log",  # not 20 digits: not a segment
    )
    os.mkfifo(d / seg(90, ".log"))
    p = Partition(d)
    kinds = [(e.name, e.kind, e.type) for e in p.listing()]
    assert kinds == [
        (seg(0, ".log"), FileKind.LOG, EntryType.FILE),
        (seg(0, ".index"), FileKind.INDEX, EntryType.FILE),
        (seg(0, ".timeindex"), FileKind.TIMEINDEX, EntryType.FILE),
        ("5.log", FileKind.UNKNOWN, EntryType.FILE),
        (seg(50, ".log"), FileKind.LOG, EntryType.FILE),
        (seg(50, ".index"), FileKind.INDEX, EntryType.FILE),
        (seg(50, ".txnindex"), FileKind.TXNINDEX, EntryType.FILE),
        (seg(50, ".snapshot"), FileKind.PRODUCER_SNAPSHOT, EntryType.FILE),
        (seg(70, ".snapshot"), FileKind.PRODUCER_SNAPSHOT, EntryType.FILE),
        (seg(90, ".log"), FileKind.LOG, EntryType.FIFO),
        (seg(30, ".log.deleted"), FileKind.DELETED, EntryType.FILE),
        ("leader-epoch-checkpoint", FileKind.LEADER_EPOCH_CHECKPOINT, EntryType.FILE),
        ("notes.txt", FileKind.UNKNOWN, EntryType.FILE),
    ]
    segments = p.segments()
    assert [s.base_offset for s in segments] == [0, 50]  # the FIFO is no segment
    s0, s50 = segments
    assert s0.log_path == str(d / seg(0, ".log"))
    assert (s0.index_path, s0.timeindex_path, s0.txnindex_path, s0.snapshot_path) == (
        str(d / seg(0, ".index")), str(d / seg(0, ".timeindex")), None, None)
    assert (s50.index_path, s50.timeindex_path, s50.txnindex_path, s50.snapshot_path) == (
        str(d / seg(50, ".index")), None, str(d / seg(50, ".txnindex")), str(d / seg(50, ".snapshot")))
    assert Segment.at(s50.log_path) == s50
    assert p.find_file("leader-epoch-checkpoint") == str(d / "leader-epoch-checkpoint")
    assert p.find_file(seg(90, ".log")) is None  # not a regular file


def test_segment_at_refuses_a_name_kafka_cannot_load(tmp_path):
    with pytest.raises(FileNameError):
        Segment.at(str(tmp_path / "abc.log"))


def test_log_dir_partitions_sorted_and_only_partition_dirs(tmp_path):
    uid = "0123456789abcdef0123456789abcdef"
    for n in ("b-1", "a-10", "a-2", f"a-2.{uid}-delete", "remote-log-index-cache", "copy"):
        touch(tmp_path / n)
    touch(tmp_path, "meta.properties", "a-3")  # a file named like a partition is not one
    got = [(p.topic, p.partition, p.state, p.name) for p in LogDir(tmp_path).partitions()]
    assert got == [("a", 2, None, "a-2"), ("a", 2, "delete", f"a-2.{uid}-delete"), ("a", 10, None, "a-10"),
                   ("b", 1, None, "b-1")]
    ld = LogDir(tmp_path)
    assert ld.partition("a", 10).path == str(tmp_path / "a-10")
    assert ld.partition("a", 11) is None
    assert all(p.log_dir is ld for p in ld.partitions())


def test_log_dir_checkpoints_and_meta_properties(tmp_path):
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n2\nt 0 5\nt-x 1 17\n")
    (tmp_path / "meta.properties").write_text("#c\nversion=1\nnode.id=3\n")
    ld = LogDir(tmp_path)
    assert ld.offset_checkpoint("recovery-point-offset-checkpoint") == {("t", 0): 5, ("t-x", 1): 17}
    assert ld.offset_checkpoint("replication-offset-checkpoint") is None
    assert ld.meta_properties() == {"version": "1", "node.id": "3"}
    with pytest.raises(ValueError):
        ld.offset_checkpoint("meta.properties")
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n2\nt 0 5\n")  # says 2 entries, holds 1
    with pytest.raises(KafkaToolError):
        LogDir(tmp_path).offset_checkpoint("log-start-offset-checkpoint")


def test_real_log_dir_checkpoints(real):
    ld = LogDir(real_fixture("William0423__kafka/kafka-logs"))
    assert [(p.topic, p.partition) for p in ld.partitions()] == [("__consumer_offsets", 28), ("debug_topic", 0)]
    rp = ld.offset_checkpoint("recovery-point-offset-checkpoint")
    # the file's own lines (read by hand): "__consumer_offsets 28 8202", "debug_topic 0 40", 50 entries in all
    assert len(rp) == 52 and rp[("__consumer_offsets", 28)] == 8202 and rp[("debug_topic", 0)] == 40
    assert ld.meta_properties() == {"version": "0", "broker.id": "0"}


# ----------------------------------------------------------------------------- expand


def test_expand_file_dir_missing_and_errors_per_target(tmp_path, monkeypatch):
    logs = touch(tmp_path / "data")
    touch(logs, "meta.properties")
    touch(logs / "t-0", seg(0, ".log"))
    touch(logs / "t-1", seg(0, ".log"))
    touch(logs / "t-1" / "sub-0", seg(0, ".log"))  # below a segment's dir: not searched by default
    closed = touch(logs / "u-0", seg(0, ".log"))
    real_scandir = os.scandir

    def scandir(path):  # (root ignores permission bits: refuse the listing here instead)
        if os.fspath(path) == str(closed):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    targets = expand([str(logs / "t-0" / seg(0, ".log")), str(logs), str(tmp_path / "nope")])
    got = [(t.path, t.named, t.type, t.depth, type(t.error).__name__ if t.error else None) for t in targets]
    assert got == [
        (str(logs / "t-0" / seg(0, ".log")), True, EntryType.FILE, 0, None),
        (str(logs), True, EntryType.DIR, 0, None),
        (str(logs / "t-0"), False, EntryType.DIR, 1, None),
        (str(logs / "t-1"), False, EntryType.DIR, 1, None),
        (str(logs / "u-0"), False, EntryType.DIR, 1, "DirectoryError"),
        (str(tmp_path / "nope"), True, EntryType.MISSING, 0, "KafkaToolError"),
    ]
    assert targets[1].is_log_dir and not targets[1].holds_segments
    assert targets[2].holds_segments and targets[2].partition().segments()[0].base_offset == 0
    err = targets[4].error
    assert isinstance(err, DirectoryError) and err.path == str(logs / "u-0")
    assert str(err) == f"{logs / 'u-0'}: cannot list the directory: Permission denied"
    assert err.os_error.strerror == "Permission denied"


def test_expand_dir_of_log_dirs_symlinks_and_loops(tmp_path):
    root = tmp_path / "kafka"
    touch(root / "data-1" / "a-0", seg(0, ".log"))
    touch(root / "data-2" / "b-0", seg(0, ".log"))
    touch(root / "data-1", "meta.properties")
    elsewhere = touch(tmp_path / "elsewhere" / "c-0", seg(0, ".log"))
    (root / "data-2" / "c-0").symlink_to(elsewhere)
    (root / "data-2" / "c-0" / "loop-1").symlink_to(root / "data-2")  # back up: never followed twice
    paths = [t.path for t in expand([str(root)])]
    assert paths == [str(root), str(root / "data-1"), str(root / "data-1" / "a-0"), str(root / "data-2"),
                     str(root / "data-2" / "b-0")]  # symbolic links not followed below a named path
    paths = [t.path for t in expand([str(root / "data-2")], descend=descend_partition_named)]
    # c-0/loop-1 is data-2 again, a directory above it: not followed (the search would never end)
    assert paths == [str(root / "data-2"), str(root / "data-2" / "b-0"), str(root / "data-2" / "c-0")]


def test_expand_non_utf8_names_and_special_files(tmp_path):
    raw = os.fsencode(str(tmp_path)) + b"/t\xff-0"
    os.mkdir(raw)
    open(raw + b"/" + seg(0, ".log").encode(), "wb").close()
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "s.log"))
        targets = expand([str(tmp_path)])
        assert [os.fsencode(t.path) for t in targets] == [os.fsencode(str(tmp_path)), raw]
        assert targets[1].partition().topic == "t\udcff"
        kinds = {e.name: e.type for e in targets[0].entries}
        assert kinds["s.log"] is EntryType.SOCKET
        (tmp_path / "dangling.log").symlink_to(tmp_path / "gone")
        (e,) = [e for e in list_dir(str(tmp_path)) if e.name == "dangling.log"]
        assert (e.type, e.is_symlink) == (EntryType.MISSING, True)
        assert expand([str(tmp_path / "s.log")])[0].type is EntryType.SOCKET
    finally:
        sock.close()


def test_fixture_log_dir_is_found_whole():
    targets = expand([str(FIXTURES)])
    assert targets[0].path == str(FIXTURES) and targets[0].depth == 0
    parts = [t.partition() for t in targets[1:]]
    assert all(t.holds_segments for t in targets[1:])
    assert [p.name for p in parts] == sorted(n for n in os.listdir(FIXTURES) if (FIXTURES / n).is_dir())
    assert "txn-0" in [p.name for p in parts]
    txn = next(p for p in parts if p.name == "txn-0")
    (s,) = txn.segments()
    assert (s.base_offset, os.path.basename(s.txnindex_path)) == (100, seg(100, ".txnindex"))
    assert s.snapshot_path is None  # the snapshot is named after offset 152, not the segment's base 100


# ----------------------------------------------------------------------------- reading: helpers

import bisect
import shutil
import struct

from kafka.record.memory_records import MemoryRecords

from kafkatool.segment.walk import WalkStop

CLUSTER_METADATA = "greenlemonT__kafka-temp/data/kafka3/__cluster_metadata-0"


def kp_batches(data: bytes) -> list[tuple[int, int, object]]:
    """``(position, size, batch)`` of every batch, read by kafka-python (positions summed from its sizes)."""
    out, pos, mr = [], 0, MemoryRecords(bytes(data))
    while (b := mr.next_batch()) is not None:
        size = b.size_in_bytes
        out.append((pos, size, b))
        pos += size
    return out


def kp_last_offset(b) -> int:
    return b.last_offset if hasattr(b, "last_offset") else b._offset  # legacy: the entry's (last inner) offset


def kp_max_timestamp(b) -> int:
    """A batch's max timestamp; a legacy entry's own timestamp (kafka-python keeps it unexported; v0: -1)."""
    if hasattr(b, "max_timestamp"):
        return b.max_timestamp
    return b._timestamp if b.magic else -1


def kp_records(data: bytes, *, control: bool = False) -> list[tuple]:
    """``(offset, timestamp, key, value)`` of every record, read by kafka-python."""
    out = []
    for _pos, _size, b in kp_batches(data):
        if getattr(b, "is_control_batch", False) and not control:
            continue
        # (kafka-python gives a v0 message no timestamp; Kafka's NO_TIMESTAMP is -1)
        out.extend((r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value) for r in b)
    return out


def rec(r) -> tuple:
    return (r.offset, r.timestamp, r.key, r.value)


def hand_framing(data: bytes) -> list[tuple[int, int, int]]:
    """``(position, size, offset)`` of each entry, by the §3 framing alone: int64 offset, int32 size."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        if pos + 12 + size > len(data):
            break
        out.append((pos, 12 + size, offset))
        pos += 12 + size
    return out


def split_into_segments(src: Path, dest: Path, cuts: list[int]) -> list[int]:
    """Cut one real ``.log`` into segments at the given batch numbers (no indexes); their base offsets."""
    data = src.read_bytes()
    framing = hand_framing(data)
    dest.mkdir(parents=True)
    bounds = [0, *cuts, len(framing)]
    bases = []
    for a, b in zip(bounds, bounds[1:]):
        start = framing[a][0]
        end = framing[b - 1][0] + framing[b - 1][1]
        base = framing[a][2]
        (dest / seg(base, ".log")).write_bytes(data[start:end])
        bases.append(base)
    return bases


# ----------------------------------------------------------------------------- reading: segments


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(FIXTURES) if (FIXTURES / n).is_dir()))
def test_segment_batches_match_kafka_python_and_the_framing(name):
    (s,) = Partition(FIXTURES / name).segments()
    data = Path(s.log_path).read_bytes()
    got = [(b.position, b.size, b.offset, b.last_offset) for b in s.batches()]
    assert [(p, n, o) for p, n, o, _ in got] == hand_framing(data)
    assert [(p, n, kp_last_offset(b)) for p, n, b in kp_batches(data)] == [(p, n, last) for p, n, _, last in got]


def test_segment_reader_reports_where_it_stopped(tmp_path):
    src = FIXTURES / "v2-none-0" / seg(0, ".log")
    data = src.read_bytes()
    (tmp_path / seg(0, ".log")).write_bytes(data + data[:40])  # a truncated copy of the first batch
    s = Segment.at(tmp_path / seg(0, ".log"))
    reader = s.batches()
    assert len(list(reader)) == 4
    assert (reader.position, reader.stop, reader.trailing_bytes) == (len(data), WalkStop.TAIL, 40)
    # bounded in bytes: [930, 1886) holds exactly the second batch
    assert [(b.position, b.size) for b in s.batches(930, 1886)] == [(930, 956)]


def test_segment_framing_error_is_located_never_a_traceback(tmp_path):
    data = bytearray((FIXTURES / "v2-none-0" / seg(0, ".log")).read_bytes())
    struct.pack_into(">i", data, 930 + 8, 5)  # the second batch's size: below the 14-byte minimum
    (tmp_path / seg(0, ".log")).write_bytes(bytes(data))
    s = Segment.at(tmp_path / seg(0, ".log"))
    seen = []
    with pytest.raises(KafkaToolError) as e:
        for b in s.batches():
            seen.append(b.position)
    assert seen == [0]
    assert (e.value.path, e.value.position) == (s.log_path, 930)
    assert str(e.value).startswith(f"{s.log_path}:930: ")
    with pytest.raises(KafkaToolError) as e:
        list(s.records())
    assert e.value.position == 930


def test_segment_record_error_is_located_at_its_batch(tmp_path):
    data = bytearray((FIXTURES / "v2-gzip-0" / seg(0, ".log")).read_bytes())
    data[670 + 61 + 20] ^= 0xFF  # inside the second batch's gzip stream
    (tmp_path / seg(0, ".log")).write_bytes(bytes(data))
    s = Segment.at(tmp_path / seg(0, ".log"))
    assert len(list(s.batches())) == 4  # framing holds: only the CRC says so
    assert [b.crc_valid for b in s.batches()] == [True, False, True, True]
    with pytest.raises(KafkaToolError) as e:
        list(s.records())
    assert e.value.path == s.log_path and e.value.position >= 670


def test_segment_records_match_kafka_python():
    for name in ("v0-gzip-0", "v1-snappy-0", "v2-zstd-0", "txn-0", "golden-0"):
        (s,) = Partition(FIXTURES / name).segments()
        data = Path(s.log_path).read_bytes()
        assert [rec(r) for r in s.records()] == kp_records(data), name
        assert [rec(r) for r in s.records(control=True)] == kp_records(data, control=True), name


def test_segment_from_offset_with_and_without_an_index(tmp_path):
    src = FIXTURES / "txn-0"
    (s,) = Partition(src).segments()
    data = Path(s.log_path).read_bytes()
    batches = kp_batches(data)
    shutil.copy(s.log_path, tmp_path / seg(100, ".log"))
    bare = Segment.at(tmp_path / seg(100, ".log"))
    assert bare.index_path is None
    for offset in range(95, 160):
        # by hand: the first batch whose last offset is at least the offset asked
        want = next(((p, n) for p, n, b in batches if kp_last_offset(b) >= offset), None)
        for segment in (s, bare):
            first = next(iter(segment.batches(offset=offset)), None)
            assert (None if first is None else (first.position, first.size)) == want, (offset, segment)
        records = [rec(r) for r in s.records(offset=offset, control=True)]
        assert records == [r for r in kp_records(data, control=True) if r[0] >= offset]


def test_a_wrong_index_falls_back_to_a_scan(tmp_path):
    (s,) = Partition(FIXTURES / "v1-none-0").segments()
    data = Path(s.log_path).read_bytes()
    framing = hand_framing(data)
    shutil.copy(s.log_path, tmp_path / seg(0, ".log"))
    index = tmp_path / seg(0, ".index")
    bad = Segment.at(tmp_path / seg(0, ".log"))

    def first(offset):
        return next(iter(bad.batches(offset=offset))).position

    want = {o: framing[o][0] for o in (3, 20, 39)}  # one message per entry: offset n is entry n
    for entries in (
        [(20, 9999999)],  # past the end of the .log
        [(20, framing[20][0] + 5)],  # inside a batch
        [(20, framing[25][0])],  # a batch, but not the one holding offset 20
        [(0, 0), (30, framing[35][0])],
    ):
        index.write_bytes(b"".join(struct.pack(">ii", o, p) for o, p in entries))
        bad = Segment.at(tmp_path / seg(0, ".log"))
        assert bad.index_path == str(index)
        assert {o: first(o) for o in want} == want, entries
    index.write_bytes(b"")
    assert {o: first(o) for o in want} == want
    os.mkfifo(tmp_path / "fifo")
    assert {o: Segment(0, str(tmp_path / seg(0, ".log")), index_path=str(tmp_path / "fifo")).batches(offset=o).__next__().position
            for o in want} == want


def test_segment_from_timestamp_matches_a_scan():
    for name in ("v1-none-0", "v2-none-0", "txn-0"):
        (s,) = Partition(FIXTURES / name).segments()
        assert s.timeindex_path is not None
        batches = kp_batches(Path(s.log_path).read_bytes())
        stamps = sorted({kp_max_timestamp(b) + d for _p, _n, b in batches for d in (-1, 0, 1)} | {0})
        for t in stamps:
            want = next((p for p, _n, b in batches if kp_max_timestamp(b) >= t), None)
            got = next(iter(s.batches(timestamp=t)), None)
            assert (None if got is None else got.position) == want, (name, t)


def test_real_segments_index_lookups_agree_with_kafka_python(real):
    d = real_fixture(CLUSTER_METADATA)
    (s,) = Partition(d).segments()
    data = Path(s.log_path).read_bytes()
    batches = kp_batches(data)
    assert [(b.position, b.size) for b in s.batches()] == [(p, n) for p, n, _ in batches]
    lasts = [kp_last_offset(b) for _p, _n, b in batches]
    positions = [p for p, _n, _b in batches]
    # every 997th offset, and each offset the broker's own .index names
    entries = struct.iter_unpack(">ii", Path(s.index_path).read_bytes())
    offsets = sorted({*range(0, lasts[-1] + 2, 997), *(s.base_offset + rel for rel, _p in entries)})
    for offset in offsets:
        i = bisect.bisect_left(lasts, offset)
        want = positions[i] if i < len(positions) else None
        got = next(iter(s.batches(offset=offset)), None)
        assert (None if got is None else got.position) == want, offset
    stamps = [b.max_timestamp for _p, _n, b in batches]
    for t in sorted(set(stamps))[::211]:
        want = next(p for p, _n, b in batches if b.max_timestamp >= t)
        assert next(iter(s.batches(timestamp=t))).position == want, t


def test_real_legacy_records_from_an_offset(real):
    d = real_fixture("asayers__kafkalite/tests/test-data/fs-data/hamlet-gzip-0")
    (s,) = Partition(d).segments()
    data = Path(s.log_path).read_bytes()
    everything = kp_records(data)
    assert [rec(r) for r in s.records()] == everything
    for offset in (0, 1, 77, everything[-1][0], everything[-1][0] + 1):
        assert [rec(r) for r in s.records(offset=offset)] == [r for r in everything if r[0] >= offset]


# ----------------------------------------------------------------------------- reading: split


def check_split(s: Segment, n: int) -> list[tuple[int, int]]:
    ranges = s.split(n)
    size = os.path.getsize(s.log_path)
    assert 1 <= len(ranges) <= n
    assert ranges[0][0] == 0 and ranges[-1][1] == size
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(ranges, ranges[1:]))
    starts = {b.position for b in s.batches()}
    assert all(a in starts for a, _ in ranges[1:]), ranges
    assert [b.position for a, e in ranges for b in s.batches(a, e)] == sorted(starts)
    return ranges


def test_split_into_batch_aligned_ranges(tmp_path):
    (s,) = Partition(FIXTURES / "v0-none-0").segments()
    framing = hand_framing(Path(s.log_path).read_bytes())
    size = os.path.getsize(s.log_path)
    for n in (1, 2, 3, 7, 40, 41, 1000):
        ranges = check_split(s, n)
        # by hand: each cut is the first batch start at or after i * size / n
        want = sorted({next(p for p, _, _ in framing if p >= size * i // n) for i in range(1, n)
                       if any(p >= size * i // n for p, _, _ in framing)} - {0})
        assert [a for a, _ in ranges[1:]] == want, n
    shutil.copy(s.log_path, tmp_path / seg(0, ".log"))  # no index: the same ranges from the headers
    bare = Segment.at(tmp_path / seg(0, ".log"))
    assert bare.index_path is None
    assert [bare.split(n) for n in (2, 3, 7, 40)] == [s.split(n) for n in (2, 3, 7, 40)]
    (tmp_path / seg(0, ".index")).write_bytes(struct.pack(">ii", 5, framing[5][0] + 3))  # a wrong index
    assert Segment.at(tmp_path / seg(0, ".log")).split(3) == s.split(3)
    with pytest.raises(ValueError):
        s.split(0)


def test_split_trailing_bytes_go_to_the_last_range_and_empty_segments(tmp_path):
    data = (FIXTURES / "v2-none-0" / seg(0, ".log")).read_bytes()
    (tmp_path / seg(0, ".log")).write_bytes(data + b"\0" * 10)  # a short tail: not a batch
    s = Segment.at(tmp_path / seg(0, ".log"))
    ranges = check_split(s, 4)
    assert ranges[-1][1] == len(data) + 10
    (tmp_path / seg(9, ".log")).write_bytes(b"")
    assert Segment.at(tmp_path / seg(9, ".log")).split(4) == [(0, 0)]


def test_split_real_segment_with_its_index(real):
    (s,) = Partition(real_fixture(CLUSTER_METADATA)).segments()
    for n in (2, 8, 33):
        check_split(s, n)


# ----------------------------------------------------------------------------- reading: partitions


def test_partition_reads_across_segments(tmp_path, real):
    src = real_fixture(CLUSTER_METADATA) / seg(0, ".log")
    data = src.read_bytes()
    bases = split_into_segments(src, tmp_path / "__cluster_metadata-0", [9000, 20001])
    p = Partition(tmp_path / "__cluster_metadata-0")
    assert [s.base_offset for s in p.segments()] == bases
    everything = kp_records(data)
    batches = kp_batches(data)
    assert [(b.offset, b.size) for b in p.batches()] == [(b.base_offset, n) for _p, n, b in batches]
    assert [rec(r) for r in p.records()] == everything
    last = everything[-1][0]
    for start in (0, bases[1] - 1, bases[1], bases[2] + 3, last, last + 1):
        for end in (None, bases[1], bases[2] + 1, last + 5):
            got = [rec(r) for r in p.records(start, end_offset=end)]
            assert got == [r for r in everything if r[0] >= start and (end is None or r[0] < end)], (start, end)
    stamps = [b.max_timestamp for _p, _n, b in batches]
    for t in (stamps[0], stamps[9500], stamps[-1], stamps[-1] + 1):
        want = next((b.base_offset for _p, _n, b in batches if b.max_timestamp >= t), None)
        got = next(iter(p.batches(start_time=t)), None)
        assert (None if got is None else got.offset) == want, t


def test_partition_end_offset_keeps_a_legacy_wrapper_that_straddles_it(real):
    d = real_fixture("asayers__kafkalite/tests/test-data/fs-data/hamlet-gzip-0")
    everything = kp_records(Path(d / seg(0, ".log")).read_bytes())
    p = Partition(d)
    for end in (1, 50, 51, everything[-1][0]):
        assert [rec(r) for r in p.records(end_offset=end)] == [r for r in everything if r[0] < end], end


def test_a_missing_or_special_log_is_a_located_error_never_a_hang(tmp_path):
    gone = Segment(0, str(tmp_path / seg(0, ".log")))
    for call in (lambda: list(gone.batches()), lambda: list(gone.records()), lambda: gone.split(3),
                 lambda: list(gone.batches(offset=5))):
        with pytest.raises(KafkaToolError) as e:
            call()
        assert e.value.path == gone.log_path and "No such file or directory" in str(e.value)
    os.mkfifo(tmp_path / seg(7, ".log"))
    fifo = Segment.at(tmp_path / seg(7, ".log"))  # no writer: opening it to read would block
    with pytest.raises(KafkaToolError, match="is a FIFO, not a regular file"):
        list(fifo.batches())
    with pytest.raises(KafkaToolError, match="is a FIFO, not a regular file"):
        list(fifo.batches(timestamp=0))


def test_partition_records_match_aiokafka(real):
    """A second independent reader (aiokafka's compiled one) over real broker files of every magic."""
    from aiokafka.record.memory_records import MemoryRecords as AioRecords

    for rel in ("xpxwo100__bullShit/tmp/kafka-logs/TEST-TOPIC-0", "asayers__kafkalite/tests/test-data/fs-data/hamlet-snappy-0",
                "William0423__kafka/kafka-logs/__consumer_offsets-28", CLUSTER_METADATA):
        d = real_fixture(rel)
        mr, want = AioRecords((d / seg(0, ".log")).read_bytes()), []
        while (b := mr.next_batch()) is not None:
            if not b.is_control_batch:
                want.extend((r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value) for r in b)
        assert [rec(r) for r in Partition(d).records()] == want, rel
        middle = want[len(want) // 2][0]
        assert [rec(r) for r in Partition(d).records(middle)] == [r for r in want if r[0] >= middle], rel


# ----------------------------------------------------------------------------- garbage in: only our error out

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

V2_SAMPLE = (FIXTURES / "v2-gzip-0" / seg(0, ".log")).read_bytes()
V1_SAMPLE = (FIXTURES / "v1-snappy-0" / seg(0, ".log")).read_bytes()


@st.composite
def damaged(draw):
    """A real segment (v2 or legacy) with bytes overwritten, cut short or random, and an index of random entries."""
    data = bytearray(draw(st.sampled_from([V2_SAMPLE, V1_SAMPLE])))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(data) - 1))
        data[at : at + 4] = draw(st.binary(min_size=1, max_size=4))
    data = data[: draw(st.integers(0, len(data)))]
    if draw(st.booleans()):
        data = bytearray(draw(st.binary(max_size=300)))
    index = b"".join(struct.pack(">ii", draw(st.integers(-5, 60)), draw(st.integers(-10, 5000)))
                     for _ in range(draw(st.integers(0, 4))))
    timeindex = b"".join(struct.pack(">qi", draw(st.integers(-1, 1_700_000_000_100)), draw(st.integers(-5, 60)))
                         for _ in range(draw(st.integers(0, 3))))
    return bytes(data), index, timeindex


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damaged(), st.integers(-1, 60), st.integers(-1, 1_700_000_000_100), st.integers(1, 9))
def test_garbage_raises_only_kafkatool_errors(tmp_path, files, offset, timestamp, n):
    data, index, timeindex = files
    d = tmp_path / "t-0"
    d.mkdir(exist_ok=True)
    (d / seg(0, ".log")).write_bytes(data)
    (d / seg(0, ".index")).write_bytes(index)
    (d / seg(0, ".timeindex")).write_bytes(timeindex)
    s = Segment.at(d / seg(0, ".log"))
    calls = (
        lambda: [(b.position, b.last_offset, b.max_timestamp) for b in s.batches()],
        lambda: [r.offset for r in s.records(control=True)],
        lambda: [b.position for b in s.batches(offset=offset)],
        lambda: [b.position for b in s.batches(timestamp=timestamp)],
        lambda: [r.offset for r in Partition(d).records(offset, end_offset=offset + 7)],
        lambda: [r.offset for r in Partition(d).records(start_time=timestamp)],
    )
    results = []
    for call in calls:
        try:
            results.append(call())
        except KafkaToolError as e:
            assert e.path == s.log_path and e.position is not None, e
            results.append(None)
    ranges = s.split(n)  # never raises for a readable file: a damaged header only ends the cuts
    assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
    whole = results[0]
    if whole is not None:
        positions = [p for p, _, _ in whole]
        # the index never changes what is read: from an offset, exactly what a scan finds
        first = next((i for i, (_, last, _) in enumerate(whole) if last >= offset), len(whole))
        assert results[2] == positions[first:]
        # a time index is trusted as the broker trusts it: it may start late, never early
        if results[3] is not None:
            assert results[3] == positions[len(positions) - len(results[3]):]
        assert [b.position for a, e in ranges for b in s.batches(a, e)] == positions
