"""``kafkatool spark``: the log dirs read by Spark (the ``kafka_segments`` data source), on
``local[*]`` or a cluster: ``export`` (records to Parquet, JSON or CSV), ``verify`` and ``stats``
(printed exactly as ``kafkatool verify`` and ``kafkatool stats`` print them).

Only :mod:`kafkatool.spark` imports pyspark (the jobs are in :mod:`kafkatool.spark.session`),
and only once a command runs: ``kafkatool spark --help`` works without the extra.
"""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Any, Callable, Iterable, Iterator

import click

from kafkatool.cli.main import ExitCode

#: Export formats (kafkatool.spark.session.write_records).
FORMATS = ("parquet", "json", "csv")
#: What an export directory may hold besides topic=... directories (Spark's markers and checksums).
_EXPORT_FILES = ("_SUCCESS", "._SUCCESS.crc")


class _Fail(Exception):
    """One ``kafkatool: error:`` line and an exit status."""

    def __init__(self, message: str, code: int = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.code = code


def _session_options(f: Callable) -> Callable:
    options = [
        click.option("--master", metavar="URL",
                     help="Spark master URL (local[4], spark://host:7077, yarn, k8s://...). Default: local[*], "
                          "or the session already active in this process."),
        click.option("--remote", metavar="URL",
                     help="A Spark Connect server (sc://host:15002) instead of a master; kafkatool must be "
                          "installed on its nodes, and the paths visible to them."),
        click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE",
                     help="A Spark setting for the session (spark.executor.memory=4g, ...)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@click.group(context_settings={"max_content_width": 100},
             short_help="Read log dirs with Spark: export records, verify, stats, on local[*] or a cluster.")
def spark() -> None:
    """Read Kafka log dirs with Apache Spark, through the `kafka_segments` PySpark data
    source: on `local[*]` (nothing to install but the `spark` extra and a Java runtime), on a
    cluster (`--master`), or on a Spark Connect server (`--remote`).

    `export` writes the records as Parquet, JSON or CSV, partitioned by topic and partition;
    `verify` and `stats` print what `kafkatool verify` and `kafkatool stats` print for the same
    paths, with the reading spread over the cluster. Read-only on the log dirs.
    """


# --------------------------------------------------------------------------- shared


def _local_paths(paths: tuple[str, ...], remote: str | None, *, must_be_here: bool = False) -> list[str] | None:
    """The paths as the data source expands them (``a,b`` and globs; kafkatool.spark.plan.expand_paths),
    when this machine sees them. A plain path that does not exist is a usage error, as for every
    command's PATHS; with --remote the paths need only exist on the cluster (None: not here)."""
    from kafkatool.spark.plan import expand_paths

    for p in paths:
        plain = "," not in p and not any(c in p for c in "*?[")
        if plain and not os.path.lexists(p) and (remote is None or must_be_here):
            raise click.BadParameter(f"Path {p!r} does not exist.", param_hint="'PATHS...'")
    try:
        return expand_paths(list(paths))
    except ValueError as e:
        if remote is not None and not must_be_here:
            return None
        raise _Fail(str(e)) from None


def _server_paths(paths: tuple[str, ...], remote: str | None) -> tuple[str, ...]:
    """With --remote, each relative path (of a comma-separated list too) made absolute from this
    directory: the Connect server resolves relative paths from its own working directory, which is
    never what was meant. URLs (``hdfs://...``, ``file:...``) are left as they are."""
    if remote is None:
        return paths

    def absolute(p: str) -> str:
        return p if not p or "://" in p or p.startswith("file:") else os.path.abspath(p)

    return tuple(",".join(absolute(part) for part in p.split(",")) for p in paths)


def _start(master: str | None, remote: str | None, conf: tuple[str, ...], quiet: bool):
    from kafkatool.errors import KafkaToolError
    from kafkatool.spark.session import start_session

    try:
        return start_session(master=master, remote=remote, conf=conf, quiet=quiet)
    except KafkaToolError as e:
        raise _Fail(str(e)) from None


#: Error classes a Spark failure is a usage or input error for (exit 2), not a kafkatool bug (exit 3).
_INPUT_ERRORS = ("ValueError", "OSError", "FileNotFoundError", "PermissionError", "IsADirectoryError",
                 "NotADirectoryError", "KafkaToolError", "MissingDependencyError", "AnalysisException")


_ERROR_LINE = re.compile(r"^(?:: |Caused by: )?(?:[\w$]+\.)*(\w+(?:Error|Exception)): (.+)$")


def _spark_failure(e: BaseException) -> _Fail:
    """A failed Spark job as one line, no stack trace: the Python error the data source raised
    (the last ``Name: message`` line of the last Python traceback in Spark's message), else the
    first Java exception line (the top one, e.g. ``IOException: Cannot run program ...``), else
    the first line of the message."""
    from kafkatool import errors

    text = str(e)
    lines = text.splitlines()
    error_line = None
    python = "Traceback (most recent call last)" in text
    if python:
        after = text.rsplit("Traceback (most recent call last)", 1)[1].splitlines()
        for line in after:
            if line.startswith("\tat "):
                break  # the Java frames after the Python traceback
            m = _ERROR_LINE.match(line)
            if m:
                error_line = (m.group(1), m.group(2).strip())
    if error_line is None:
        for line in lines:
            m = _ERROR_LINE.match(line.strip() if not line.startswith(": ") else line)
            if m and not m.group(1).startswith(("Py4J", "PySpark")):
                error_line = (m.group(1), m.group(2).strip())
                break
    ours = {name for name in dir(errors) if name.endswith("Error")}
    if error_line is not None:
        name, message = error_line
        # a Python error of ours that is no input error is a bug (3); a JVM failure (memory, a lost
        # executor, a Python that cannot be run) is the cluster's, reported as an error before the work (2)
        code = ExitCode.INTERNAL if python and name not in _INPUT_ERRORS and name not in ours else ExitCode.USAGE
        return _Fail(f"the Spark job failed: {name}: {message[:1000]}", code)
    first = next((ln.strip() for ln in lines if ln.strip()), type(e).__name__)
    return _Fail(f"the Spark job failed: {first[:1000]}", ExitCode.USAGE)


def _run(body: Callable[[], int]) -> None:
    """Run a command body: exit with what it returns; a refusal or a failed Spark job in one line."""
    try:
        code = body()
    except _Fail as e:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        sys.stderr.write(f"kafkatool: error: {e}\n")
        sys.exit(e.code)
    sys.exit(code)


def _spark_errors() -> tuple[type, ...]:
    from kafkatool.spark.session import job_errors

    return job_errors()


# --------------------------------------------------------------------------- export


def _refuse_unsafe_output(out: str, paths: tuple[str, ...], mode: str, remote: str | None = None) -> str:
    """The save mode to give Spark for ``out``, after the data-safety checks (a local ``out``):
    it must not exist, or be an empty directory, unless --mode append/overwrite; never inside an
    input path; with overwrite, no input path may be inside it and it must hold nothing but a
    previous export. With ``remote`` the paths are the cluster's: only their names are compared."""
    if remote is not None:
        _refuse_by_name(out, paths, mode)
    if remote is not None or ("://" in out and not out.startswith("file:")):
        return mode  # hdfs://, s3a://, a Connect server's: Spark's own checks ("error": Connect knows no "errorifexists")
    local = out[len("file:"):] if out.startswith("file:") else out
    inputs = []
    for one in paths:  # as expanded (commas, globs): every existing input
        if os.path.exists(one):
            source = os.path.realpath(one)
            inputs.append((one, source, source if os.path.isdir(source) else os.path.dirname(source)))
    _refuse_nesting(out, os.path.realpath(local), inputs, mode)
    if not os.path.lexists(local):
        return "errorifexists"
    if not os.path.isdir(local):
        raise _Fail(f"--to {out}: exists and is not a directory")
    try:
        entries = sorted(os.listdir(local))
    except OSError as e:
        raise _Fail(f"--to {out}: {e.strerror or e}") from None
    if not entries:
        return "append" if mode in ("error", "append") else "overwrite"
    if mode == "error":
        raise _Fail(f"--to {out}: exists and is not empty ({len(entries)} entries); give --mode append to add to "
                    "it or --mode overwrite to replace it, or another directory")
    if mode == "overwrite":
        foreign = [e for e in entries if not (e.startswith("topic=") or e in _EXPORT_FILES or e.startswith(("_", ".")))]
        if foreign:
            raise _Fail(f"--to {out} --mode overwrite: it holds {foreign[0]!r}, which is not part of a kafkatool "
                        "export (topic=... directories, _SUCCESS): refusing to delete it")
    return mode


def _refuse_by_name(out: str, paths: tuple[str, ...], mode: str) -> None:
    """The input/output nesting checks on the names alone (paths this machine does not see)."""
    inputs = [(one, os.path.normpath(one), os.path.normpath(one)) for p in paths for one in p.split(",")]
    _refuse_nesting(out, os.path.normpath(out), inputs, mode)


def _refuse_nesting(out: str, target: str, inputs: list[tuple[str, str, str]], mode: str) -> None:
    """Refuse an output ``target`` inside an input's directory, and with overwrite an input inside
    ``target``; ``inputs`` are ``(as given, path, its directory)``, resolved alike with ``target``."""
    def inside(path: str, parent: str) -> bool:
        return path == parent or path.startswith(parent.rstrip(os.sep) + os.sep)

    for one, source, source_dir in inputs:
        if inside(target, source_dir):
            raise _Fail(f"--to {out}: the output is inside the input {one}: refusing to write into a log dir")
        if mode == "overwrite" and inside(source, target):
            raise _Fail(f"--to {out} --mode overwrite: the input {one} is inside the output, which overwrite "
                        "would delete")


@spark.command(context_settings={"max_content_width": 100},
               short_help="Write the records of log dirs as Parquet, JSON or CSV, partitioned by topic and partition.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--to", "out", required=True, metavar="OUT",
              help="The output directory (a path every executor can write, or a URL: hdfs://..., s3a://...).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="parquet", show_default=True,
              help="parquet: the columns as they are; json: one object per line, binary as base64; "
                   "csv: key, value base64 and headers JSON text (see CSV).")
@click.option("--mode", type=click.Choice(["error", "append", "overwrite"]), default="error", show_default=True,
              help="error: OUT must not exist or be empty; append: add files to OUT; overwrite: replace OUT "
                   "(only a previous export: anything else in it is refused).")
@click.option("--topics", metavar="T1,T2", help="Only these topics.")
@click.option("--partitions", metavar="P1,P2", help="Only these partition numbers.")
@click.option("--start-offset", type=click.IntRange(0), metavar="N", help="Records from this offset (inclusive).")
@click.option("--end-offset", type=click.IntRange(0), metavar="N", help="Records before this offset (exclusive).")
@click.option("--start-time", metavar="TIME",
              help="Records with a timestamp at or after TIME: epoch milliseconds or ISO 8601 (2024-05-01T12:00:00Z).")
@click.option("--end-time", metavar="TIME", help="Records with a timestamp before TIME (exclusive).")
@click.option("--no-headers", is_flag=True, help="Leave the record headers out (the headers column is null).")
@click.option("--max-partition-bytes", metavar="BYTES",
              help="Segment bytes per Spark task (134217728, 128m, 1g); larger segments are split at batch "
                   "boundaries. Default: 128m.")
@_session_options
@click.option("--quiet", "-q", is_flag=True, help="No progress bar, no Spark warnings and no summary on stderr.")
def export(paths, out, fmt, mode, topics, partitions, start_offset, end_offset, start_time, end_time, no_headers,
           max_partition_bytes, master, remote, conf, quiet) -> None:
    """Write the records of log dirs, partition dirs or segment files as a table: Parquet
    (default), JSON Lines or CSV files under OUT, in Hive layout
    (`OUT/topic=<t>/partition=<p>/part-...`), with the columns of `kafka_segments`' `records`
    kind: Spark's Kafka source columns first, then where each record lies. Control records
    (transaction markers) are included, with `isControl` true. Within each file the rows are in
    the order of the log.

    A damaged region does not stop the export: it becomes one row whose `error` says what and
    where, and the reading resumes after it, as `kafkatool verify` does. Exit status: 0 every
    record exported; 1 exported, with error rows (the `error` column is set on them); 2 bad
    usage, a refusal (OUT not empty, OUT inside a log dir), or Spark or Java missing.
    """
    paths = _server_paths(paths, remote)
    if remote is not None and "://" not in out and not out.startswith("file:"):
        out = os.path.abspath(out)
    def body() -> int:
        local = _local_paths(paths, remote)
        if local is not None:  # on this machine: what the data source would refuse, before Spark starts
            _refuse_nothing_to_read(local)
        options = {"includeHeaders": "false" if no_headers else "true"}
        for name, value in (("topics", topics), ("partitions", partitions), ("startOffset", start_offset),
                            ("endOffset", end_offset), ("startTime", start_time), ("endTime", end_time),
                            ("maxPartitionBytes", max_partition_bytes)):
            if value is not None:
                options[name] = str(value)
        _validate(options)
        save_mode = _refuse_unsafe_output(out, tuple(local) if local is not None else paths, mode, remote)
        session = _start(master, remote, conf, quiet)
        try:
            return _export(session, paths, out, fmt, save_mode, options, quiet)
        finally:
            session.stop()

    _run(body)


def _refuse_nothing_to_read(paths: list[str]) -> None:
    """A named file that is no segment, or a path with nothing Kafka in it: a usage error (listings only)."""
    from kafkatool.stats import find_targets

    _found, run = find_targets(paths)
    problems = [f"{p}: not a segment file (export reads .log files, partition dirs and log dirs)" for p in run.not_segments]
    problems += [f"{p}: nothing Kafka found here (no partition directory or segment)" for p in run.nothing]
    if problems:
        raise _Fail("\nkafkatool: error: ".join(problems))


def _validate(options: dict[str, str]) -> None:
    """The data source's own parsing of the options, before Spark starts (a bad value is a usage error)."""
    try:
        from kafkatool.spark.plan import ReadOptions
    except ImportError:  # pragma: no cover - the source checks them again when Spark plans the read
        return
    try:
        ReadOptions.from_options(options)
    except ValueError as e:
        raise _Fail(str(e)) from None


def _export(session, paths, out, fmt, save_mode, options, quiet) -> int:
    from kafkatool.spark.session import write_records

    started = time.monotonic()
    try:
        metrics = write_records(session.spark, paths, options, out, fmt, save_mode)
    except _spark_errors() as e:
        raise _spark_failure(e) from None
    rows, errors, control = (int(metrics.get(k) or 0) for k in ("rows", "errors", "control"))
    seconds = time.monotonic() - started
    if not quiet:
        sys.stderr.write(
            f"Exported {_plural(rows, 'row')} ({_plural(rows - errors, 'record')}, {control} of them control records; "
            f"{_plural(errors, 'error row')}) to {out} ({fmt}) in {seconds:.2f} s"
            + (": damaged regions, see the rows where error is not null\n" if errors else "\n"))
    return ExitCode.FINDINGS if errors else ExitCode.OK


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# --------------------------------------------------------------------------- verify


@spark.command(context_settings={"max_content_width": 100},
               short_help="kafkatool verify with Spark: every damaged region, the same output and exit status.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--deep", is_flag=True,
              help="Decompress and decode every record (counts, varints, offsets, timestamps, headers, inner CRCs, "
                   "control records).")
@click.option("--format", "fmt", type=click.Choice(["text", "table", "jsonl"]), default=None,
              help="text: one 'path:position: kind: message' line per finding; table: a findings table; jsonl: one "
                   "JSON object per finding and a final summary. Default: table when standard output is a "
                   "terminal, text otherwise.")
@click.option("--fail-on", callback=lambda c, p, v: _kinds(c, p, v), metavar="KIND,...",
              help="Only these finding kinds make the exit status 1 (default: every kind but index_missing, "
                   "preallocated_index_tail and timeindex_record_offset).")
@click.option("--ignore", callback=lambda c, p, v: _kinds(c, p, v), metavar="KIND,...",
              help="Finding kinds to leave out of the report and the exit status (e.g. trailing_zeros).")
@_session_options
@click.option("--quiet", "-q", is_flag=True, help="No summary, no progress bar and no Spark warnings on stderr.")
def verify(paths, deep, fmt, fail_on, ignore, master, remote, conf, quiet) -> None:
    """Find every damaged region in segment files, side files, partition directories or whole
    log dirs, as `kafkatool verify` does, with the partitions checked by Spark tasks (each
    partition directory whole, in one task, so offsets are compared across its segments).
    The findings, their order, the text, table and JSON Lines output and the exit status are
    those of `kafkatool verify` on the same paths.

    Read-only. Exit status: 0 no failing findings; 1 failing findings; 2 bad usage, a path with
    nothing Kafka in it, or Spark or Java missing.
    """
    paths = _server_paths(paths, remote)
    def body() -> int:
        from kafkatool.cli.verify import NOTHING_KAFKA, report
        from kafkatool.verify import INFO_KINDS, KINDS, expand_targets

        local = _local_paths(paths, remote)
        form = fmt or ("table" if sys.stdout.isatty() else "text")
        fail_kinds = fail_on if fail_on is not None else frozenset(KINDS) - INFO_KINDS
        if local is not None:  # on this machine: the same usage errors as verify
            nothing: list[str] = []
            expand_targets(local, nothing)
            if nothing:
                raise _Fail("\nkafkatool: error: ".join(f"{p}: {NOTHING_KAFKA}" for p in nothing))
        session = _start(master, remote, conf, quiet)
        try:
            started = time.monotonic()
            try:
                rows = _findings_rows(session, paths, deep)
                return report(_findings(rows), form, fail_kinds, ignore or frozenset(), quiet, started)
            except _spark_errors() as e:
                raise _spark_failure(e) from None
        finally:
            session.stop()

    _run(body)


def _kinds(ctx, param, value):
    from kafkatool.cli.verify import parse_kinds  # the same parsing and message as verify's

    return parse_kinds(ctx, param, value)


def _findings_rows(session, paths, deep: bool) -> Iterator[Any]:
    from kafkatool.spark.session import collect_findings

    return iter(collect_findings(session.spark, paths, deep))


def _findings(rows: Iterable[Any]) -> Iterator[Any]:
    """:class:`~kafkatool.verify.Finding` and :class:`~kafkatool.verify.FileSummary` items from
    ``findings`` rows, in their order."""
    from kafkatool.spark.tasks import finding_of_row

    return (finding_of_row(r) for r in rows)


# --------------------------------------------------------------------------- stats


@spark.command(context_settings={"max_content_width": 100},
               short_help="kafkatool stats with Spark: per partition offsets, counts, time range, codecs, producers.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--format", "fmt", type=click.Choice(["text", "table", "jsonl"]), default="text", show_default=True,
              help="text: a block of 'name: value' lines per partition; table: one row per partition; "
                   "jsonl: one JSON object per partition and a final summary.")
@click.option("--deep", is_flag=True,
              help="Also decompress legacy (magic 0/1) compressed wrappers to count their records.")
@click.option("--producers", "max_producers", type=click.IntRange(0, 100_000), default=10, show_default=True,
              metavar="N", help="Producer ids listed per partition, in order of first appearance (all are counted).")
@_session_options
@click.option("--quiet", "-q", is_flag=True, help="No summary, no progress bar and no Spark warnings on stderr.")
def stats(paths, fmt, deep, max_producers, master, remote, conf, quiet) -> None:
    """Per partition, what `kafkatool stats` prints: first, last and log end offset, batch and
    record counts, bytes, the time range, magics, codecs and timestamp types, transactional and
    control batches, the producers, and the log end against the log dir's checkpoints. Each
    segment is read by a Spark task; the driver combines them per partition and compares with
    the checkpoints, so the paths must be visible here too (also with --remote).

    Read-only. Exit status: 0 every partition read cleanly; 1 a partition with problems; 2 bad
    usage, a path with nothing Kafka in it, or Spark or Java missing.
    """
    paths = _server_paths(paths, remote)
    def body() -> int:
        from kafkatool.cli.stats import refuse_unusable, report
        from kafkatool.stats import StatsOptions, find_targets

        found, run = find_targets(_local_paths(paths, remote, must_be_here=True) or [])
        refuse_unusable(run)
        opts = StatsOptions(deep=deep, max_producers=max_producers)
        session = _start(master, remote, conf, quiet)
        try:
            started = time.monotonic()
            try:
                pieces = _stats_pieces(session, paths, deep)
            except _spark_errors() as e:
                raise _spark_failure(e) from None
            return report(combined_stats(found, pieces, opts), fmt, quiet, started)
        finally:
            session.stop()

    _run(body)


def _stats_pieces(session, paths, deep: bool) -> dict[str, Any]:
    """Each segment's :func:`~kafkatool.stats.segment_stats`, by ``.log`` path, read by Spark."""
    import pickle

    from kafkatool.spark.session import collect_stats

    return {segment: pickle.loads(data) for segment, data in collect_stats(session.spark, paths, deep).items()}


def combined_stats(found: Iterable[Any], pieces: dict[str, Any], opts: Any) -> Iterator[Any]:
    """The results of ``kafkatool stats`` for ``found`` (:func:`kafkatool.stats.find_targets`), in
    its order, from the per-segment ``pieces``: a partition's pieces combined with
    :func:`~kafkatool.stats.combine_stats` (and its checkpoints compared). A partition Spark did
    not read whole (a ``-delete``/``-future``/``-stray`` dir the data source leaves out, a
    listing with a FIFO named like a segment) is read here, as ``kafkatool stats`` reads it."""
    from kafkatool.errors import KafkaToolError
    from kafkatool.segment.logdir import FileKind, Partition, Segment
    from kafkatool.stats import CheckpointCache, PartitionStats, combine_stats, partition_stats, segment_stats

    checkpoints = CheckpointCache()
    for item in found:
        if isinstance(item, PartitionStats):
            yield item
        elif isinstance(item, Segment):
            piece = pieces.get(item.log_path)  # counted with every producer kept: listed as --producers says
            yield combine_stats([piece], None, opts=opts) if piece is not None else segment_stats(item, opts)
        elif isinstance(item, Partition):
            try:
                listing = item.listing()
                segments = item.segments()
            except KafkaToolError:
                listing, segments = None, []
            odd = listing is None or any(e.kind is FileKind.LOG and not e.is_file for e in listing)
            parts = [pieces.get(s.log_path) for s in segments]
            if odd or not parts or any(p is None for p in parts):
                yield partition_stats(item, opts, checkpoints=checkpoints)
            else:
                yield combine_stats(parts, item, opts=opts, checkpoints=checkpoints)
        else:  # pragma: no cover - find_targets yields nothing else
            raise TypeError(f"unexpected target {item!r}")
