"""The ``kafka_segments`` data source end to end: through Spark (``local[2]``, the one session of
``tests/conftest.py``), against kafkatool's non-Spark readers.

* records and batches of ``fixtures/logdir`` and of the real broker files, row for row against
  ``Partition.records(control=True)`` and ``Segment.batches()`` (expected rows built here from
  the model's Record and Batch fields, not from kafkatool.spark.rows);
* a damaged segment read as ``findings`` gives what ``kafkatool.verify.verify_paths`` gives;
  ``stats`` rows combined with ``combine_stats`` give what ``kafkatool.stats`` gives;
* pushed-down filters (``pushFilters=true``) and the seek options return exactly the rows of
  the unfiltered read that match, at the boundaries (a timestamp literal between two
  milliseconds included); by default a DataFrame queried twice stays right (Spark 4.3 reuses a
  DataFrame's pushed-down read: source.py's docstring);
* the filter translation itself, the guards of tasks.py (injected failures), the size of the
  input partitions (no JVM), and ``import kafkatool.spark`` without pyspark or pyarrow.

Spark jobs are few: each comparison of many queries runs them as one ``UNION ALL`` job.
"""

from __future__ import annotations

import datetime
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REAL, real_fixture

T0 = 1700000000000  # fixtures/logdir's first timestamp (fixtures/README.md)
UTC = datetime.timezone.utc


def _ts(ms: int, us: int = 0) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms // 1000, UTC) + datetime.timedelta(milliseconds=ms % 1000, microseconds=us)


def _sql_ts(ms: int, us: int = 0) -> str:
    return "TIMESTAMP'" + _ts(ms, us).strftime("%Y-%m-%d %H:%M:%S.%f") + "'"


# ----------------------------------------------------------------------------- inputs built here


def damage(log: Path) -> None:
    """Spoil a 4-batch v2 segment three ways: batch 0's CRC (a value byte flipped), garbage
    over batch 1's header (a bad region; batch 2 after it is whole), batch 3 truncated."""
    from kafkatool.segment.logdir import Segment

    b0, b1, _b2, b3 = list(Segment.at(str(log)).batches())
    data = bytearray(log.read_bytes())
    data[b0.position + b0.size - 3] ^= 0xFF
    data[b1.position:b1.position + 24] = b"\xab" * 24
    del data[b3.position + b3.size - 5:]
    log.write_bytes(bytes(data))


@pytest.fixture(scope="session")
def logdir(tmp_path_factory) -> Path:
    """A copy of fixtures/logdir with one more partition, ``dmg-0``: v2-none-0's segment damaged."""
    root = tmp_path_factory.mktemp("spark") / "logdir"
    shutil.copytree(FIXTURES, root)
    dmg = root / "dmg-0"
    shutil.copytree(FIXTURES / "v2-none-0", dmg)
    damage(dmg / "00000000000000000000.log")
    return root


# ----------------------------------------------------------------------------- without a JVM


def test_import_without_pyspark_and_register_says_what_to_install(tmp_path: Path) -> None:
    """``import kafkatool.spark`` works where pyspark is missing; register (and the class) then
    fail with MissingDependencyError naming the extra."""
    code = (
        "import sys\n"
        "sys.modules['pyspark'] = None  # as if not installed: import raises ImportError\n"
        "import kafkatool.spark as ks\n"
        "from kafkatool.errors import MissingDependencyError\n"
        "for f in (lambda: ks.register(object()), lambda: ks.KafkaSegmentsDataSource):\n"
        "    try:\n"
        "        f()\n"
        "    except MissingDependencyError as e:\n"
        "        print('ERR', e)\n"
        "print(ks.NAME)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(FIXTURES.parents[1]))
    for missing in ("pyspark", "pyarrow"):
        run = code.replace("sys.modules['pyspark']", f"sys.modules[{missing!r}]")
        out = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[-1] == "kafka_segments"
        assert len([x for x in lines if x.startswith("ERR ")]) == 2
        assert all("pip install 'kafkatool[spark]'" in x and repr(missing) in x for x in lines[:2]), lines


def _push(kind: str, filters, **opts):
    pytest.importorskip("pyspark")
    from kafkatool.spark.plan import ReadOptions
    from kafkatool.spark.source import push

    return push(ReadOptions(kind=kind, **opts), filters)


def test_pushdown_translation_records() -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql.datasource import (EqualNullSafe, EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNotNull,
                                        LessThan, LessThanOrEqual, StringStartsWith)

    t = ("topic",)
    p = ("partition",)
    o = ("offset",)
    ts = ("timestamp",)
    exact = [EqualTo(t, "a"), In(t, ["a", "b", None]), EqualNullSafe(p, 3), In(p, [1, 3]),
             GreaterThanOrEqual(o, 10), LessThan(o, 20), GreaterThan(o, 11), LessThanOrEqual(o, 18)]
    back = [IsNotNull(o), StringStartsWith(t, "a"), In(o, [12, 15]), EqualTo(("key",), b"k"), EqualTo(t, None),
            EqualTo(t, "caf\ufffd")]  # a name that was not UTF-8 shows U+FFFD: the plan cannot place it
    opts, left = _push("records", exact + back)
    assert left == back  # the same objects, in order: Spark matches them by reference
    assert opts.topics == {"a"} and opts.partitions == {3}
    assert (opts.start_offset, opts.end_offset) == (12, 16)  # >=10, >11, <20, <=18, IN (12, 15) -> [12, 16)

    # timestamps: microsecond literals against millisecond values, exact at the boundary
    ms = T0 + 51
    cases = {
        GreaterThanOrEqual(ts, _ts(ms, 500)): (ms + 1, None),  # 51.5 ms: the first whole ms at or above is 52
        GreaterThanOrEqual(ts, _ts(ms)): (ms, None),
        GreaterThan(ts, _ts(ms, 500)): (ms + 1, None),
        GreaterThan(ts, _ts(ms)): (ms + 1, None),
        LessThan(ts, _ts(ms, 500)): (None, ms + 1),  # 51 < 51.5
        LessThan(ts, _ts(ms)): (None, ms),
        LessThanOrEqual(ts, _ts(ms, 500)): (None, ms + 1),
        LessThanOrEqual(ts, _ts(ms)): (None, ms + 1),
        EqualTo(ts, _ts(ms)): (ms, ms + 1),
        GreaterThanOrEqual(ts, _ts(-1, 999)): (0, None),  # -0.001 s: before the epoch, floor semantics
        LessThan(ts, _ts(-2, 1)): (None, -1),
        # the same instant in another zone (a session time zone other than UTC)
        GreaterThanOrEqual(ts, _ts(ms, 500).astimezone(datetime.timezone(datetime.timedelta(hours=-5)))): (ms + 1, None),
    }
    for f, (lo, hi) in cases.items():
        opts, left = _push("records", [f])  # pushed, and handed back (see source._COLUMNS)
        assert left == [f] and (opts.start_time, opts.end_time) == (lo, hi) and not opts.empty, f
    opts, left = _push("records", [EqualTo(ts, _ts(ms, 500))])
    assert opts.empty  # between two milliseconds: no record can be equal
    opts, left = _push("records", [GreaterThan(o, 5), LessThan(o, 3)])
    assert left == [] and opts.empty
    naive = GreaterThan(ts, datetime.datetime(2024, 1, 1))
    opts, left = _push("records", [naive])
    assert left == [naive] and opts.start_time is None


def test_pushdown_translation_batches_and_stats() -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual

    exact = [GreaterThanOrEqual(("lastOffset",), 10), LessThan(("baseOffset",), 30), EqualTo(("topic",), "x")]
    partial = [GreaterThanOrEqual(("maxTimestamp",), _ts(T0, 1)), GreaterThan(("baseOffset",), 11),
               LessThanOrEqual(("lastOffset",), 25),
               EqualTo(("baseOffset",), 12), In(("lastOffset",), [14, 13])]
    ignored = [EqualTo(("offset",), 12), EqualTo(("timestamp",), _ts(T0))]  # not columns of batches
    opts, left = _push("batches", exact + partial + ignored)
    assert left == partial + ignored
    # lastOffset IN (13, 14) -> lastOffset >= 13, but with baseOffset = 12 (< 13) that would read as
    # the empty [13, 13): left unpushed (a batch 12..14 matches both)
    assert (opts.start_offset, opts.end_offset) == (12, 13) and opts.start_time == T0 + 1 and opts.topics == {"x"}
    assert not opts.empty
    opts, left = _push("stats", [EqualTo(("topic",), "x"), EqualTo(("partition",), 2), GreaterThan(("offset",), 3)])
    assert left == [GreaterThan(("offset",), 3)] and opts.topics == {"x"} and opts.partitions == {2}
    f = [EqualTo(("file",), "x"), EqualTo(("topic",), "x")]
    assert _push("findings", f)[1] == f


def test_findings_rows_round_trip_to_verify_results(logdir: Path) -> None:
    """tasks.read_findings without Spark: rows back to Finding/FileSummary equal verify's, in order."""
    pytest.importorskip("pyarrow")
    from kafkatool.spark import plan, tasks
    from kafkatool.verify import VerifyOptions, verify_paths

    opts = plan.ReadOptions(kind="findings", max_partition_bytes=1 << 10)
    work = plan.plan_findings([str(logdir)], opts)
    assert len(work) > 3
    rows = [r for i, t in enumerate(work) for b in tasks.read_findings(t, opts, index=i) for r in b.to_pylist()]
    rows.sort(key=lambda r: (r["task"], r["seq"]))
    got = [tasks.finding_of_row(r) for r in rows]
    assert got == list(verify_paths([str(logdir)], VerifyOptions(deep=True)))
    assert any(f.kind == "crc_mismatch" for f in got)


# ----------------------------------------------------------------------------- through Spark


def _read(spark, path, kind: str, **options):
    r = spark.read.format("kafka_segments").option("kind", kind)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load(str(path))


def test_findings_of_a_damaged_segment_are_verify_findings(spark, logdir: Path, tmp_path: Path) -> None:
    """Damaged partitions (and the fixtures beside them) read as findings through Spark: the rows,
    in (task, seq) order, are what verify_paths yields on the same path, shallow and deep."""
    from kafkatool.spark.tasks import finding_of_row
    from kafkatool.verify import VerifyOptions, verify_paths

    loose = tmp_path / "copy.log"  # a damaged .log named alone
    shutil.copy(logdir / "dmg-0" / "00000000000000000000.log", loose)
    cases = [(str(logdir / "dmg-0"), False), (f"{logdir},{loose}", True)]
    sizes = ["128m", "64m"]  # the last packs the fixtures' groups into several tasks
    dfs = [_read(spark, path, "findings", deep=str(deep).lower(), maxPartitionBytes=size)
           for (path, deep), size in zip(cases, sizes)]
    from pyspark.sql.functions import lit

    union = dfs[0].withColumn("q", lit(0))
    for i, df in enumerate(dfs[1:], 1):
        union = union.unionByName(df.withColumn("q", lit(i)))
    rows = union.collect()
    for i, (path, deep) in enumerate(cases):
        mine = sorted((r for r in rows if r["q"] == i), key=lambda r: (r["task"], r["seq"]))
        got = [finding_of_row(r) for r in mine]
        want = list(verify_paths(path.split(","), VerifyOptions(deep=deep)))
        assert got == want, (path, deep)
        kinds = {f.kind for f in want if hasattr(f, "message")}
        assert {"crc_mismatch", "partial_batch"} <= kinds, kinds
        assert any(getattr(f, "batches_after", None) for f in want)  # a bad region with a good batch after it
    assert len({r["task"] for r in rows if r["q"] == 1}) > 1  # packed into several tasks, order kept


def _combined_stats(rows, path: str, deep: bool):
    """kafkatool stats' results rebuilt from stats rows: each partition's segment pieces
    combined in plan order (what `kafkatool spark stats` does on the driver)."""
    from kafkatool.segment.logdir import Partition, Segment
    from kafkatool.spark import plan
    from kafkatool.stats import CheckpointCache, StatsOptions, combine_stats, partition_stats

    sopts = StatsOptions(deep=deep)
    slices = [s for t in plan.plan_stats(path, plan.ReadOptions(kind="stats")) for s in t.slices]
    order = {s.log_path: i for i, s in enumerate(slices)}
    by_dir: dict[str, list] = {}
    for r in rows:
        by_dir.setdefault(r["partitionPath"], []).append(r)
    cache = CheckpointCache()
    items, _run = plan.stats_targets(path)
    out = []
    for item in items:
        if isinstance(item, Partition):
            pieces = sorted(by_dir.pop(item.path, []), key=lambda r: order[r["segment"]])
            if pieces:
                out.append(combine_stats([pickle.loads(r["stats"]) for r in pieces], item, opts=sopts,
                                         checkpoints=cache))
            else:
                out.append(partition_stats(item, sopts, checkpoints=cache))
        elif isinstance(item, Segment):
            (piece,) = by_dir.pop(item.log_path)
            out.append(combine_stats([pickle.loads(piece["stats"])], opts=sopts))
        else:
            out.append(item)
    assert not by_dir  # every row belongs to a result
    return out


def test_stats_rows_combine_to_kafkatool_stats(spark, logdir: Path, tmp_path: Path) -> None:
    from pyspark.sql.functions import lit

    from kafkatool.stats import StatsOptions, iter_stats

    loose = tmp_path / "00000000000000000100.log"
    shutil.copy(logdir / "txn-0" / "00000000000000000100.log", loose)
    path = f"{logdir},{loose}"
    cases = [(path, False), (f"{logdir / 'dmg-0'},{logdir / 'v1-gzip-0'}", True)]  # deep opens legacy wrappers
    union = None
    for i, (p, deep) in enumerate(cases):
        df = _read(spark, p, "stats", deep=str(deep).lower()).withColumn("q", lit(i))
        union = df if union is None else union.unionByName(df)
    rows = union.collect()
    for i, (p, deep) in enumerate(cases):
        got = _combined_stats([r for r in rows if r["q"] == i], p, deep)
        want = list(iter_stats(p.split(","), StatsOptions(deep=deep)))
        assert got == want
    assert any(s.problems for s in want)  # dmg-0's damage is counted as problems
    assert {r["topic"] for r in rows if r["q"] == 0} >= {"txn", "v2-zstd", "golden"}


def test_stats_pushdown_is_exact(spark, logdir: Path) -> None:
    df = _read(spark, logdir, "stats", pushFilters="true")
    got = sorted(r["segment"] for r in df.where("topic IN ('txn', 'golden') AND partition = 0").collect())
    assert got == sorted(str(p) for d in ("txn-0", "golden-0") for p in (logdir / d).glob("*.log"))
    plan = _read(spark, logdir, "stats", pushFilters="true").where("topic = 'txn'")
    assert "txn" not in plan._jdf.queryExecution().optimizedPlan().toString()  # handled by the source


def test_a_dataframe_queried_twice_gives_right_answers_by_default(spark, logdir: Path) -> None:
    """Spark 4.3 reuses a DataFrame's last pushed-down reader for a later query with nothing to
    push, and for both sides of a self-union: the default (filters not pushed) stays right."""
    df = _read(spark, logdir, "stats")
    assert df.where("topic = 'txn'").count() == 1
    total = df.count()
    assert total == len(list(logdir.glob("*-0/*.log"))) > 1
    both = df.where("topic = 'txn'").unionByName(df.where("topic = 'golden'"))
    assert sorted(r["topic"] for r in both.collect()) == ["golden", "txn"]
    plan = df.where("topic = 'txn'")._jdf.queryExecution().optimizedPlan().toString()
    assert "txn" in plan  # Spark filters: the source did not take the filter


def test_the_default_reader_needs_no_pushdown_setting(spark, logdir: Path) -> None:
    """Spark refuses every read of a reader with pushFilters while filterPushdown is off: the
    default reader has none (reads work as registered by hand), pushFilters=true says what to set."""
    key = "spark.sql.python.filterPushdown.enabled"
    spark.conf.set(key, "false")
    try:
        assert _read(spark, logdir, "stats").where("topic = 'txn'").count() == 1
        with pytest.raises(Exception, match=key):
            _read(spark, logdir, "stats", pushFilters="true").where("topic = 'txn'").count()
    finally:
        spark.conf.set(key, "true")


# ----------------------------------------------------------------------------- row for row against the model


_TIME_COLUMNS = ("timestamp", "baseTimestamp", "maxTimestamp")


def _rows(df) -> list[dict]:
    """The rows of ``df`` as dicts, timestamps as integer microseconds (no datetime rounding)."""
    import pyarrow as pa

    t = df.toArrow()
    for name in _TIME_COLUMNS:
        if name in t.column_names:
            t = t.set_column(t.column_names.index(name), name, t[name].cast(pa.int64()))
    return t.to_pylist()


def _partitions(paths: list[str]):
    """The partitions a read of ``paths`` covers, found by kafkatool stats' search (not the planner)."""
    from kafkatool.segment.logdir import Partition
    from kafkatool.stats import find_targets

    items, _run = find_targets(paths)
    return [p for p in items if isinstance(p, Partition) and p.state is None]


def _model(p) -> tuple[list[tuple], list[tuple], BaseException | None]:
    """``(batches, records, error)`` of partition ``p`` by the non-Spark reader: every batch of
    ``Partition.batches()`` with its segment path, every record of ``Partition.records(control=True)``
    with the batch it lies in (records are in offset order, a batch's are its last offset and
    below); what was read before an error, and the error."""
    batches: list[tuple] = []
    error = None
    reader = p.batches()
    try:
        for b in reader:
            batches.append((reader.path, b))
    except Exception as e:  # a damaged partition: compare what comes before (kafkatool errors only)
        from kafkatool.errors import KafkaToolError

        assert isinstance(e, KafkaToolError), e
        error = e
    records = []
    try:
        i = 0
        for r in p.records(control=True):
            while r.offset > batches[i][1].last_offset:
                i += 1
            records.append((batches[i][0], batches[i][1], r))
    except Exception as e:
        from kafkatool.errors import KafkaToolError

        assert isinstance(e, KafkaToolError), e
        error = error or e
    return batches, records, error


class _Loose:
    """A ``.log`` named alone, as :func:`_model` reads it (its name need not be an offset)."""

    def __init__(self, log: Path) -> None:
        from kafkatool.segment.logdir import Segment

        self.log = str(log)
        self.path = str(log.parent)
        self.topic = self.partition = None  # its directory is no <topic>-<partition>
        self.segment = Segment.at(self.log, base_offset=-1)

    def batches(self):
        return self.segment.batches()

    def records(self, control: bool):
        return self.segment.records(control=control)


def _base(path: str) -> int:
    from kafkatool.errors import FileNameError
    from kafkatool.segment import files as names

    try:
        return names.parse_base_offset(path)
    except FileNameError:
        return -1  # a .log named alone whose name is not an offset


def _expected_record(p, path: str, b, r, first: dict[int, int], headers: bool = True, crc: bool = True) -> dict:
    """The ``records`` row of record ``r`` of batch ``b`` (Spark's Kafka source columns, then ours)."""
    legacy = b.magic < 2
    if legacy:
        ttype = -1 if r.magic == 0 else (1 if (b.attributes | r.attributes) & 0x08 else 0)
    else:
        ttype = 1 if b.attributes & 0x08 else 0
    return {
        "key": r.key, "value": r.value, "topic": p.topic, "partition": p.partition, "offset": r.offset,
        "timestamp": r.timestamp * 1000, "timestampType": ttype,
        "headers": ([{"key": k.decode("utf-8", "replace"), "value": v} for k, v in r.headers]
                    if r.headers and headers else None),
        "segment": path, "segmentBaseOffset": _base(path), "batchPosition": b.position,
        "batchBaseOffset": first[b.position] if legacy else b.offset, "magic": b.magic, "codec": b.codec_name,
        "leaderEpoch": b.partition_leader_epoch, "producerId": b.producer_id, "producerEpoch": b.producer_epoch,
        "sequence": r.sequence, "isTransactional": b.is_transactional, "isControl": b.is_control,
        "crcValid": (b.crc_valid and r.crc_valid is not False) if crc else None, "error": None,
    }


def _expected_batch(p, path: str, b, inner: list) -> dict:
    """The ``batches`` row of batch ``b`` (``inner``: its records, for a legacy wrapper's first offset and count)."""
    wrapper = b.magic < 2 and b.codec != 0
    return {
        "topic": p.topic, "partition": p.partition, "segment": path, "segmentBaseOffset": _base(path),
        "position": b.position, "size": b.size,
        "baseOffset": inner[0].offset if wrapper else b.offset, "lastOffset": b.last_offset,
        "magic": b.magic, "codec": b.codec_name, "attributes": b.attributes, "timestampType": b.timestamp_type,
        "baseTimestamp": b.base_timestamp * 1000, "maxTimestamp": b.max_timestamp * 1000,
        "leaderEpoch": b.partition_leader_epoch, "producerId": b.producer_id, "producerEpoch": b.producer_epoch,
        "baseSequence": b.base_sequence, "lastSequence": b.last_sequence,
        "recordCount": len(inner) if wrapper else (1 if b.magic < 2 else b.count),
        "isTransactional": b.is_transactional, "isControl": b.is_control, "storedCrc": b.crc,
        "computedCrc": b.computed_crc, "crcValid": b.crc_valid, "error": None, "errorKind": None,
    }


@pytest.fixture(scope="session")
def model_reads(spark, logdir: Path):
    """One records read and one batches read of the damaged logdir copy and (when present) the
    real broker files, through Spark; plus the records again without headers and CRC checks."""
    from pyspark.sql.functions import lit

    paths = [str(logdir)] + ([str(REAL), str(REAL / ALL_BAD_CRC)] if REAL.is_dir() else [])
    path = ",".join(paths)
    records = _read(spark, path, "records").withColumn("q", lit(0)).unionByName(
        _read(spark, logdir, "records", includeHeaders="false", verifyCrc="false").withColumn("q", lit(1)))
    rows = _rows(records)
    main = [r for r in rows if r["q"] == 0]
    plain = [r for r in rows if r["q"] == 1]
    for r in rows:
        del r["q"]
    return {"paths": paths, "records": main, "records_plain": plain, "batches": _rows(_read(spark, path, "batches"))}


def _key(r: dict, position: str) -> tuple:
    return (r["segmentBaseOffset"], r["segment"], r[position], -1 if r.get("offset") is None else r["offset"])


def _split_at_error(rows: list[dict], error, position: str) -> tuple[list[dict], list[dict]]:
    """The rows before the model's error (``error``: what stopped the non-Spark reader, or None),
    and the error rows."""
    errors = [r for r in rows if r["error"] is not None]
    good = [r for r in rows if r["error"] is None]
    if error is None:
        return good, errors
    stop = next(r for r in sorted(errors, key=lambda r: _key(r, position)))
    assert (stop["segment"], stop[position]) == (error.path, error.position), (stop, str(error))
    return [r for r in good if _key(r, position) < _key(stop, position)], errors


def _compare(rows: list[dict], partitions, kind: str, **expect) -> dict[str, int]:
    """Spark's rows of ``kind`` for ``partitions`` against the non-Spark reader's; returns how many
    rows and error rows were compared."""
    position = "batchPosition" if kind == "records" else "position"
    by_dir: dict[str, list[dict]] = {}
    for r in rows:
        by_dir.setdefault(os.path.dirname(r["segment"]), []).append(r)
    seen = {"rows": 0, "errors": 0, "damaged": 0}
    for p in partitions:
        got = by_dir.pop(p.path, [])
        batches, records, error = _model(p)
        inner: dict[tuple, list] = {}
        for path, b, r in records:
            inner.setdefault((path, b.position), []).append(r)
        if kind == "records":
            first = {k: v[0].offset for k, v in inner.items()}
            want = [_expected_record(p, path, b, r, {b.position: first[(path, b.position)]}, **expect)
                    for path, b, r in records]
        else:
            want = [_expected_batch(p, path, b, inner.get((path, b.position), [])) for path, b in batches]
            if error is not None:  # a batch the records could not be read from is the reader's error row
                want = [w for w in want if (w["segment"], w["position"]) != (error.path, error.position)]
        good, errors = _split_at_error(got, error, position)
        assert sorted(good, key=lambda r: _key(r, position)) == sorted(want, key=lambda r: _key(r, position)), p.path
        if error is None:
            assert errors == [], errors[:3]
        seen["rows"] += len(good)
        seen["errors"] += len(errors)
        seen["damaged"] += error is not None
    assert not by_dir, sorted(by_dir)  # nothing read from outside the partitions the search finds
    return seen


def test_records_match_the_non_spark_reader(model_reads, logdir: Path) -> None:
    rows = [r for r in model_reads["records"] if r["segment"].startswith(str(logdir))]
    seen = _compare(rows, _partitions([str(logdir)]), "records")
    assert seen["rows"] > 500 and seen["damaged"] == 1
    dmg = sorted((r for r in rows if "dmg-0" in r["segment"]), key=lambda r: _key(r, "batchPosition"))
    # the garbage over batch 1 is one bad region, reading resumes at batch 2; batch 3 is cut short
    assert [r["error"].split(": ")[1] for r in dmg if r["error"]] == ["invalid_size", "partial_batch"]
    assert [r["offset"] for r in dmg if not r["error"]] == list(range(10)) + list(range(20, 30))
    assert {r["crcValid"] for r in dmg if not r["error"]} == {False, True}  # batch 0 spoiled, batch 2 whole
    assert all(r["offset"] is None and r["timestamp"] is None for r in dmg if r["error"])


def test_records_without_headers_and_crc(model_reads, logdir: Path) -> None:
    seen = _compare(model_reads["records_plain"], _partitions([str(logdir)]), "records", headers=False, crc=False)
    assert seen["rows"] > 500


def test_batches_match_the_non_spark_reader(model_reads, logdir: Path) -> None:
    rows = [r for r in model_reads["batches"] if r["segment"].startswith(str(logdir))]
    seen = _compare(rows, _partitions([str(logdir)]), "batches")
    assert seen["damaged"] == 1 and seen["errors"] >= 2
    audit = [r for r in rows if not r["crcValid"] or r["error"] is not None]  # the CRC audit
    assert {r["segment"] for r in audit} == {str(logdir / "dmg-0" / "00000000000000000000.log")}


#: A real 90-message log whose CRCs are all bad (its SOURCE.md), named alone.
ALL_BAD_CRC = "kaspersorensen__kafka-record-updater/src/test/resources/example-log-health-check.log"


def test_real_files_match_the_non_spark_reader(model_reads) -> None:
    parts = _partitions([str(REAL)]) + [_Loose(real_fixture(ALL_BAD_CRC))]
    assert len(parts) > 10
    records = _compare([r for r in model_reads["records"] if r["segment"].startswith(str(REAL))], parts, "records")
    batches = _compare([r for r in model_reads["batches"] if r["segment"].startswith(str(REAL))], parts, "batches")
    assert records["rows"] > 1000 and batches["rows"] > 100
    bad = [r for r in model_reads["records"] if r["segment"] == str(REAL / ALL_BAD_CRC)]
    assert len(bad) == 90 and not any(r["crcValid"] for r in bad)


# ----------------------------------------------------------------------------- pushdown and seek options


def _union(dfs):
    from pyspark.sql.functions import lit

    out = None
    for i, df in enumerate(dfs):
        df = df.withColumn("q", lit(i))
        out = df if out is None else out.unionByName(df)
    return out


def _by_query(rows: list[dict], n: int) -> list[list[dict]]:
    out: list[list[dict]] = [[] for _ in range(n)]
    for r in rows:
        out[r.pop("q")].append(r)
    return out


def _same_rows(got: list[dict], want: list[dict], position: str, what: str) -> None:
    assert sorted(got, key=lambda r: _key(r, position)) == sorted(want, key=lambda r: _key(r, position)), what


def _v(r: dict, col: str, op, x) -> bool:
    """SQL's ``col OP x`` on row ``r``: a null is no match."""
    return r[col] is not None and op(r[col], x)


X = T0 + 51  # offset 5's records: T0 + 10*5 + 5 % 4 ms (fixtures/README.md)
Y = T0 + 113  # offset 11's


def test_pushed_filters_return_exactly_the_matching_rows(spark, model_reads, logdir: Path) -> None:
    import operator as op

    full = [r for r in model_reads["records"] if r["segment"].startswith(str(logdir))]
    xu, yu = X * 1000, Y * 1000
    assert sum(r["timestamp"] == yu for r in full) > 5  # rows on both boundaries
    queries = [
        ("topic IN ('txn', 'golden', 'nope') AND partition = 0", lambda r: r["topic"] in ("txn", "golden")),
        ("offset >= 105 AND offset < 113", lambda r: _v(r, "offset", op.ge, 105) and r["offset"] < 113),
        ("offset > 37 AND offset <= 100", lambda r: _v(r, "offset", op.gt, 37) and r["offset"] <= 100),
        ("offset = 3 AND topic = 'v2-gzip'", lambda r: r["offset"] == 3 and r["topic"] == "v2-gzip"),
        ("offset IN (2, 17, 110)", lambda r: r["offset"] in (2, 17, 110)),
        ("offset > 5 AND offset < 3", lambda r: False),
        # microsecond literals against millisecond values: each comparison on and between milliseconds
        (f"timestamp >= {_sql_ts(X, 500)} AND timestamp < {_sql_ts(Y)}",
         lambda r: _v(r, "timestamp", op.ge, xu + 500) and r["timestamp"] < yu),
        (f"timestamp >= {_sql_ts(X)} AND timestamp < {_sql_ts(Y, 1)}",
         lambda r: _v(r, "timestamp", op.ge, xu) and r["timestamp"] < yu + 1),
        (f"timestamp > {_sql_ts(X)} AND timestamp <= {_sql_ts(Y, 999)}",
         lambda r: _v(r, "timestamp", op.gt, xu) and r["timestamp"] <= yu + 999),
        (f"timestamp > {_sql_ts(X, 1)} AND timestamp <= {_sql_ts(Y)}",
         lambda r: _v(r, "timestamp", op.gt, xu + 1) and r["timestamp"] <= yu),
        (f"timestamp = {_sql_ts(X)}", lambda r: r["timestamp"] == xu),
        ("topic = 'dmg' AND offset >= 5", lambda r: r["topic"] == "dmg" and _v(r, "offset", op.ge, 5)),
        (f"topic = 'txn' AND offset < 120 AND timestamp >= {_sql_ts(T0 + 5000)}",
         lambda r: r["topic"] == "txn" and _v(r, "offset", op.lt, 120) and _v(r, "timestamp", op.ge, (T0 + 5000) * 1000)),
    ]
    # a DataFrame per query: Spark keeps one pushed-down reader per DataFrame (source.py's docstring)
    pushed = [_read(spark, logdir, "records", pushFilters="true").where(sql) for sql, _f in queries]
    got = _by_query(_rows(_union(pushed)), len(queries))
    for (sql, f), rows in zip(queries, got):
        _same_rows(rows, [r for r in full if f(r)], "batchPosition", sql)
    assert all(got[i] for i in (0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12))
    assert {r["offset"] for r in got[10]} == {5}  # exactly the records stored at X ms
    # Spark kept no filter of its own for what the source applies exactly
    df = _read(spark, logdir, "records", pushFilters="true")
    plan = df.where("topic = 'v2-gzip' AND offset >= 7")._jdf.queryExecution().optimizedPlan().toString()
    assert "v2-gzip" not in plan and ">= 7" not in plan, plan


def test_seek_options_return_exactly_the_matching_rows(spark, model_reads, logdir: Path) -> None:
    import operator as op

    full = [r for r in model_reads["records"] if r["segment"].startswith(str(logdir))]
    iso = lambda ms, us: _ts(ms, us).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: E731
    cases = [
        ({"topics": "v2-gzip,txn, dmg", "partitions": "0"}, lambda r: r["topic"] in ("v2-gzip", "txn", "dmg")),
        ({"startOffset": 5, "endOffset": 25}, lambda r: _v(r, "offset", op.ge, 5) and r["offset"] < 25),
        ({"startOffset": 110}, lambda r: _v(r, "offset", op.ge, 110)),
        ({"endOffset": 1}, lambda r: _v(r, "offset", op.lt, 1)),
        ({"startTime": X}, lambda r: _v(r, "timestamp", op.ge, X * 1000)),
        ({"startTime": iso(X, 500)}, lambda r: _v(r, "timestamp", op.ge, X * 1000 + 500)),
        ({"endTime": iso(X, 500)}, lambda r: _v(r, "timestamp", op.lt, X * 1000 + 500)),
        ({"startTime": T0 + 100, "endTime": T0 + 5001, "topics": "txn,v1-none"},
         lambda r: r["topic"] in ("txn", "v1-none") and _v(r, "timestamp", op.ge, (T0 + 100) * 1000)
         and r["timestamp"] < (T0 + 5001) * 1000),
    ]
    got = _by_query(_rows(_union([_read(spark, logdir, "records", **o) for o, _f in cases])), len(cases))
    for (o, f), rows in zip(cases, got):
        _same_rows(rows, [r for r in full if f(r)], "batchPosition", repr(o))
    assert all(got)


def test_batches_pushdown_returns_exactly_the_matching_rows(spark, model_reads, logdir: Path) -> None:
    import operator as op

    full = [r for r in model_reads["batches"] if r["segment"].startswith(str(logdir))]
    xu = X * 1000
    queries = [
        ("lastOffset >= 110", lambda r: _v(r, "lastOffset", op.ge, 110)),
        ("baseOffset < 20 AND topic = 'v2-lz4'", lambda r: _v(r, "baseOffset", op.lt, 20) and r["topic"] == "v2-lz4"),
        ("baseOffset = 106", lambda r: r["baseOffset"] == 106),
        ("lastOffset <= 104 AND lastOffset >= 103", lambda r: _v(r, "lastOffset", op.le, 104) and r["lastOffset"] >= 103),
        ("baseOffset > 25 AND lastOffset < 30", lambda r: _v(r, "baseOffset", op.gt, 25) and _v(r, "lastOffset", op.lt, 30)),
        ("baseOffset = 10 AND lastOffset IN (19, 25)", lambda r: r["baseOffset"] == 10 and r["lastOffset"] in (19, 25)),
        (f"maxTimestamp >= {_sql_ts(X, 500)}", lambda r: _v(r, "maxTimestamp", op.ge, xu + 500)),
        (f"maxTimestamp < {_sql_ts(X, 500)} AND partition = 0", lambda r: _v(r, "maxTimestamp", op.lt, xu + 500)),
        ("topic = 'dmg' AND lastOffset > 0", lambda r: r["topic"] == "dmg" and _v(r, "lastOffset", op.gt, 0)),
    ]
    pushed = [_read(spark, logdir, "batches", pushFilters="true").where(sql) for sql, _f in queries]
    got = _by_query(_rows(_union(pushed)), len(queries))
    for (sql, f), rows in zip(queries, got):
        _same_rows(rows, [r for r in full if f(r)], "position", sql)
    assert all(got)


# ----------------------------------------------------------------------------- paths, guards


def test_spark_workers_import_this_kafkatool(spark) -> None:
    """The executors' Python (PYSPARK_PYTHON) imports the same kafkatool as the driver: the data
    source's classes are found by module name there, and a stale install would read differently."""
    import kafkatool

    where = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("kafkatool").__file__).collect()
    assert where == [kafkatool.__file__]


def test_every_way_of_naming_the_input(spark, logdir: Path) -> None:
    """load(PATH): comma-separated, a glob, a list, the path/paths options, a partition dir, a .log."""
    import json

    a, b = logdir / "txn-0", logdir / "golden-0"
    log = a / "00000000000000000100.log"
    reader = lambda: spark.read.format("kafka_segments").option("kind", "stats")  # noqa: E731
    cases = [
        (reader().load(f"{a}, {b}"), [a, b]),
        (reader().load(str(logdir / "v2-*-0")), sorted(logdir.glob("v2-*-0"))),
        (reader().load([str(a), str(b)]), [a, b]),
        (reader().option("paths", json.dumps([str(b)])).load(), [b]),
        (reader().option("path", str(a)).load(), [a]),
        (reader().load(str(log)), [log]),
    ]
    got = _by_query([r.asDict() for r in _union([df.select("segment") for df, _w in cases]).collect()], len(cases))
    for (_df, want), rows in zip(cases, got):
        segments = sorted(str(p) for w in want for p in ([w] if w.suffix == ".log" else w.glob("*.log")))
        assert sorted(r["segment"] for r in rows) == segments
    with pytest.raises(Exception, match="no-such-dir: no such file or directory"):
        reader().load(str(logdir / "no-such-dir")).collect()


def test_a_slice_that_fails_becomes_an_error_row_and_the_task_goes_on(monkeypatch) -> None:
    """What escapes rows.read (it should not: damage is rows) stops only its slice, said in a row;
    a missing codec library and bugs fail the task."""
    pytest.importorskip("pyarrow")
    from kafkatool.errors import InvalidRecordError, MissingDependencyError
    from kafkatool.spark import plan, rows, tasks

    opts = plan.ReadOptions()
    (task,) = plan.plan([str(FIXTURES / "v2-none-0"), str(FIXTURES / "golden-0")], opts)
    assert len(task.slices) == 2
    real_read = rows.read
    failure: list[BaseException] = []

    def failing(t, o):
        (s,) = t.slices
        if "v2-none" in s.log_path:
            yield next(iter(real_read(t, o)))  # its rows so far, then the failure
            raise failure[0]
        yield from real_read(t, o)

    monkeypatch.setattr(rows, "read", failing)
    log = str(FIXTURES / "v2-none-0" / "00000000000000000000.log")
    for error, where in [
        (InvalidRecordError("bad varint", path=log, position=1234, kind="invalid_record"), f"{log}:1234: invalid_record: bad varint"),
        (FileNotFoundError(2, "No such file or directory", log), f"{log}: unreadable: cannot read the file: No such file or directory"),
    ]:
        failure[:] = [error]
        out = [r for b in tasks.read(task, opts) for r in b.to_pylist()]
        errors = [r for r in out if r["error"]]
        assert len(errors) == 1 and errors[0]["error"].startswith(where + " (reading stopped: the rows of bytes 0 to"), errors
        assert errors[0]["topic"] == "v2-none" and errors[0]["segment"] == log and errors[0]["offset"] is None
        assert [r["topic"] for r in out if not r["error"]] == ["v2-none"] * 40 + ["golden"] * 4
    for error in (MissingDependencyError("this batch needs 'lz4'"), TypeError("a bug")):
        failure[:] = [error]
        with pytest.raises(type(error)):
            list(tasks.read(task, opts))


def test_a_verify_group_that_fails_is_a_finding_and_the_task_goes_on(monkeypatch) -> None:
    pytest.importorskip("pyarrow")
    import kafkatool.verify
    from kafkatool.errors import CorruptIndexError
    from kafkatool.spark import plan, tasks

    opts = plan.ReadOptions(kind="findings")
    (task,) = plan.plan_findings([str(FIXTURES / "golden-0"), str(FIXTURES / "txn-0")], opts)
    real_verify = kafkatool.verify.verify_group
    index = str(FIXTURES / "golden-0" / "00000000000000000000.index")

    def failing(group, vopts, on_bytes=None):
        if "golden" in group[0].path:
            yield next(iter(real_verify(group, vopts)))
            raise CorruptIndexError("cannot map", path=index, position=8)
        yield from real_verify(group, vopts)

    monkeypatch.setattr(kafkatool.verify, "verify_group", failing)
    rows = [r for b in tasks.read_findings(task, opts, index=3) for r in b.to_pylist()]
    got = [tasks.finding_of_row(r) for r in rows]
    assert [(r["task"], r["seq"]) for r in rows] == [(3, i) for i in range(len(rows))]
    assert got[1:3] == [
        kafkatool.verify.Finding(index, 8, None, "unreadable", "verify stopped here: cannot map"),
        kafkatool.verify.FileSummary(index, "unreadable", 0, 0, 1, None),
    ]
    assert got[3:] == list(real_verify(task.groups[1], tasks.verify_options(opts)))


def test_input_partitions_are_small_and_picklable(logdir: Path) -> None:
    """What Spark ships to each task: a few hundred bytes per segment slice, whatever the data."""
    pytest.importorskip("pyspark")
    from kafkatool.spark.source import KafkaSegmentsReader, read_options

    for kind in ("records", "batches", "findings", "stats"):
        source = read_options({"path": str(logdir), "kind": kind, "maxPartitionBytes": "8m"})
        parts = KafkaSegmentsReader(*source).partitions()
        assert len(parts) > 1, kind
        # Spark's parallelism given: tasks sized as file splits (here 4 MiB), not 128 MiB
        packed = KafkaSegmentsReader(*read_options({"path": str(logdir), "kind": kind})).partitions()
        spread = read_options({"path": str(logdir), "kind": kind, "parallelism": "64"})
        assert spread.parallelism == 64 and len(KafkaSegmentsReader(*spread).partitions()) > len(packed), kind
        for i, part in enumerate(parts):
            data = pickle.dumps(part)
            back = pickle.loads(data)
            assert (back.value, back.index) == (part.value, i)
            units = len(getattr(part.value, "slices", ())) or sum(len(g) for g in part.value.groups)
            assert len(data) < 600 * units, (kind, len(data), units)


def test_a_segment_whose_stats_fail_is_a_problem_and_the_task_goes_on(monkeypatch) -> None:
    pytest.importorskip("pyarrow")
    import kafkatool.stats
    from kafkatool.segment.logdir import Partition
    from kafkatool.spark import plan, tasks

    opts = plan.ReadOptions(kind="stats")
    (task,) = plan.plan_stats([str(FIXTURES / "golden-0"), str(FIXTURES / "txn-0")], opts)
    real_stats = kafkatool.stats.segment_stats
    golden = str(FIXTURES / "golden-0" / "00000000000000000000.log")

    def failing(segment, sopts):
        if segment.log_path == golden:
            raise PermissionError(13, "Permission denied", golden)
        return real_stats(segment, sopts)

    monkeypatch.setattr(kafkatool.stats, "segment_stats", failing)
    monkeypatch.setattr(tasks, "STATS_FLUSH_ROWS", 1)
    batches = list(tasks.read_stats(task, opts))
    assert [b.num_rows for b in batches] == [1, 1]  # flushed as they come
    rows = [r for b in batches for r in b.to_pylist()]
    assert [r["topic"] for r in rows] == ["golden", "txn"]
    failed, ok = (tasks.stats_of_row(r) for r in rows)
    assert [str(p) for p in failed.problems] == [f"{golden}: Permission denied"] and failed.batches == 0
    assert ok == real_stats(next(iter(Partition(str(FIXTURES / "txn-0")).segments())), tasks.stats_options(opts))
    whole = kafkatool.stats.combine_stats([failed], Partition(str(FIXTURES / "golden-0")))
    assert not whole.ok and whole.log_end is None
