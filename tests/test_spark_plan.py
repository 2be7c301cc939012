"""kafkatool.spark.plan: options, paths, offset pruning, splits, packing, findings and stats plans.

No Spark here: planning is plain Python on the driver. The log dirs are built in tmp_path with
kafkatool's v2 encoder; the writer records where it put each batch, and those positions (plus
kafka-python's own batch parser) are the independent truth the split cuts are checked against.
Expected tasks and slices are written out by hand from the sizes the writer reports.
"""

from __future__ import annotations

import os
import pickle
import random
import re
import shutil
import struct

import pytest

from conftest import FIXTURES
from kafkatool.record.v2 import RecordSpec, encode_batch
from kafkatool.segment.index import IndexBuilder
from kafkatool.segment.logdir import Segment
from kafkatool.spark import plan as P
from kafkatool.spark.plan import (
    OPEN_COST_BYTES,
    FindingsTask,
    ReadOptions,
    ReadTask,
    SegmentSlice,
    expand_paths,
    plan,
    plan_findings,
    plan_stats,
    segment_may_hold,
)

T0 = 1_700_000_000_000
MiB = 1 << 20


# ----------------------------------------------------------------------------- building log dirs


def write_segment(part_dir, base: int, counts: list[int], value_size: int = 100, seed: int = 0,
                  index: bool = False) -> list[int]:
    """A segment ``<base>.log`` of v2 batches holding ``counts[i]`` records each, consecutive
    offsets from ``base``; returns each batch's byte position (the independent truth)."""
    rng = random.Random(seed * 1_000_003 + base)
    out = bytearray()
    positions = []
    offset = base
    for n in counts:
        recs = [RecordSpec(offset + i, T0 + offset + i, b"k%d" % (offset + i), rng.randbytes(value_size))
                for i in range(n)]
        positions.append(len(out))
        out += encode_batch(recs, base_offset=offset)
        offset += n
    os.makedirs(part_dir, exist_ok=True)
    log = os.path.join(part_dir, f"{base:020d}.log")
    with open(log, "wb") as f:
        f.write(out)
    if index:
        builder = IndexBuilder(base, index_interval_bytes=4096)
        for b in Segment.at(log).batches():
            builder.add_batch(b.position, b.size, b.last_offset, b.max_timestamp)
        idx, tidx = builder.finish()
        with open(log[:-4] + ".index", "wb") as f:
            f.write(idx)
        with open(log[:-4] + ".timeindex", "wb") as f:
            f.write(tidx)
    return positions


def make_log_dir(root) -> str:
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "meta.properties"), "w") as f:
        f.write("version=1\nnode.id=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\n")
    return str(root)


def size_of(path) -> int:
    return os.path.getsize(path)


def slices(tasks):
    return [s for t in tasks for s in t.slices]


def where(tasks):
    """(partition dir name, segment file name, start, end, bytes) of every slice, task by task."""
    return [[(os.path.basename(s.partition_path), os.path.basename(s.log_path), s.start, s.end, s.bytes)
             for s in t.slices] for t in tasks]


# ----------------------------------------------------------------------------- options


def test_defaults_and_every_option_parsed():
    assert ReadOptions.from_options({}) == ReadOptions()
    o = ReadOptions.from_options({
        "kind": "Batches", "topics": "orders, payments", "partitions": "0,7, 3", "startOffset": "10",
        "endOffset": "20", "startTime": "1700000000000", "endTime": "2023-11-14T22:13:21Z",
        "includeHeaders": "false", "verifyCrc": "FALSE", "deep": "true", "maxPartitionBytes": "64m",
    })
    assert o == ReadOptions(kind="batches", topics=frozenset({"orders", "payments"}), partitions=frozenset({0, 3, 7}),
                            start_offset=10, end_offset=20, start_time=1_700_000_000_000, end_time=1_700_000_001_000,
                            include_headers=False, verify_crc=False, deep=True, max_partition_bytes=64 << 20)


def test_option_keys_are_case_insensitive_and_spark_keys_ignored():
    o = ReadOptions.from_options({"STARTOFFSET": "5", "maxpartitionbytes": "1g", "path": "/x", "paths": '["/a"]',
                                  "mergeSchema": "true"})
    assert (o.start_offset, o.max_partition_bytes) == (5, 1 << 30)


@pytest.mark.parametrize("value, expected", [
    ("134217728", 134217728), ("128m", 128 << 20), ("128M", 128 << 20), ("1g", 1 << 30), ("512k", 512 << 10),
    ("1mb", 1 << 20), ("1MiB", 1 << 20), ("1024", 1024), ("2t", 2 << 40),
])
def test_max_partition_bytes_units(value, expected):
    assert ReadOptions.from_options({"maxPartitionBytes": value}).max_partition_bytes == expected


@pytest.mark.parametrize("value, expected", [
    ("1700000000000", 1_700_000_000_000),
    ("-5", -5),
    ("2023-11-14T22:13:20Z", 1_700_000_000_000),            # the fixtures' T0 (fixtures/README.md)
    ("2023-11-14T22:13:20", 1_700_000_000_000),             # no zone: UTC
    ("2023-11-14T23:13:20+01:00", 1_700_000_000_000),
    ("2023-11-14T22:13:20.123Z", 1_700_000_000_123),
    ("2023-11-14T22:13:20.1231Z", 1_700_000_000_124),       # a fraction of a millisecond rounds up
    ("1969-12-31T23:59:59.9995Z", 0),                       # -0.5 ms rounds up to 0
    ("2023-11-14", 1_699_920_000_000),
])
def test_times(value, expected):
    assert ReadOptions.from_options({"startTime": value}).start_time == expected
    assert ReadOptions.from_options({"endTime": value}).end_time == expected


@pytest.mark.parametrize("options, words", [
    ({"kind": "rows"}, ["option kind='rows'", "records, batches, findings, stats"]),
    ({"topics": "a,,b"}, ["option topics='a,,b'", "empty topic name"]),
    ({"partitions": "1,x"}, ["option partitions='1,x'", "'x'"]),
    ({"partitions": "-1"}, ["option partitions='-1'"]),
    ({"startOffset": "ten"}, ["option startOffset='ten'", "offset"]),
    ({"endOffset": "-3"}, ["option endOffset='-3'"]),
    ({"startTime": "yesterday"}, ["option startTime='yesterday'", "ISO-8601"]),
    ({"includeHeaders": "maybe"}, ["option includeHeaders='maybe'", "boolean"]),
    ({"maxPartitionBytes": "12"}, ["option maxPartitionBytes='12'", "minimum of 1024"]),
    ({"maxPartitionBytes": "lots"}, ["option maxPartitionBytes='lots'", "byte size"]),
    ({"startOffset": "10", "endOffset": "9"}, ["option endOffset='9'", "startOffset='10'"]),
    ({"startTime": "10", "endTime": "9"}, ["option endTime='9'", "startTime='10'"]),
    ({"startOfset": "1"}, ["option startOfset='1'", "did you mean startOffset?"]),
    ({"maxPartitionByte": "1g"}, ["did you mean maxPartitionBytes?"]),
    ({"startingOffsets": "earliest"}, ["option startingOffsets='earliest'", "Spark's Kafka source", "startOffset"]),
    ({"subscribe": "orders"}, ["option subscribe='orders'", "topics"]),
    ({"startOffset": "1", "STARTOFFSET": "2"}, ["given twice"]),
])
def test_bad_options_name_the_option_and_the_value(options, words):
    with pytest.raises(ValueError) as e:
        ReadOptions.from_options(options)
    msg = str(e.value)
    assert msg.startswith("kafka_segments: option ")
    for w in words:
        assert w in msg


def test_equal_bounds_are_an_empty_range_not_an_error():
    o = ReadOptions.from_options({"startOffset": "5", "endOffset": "5"})
    assert o.empty


def test_dataclass_checks_kind_and_size():
    with pytest.raises(ValueError, match="kind 'nope'"):
        ReadOptions(kind="nope")
    with pytest.raises(ValueError, match="below 1024"):
        ReadOptions(max_partition_bytes=100)
    assert ReadOptions(topics=["a", "b"]).topics == frozenset({"a", "b"})


def test_restrict_intersects():
    base = ReadOptions(topics=frozenset({"a", "b"}), start_offset=10, end_offset=100, start_time=5)
    r = base.restrict(topics=["b", "c"], partitions=[1, 2], offsets=(20, None), times=(None, 50))
    assert r == ReadOptions(topics=frozenset({"b"}), partitions=frozenset({1, 2}), start_offset=20, end_offset=100,
                            start_time=5, end_time=50)
    assert base.start_offset == 10  # frozen: a new object
    r2 = r.restrict(offsets=(0, 30), partitions=[2, 3])
    assert (r2.start_offset, r2.end_offset, r2.partitions) == (20, 30, frozenset({2}))
    assert not r2.empty
    assert r2.restrict(topics=["z"]).empty
    assert r2.restrict(partitions=[]).empty
    assert r2.restrict(offsets=(30, None)).empty
    assert r2.restrict(times=(50, None)).empty
    assert not r2.restrict(times=(49, None)).empty
    assert base.restrict() == base


def test_selects():
    o = ReadOptions(topics=frozenset({"a"}), partitions=frozenset({1}))
    assert o.selects("a", 1)
    assert not o.selects("a", 2)
    assert not o.selects("b", 1)
    assert not o.selects(None, None)  # SQL: NULL IN (...) is not true
    assert ReadOptions().selects(None, None)


def test_options_and_plans_pickle(tmp_path):
    d = make_log_dir(tmp_path / "ld")
    write_segment(os.path.join(d, "t-0"), 0, [3, 3])
    opts = ReadOptions.from_options({"topics": "t", "startTime": "5"})
    assert pickle.loads(pickle.dumps(opts)) == opts
    tasks = plan(d, opts)
    assert pickle.loads(pickle.dumps(tasks)) == tasks
    ft = plan_findings(d)
    assert pickle.loads(pickle.dumps(ft)) == ft


# ----------------------------------------------------------------------------- offset pruning


@pytest.mark.parametrize("base, nxt, start, end, holds", [
    (10, 20, None, None, True),
    (10, 20, None, 10, False),   # base == end: every offset of the segment is >= end
    (10, 20, None, 11, True),
    (10, 20, 20, None, False),   # next_base == start: the segment's last offset is 19
    (10, 20, 19, None, True),    # next_base - 1 == start
    (10, None, 10**12, None, True),  # the last segment may hold anything from its base
    (10, 20, 0, 5, False),
    (-1, None, 5, 6, True),      # base offset unknown (a copy named alone): never pruned
])
def test_segment_may_hold(base, nxt, start, end, holds):
    assert segment_may_hold(base, nxt, start, end) is holds


@pytest.fixture
def three_segments(tmp_path):
    """t-0 with segments at 0, 10, 20 (10 records each, two batches of 5)."""
    d = make_log_dir(tmp_path / "ld")
    for base in (0, 10, 20):
        write_segment(os.path.join(d, "t-0"), base, [5, 5])
    return d


@pytest.mark.parametrize("start, end, bases", [
    (None, None, [0, 10, 20]),
    (10, None, [10, 20]),     # segment 0 holds 0..9: its next base == start
    (9, None, [0, 10, 20]),   # offset 9 is segment 0's last
    (None, 20, [0, 10]),      # segment 20's base == end
    (None, 21, [0, 10, 20]),
    (19, 20, [10]),
    (20, 21, [20]),
    (10, 10, []),             # empty range
    (0, 1, [0]),
    (1000, None, [20]),       # past the end: the last segment may still hold it (reader decides)
])
def test_offset_pruning_boundaries(three_segments, start, end, bases):
    tasks = plan(three_segments, ReadOptions(start_offset=start, end_offset=end))
    got = slices(tasks)
    assert [s.base_offset for s in got] == bases
    nexts = {0: 10, 10: 20, 20: None}
    assert [s.next_base_offset for s in got] == [nexts[b] for b in bases]


# ----------------------------------------------------------------------------- paths


@pytest.fixture
def cluster(tmp_path):
    """Two brokers' log dirs: kafka-1 (a-0, a-1, b-0, a-0's -delete and -future twins, a stray copy
    dir 'copy' holding a segment) and kafka-2 (a-2); plus a loose .log file."""
    k1 = make_log_dir(tmp_path / "data" / "kafka-1")
    k2 = make_log_dir(tmp_path / "data" / "kafka-2")
    write_segment(os.path.join(k1, "a-0"), 0, [2])
    write_segment(os.path.join(k1, "a-1"), 0, [2])
    write_segment(os.path.join(k1, "b-0"), 0, [2])
    write_segment(os.path.join(k1, "a-0.0123456789abcdef0123456789abcdef-delete"), 0, [2])
    write_segment(os.path.join(k1, "a-0.0123456789abcdef0123456789abcdef-future"), 0, [2])
    write_segment(os.path.join(k1, "copy"), 0, [2])
    write_segment(os.path.join(k2, "a-2"), 0, [2])
    write_segment(str(tmp_path / "loose"), 7, [2])
    return tmp_path


def parts(tasks):
    return [os.path.relpath(s.partition_path, s.partition_path.split("/data/")[0]) if "/data/" in s.partition_path
            else os.path.basename(s.partition_path) for s in slices(tasks)]


def test_one_log_dir_reads_live_partitions_in_name_order(cluster):
    tasks = plan(str(cluster / "data" / "kafka-1"), ReadOptions())
    assert [os.path.basename(s.partition_path) for s in slices(tasks)] == ["a-0", "a-1", "b-0"]
    s = slices(tasks)[1]
    assert (s.topic, s.partition, s.base_offset, s.start, s.end, s.error) == ("a", 1, 0, 0, None, None)
    assert s.bytes == size_of(s.log_path)


def test_comma_separated_glob_and_directory_of_log_dirs(cluster):
    k1, k2 = str(cluster / "data" / "kafka-1"), str(cluster / "data" / "kafka-2")
    want = ["data/kafka-1/a-0", "data/kafka-1/a-1", "data/kafka-1/b-0", "data/kafka-2/a-2"]
    assert parts(plan(f"{k1},{k2}", ReadOptions())) == want
    assert parts(plan(f" {k1} , {k2} ,", ReadOptions())) == want
    assert parts(plan(str(cluster / "data" / "kafka-*"), ReadOptions())) == want
    assert parts(plan([k1, k2], ReadOptions())) == want
    assert parts(plan(str(cluster / "data"), ReadOptions())) == want  # a directory of log dirs
    # given twice (and overlapping): each partition once
    assert parts(plan(f"{k1},{k1},{k1}/a-0", ReadOptions())) == want[:3]
    assert parts(plan(f"{k2},{k1}", ReadOptions())) == want[3:] + want[:3]  # the order given


def test_partition_dir_and_transitional_dirs_named(cluster):
    k1 = cluster / "data" / "kafka-1"
    assert [os.path.basename(s.partition_path) for s in slices(plan(str(k1 / "b-0"), ReadOptions()))] == ["b-0"]
    # a -delete dir or an oddly named copy is read when named, never when met in a log dir
    named = plan(f"{k1}/a-0.0123456789abcdef0123456789abcdef-delete,{k1}/copy", ReadOptions())
    got = slices(named)
    assert [os.path.basename(s.partition_path) for s in got] == ["a-0.0123456789abcdef0123456789abcdef-delete", "copy"]
    assert [(s.topic, s.partition) for s in got] == [("a", 0), (None, None)]


def test_single_log_file(cluster):
    log = str(cluster / "data" / "kafka-1" / "b-0" / f"{0:020d}.log")
    (s,) = slices(plan(log, ReadOptions()))
    assert (s.topic, s.partition, s.partition_path, s.log_path, s.base_offset, s.next_base_offset) == \
        ("b", 0, log, log, 0, None)
    loose = str(cluster / "loose" / f"{7:020d}.log")
    (s,) = slices(plan(loose, ReadOptions()))
    assert (s.topic, s.partition, s.base_offset) == (None, None, 7)
    assert slices(plan(loose, ReadOptions(end_offset=7))) == []
    # a copy under a name that is no offset: base unknown, read whole whatever the offsets
    other = str(cluster / "copy.log")
    shutil.copy(loose, other)
    (s,) = slices(plan(other, ReadOptions(start_offset=10**9, end_offset=10**9 + 1)))
    assert s.base_offset == P.UNKNOWN_BASE_OFFSET


def test_topic_and_partition_filters(cluster):
    d = str(cluster / "data")
    assert parts(plan(d, ReadOptions(topics=frozenset({"a"})))) == ["data/kafka-1/a-0", "data/kafka-1/a-1",
                                                                     "data/kafka-2/a-2"]
    assert parts(plan(d, ReadOptions(partitions=frozenset({0})))) == ["data/kafka-1/a-0", "data/kafka-1/b-0"]
    assert parts(plan(d, ReadOptions(topics=frozenset({"a"}), partitions=frozenset({2})))) == ["data/kafka-2/a-2"]
    assert plan(d, ReadOptions(topics=frozenset({"zzz"}))) == []


def test_path_errors_name_the_path(tmp_path, cluster):
    missing = str(tmp_path / "nope")
    with pytest.raises(ValueError, match=re.escape(f"kafka_segments: {missing}: no such file or directory")):
        plan(missing, ReadOptions())
    k1 = str(cluster / "data" / "kafka-1")
    with pytest.raises(ValueError, match=re.escape(f"{missing}: no such")):
        plan(f"{k1},{missing}", ReadOptions())
    pattern = str(tmp_path / "kafka-*")
    with pytest.raises(ValueError, match=re.escape(f"{pattern}: no path matches this pattern")):
        plan(pattern, ReadOptions())
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=re.escape(f"{empty}: nothing Kafka found here")):
        plan(str(empty), ReadOptions())
    with pytest.raises(ValueError, match=re.escape(f"{empty}: nothing Kafka found here")):
        plan_stats(str(empty))
    with pytest.raises(ValueError, match=re.escape(f"{empty}: nothing Kafka found here")):
        plan_findings(str(empty))
    meta = os.path.join(k1, "meta.properties")
    with pytest.raises(ValueError, match=re.escape(f"{meta}: not a segment")):
        plan(meta, ReadOptions())
    with pytest.raises(ValueError, match="no path given"):
        plan(" , ", ReadOptions())
    os.symlink(str(tmp_path / "gone"), str(tmp_path / "dangling"))
    with pytest.raises(ValueError, match="dangling: a symbolic link to nothing"):
        expand_paths(str(tmp_path / "dangling"))


def test_expand_paths(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "a").mkdir()
    (tmp_path / "with,comma").mkdir()
    (tmp_path / "x[1]").mkdir()
    assert expand_paths(str(tmp_path / "*")) == sorted(str(tmp_path / n) for n in ("a", "b", "with,comma", "x[1]"))
    assert expand_paths(str(tmp_path / "with,comma")) == [str(tmp_path / "with,comma")]
    assert expand_paths(str(tmp_path / "x[1]")) == [str(tmp_path / "x[1]")]  # a literal name with glob characters
    assert expand_paths(f"{tmp_path}/b,{tmp_path}/a,{tmp_path}/b") == [str(tmp_path / "b"), str(tmp_path / "a")]


def test_non_utf8_names_do_not_crash(tmp_path):
    d = make_log_dir(tmp_path / "ld")
    bad = os.path.join(os.fsencode(d), b"t\xff-0")
    os.mkdir(bad)
    write_segment(os.fsdecode(bad), 0, [2])
    tasks = plan(d, ReadOptions())
    (s,) = slices(tasks)
    assert s.topic == "t\udcff" and s.partition == 0
    assert os.fsencode(s.log_path).startswith(bad)
    assert pickle.loads(pickle.dumps(tasks)) == tasks
    assert plan(d, ReadOptions(topics=frozenset({"t\udcff"}))) == tasks
    assert len(plan_findings(d)) == 1 and len(slices(plan_stats(d))) == 1


def test_deterministic(cluster):
    d = str(cluster / "data")
    assert plan(d, ReadOptions()) == plan(d, ReadOptions())
    assert plan_findings(d) == plan_findings(d)


# ----------------------------------------------------------------------------- splitting


def check_batch_start(log: str, pos: int) -> None:
    """kafka-python parses a whole v2 batch with a valid CRC at ``pos`` (independent of kafkatool)."""
    from kafka.record.default_records import DefaultRecordBatch

    with open(log, "rb") as f:
        f.seek(pos)
        head = f.read(12)
        (length,) = struct.unpack(">i", head[8:12])
        data = head + f.read(length)
    assert len(data) == 12 + length
    batch = DefaultRecordBatch(bytearray(data))
    assert batch.validate_crc()


def expected_cuts(positions: list[int], size: int, n: int) -> list[int]:
    """The first batch start at or after each share ``size * i // n`` (Segment.split's rule)."""
    out = []
    for i in range(1, n):
        want = size * i // n
        nxt = next((p for p in positions if p >= want), None)
        if nxt is not None and (not out or nxt > out[-1]):
            out.append(nxt)
    return out


@pytest.mark.parametrize("index", [False, True])
def test_split_cuts_at_batch_starts_and_covers_the_segment(tmp_path, index):
    d = make_log_dir(tmp_path / "ld")
    part = os.path.join(d, "t-0")
    positions = write_segment(part, 0, [3] * 200, value_size=300, index=index)  # ~200 batches of ~1 KiB
    log = os.path.join(part, f"{0:020d}.log")
    size = size_of(log)
    limit = 64 << 10
    n = -(-size // limit)
    tasks = plan(d, ReadOptions(max_partition_bytes=limit))
    got = slices(tasks)
    cuts = expected_cuts(positions, size, n)
    assert n >= 3 and len(cuts) == n - 1
    assert [s.start for s in got] == [0, *cuts]
    assert [s.end for s in got] == [*cuts, None]
    assert sum(s.bytes for s in got) == size
    assert [s.bytes for s in got] == [b - a for a, b in zip([0, *cuts], [*cuts, size])]
    for s in got:
        check_batch_start(log, s.start)
        assert (s.base_offset, s.next_base_offset, s.error) == (0, None, None)
    # each slice alone: every one is heavier than the limit with its open cost
    assert [len(t.slices) for t in tasks] == [1] * n
    assert [t.bytes for t in tasks] == [s.bytes for s in got]
    # reading the slices in order gives every batch once
    seg = Segment.at(log)
    walked = [b.position for s in got for b in seg.batches(s.start, s.end)]
    assert walked == positions


def test_a_segment_within_the_limit_is_not_split(tmp_path):
    d = make_log_dir(tmp_path / "ld")
    write_segment(os.path.join(d, "t-0"), 0, [3] * 50, value_size=300)
    size = size_of(os.path.join(d, "t-0", f"{0:020d}.log"))
    assert [(s.start, s.end) for s in slices(plan(d, ReadOptions(max_partition_bytes=size)))] == [(0, None)]
    assert len(slices(plan(d, ReadOptions(max_partition_bytes=size - 1)))) == 2


def damaged_segment(tmp_path, how: str):
    d = make_log_dir(tmp_path / "ld")
    part = os.path.join(d, "t-0")
    positions = write_segment(part, 0, [3] * 200, value_size=300)
    log = os.path.join(part, f"{0:020d}.log")
    data = bytearray(open(log, "rb").read())
    size = len(data)
    if how == "garbage":  # random bytes from 40% to 45%: size fields that frame nothing
        rng = random.Random(7)
        a, b = size * 40 // 100, size * 45 // 100
        data[a:b] = rng.randbytes(b - a)
        bad = (a, b)
    elif how == "zeros":  # a zeroed region (a size field of 0 never frames)
        a, b = size * 30 // 100, size * 35 // 100
        data[a:b] = bytes(b - a)
        bad = (a, b)
    elif how == "truncated":  # the last batch cut short
        data = data[: positions[-1] + 40]
        bad = (positions[-1], len(data))
    elif how == "big_size":  # one batch's size field says more than the file holds
        p = positions[100]
        data[p + 8:p + 12] = struct.pack(">i", 1 << 30)
        bad = (p, size)
    else:
        raise AssertionError(how)
    with open(log, "wb") as f:
        f.write(data)
    return d, log, positions, bad


@pytest.mark.parametrize("how", ["garbage", "zeros", "truncated", "big_size"])
def test_damaged_segments_plan_without_raising(tmp_path, how):
    d, log, positions, (bad_lo, bad_hi) = damaged_segment(tmp_path, how)
    size = size_of(log)
    got = slices(plan(d, ReadOptions(max_partition_bytes=32 << 10)))
    assert got[0].start == 0 and got[-1].end is None
    assert [s.end for s in got[:-1]] == [s.start for s in got[1:]]  # contiguous
    assert sum(s.bytes for s in got) == size
    for s in got:
        assert s.error is None
        assert s.start in positions  # a real batch start ...
        assert not bad_lo <= s.start < bad_hi or s.start == bad_lo == 0  # ... never inside the damage
        check_batch_start(log, s.start)
    # the cuts before the damage are the undamaged split's (share by share)
    n = -(-size // (32 << 10))
    before = [c for c in expected_cuts(positions, size, n) if c < bad_lo]
    assert [s.start for s in got[1:] if s.start < bad_lo] == before
    assert len(got) >= 2  # damage ends the cuts, not the planning


def test_a_cut_whose_batch_fails_its_crc_is_dropped(tmp_path):
    """A cut is kept only where a whole batch with a valid CRC starts; planning checks it."""
    d = make_log_dir(tmp_path / "ld")
    part = os.path.join(d, "t-0")
    positions = write_segment(part, 0, [3] * 200, value_size=300)
    log = os.path.join(part, f"{0:020d}.log")
    size = size_of(log)
    limit = 64 << 10
    n = -(-size // limit)
    cuts = expected_cuts(positions, size, n)
    data = bytearray(open(log, "rb").read())
    data[cuts[1] + 100] ^= 0xFF  # inside the records of the batch at the second cut: its CRC fails
    open(log, "wb").write(data)
    got = slices(plan(d, ReadOptions(max_partition_bytes=limit)))
    assert [s.start for s in got] == [0, cuts[0], *cuts[2:]]
    assert sum(s.bytes for s in got) == size


def test_a_segment_that_cannot_be_split_stays_whole(tmp_path, monkeypatch):
    d = make_log_dir(tmp_path / "ld")
    write_segment(os.path.join(d, "t-0"), 0, [3] * 100, value_size=300)

    def refuse(self, n, *, exact=True):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(Segment, "split", refuse)
    got = slices(plan(d, ReadOptions(max_partition_bytes=16 << 10)))
    assert [(s.start, s.end, s.error) for s in got] == [(0, None, None)]


def test_one_huge_batch_is_one_slice(tmp_path):
    d = make_log_dir(tmp_path / "ld")
    write_segment(os.path.join(d, "t-0"), 0, [1], value_size=200_000)
    got = slices(plan(d, ReadOptions(max_partition_bytes=64 << 10)))
    assert [(s.start, s.end) for s in got] == [(0, None)]


# ----------------------------------------------------------------------------- packing


def test_packing_golden(tmp_path):
    """Small segments packed in order with a 4 MiB open cost each; a partition's slices in
    offset order; a slice heavier than the limit alone."""
    d = make_log_dir(tmp_path / "ld")
    for base in (0, 10, 20, 30, 40):
        write_segment(os.path.join(d, "a-0"), base, [10], value_size=50)
    write_segment(os.path.join(d, "b-0"), 0, [10], value_size=50)
    write_segment(os.path.join(d, "c-0"), 0, [5] * 1100, value_size=1000)  # ~5.3 MiB, one segment
    write_segment(os.path.join(d, "d-0"), 0, [10], value_size=50)
    small = size_of(os.path.join(d, "a-0", f"{0:020d}.log"))
    big = size_of(os.path.join(d, "c-0", f"{0:020d}.log"))
    assert small < 2000 and 5 * MiB < big < 6 * MiB
    # three small slices fit (3 * (small + 4 MiB)); a fourth does not
    limit = 3 * (OPEN_COST_BYTES + 2000)
    tasks = plan(d, ReadOptions(max_partition_bytes=limit))
    a = lambda b: ("a-0", f"{b:020d}.log", 0, None, size_of(os.path.join(d, "a-0", f"{b:020d}.log")))  # noqa: E731
    assert where(tasks) == [
        [a(0), a(10), a(20)],
        [a(30), a(40), ("b-0", f"{0:020d}.log", 0, None, small)],
        # c-0 (big + open cost, ~9.3 MiB) is within the limit (not split), but d-0's 4 MiB more is not
        [("c-0", f"{0:020d}.log", 0, None, big)],
        [("d-0", f"{0:020d}.log", 0, None, small)],
    ]
    assert [t.bytes for t in tasks] == [sum(x[4] for x in w) for w in where(tasks)]
    assert tasks[2].bytes == big
    # every slice in one task when the limit allows
    assert where(plan(d, ReadOptions(max_partition_bytes=1 << 30))) == [sum(where(tasks), [])]


def test_many_tiny_files_are_not_one_task(tmp_path):
    d = make_log_dir(tmp_path / "ld")
    for p in range(64):
        write_segment(os.path.join(d, f"t-{p}"), 0, [1], value_size=10)
    tasks = plan(d, ReadOptions())  # 128 MiB holds 31 files of (~100 bytes + 4 MiB): 32 weigh just over
    assert [len(t.slices) for t in tasks] == [31, 31, 2]
    assert [s.partition for s in slices(tasks)] == sorted(range(64), key=str)  # name order: t-0, t-1, t-10, ...


def test_parallelism_sizes_tasks_like_spark(tmp_path):
    d = make_log_dir(tmp_path / "ld")
    for p in range(8):
        write_segment(os.path.join(d, f"t-{p}"), 0, [1], value_size=10)
    # equal files of weight w = size + 4 MiB; the task size is total // parallelism = 8w // p
    assert [len(t.slices) for t in plan(d, ReadOptions(), parallelism=4)] == [2, 2, 2, 2]
    assert [len(t.slices) for t in plan(d, ReadOptions(), parallelism=3)] == [2, 2, 2, 2]
    assert [len(t.slices) for t in plan(d, ReadOptions(), parallelism=2)] == [4, 4]
    assert [len(t.slices) for t in plan(d, ReadOptions(), parallelism=8)] == [1] * 8
    assert [len(t.slices) for t in plan(d, ReadOptions(), parallelism=100)] == [1] * 8
    assert [len(t.slices) for t in plan(d, ReadOptions(), parallelism=1)] == [8]
    assert [len(t.slices) for t in plan(d, ReadOptions())] == [8]
    # never above maxPartitionBytes: 2 files per task at most
    two = 2 * (OPEN_COST_BYTES + 200)
    assert [len(t.slices) for t in plan(d, ReadOptions(max_partition_bytes=two), parallelism=1)] == [2, 2, 2, 2]


def test_parallelism_also_splits(tmp_path):
    d = make_log_dir(tmp_path / "ld")
    positions = write_segment(os.path.join(d, "t-0"), 0, [50] * 800, value_size=300)  # ~12 MiB
    log = os.path.join(d, "t-0", f"{0:020d}.log")
    got = slices(plan(d, ReadOptions(), parallelism=4))  # ~(12 + 4) / 4 = ~4 MiB pieces
    assert len(got) == -(-size_of(log) // ((size_of(log) + OPEN_COST_BYTES) // 4))
    assert all(s.start in positions for s in got)


# ----------------------------------------------------------------------------- unreadable things


def test_unlistable_partition_dir_is_an_error_slice(tmp_path, monkeypatch):
    d = make_log_dir(tmp_path / "ld")
    write_segment(os.path.join(d, "a-0"), 0, [2])
    write_segment(os.path.join(d, "b-0"), 0, [2])
    write_segment(os.path.join(d, "c-0"), 0, [2])
    locked = os.path.join(d, "b-0")
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", locked)
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)  # (root ignores chmod 000)
    got = slices(plan(d, ReadOptions()))
    assert [os.path.basename(s.partition_path) for s in got] == ["a-0", "b-0", "c-0"]
    err = got[1]
    assert (err.topic, err.partition, err.log_path, err.start, err.end, err.bytes) == ("b", 0, locked, 0, None, 0)
    assert err.error == "cannot list the directory: Permission denied"  # the path is log_path
    assert got[0].error is None and got[2].error is None
    assert [os.path.basename(s.partition_path) for s in slices(plan(d, ReadOptions(topics=frozenset({"a"}))))] == ["a-0"]
    # named directly, too
    (only,) = slices(plan(locked, ReadOptions()))
    assert (only.log_path, only.error) == (locked, "cannot list the directory: Permission denied")


def test_fifo_named_like_a_segment_is_an_error_slice(tmp_path):
    d = make_log_dir(tmp_path / "ld")
    part = os.path.join(d, "t-0")
    write_segment(part, 0, [2])
    write_segment(part, 20, [2])
    fifo = os.path.join(part, f"{10:020d}.log")
    os.mkfifo(fifo)
    got = slices(plan(d, ReadOptions()))
    assert [(s.base_offset, s.error) for s in got] == [
        (0, None), (20, None), (10, "named like a segment but a FIFO: not read")]
    assert got[2].log_path == fifo
    assert got[2].next_base_offset == 20
    assert [s.base_offset for s in slices(plan(d, ReadOptions(start_offset=20)))] == [20]
    # the real segment 0 is pruned with next base 20 (the FIFO is no segment)
    assert [s.base_offset for s in slices(plan(d, ReadOptions(start_offset=15)))] == [0, 20, 10]
    # a directory, a dangling symbolic link named like a segment
    os.mkdir(os.path.join(part, f"{30:020d}.log"))
    os.symlink(os.path.join(part, "gone"), os.path.join(part, f"{40:020d}.log"))
    got = slices(plan(d, ReadOptions(start_offset=30)))
    assert [(s.base_offset, s.error) for s in got] == [
        (20, None),
        (30, "named like a segment but a directory: not read"),
        (40, "named like a segment but a symbolic link to nothing: not read")]


# ----------------------------------------------------------------------------- findings


def verify_output(groups):
    from kafkatool.verify import VerifyOptions, verify_group

    return [x for g in groups for x in verify_group(list(g), VerifyOptions())]


def test_findings_tasks_give_verify_groups_in_order(tmp_path):
    from kafkatool.verify import VerifyOptions, expand_targets, verify_paths

    d = str(tmp_path / "logdir")
    shutil.copytree(FIXTURES, d)
    d2, _log, _positions, _bad = damaged_segment(tmp_path / "two", "garbage")
    paths = f"{d},{d2}"
    limit = 3 * OPEN_COST_BYTES + 2 * MiB
    tasks = plan_findings(paths, ReadOptions(kind="findings", max_partition_bytes=limit))
    assert all(isinstance(t, FindingsTask) for t in tasks)
    groups = expand_targets([d, d2])
    assert [g for t in tasks for g in t.groups] == [tuple(g) for g in groups]
    assert len(tasks) > 3
    assert [p for t in tasks for p in t.paths] == [g[0].partition or g[0].path for g in groups]
    # verify_group over each task's groups, tasks concatenated in order == kafkatool verify
    ours = [x for t in tasks for x in verify_output(t.groups)]
    assert ours == list(verify_paths([d, d2], VerifyOptions()))
    from kafkatool.verify import Finding

    assert any(isinstance(x, Finding) and x.file == _log and x.position is not None for x in ours)  # the damage
    # bytes: the .log and .checkpoint files of the groups
    logs = sum(size_of(t.path) for g in groups for t in g if t.problem is None and t.path.endswith((".log", ".checkpoint")))
    assert sum(t.bytes for t in tasks) == logs


def test_findings_packing_keeps_groups_whole(tmp_path):
    d = make_log_dir(tmp_path / "ld")
    for p in range(3):
        for base in (0, 10, 20, 30):
            write_segment(os.path.join(d, f"t-{p}"), base, [10])
    # each group: 4 files (4 open costs) -> weight > 16 MiB; limit 20 MiB: one group per task
    tasks = plan_findings(d, ReadOptions(kind="findings", max_partition_bytes=20 << 20))
    assert [[os.path.basename(p) for p in t.paths] for t in tasks] == [["meta.properties"], ["t-0"], ["t-1"], ["t-2"]]
    assert [len(t.groups[0]) for t in tasks] == [1, 4, 4, 4]
    assert len(plan_findings(d, ReadOptions(kind="findings"))) == 1


def test_findings_nothing_kafka(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("hi")
    got: list[str] = []
    tasks = plan_findings(str(empty), nothing_kafka=got)
    assert got == [str(empty)]
    assert [len(t.groups) for t in tasks] == [1]  # verify still lists the loose file


# ----------------------------------------------------------------------------- stats


def test_stats_plan_covers_what_kafkatool_stats_reads(cluster):
    from kafkatool.segment.logdir import Partition
    from kafkatool.stats import find_targets

    d = str(cluster / "data")
    tasks = plan_stats(d)
    assert all(isinstance(t, ReadTask) for t in tasks)
    got = slices(tasks)
    items, _run = find_targets([d])
    want = [(p.path, seg.log_path) for p in items if isinstance(p, Partition) for seg in p.segments()]
    assert [(s.partition_path, s.log_path) for s in got] == want
    # every state and the oddly named copy, as kafkatool stats
    assert {os.path.basename(s.partition_path) for s in got} == {
        "a-0", "a-1", "b-0", "a-0.0123456789abcdef0123456789abcdef-delete",
        "a-0.0123456789abcdef0123456789abcdef-future", "copy", "a-2"}
    assert all((s.start, s.end, s.error) == (0, None, None) and s.bytes == size_of(s.log_path) for s in got)
    assert [os.path.basename(s.partition_path) for s in slices(plan_stats(d, ReadOptions(kind="stats", topics=frozenset({"b"}))))] == ["b-0"]
    # offsets do not prune stats; plan(kind=stats) is plan_stats
    assert plan_stats(d, ReadOptions(kind="stats", start_offset=10**9)) == tasks
    assert plan(d, ReadOptions(kind="stats")) == tasks
    loose = str(cluster / "loose" / f"{7:020d}.log")
    (s,) = slices(plan_stats(loose))
    assert (s.partition_path, s.log_path, s.base_offset) == (loose, loose, 7)


def test_stats_plan_large_segments_whole(tmp_path):
    d = make_log_dir(tmp_path / "ld")
    write_segment(os.path.join(d, "t-0"), 0, [3] * 200, value_size=300)
    assert [(s.start, s.end) for s in slices(plan_stats(d, ReadOptions(kind="stats", max_partition_bytes=16 << 10)))] \
        == [(0, None)]


def test_plan_refuses_findings_kind(tmp_path):
    d = make_log_dir(tmp_path / "ld")
    write_segment(os.path.join(d, "t-0"), 0, [1])
    with pytest.raises(ValueError, match="plan_findings"):
        plan(d, ReadOptions(kind="findings"))


def test_fixtures_logdir_plan(tmp_path):
    """The sample log dir: one whole slice per live partition, in name order, packed into one task."""
    tasks = plan(str(FIXTURES), ReadOptions())
    assert len(tasks) == 1
    names = [os.path.basename(s.partition_path) for s in tasks[0].slices]
    assert names == sorted(n for n in os.listdir(FIXTURES) if os.path.isdir(FIXTURES / n))
    assert tasks[0].bytes == sum(size_of(s.log_path) for s in tasks[0].slices)
    txn = next(s for s in tasks[0].slices if s.topic == "txn")
    assert (txn.base_offset, txn.next_base_offset) == (100, None)
    assert [s.topic for s in slices(plan(str(FIXTURES), ReadOptions(end_offset=100)))].count("txn") == 0
    assert isinstance(tasks[0].slices[0], SegmentSlice)


def test_error_slices_read_as_one_located_row(tmp_path, monkeypatch):
    """The contract with kafkatool.spark.rows: an error slice is one row, located once."""
    pa = pytest.importorskip("pyarrow")
    from kafkatool.spark import rows

    d = make_log_dir(tmp_path / "ld")
    write_segment(os.path.join(d, "a-0"), 0, [2])
    write_segment(os.path.join(d, "b-0"), 0, [3])
    fifo = os.path.join(d, "b-0", f"{3:020d}.log")
    os.mkfifo(fifo)
    locked = os.path.join(d, "c-0")
    os.mkdir(locked)
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", locked)
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    opts = ReadOptions()
    tasks = plan(d, opts)
    table = pa.Table.from_batches([b for t in tasks for b in rows.read(t, opts)])
    got = [(r["topic"], r["offset"], r["error"]) for r in table.to_pylist()]
    assert got == [("a", 0, None), ("a", 1, None), ("b", 0, None), ("b", 1, None), ("b", 2, None),
                   ("b", None, f"{fifo}: unreadable: named like a segment but a FIFO: not read"),
                   ("c", None, f"{locked}: unreadable: cannot list the directory: Permission denied")]


def _walk_positions(seg: Segment, start: int = 0, end: int | None = None) -> tuple[list[int], bool]:
    """The batch positions of a walk, and whether it ended cleanly (no framing error)."""
    from kafkatool.errors import KafkaToolError

    out = []
    try:
        for b in seg.batches(start, end):
            out.append(b.position)
    except KafkaToolError:
        return out, False
    return out, True


def test_splits_of_real_and_fixture_segments_give_every_batch_once(real):
    """Every segment of the sample log dir and of the broker-written files, split into up to ~40
    slices (1 KiB at least): the slices cover the file, and walking them in order gives exactly the
    batches of one walk of the whole segment."""
    logs = sorted({*map(str, FIXTURES.rglob("*.log")), *map(str, real.rglob("*.log"))})
    split = 0
    for log in logs:
        if not os.path.isfile(log) or os.path.getsize(log) == 0:
            continue
        try:
            seg = Segment.at(log)
        except Exception:  # a copy not named after an offset
            continue
        tasks = plan(log, ReadOptions(max_partition_bytes=max(1024, os.path.getsize(log) // 40)))
        got = slices(tasks)
        assert got[0].start == 0 and got[-1].end is None, log
        assert [s.end for s in got[:-1]] == [s.start for s in got[1:]], log
        assert sum(s.bytes for s in got) == os.path.getsize(log), log
        whole, clean = _walk_positions(seg)
        for s in got[1:]:
            assert s.start in whole, (log, s.start)  # a batch start the serial walk meets
        if clean:
            pieces = []
            for s in got:
                part, ok = _walk_positions(seg, s.start, s.end)
                assert ok, (log, s.start)
                pieces += part
            assert pieces == whole, log
        split += len(got) > 1
    assert split >= 20  # the check is not vacuous


def test_planning_imports_neither_pyspark_nor_pyarrow():
    """The driver plans without Spark's or Arrow's modules (the contract of kafkatool.spark.plan)."""
    import subprocess
    import sys

    code = ("import sys; from kafkatool.spark import plan as P; "
            f"P.plan({str(FIXTURES)!r}, P.ReadOptions()); P.plan_stats({str(FIXTURES)!r}); "
            f"P.plan_findings({str(FIXTURES)!r}); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'pyarrow', 'pandas', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ----------------------------------------------------------------------------- time pruning


@pytest.fixture
def timed(tmp_path):
    """t-0: segments at 0, 10, 20 of 10 records each (two batches of 5), record at offset o
    stamped T0 + o, each with the .index/.timeindex recovery would build (last time entry =
    the segment's max timestamp: T0 + 9, T0 + 19, T0 + 29)."""
    d = make_log_dir(tmp_path / "ld")
    for base in (0, 10, 20):
        write_segment(os.path.join(d, "t-0"), base, [5, 5], index=True)
    return d


def timeindex(d, base):
    return os.path.join(d, "t-0", f"{base:020d}.timeindex")


def test_rolled_segments_before_start_time_are_left_out(timed):
    def bases(**kw):
        return [s.base_offset for s in slices(plan(timed, ReadOptions(**kw)))]

    assert open(timeindex(timed, 0), "rb").read()[-12:] == struct.pack(">qi", T0 + 9, 9)  # the premise
    assert bases() == [0, 10, 20]
    assert bases(start_time=T0 + 9) == [0, 10, 20]       # max == start: kept (start is inclusive)
    assert bases(start_time=T0 + 10) == [10, 20]         # max T0 + 9 < start
    assert bases(start_time=T0 + 20) == [20]
    assert bases(start_time=T0 + 10**9) == [20]          # the last segment is always read (it may grow)
    assert bases(end_time=T0) == [0, 10, 20]             # end_time prunes nothing
    assert bases(start_time=T0 + 20, start_offset=25) == [20]
    assert [s.base_offset for s in slices(plan_stats(timed, ReadOptions(kind="stats", start_time=T0 + 20)))] == \
        [0, 10, 20]  # stats cover whole partitions


@pytest.mark.parametrize("damage", ["missing", "empty", "zero_tail", "odd_size", "all_zero", "decreasing",
                                    "offset_past", "no_timestamp"])
def test_time_pruning_only_trusts_a_sane_timeindex(timed, damage):
    path = timeindex(timed, 0)
    data = open(path, "rb").read()
    if damage == "missing":
        os.remove(path)
    else:
        new = {
            "empty": b"",
            "zero_tail": data + bytes(24),                                   # untrimmed (preallocated)
            "odd_size": b"\0" + data,                                       # last 12 bytes look sane
            "all_zero": bytes(120),                                          # preallocated, never written
            "decreasing": struct.pack(">qi", T0 + 5, 4) + struct.pack(">qi", T0 + 1, 9),
            "offset_past": struct.pack(">qi", T0 + 9, 10),                   # offset 10 is the next segment's
            "no_timestamp": struct.pack(">qi", -1, 9),
        }[damage]
        open(path, "wb").write(new)
    assert [s.base_offset for s in slices(plan(timed, ReadOptions(start_time=T0 + 10)))] == [0, 10, 20]
    # segment 10's sane index still prunes it
    assert [s.base_offset for s in slices(plan(timed, ReadOptions(start_time=T0 + 20)))] == [0, 20]


def test_rolled_max_timestamp(timed):
    seg = Segment.at(os.path.join(timed, "t-0", f"{10:020d}.log"))
    assert P.rolled_max_timestamp(seg, 20) == T0 + 19
    assert P.rolled_max_timestamp(seg, 19) is None  # the entry's offset 19 would be past the segment
