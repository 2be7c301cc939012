"""kafkatool.spark.rows and kafkatool.spark.schema: the records/batches rows as Arrow batches (no Spark
needed but for the schema checks against pyspark's own Arrow conversion).

Expected values come from kafkatool's non-Spark reader (Segment.records / Segment.batches), from
kafka-python (tests/convert_oracles.kp_read), from kafkatool verify on the same damaged file, and
from the fixtures' documented contents (fixtures/README.md: offset o has timestamp
T0 + 10*o + o % 4, 40 records per codec partition).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

from conftest import FIXTURES, REAL, REPO  # noqa: E402

from kafkatool.record.crc import crc32c  # noqa: E402
from kafkatool.record.records import decode_batch_records  # noqa: E402
from kafkatool.record.v2 import RecordSpec, encode_batch  # noqa: E402
from kafkatool.record.compression import Codec  # noqa: E402
from kafkatool.segment.files import parse_partition_dir  # noqa: E402
from kafkatool.segment.logdir import Segment  # noqa: E402
from kafkatool.spark import rows, schema  # noqa: E402
from kafkatool.spark.plan import ReadOptions, ReadTask, SegmentSlice  # noqa: E402
from kafkatool.verify import FindingKind, VerifyOptions, verify_paths  # noqa: E402

T0 = 1700000000000
FIXTURE_LOGS = sorted(FIXTURES.glob("*/*.log"))
REAL_LOGS = sorted(REAL.rglob("*.log")) if REAL.is_dir() else []
#: The finding kinds that are rows with an error (the rest of verify's findings are not about reading).
ERROR_KINDS = {"invalid_size", "unknown_magic", "partial_batch", "trailing_bytes", "trailing_zeros", "unknown_codec",
               "decompression_failed", "decompressed_too_large", "record_count_mismatch", "invalid_record",
               "invalid_wrapper", "unreadable"}


# ----------------------------------------------------------------------------- helpers


def base_of(log: Path) -> int:
    try:
        return int(log.name[:20]) if log.name[:20].isdigit() and len(log.name) == 24 else 0
    except ValueError:
        return 0


def slice_of(log, start: int = 0, end: int | None = None, base: int | None = None, error: str | None = None) -> SegmentSlice:
    log = os.fspath(log)
    parsed = parse_partition_dir(os.path.basename(os.path.dirname(os.path.abspath(log))))
    return SegmentSlice(parsed.topic if parsed else None, parsed.partition if parsed else None, os.path.dirname(log),
                        log, base_of(Path(log)) if base is None else base, start, end, None, error)


def read(slices, kind: str = "records", **opts) -> pa.Table:
    """rows.read over ``slices``; every batch checked against the kind's schema and Arrow's full validation."""
    if not isinstance(slices, (list, tuple)):
        slices = [slices]
    batches = list(rows.read(ReadTask(tuple(slices), 0), ReadOptions(kind=kind, **opts)))
    for b in batches:
        assert b.schema.equals(schema.arrow_schema(kind)), b.schema
        assert b.num_rows > 0
        b.validate(full=True)
    return pa.Table.from_batches(batches, schema=schema.arrow_schema(kind))


def table_rows(t: pa.Table) -> list[dict]:
    """Rows as dicts, timestamps as int microseconds."""
    cols = {}
    for name in t.column_names:
        c = t.column(name)
        if pa.types.is_timestamp(c.type):
            c = c.cast(pa.int64())
        cols[name] = c.to_pylist()
    return [dict(zip(cols, vals)) for vals in zip(*cols.values())]


def headers_of(r) -> list | None:
    return [{"key": k.decode("utf-8"), "value": v} for k, v in r.headers] or None


def reference_records(log: Path) -> list[dict]:
    """Each record of the non-Spark reader (Segment.records, control records included), with its
    batch's fields (Segment.batches) as the records kind gives them."""
    seg = Segment.at(log, base_offset=base_of(log))
    batches = list(seg.batches())
    out = []
    recs = iter(seg.records(control=True))
    for b in batches:
        if b.magic >= 2 and b.count == 0:
            continue
        # the stream's next records are this batch's: its count (v2), or up to its offset (a legacy
        # entry's offset is its last message's)
        n = b.count if b.magic >= 2 else None
        first = None
        taken = 0
        while n is None or taken < n:
            r = next(recs, None)
            if r is None:
                break
            if first is None:
                first = r.offset
            taken += 1
            ok = b.crc == b.computed_crc and r.crc_valid is not False
            out.append({
                "key": r.key, "value": r.value, "offset": r.offset, "timestamp": r.timestamp * 1000,
                "headers": headers_of(r), "sequence": r.sequence, "batchPosition": b.position,
                "batchBaseOffset": first, "magic": b.magic, "codec": b.codec_name,
                "leaderEpoch": b.partition_leader_epoch, "producerId": b.producer_id,
                "producerEpoch": b.producer_epoch, "isTransactional": b.is_transactional,
                "isControl": b.is_control, "crcValid": ok, "error": None,
            })
            if b.magic < 2 and r.offset >= b.offset:
                break
    assert next(recs, None) is None
    return out


def project(rows_: list[dict], keys) -> list[dict]:
    return [{k: r[k] for k in keys} for r in rows_]


# ----------------------------------------------------------------------------- schema


def _hand_struct_types():
    """The issue's and COMMON.md's columns, written here as pyspark types (no JVM needed)."""
    from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, IntegerType, LongType, StringType,
                                   StructField, StructType, TimestampType)

    S, I, L, B, T, BIN = StringType(), IntegerType(), LongType(), BooleanType(), TimestampType(), BinaryType()
    headers = ArrayType(StructType([StructField("key", S), StructField("value", BIN)]))
    kafka_source = [("key", BIN), ("value", BIN), ("topic", S), ("partition", I), ("offset", L),
                    ("timestamp", T), ("timestampType", I), ("headers", headers)]
    records = kafka_source + [("segment", S), ("segmentBaseOffset", L), ("batchPosition", L),
                              ("batchBaseOffset", L), ("magic", I), ("codec", S), ("leaderEpoch", I),
                              ("producerId", L), ("producerEpoch", I), ("sequence", I), ("isTransactional", B),
                              ("isControl", B), ("crcValid", B), ("error", S)]
    batches = [("topic", S), ("partition", I), ("segment", S), ("segmentBaseOffset", L), ("position", L),
               ("size", L), ("baseOffset", L), ("lastOffset", L), ("magic", I), ("codec", S), ("attributes", I),
               ("timestampType", I), ("baseTimestamp", T), ("maxTimestamp", T), ("leaderEpoch", I),
               ("producerId", L), ("producerEpoch", I), ("baseSequence", I), ("lastSequence", I),
               ("recordCount", I), ("isTransactional", B), ("isControl", B), ("storedCrc", L), ("computedCrc", L),
               ("crcValid", B), ("error", S), ("errorKind", S)]
    findings = [("type", S), ("file", S), ("position", L), ("length", L), ("kind", S), ("message", S),
                ("batchIndex", I), ("firstOffset", L), ("lastOffset", L), ("expected", S), ("found", S),
                ("batchesAfter", I), ("fileKind", S), ("bytes", L), ("batches", L), ("findings", L), ("state", S),
                ("task", I), ("seq", I)]
    stats = [("topic", S), ("partition", I), ("partitionPath", S), ("segment", S), ("stats", BIN)]
    return {k: StructType([StructField(n, t, True) for n, t in cols])
            for k, cols in (("records", records), ("batches", batches), ("findings", findings), ("stats", stats))}


@pytest.mark.parametrize("kind", schema.KINDS)
def test_arrow_schema_is_what_spark_converts_the_columns_to(kind):
    pytest.importorskip("pyspark")
    from pyspark.sql.pandas.types import to_arrow_schema

    expected = _hand_struct_types()[kind]
    assert list(schema.column_names(kind)) == expected.fieldNames()
    assert to_arrow_schema(expected, timezone="UTC").equals(schema.arrow_schema(kind))


def test_ddl_parses_to_the_arrow_schema_in_spark(spark):
    """Spark's own DDL parser (the JVM's) and Arrow conversion, as a Python data source's reader
    checks each batch (``pa_schema.equals(batch.schema)``)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    hand = _hand_struct_types()
    for kind, text in (("records", schema.RECORDS_DDL), ("batches", schema.BATCHES_DDL),
                       ("findings", schema.FINDINGS_DDL), ("stats", schema.STATS_DDL)):
        parsed = StructType.fromDDL(text)
        assert parsed == hand[kind], kind
        assert to_arrow_schema(parsed, timezone="UTC").equals(schema.arrow_schema(kind)), kind


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown kind 'rows'"):
        schema.arrow_schema("rows")
    with pytest.raises(ValueError, match="records and batches"):
        list(rows.read(ReadTask((), 0), ReadOptions(kind="findings")))


# ----------------------------------------------------------------------------- records = the non-Spark reader


RECORD_KEYS = ("key", "value", "offset", "timestamp", "headers", "sequence", "batchPosition", "batchBaseOffset",
               "magic", "codec", "leaderEpoch", "producerId", "producerEpoch", "isTransactional", "isControl",
               "crcValid", "error")


def _check_records_match(log: Path) -> list[dict]:
    got = table_rows(read(slice_of(log)))
    expected = reference_records(log)
    assert project(got, RECORD_KEYS) == expected
    parsed = parse_partition_dir(log.parent.name)
    for r in got:
        assert (r["topic"], r["partition"]) == ((parsed.topic, parsed.partition) if parsed else (None, None))
        assert r["segment"] == str(log)
        assert r["segmentBaseOffset"] == base_of(log)
    return got


@pytest.mark.parametrize("log", FIXTURE_LOGS, ids=lambda p: p.parent.name)
def test_records_equal_the_non_spark_reader(log):
    got = _check_records_match(log)
    assert got, "every fixture segment holds records"


@pytest.mark.parametrize("log", REAL_LOGS, ids=lambda p: str(p.relative_to(REAL)))
def test_real_segment_records_equal_the_non_spark_reader(log, real):
    _check_records_match(log)


def test_real_segments_are_there(real):
    assert len(REAL_LOGS) >= 10


def _kafka_python_rows(log: Path) -> list[tuple]:
    from convert_oracles import kp_read

    out = []
    for e in kp_read(log.read_bytes()):
        for r in e.records:
            ttype = -1 if r.timestamp_type is None else r.timestamp_type
            headers = [{"key": k.decode(), "value": v} for k, v in r.headers] or None
            out.append((r.offset, r.timestamp * 1000, ttype, r.key, r.value, headers))
    return out


@pytest.mark.parametrize("log", [p for p in FIXTURE_LOGS if p.parent.name != "__cluster_metadata-0"],
                         ids=lambda p: p.parent.name)
def test_records_equal_kafka_python(log):
    pytest.importorskip("kafka")
    got = [(r["offset"], r["timestamp"], r["timestampType"], r["key"], r["value"], r["headers"])
           for r in table_rows(read(slice_of(log)))]
    assert got == _kafka_python_rows(log)


def test_records_fixture_values_by_hand():
    """v2-none-0 per fixtures/README.md: 40 records, offset o at T0 + 10*o + o % 4, CreateTime,
    every 7th key (i % 7 == 3) null, every 10th value null, headers on every 3rd."""
    got = table_rows(read(slice_of(FIXTURES / "v2-none-0" / "00000000000000000000.log")))
    assert [r["offset"] for r in got] == list(range(40))
    assert [r["timestamp"] for r in got] == [(T0 + 10 * o + o % 4) * 1000 for o in range(40)]
    assert {r["timestampType"] for r in got} == {0}
    assert [r["offset"] for r in got if r["key"] is None] == [o for o in range(40) if o % 7 == 3]
    assert [r["offset"] for r in got if r["value"] is None] == [9, 19, 29, 39]
    assert [r["headers"] for r in got[:2]] == [[{"key": "trace-id", "value": b"t0"}, {"key": "empty", "value": None}], None]
    assert {(r["topic"], r["partition"], r["codec"], r["magic"]) for r in got} == {("v2-none", 0, "none", 2)}
    assert [r["batchBaseOffset"] for r in got] == [o // 10 * 10 for o in range(40)]


def test_txn_fixture_control_log_append_time_and_sequences():
    """txn-0 per fixtures/README.md (control records included, LogAppendTime, sequences)."""
    got = {r["offset"]: r for r in table_rows(read(slice_of(FIXTURES / "txn-0" / "00000000000000000100.log")))}
    assert got[105]["isControl"] is True and got[105]["isTransactional"] is True
    assert got[113]["isControl"] is True
    assert [got[o]["sequence"] for o in (100, 101, 102)] == [0, 1, 2]
    assert [got[o]["sequence"] for o in range(106, 113)] == list(range(10, 17))
    assert got[106]["producerId"] == 7000 and got[106]["producerEpoch"] == 2 and got[106]["leaderEpoch"] == 4
    assert got[106]["isTransactional"] is False and got[106]["codec"] == "zstd"
    for o in range(114, 119):
        assert got[o]["timestampType"] == 1 and got[o]["timestamp"] == (T0 + 5000) * 1000
    assert not any(o in got for o in (119, 120, 121))  # emptied by compaction: no records


@pytest.mark.parametrize("magic, codec, log_append", [(1, Codec.GZIP, True), (1, Codec.NONE, True), (1, Codec.LZ4, False),
                                                    (0, Codec.SNAPPY, False)])
def test_legacy_wrappers_against_kafka_python(tmp_path, magic, codec, log_append):
    """Legacy entries kafkatool's fixtures do not hold: LogAppendTime v1 wrappers and messages, and a
    wrapper of 5000 inner messages (more than one decoding chunk): rows as kafka-python reads them,
    every row of a wrapper with its first inner offset as batchBaseOffset."""
    pytest.importorskip("kafka")
    from kafkatool.record.legacy import encode_legacy

    log = tmp_path / "legacy-0" / "00000000000000000000.log"
    log.parent.mkdir()
    n = 5000 if codec else 3
    specs = [RecordSpec(100 + i, T0 + i, b"k%d" % i, b"v" * (i % 50)) for i in range(n)]
    lat = T0 + 99999 if log_append else None
    data = encode_legacy(specs, magic=magic, codec=codec, log_append_time=lat)
    data += encode_legacy([RecordSpec(100 + n, T0, None, b"x")], magic=magic)
    log.write_bytes(data)
    got = table_rows(read(slice_of(log)))
    assert [(r["offset"], r["timestamp"], r["timestampType"], r["key"], r["value"], r["headers"]) for r in got] \
        == _kafka_python_rows(log)
    assert {r["timestampType"] for r in got[:n]} == ({1} if log_append else {-1} if magic == 0 else {0})
    if codec:
        assert {r["batchBaseOffset"] for r in got[:n]} == {100}
    assert [r["offset"] for r in got] == list(range(100, 101 + n))


def test_v0_timestamps_are_minus_one_ms():
    got = table_rows(read(slice_of(FIXTURES / "v0-gzip-0" / "00000000000000000000.log")))
    assert {r["timestamp"] for r in got} == {-1000} and {r["timestampType"] for r in got} == {-1}
    assert [r["batchBaseOffset"] for r in got] == [o // 10 * 10 for o in range(40)]


def test_timestamps_microseconds_cannot_hold_are_null(tmp_path):
    """A record timestamp above (2**63-1)//1000 ms has no microsecond value: null, not a wrapped number."""
    log = tmp_path / "ts-0" / "00000000000000000000.log"
    log.parent.mkdir()
    big = (2**63 - 1) // 1000
    log.write_bytes(encode_batch([RecordSpec(0, big, b"a", b"1"), RecordSpec(1, big + 1, b"b", b"2")])
                    + encode_batch([RecordSpec(2, -1, b"c", b"3")]))
    got = table_rows(read(slice_of(log)))
    assert [(r["offset"], r["timestamp"]) for r in got] == [(0, big * 1000), (1, None), (2, -1000)]
    b = table_rows(read(slice_of(log), "batches"))
    assert [(r["baseTimestamp"], r["maxTimestamp"]) for r in b] == [(big * 1000, None), (-1000, -1000)]


def test_header_keys_not_utf8_are_replaced_as_java_does(tmp_path):
    """A header key that is not UTF-8 is a valid string in the column (Java's replacement, as Spark's
    Kafka source shows it); its value stays bytes."""
    log = tmp_path / "h-0" / "00000000000000000000.log"
    log.parent.mkdir()
    log.write_bytes(encode_batch([RecordSpec(0, T0, b"k", b"v", [(b"ok", b"1"), (b"a\xffb", b"\xff")])]))
    got = table_rows(read(slice_of(log)))  # read() validates the string column fully
    assert got[0]["headers"] == [{"key": "ok", "value": b"1"}, {"key": "a\ufffdb", "value": b"\xff"}]


def test_include_headers_false_and_verify_crc_false():
    log = FIXTURES / "v2-none-0" / "00000000000000000000.log"
    t = read(slice_of(log), include_headers=False, verify_crc=False)
    assert t.column("headers").null_count == 40
    assert t.column("crcValid").null_count == 40
    b = read(slice_of(log), "batches", verify_crc=False)
    assert b.column("crcValid").null_count == b.num_rows == 4
    assert b.column("computedCrc").null_count == 4 and b.column("storedCrc").null_count == 0
    assert read(slice_of(log)).column("headers").null_count == 26  # on: 14 records have headers


# ----------------------------------------------------------------------------- batches = Segment.batches


@pytest.mark.parametrize("log", FIXTURE_LOGS + REAL_LOGS, ids=lambda p: p.parent.name + "/" + p.name)
def test_batches_equal_segment_batches(log):
    got = table_rows(read(slice_of(log), "batches"))
    seg = Segment.at(log, base_offset=base_of(log))
    reader = seg.batches()
    expected = []
    for b in reader:
        legacy_wrapper = b.magic < 2 and b.codec
        # a wrapper's first offset and message count: the non-Spark reader's records of this entry
        recs = list(seg.records(b.position, b.end, control=True)) if legacy_wrapper else []
        expected.append({
            "position": b.position, "size": b.size,
            "baseOffset": recs[0].offset if legacy_wrapper else b.offset, "lastOffset": b.last_offset,
            "magic": b.magic, "codec": b.codec_name, "attributes": b.attributes, "timestampType": b.timestamp_type,
            "baseTimestamp": b.base_timestamp * 1000, "maxTimestamp": b.max_timestamp * 1000,
            "leaderEpoch": b.partition_leader_epoch, "producerId": b.producer_id, "producerEpoch": b.producer_epoch,
            "baseSequence": b.base_sequence, "lastSequence": b.last_sequence,
            "recordCount": len(recs) if legacy_wrapper else (b.count if b.magic >= 2 else 1),
            "isTransactional": b.is_transactional, "isControl": b.is_control, "storedCrc": b.crc,
            "computedCrc": b.computed_crc, "crcValid": b.crc == b.computed_crc, "error": None, "errorKind": None,
        })
    assert project(got, expected[0].keys()) == expected
    assert {r["segment"] for r in got} == {str(log)}


def test_batches_not_deep_leave_a_wrappers_first_offset_and_count_unknown():
    got = table_rows(read(slice_of(FIXTURES / "v1-gzip-0" / "00000000000000000000.log"), "batches", deep=False))
    assert [(r["baseOffset"], r["lastOffset"], r["recordCount"]) for r in got] == [(None, o, None) for o in (9, 19, 29, 39)]


# ----------------------------------------------------------------------------- slices, seeks and bounds


def _all_rows(log: Path, kind: str = "records") -> list[dict]:
    return table_rows(read(slice_of(log), kind))


@pytest.mark.parametrize("part", ["v2-none-0", "v1-gzip-0", "txn-0"])
def test_split_slices_give_every_row_once(part):
    log = next((FIXTURES / part).glob("*.log"))
    seg = Segment.at(log)
    ranges = seg.split(3)
    assert len(ranges) == 3
    whole = _all_rows(log)
    pieces = [table_rows(read(slice_of(log, s, e))) for s, e in ranges]
    assert [r for p in pieces for r in p] == whole
    assert all(pieces)
    # the last range given as "to the end" (end None) too
    assert table_rows(read(slice_of(log, ranges[-1][0], None))) == pieces[-1]


def test_a_batch_belongs_to_the_slice_it_starts_in():
    """A cut that is not a batch boundary (a slice end inside a batch): that batch is read whole by
    the slice it starts in, not by the next."""
    log = FIXTURES / "v2-none-0" / "00000000000000000000.log"
    positions = [b.position for b in Segment.at(log).batches()]
    mid = positions[2] + 30
    first = table_rows(read(slice_of(log, 0, mid)))
    second = table_rows(read(slice_of(log, positions[3], None)))
    assert [r["offset"] for r in first] == list(range(30))
    assert first + second == _all_rows(log)


@pytest.mark.parametrize("opts, expected", [
    ({"start_offset": 10, "end_offset": 20}, list(range(10, 20))),
    ({"start_offset": 9, "end_offset": 21}, list(range(9, 21))),
    ({"start_offset": 39}, [39]),
    ({"start_offset": 40}, []),
    ({"end_offset": 1}, [0]),
    ({"end_offset": 0}, []),
    # offset o has timestamp T0 + 10*o + o % 4: offset 12 -> T0+120, 13 -> T0+131, 25 -> T0+251
    ({"start_time": T0 + 120, "end_time": T0 + 251}, list(range(12, 25))),
    ({"start_time": T0 + 121, "end_time": T0 + 252}, list(range(13, 26))),
    ({"start_time": T0 + 120, "end_time": T0 + 120}, []),
    ({"start_time": T0 + 393}, [39]),
    ({"start_time": T0 + 394}, []),
    ({"start_offset": 15, "start_time": T0 + 120, "end_time": T0 + 300}, list(range(15, 30))),
])
@pytest.mark.parametrize("part", ["v2-none-0", "v2-zstd-0", "v1-none-0", "v1-snappy-0"])
def test_bounds_apply_exactly(part, opts, expected):
    log = FIXTURES / part / "00000000000000000000.log"
    got = table_rows(read(slice_of(log), **opts))
    assert [r["offset"] for r in got] == expected
    # the same as filtering the unbounded read
    whole = _all_rows(log)
    so, eo = opts.get("start_offset"), opts.get("end_offset")
    st, et = opts.get("start_time"), opts.get("end_time")
    assert got == [r for r in whole
                   if (so is None or r["offset"] >= so) and (eo is None or r["offset"] < eo)
                   and (st is None or r["timestamp"] >= st * 1000) and (et is None or r["timestamp"] < et * 1000)]


def test_offset_bounds_on_txn_partition_by_hand():
    """txn-0 (fixtures/README.md): [105, 114) holds the COMMIT marker 105, records 106-112, the ABORT marker 113."""
    got = table_rows(read(slice_of(FIXTURES / "txn-0" / "00000000000000000100.log"), start_offset=105, end_offset=114))
    assert [(r["offset"], r["isControl"]) for r in got] == [(105, True)] + [(o, False) for o in range(106, 113)] + [(113, True)]


@pytest.mark.parametrize("opts, first", [({"start_offset": 35}, 35), ({"start_time": T0 + 300}, 30), ({}, 0)])
def test_seeks_start_at_the_index_position(monkeypatch, opts, first):
    """v2-none-0's .index holds (29 -> 1886) and its .timeindex (T0+291 -> 29): a start offset of 35, or a
    start time of T0+300 (offset 30's batch, max T0+393; batch 2's max is T0+293), starts the walk at
    1886 (batch 2), never framing batches 0 and 1; no bound starts at 0."""
    import kafkatool.segment.logdir as logdir

    log = FIXTURES / "v2-none-0" / "00000000000000000000.log"
    starts = []
    real_walker = logdir.SegmentWalker

    def spy(source, *a, **kw):
        if not isinstance(source, (bytes, bytearray, memoryview)):  # (an index entry's batch is checked in memory)
            starts.append(kw.get("start", 0))
        return real_walker(source, *a, **kw)

    monkeypatch.setattr(logdir, "SegmentWalker", spy)
    got = table_rows(read(slice_of(log), **opts))
    assert got[0]["offset"] == first and got[-1]["offset"] == 39
    assert starts[0] == (1886 if opts else 0)


@pytest.mark.parametrize("opts, expected", [
    ({"start_offset": 10, "end_offset": 20}, [10]),
    ({"start_offset": 19, "end_offset": 21}, [10, 20]),
    ({"start_offset": 20}, [20, 30]),
    ({"end_offset": 10}, [0]),
    # batch i's maxTimestamp is its last record's: T0 + 10*(10i+9) + (10i+9) % 4
    ({"start_time": T0 + 91}, [0, 10, 20, 30]),
    ({"start_time": T0 + 92}, [10, 20, 30]),
    ({"end_time": T0 + 193}, [0]),
    ({"end_time": T0 + 194}, [0, 10]),
])
def test_batches_bounds(opts, expected):
    log = FIXTURES / "v2-none-0" / "00000000000000000000.log"
    max_ts = [b.max_timestamp for b in Segment.at(log).batches()]
    assert max_ts[:2] == [T0 + 91, T0 + 193]
    got = table_rows(read(slice_of(log), "batches", **opts))
    assert [r["baseOffset"] for r in got] == expected


# ----------------------------------------------------------------------------- damage = verify


def _copy_partition(tmp_path: Path, part: str, name: str | None = None) -> Path:
    dst = tmp_path / (name or part)
    shutil.copytree(FIXTURES / part, dst)
    return next(dst.glob("*.log"))


def _positions(log: Path) -> list:
    return list(Segment.at(log).batches())


def _fix_crc(buf: bytearray, pos: int, size: int) -> None:
    struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : pos + size])))


def _verify_errors(log: Path) -> tuple[set, set]:
    """(error texts of the reading problems, positions of crc_mismatch findings) verify --deep reports."""
    texts, crc = set(), set()
    for f in verify_paths([str(log)], VerifyOptions(deep=True)):
        if not hasattr(f, "kind") or not isinstance(f.kind, FindingKind):
            continue
        if f.kind in ERROR_KINDS:
            texts.add(rows.error_text(f))
        elif f.kind == "crc_mismatch":
            crc.add(f.position)
    return texts, crc


def _damaged(tmp_path, case: str) -> Path:
    if case == "truncated":
        log = _copy_partition(tmp_path, "v2-gzip-0")
        data = log.read_bytes()
        log.write_bytes(data[:-10])
    elif case == "size-field-zero":  # garbage in the middle: a size below the minimum, valid batches after it
        log = _copy_partition(tmp_path, "v2-none-0")
        buf = bytearray(log.read_bytes())
        p = _positions(log)[1].position
        buf[p + 8 : p + 12] = b"\x00\x00\x00\x05"
        log.write_bytes(bytes(buf))
    elif case == "garbage-run":  # random-looking bytes over a whole batch and into the next
        log = _copy_partition(tmp_path, "v1-none-0")
        buf = bytearray(log.read_bytes())
        bs = _positions(log)
        p = bs[5].position
        buf[p : p + 150] = bytes((i * 37 + 11) % 256 for i in range(150))
        log.write_bytes(bytes(buf))
    elif case == "bad-crc":
        log = _copy_partition(tmp_path, "v2-none-0")
        buf = bytearray(log.read_bytes())
        b = _positions(log)[1]
        i = bytes(buf).index(b"value-12", b.position)
        buf[i + 6] = ord("X")
        log.write_bytes(bytes(buf))
    elif case == "bad-gzip":  # bad compressed payload, CRC recomputed so only decompression fails
        log = _copy_partition(tmp_path, "v2-gzip-0")
        buf = bytearray(log.read_bytes())
        b = _positions(log)[2]
        mid = b.position + 61 + (b.size - 61) // 2
        buf[mid : mid + 8] = b"\xff" * 8
        _fix_crc(buf, b.position, b.size)
        log.write_bytes(bytes(buf))
    elif case == "bad-count":  # records that do not fill the batch as its count says
        log = _copy_partition(tmp_path, "v2-none-0")
        buf = bytearray(log.read_bytes())
        b = _positions(log)[0]
        struct.pack_into(">i", buf, b.position + 57, 11)
        _fix_crc(buf, b.position, b.size)
        log.write_bytes(bytes(buf))
    elif case == "bad-legacy-wrapper":  # a wrapper whose compressed value is cut short (CRC fixed)
        log = _copy_partition(tmp_path, "v0-snappy-0")
        buf = bytearray(log.read_bytes())
        b = _positions(log)[1]
        buf[b.position + 40 : b.position + 60] = b"\x00" * 20
        struct.pack_into(">I", buf, b.position + 12, __import__("zlib").crc32(bytes(buf[b.position + 16 : b.position + b.size])))
        log.write_bytes(bytes(buf))
    elif case == "unknown-magic":
        log = _copy_partition(tmp_path, "v2-none-0")
        buf = bytearray(log.read_bytes())
        buf[_positions(log)[2].position + 16] = 7
        log.write_bytes(bytes(buf))
    elif case == "trailing-zeros":
        log = _copy_partition(tmp_path, "v2-lz4-0")
        with open(log, "ab") as f:
            f.write(bytes(5000))
    else:
        raise AssertionError(case)
    return log


DAMAGE = ["truncated", "size-field-zero", "garbage-run", "bad-crc", "bad-gzip", "bad-count", "bad-legacy-wrapper",
          "unknown-magic", "trailing-zeros"]


@pytest.mark.parametrize("case", DAMAGE)
def test_damaged_segment_rows_say_what_verify_says(tmp_path, case):
    log = _damaged(tmp_path, case)
    texts, crc_positions = _verify_errors(log)
    assert texts or crc_positions, "the damage is a finding"
    got = table_rows(read(slice_of(log)))
    errors = [r for r in got if r["error"] is not None]
    assert {r["error"] for r in errors} == texts
    assert len(errors) == len(texts)
    for r in errors:
        assert r["key"] is r["value"] is r["headers"] is r["timestamp"] is None
        where = int(r["error"][len(str(log)) + 1 :].split(":")[0])
        if r["magic"] is None:  # a bad region: located at its start
            assert where == r["batchPosition"]
        else:  # a batch's problem: located in the batch
            assert r["batchPosition"] <= where < r["batchPosition"] + 2000
    assert {r["batchPosition"] for r in got if r["crcValid"] is False} == crc_positions
    # batches kind: the same errors, their kinds, the same CRC verdicts
    b = table_rows(read(slice_of(log), "batches"))
    assert {r["error"] for r in b if r["error"]} == texts
    for r in b:
        if r["error"]:
            assert r["error"].split(": ")[1] == r["errorKind"]
    assert {r["position"] for r in b if r["crcValid"] is False} == crc_positions
    # every good record around the damage is still there, as the non-Spark reader gives it per batch
    good = [r for r in got if r["error"] is None]
    assert good, "reading resumed after the damage"
    seg = Segment.at(log)
    for p in {r["batchPosition"] for r in good}:
        reader = seg.batches(p)
        b = next(iter(reader))
        expected = [(x.offset, x.key, x.value) for x in decode_batch_records(b, reader.data)]
        reader.close()
        assert [(r["offset"], r["key"], r["value"]) for r in good if r["batchPosition"] == p] == expected


PROPERTY_PARTS = ["v2-none-0", "v2-gzip-0", "v2-zstd-0", "v1-snappy-0", "v0-none-0", "txn-0"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(part=st.sampled_from(PROPERTY_PARTS), where=st.floats(0, 1), junk=st.binary(min_size=1, max_size=40),
       cut=st.one_of(st.none(), st.integers(1, 400)))
def test_random_damage_never_escapes_and_agrees_with_verify(tmp_path_factory, part, where, junk, cut):
    """Bytes overwritten anywhere (and maybe the tail cut): reading never raises, every batch is
    schema-valid, every reading problem verify --deep reports is an error row in the same words, and
    a row error verify does not report is about a batch whose CRC verify finds bad (verify checks
    nothing more of such a batch; the row says why its records do not read)."""
    d = tmp_path_factory.mktemp("prop")
    log = _copy_partition(d, part)
    buf = bytearray(log.read_bytes())
    at = int(where * (len(buf) - 1))
    buf[at : at + len(junk)] = junk
    if cut is not None:
        del buf[max(1, len(buf) - cut):]
    log.write_bytes(bytes(buf))
    texts, crc_positions = _verify_errors(log)
    for kind in ("records", "batches"):
        got = table_rows(read(slice_of(log), kind))
        errors = {r["error"] for r in got if r["error"]}
        assert texts <= errors, kind
        for e in errors - texts:
            position = int(e[len(str(log)) + 1 :].split(":")[0])
            batch = [r for r in got if r["error"] == e][0]
            start = batch["batchPosition" if kind == "records" else "position"]
            assert start in crc_positions and start <= position, e


def test_damage_rows_by_hand(tmp_path):
    """size-field-zero: batch 1 of v2-none-0 unframeable -> one invalid_size row at its position
    running to batch 2; offsets 10-19 missing, 0-9 and 20-39 read."""
    log = _damaged(tmp_path, "size-field-zero")
    got = table_rows(read(slice_of(log)))
    bs = _positions(FIXTURES / "v2-none-0" / "00000000000000000000.log")
    errors = [r for r in got if r["error"]]
    assert len(errors) == 1
    e = errors[0]
    assert e["batchPosition"] == bs[1].position and e["offset"] is None and e["crcValid"] is None
    assert e["error"].startswith(f"{log}:{bs[1].position}: invalid_size: ")
    assert f"{bs[2].position - bs[1].position} unreadable bytes before the next valid batch at {bs[2].position}" in e["error"]
    assert [r["offset"] if not r["error"] else "E" for r in got] == list(range(10)) + ["E"] + list(range(20, 40))
    b = table_rows(read(slice_of(log), "batches"))
    region = [r for r in b if r["error"]][0]
    assert (region["position"], region["size"], region["errorKind"]) == (bs[1].position, bs[2].position - bs[1].position, "invalid_size")
    # an offset bound leaves the bad region out (its offset is null); a time bound too
    assert not [r for r in table_rows(read(slice_of(log), start_offset=0)) if r["error"]]
    assert not [r for r in table_rows(read(slice_of(log), end_time=T0 + 10**9)) if r["error"]]


def test_region_ending_at_a_slice_end_is_worded_for_the_whole_file(tmp_path):
    """Batches 1 and 2 of v2-none-0 unframeable, the slice [0, batch 3): one region [p1, p3), in
    verify's words for the file (the next valid batch, p3, lies at the slice's end)."""
    log = _copy_partition(tmp_path, "v2-none-0")
    buf = bytearray(log.read_bytes())
    bs = _positions(log)
    for b in bs[1:3]:
        buf[b.position + 8 : b.position + 12] = b"\x00\x00\x00\x05"
    log.write_bytes(bytes(buf))
    texts, _crc = _verify_errors(log)
    got = table_rows(read(slice_of(log, 0, bs[3].position)))
    assert [r["error"] for r in got if r["error"]] == sorted(texts)
    assert f"before the next valid batch at {bs[3].position}" in sorted(texts)[0]
    assert [r["offset"] for r in got if not r["error"]] == list(range(10))


def test_zero_count_batch_bytes_are_never_examined(tmp_path):
    """A count-0 gzip batch whose payload is garbage (CRC fixed): verify --deep finds nothing, as
    Kafka never decompresses it (spec §17 B.11); no row, no error."""
    log = tmp_path / "z-0" / "00000000000000000000.log"
    log.parent.mkdir()
    first = encode_batch([RecordSpec(0, T0, b"k", b"v")])
    empty = bytearray(encode_batch([RecordSpec(1, T0, b"k", b"v")], codec=Codec.GZIP))
    struct.pack_into(">i", empty, 57, 0)
    empty[61:] = bytes((i * 7 + 3) % 256 for i in range(len(empty) - 61))
    _fix_crc(empty, 0, len(empty))
    log.write_bytes(first + bytes(empty))
    texts, crc = _verify_errors(log)
    assert not texts and not crc
    got = table_rows(read(slice_of(log)))
    assert [(r["offset"], r["error"]) for r in got] == [(0, None)]
    assert [r["error"] for r in table_rows(read(slice_of(log), "batches"))] == [None, None]


def test_undecodable_batch_row_carries_its_batch(tmp_path):
    log = _damaged(tmp_path, "bad-count")
    got = table_rows(read(slice_of(log)))
    e = [r for r in got if r["error"]]
    assert len(e) == 1
    assert (e[0]["offset"], e[0]["batchBaseOffset"], e[0]["batchPosition"], e[0]["crcValid"], e[0]["codec"]) == (0, 0, 0, True, "none")
    assert ": record_count_mismatch: " in e[0]["error"]
    assert [r["offset"] for r in got if not r["error"]] == list(range(10, 40))
    # an offset bound keeps it when its base offset is in range, a time bound never
    assert len(table_rows(read(slice_of(log), end_offset=1))) == 1
    assert table_rows(read(slice_of(log), start_offset=1, end_offset=12))[0]["offset"] == 10
    assert not [r for r in table_rows(read(slice_of(log), start_time=0)) if r["error"]]
    # batches kind: only when deep
    b = table_rows(read(slice_of(log), "batches"))
    assert b[0]["errorKind"] == "record_count_mismatch"
    assert table_rows(read(slice_of(log), "batches", deep=False))[0]["error"] is None


def test_crc_mismatch_rows_keep_their_records(tmp_path):
    log = _damaged(tmp_path, "bad-crc")
    got = {r["offset"]: r for r in table_rows(read(slice_of(log)))}
    assert got[12]["value"].startswith(b"value-X2") and got[12]["crcValid"] is False
    assert {o for o, r in got.items() if r["crcValid"] is False} == set(range(10, 20))
    assert not any(r["error"] for r in got.values())


def test_many_error_rows_are_flushed_in_bounded_batches(tmp_path, monkeypatch):
    """Batches 5-14 of 20 undecodable (their count raised, CRC fixed): one error row each, in file
    order between the good batches' rows, at most FLUSH_ERRORS per record batch."""
    monkeypatch.setattr(rows, "FLUSH_ERRORS", 3)
    log = tmp_path / "many-0" / "00000000000000000000.log"
    log.parent.mkdir()
    out = bytearray()
    for i in range(20):
        b = bytearray(encode_batch([RecordSpec(i * 2, T0, b"k", b"v"), RecordSpec(i * 2 + 1, T0, None, b"w")]))
        if 5 <= i < 15:
            struct.pack_into(">i", b, 57, 3)
            _fix_crc(b, 0, len(b))
        out += b
    log.write_bytes(bytes(out))
    batches = list(rows.read(ReadTask((slice_of(log),), 0), ReadOptions()))
    assert [b.num_rows for b in batches if b.column("error").null_count == 0] == [3, 3, 3, 1]
    got = table_rows(pa.Table.from_batches(batches))
    assert [r["offset"] if r["error"] is None else ("E", r["offset"]) for r in got] == [
        x for i in range(20) for x in ((("E", 2 * i),) if 5 <= i < 15 else (2 * i, 2 * i + 1))]
    texts, _crc = _verify_errors(log)
    assert sorted(r["error"] for r in got if r["error"]) == sorted(texts) and len(texts) == 10


def test_crc_mismatch_and_undecodable(tmp_path):
    """A gzip payload damaged without fixing the CRC: verify reports the crc_mismatch alone; the
    records row for the batch is one error row (crcValid false) with the decoding problem in the
    words verify --deep uses once the CRC is fixed."""
    log = _copy_partition(tmp_path, "v2-gzip-0")
    buf = bytearray(log.read_bytes())
    b = _positions(log)[2]
    mid = b.position + 61 + (b.size - 61) // 2
    buf[mid : mid + 8] = b"\xff" * 8
    log.write_bytes(bytes(buf))
    texts, crc = _verify_errors(log)
    assert crc == {b.position} and not texts
    got = table_rows(read(slice_of(log)))
    errors = [r for r in got if r["error"]]
    _fix_crc(buf, b.position, b.size)
    fixed = tmp_path / "fixed-0" / log.name
    fixed.parent.mkdir()
    fixed.write_bytes(bytes(buf))
    fixed_texts, _ = _verify_errors(fixed)
    assert [r["error"].replace(str(log), str(fixed)) for r in errors] == sorted(fixed_texts)
    assert [(r["offset"], r["crcValid"]) for r in errors] == [(20, False)]
    assert ": decompression_failed: " in errors[0]["error"]


def test_slice_error_is_one_unreadable_row(tmp_path):
    sl = SegmentSlice("t", 3, str(tmp_path), str(tmp_path / "x.log"), 0, 0, None, None,
                      "cannot list the directory: Permission denied")
    for kind in ("records", "batches"):
        got = table_rows(read(sl, kind))
        assert len(got) == 1
        assert got[0]["error"] == f"{tmp_path / 'x.log'}: unreadable: cannot list the directory: Permission denied"
        assert (got[0]["topic"], got[0]["partition"]) == ("t", 3)


def test_missing_file_is_one_unreadable_row(tmp_path):
    got = table_rows(read(slice_of(tmp_path / "t-0" / "00000000000000000000.log")))
    assert len(got) == 1 and ": unreadable: cannot read the file: No such file or directory" in got[0]["error"]


def test_fifo_named_like_a_segment_is_not_opened(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    os.mkfifo(d / "00000000000000000000.log")
    got = table_rows(read(slice_of(d / "00000000000000000000.log")))
    assert len(got) == 1 and "not a regular file" in got[0]["error"]


def test_non_utf8_path_is_valid_utf8_in_string_columns(tmp_path):
    raw = os.fsencode(str(tmp_path)) + b"/caf\xe9-0"
    os.mkdir(raw)
    src = FIXTURES / "v2-none-0" / "00000000000000000000.log"
    data = src.read_bytes()
    log_b = raw + b"/00000000000000000000.log"
    with open(log_b, "wb") as f:
        f.write(data + b"\x00\x00\x00")  # and a trailing_bytes region, so an error names the path
    log = os.fsdecode(log_b)
    assert "\udce9" in log
    shown = str(tmp_path) + "/caf\ufffd-0/00000000000000000000.log"
    for kind in ("records", "batches"):
        t = read(slice_of(log), kind)  # read() validates every batch fully (UTF-8 included)
        got = table_rows(t)
        assert {r["segment"] for r in got} == {shown}
        assert {r["topic"] for r in got} == {"caf\ufffd"}
        errors = [r["error"] for r in got if r["error"]]
        assert len(errors) == 1 and errors[0].startswith(shown + ":")
    assert rows.display_path("plain/ascii") == "plain/ascii"


# ----------------------------------------------------------------------------- chunks and memory


def _big_segment(path: Path, batches: int, records: int = 200, value_bytes: int = 1000, codec=Codec.NONE) -> None:
    """A segment of ``batches`` copies of one batch (base offset, timestamps and CRC rewritten)."""
    specs = [RecordSpec(i, T0 + i, b"k%d" % i, bytes([65 + i % 26]) * value_bytes, [("h", b"v")] if i % 2 else [])
             for i in range(records)]
    template = bytearray(encode_batch(specs, codec=codec, producer_id=9, producer_epoch=1, base_sequence=0))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for n in range(batches):
            struct.pack_into(">q", template, 0, n * records)
            struct.pack_into(">i", template, 53, (n * records) % 2**31)  # baseSequence
            _fix_crc(template, 0, len(template))
            f.write(template)


def test_flushes_are_bounded(tmp_path):
    log = tmp_path / "big-0" / "00000000000000000000.log"
    _big_segment(log, 120)  # 24k records, ~24 MB of values
    batches = list(rows.read(ReadTask((slice_of(log),), 0), ReadOptions()))
    assert len(batches) >= 3
    for b in batches:
        kv = b.column("key").nbytes + b.column("value").nbytes
        assert b.num_rows <= rows.FLUSH_ROWS and kv <= rows.FLUSH_BYTES + 2 * 200 * 1100
    t = pa.Table.from_batches(batches)
    assert t.column("offset").to_pylist() == list(range(120 * 200))
    assert t.column("sequence").to_pylist() == [o % 2**31 for o in range(120 * 200)]


def test_batches_rows_are_flushed_in_bounded_batches(monkeypatch):
    log = FIXTURES / "v1-none-0" / "00000000000000000000.log"
    whole = table_rows(read(slice_of(log), "batches"))
    monkeypatch.setattr(rows, "FLUSH_ROWS", 7)
    batches = list(rows.read(ReadTask((slice_of(log),), 0), ReadOptions(kind="batches")))
    assert [b.num_rows for b in batches] == [7] * 5 + [5]
    assert table_rows(pa.Table.from_batches(batches)) == whole


def test_large_batches_are_decoded_in_chunks(tmp_path, monkeypatch):
    """A batch above WHOLE_BATCH_RECORDS goes through the chunked path: same rows, flushed between
    chunks; one whose records fail gives one error row and none of its records."""
    log = tmp_path / "big-0" / "00000000000000000000.log"
    _big_segment(log, 3, records=50, value_bytes=10, codec=Codec.GZIP)
    whole = table_rows(read(slice_of(log)))
    monkeypatch.setattr(rows, "WHOLE_BATCH_RECORDS", 5)
    monkeypatch.setattr(rows, "FLUSH_ROWS", 7)
    batches = list(rows.read(ReadTask((slice_of(log),), 0), ReadOptions()))
    assert max(b.num_rows for b in batches) <= 2048 + 7
    assert table_rows(pa.Table.from_batches(batches)) == whole
    # the count raised past the records: the whole batch is one error row, as verify says
    buf = bytearray(log.read_bytes())
    struct.pack_into(">i", buf, 57, 51)
    _fix_crc(buf, 0, len(buf) // 3)
    log.write_bytes(bytes(buf))
    got = table_rows(read(slice_of(log)))
    texts, _crc = _verify_errors(log)
    assert [r["error"] for r in got if r["error"]] == sorted(texts)
    assert [r["offset"] for r in got if not r["error"]] == list(range(50, 150))


def test_compressed_batch_larger_than_the_whole_limit(tmp_path, monkeypatch):
    log = tmp_path / "big-0" / "00000000000000000000.log"
    _big_segment(log, 2, records=100, value_bytes=100, codec=Codec.ZSTD)
    whole = table_rows(read(slice_of(log)))
    monkeypatch.setattr(rows, "WHOLE_BATCH_BYTES", 1000)
    assert table_rows(read(slice_of(log))) == whole
    assert len(whole) == 200


_RSS_SCRIPT = r"""
import resource, sys
sys.path.insert(0, sys.argv[2])
from kafkatool.spark import rows
from kafkatool.spark.plan import ReadOptions, ReadTask, SegmentSlice
sl = SegmentSlice("big", 0, sys.argv[1], sys.argv[1] + "/00000000000000000000.log", 0, 0, None, None)
n = 0
for b in rows.read(ReadTask((sl,), 0), ReadOptions()):
    n += b.num_rows
print(n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def test_peak_memory_does_not_grow_with_the_segment(tmp_path):
    peaks = {}
    for batches in (40, 400):  # ~8 MB and ~80 MB
        d = tmp_path / f"big{batches}-0"
        _big_segment(d / "00000000000000000000.log", batches)
        out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(d), str(REPO)], capture_output=True, text=True,
                             check=True).stdout.split()
        assert int(out[0]) == batches * 200
        peaks[batches] = int(out[1])
        shutil.rmtree(d)
    assert peaks[400] - peaks[40] < 24, peaks  # MiB; a reader holding the segment would add ~70
