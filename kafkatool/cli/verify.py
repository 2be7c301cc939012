"""``kafkatool verify``: every corruption in segments, partitions and log dirs."""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Callable, Collection, Iterable

import click

from kafkatool.cli.main import ExitCode

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)(?:i?[bB](?:/s)?)?\s*$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}

#: What verify says of a named path with nothing to check in it (exit status 2).
NOTHING_KAFKA = "nothing Kafka found here (no partition directory, segment, index, snapshot or checkpoint file)"


def _parse_rate(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    m = _RATE.match(value)
    if not m:
        raise click.BadParameter("expected bytes per second, e.g. 50M, 200k or 1G")
    rate = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if rate <= 0:
        raise click.BadParameter("must be positive")
    return rate


def parse_kinds(ctx: click.Context, param: click.Parameter, value: str | None) -> frozenset[str] | None:
    if value is None:
        return None
    from kafkatool.verify import KINDS

    kinds = frozenset(k.strip() for k in value.split(",") if k.strip())
    unknown = sorted(kinds - KINDS.keys())
    if unknown:
        raise click.BadParameter(f"unknown finding kind(s): {', '.join(unknown)} (see `man kafkatool-verify`)")
    return kinds


class _Format(click.Choice):
    """``text``, ``table`` or ``jsonl``; ``lines`` (the old name of ``text``) is still accepted,
    but not shown."""

    def __init__(self) -> None:
        super().__init__(["text", "table", "jsonl"])

    def convert(self, value, param, ctx):
        if value == "lines":
            return "lines"
        return super().convert(value, param, ctx)


@click.command(context_settings={"max_content_width": 100}, short_help='Find every damaged region in segments, side files, partitions and log dirs.')
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=str))
@click.option("--deep", is_flag=True, help="Decompress and decode every record (counts, varints, offsets, timestamps, headers, inner CRCs, control records).")
@click.option("--format", "fmt", type=_Format(), default=None, help="text: one 'path:position: kind: message' line per finding (for grep and scripts); table: a findings table; jsonl: one JSON object per finding and a final summary. Default: table when standard output is a terminal, text otherwise.")
@click.option("--fail-on", callback=parse_kinds, metavar="KIND,...", help="Only these finding kinds make the exit status 1 (default: every kind but index_missing, preallocated_index_tail and timeindex_record_offset).")
@click.option("--ignore", callback=parse_kinds, metavar="KIND,...", help="Finding kinds to leave out of the report and the exit status (e.g. trailing_zeros).")
@click.option("--max-rate", callback=_parse_rate, metavar="RATE", help="Limit read bandwidth, in bytes per second (50M, 1G ...), so a check on a live broker does not hurt it.")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True, help="Check partitions in this many processes (for a single partition or file: split its large segments across them).")
@click.option("--max-decompressed-bytes", type=click.IntRange(1024), default=512 << 20, show_default=True, help="With --deep, a batch that decompresses past this is reported as decompressed_too_large.")
@click.option("--quiet", "-q", is_flag=True, help="No summary and no progress bar on stderr.")
def verify(paths, deep, fmt, fail_on, ignore, max_rate, jobs, max_decompressed_bytes, quiet) -> None:
    """Find every damaged region in segment files, side files, partition directories or whole
    log dirs: framing, CRCs, offsets, timestamps, producer fields, indexes, transaction
    indexes, producer snapshots and checkpoints; also files and directories the broker cannot
    load, and what an interrupted `reindex`/`truncate --execute` left. After a bad region the
    check resynchronises on the next valid batch, so one run lists every bad region and the
    good batches beyond it.

    Read-only: nothing is written or created, and a log dir a live broker holds can be
    checked. Exit status: 0 no failing findings; 1 failing findings (a file that cannot be
    read is one: `unreadable`); 2 bad usage, or a path with nothing Kafka in it.
    """
    from kafkatool.verify import INFO_KINDS, KINDS, FileSummary, VerifyOptions, expand_targets, start_rate_clock, verify_group

    if fmt == "lines":
        if not quiet:
            sys.stderr.write("kafkatool: warning: --format lines is now called --format text\n")
        fmt = "text"
    elif fmt is None:
        fmt = "table" if sys.stdout.isatty() else "text"
    fail_kinds = fail_on if fail_on is not None else frozenset(KINDS) - INFO_KINDS
    ignored = ignore or frozenset()
    opts = VerifyOptions(
        deep=deep,
        max_decompressed=max_decompressed_bytes,
        max_rate=(max_rate / jobs) if max_rate else None,
    )
    nothing: list[str] = []
    groups = expand_targets(paths, nothing)
    if nothing:
        for p in nothing:
            sys.stderr.write(f"kafkatool: error: {p}: {NOTHING_KAFKA}\n")
        sys.exit(ExitCode.USAGE)
    if jobs > 1 and len(groups) == 1:
        # one partition (or one file): split its large segments across the processes instead
        opts = VerifyOptions(deep=opts.deep, max_decompressed=opts.max_decompressed, max_rate=max_rate, workers=jobs)
    started = time.monotonic()
    start_rate_clock()
    tty_err = sys.stderr.isatty()

    progress = None
    task = None
    if not quiet and tty_err:
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

        total = sum(
            os.path.getsize(t.path)
            for g in groups
            for t in g
            if t.problem is None and os.path.basename(t.path).endswith((".log", ".checkpoint")) and os.path.isfile(t.path)
        )
        progress = Progress(
            TextColumn("verify"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
            TextColumn("{task.fields[files]} files"), console=_console(True), transient=True,
        )
        task = progress.add_task("verify", total=total, files=0)
        progress.start()

    def on_bytes(n: int) -> None:
        if progress is not None:
            progress.update(task, advance=n)

    def on_file(n: int) -> None:
        if progress is not None:
            progress.update(task, files=n)

    def items():
        try:
            if jobs > 1 and len(groups) > 1:
                from concurrent.futures import ProcessPoolExecutor

                with ProcessPoolExecutor(max_workers=jobs) as pool:
                    for group, done in zip(groups, pool.map(_run_group, groups, [opts] * len(groups))):
                        yield from done
                        on_bytes(sum(s.bytes for s in done if isinstance(s, FileSummary) and s.kind == "log"))
            else:
                for group in groups:
                    yield from verify_group(group, opts, on_bytes)
        finally:
            if progress is not None:
                progress.stop()

    sys.exit(report(items(), fmt, fail_kinds, ignored, quiet, started, on_file))


def _console(stderr: bool):
    # Rich is imported only when something is drawn for a terminal, or a table is asked for
    from rich.console import Console

    if stderr:
        return Console(stderr=True, highlight=False, markup=False)
    return Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 200)


def report(items: Iterable["Finding | FileSummary"], fmt: str, fail_kinds: Collection[str], ignored: Collection[str],
           quiet: bool, started: float, on_file: Callable[[int], None] | None = None) -> ExitCode:
    """Print verify's results as ``kafkatool verify`` does and return its exit status: ``items``
    (findings and file summaries, in the order to print) in ``fmt`` (``text``, ``table`` or
    ``jsonl``) on standard output, then the summary on standard error (unless ``quiet``).
    Findings of ``ignored`` kinds are left out; those of ``fail_kinds`` make the status 1.
    ``started`` is the run's ``time.monotonic()`` start; ``on_file(n)`` is called with the number
    of files checked so far. ``kafkatool spark verify`` prints through this too."""
    from kafkatool.render import findings as fr
    from kafkatool.verify import FileSummary

    findings: list = []
    summaries: list = []
    counts: dict[str, int] = {}
    failing = 0
    out = sys.stdout
    if fmt == "jsonl":
        from kafkatool.cli.options import json_lines_stream

        json_lines_stream(out)
    tty_err = sys.stderr.isatty()
    try:
        for item in items:
            if isinstance(item, FileSummary):
                summaries.append(item)
                if on_file is not None:
                    on_file(len(summaries))
                continue
            if item.kind in ignored:
                continue
            counts[item.kind] = counts.get(item.kind, 0) + 1
            if item.kind in fail_kinds:
                failing += 1
            if fmt == "jsonl":
                out.write(fr.finding_line(item) + "\n")
            elif fmt == "text":
                out.write(fr.finding_text(item) + "\n")
            else:
                findings.append(item)
    finally:
        close = getattr(items, "close", None)
        if close is not None:  # a generator's cleanup (a progress bar to stop) before anything more is printed
            close()
    seconds = time.monotonic() - started
    if fmt == "jsonl":
        states: dict[str, int] = {}
        for s in summaries:
            if s.state:
                states[s.state] = states.get(s.state, 0) + 1
        out.write(fr.summary_line(len(summaries), sum(s.bytes for s in summaries),
                                  sum(s.batches for s in summaries), counts, failing, seconds, states) + "\n")
    elif fmt == "table" and findings:
        fr.render_table(_console(False), findings, fail_kinds)
    out.flush()
    if not quiet:
        if tty_err:
            fr.render_summary(_console(True), summaries, counts, failing, seconds)
        else:  # for a pipe or a file: plain lines, never wrapped, and no Rich to import
            sys.stderr.write("".join(line + "\n" for line in fr.summary_lines(summaries, counts, failing, seconds)))
    return ExitCode.FINDINGS if failing else ExitCode.OK


def _run_group(group, opts):
    from kafkatool.verify import verify_group

    return list(verify_group(group, opts))
