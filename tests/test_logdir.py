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
from kafkatool.segment.files import FileKind, segment_order
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


# ----------------------------------------------------------------------------- names and order


def test_segment_order_puts_each_segments_files_together_by_offset():
    names = [
        "leader-epoch-checkpoint", seg(10, ".snapshot"), seg(10, ".index"), seg(2, ".timeindex"),
        seg(10, ".log"), seg(2, ".log"), seg(2, ".txnindex"), seg(2, ".index"), "partition.metadata",
    ]
    assert sorted(names, key=segment_order) == [
        seg(2, ".log"), seg(2, ".index"), seg(2, ".timeindex"), seg(2, ".txnindex"),
        seg(10, ".log"), seg(10, ".index"), seg(10, ".snapshot"),
        "leader-epoch-checkpoint", "partition.metadata",
    ]
    # dump lists the producer snapshots after every segment
    assert sorted(names, key=lambda n: segment_order(n, snapshots_last=True))[4:7] == [
        seg(10, ".log"), seg(10, ".index"), seg(10, ".snapshot"),
    ]
    assert sorted([seg(10, ".snapshot"), seg(12, ".log")], key=lambda n: segment_order(n, snapshots_last=True)) == [
        seg(12, ".log"), seg(10, ".snapshot"),
    ]


def test_segment_order_kraft_snapshots_by_end_offset_and_odd_digits():
    a, b = "00000000000000000100-0000000001.checkpoint", "00000000000000000007-0000000003.checkpoint"
    assert sorted([a, "bootstrap.checkpoint", b], key=segment_order) == [b, a, "bootstrap.checkpoint"]
    # a superscript two is a digit but not a decimal: it sorts with the other names, never crashes
    assert segment_order("\u00b2.log")[0] == 2


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
