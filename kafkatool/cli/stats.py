"""``kafkatool stats``: per partition, what the log holds and where its end stands against the
log dir's checkpoints. Parses the options, calls :func:`kafkatool.stats.iter_stats`, renders."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterable

import click

from kafkatool.cli.main import ExitCode

if TYPE_CHECKING:  # pragma: no cover
    from kafkatool.stats import PartitionStats, StatsRun


@click.command(context_settings={"max_content_width": 100},
               short_help="Offsets, counts, time range, codecs, producers and checkpoints of each partition.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=str))
@click.option("--format", "fmt", type=click.Choice(["text", "table", "jsonl"]), default="text", show_default=True,
              help="text: a block of 'name: value' lines per partition; table: one row per partition; "
                   "jsonl: one JSON object per partition and a final summary.")
@click.option("--deep", is_flag=True,
              help="Also decompress legacy (magic 0/1) compressed wrappers to count their records "
                   "(v2 batches carry their count in the header).")
@click.option("--producers", "max_producers", type=click.IntRange(0, 100_000), default=10, show_default=True, metavar="N",
              help="Producer ids listed per partition, in order of first appearance (all are counted).")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Read the segments in this many processes (the same output, in the same order).")
@click.option("--quiet", "-q", is_flag=True, help="No summary on stderr.")
def stats(paths, fmt, deep, max_producers, jobs, quiet) -> None:
    """Per partition: the first and last offset and the log end offset, batch and record
    counts, bytes, the time range, magics, codecs and timestamp types, transactional and
    control batches (COMMIT/ABORT markers), the producers (id, epoch, last sequence), and the
    log end compared with the log dir's recovery-point, replication and log-start offset
    checkpoints. PATHS are partition dirs, log dirs, directories of log dirs or single
    segment files.

    Shallow and fast: only batch headers are read (a control batch's first record too), in
    one pass at the speed of `verify`. Read-only. A corrupt region stops its segment, as the
    broker's walk does, and is reported with its file and byte position. Exit status: 0 every
    partition read cleanly; 1 a partition with problems (a corrupt region, a CRC mismatch, an
    unreadable file or checkpoint); 2 bad usage, or a path with nothing Kafka in it.
    """
    from kafkatool.stats import StatsOptions, find_targets, stats_of

    found, run = find_targets(paths)
    refuse_unusable(run)
    opts = StatsOptions(deep=deep, max_producers=max_producers)
    started = time.monotonic()
    sys.exit(report(stats_of(found, opts, jobs=jobs), fmt, quiet, started))


def refuse_unusable(run: "StatsRun") -> None:
    """Exit with status 2, one line per path, when a named path holds nothing to count or is a
    file other than a segment: before anything is read, as verify does."""
    if run.not_segments or run.nothing:
        for p in run.not_segments:
            sys.stderr.write(f"kafkatool: error: {p}: not a segment file (stats reads .log files, partition dirs "
                             "and log dirs)\n")
        for p in run.nothing:
            sys.stderr.write(f"kafkatool: error: {p}: nothing Kafka found here (no partition directory or segment)\n")
        sys.exit(ExitCode.USAGE)


def report(results: Iterable["PartitionStats"], fmt: str, quiet: bool, started: float) -> ExitCode:
    """Print stats results as ``kafkatool stats`` does and return its exit status: ``results`` in
    ``fmt`` (``text``, ``table`` or ``jsonl``) on standard output, each as it comes (a table once
    all are in, with a progress line at a terminal), then the summary line on standard error
    (unless ``quiet``). ``started`` is the run's ``time.monotonic()`` start. ``kafkatool spark
    stats`` prints through this too."""
    from kafkatool.cli.options import json_lines_stream, safe_text_stream
    from kafkatool.render import stats as render

    out = sys.stdout
    if fmt == "jsonl":
        json_lines_stream(out)
    else:
        safe_text_stream(out)
    done = []
    with _progress(fmt == "table" and not quiet and sys.stderr.isatty()) as advance:
        for s in results:
            done.append(s)
            advance(s)
            if fmt == "jsonl":
                out.write(render.dumps(render.partition_object(s)) + "\n")
            elif fmt == "text":
                out.write(("\n" if len(done) > 1 else "") + render.partition_text(s))
    seconds = time.monotonic() - started
    if fmt == "jsonl":
        out.write(render.dumps(render.summary_object(done, seconds)) + "\n")
    elif fmt == "table" and done:
        from rich.console import Console

        render.render_table(Console(highlight=False, markup=False, width=None if out.isatty() else 200), done)
    out.flush()
    if not quiet:
        sys.stderr.write(render.summary_line(done, seconds) + "\n")
    return ExitCode.FINDINGS if any(s.problems for s in done) else ExitCode.OK


@contextmanager
def _progress(shown: bool):
    """Partitions and bytes read so far, on standard error while a table is being gathered at a
    terminal (text and JSON Lines print each partition as it is read). Yields ``advance(stats)``."""
    if not shown:
        yield lambda stats: None
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn

    progress = Progress(SpinnerColumn(), TextColumn("stats: {task.fields[n]} partitions, {task.fields[mb]:.1f} MB"),
                        console=Console(stderr=True, highlight=False, markup=False), transient=True)
    task = progress.add_task("stats", total=None, n=0, mb=0.0)
    done = {"n": 0, "bytes": 0}

    def advance(stats) -> None:
        done["n"] += 1
        done["bytes"] += stats.bytes
        progress.update(task, n=done["n"], mb=done["bytes"] / 1e6)

    progress.start()
    try:
        yield advance
    finally:
        progress.stop()
