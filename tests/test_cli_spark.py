"""``kafkatool spark export|verify|stats`` (kafkatool/cli/spark.py, kafkatool/spark/session.py).

The Spark tests run the CLI in-process on the session-scoped ``local[2]`` session of
tests/conftest.py (``start_session`` reuses the active session, so no second JVM starts) and
compare with independent results: ``kafkatool verify`` and ``kafkatool stats`` run on the same
paths (their output must be the same, but for the measured seconds), and the non-Spark reader
(``Partition.records(control=True)``) for what ``export`` wrote. The refusals and the start-up
checks need no JVM: they run before Spark starts, or in a subprocess without Java or pyspark.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO

LIVE = sorted(d for d in os.listdir(FIXTURES) if os.path.isdir(FIXTURES / d))


def _seconds_out(text: str) -> str:
    """The measured seconds are the one thing that differs between two runs."""
    text = re.sub(r'"seconds":[0-9.]+', '"seconds":S', text)
    return re.sub(r" in [0-9.]+ s:", " in S s:", text)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory) -> Path:
    """A copy of the fixture log dir with two CRC-broken batches, a bad size field and a stale
    time index entry (verify finds crc_mismatch and timeindex_timestamp_mismatch; stats problems)."""
    root = tmp_path_factory.mktemp("damaged") / "logdir"
    shutil.copytree(FIXTURES, root)
    log = root / "v2-none-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[900] ^= 0xFF
    data[2000:2004] = b"\xff\xff\xff\x7f"
    log.write_bytes(bytes(data))
    txn = root / "txn-0" / "00000000000000000100.log"
    data = bytearray(txn.read_bytes())
    data[300] ^= 0x55
    txn.write_bytes(bytes(data))
    return root


# --------------------------------------------------------------------------- verify, stats: as the commands


def test_spark_verify_prints_what_verify_prints(spark, run, damaged) -> None:
    clean = run("verify", str(FIXTURES), "--format", "jsonl")
    got = run("spark", "verify", str(FIXTURES), "--format", "jsonl")
    assert (got.code, _seconds_out(got.out)) == (clean.code, _seconds_out(clean.out)) == (0, _seconds_out(clean.out))

    for fmt in ("text", "jsonl"):
        want = run("verify", "--deep", str(damaged), "--format", fmt)
        got = run("spark", "verify", "--deep", str(damaged), "--format", fmt)
        assert want.code == 1 and "crc_mismatch" in want.out and "timeindex_timestamp_mismatch" in want.out
        assert got.code == want.code
        assert _seconds_out(got.out) == _seconds_out(want.out)
        assert _seconds_out(got.err) == _seconds_out(want.err)
    # --ignore and --fail-on as verify's: the same kinds left out, the same exit status
    args = ("--ignore", "timeindex_timestamp_mismatch", "--fail-on", "index_missing", "--format", "table", str(damaged))
    want = run("verify", *args)
    got = run("spark", "verify", *args)
    assert (got.code, got.out) == (want.code, want.out) and want.code == 0 and "crc_mismatch" in want.out
    assert "Findings" in got.out and "timeindex_timestamp_mismatch" not in got.out


def test_spark_stats_prints_what_stats_prints(spark, run, damaged, tmp_path) -> None:
    want = run("stats", str(FIXTURES))
    got = run("spark", "stats", str(FIXTURES))
    assert want.code == 0 and want.out.count("\npartition ") == len(LIVE) - 1
    assert (got.code, got.out, _seconds_out(got.err)) == (want.code, want.out, _seconds_out(want.err))

    # several paths in one argument, as the data source takes them: comma-separated (or a glob)
    want = run("stats", "--format", "table", str(FIXTURES / "txn-0"), str(FIXTURES / "golden-0"))
    got = run("spark", "stats", "--format", "table", f"{FIXTURES / 'txn-0'},{FIXTURES / 'golden-0'}")
    assert want.out.startswith("Partitions") and "Read 2 partitions" in want.err
    assert (got.code, got.out) == (want.code, want.out)

    # a segment file named alone, with fewer producers listed than it has (3)
    segment = FIXTURES / "txn-0" / "00000000000000000100.log"
    want = run("stats", "--format", "jsonl", "--producers", "1", str(segment))
    got = run("spark", "stats", "--format", "jsonl", "--producers", "1", str(segment))
    assert '"type":"segment"' in want.out and '"notListed":2' in want.out
    assert (got.code, _seconds_out(got.out)) == (want.code, _seconds_out(want.out))

    # a FIFO named like a segment: a problem of its partition, as stats reports it (never opened)
    logdir = tmp_path / "fifo"
    shutil.copytree(FIXTURES / "golden-0", logdir / "golden-0")
    shutil.copy(FIXTURES / "meta.properties", logdir)
    os.mkfifo(logdir / "golden-0" / "00000000000000000050.log")
    want = run("stats", str(logdir))
    got = run("spark", "stats", str(logdir))
    assert want.code == 1 and "named like a segment but a FIFO" in want.out
    assert (got.code, got.out) == (want.code, want.out)

    args = ("--format", "jsonl", "--deep", "--producers", "1", str(damaged))
    want = run("stats", *args)
    got = run("spark", "stats", *args)
    assert want.code == 1 and '"crcMismatches":1' in want.out  # the damage is seen ...
    assert got.code == 1 and _seconds_out(got.out) == _seconds_out(want.out)  # ... the same way


def test_spark_verify_and_stats_on_the_real_broker_files(spark, run, real) -> None:
    """Every real fixture at once (magics 0-2, KRaft logs, a log whose CRCs are all bad, hex dumps
    that are no segments): the same findings, stats and exit codes."""
    want = run("verify", "--deep", "--format", "jsonl", str(real))
    got = run("spark", "verify", "--deep", "--format", "jsonl", str(real))
    assert want.code == 1 and want.out.count('"type":"finding"') > 10
    assert (got.code, _seconds_out(got.out)) == (want.code, _seconds_out(want.out))
    want = run("stats", "--format", "jsonl", str(real))
    got = run("spark", "stats", "--format", "jsonl", str(real))
    assert want.out.count('"type":"partition"') >= 6
    assert (got.code, _seconds_out(got.out)) == (want.code, _seconds_out(want.out))


# --------------------------------------------------------------------------- export


def _expected(partition_dir: Path) -> list[tuple]:
    """The records of a partition as the non-Spark reader gives them, control records included."""
    from kafkatool.segment.logdir import Partition

    return [
        (r.offset, r.timestamp, r.key, r.value,
         None if not r.headers else [(k.decode("utf-8", "replace"), v) for k, v in r.headers])
        for r in Partition(str(partition_dir)).records(control=True)
    ]


def _hive_dirs(out: Path) -> set[str]:
    return {f"{t.name}/{p.name}" for t in out.iterdir() if t.is_dir() for p in t.iterdir() if p.is_dir()}


def _ordered(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["segmentBaseOffset"], r["batchPosition"], r["offset"]))


def test_export_parquet_matches_the_reader(spark, run, tmp_path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "out"
    result = run("spark", "export", str(FIXTURES), "--to", str(out))
    assert result.code == 0, result
    total = sum(len(_expected(FIXTURES / d)) for d in LIVE)
    assert f"Exported {total} rows ({total} records, 6 of them control records; 0 error rows)" in result.err
    assert _hive_dirs(out) == {f"topic={d.rsplit('-', 1)[0]}/partition={d.rsplit('-', 1)[1]}" for d in LIVE}
    for d in LIVE:
        topic, part = d.rsplit("-", 1)
        table = pq.read_table(out / f"topic={topic}" / f"partition={part}")
        assert "topic" not in table.column_names and "partition" not in table.column_names  # in the path
        assert str(table.schema.field("timestamp").type) == "timestamp[us, tz=UTC]"  # not INT96
        rows = _ordered(table.to_pylist())
        got = [(r["offset"], int(r["timestamp"].timestamp() * 1000) if r["timestamp"] is not None else None,
                r["key"], r["value"], None if r["headers"] is None else [(h["key"], h["value"]) for h in r["headers"]])
               for r in rows]
        assert got == _expected(FIXTURES / d), d
        assert all(r["error"] is None and r["crcValid"] for r in rows)
    # key and value are written without a dictionary (high cardinality), the other columns with one
    meta = pq.ParquetFile(next((out / "topic=txn" / "partition=0").glob("part-*.parquet"))).metadata
    encodings = {meta.schema.column(i).path: meta.row_group(0).column(i).encodings for i in range(meta.num_columns)}
    assert not any("DICTIONARY" in e for c in ("key", "value") for e in encodings[c]), encodings
    assert any("DICTIONARY" in e for e in encodings["codec"]), encodings
    control = pq.read_table(out / "topic=txn" / "partition=0").to_pylist()
    assert sum(r["isControl"] for r in control) == 2  # the COMMIT and ABORT markers are rows too


def test_export_json_and_csv_round_trip(spark, run, tmp_path) -> None:
    pa_csv = pytest.importorskip("pyarrow.csv")
    import pyarrow as pa

    topics = ("txn", "v2-gzip")  # headers (with a null value), null keys, control records, compression
    expected = {t: _expected(FIXTURES / f"{t}-0") for t in topics}
    assert any(h is not None and any(v is None for _k, v in h) for t in topics for *_x, h in expected[t])

    out = tmp_path / "json"  # with an offset range and without headers: the options reach the reader
    assert run("spark", "export", str(FIXTURES), "--to", str(out), "--format", "json", "--topics", ",".join(topics),
               "--start-offset", "20", "--end-offset", "120", "--no-headers").code == 0
    assert _hive_dirs(out) == {f"topic={t}/partition=0" for t in topics}
    for t in topics:
        want = [(o, ts, k, v, None) for o, ts, k, v, _h in expected[t] if 20 <= o < 120]
        assert 0 < len(want) < len(expected[t])
        rows = [json.loads(line) for f in sorted((out / f"topic={t}" / "partition=0").glob("part-*.json"))
                for line in f.read_text(encoding="utf-8").splitlines()]
        assert "key" in rows[0] and "error" in rows[0]  # nulls written, not left out

        def b64(v):
            return None if v is None else base64.b64decode(v)

        got = [(r["offset"], _ms(r["timestamp"]), b64(r["key"]), b64(r["value"]),
                None if r["headers"] is None else [(h["key"], b64(h["value"])) for h in r["headers"]])
               for r in _ordered(rows)]
        assert got == want, t

    out = tmp_path / "csv"
    assert run("spark", "export", str(FIXTURES), "--to", str(out), "--format", "csv", "--topics", ",".join(topics)).code == 0
    for t in topics:
        tables = []
        for f in sorted((out / f"topic={t}" / "partition=0").glob("part-*.csv")):
            names = f.open(encoding="utf-8").readline().strip().split(",")
            tables.append(pa_csv.read_csv(f, convert_options=pa_csv.ConvertOptions(
                column_types={n: pa.string() for n in names}, strings_can_be_null=True,
                quoted_strings_can_be_null=False)))
        rows = [dict(r, offset=int(r["offset"]), segmentBaseOffset=int(r["segmentBaseOffset"]),
                     batchPosition=int(r["batchPosition"])) for tb in tables for r in tb.to_pylist()]

        def b64(v):
            return None if v is None else base64.b64decode(v)

        got = [(r["offset"], _ms(r["timestamp"]), b64(r["key"]), b64(r["value"]),
                None if r["headers"] is None else [(h["key"], b64(h.get("value"))) for h in json.loads(r["headers"])])
               for r in _ordered(rows)]
        assert got == expected[t], t
        assert {r["isControl"] for r in rows} == ({"true", "false"} if t == "txn" else {"false"})


def _ms(text: str) -> int:
    """``2023-11-14T22:13:20.393Z`` (the export's timestamp format) as epoch milliseconds."""
    from datetime import datetime

    return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def test_export_error_rows_exit_1(spark, run, damaged, tmp_path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "out"
    out.mkdir()  # an empty directory is as good as a new one
    result = run("spark", "export", str(damaged / "v2-none-0"), "--to", str(out))
    assert result.code == 1, result
    rows = pq.read_table(out / "topic=v2-none" / "partition=0").to_pylist()
    errors = [r for r in rows if r["error"] is not None]
    assert len(errors) >= 1 and f"{len(errors)} error row" in result.err
    assert all(str(damaged / "v2-none-0" / "00000000000000000000.log") in r["error"] for r in errors)
    # a previous export may be overwritten: it is replaced whole
    result = run("spark", "export", str(FIXTURES / "golden-0"), "--to", str(out), "--mode", "overwrite")
    assert result.code == 0, result
    assert _hive_dirs(out) == {"topic=golden/partition=0"}


# --------------------------------------------------------------------------- refusals (before Spark starts)


def test_export_refuses_an_output_that_is_not_new(run, tmp_path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    result = run("spark", "export", str(FIXTURES), "--to", str(out))
    assert result.code == 2 and "exists and is not empty" in result.err and "--mode append" in result.err
    result = run("spark", "export", str(FIXTURES), "--to", str(out), "--mode", "overwrite")
    assert result.code == 2 and "'keep.txt', which is not part of a kafkatool export" in result.err
    assert (out / "keep.txt").read_text() == "mine"
    (tmp_path / "file").write_text("x")
    result = run("spark", "export", str(FIXTURES), "--to", str(tmp_path / "file"))
    assert result.code == 2 and "is not a directory" in result.err


def test_export_refuses_to_write_into_a_log_dir(run, tmp_path) -> None:
    logdir = tmp_path / "logdir"
    shutil.copytree(FIXTURES / "golden-0", logdir / "golden-0")
    for target in (logdir / "export", logdir / "golden-0" / "x", logdir):
        result = run("spark", "export", str(logdir), "--to", str(target))
        assert result.code == 2 and "inside the input" in result.err, (target, result)
        assert result.err.count("\n") == 1
    result = run("spark", "export", f"{tmp_path}/txn-0,{logdir}/gold*", "--to", str(logdir / "golden-0" / "x"))
    assert result.code == 2 and "no such file" in result.err  # a part that does not exist
    shutil.copytree(FIXTURES / "txn-0", tmp_path / "txn-0")
    result = run("spark", "export", f"{tmp_path}/txn-0,{logdir}/gold*", "--to", str(logdir / "golden-0" / "x"))
    assert result.code == 2 and f"inside the input {logdir}/golden-0" in result.err  # found through the glob
    assert not (logdir / "export").exists() and not (logdir / "golden-0" / "x").exists()
    # overwrite would delete the output: never with a log dir in it
    result = run("spark", "export", str(logdir / "golden-0"), "--to", str(tmp_path), "--mode", "overwrite")
    assert result.code == 2 and "inside the output, which overwrite would delete" in result.err
    assert (logdir / "golden-0").is_dir()
    # paths on a Spark Connect server: compared by name, before any connection
    result = run("spark", "export", "--remote", "sc://127.0.0.1:1", "/srv/kafka/data", "--to", "/srv/kafka/data/x")
    assert result.code == 2 and "inside the input /srv/kafka/data" in result.err


def test_bad_options_and_paths_are_usage_errors(run, tmp_path) -> None:
    result = run("spark", "export", str(FIXTURES), "--to", str(tmp_path / "o"), "--start-time", "yesterday")
    assert result.code == 2 and "startTime" in result.err and "Traceback" not in result.err
    (tmp_path / "notes.txt").write_text("not a segment")  # refused before Spark starts, as stats refuses it
    result = run("spark", "export", str(tmp_path / "notes.txt"), "--to", str(tmp_path / "o"))
    assert result.code == 2 and result.err == (f"kafkatool: error: {tmp_path / 'notes.txt'}: not a segment file (export "
                                               "reads .log files, partition dirs and log dirs)\n")
    result = run("spark", "verify", str(tmp_path / "missing"))
    assert result.code == 2 and "does not exist" in result.err
    empty = tmp_path / "empty"
    empty.mkdir()
    want = run("verify", str(empty))
    got = run("spark", "verify", str(empty))
    assert (got.code, got.err) == (want.code, want.err) == (2, want.err)
    want = run("stats", str(empty))
    got = run("spark", "stats", str(empty))
    assert (got.code, got.err) == (want.code, want.err) == (2, want.err)
    result = run("spark", "stats", str(FIXTURES / "no-such-*"))
    assert result.code == 2 and f"{FIXTURES / 'no-such-*'}: no path matches" in result.err
    result = run("spark", "verify", "--fail-on", "no_such_kind", str(FIXTURES))
    assert result.code == 2 and "unknown finding kind(s): no_such_kind" in result.err


# --------------------------------------------------------------------------- missing Java, extra, Connect


def _subprocess(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkatool", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _env(**changes: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    for k, v in changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def test_missing_java_is_one_clear_line(tmp_path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    done = _subprocess(["spark", "stats", str(FIXTURES)], _env(PATH=str(empty), JAVA_HOME=None))
    assert done.returncode == 2, done
    assert done.stderr.splitlines() == [
        "kafkatool: error: Spark needs a Java runtime (17 or later): no `java` on PATH and JAVA_HOME is not set; "
        "install one (e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME, or run on a cluster with "
        "--remote sc://HOST"
    ]
    assert done.stdout == ""


def _fake_java(tmp_path: Path, version: str) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    run_part = 'echo "Error: this JVM cannot start" >&2; exit 1'
    java.write_text(f'#!/bin/sh\nif [ "$1" = "-version" ]; then echo \'openjdk version "{version}" 2020-01-01\' >&2; exit 0; fi\n'
                    f"{run_part}\n")
    java.chmod(0o755)
    return home


def test_old_java_and_a_jvm_that_does_not_start(tmp_path) -> None:
    from kafkatool.spark.session import SparkStartError, check_java

    home = _fake_java(tmp_path, "11.0.2")
    env = _env(JAVA_HOME=str(home), PATH=str(home / "bin"))
    done = _subprocess(["spark", "verify", str(FIXTURES)], env)
    assert done.returncode == 2, done
    assert done.stderr.splitlines() == [
        f"kafkatool: error: Spark 4 needs Java 17 or later, and {home}/bin/java is Java 11: install a newer one and "
        "point JAVA_HOME at it"
    ]
    shutil.rmtree(home)
    home = _fake_java(tmp_path, "17.0.15")  # passes the check, then spark-submit's JVM fails
    done = _subprocess(["spark", "verify", str(FIXTURES)], _env(JAVA_HOME=str(home), PATH=f"{home / 'bin'}:/usr/bin:/bin"))
    assert done.returncode == 2, done
    last = done.stderr.splitlines()[-1]
    assert last.startswith("kafkatool: error: Spark (master local[*]) did not start: ") and "JAVA_GATEWAY_EXITED" in last
    assert "Traceback" not in done.stderr and "at org.apache" not in done.stderr
    monkey = os.environ.get("JAVA_HOME")
    try:
        os.environ["JAVA_HOME"] = str(home)
        assert check_java() == f"{home}/bin/java"
        shutil.rmtree(home)
        home = _fake_java(tmp_path, "1.8.0_392")
        with pytest.raises(SparkStartError, match="is Java 8"):
            check_java()
    finally:
        if monkey is None:
            os.environ.pop("JAVA_HOME", None)
        else:
            os.environ["JAVA_HOME"] = monkey


def test_missing_extra_is_one_clear_line(tmp_path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['pyspark'] = None  # `import pyspark` fails\n")
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    done = _subprocess(["spark", "verify", str(FIXTURES)], env)
    assert done.returncode == 2, done
    assert done.stderr.splitlines() == [
        "kafkatool: error: kafkatool spark needs the 'pyspark' module: install the spark extra with "
        "`pip install 'kafkatool[spark]'`"
    ]
    help_ = _subprocess(["spark", "export", "--help"], env)  # the help needs no pyspark
    assert help_.returncode == 0 and "--to OUT" in help_.stdout


def test_a_failed_job_of_its_own_session_is_one_line(tmp_path) -> None:
    """kafkatool's own local session (a JVM of its own, started as the command starts it), with
    the executors' Python workers failing to start, as a broken Python on a cluster node does:
    the planning passes, the tasks fail, and the failure comes out as one line, without the Java
    stack traces of the failed tasks, their retries and the aborted write that Spark's loggers
    print by default, and without Spark's start-up banner."""
    if os.environ.get("JAVA_HOME") is None and shutil.which("java") is None:
        pytest.skip("Spark tests need a Java runtime (no java on PATH and JAVA_HOME unset)")
    python = tmp_path / "python"  # the planner's Python works; the workers' daemon does not start
    python.write_text('#!/bin/sh\ncase "$*" in *pyspark.daemon*|*pyspark.worker*) echo "no worker here" >&2; exit 3;; esac\n'
                      f'exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    done = _subprocess(["spark", "export", str(FIXTURES / "golden-0"), "--to", str(tmp_path / "out"),
                        "--conf", "spark.ui.enabled=false"],  # (no warning about a web UI port another Spark holds)
                       _env(PYSPARK_PYTHON=str(python)), timeout=300)
    lines = [ln for ln in done.stderr.splitlines() if not ln.startswith("WARNING: Using incubator modules")]
    assert done.returncode == 2, done
    assert len(lines) == 1 and lines[0].startswith("kafkatool: error: the Spark job failed: "), done.stderr
    assert "pyspark.daemon" in lines[0]  # what failed, in Spark's words
    assert not any((tmp_path / "out").rglob("*.parquet"))


def test_remote_without_the_connect_client(run, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "grpc", None)  # `import grpc` fails as where grpcio is not installed
    result = run("spark", "verify", "--remote", "sc://127.0.0.1:1", str(FIXTURES))
    assert result.code == 2 and result.err.count("\n") == 1
    assert "--remote (Spark Connect) needs its client libraries, and grpcio is not installed" in result.err
    result = run("spark", "verify", "--remote", "http://x", str(FIXTURES))
    assert result.code == 2 and "a Spark Connect URL starts with sc://" in result.err
    result = run("spark", "verify", "--remote", "sc://x", "--master", "local[1]", str(FIXTURES))
    assert result.code == 2 and "exclude each other" in result.err


def test_spark_failure_is_one_line() -> None:
    """A failed job's text (a Python traceback inside Spark's message) comes out as its last error line."""
    from kafkatool.cli.spark import _spark_failure

    text = ("An exception was thrown from the Python worker.\nTraceback (most recent call last):\n"
            '  File "x.py", line 1, in <module>\nkafkatool.errors.CorruptRecordError: /d/t-0/0.log:12: bad size\n'
            "\tat org.apache.spark.api.python.BasePythonRunner...\n")
    fail = _spark_failure(RuntimeError(text))
    assert str(fail) == "the Spark job failed: CorruptRecordError: /d/t-0/0.log:12: bad size" and fail.code == 2
    fail = _spark_failure(RuntimeError("Traceback (most recent call last):\nKeyError: 'x'\n"))
    assert str(fail) == "the Spark job failed: KeyError: 'x'" and fail.code == 3  # a bug of ours
    fail = _spark_failure(RuntimeError("Job aborted due to stage failure: ...\njava.lang.OutOfMemoryError: Java heap space\n"
                                       "\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)\n"))
    assert str(fail) == "the Spark job failed: OutOfMemoryError: Java heap space" and fail.code == 2  # the cluster's


def test_local_driver_memory_default(tmp_path, monkeypatch) -> None:
    """A local master's driver heap: a quarter of the memory, 1g to 4g, unless the user set one."""
    from kafkatool.spark import session

    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    quarter_gib = total // 4 // (1 << 30)
    assert session.driver_memory() == f"{min(4, max(1, quarter_gib))}g"
    monkeypatch.setattr(os, "sysconf", lambda name: {"SC_PHYS_PAGES": 3 << 18, "SC_PAGE_SIZE": 4096}[name])  # 3 GiB
    assert session.driver_memory() == "1g"
    monkeypatch.setattr(os, "sysconf", lambda name: {"SC_PHYS_PAGES": 12 << 18, "SC_PAGE_SIZE": 4096}[name])  # 12 GiB
    assert session.driver_memory() == "3g"
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "none"))
    assert not session._driver_memory_given([])
    assert session._driver_memory_given([("spark.driver.memory", "8g")])
    (tmp_path / "spark-defaults.conf").write_text("# site\nspark.driver.memory   6g\n")
    assert session._driver_memory_given([])
    (tmp_path / "spark-defaults.conf").write_text("spark.executor.memory 6g\n")
    assert not session._driver_memory_given([])
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-memory 2g pyspark-shell")
    assert session._driver_memory_given([])
