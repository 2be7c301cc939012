"""``kafkatool stats``: every field checked against a source that is not kafkatool.

* Real broker segments (``../shared/fixtures-real``, skipped when absent) and the sample log
  dir: each partition's counts, offsets, time range, codecs, magics, producers and markers
  are recomputed with kafka-python's reader (``MemoryRecords``, which decodes every record);
  a few numbers are also the fixture collector's ``MANIFEST.json`` and the checkpoint files
  read by eye (``debug_topic 0 40``).
* Partitions built here with kafka-python's batch builders, a control batch and a
  LogAppendTime batch laid out by hand from the spec (§4.1, §6) with the ``crc32c`` package,
  and hand-written checkpoint files: the expected values are what was built.
* Bad input: a corrupt region, a CRC mismatch, a tail, a malformed checkpoint; the command's
  exit status and output, never a traceback.
* ``kafkatool.stats`` uses only public names of the model.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafkatool import stats as st
from kafkatool.render import stats as rs
from kafkatool.segment.logdir import Partition

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "fixtures" / "logdir"
REAL = ROOT.parent / "shared" / "fixtures-real"
if not REAL.is_dir():
    REAL = Path("/work/shared/fixtures-real")

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
#: Control record types, spec §6's table.
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkatool", "stats", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def stats_of(path: str | os.PathLike, **opts) -> st.PartitionStats:
    return st.partition_stats(Partition(os.fspath(path)), st.StatsOptions(**opts))


# --------------------------------------------------------------------------- the oracle: kafka-python


def oracle(partition_dir: Path) -> dict:
    """A partition's stats as kafka-python reads its segments (every record decoded)."""
    logs = sorted(p for p in partition_dir.iterdir() if p.suffix == ".log" and len(p.name) == 24)
    o = {"batches": 0, "records": 0, "first": None, "last": None, "tmin": None, "tmax": None, "magics": Counter(),
         "codecs": Counter(), "txn": 0, "control": 0, "markers": Counter(), "crc_bad": 0, "producers": {},
         "batch_bytes": 0, "bytes": 0, "log_end": None}
    for log in logs:
        data = log.read_bytes()
        o["bytes"] += len(data)
        records = MemoryRecords(data)
        last_in_segment = None
        while (b := records.next_batch()) is not None:
            o["batches"] += 1
            o["batch_bytes"] += b.size_in_bytes
            o["magics"][b.magic] += 1
            o["codecs"][CODECS[b.compression_type]] += 1
            if not b.validate_crc():
                o["crc_bad"] += 1
            recs = list(b)
            for r in recs:
                if r.timestamp is not None and r.timestamp >= 0:
                    o["tmin"] = r.timestamp if o["tmin"] is None else min(o["tmin"], r.timestamp)
                    o["tmax"] = r.timestamp if o["tmax"] is None else max(o["tmax"], r.timestamp)
            if b.magic >= 2:
                o["records"] += b.records_count
                first, last = b.base_offset, b.base_offset + b.last_offset_delta
                o["tmax"] = b.max_timestamp if o["tmax"] is None else max(o["tmax"], b.max_timestamp)
                o["txn"] += b.is_transactional
                if b.is_control_batch:
                    o["control"] += 1
                    o["markers"][CONTROL_TYPES[struct.unpack(">hh", recs[0].key)[1]]] += 1
                if b.producer_id >= 0:
                    p = o["producers"].setdefault(b.producer_id, {"epoch": None, "seq": -1, "offset": -1, "batches": 0})
                    p["epoch"] = b.producer_epoch
                    p["batches"] += 1
                    if not b.is_control_batch:
                        p["seq"], p["offset"] = b.last_sequence, last
            else:
                o["records"] += len(recs)
                first, last = recs[0].offset, recs[-1].offset
            if o["first"] is None:
                o["first"] = first
            o["last"] = last
            last_in_segment = last
        o["log_end"] = int(log.name[:20]) if last_in_segment is None else last_in_segment + 1
    return o


def partition_dirs(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        if any(f.endswith(".log") and len(f) == 24 for f in filenames):
            out.append(Path(dirpath))
    return sorted(out)


def check_against_oracle(path: Path) -> None:
    try:
        o = oracle(path)
    except RuntimeError as e:  # kafka-python lacks a codec library (xxhash for v0 lz4)
        pytest.skip(f"kafka-python cannot read {path}: {e}")
    s = stats_of(path, deep=True)
    assert s.problems == ()
    assert (s.batches, s.records, s.first_offset, s.last_offset, s.log_end) == (o["batches"], o["records"], o["first"], o["last"], o["log_end"])
    assert (s.bytes, s.batch_bytes, s.trailing_bytes) == (o["bytes"], o["batch_bytes"], o["bytes"] - o["batch_bytes"])
    assert (s.min_timestamp, s.max_timestamp) == (o["tmin"], o["tmax"])
    assert s.magics == dict(o["magics"]) and s.codecs == dict(o["codecs"])
    assert (s.transactional_batches, s.control_batches, s.control_types) == (o["txn"], o["control"], dict(o["markers"]))
    assert s.crc_mismatches == o["crc_bad"]
    assert s.producer_count == len(o["producers"]) and s.producer_count_exact
    listed = {p.producer_id: {"epoch": p.producer_epoch, "seq": p.last_sequence, "offset": p.last_offset, "batches": p.batches} for p in s.producers}
    assert listed == {k: v for k, v in list(o["producers"].items())[:st.DEFAULT_MAX_PRODUCERS]}
    # shallow: the same, but a legacy compressed wrapper's records are not counted
    shallow = stats_of(path)
    wrappers = sum(n for c, n in o["codecs"].items() if c != "none") if set(o["magics"]) <= {0, 1} else shallow.unopened_wrappers
    assert shallow.unopened_wrappers == wrappers
    assert (shallow.batches, shallow.first_offset, shallow.last_offset, shallow.log_end) == (o["batches"], o["first"], o["last"], o["log_end"])
    if not wrappers:
        assert shallow.records == o["records"] and shallow.min_timestamp == o["tmin"]


@pytest.mark.parametrize("path", partition_dirs(SAMPLE), ids=lambda p: p.name)
def test_sample_partitions_match_kafka_python(path: Path) -> None:
    check_against_oracle(path)


REAL_DIRS = partition_dirs(REAL) if REAL.is_dir() else []


@pytest.mark.skipif(not REAL_DIRS, reason="../shared/fixtures-real is absent")
@pytest.mark.parametrize("path", REAL_DIRS, ids=lambda p: str(p.relative_to(REAL)))
def test_real_partitions_match_kafka_python(path: Path) -> None:
    check_against_oracle(path)


@pytest.mark.skipif(not REAL_DIRS, reason="../shared/fixtures-real is absent")
def test_real_partitions_match_the_collectors_manifest() -> None:
    checked = 0
    for manifest in REAL.glob("*/MANIFEST.json"):
        for f in json.loads(manifest.read_text())["files"]:
            m = f.get("batches")
            path = manifest.parent / f["path"]
            if not m or not path.name.endswith(".log") or len(path.name) != 24 or len(list(path.parent.glob("*.log"))) != 1:
                continue
            s = stats_of(path.parent, deep=True)
            if stats_of(path.parent).unopened_wrappers:
                # the manifest counts a legacy compressed wrapper as one record, its offset (the
                # last inner one) as its first: the kafka-python comparison checks those partitions
                assert (s.batches, s.last_offset) == (m["batches"], m["last_offset"]) and m["records"] == s.batches
            else:
                assert (s.batches, s.records, s.first_offset, s.last_offset) == (m["batches"], m["records"], m["first_offset"], m["last_offset"])
            assert sorted(s.magics) == m["magics"] and sorted(s.codecs) == sorted(m["codecs"])
            assert (s.control_batches, s.transactional_batches, s.crc_mismatches, s.trailing_bytes) == (m["control"], m["transactional"], m["crc_bad"], m["trailing"])
            checked += 1
    assert checked >= 10


@pytest.mark.skipif(not REAL_DIRS, reason="../shared/fixtures-real is absent")
def test_a_real_log_dir_by_hand() -> None:
    """William0423__kafka: debug_topic-0 holds 3 batches, 40 records (offsets 0..39); the log
    dir's recovery-point and replication checkpoints say ``debug_topic 0 40`` and
    ``__consumer_offsets 28 8202``; its log-start checkpoint has no entry (count 0)."""
    logdir = REAL / "William0423__kafka" / "kafka-logs"
    got = {s.topic: s for s in st.iter_stats([str(logdir)])}
    assert set(got) == {"debug_topic", "__consumer_offsets"}
    d, c = got["debug_topic"], got["__consumer_offsets"]
    assert (d.batches, d.records, d.first_offset, d.last_offset, d.log_end, d.bytes) == (3, 40, 0, 39, 40, 883)
    assert (c.batches, c.records, c.log_end, c.partition) == (8202, 8202, 8202, 28)
    for s, end in ((d, 40), (c, 8202)):
        assert [(x.name, x.offset, x.state) for x in s.checkpoints] == [
            ("recovery-point-offset-checkpoint", end, st.CheckpointState.EQUAL),
            ("replication-offset-checkpoint", end, st.CheckpointState.EQUAL),
            ("log-start-offset-checkpoint", None, st.CheckpointState.NO_ENTRY),
        ]


# --------------------------------------------------------------------------- partitions built here


def zigzag(n: int) -> bytes:
    """A signed varint (spec §4.2: zigzag, then base-128 little-endian groups)."""
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if u < 0x80:
            out.append(u)
            return bytes(out)
        out.append(u & 0x7F | 0x80)
        u >>= 7


def v2_batch(base_offset: int, timestamps: list[int], *, codec: int = 0, pid: int = -1, epoch: int = -1, seq: int = -1,
             txn: bool = False) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=txn, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    for i, ts in enumerate(timestamps):
        # a value that compresses: kafka-python's builder leaves a batch uncompressed when that is smaller
        b.append(i, timestamp=ts, key=b"k%d" % i, value=b"value %d " % i * 20, headers=[])
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 0, base_offset)  # baseOffset is outside the CRC (§4.1)
    return bytes(buf)


def with_crc(head: bytes, after_crc: bytes) -> bytes:
    """A v2 batch from its first 17 bytes and everything after the CRC, the CRC-32C computed (§4.1)."""
    return head + struct.pack(">I", crc32c.crc32c(after_crc)) + after_crc


def log_append_time(batch: bytes, append_time: int) -> bytes:
    """``batch`` turned LogAppendTime (attribute bit 3) with the broker's time as max timestamp."""
    attrs, lod, base_ts, _max_ts = struct.unpack_from(">hiqq", batch, 21)
    after = struct.pack(">hiqq", attrs | 0x08, lod, base_ts, append_time) + batch[43:]
    return with_crc(batch[:17], after)


def control_batch(base_offset: int, pid: int, epoch: int, type_id: int, ts: int, padding: int = 0) -> bytes:
    """A transaction marker laid out from §6: one record, key (version 0, type), value (version 0,
    coordinator epoch 7, then ``padding`` zero bytes)."""
    key, value = struct.pack(">hh", 0, type_id), struct.pack(">hi", 0, 7) + bytes(padding)
    body = b"\x00" + zigzag(0) + zigzag(0) + zigzag(len(key)) + key + zigzag(len(value)) + value + zigzag(0)
    after = struct.pack(">hiqqqhii", 0x30, 0, ts, ts, pid, epoch, -1, 1) + zigzag(len(body)) + body
    head = struct.pack(">qiib", base_offset, 4 + 1 + 4 + len(after), 0, 2)
    return with_crc(head, after)


def v1_wrapper(last_offset: int, timestamps: list[int], codec: int = 1) -> bytes:
    b = LegacyRecordBatchBuilder(magic=1, compression_type=codec, batch_size=1 << 20)
    for i, ts in enumerate(timestamps):
        b.append(i, timestamp=ts, key=None, value=b"legacy %d" % i)
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 0, last_offset)  # the wrapper's offset: its last inner offset (the CRC starts at the magic)
    if codec:
        # as the broker does (and kafka-python's builder does not), the wrapper's timestamp is
        # its newest inner one (§5.1); the message CRC-32 covers it
        struct.pack_into(">q", buf, 18, max(timestamps))
        struct.pack_into(">I", buf, 12, zlib.crc32(buf[16:]))
    return bytes(buf)


def v1_message(offset: int, ts: int) -> bytes:
    return v1_wrapper(offset, [ts], codec=0)


@pytest.fixture
def built(tmp_path: Path) -> Path:
    """Log dir ``logs`` with partition ``audit-3``: three segments (the last one empty).

    offsets 0-2  gzip, producer 10 epoch 1 sequence 0, timestamps 1000 1005 1002
    offsets 3-4  transactional, producer 11 epoch 0 sequence 0, timestamps 2000 2001
    offsets 5-6  producer 10 epoch 1 sequence 3, timestamps 900 3000 (the oldest batch first timestamp)
    offset  7    COMMIT marker of producer 11 (epoch 0)
    offset  8    LogAppendTime 4000, its record created at 100 (not a record time: the append time is)
    -- segment 9 --
    offsets 9-11 a v1 gzip wrapper, timestamps 800 5001 5002 (800 is seen only when opened)
    offset  12   a v1 message, timestamp 6000
    -- segment 20: empty (offsets 13-19 compacted away): the log end is 20 --
    """
    part = tmp_path / "logs" / "audit-3"
    part.mkdir(parents=True)
    seg0 = (v2_batch(0, [1000, 1005, 1002], codec=1, pid=10, epoch=1, seq=0)
            + v2_batch(3, [2000, 2001], pid=11, epoch=0, seq=0, txn=True)
            + v2_batch(5, [900, 3000], pid=10, epoch=1, seq=3)
            + control_batch(7, 11, 0, 1, 3500)
            + log_append_time(v2_batch(8, [100]), 4000))
    (part / "00000000000000000000.log").write_bytes(seg0)
    (part / "00000000000000000009.log").write_bytes(v1_wrapper(11, [800, 5001, 5002]) + v1_message(12, 6000))
    (part / "00000000000000000020.log").write_bytes(b"")
    (part / "00000000000000000020.index").write_bytes(b"")
    return part


def write_checkpoint(path: Path, lines: list[str]) -> None:
    path.write_text("0\n" + f"{len(lines)}\n" + "".join(line + "\n" for line in lines))


def test_a_built_partition_field_by_field(built: Path) -> None:
    logs = built.parent
    write_checkpoint(logs / "recovery-point-offset-checkpoint", ["other 0 5", "audit 3 20"])
    write_checkpoint(logs / "replication-offset-checkpoint", ["audit 3 25"])
    s = stats_of(built)
    assert (s.topic, s.partition, s.state, s.is_file, s.segments) == ("audit", 3, None, False, 3)
    sizes = [os.path.getsize(built / n) for n in ("00000000000000000000.log", "00000000000000000009.log")]
    assert (s.bytes, s.batch_bytes, s.trailing_bytes) == (sum(sizes), sum(sizes), 0)
    assert (s.batches, s.records, s.unopened_wrappers) == (7, 3 + 2 + 2 + 1 + 1 + 1, 1)
    assert (s.first_offset, s.last_offset, s.log_end) == (0, 12, 20)
    assert (s.min_timestamp, s.max_timestamp) == (900, 6000)
    assert s.magics == {1: 2, 2: 5}
    assert s.codecs == {"gzip": 2, "none": 5}
    assert s.timestamp_types == {"CreateTime": 6, "LogAppendTime": 1}
    assert (s.transactional_batches, s.control_batches, s.control_types) == (2, 1, {"COMMIT": 1})
    assert s.crc_mismatches == 0
    assert (s.producer_count, s.producer_count_exact, s.idempotent_batches) == (2, True, 4)
    assert s.producers == (
        st.ProducerStats(10, 1, 4, 6, 2, 5),  # id, epoch, last sequence (3 + 1), last offset, batches, records
        st.ProducerStats(11, 0, 1, 4, 2, 3),  # the marker sets the epoch, not the sequence or the last data offset
    )
    assert [(c.name, c.offset, c.state) for c in s.checkpoints] == [
        ("recovery-point-offset-checkpoint", 20, st.CheckpointState.EQUAL),
        ("replication-offset-checkpoint", 25, st.CheckpointState.BEHIND),
        ("log-start-offset-checkpoint", None, st.CheckpointState.NO_FILE),
    ]
    assert s.problems == ()

    deep = stats_of(built, deep=True)
    assert (deep.records, deep.unopened_wrappers, deep.min_timestamp) == (13, 0, 800)


def test_checkpoint_states(built: Path) -> None:
    logs = built.parent
    write_checkpoint(logs / "recovery-point-offset-checkpoint", ["audit 3 9"])
    write_checkpoint(logs / "replication-offset-checkpoint", ["audit 4 20", "audited 3 20"])
    write_checkpoint(logs / "log-start-offset-checkpoint", ["audit 3 20"])
    s = stats_of(built)
    assert [(c.offset, c.state) for c in s.checkpoints] == [
        (9, st.CheckpointState.AHEAD), (None, st.CheckpointState.NO_ENTRY), (20, st.CheckpointState.EQUAL)]
    assert st.compare_checkpoint("x", {("t", 0): 5}, "t", 0, None).state is st.CheckpointState.NOT_COMPARED


def test_a_malformed_checkpoint_is_a_located_problem_not_an_error(built: Path) -> None:
    (built.parent / "replication-offset-checkpoint").write_text("0\n1\naudit x 13\n")
    s = stats_of(built)
    assert s.checkpoints[1].state is st.CheckpointState.UNREADABLE
    assert s.checkpoints[0].state is st.CheckpointState.NO_FILE
    (p,) = s.problems
    assert (p.file, p.position, p.kind) == (str((built.parent / "replication-offset-checkpoint").resolve()), 4, "checkpoint")
    assert "audit x 13" in p.message
    r = run(str(built))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "replication-offset-checkpoint:4: Malformed line" in r.stdout


def test_a_deleted_partitions_dir_is_not_compared(built: Path) -> None:
    write_checkpoint(built.parent / "recovery-point-offset-checkpoint", ["audit 3 20"])
    gone = built.parent / "audit-3.0123456789abcdef0123456789abcdef-delete"
    built.rename(gone)
    s = stats_of(gone)
    assert (s.topic, s.partition, s.state) == ("audit", 3, "delete")
    assert {c.state for c in s.checkpoints} == {st.CheckpointState.NOT_COMPARED}


def test_the_producer_table_is_capped_and_the_rest_counted(tmp_path: Path, monkeypatch) -> None:
    part = tmp_path / "many-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(b"".join(v2_batch(i, [1000 + i], pid=500 + i, epoch=0, seq=0) for i in range(250)))
    s = stats_of(part, max_producers=5)
    assert [p.producer_id for p in s.producers] == [500, 501, 502, 503, 504]
    assert (s.producer_count, s.producer_count_exact, s.producers_not_listed) == (250, True, 245)
    monkeypatch.setattr(st, "PRODUCER_COUNT_LIMIT", 100)
    s = stats_of(part, max_producers=5)
    assert (len(s.producers), s.producer_count, s.producer_count_exact) == (5, 105, False)
    assert "more than 105" in rs.partition_text(s) and "and 100+ more" in rs.partition_text(s)
    obj = rs.partition_object(s)["producers"]
    assert (obj["count"], obj["countExact"], obj["notListed"], len(obj["listed"])) == (105, False, 100, 5)


def test_an_abort_marker_with_a_bumped_epoch_sets_the_producers_epoch(tmp_path: Path) -> None:
    """A coordinator that aborts a timed-out transaction writes the marker with the epoch bumped
    (KIP-890): the producer's epoch is the marker's, its sequence and last offset its data's."""
    part = tmp_path / "bump-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(
        v2_batch(0, [1000, 1001, 1002], pid=20, epoch=3, seq=40, txn=True) + control_batch(3, 20, 4, 0, 1500))
    s = stats_of(part)
    assert s.producers == (st.ProducerStats(20, 4, 42, 2, 2, 4),)
    assert s.control_types == {"ABORT": 1}


def test_a_log_dir_named_like_a_partition_is_searched(built: Path, tmp_path: Path) -> None:
    """JBOD log dirs are often named ``data-1``, ``kafka-logs-2``: a name Kafka would parse as a
    partition's. A directory holding ``meta.properties`` or a log dir's checkpoint is a log dir."""
    jbod = tmp_path / "data-1"
    built.parent.rename(jbod)
    write_checkpoint(jbod / "recovery-point-offset-checkpoint", ["audit 3 20"])
    (s,) = st.iter_stats([str(tmp_path)])
    assert (s.path, s.topic, s.batches, s.checkpoints[0].state) == (str(jbod / "audit-3"), "audit", 7, st.CheckpointState.EQUAL)
    empty = tmp_path / "kafka-logs-2"
    empty.mkdir()
    (empty / "meta.properties").write_text("version=1\nbroker.id=2\n")
    run_ = st.StatsRun()
    assert list(st.iter_stats([str(empty)], run=run_)) == [] and run_.nothing == []
    r = run(str(empty))
    assert r.returncode == 0 and r.stdout == "", r.stderr


def test_an_unknown_codec_is_counted_and_located(tmp_path: Path) -> None:
    part = tmp_path / "codec-0"
    part.mkdir()
    first = v2_batch(0, [1000])
    odd = bytearray(v2_batch(1, [1001, 1002]))
    odd[22] |= 0x05  # codec id 5 in the attributes' low byte (§4.1): no codec has it
    odd = with_crc(bytes(odd[:17]), bytes(odd[21:]))
    (part / "00000000000000000000.log").write_bytes(first + odd)
    s = stats_of(part)
    assert s.codecs == {"none": 1, "unknown(5)": 1} and s.records == 3
    (p,) = s.problems
    assert (p.position, p.kind, p.message) == (len(first), "unknown_codec", "Unknown compression type id: 5")


# --------------------------------------------------------------------------- bad input


def test_a_corrupt_region_stops_its_segment_and_is_located(tmp_path: Path) -> None:
    part = tmp_path / "bad-0"
    part.mkdir()
    good = v2_batch(0, [1000, 1001]) + v2_batch(2, [1002])
    bad = struct.pack(">qi", 3, 5) + b"\x00" * 40  # size 5 < 14: Kafka's CorruptRecordException (§3)
    (part / "00000000000000000000.log").write_bytes(good + bad + v2_batch(3, [1003]))
    (part / "00000000000000000009.log").write_bytes(v2_batch(9, [2000]))
    s = stats_of(part)
    assert (s.batches, s.records, s.last_offset, s.log_end) == (3, 4, 9, 10)  # the next segment is still read
    (p,) = s.problems
    assert (p.file, p.position) == (str(part / "00000000000000000000.log"), len(good))
    assert "smaller than minimum record overhead" in p.message
    r = run("--format", "jsonl", str(part))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    obj = json.loads(r.stdout.splitlines()[0])
    assert obj["problems"] == [{"file": p.file, "position": len(good), "kind": p.kind, "message": p.message}]


def test_a_crc_mismatch_is_counted_and_located(tmp_path: Path) -> None:
    part = tmp_path / "crc-0"
    part.mkdir()
    first = v2_batch(0, [1000])
    second = bytearray(v2_batch(1, [1001, 1002]))
    second[-3] ^= 0xFF  # a value byte: covered by the CRC
    (part / "00000000000000000000.log").write_bytes(first + second)
    s = stats_of(part)
    assert (s.crc_mismatches, s.batches, s.records) == (1, 2, 3)
    (p,) = s.problems
    assert (p.position, p.kind) == (len(first), "crc_mismatch")
    assert run(str(part)).returncode == 1


def test_a_tail_is_trailing_bytes_not_a_problem(tmp_path: Path) -> None:
    part = tmp_path / "tail-0"
    part.mkdir()
    batch = v2_batch(0, [1000])
    (part / "00000000000000000000.log").write_bytes(batch + batch[:30])
    s = stats_of(part)
    assert (s.batches, s.trailing_bytes, s.problems) == (1, 30, ())
    assert run(str(part)).returncode == 0


def test_a_lone_segment_file(built: Path) -> None:
    s = next(st.iter_stats([str(built / "00000000000000000009.log")]))
    assert (s.is_file, s.topic, s.segments, s.batches, s.first_offset, s.log_end) == (True, None, 1, 2, 9, 13)
    assert {c.state for c in s.checkpoints} == {st.CheckpointState.NOT_COMPARED}
    obj = json.loads(run("--format", "jsonl", str(built / "00000000000000000009.log")).stdout.splitlines()[0])
    assert obj["type"] == "segment" and obj["file"].endswith("00000000000000000009.log")


def test_every_prefix_and_garbage_give_stats_never_an_exception(tmp_path: Path) -> None:
    """h11's habit: the whole input, every prefix of it, and garbage. A prefix is a tail (the
    whole batches before it counted); garbage is a located problem."""
    import random

    part = tmp_path / "cut-0"
    part.mkdir()
    log = part / "00000000000000000000.log"
    batches = [v2_batch(0, [1000, 1001], codec=1), control_batch(2, 30, 0, 1, 1100), v1_wrapper(5, [1200, 1201, 1202]),
               v1_message(6, 1300)]
    data = b"".join(batches)
    ends = [sum(map(len, batches[:i + 1])) for i in range(len(batches))]
    for n in range(len(data) + 1):
        log.write_bytes(data[:n])
        for deep in (False, True):
            s = stats_of(part, deep=deep)
            whole = sum(1 for e in ends if e <= n)
            assert (s.batches, s.batch_bytes, s.trailing_bytes) == (whole, ends[whole - 1] if whole else 0, n - (ends[whole - 1] if whole else 0))
            assert s.problems == (), (n, s.problems)
    rng = random.Random(10)
    for _ in range(200):
        garbage = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
        log.write_bytes(data[: rng.choice(ends)] + garbage)
        s = stats_of(part, deep=True)  # any outcome but an exception
        assert all(p.file == str(log) for p in s.problems)


def test_a_marker_or_a_wrapper_that_does_not_decode_is_a_problem(tmp_path: Path) -> None:
    part = tmp_path / "undecodable-0"
    part.mkdir()
    marker = control_batch(0, 30, 0, 1, 1100)
    bad_marker = with_crc(marker[:17], marker[21:-12] + b"\x7f" * 12)  # the record's bytes garbled, the CRC right
    wrapper = bytearray(v1_wrapper(3, [1200, 1201, 1202]))
    wrapper[40:60] = b"\xff" * 20  # inside the gzip stream
    struct.pack_into(">I", wrapper, 12, zlib.crc32(wrapper[16:]))
    (part / "00000000000000000000.log").write_bytes(bad_marker + bytes(wrapper))
    s = stats_of(part, deep=True)
    assert s.control_types == {"UNREADABLE": 1} and s.unopened_wrappers == 1 and s.batches == 2
    marker_problem, wrapper_problem = s.problems
    assert 0 < marker_problem.position < len(bad_marker)  # located in the marker's record
    assert len(bad_marker) <= wrapper_problem.position < len(bad_marker) + len(wrapper)
    assert all(p.file == str(part / "00000000000000000000.log") for p in s.problems)


# --------------------------------------------------------------------------- the command


def test_usage_errors_exit_2(built: Path, tmp_path: Path) -> None:
    r = run(str(built), str(built / "00000000000000000020.index"))
    assert r.returncode == 2 and "not a segment file" in r.stderr
    assert r.stdout == ""  # refused before anything is read, as verify does
    empty = tmp_path / "nothing"
    empty.mkdir()
    r = run(str(empty))
    assert r.returncode == 2 and "nothing Kafka found here" in r.stderr
    r = run(str(tmp_path / "missing"))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_a_partition_named_dir_counts_only_where_kafka_would_put_one(tmp_path: Path) -> None:
    # /etc/dbus-1 is named like a partition; found below a directory that is no log dir and
    # holding no segment, it is not one (verify and dump agree: nothing Kafka here)
    etc = tmp_path / "etc"
    (etc / "dbus-1" / "system.d").mkdir(parents=True)
    (etc / "polkit-1").mkdir()
    r = run(str(etc))
    assert r.returncode == 2 and "nothing Kafka found here" in r.stderr and r.stdout == "", r
    # in a log dir, a partition dir without segments is a partition (a new one, or emptied)
    log_dir = tmp_path / "data"
    (log_dir / "orders-7").mkdir(parents=True)
    (log_dir / "meta.properties").write_text("version=1\n")
    r = run("--format", "jsonl", str(log_dir))
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert r.returncode == 0 and [(x["topic"], x["partition"]) for x in rows if x["type"] == "partition"] == [("orders", 7)]
    # and named on the command line, it is read as one, as verify reads it
    r = run("--format", "jsonl", str(etc / "polkit-1"))
    assert r.returncode == 0 and json.loads(r.stdout.splitlines()[0])["topic"] == "polkit"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_fifo_named_like_a_segment_is_a_problem_never_opened(built: Path, jobs: str) -> None:
    fifo = built / "00000000000000000099.log"
    os.mkfifo(fifo)  # opening it for reading would block: the run must end all the same
    # (--jobs 2 reads the segments in other processes and combines them: the listing's problem too)
    r = subprocess.run([sys.executable, "-m", "kafkatool", "stats", "--jobs", jobs, "--format", "jsonl", str(built)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    row = json.loads(r.stdout.splitlines()[0])
    assert r.returncode == 1, r
    assert [p for p in row["problems"] if p["file"] == str(fifo)] == [
        {"file": str(fifo), "position": None, "kind": "not_regular_file", "message": "named like a segment but a FIFO: not read"}
    ], row["problems"]


def test_jsonl_names_and_summary(built: Path) -> None:
    write_checkpoint(built.parent / "recovery-point-offset-checkpoint", ["audit 3 20"])
    r = run("--format", "jsonl", str(built.parent))
    assert r.returncode == 0, r.stderr
    first, summary = (json.loads(line) for line in r.stdout.splitlines())
    assert list(first) == [
        "type", "partitionDir", "topic", "partition", "state", "segments", "bytes", "batchBytes", "trailingBytes",
        "batches", "records", "unopenedWrappers", "firstOffset", "lastOffset", "logEndOffset", "minTimestamp",
        "maxTimestamp", "magics", "codecs", "timestampTypes", "transactionalBatches", "controlBatches", "controlTypes",
        "crcMismatches", "idempotentBatches", "producers", "checkpoints", "problems", "problemsNotListed"]
    assert first["partitionDir"] == str(built)
    assert first["magics"] == {"1": 2, "2": 5}
    assert list(first["codecs"].items()) == [("none", 5), ("gzip", 2)]  # in codec id order
    assert list(first["timestampTypes"].items()) == [("CreateTime", 6), ("LogAppendTime", 1)]
    assert first["producers"]["listed"][0] == {"producerId": 10, "producerEpoch": 1, "lastSequence": 4, "lastOffset": 6,
                                               "batches": 2, "records": 5}
    assert first["checkpoints"] == {"recoveryPoint": {"offset": 20, "logEnd": "equal"},
                                    "replication": {"offset": None, "logEnd": "no_file"},
                                    "logStart": {"offset": None, "logEnd": "no_file"}}
    assert {k: summary[k] for k in ("type", "partitions", "segments", "batches", "records", "problems")} == {
        "type": "summary", "partitions": 1, "segments": 3, "batches": 7, "records": 10, "problems": 0}


def test_text_and_table(built: Path) -> None:
    r = run(str(built))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"partition {built} (topic audit, partition 3)"
    text = "\n".join(lines)
    assert re.search(r"^  offsets: +0\.\.12, log end 20$", text, re.M)
    assert "1970-01-01T00:00:00.900Z .. 1970-01-01T00:00:06.000Z" in text
    assert "id 10 epoch 1 last sequence 4 last offset 6 (2 batches, 5 records)" in text
    assert "log-start-offset-checkpoint: no file" in text
    assert r.stderr.startswith("Read 1 partition (3 segments, 7 batches, ")
    assert run("-q", str(built)).stderr == ""
    r = run("--format", "table", str(built))
    assert r.returncode == 0 and "audit-3" in r.stdout and "0..12" in r.stdout


def test_non_utf8_names_stay_valid_json(tmp_path: Path, built: Path) -> None:
    odd = os.fsencode(tmp_path) + b"/log\xff/top\xfeic-0"
    os.makedirs(odd)
    shutil.copyfile(built / "00000000000000000000.log", odd + b"/00000000000000000000.log")
    proc = subprocess.run([sys.executable, "-m", "kafkatool", "stats", "--format", "jsonl", odd], cwd=ROOT,
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout.decode("utf-8").splitlines()[0])
    assert os.fsencode(obj["partitionDir"]) == odd


# --------------------------------------------------------------------------- written against the public API


def test_stats_uses_only_public_names_of_the_model() -> None:
    """stats reads through the log-dir model and the record layer only, and takes from them only
    what they export (each name in its module's ``__all__``, or in ``kafkatool``'s for errors)."""
    import importlib

    import kafkatool

    tree = ast.parse((ROOT / "kafkatool" / "stats.py").read_text())
    allowed = ("kafkatool.segment.logdir", "kafkatool.record.", "kafkatool.errors")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kafkatool"):
            assert node.module.startswith(allowed), node.module
            exported = getattr(importlib.import_module(node.module), "__all__", kafkatool.__all__)
            assert all(a.name in exported for a in node.names), ast.unparse(node)
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("kafkatool") for a in node.names), ast.unparse(node)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            assert isinstance(node.value, ast.Name) and node.value.id == "self", ast.unparse(node)


def test_times_are_shown_as_dump_shows_them() -> None:
    from kafkatool.render import table
    from kafkatool.render.times import iso_time

    for ms in (0, 5, 999, 1000, 1534299389611, 1700000000393, 253402300799999, 253402300800000, -1, 2**62):
        assert iso_time(ms) == table.iso_time(ms), ms
    assert iso_time(1534299389611) == "2018-08-15T02:16:29.611Z"  # date -u -d @1534299389.611


def test_problems_are_capped_per_partition(tmp_path: Path) -> None:
    part = tmp_path / "many-bad-0"
    part.mkdir()
    for i in range(25):
        (part / f"{i * 10:020d}.log").write_bytes(v2_batch(i * 10, [1000]) + struct.pack(">qi", i * 10 + 1, 3) + b"\0" * 20)
    s = stats_of(part)
    assert (s.segments, s.batches, s.log_end) == (25, 25, 241)
    assert (len(s.problems), s.problems_not_listed) == (20, 5)
    assert "and 5 more problems not listed" in rs.partition_text(s)
    assert rs.partition_object(s)["problemsNotListed"] == 5
    assert [p.file for p in s.problems[:20]] == [str(part / f"{i * 10:020d}.log") for i in range(20)]


def test_a_marker_larger_than_the_walk_holds_is_not_read_whole(tmp_path: Path) -> None:
    part = tmp_path / "huge-0"
    part.mkdir()
    marker = control_batch(1, 30, 0, 1, 1100, padding=3 << 20)  # larger than the walk's 1 MiB window
    (part / "00000000000000000000.log").write_bytes(v2_batch(0, [1000]) + marker)
    s = stats_of(part, max_batch_bytes=2 << 20)
    assert (s.batches, s.control_batches, s.control_types, s.log_end) == (2, 1, {"UNREADABLE": 1}, 2)
    (p,) = s.problems
    assert (p.kind, p.position) == ("batch_too_large", len(v2_batch(0, [1000])))
    assert stats_of(part, max_batch_bytes=len(marker)).control_types == {"COMMIT": 1}


def combined(path: Path, **opts) -> st.PartitionStats:
    """The partition's stats as parallel readers would make them: each segment on its own, then combined."""
    partition = Partition(str(path))
    options = st.StatsOptions(**opts)
    return st.combine_stats([st.segment_stats(seg, options) for seg in partition.segments()], partition, opts=options)


@pytest.mark.parametrize("path", partition_dirs(SAMPLE) + REAL_DIRS, ids=lambda p: p.name)
def test_stats_of_segments_combined_are_the_partitions(path: Path) -> None:
    for deep in (False, True):
        assert combined(path, deep=deep) == stats_of(path, deep=deep)


def test_combined_stats_of_built_and_damaged_partitions(built: Path, tmp_path: Path) -> None:
    write_checkpoint(built.parent / "recovery-point-offset-checkpoint", ["audit 3 20"])
    (built.parent / "replication-offset-checkpoint").write_text("0\n1\naudit x 13\n")
    assert combined(built) == stats_of(built)
    assert combined(built).problems[0].kind == "checkpoint"
    part = tmp_path / "damaged-0"
    part.mkdir()
    bad = bytearray(v2_batch(1, [1001]))
    bad[-3] ^= 1
    for i in range(25):  # each segment: a good batch, a bad CRC, a corrupt region
        (part / f"{i * 10:020d}.log").write_bytes(
            v2_batch(i * 10, [1000], pid=7, epoch=i % 3, seq=i) + struct.pack(">q", i * 10 + 1) + bytes(bad[8:])
            + struct.pack(">qi", i * 10 + 2, 3) + bytes(20))
    whole = stats_of(part)
    assert (whole.crc_mismatches, len(whole.problems), whole.problems_not_listed) == (25, 20, 30)
    assert combined(part) == whole
    # more producers than a piece lists: the combined count is a lower bound, never more than the truth
    many = tmp_path / "many-0"
    many.mkdir()
    for seg in range(3):
        (many / f"{seg * 100:020d}.log").write_bytes(
            b"".join(v2_batch(seg * 100 + i, [1000], pid=(seg * 7 + i) % 30, epoch=0, seq=0) for i in range(20)))
    exact = stats_of(many, max_producers=100)
    assert combined(many, max_producers=100) == exact
    approx = combined(many, max_producers=5)
    assert not approx.producer_count_exact and approx.producer_count <= exact.producer_count
    assert [p.producer_id for p in approx.producers] == [p.producer_id for p in exact.producers][:5]


def test_combining_keeps_what_the_earlier_pieces_knew(tmp_path: Path) -> None:
    part = tmp_path / "pieces-0"
    part.mkdir()
    marker = control_batch(0, 30, 0, 1, 1100)
    garbled = with_crc(marker[:17], marker[21:-12] + b"\x7f" * 12)
    (part / "00000000000000000000.log").write_bytes(b"")  # empty: the first offset comes from a later piece
    (part / "00000000000000000005.log").write_bytes(
        v2_batch(5, [1000, 1001, 1002], codec=1, pid=40, epoch=0, seq=0, txn=True)
        + b"".join(struct.pack(">q", 8 + i) + garbled[8:] for i in range(22)))  # 22 markers that do not decode
    (part / "00000000000000000030.log").write_bytes(v2_batch(30, [2000]) + control_batch(31, 40, 1, 0, 2100))
    whole = stats_of(part)
    assert (whole.first_offset, whole.problems_not_listed) == (5, 2)
    # producer 40: its epoch from the last piece's marker, its sequence and last offset from the first piece's data
    assert whole.producers == (st.ProducerStats(40, 1, 2, 7, 2, 4), st.ProducerStats(30, 0, -1, -1, 22, 22))
    both = combined(part)
    assert both == whole
    assert list(both.codecs) == list(whole.codecs) == ["none", "gzip"]
    many = tmp_path / "many-0"
    many.mkdir()
    for seg in range(3):
        (many / f"{seg * 100:020d}.log").write_bytes(
            b"".join(v2_batch(seg * 100 + i, [1000], pid=(seg * 7 + i) % 30, epoch=0, seq=0) for i in range(20)))
    assert combined(many, max_producers=5).producer_count == 20  # a piece's own count bounds it from below


@pytest.mark.skipif(not REAL_DIRS, reason="../shared/fixtures-real is absent")
def test_jobs_give_the_same_output(built: Path) -> None:
    write_checkpoint(built.parent / "recovery-point-offset-checkpoint", ["audit 3 20"])
    paths = [str(SAMPLE), str(REAL), str(built.parent), str(built / "00000000000000000009.log")]
    one, two = (run("--format", "jsonl", "-q", "--jobs", n, *paths) for n in ("1", "2"))
    assert one.returncode == two.returncode == 0, one.stderr + two.stderr
    assert one.stdout.splitlines()[:-1] == two.stdout.splitlines()[:-1] and len(one.stdout.splitlines()) > 30
    assert run("--jobs", "2", str(built)).stdout == run(str(built)).stdout


def test_a_dangling_link_named_like_a_segment_is_said_as_one(built: Path) -> None:
    link = built / "00000000000000000099.log"
    os.symlink(built / "gone.log", link)
    r = run("--format", "jsonl", str(built))
    row = json.loads(r.stdout.splitlines()[0])
    assert r.returncode == 1, r
    assert [p["message"] for p in row["problems"] if p["file"] == str(link)] == [
        "named like a segment but a symbolic link to nothing: not read"], row["problems"]
