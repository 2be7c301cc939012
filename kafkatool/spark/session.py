"""The SparkSession of ``kafkatool spark`` and the Spark jobs its commands run (the one place
beside the data source where the CLI's Spark work imports pyspark; kafkatool.cli.spark does not).

Starting: checks first, one clear line when they fail.

:func:`start_session` checks what a JVM start would otherwise report as a page of Java (or
Python) stack trace: the ``spark`` extra is importable, a Java runtime is there (``java`` on
``PATH`` or ``JAVA_HOME``, version 17 or later), and for Spark Connect its client libraries.
Each failure is a :class:`SparkStartError` (a :class:`~kafkatool.errors.KafkaToolError`: one line,
what is missing and how to get it); the CLI ends with it, exit status 2.

Before the JVM starts it sets ``PYSPARK_PYTHON`` to this interpreter (else the workers may run
another Python, without kafkatool or pyarrow) and ``SPARK_LOCAL_IP=127.0.0.1`` when unset (a
local start fails where the host name does not resolve); on a local master it also sizes the
driver heap (:func:`driver_memory`) unless the user did. The driver logs Spark's warnings one
line each, without the start-up banner or a failed job's stack traces, unless the user has log4j
settings of their own. An already active session (a notebook's, the tests') is reused when no
master or remote URL is asked for.

The jobs: :func:`write_records` (``export``), :func:`collect_findings` (``verify``),
:func:`collect_stats` (``stats``), each over :func:`read`, and :func:`job_errors`, the
exceptions a failed job raises.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Iterable

from kafkatool.errors import KafkaToolError, MissingDependencyError

__all__ = ["SparkStartError", "Session", "start_session", "check_java", "check_extra", "check_connect", "DEFAULT_MASTER",
           "MIN_JAVA", "job_errors", "read", "for_format", "writer_options", "write_records", "collect_findings",
           "collect_stats", "ROW_ORDER", "TIMESTAMP_FORMAT", "driver_memory"]

DEFAULT_MASTER = "local[*]"
MIN_JAVA = 17
"""Spark 4 runs on Java 17 or 21."""
INSTALL_HINT = "pip install 'kafkatool[spark]'"


class SparkStartError(KafkaToolError):
    """Spark cannot start here: the extra, Java or Spark Connect's client is missing, or the JVM did not come up."""

    kind = "spark_start"


@dataclass
class Session:
    """A started SparkSession and whether :func:`start_session` created it (then the caller stops it)."""

    spark: Any
    owned: bool

    def stop(self) -> None:
        if self.owned:
            try:
                self.spark.stop()
            except Exception:  # a JVM already gone: nothing left to stop
                pass


def check_extra() -> None:
    """The ``spark`` extra (pyspark, pyarrow, pandas) is importable, else :class:`MissingDependencyError`."""
    for module in ("pyspark", "pyarrow", "pandas"):
        try:
            __import__(module)
        except ImportError:
            raise MissingDependencyError(
                f"kafkatool spark needs the {module!r} module: install the spark extra with `{INSTALL_HINT}`"
            ) from None


def _java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def check_java() -> str:
    """The ``java`` Spark will run (``$JAVA_HOME/bin/java``, else ``java`` on PATH), checked to be
    Java 17 or later; else :class:`SparkStartError`. Returns its path."""
    java = _java_binary()
    if java is None:
        where = (f"JAVA_HOME={os.environ['JAVA_HOME']} has no bin/java and no `java` is on PATH"
                 if os.environ.get("JAVA_HOME") else "no `java` on PATH and JAVA_HOME is not set")
        raise SparkStartError(
            f"Spark needs a Java runtime ({MIN_JAVA} or later): {where}; install one (e.g. `apt-get install "
            f"openjdk-{MIN_JAVA}-jre-headless`) or set JAVA_HOME, or run on a cluster with --remote sc://HOST"
        )
    try:
        done = subprocess.run([java, "-version"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise SparkStartError(f"Spark needs a Java runtime: {java} -version failed: {e}") from None
    text = done.stdout.decode("utf-8", "replace")
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if done.returncode != 0 or m is None:
        first = text.strip().splitlines()[0] if text.strip() else f"exit status {done.returncode}"
        raise SparkStartError(f"Spark needs a Java runtime: {java} -version failed: {first}")
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_392": Java 8
        major = int(m.group(2))
    if major < MIN_JAVA:
        raise SparkStartError(
            f"Spark 4 needs Java {MIN_JAVA} or later, and {java} is Java {major}: install a newer one and point "
            "JAVA_HOME at it"
        )
    return java


def check_connect() -> None:
    """Spark Connect's client libraries (grpcio, grpcio-status, googleapis-common-protos, zstandard)
    are importable, else :class:`MissingDependencyError` naming the missing one."""
    try:
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies()
    except ImportError as e:  # PySparkImportError is an ImportError
        package = getattr(e, "getMessageParameters", lambda: None)() or {}
        name = package.get("package_name") or getattr(e, "name", None) or str(e)
        raise MissingDependencyError(
            f"--remote (Spark Connect) needs its client libraries, and {name} is not installed: "
            "pip install 'kafkatool[spark]' (it brings pyspark[connect]: grpcio, grpcio-status, googleapis-common-protos)"
        ) from None


def _one_line(e: BaseException) -> str:
    """A Py4J/PySpark error as one line: its error class or first line, no Java stack trace."""
    text = str(e).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = lines[0] if lines else type(e).__name__
    return first[:500]


#: The driver's log4j2 settings: Spark's warnings on standard error (``quiet`` sets the level to
#: ERROR once started: a root level other than WARN at start would make the shell's start-up
#: print "Setting default log level"), one line each, without stack traces, without the banner
#: of Spark's default profile and the warning every machine without Hadoop's native library gets.
_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n
appender.console.layout.alwaysWriteExceptions = false
logger.nativecode.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativecode.level = error
{silenced}"""

#: Loggers that print a failed job's Java and Python stack traces (the job's error comes out as
#: one line from kafkatool instead): the task that failed, its retries, the aborted write.
SILENCED_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.sql.execution.datasources.FileFormatWriter",
    "org.apache.spark.sql.execution.datasources.FileFormatDataWriter",
    "org.apache.spark.sql.execution.datasources.v2.python",
)


#: Log4j2 reads its configuration file from this environment variable when no system property
#: names one: the driver JVM inherits it, and a ``-Dlog4j.configurationFile`` in the user's
#: ``spark.driver.extraJavaOptions`` (or spark-defaults.conf) still wins.
_LOG4J_ENV = "LOG4J_CONFIGURATION_FILE"


def _own_log_config_allowed(pairs: list[tuple[str, str]]) -> bool:
    """kafkatool's driver log settings, unless the user has their own: the environment variable,
    a log4j option in --conf, or a log4j2.properties in SPARK_CONF_DIR."""
    if os.environ.get(_LOG4J_ENV):
        return False
    if any("log4j" in value for key, value in pairs if key.endswith("JavaOptions")):
        return False
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    return not (conf_dir and os.path.isfile(os.path.join(conf_dir, "log4j2.properties")))


def _log_config() -> str:
    """A log4j2 properties file for the driver JVM (removed once the JVM has read it)."""
    import tempfile

    fd, path = tempfile.mkstemp(prefix="kafkatool-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        silenced = "".join(f"logger.silenced{i}.name = {name}\nlogger.silenced{i}.level = off\n"
                           for i, name in enumerate(SILENCED_LOGGERS))
        f.write(_LOG4J2.format(silenced=silenced))
    return path


def driver_memory() -> str:
    """The driver heap for a local master (where the driver JVM runs the tasks too): a quarter of
    this machine's memory, between 1g (Spark's default) and 4g. With Spark's 1g the sort that
    orders an export's rows spills to disk (bench/README-spark.md); the Python workers, outside
    the heap, keep the rest."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not a POSIX system that says
        return "1g"
    return f"{max(1, min(4, total // 4 // (1 << 30)))}g"


def _driver_memory_given(pairs: list[tuple[str, str]]) -> bool:
    """Whether the user set the driver's memory: --conf, PYSPARK_SUBMIT_ARGS or spark-defaults.conf."""
    if any(k == "spark.driver.memory" for k, _v in pairs):
        return True
    if "--driver-memory" in os.environ.get("PYSPARK_SUBMIT_ARGS", "") or "spark.driver.memory" in os.environ.get(
            "PYSPARK_SUBMIT_ARGS", ""):
        return True
    for conf_dir in (os.environ.get("SPARK_CONF_DIR"), os.path.join(os.environ.get("SPARK_HOME", ""), "conf")):
        if conf_dir:
            try:
                with open(os.path.join(conf_dir, "spark-defaults.conf"), encoding="utf-8") as f:
                    if any(line.split()[:1] == ["spark.driver.memory"] for line in f):
                        return True
            except OSError:
                pass
    return False


def _share_import_path() -> None:
    """On a local master the workers are this machine's Pythons, which import the data source by
    module name: when kafkatool is imported from a directory that is not an installation's
    site-packages (a source tree on ``sys.path``), give them that directory too (``PYTHONPATH``,
    which Spark passes on to its workers after its own)."""
    import kafkatool

    root = os.path.dirname(os.path.dirname(os.path.abspath(kafkatool.__file__)))
    if os.path.basename(root) in ("site-packages", "dist-packages"):
        return
    current = os.environ.get("PYTHONPATH", "")
    if root not in current.split(os.pathsep):
        os.environ["PYTHONPATH"] = root + (os.pathsep + current if current else "")


def _parse_conf(conf: Iterable[tuple[str, str] | str]) -> list[tuple[str, str]]:
    out = []
    for item in conf:
        if isinstance(item, str):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise SparkStartError(f"--conf {item!r}: expected KEY=VALUE, e.g. spark.executor.memory=4g")
            item = (key.strip(), value)
        out.append(item)
    return out


def start_session(master: str | None = None, remote: str | None = None, app_name: str = "kafkatool",
                  conf: Iterable[tuple[str, str] | str] = (), *, quiet: bool = False) -> Session:
    """A SparkSession with the ``kafka_segments`` source registered.

    ``master``: a Spark master URL (default ``local[*]``); ``remote``: a Spark Connect URL
    (``sc://host:15002``), instead of a master. ``conf``: extra ``(key, value)`` pairs (or
    ``"key=value"`` strings). When neither ``master`` nor ``remote`` is given and a session is
    already active in this process (a notebook's, the tests'), it is reused as it is (not
    stopped by :meth:`Session.stop`). Spark's console progress bar is on when standard error is a
    terminal, unless ``quiet``; the log level is WARN (ERROR when ``quiet``), and a failed job's
    stack traces are not logged (:data:`SILENCED_LOGGERS`) unless the user has log settings of
    their own.

    Raises :class:`SparkStartError` or :class:`MissingDependencyError` (one line each) when the
    extra, Java or the Connect client is missing, or the JVM does not start.
    """
    if master and remote:
        raise SparkStartError("--master and --remote exclude each other: --remote sc://... is a Spark Connect server")
    pairs = _parse_conf(conf)
    check_extra()
    from kafkatool.spark import register

    if master is None and remote is None:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            for key, value in pairs:
                active.conf.set(key, value)
            register(active)
            return Session(active, owned=False)
    if remote is not None:
        if not remote.startswith("sc://"):
            raise SparkStartError(f"--remote {remote!r}: a Spark Connect URL starts with sc:// (e.g. sc://spark-host:15002)")
        check_connect()
    else:
        check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    local = remote is None and (master is None or master.startswith("local"))
    if local:
        _share_import_path()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    builder = builder.remote(remote) if remote is not None else builder.master(master or DEFAULT_MASTER)
    log_config = None
    if remote is None:
        # Spark's bar, as spark-shell shows it: on a terminal only (a log file gets no \r-redrawn lines)
        progress = not quiet and sys.stderr.isatty()
        builder = builder.config("spark.ui.showConsoleProgress", "true" if progress else "false")
        if _own_log_config_allowed(pairs):
            log_config = _log_config()
            os.environ[_LOG4J_ENV] = log_config  # the driver JVM's; a -D property given by the user wins
    if local and not _driver_memory_given(pairs):
        builder = builder.config("spark.driver.memory", driver_memory())
    for key, value in pairs:
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except KafkaToolError:
        raise
    except Exception as e:  # Py4JError, PySparkRuntimeError (JAVA_GATEWAY_EXITED), a Connect channel error
        where = f"Spark Connect at {remote}" if remote is not None else f"Spark (master {master or DEFAULT_MASTER})"
        raise SparkStartError(f"{where} did not start: {_one_line(e)}") from None
    finally:
        if log_config is not None:
            os.environ.pop(_LOG4J_ENV, None)
            try:
                os.unlink(log_config)
            except OSError:
                pass
    try:
        if remote is None and (quiet or log_config is None):
            spark.sparkContext.setLogLevel("ERROR" if quiet else "WARN")
        register(spark)
    except KafkaToolError:
        spark.stop()
        raise
    except Exception as e:  # with Spark Connect the first call is the first contact with the server
        spark.stop()
        where = f"Spark Connect at {remote}: " if remote is not None else ""
        raise SparkStartError(f"{where}cannot register the kafka_segments source: {_one_line(e)}") from None
    return Session(spark, owned=True)


# --------------------------------------------------------------------------- the jobs of `kafkatool spark`

#: Timestamps in JSON and CSV: ISO 8601 UTC with milliseconds (Kafka's precision).
TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"
#: The order rows are written in within each topic=/partition= directory: the order on disk.
ROW_ORDER = ("topic", "partition", "segmentBaseOffset", "batchPosition", "offset")
_PARQUET_TIMESTAMPS = "spark.sql.parquet.outputTimestampType"


def job_errors() -> tuple[type, ...]:
    """The exception classes a Spark action raises for a failed job (PySpark's, Spark Connect's, Py4J's)."""
    from pyspark.errors import PySparkException

    classes: list[type] = [PySparkException]
    try:
        from py4j.protocol import Py4JError

        classes.append(Py4JError)
    except ImportError:  # pragma: no cover - a Connect-only client
        pass
    return tuple(classes)


def read(spark: Any, kind: str, paths: Iterable[str], options: dict[str, str] | None = None) -> Any:
    """``spark.read.format("kafka_segments")`` of ``kind`` over ``paths`` (a list: the ``paths``
    option), with the session's default parallelism (option ``parallelism``: tasks sized as Spark
    sizes file splits, so a small read still uses every core) when the session knows it."""
    reader = spark.read.format("kafka_segments").option("kind", kind)
    parallelism = _default_parallelism(spark)
    if parallelism is not None:
        reader = reader.option("parallelism", str(parallelism))
    return reader.options(**(options or {})).load(list(paths))


def _default_parallelism(spark: Any) -> int | None:
    """``sc.defaultParallelism`` of a classic session; None over Spark Connect (no SparkContext)."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # Connect: sparkContext is not supported
        return None


def for_format(df: Any, fmt: str) -> Any:
    """The columns of a records DataFrame as ``fmt`` can hold them. CSV has no binary, array or
    struct: ``key``, ``value`` become base64 text and ``headers`` a JSON array of ``{"key": ...,
    "value": base64}`` (null stays null); Parquet and JSON take the columns as they are (Spark's
    JSON writer writes binary as base64 itself)."""
    if fmt != "csv":
        return df
    from pyspark.sql import functions as F

    headers = F.to_json(F.transform("headers", lambda h: F.struct(h["key"].alias("key"),
                                                                   F.base64(h["value"]).alias("value"))))
    return df.withColumns({
        "key": F.base64("key"),
        "value": F.base64("value"),
        "headers": F.when(F.col("headers").isNull(), F.lit(None)).otherwise(headers),
    })


def writer_options(fmt: str) -> dict[str, str]:
    """Parquet: no dictionary encoding of ``key`` and ``value`` (parquet-mr builds a dictionary per
    column chunk, then gives up on such high-cardinality columns: 40% of an export's JVM time,
    measured by bench/bench_spark.py; the other columns keep theirs). JSON: every column written
    (null as null); JSON and CSV: ISO 8601 UTC timestamps; CSV: a header line and RFC 4180 quoting
    (a quote doubled, not Spark's default backslash)."""
    if fmt == "parquet":
        return {"parquet.enable.dictionary#key": "false", "parquet.enable.dictionary#value": "false"}
    options = {"timestampFormat": TIMESTAMP_FORMAT, "timeZone": "UTC"}
    if fmt == "json":
        options["ignoreNullFields"] = "false"
    else:
        options.update({"header": "true", "escape": '"', "quote": '"'})
    return options


def write_records(spark: Any, paths: Iterable[str], options: dict[str, str], out: str, fmt: str,
                  mode: str) -> dict[str, int]:
    """Write the records of ``paths`` (data source ``options``) to ``out`` as ``fmt`` (parquet,
    json, csv), partitioned by topic and partition (hive layout), each file's rows in log order,
    with Spark's save ``mode``. Returns ``{"rows", "errors", "control"}``: rows written, error
    rows among them, control records among them (counted while writing: one pass)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    conf = spark.conf
    # Parquet's standard timestamp (microseconds, UTC-adjusted), not Spark's legacy INT96 default
    before = conf.get(_PARQUET_TIMESTAMPS, None) if fmt == "parquet" else None
    if fmt == "parquet":
        conf.set(_PARQUET_TIMESTAMPS, "TIMESTAMP_MICROS")
    try:
        df = read(spark, "records", paths, options)
        observation = Observation("kafkatool_export")
        df = df.observe(observation, F.count(F.lit(1)).alias("rows"), F.count("error").alias("errors"),
                        F.count_if(F.col("isControl")).alias("control"))
        df = for_format(df, fmt).sortWithinPartitions(*ROW_ORDER)
        df.write.format(fmt).mode(mode).partitionBy("topic", "partition").options(**writer_options(fmt)).save(out)
        metrics = observation.get
    finally:
        if fmt == "parquet":
            if before is None:
                conf.unset(_PARQUET_TIMESTAMPS)
            else:
                conf.set(_PARQUET_TIMESTAMPS, before)
    return {k: int(metrics.get(k) or 0) for k in ("rows", "errors", "control")}


def collect_findings(spark: Any, paths: Iterable[str], deep: bool) -> list[Any]:
    """The ``findings`` rows of ``paths``, in ``kafkatool verify``'s order (task, then seq): one
    row per file and per finding, small enough to collect; sorting here costs no Spark job."""
    rows = read(spark, "findings", paths, {"deep": "true" if deep else "false"}).collect()
    return sorted(rows, key=lambda r: (r["task"], r["seq"]))


def collect_stats(spark: Any, paths: Iterable[str], deep: bool) -> dict[str, bytes]:
    """Each segment's pickled :func:`~kafkatool.stats.segment_stats` (the ``stats`` kind), by ``.log`` path."""
    df = read(spark, "stats", paths, {"deep": "true" if deep else "false"}).select("segment", "stats")
    return {r["segment"]: bytes(r["stats"]) for r in df.collect()}
