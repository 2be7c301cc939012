"""``kafkatool convert`` over the sample log dir: every partition, every target magic, every legal codec.

Each case converts a source (a partition dir of ``fixtures/logdir``, its one segment, or the whole
log dir) to a new DEST with the CLI, then checks the output against oracles that share nothing
with kafkatool's writer (``tests/convert_oracles.py``):

* kafka-python and aiokafka read the output: same offsets, keys and values as the source read by
  kafka-python; timestamps as spec §13 says (v0: none; v1/v2: the record's own, or the
  LogAppendTime the source batch carried); headers only at v2; control batches only at v2;
* every entry is at the target magic with the codec asked (or the source batch's), control
  batches uncompressed, magic-0 lz4 with the magic-0 header checksum (§7.4); v2 → v2 keeps every
  batch header field;
* kafkatool's own reader (``Partition.records``) sees the same records;
* ``.index``/``.timeindex`` are what recovery builds (``IndexBuilder`` fed a struct walk of the
  output) and ``kafkatool reindex --all`` (a dry run) plans no change; ``verify --deep`` finds
  nothing;
* the loss counters of ``--format jsonl`` equal the counts made by hand from the source.

Also here: ``--drop-aborted`` against a read_committed derivation, ``--strict``, zstd below v2,
and the v2 → v1 → v2 round trip of a segment without headers (built by kafka-python).
"""

from __future__ import annotations

import functools
import random
import shutil
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import convert_oracles as o  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "logdir"
PARTITIONS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and list(p.glob("*.log")))
#: The KRaft metadata log must stay v2 (its readers are the controllers): below v2 it is refused as
#: SRC and copied unchanged inside a log dir; at v2 it converts like any v2 partition (lead's decision).
METADATA = "__cluster_metadata-0"
DATA_PARTITIONS = [p for p in PARTITIONS if p != METADATA]
#: (target magic, codec name or "default" for no --compression): zstd only with magic 2 (§7.1).
TARGETS = [(m, c) for m in (0, 1, 2) for c in ("default", "none", "gzip", "snappy", "lz4", "zstd")
           if c != "zstd" or m == 2]
LOG_DIR_ROOT_FILES = ("meta.properties", "recovery-point-offset-checkpoint", "replication-offset-checkpoint",
                      "log-start-offset-checkpoint")
PARTITION_COPIED = ("leader-epoch-checkpoint", "partition.metadata")


def _tid(t):
    return f"v{t[0]}-{t[1]}"


@functools.cache
def source_log(part: str) -> Path:
    (log,) = sorted((FIXTURES / part).glob("*.log"))
    return log


@functools.cache
def source_entries(part: str) -> list[o.Entry]:
    return o.kp_read(source_log(part).read_bytes())


def zstd_refused(parts, magic: int, codec: str) -> bool:
    """True when the run must be refused: a zstd batch would be inherited below v2."""
    return magic < 2 and codec == "default" and any(
        e.codec == o.CODECS["zstd"] for p in parts for e in source_entries(p))


def convert(src: Path, dest: Path, magic: int, codec: str, *extra: str) -> o.Result:
    args = ["convert", "--to-magic", str(magic)]
    if codec != "default":
        args += ["--compression", codec]
    return o.kt(*args, "--format", "jsonl", "--no-progress", *extra, src, dest)


# --------------------------------------------------------------------------- checks of one output segment


def check_segment(out_log: Path, part: str | Path, magic: int, codec: str, *, drop_aborted: bool = False) -> None:
    """Everything the rules say about ``out_log``, the conversion of ``part``'s one segment (or of
    the segment file ``part``)."""
    src_path = part if isinstance(part, Path) else source_log(part)
    src = o.kp_read(src_path.read_bytes()) if isinstance(part, Path) else source_entries(part)
    buf = out_log.read_bytes()
    where = f"{part} -> v{magic} {codec}: {out_log}"
    out = o.kp_read(buf)

    # the format: every entry at the target magic; codecs as asked
    assert {e.magic for e in out} <= {magic}, where
    want_codec = None if codec == "default" else o.CODECS[codec]
    for e in out:
        if e.is_control:
            assert e.codec == 0, f"{where}: a control batch at {e.position} is compressed"
        elif want_codec is not None and e.records:
            assert e.codec == want_codec, f"{where}: entry at {e.position} has codec {e.codec}"
        if magic < 2 and e.codec == 0:
            assert len(e.records) == 1, f"{where}: an uncompressed legacy entry holds one message"
        if e.codec == o.CODECS["lz4"] and e.records:
            entry = buf[e.position : e.position + e.size]
            frame = entry[61:] if magic == 2 else o.legacy_value(entry)
            stored, standard, broken = o.lz4_header_checksums(frame)
            if magic == 0:
                assert stored == broken != standard, f"{where}: magic-0 lz4 needs the magic-0 header checksum (§7.4)"
            else:
                assert stored == standard != broken, f"{where}: magic {magic} lz4 has the standard checksum (§7.4)"
    if codec == "default":
        # the codec of each source batch (legacy: of its wrapper, an uncompressed run stays uncompressed)
        src_codec = {r.offset: e.codec for e in src for r in e.records}
        for e in out:
            for r in e.records:
                assert e.codec == src_codec[r.offset], f"{where}: offset {r.offset} codec {e.codec}"

    # the records, by kafka-python, aiokafka and kafkatool
    expected = o.expected_records(src, magic, drop_aborted=drop_aborted)
    assert o.tuples(o.all_records(out)) == o.tuples(expected), where
    aio = [r for rs in o.aio_read(buf) for r in rs]
    assert o.tuples(aio, ts_type=False) == o.tuples(expected, ts_type=False), f"{where} (aiokafka)"
    from kafkatool import Segment

    kt_records = [(r.offset, r.key, r.value, r.timestamp, tuple(r.headers))
                  for r in Segment.at(out_log).records()]
    want = [(r.offset, r.key, r.value, r.timestamp, r.headers) for e in out if not e.is_control for r in e.records]
    assert kt_records == want, f"{where} (kafkatool)"

    # v2 -> v2: one batch per source batch, every header field kept
    aborted = o.aborted_batches(src) if drop_aborted else set()
    if magic == 2 and all(e.magic == 2 for e in src) and not drop_aborted:
        assert [e.v2 for e in out] == [e.v2 for e in src], where
    # a compressed legacy target: one wrapper per (compressed) source batch, at its last offset
    if magic < 2 and codec != "none":
        eligible = [e for i, e in enumerate(src) if not e.is_control and e.records and i not in aborted]

        def offsets(entries):
            return [[r.offset for r in e.records] for e in entries]

        wrappers = [e for e in out if e.codec != 0]
        assert all(e.first_offset == e.records[-1].offset for e in wrappers), where
        if codec == "default":
            assert offsets(wrappers) == offsets(e for e in eligible if e.codec != 0), where
        elif all(e.magic == 2 or e.codec != 0 for e in eligible):
            assert offsets(out) == offsets(eligible), where

    # legacy wrappers (§13.1 7): inner offsets relative to the first (v1) or absolute (v0), inner
    # messages uncompressed at the same magic; v1 wrapper timestamp = max inner (CreateTime) or the
    # log-append time, which the inner messages carry too (attributes bit 3)
    if magic < 2:
        src_bytes = src_path.read_bytes()
        copied = {src_bytes[x.position : x.position + x.size] for x in o.raw_entries(src_bytes)}
        for e, raw in zip(out, o.raw_entries(buf)):
            entry = buf[raw.position : raw.position + raw.size]
            if e.codec == 0 or entry in copied:  # a wrapper kept at its magic and codec is the source's
                continue
            inner = o.inner_entries(entry)
            offsets = [r.offset for r in e.records]
            assert [x.first_offset for x in inner] == ([x - offsets[0] for x in offsets] if magic == 1 else offsets), where
            assert all(x.magic == magic and x.attributes & 7 == 0 for x in inner), where
            if magic == 1:
                if raw.attributes & 0x08:
                    assert all(x.attributes & 0x08 and x.max_timestamp == raw.max_timestamp for x in inner), where
                else:
                    assert raw.max_timestamp == max(x.max_timestamp for x in inner), where

    # same magic and codec: the bytes copied unchanged
    if not drop_aborted and all(e.magic == magic and (want_codec is None or e.codec == want_codec) for e in src):
        assert buf == src_path.read_bytes(), f"{where}: same magic and codec, bytes copied"
    # legacy -> v2: one batch per wrapper, or per run of uncompressed messages (all small here)
    if magic == 2 and all(e.magic < 2 for e in src):
        runs: list[list[int]] = []
        for i, e in enumerate(src):
            same_run = (i > 0 and e.codec == 0 and src[i - 1].codec == 0
                        and (e.magic, e.timestamp_type) == (src[i - 1].magic, src[i - 1].timestamp_type))
            if same_run:
                runs[-1] += [r.offset for r in e.records]
            else:
                runs.append([r.offset for r in e.records])
        assert [[r.offset for r in e.records] for e in out] == runs, where
        for e in out:
            v = e.v2
            assert (v["producer_id"], v["producer_epoch"], v["base_sequence"], v["leader_epoch"]) == (-1,) * 4, where
            assert v["base_offset"] == e.records[0].offset and not v["is_transactional"], where

    # indexes: what recovery (and reindex) builds
    index, timeindex = o.expected_indexes(buf, int(out_log.name[:20]))
    assert out_log.with_suffix(".index").read_bytes() == index, f"{where}: .index"
    assert out_log.with_suffix(".timeindex").read_bytes() == timeindex, f"{where}: .timeindex"


def check_loss(result: o.Result, parts, magic: int, *, drop_aborted: bool = False) -> None:
    want = dict.fromkeys(o.LOSS_KEYS, 0)
    for p in parts:
        for k, v in o.expected_loss(source_entries(p), magic, drop_aborted=drop_aborted).items():
            want[k] += v
    got = o.summary_loss(result.out)
    assert {k: got.get(k) for k in o.LOSS_KEYS} == want, result


def check_clean(path: Path) -> None:
    """verify --deep finds nothing; reindex --all plans no change."""
    r = o.kt("verify", "--deep", "--format", "text", path)
    assert r.code == 0, r
    r = o.kt("reindex", "--all", "-q", path)
    assert r.code == 0, r


# --------------------------------------------------------------------------- the matrix


@pytest.mark.parametrize("target", TARGETS, ids=_tid)
@pytest.mark.parametrize("part", PARTITIONS)
def test_partition(part, target, tmp_path):
    magic, codec = target
    dest = tmp_path / "out" / part
    dest.parent.mkdir()
    result = convert(FIXTURES / part, dest, magic, codec)
    if part == METADATA and magic < 2:
        assert result.code == 2 and "metadata" in result.err, result
        assert not dest.exists()
        return
    if zstd_refused([part], magic, codec):
        assert result.code == 2, result
        assert "zstd" in result.err.lower() or "zstandard" in result.err.lower(), result
        assert not dest.exists()
        return
    assert result.code == 0, result
    logs = sorted(dest.glob("*.log"))
    assert [p.name for p in logs] == [source_log(part).name]
    check_segment(logs[0], part, magic, codec)
    check_loss(result, [part], magic)
    txnindex = source_log(part).with_suffix(".txnindex")
    if txnindex.exists():  # §9: its entries stay right at v2 (offsets kept); nothing to index below
        out_txn = logs[0].with_suffix(".txnindex")
        assert (out_txn.read_bytes() == txnindex.read_bytes()) if magic == 2 else not out_txn.exists()
    for name in PARTITION_COPIED:
        if (FIXTURES / part / name).exists():
            assert (dest / name).read_bytes() == (FIXTURES / part / name).read_bytes(), name
    check_clean(dest)


@pytest.mark.parametrize("target", TARGETS, ids=_tid)
@pytest.mark.parametrize("part", PARTITIONS)
def test_segment(part, target, tmp_path):
    magic, codec = target
    dest = tmp_path / "out"
    result = convert(source_log(part), dest, magic, codec)
    if part == METADATA and magic < 2:
        assert result.code == 2 and "metadata" in result.err, result
        assert not dest.exists()
        return
    if zstd_refused([part], magic, codec):
        assert result.code == 2, result
        assert not dest.exists()
        return
    assert result.code == 0, result
    out_log = dest / source_log(part).name
    check_segment(out_log, part, magic, codec)
    check_loss(result, [part], magic)
    r = o.kt("verify", "--deep", "--format", "text", out_log)
    assert r.code == 0, r


@pytest.mark.parametrize("target", TARGETS, ids=_tid)
def test_log_dir(target, tmp_path):
    magic, codec = target
    dest = tmp_path / "converted"
    result = convert(FIXTURES, dest, magic, codec)
    if zstd_refused(PARTITIONS, magic, codec):
        assert result.code == 2, result
        assert not dest.exists()
        return
    assert result.code == 0, result
    assert sorted(p.name for p in dest.iterdir() if p.is_dir()) == PARTITIONS
    if magic < 2:
        meta = FIXTURES / METADATA
        assert {p.name: p.read_bytes() for p in (dest / METADATA).iterdir()} == {
            p.name: p.read_bytes() for p in meta.iterdir()}, "below v2 the metadata log is copied unchanged"
    for part in (DATA_PARTITIONS if magic < 2 else PARTITIONS):
        (out_log,) = sorted((dest / part).glob("*.log"))
        assert out_log.name == source_log(part).name
        check_segment(out_log, part, magic, codec)
    for name in LOG_DIR_ROOT_FILES:
        assert (dest / name).read_bytes() == (FIXTURES / name).read_bytes(), name
    check_loss(result, DATA_PARTITIONS if magic < 2 else PARTITIONS, magic)
    check_clean(dest)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("src", ["v2-none-0", "v1-gzip-0", "v0-none-0", None])
def test_zstd_below_v2_refused(src, magic, tmp_path):
    dest = tmp_path / "out"
    result = convert(FIXTURES if src is None else FIXTURES / src, dest, magic, "zstd")
    assert result.code == 2, result
    assert "zstd" in result.err.lower() or "zstandard" in result.err.lower(), result
    assert not dest.exists()


def test_dest_not_empty_refused(tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "x").write_text("x")
    result = convert(FIXTURES / "v2-none-0", dest, 1, "default")
    assert result.code == 2, result
    assert [p.name for p in dest.iterdir()] == ["x"]


# --------------------------------------------------------------------------- timestamps in detail


def _inner_messages(entry: bytes) -> list[tuple[int, int, int]]:
    """(offset, attributes, timestamp) of a v1 wrapper's inner messages (decompressed by kafka-python)."""
    import kafka.codec

    codec = entry[17] & 7
    value = o.legacy_value(entry)
    inner = {1: kafka.codec.gzip_decode, 2: kafka.codec.snappy_decode, 3: kafka.codec.lz4_decode}[codec](value)
    return [(e.first_offset, e.attributes, e.max_timestamp) for e in o.raw_entries(inner)]


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4"])
def test_v1_log_append_time_carried(codec, tmp_path):
    """§13.1 6: v1 LogAppendTime: inner messages and wrapper carry the log-append time (the source
    maxTimestamp), inner attributes bit 3 set too. txn-0 offsets 114-118: LogAppendTime T0 + 5000."""
    log_append_time = 1700000000000 + 5000
    dest = tmp_path / "out"
    result = convert(source_log("txn-0"), dest, 1, codec)
    assert result.code == 0, result
    buf = (dest / source_log("txn-0").name).read_bytes()
    entries = o.raw_entries(buf)
    lat = [e for e in entries if 114 <= e.last_offset <= 118]
    assert lat, entries
    for e in lat:
        assert e.attributes & 0x08 and e.max_timestamp == log_append_time, e
        if codec != "none":
            inner = _inner_messages(buf[e.position : e.position + e.size])
            assert [x[0] for x in inner] == [0, 1, 2, 3, 4]  # relative to the first (v1)
            assert all(a & 0x08 and ts == log_append_time for _o, a, ts in inner), inner
            assert e.first_offset == 118  # wrapper offset = the last record's
    # and back to v2: a LogAppendTime batch whose maxTimestamp is the log-append time
    dest2 = tmp_path / "back"
    assert convert(dest / source_log("txn-0").name, dest2, 2, "default").code == 0
    back = o.kp_read((dest2 / source_log("txn-0").name).read_bytes())
    (b,) = [e for e in back if any(r.offset == 114 for r in e.records)]
    assert (b.timestamp_type, b.v2["max_timestamp"]) == (o.LOG_APPEND_TIME, log_append_time)
    assert [r.offset for r in b.records] == [114, 115, 116, 117, 118]


@pytest.mark.parametrize("codec", ["gzip", "snappy"])
def test_v0_compressed_inner_offsets_absolute(codec, tmp_path):
    """§13.1 7: a compressed v0 target stores absolute inner offsets; the wrapper sits at the last one."""
    import kafka.codec

    dest = tmp_path / "out"
    assert convert(source_log("v2-none-0"), dest, 0, codec).code == 0
    buf = (dest / source_log("v2-none-0").name).read_bytes()
    decode = {"gzip": kafka.codec.gzip_decode, "snappy": kafka.codec.snappy_decode}[codec]
    for i, e in enumerate(o.raw_entries(buf)):
        inner = o.raw_entries(decode(o.legacy_value(buf[e.position : e.position + e.size])))
        assert [x.first_offset for x in inner] == list(range(10 * i, 10 * i + 10))
        assert e.first_offset == 10 * i + 9


# --------------------------------------------------------------------------- --drop-aborted, --strict


@pytest.mark.parametrize("magic", [2, 1, 0])
def test_drop_aborted_is_read_committed(magic, tmp_path):
    """The records left equal what a read_committed consumer reads (ABORT markers, spec §6/§9)."""
    src = source_entries("txn-0")
    aborted = o.aborted_batches(src)
    assert [r.offset for i in sorted(aborted) for r in src[i].records] == [103, 104]  # hand-checked: README
    # the broker-format .txnindex beside it (§9: version, producer id, first, last, LSO) agrees
    txn = source_log("txn-0").with_suffix(".txnindex").read_bytes()
    entries = [struct.unpack_from(">hqqqq", txn, i) for i in range(0, len(txn), 34)]
    assert entries == [(0, 6000, 103, 113, 114)]
    for i in aborted:
        assert src[i].v2["producer_id"] == 6000 and 103 <= src[i].first_offset <= src[i].last_offset < 113
    dest = tmp_path / "out"
    result = convert(FIXTURES / "txn-0", dest, magic, "gzip", "--drop-aborted")
    assert result.code == 0, result
    out = o.kp_read(next(dest.glob("*.log")).read_bytes())
    committed = [r.kv() for i, e in enumerate(src) if i not in aborted and not e.is_control for r in e.records]
    assert [r.kv() for e in out if not e.is_control for r in e.records] == committed
    check_segment(next(dest.glob("*.log")), "txn-0", magic, "gzip", drop_aborted=True)
    check_loss(result, ["txn-0"], magic, drop_aborted=True)
    assert o.summary_loss(result.out)["aborted_records_dropped"] == 2


def test_aborted_kept_without_drop(tmp_path):
    dest = tmp_path / "out"
    result = convert(FIXTURES / "txn-0", dest, 1, "gzip")
    assert result.code == 0, result
    assert o.summary_loss(result.out)["aborted_records_kept"] == 2
    out = o.kp_read(next(dest.glob("*.log")).read_bytes())
    assert {103, 104} <= {r.offset for e in out for r in e.records}


@pytest.mark.parametrize("src,magic,codec,extra,lossy", [
    ("v2-none-0", 1, "none", (), True),        # headers, leader epoch
    ("v2-gzip-0", 2, "zstd", (), False),
    ("v1-none-0", 2, "lz4", (), False),
    ("v1-none-0", 0, "default", (), True),     # timestamps
    ("v0-gzip-0", 1, "default", (), False),
    ("golden-0", 1, "none", (), True),         # control batch, producer fields
    ("txn-0", 2, "default", (), False),
    ("txn-0", 2, "default", ("--drop-aborted",), True),  # records left the log
    (".", 2, "default", (), False),            # the whole log dir
    (".", 1, "gzip", (), True),
])
def test_strict(src, magic, codec, extra, lossy, tmp_path):
    dest = tmp_path / "out"
    result = convert(FIXTURES / src, dest, magic, codec, "--strict", *extra)
    if lossy:
        assert result.code == 1, result
        assert not dest.exists()
        assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())  # no temp dir left either
        assert o.summary(result.out)["strictFailed"] is True
    else:
        assert result.code == 0, result
        assert list(dest.rglob("*.log"))


def test_loss_report_text(tmp_path):
    """The text report (stderr) names each loss with the hand-derived counts."""
    want = o.expected_loss(source_entries("v2-none-0"), 0)
    assert (want["headers_dropped"], want["header_count"], want["timestamps_dropped"]) == (14, 28, 40)
    result = o.kt("convert", "--to-magic", "0", "--no-progress", FIXTURES / "v2-none-0", tmp_path / "out")
    assert result.code == 0, result
    text = result.err
    assert "14" in text and "28" in text and "40" in text, text
    assert "header" in text and "timestamp" in text, text


# --------------------------------------------------------------------------- round trip


def _kafka_python_segment(path: Path, offset: int = 1000, *, codecs=(0, 1, 2, 3, 4), size: int = 1,
                          headers: bool = False) -> list[tuple]:
    """A v2 segment written by kafka-python's builder: one batch per codec in ``codecs``, offset
    gaps between batches (as compaction leaves), null keys and values, timestamps not monotonic
    inside a batch; headers only when asked. Returns (offset, timestamp, key, value) per record."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    out = bytearray()
    expected = []
    rnd = random.Random(offset)  # incompressible values when size > 1
    ts = 1700000000000 + offset
    for i, codec in enumerate(codecs):
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                            batch_size=1 << 20)
        n = 7 + i % 5
        for j in range(n):
            key = None if j % 4 == 1 else f"k{i}-{j}".encode()
            value = None if j % 5 == 4 else (f"value {i}/{j} " * (j + 1)).encode() + rnd.randbytes(120 * (size - 1))
            stamp = ts + 37 * j - (3 if j == 2 else 0)
            hdrs = [("h", f"{i}.{j}".encode())] if headers and j % 2 == 0 else []
            builder.append(j, timestamp=stamp, key=key, value=value, headers=hdrs)
            expected.append((offset + j, stamp, key, value))
        batch = bytearray(builder.build())
        struct.pack_into(">q", batch, 0, offset)  # the base offset (the builder writes 0)
        out += batch
        offset += n + 3  # a gap of 3 offsets
        ts += 1000
    path.write_bytes(bytes(out))
    return expected


@pytest.mark.parametrize("via", ["default", "none", "gzip"])
def test_round_trip_v2_v1_v2(via, tmp_path):
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    src = src_dir / "00000000000000001000.log"
    expected = _kafka_python_segment(src)
    # the builder's batches: offsets, timestamps, keys, values as built (the oracle agrees)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in o.all_records(o.kp_read(src.read_bytes()))] == expected
    if via == "default":  # zstd is inherited from the last batch: refused below v2
        assert convert(src, tmp_path / "refused", 1, via).code == 2
        via = "snappy"
    assert convert(src, tmp_path / "v1", 1, via).code == 0
    mid = o.kp_read((tmp_path / "v1" / src.name).read_bytes())
    assert {e.magic for e in mid} == {1}
    assert convert(tmp_path / "v1" / src.name, tmp_path / "v2", 2, "default").code == 0
    back = o.kp_read((tmp_path / "v2" / src.name).read_bytes())
    assert {e.magic for e in back} == {2}
    assert [(r.offset, r.timestamp, r.key, r.value) for r in o.all_records(back)] == expected
    aio = [(r.offset, r.timestamp, r.key, r.value) for rs in o.aio_read((tmp_path / "v2" / src.name).read_bytes())
           for r in rs]
    assert aio == expected
    # v0/v1 -> v2: producer fields -1, leader epoch -1, CreateTime (§13.2)
    for e in back:
        v = e.v2
        assert (v["producer_id"], v["producer_epoch"], v["base_sequence"], v["leader_epoch"]) == (-1, -1, -1, -1)
        assert v["timestamp_type"] == o.CREATE_TIME and not v["is_transactional"]


def test_copy_of_fixture_untouched(tmp_path):
    """The source is never written: a conversion of a copy leaves the copy's bytes as they were."""
    copy = tmp_path / "txn-0"
    shutil.copytree(FIXTURES / "txn-0", copy)
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    assert convert(copy, tmp_path / "out", 1, "gzip").code == 0
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == before


# --------------------------------------------------------------------------- --max-batch-bytes


@pytest.mark.parametrize("part", ["v1-none-0", "v0-none-0"])
def test_max_batch_bytes_boundaries(part, tmp_path):
    """Uncompressed legacy messages coalesce into v2 batches of at most --max-batch-bytes (log
    overhead included): a batch of exactly that size fits, one byte less moves its last record on."""
    records = o.all_records(source_entries(part))
    first = o.greedy_runs(records, 10**9)[0]
    assert len(first) == 40
    # the exact size of a batch of the first 7 records, counted by hand (§4.1, §4.2)
    exact = o.V2_BATCH_OVERHEAD + sum(
        o.v2_record_size(r.offset - records[0].offset, r.timestamp - records[0].timestamp, r.key, r.value)
        for r in records[:7])
    for n, first_len in ((exact, 7), (exact - 1, 6), (exact + 1, 7), (100, 1)):
        dest = tmp_path / f"out-{n}"
        result = convert(FIXTURES / part, dest, 2, "none", "--max-batch-bytes", str(n))
        assert result.code == 0, result
        buf = next(dest.glob("*.log")).read_bytes()
        out = o.kp_read(buf)
        runs = [[r.offset for r in e.records] for e in out]
        assert runs == o.greedy_runs(records, n), n
        assert len(runs[0]) == first_len, n
        assert all(e.size <= n or len(e.records) == 1 for e in out), n
        assert [e.size for e in out][0] == (exact if first_len == 7 else [e.size for e in out][0])
        assert o.tuples(o.all_records(out)) == o.tuples(o.expected_records(source_entries(part), 2))


# --------------------------------------------------------------------------- several segments


@pytest.mark.parametrize("target", [(0, "none"), (1, "gzip"), (1, "lz4"), (2, "zstd"), (2, "default")], ids=_tid)
def test_partition_of_several_segments(target, tmp_path):
    """A partition of three segments written by kafka-python (large enough for index entries at
    the default interval of 4096 bytes): each converts under its own name, records and indexes as
    the oracles say, verify --deep and reindex --all find nothing."""
    magic, codec = target
    part = tmp_path / "multi-0"
    part.mkdir()
    expected = {}
    base = 0
    for k in range(3):
        log = part / f"{base:020d}.log"
        expected[log.name] = _kafka_python_segment(log, base, codecs=(0, 1, 2, 3) if magic < 2 else (0, 1, 2, 3, 4),
                                                   size=4, headers=k == 1)
        base = expected[log.name][-1][0] + 5
    dest = tmp_path / "out" / "multi-0"
    dest.parent.mkdir()
    result = convert(part, dest, magic, codec)
    assert result.code == 0, result
    assert sorted(p.name for p in dest.glob("*.log")) == sorted(expected)
    want_loss = dict.fromkeys(o.LOSS_KEYS, 0)
    for name, records in expected.items():
        src = o.kp_read((part / name).read_bytes())
        buf = (dest / name).read_bytes()
        out = o.kp_read(buf)
        assert {e.magic for e in out} == {magic}
        assert o.tuples(o.all_records(out)) == o.tuples(o.expected_records(src, magic)), name
        got = [(r.offset, r.key, r.value) for r in o.all_records(out)]
        assert got == [(x[0], x[2], x[3]) for x in records], name
        index, timeindex = o.expected_indexes(buf, int(name[:20]))
        assert len(index) >= 8 or magic == 0, "big enough for an index entry"
        assert (dest / name).with_suffix(".index").read_bytes() == index, name
        assert (dest / name).with_suffix(".timeindex").read_bytes() == timeindex, name
        for k, v in o.expected_loss(src, magic).items():
            want_loss[k] += v
    got_loss = o.summary_loss(result.out)
    assert {k: got_loss[k] for k in o.LOSS_KEYS} == want_loss
    check_clean(dest)


# --------------------------------------------------------------------------- a segment of every kind of entry


T0 = 1700000000000


def _mixed_segment(path: Path) -> None:
    """A segment whose entries change magic, timestamp type and codec, written by hand (§5.1) and
    by kafka-python's builder: v1 CreateTime messages 0-9, v1 LogAppendTime messages 10-14 (two
    log-append times: 10-12, 13-14), a v1 gzip wrapper holding 15, 17 and 20 (compaction gaps: inner offsets 0, 2,
    5), a v0 message 21, a v2 lz4 batch 22-26 with headers, a v1 message 27, a LogAppendTime v1 gzip
    wrapper 28-30 whose inner messages carry CreateTime stamps."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    out = b"".join(o.legacy_message(i, 1, 0, T0 + 7 * i, b"k%d" % i, b"v%d" % i * (i + 1)) for i in range(10))
    out += b"".join(o.legacy_message(i, 1, 0x08, T0 + (999 if i < 13 else 1999), None if i == 12 else b"k%d" % i,
                                     b"lat%d" % i) for i in range(10, 15))
    inner = b"".join(o.legacy_message(rel, 1, 0, T0 + 300 + rel, b"c%d" % rel, b"compressed %d" % rel)
                     for rel in (0, 2, 5))
    out += o.legacy_wrapper(20, 1, 1, T0 + 305, inner)
    out += o.legacy_message(21, 0, 0, -1, b"old", None)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=3, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for j in range(5):
        builder.append(j, timestamp=T0 + 500 + j, key=b"v2-%d" % j, value=b"x" * 50,
                       headers=[("h", b"%d" % j)] if j % 2 else [])
    batch = bytearray(builder.build())
    struct.pack_into(">q", batch, 0, 22)
    out += bytes(batch)
    out += o.legacy_message(27, 1, 0, T0 + 600, b"last", b"one")
    # a wrapper the broker stamped LogAppendTime in place: its inner messages keep their CreateTime
    # stamps, which readers replace with the wrapper's (§5.2)
    inner = b"".join(o.legacy_message(rel, 1, 0, T0 + 700 + rel, b"i%d" % rel, b"stamped %d" % rel) for rel in range(3))
    out += o.legacy_wrapper(30, 1, 1, T0 + 5000, inner, log_append=True)
    path.write_bytes(out)


@pytest.mark.parametrize("target", TARGETS, ids=_tid)
def test_mixed_segment(target, tmp_path):
    magic, codec = target
    part = tmp_path / "mixed-0"
    part.mkdir()
    log = part / "00000000000000000000.log"
    _mixed_segment(log)
    src = o.kp_read(log.read_bytes())
    assert [r.offset for r in o.all_records(src)] == [*range(15), 15, 17, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]
    assert [r.timestamp for r in src[-1].records] == [T0 + 5000] * 3
    dest = tmp_path / "out" / "mixed-0"
    dest.parent.mkdir()
    result = convert(part, dest, magic, codec)
    assert result.code == 0, result
    out_log = dest / log.name
    check_segment(out_log, log, magic, codec)
    got = o.summary_loss(result.out)
    assert {k: got[k] for k in o.LOSS_KEYS} == o.expected_loss(src, magic)
    out = o.kp_read(out_log.read_bytes())
    if magic == 2:
        # one batch per run (a run ends at a change of magic or timestamp type, and of log-append
        # time: a v2 batch has one), per wrapper, per v2 batch
        assert [[r.offset for r in e.records] for e in out] == [
            list(range(10)), [10, 11, 12], [13, 14], [15, 17, 20], [21], [22, 23, 24, 25, 26], [27], [28, 29, 30]]
        assert (out[-1].timestamp_type, out[-1].v2["max_timestamp"]) == (o.LOG_APPEND_TIME, T0 + 5000)
        for lat, when in ((out[1], T0 + 999), (out[2], T0 + 1999)):
            assert (lat.timestamp_type, lat.v2["max_timestamp"]) == (o.LOG_APPEND_TIME, when)
        wrapped = out[3]
        assert (wrapped.v2["base_offset"], wrapped.v2["last_offset"], wrapped.v2["count"]) == (15, 20, 3)
        assert [r.timestamp for r in out[4].records] == [-1] and out[4].timestamp_type == o.CREATE_TIME
        if codec == "default":
            assert [e.codec for e in out] == [0, 0, 0, 1, 0, 3, 0, 1]
            (v2_entry,) = [x for x in o.raw_entries(log.read_bytes()) if x.magic == 2]  # kept at its codec
            v2_bytes = log.read_bytes()[v2_entry.position : v2_entry.position + v2_entry.size]
            assert v2_bytes in out_log.read_bytes(), "a v2 batch kept at its codec is copied unchanged"
    check_clean(dest)


@pytest.mark.parametrize("target", [(0, "gzip"), (2, "zstd")], ids=_tid)
def test_empty_segment(target, tmp_path):
    """An empty .log (a freshly rolled segment) converts to an empty .log with empty indexes."""
    magic, codec = target
    part = tmp_path / "empty-0"
    part.mkdir()
    (part / "00000000000000000042.log").write_bytes(b"")
    dest = tmp_path / "out" / "empty-0"
    dest.parent.mkdir()
    result = convert(part, dest, magic, codec)
    assert result.code == 0, result
    out_log = dest / "00000000000000000042.log"
    assert out_log.read_bytes() == b""
    assert out_log.with_suffix(".index").read_bytes() == b""
    assert out_log.with_suffix(".timeindex").read_bytes() == b""
    assert {k: o.summary_loss(result.out)[k] for k in o.LOSS_KEYS} == dict.fromkeys(o.LOSS_KEYS, 0)
    check_clean(dest)


def test_golden_to_v1(tmp_path):
    """golden-0 below v2: the COMMIT marker goes (counted), the two data batches stay, and the
    transactional batch loses its producer fields (counted); timestamps and offsets kept."""
    dest = tmp_path / "out"
    result = convert(FIXTURES / "golden-0", dest, 1, "none")
    assert result.code == 0, result
    out = o.kp_read(next(dest.glob("*.log")).read_bytes())
    assert [(r.offset, r.key, r.value) for e in out for r in e.records] == [
        (0, b"k1", b"v1"), (1, None, b"v2"), (2, None, b"tx")]  # spec §16.1, §16.2
    loss = o.summary_loss(result.out)
    assert (loss["control_batches_dropped"], loss["control_records_dropped"], loss["headers_dropped"],
            loss["header_count"], loss["producer_fields_dropped"]) == (1, 1, 1, 1, 2)


def _compacted_segment(path: Path) -> None:
    """Two v2 batches as the log cleaner leaves them, built with kafka-python: records at offsets 0,
    2 and 5 of a batch whose lastOffsetDelta is still 7 (its last records removed), and a gzip batch
    8-11 holding 9 and 11 only. The header is patched by hand (lastOffsetDelta, CRC-32C: §4.1)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.util import calc_crc32c

    out = b""
    for base, codec, deltas, last_delta in ((0, 0, (0, 2, 5), 7), (8, 1, (1, 3), 3)):
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                            batch_size=1 << 20)
        for d in deltas:
            builder.append(d, timestamp=T0 + 10 * (base + d), key=b"key-%d" % (base + d), value=b"v" * (base + d),
                           headers=[])
        batch = bytearray(builder.build())
        struct.pack_into(">q", batch, 0, base)
        struct.pack_into(">i", batch, 23, last_delta)
        struct.pack_into(">I", batch, 17, calc_crc32c(bytes(batch[21:])))
        out += bytes(batch)
    path.write_bytes(out)


@pytest.mark.parametrize("target", TARGETS, ids=_tid)
def test_compacted_v2_batches(target, tmp_path):
    """Compaction gaps survive: v2 keeps lastOffsetDelta; a legacy wrapper sits at its last record's
    offset with inner offsets relative to the first (v1) or absolute (v0), §13.1 7."""
    magic, codec = target
    part = tmp_path / "compacted-0"
    part.mkdir()
    log = part / "00000000000000000000.log"
    _compacted_segment(log)
    src = o.kp_read(log.read_bytes())
    assert [(e.first_offset, e.last_offset, [r.offset for r in e.records]) for e in src] == [
        (0, 7, [0, 2, 5]), (8, 11, [9, 11])]
    dest = tmp_path / "out" / "compacted-0"
    dest.parent.mkdir()
    result = convert(part, dest, magic, codec)
    assert result.code == 0, result
    check_segment(dest / log.name, log, magic, codec)
    out = o.kp_read((dest / log.name).read_bytes())
    if magic == 2:
        assert [(e.first_offset, e.last_offset) for e in out] == [(0, 7), (8, 11)]
    elif codec not in ("none", "default"):
        assert [e.first_offset for e in out] == [5, 11]
    check_clean(dest)
