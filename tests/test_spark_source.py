"""The ``kafka_segments`` data source end to end: through Spark (``local[2]``, the one session of
``tests/conftest.py``), against kafkatool's non-Spark readers.

* records and batches of ``fixtures/logdir`` and of the real broker files, row for row against
  ``Partition.records(control=True)`` and ``Segment.batches()`` (expected rows built here from
  the model's Record and Batch fields, not from kafkatool.spark.rows);
* a damaged segment read as ``findings`` gives what ``kafkatool.verify.verify_paths`` gives;
  ``stats`` rows combined with ``combine_stats`` give what ``kafkatool.stats`` gives;
* pushed-down filters and the seek options return exactly the rows of the unfiltered read
  that match, at the boundaries (a timestamp literal between two milliseconds included);
* the filter translation itself (no JVM), and ``import kafkatool.spark`` without pyspark.

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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == "kafka_segments"
    assert len([x for x in lines if x.startswith("ERR ")]) == 2
    assert all("pip install 'kafkatool[spark]'" in x and "'pyspark'" in x for x in lines[:2]), lines


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
    back = [IsNotNull(o), StringStartsWith(t, "a"), In(o, [12, 15]), EqualTo(("key",), b"k"), EqualTo(t, None)]
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
    }
    for f, (lo, hi) in cases.items():
        opts, left = _push("records", [f])
        assert left == [] and (opts.start_time, opts.end_time) == (lo, hi) and not opts.empty, f
    opts, left = _push("records", [EqualTo(ts, _ts(ms, 500))])
    assert left == [] and opts.empty  # between two milliseconds: no record can be equal
    opts, left = _push("records", [GreaterThan(o, 5), LessThan(o, 3)])
    assert left == [] and opts.empty
    naive = GreaterThan(ts, datetime.datetime(2024, 1, 1))
    opts, left = _push("records", [naive])
    assert left == [naive] and opts.start_time is None


def test_pushdown_translation_batches_and_stats() -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual

    exact = [GreaterThanOrEqual(("lastOffset",), 10), LessThan(("baseOffset",), 30),
             GreaterThanOrEqual(("maxTimestamp",), _ts(T0, 1)), EqualTo(("topic",), "x")]
    partial = [GreaterThan(("baseOffset",), 11), LessThanOrEqual(("lastOffset",), 25),
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
    cases = [(str(logdir / "dmg-0"), True), (str(logdir / "dmg-0"), False), (f"{logdir},{loose}", True)]
    dfs = [_read(spark, path, "findings", deep=str(deep).lower(), maxPartitionBytes="1k") for path, deep in cases]
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
    assert len({r["task"] for r in rows if r["q"] == 2}) > 1  # packed into several tasks, order kept


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
    cases = [(path, False), (str(logdir / "dmg-0"), True)]
    union = None
    for i, (p, deep) in enumerate(cases):
        df = _read(spark, p, "stats", deep=str(deep).lower(), maxPartitionBytes="1k").withColumn("q", lit(i))
        union = df if union is None else union.unionByName(df)
    rows = union.collect()
    for i, (p, deep) in enumerate(cases):
        got = _combined_stats([r for r in rows if r["q"] == i], p, deep)
        want = list(iter_stats(p.split(","), StatsOptions(deep=deep)))
        assert got == want
    assert any(s.problems for s in want)  # dmg-0's damage is counted as problems
    assert {r["topic"] for r in rows if r["q"] == 0} >= {"txn", "v2-zstd", "golden"}


def test_stats_pushdown_is_exact(spark, logdir: Path) -> None:
    df = _read(spark, logdir, "stats")
    got = sorted(r["segment"] for r in df.where("topic IN ('txn', 'golden') AND partition = 0").collect())
    assert got == sorted(str(p) for d in ("txn-0", "golden-0") for p in (logdir / d).glob("*.log"))
    plan = df.where("topic = 'txn'")._jdf.queryExecution().optimizedPlan().toString()
    assert "txn" not in plan  # handled by the source: Spark keeps no filter on topic
