"""``kafkatool convert``: segments rewritten at another message format or codec, offsets kept
(spec §13), into a new directory (``SRC DEST``) or in place (``--in-place``: plan, then
``--execute``, as reindex and truncate). Parses the options, calls :mod:`kafkatool.convert`,
renders through :mod:`kafkatool.render.convert`."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator

import click

from kafkatool.cli.main import ExitCode
from kafkatool.cli.options import compact_json, json_lines_stream, safe_text_stream
from kafkatool.convert.options import DEFAULT_MAX_BATCH_BYTES
from kafkatool.record.layout import INT32_MAX

#: Compression levels each codec takes: Kafka's own bounds (``CompressionType``'s MIN_LEVEL and
#: MAX_LEVEL, KIP-390: ``compression.gzip.level`` 1-9, ``compression.lz4.level`` 1-17,
#: ``compression.zstd.level`` -131072-22), all of which zlib, lz4 and zstandard accept. snappy
#: and none have no level.
LEVELS: dict[str, tuple[int, int]] = {"gzip": (1, 9), "lz4": (1, 17), "zstd": (-131072, 22)}

#: Below this many source bytes no progress bar is drawn (the run is over before it would show).
PROGRESS_MIN_BYTES = 16 << 20


class _Command(click.Command):
    """Click's command with the synopsis of both forms' arguments (``SRC... [DEST]``) after the
    one required option."""

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return ["--to-magic", "0|1|2", "[OPTIONS]", "SRC...", "[DEST]"]


@click.command(cls=_Command, context_settings={"max_content_width": 100},
               short_help="Rewrite segments at another message format (magic 0, 1, 2) or codec, offsets kept, "
                          "into a new directory or in place.")
@click.argument("src", nargs=-1, required=False, type=click.Path(path_type=str))
@click.argument("dest", required=False, type=click.Path(path_type=str))
@click.option("--to-magic", "magic", type=click.Choice(["0", "1", "2"]), required=True,
              help="The message format to write: 2 (record batches, Kafka 0.11+; the only one Kafka 4 writes), "
                   "1 (messages with timestamps, 0.10) or 0 (the first format).")
@click.option("--compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
              help="The codec to write. Default: each source batch's own (a zstd batch cannot go below magic 2: "
                   "refused before anything is written).")
@click.option("--level", type=int, metavar="N",
              help="Compression level (needs --compression): gzip 1-9, lz4 1-17, zstd -131072-22, Kafka's "
                   "bounds; snappy and none take none. Default: Kafka's default for the codec.")
@click.option("--max-batch-bytes", type=click.IntRange(1, INT32_MAX), default=DEFAULT_MAX_BATCH_BYTES, show_default=True,
              metavar="N",
              help="Up-converting: a run of uncompressed legacy messages becomes v2 batches of at most N bytes "
                   "(Kafka's message.max.bytes default); a compressed wrapper always becomes one batch.")
@click.option("--drop-aborted", is_flag=True,
              help="Leave out the records of aborted transactions, as a read_committed consumer sees them. "
                   "Without it they stay (and become readable to every consumer below magic 2).")
@click.option("--strict", is_flag=True,
              help="Analyse first and refuse (exit status 1, nothing written) if anything would be lost: headers, "
                   "producer fields, control batches, timestamps, aborted or damaged data.")
@click.option("--skip-damaged", is_flag=True,
              help="Convert around a damaged entry (bad framing, CRC, records) instead of stopping; each bad byte "
                   "range is listed in the report.")
@click.option("--salvage", is_flag=True,
              help="Like --skip-damaged, but keep a batch whose CRC fails and whose records still decode "
                   "(re-encoded with a new CRC; each listed with its position and both CRCs). For forensics.")
@click.option("--in-place", is_flag=True,
              help="Convert partition dirs or log dirs where they are (SRC..., no DEST): a plan unless --execute.")
@click.option("--execute", is_flag=True,
              help="With --in-place: write the changes. Without it, print the plan and change nothing "
                   "(exit status 1 when changes are needed).")
@click.option("--backup-dir", type=click.Path(file_okay=False, path_type=str), metavar="DIR",
              help="With --in-place: where the replaced files go (default: kafkatool-backup-<log dir name>-<UTC time> "
                   "beside each log dir).")
@click.option("--force", is_flag=True,
              help="With --in-place: skip the .lock check. Only for a copy you know no broker is using.")
@click.option("--allow-transitional", is_flag=True,
              help="With --in-place: also convert partition dirs named *-delete, *-future or *-stray.")
@click.option("--format", "fmt", type=click.Choice(["text", "jsonl"]), default="text", show_default=True,
              help="text: the loss report on stderr (the --in-place plan on stdout); jsonl: one JSON object per "
                   "segment and partition and a final summary, on stdout.")
@click.option("--no-progress", is_flag=True, help="No progress bar (one is drawn on stderr while it is a terminal "
                                                      "and the input is large).")
@click.option("--jobs", "-j", type=click.IntRange(1, 256), default=None, metavar="N",
              help="Threads compressing the output while the next batches are converted. Default: one per CPU "
                   "this process may use; 1 keeps the conversion on one CPU (beside a live broker, say).")
def convert(src, dest, magic, compression, level, max_batch_bytes, drop_aborted, strict, skip_damaged, salvage,
            in_place, execute, backup_dir, force, allow_transitional, fmt, no_progress, jobs) -> None:
    """Rewrite Kafka segments at another message format (--to-magic 0, 1 or 2) or codec
    (--compression), keeping every offset. SRC is a segment (.log), a partition directory or a
    log dir; DEST a new directory (refused when it exists and is not empty): a segment goes into
    DEST under its own name, a partition directory becomes DEST, a log dir becomes a log dir with
    every partition and its checkpoint files and meta.properties.

    Every output segment is a valid Kafka segment with .index and .timeindex built as `kafkatool
    reindex` builds them; .txnindex files and producer snapshots are carried over where they stay
    valid and dropped, with the reason, where they do not; leader-epoch-checkpoint and
    partition.metadata are copied. Kafka's rules decide the rest (spec §13): going below magic 2
    drops headers, producer fields and control batches (and, for magic 0, timestamps); going up
    to magic 2 makes one batch per legacy wrapper or run of messages. What could not be carried
    over is counted in a loss report on standard error (--format jsonl: on standard output);
    --strict refuses any loss before anything is written. Output is written under temporary
    names, fsynced and renamed: DEST appears complete or not at all.

    --in-place converts partition dirs (or every partition of a log dir) where they are, with the
    safety of reindex and truncate: a plan by default; with --execute the .lock check, a backup
    of every replaced file, the whole partition dir switched at once, and re-verification.

    Exit status: 0 converted (or, --in-place without --execute, nothing to change); 1 --strict
    and a loss (nothing written), a damaged entry that stopped a segment (the error names the
    file and byte position; --skip-damaged converts around it), or an --in-place plan with
    changes; 2 bad usage or a refusal (DEST not empty, zstd below magic 2, a live broker holds the
    log dir, an I/O error); 130 interrupted.
    """
    from kafkatool.convert.options import ConvertOptions
    from kafkatool.record.compression import Codec

    safe_text_stream(sys.stderr)
    out = sys.stdout
    if fmt == "jsonl":
        json_lines_stream(out)
    else:
        safe_text_stream(out)
    paths = list(src) + ([dest] if dest is not None else [])
    _check_usage(paths, magic, compression, level, skip_damaged, salvage, in_place, execute, backup_dir, force,
                 allow_transitional)
    options = ConvertOptions(
        magic=int(magic),
        codec=None if compression is None else int(Codec[compression.upper()]),
        level=level,
        max_batch_bytes=max_batch_bytes,
        drop_aborted=drop_aborted,
        skip_damaged=skip_damaged,
        salvage=salvage,
        strict=strict,
        threads=jobs,
    )
    if in_place:
        _in_place(paths, options, out, fmt=fmt, execute=execute, backup_dir=backup_dir, force=force,
                  allow_transitional=allow_transitional, progress=not no_progress)
    else:
        _to_dest(paths[0], paths[1], options, out, fmt=fmt, progress=not no_progress)


def _check_usage(paths, magic, compression, level, skip_damaged, salvage, in_place, execute, backup_dir, force,
                 allow_transitional) -> None:
    """Usage errors (exit status 2) before anything is read: the argument count of each form,
    options of one form given to the other, zstd asked below magic 2, --skip-damaged with
    --salvage, a level the codec does not take, a SRC that does not exist."""
    if in_place:
        if not paths:
            raise click.UsageError("--in-place needs at least one SRC (a partition dir or a log dir)")
    else:
        for flag, given in (("--execute", execute), ("--backup-dir", backup_dir is not None), ("--force", force),
                            ("--allow-transitional", allow_transitional)):
            if given:
                raise click.UsageError(f"{flag} goes with --in-place (a conversion to DEST writes a new directory)")
        if len(paths) != 2:
            raise click.UsageError(
                f"expected SRC and DEST, got {_plural_args(len(paths))} (to convert in place: --in-place SRC...)")
    if compression == "zstd" and magic != "2":
        raise click.BadParameter(f"zstd exists only in magic 2 record batches (spec §7.1), not magic {magic}",
                                 param_hint="--compression")
    if skip_damaged and salvage:
        raise click.UsageError("--salvage already skips damaged entries: give --skip-damaged or --salvage, not both")
    if level is not None:
        if compression is None:
            raise click.BadParameter("needs --compression (a level's range depends on the codec)", param_hint="--level")
        if compression not in LEVELS:
            raise click.BadParameter(f"{compression} takes no compression level", param_hint="--level")
        low, high = LEVELS[compression]
        if not low <= level <= high:
            raise click.BadParameter(f"{level} is not a {compression} level ({low} to {high})", param_hint="--level")
    sources = paths if in_place else paths[:1]
    for p in sources:
        if not os.path.lexists(p):
            raise click.BadParameter(f"{_display(p)}: no such file or directory", param_hint="SRC")


def _plural_args(n: int) -> str:
    """``1 path``, ``3 paths``."""
    return f"{n} path" + ("" if n == 1 else "s")


def _display(path: str) -> str:
    """A path as printable text (bytes that are not UTF-8 as ``\\xNN``), for a Click message."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


# ----------------------------------------------------------------------------- errors and progress


def _is_refusal(e: Exception) -> bool:
    """A refusal (exit status 2), not data that stopped a segment (exit status 1)."""
    from kafkatool.safety import RepairError

    return isinstance(e, RepairError) or getattr(e, "kind", None) in ("refused", "live_broker", "transitional_dir")


@contextmanager
def _stop_on_error(out, after: Callable[[], str | None] | None = None) -> Iterator[None]:
    """A KafkaToolError or OSError ends the command in one line on standard error: exit status 2
    for a refusal or an I/O error, 1 for data that stopped the conversion (a located error).
    ``after()`` may add a line saying what was left (``None``: nothing to say)."""
    from kafkatool.errors import KafkaToolError

    try:
        yield
    except (KafkaToolError, OSError) as e:
        try:
            out.flush()
        except (OSError, ValueError):
            pass
        if isinstance(e, KafkaToolError):
            message, code = str(e), ExitCode.USAGE if _is_refusal(e) else ExitCode.FINDINGS
        else:
            where = f"{e.filename}: " if e.filename else ""
            message, code = f"{where}{e.strerror or e}", ExitCode.USAGE
        sys.stderr.write(f"kafkatool: error: {message}\n")
        note = after() if after is not None else None
        if note:
            sys.stderr.write(f"kafkatool convert: {note}\n")
        sys.exit(code)


@contextmanager
def _interruptible(note: Callable[[], str]) -> Iterator[None]:
    """Ctrl-C ends the command with one line saying what was left (``note()``), exit status 130."""
    try:
        yield
    except KeyboardInterrupt:
        err = sys.stderr
        err.write(("\n" if err.isatty() else "") + f"kafkatool convert: interrupted; {note()}\n")
        err.flush()
        sys.exit(ExitCode.INTERRUPTED)


def show_progress(enabled: bool, total: int) -> bool:
    """Whether a progress bar is drawn: asked for, standard error a terminal, and a large input."""
    return enabled and total >= PROGRESS_MIN_BYTES and sys.stderr.isatty()


@contextmanager
def _progress(label: str, total: int, shown: bool) -> Iterator[Callable[[int], None]]:
    """A Rich progress bar over the source bytes on standard error; yields ``advance(nbytes)``,
    a no-op when ``shown`` is false."""
    if not shown:
        yield lambda nbytes: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    progress = Progress(TextColumn(label), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                        console=Console(stderr=True, highlight=False, markup=False), transient=True)
    task = progress.add_task(label, total=total)
    progress.start()
    try:
        yield lambda nbytes: progress.update(task, advance=nbytes)
    finally:
        progress.stop()


# ----------------------------------------------------------------------------- SRC DEST


def _dest_state(dest: str) -> str:
    """What a run that stopped left at ``dest``."""
    try:
        if not os.path.lexists(dest):
            return f"nothing was written: {_display(dest)} does not exist"
        if os.path.isdir(dest) and not os.listdir(dest):
            return f"nothing was written: {_display(dest)} is empty"
    except OSError:
        pass
    return f"{_display(dest)} was left as it was before this run"


def _to_dest(src: str, dest: str, options, out, *, fmt: str, progress: bool) -> None:
    from kafkatool.cli.options import warn_live_brokers
    from kafkatool.convert.tree import analyze, convert_to_dest, plan_convert
    from kafkatool.render import convert as render
    from kafkatool.safety import log_dir_of

    started = time.monotonic()
    with _interruptible(lambda: "nothing was written"), _stop_on_error(out, lambda: "nothing was written"):
        plan = plan_convert(src, dest, options)
    shown = show_progress(progress, plan.total_bytes)
    warn_live_brokers("convert", dict.fromkeys(log_dir_of(os.path.abspath(p.path)) for p in plan.partitions),
                      "it may be writing the segments read here: a segment being written can end in a partial "
                      "batch, and a batch appended after it was read is not in DEST")

    if options.strict:
        with _interruptible(lambda: "nothing was written"), _stop_on_error(out, lambda: _dest_state(dest)):
            with _progress("convert: analysing", plan.total_bytes, shown) as advance:
                loss = analyze(plan, progress=advance)
        if loss.any():
            if fmt == "jsonl":
                out.write(compact_json(render.summary_object(plan, loss, [], written=False, strict_failed=True,
                                                             seconds=time.monotonic() - started)) + "\n")
                out.flush()
            else:
                sys.stderr.write("\n".join([render.run_line(plan)] + [f"  {line}" for line in loss.lines()]) + "\n")
            sys.stderr.write(f"kafkatool: error: {render.strict_message(loss)}\n")
            sys.exit(ExitCode.FINDINGS)

    with _interruptible(lambda: _dest_state(dest)), _stop_on_error(out, lambda: _dest_state(dest)):
        with _progress("convert", plan.total_bytes, shown) as advance:
            report = convert_to_dest(plan, progress=advance)
    seconds = time.monotonic() - started

    if fmt == "jsonl":
        for p in report.partitions:
            for s in p.segments:
                out.write(compact_json(render.segment_object(s)) + "\n")
            out.write(compact_json(render.partition_object(p)) + "\n")
        out.write(compact_json(render.summary_object(plan, report.loss, report.partitions, written=True,
                                                     seconds=seconds, side_files=report.side_files)) + "\n")
        out.flush()
    else:
        lines = [render.run_line(plan)]
        seen: dict = {}
        for p in report.partitions:
            lines += render.partition_lines(p, seen)
        if report.side_files:
            lines.append(f"{plan.src}:")
            lines += render.side_file_lines(report.side_files, seen)
        sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.write(render.summary_line(report.loss, report.partitions, dest=report.dest, seconds=seconds) + "\n")
    sys.exit(ExitCode.OK)


# ----------------------------------------------------------------------------- --in-place


#: Refusals of a partition dir that are about its data (exit status 1, as for a conversion to
#: DEST): a loss under --strict, a damaged batch. Every other refusal is exit status 2.
_DATA_REFUSALS = frozenset({"strict", "damaged"})


def _log_bytes(paths) -> int:
    """The bytes of the ``.log`` files in ``paths`` (partition dirs, log dirs), for the progress bar."""
    total = 0
    for p in paths:
        for d in (p, *(os.path.join(p, n) for n in _listdir(p))):
            for n in _listdir(d):
                if n.endswith(".log"):
                    try:
                        total += os.path.getsize(os.path.join(d, n))
                    except OSError:
                        pass
    return total


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path) if os.path.isdir(path) else []
    except OSError:
        return []


def _in_place(paths, options, out, *, fmt: str, execute: bool, backup_dir: str | None, force: bool,
              allow_transitional: bool, progress: bool) -> None:
    from kafkatool.cli.options import ApplyStates, execute_plans, interruptible, warn_live_brokers
    from kafkatool.convert.inplace import apply_in_place, plan_in_place
    from kafkatool.convert.options import Loss
    from kafkatool.render import convert as render
    from kafkatool.render.plans import done_line, plural
    from kafkatool.safety import find_pending_state, log_dir_of

    started = time.monotonic()
    with interruptible("convert", out):
        total = _log_bytes(paths)
        with _stop_on_error(out), _progress("convert: planning", total, show_progress(progress, total)) as advance:
            plans = plan_in_place(paths, options, allow_transitional=allow_transitional,
                                  on_plan=lambda p: advance(p.bytes_in))
        if not execute:
            warn_live_brokers("convert", dict.fromkeys(log_dir_of(p.partition_dir) for p in plans),
                              "this plan reads files it may be writing, and --execute refuses to run until it stops")

    needing = [p for p in plans if p.needs_changes]
    states = ApplyStates(_again(options), [p.partition_dir for p in needing], find_pending_state)
    reports: dict = {}
    refused_at_apply: dict[str, str] = {}
    if execute:
        reports, late = execute_plans("convert", needing, _partition, apply_in_place, backup_dir=backup_dir,
                                      states=states, out=out, fmt=fmt, plan_object=render.in_place_plan_object,
                                      force=force, allow_transitional=allow_transitional)
        refused_at_apply = {k: str(e) for k, e in late.items()}
    backup_roots = sorted({r.backup_dir for r in reports.values() if r.backup_dir})
    changed = [p for p in needing if p.partition_dir in reports]
    refused = [p for p in plans if p.refused or p.partition_dir in refused_at_apply]
    loss = Loss()
    for p in plans:
        if p.loss is not None and (not execute or p.partition_dir in reports or p.refused):
            loss.merge(p.loss)
    seconds = time.monotonic() - started

    if fmt == "jsonl":
        for p in plans:
            out.write(compact_json(render.in_place_plan_object(p, reports.get(p.partition_dir),
                                                               refused_at_apply.get(p.partition_dir))) + "\n")
        out.write(compact_json(render.in_place_summary_object(
            plans, options, loss, execute=execute, changed=len(changed), refused=len(refused),
            backup_dirs=backup_roots, seconds=seconds)) + "\n")
    else:
        for p in plans:
            out.write("\n".join(render.in_place_plan_lines(p)) + "\n")
            late = refused_at_apply.get(p.partition_dir)
            r = reports.get(p.partition_dir)
            if late is not None:
                out.write(f"  refused   nothing written: {late}\n")
            elif r is not None:
                out.write(done_line(f"converted, {plural(len(r.written), 'file')} written and re-verified", r.method,
                                    r.backup_dir, "originals") + "\n")
    out.flush()
    for p in plans:  # the errors last, where a reader of the run's end sees them
        if p.refused:
            sys.stderr.write(f"kafkatool: error: {p.partition_dir}: refused: {p.refused}\n")
        elif p.partition_dir in refused_at_apply:
            sys.stderr.write(f"kafkatool: error: refused: {refused_at_apply[p.partition_dir]}\n")
    verdict = "nothing lost" if not loss.any() else "losses listed in the plan"
    tail = f", {len(refused)} refused" if refused else ""
    if execute:
        msg = (f"convert --in-place: {plural(len(plans), 'partition')}, {len(changed)} converted and re-verified"
               f"{tail}; {verdict}")
        if backup_roots:
            msg += "; originals and RESTORE.txt in " + ", ".join(backup_roots)
    else:
        msg = (f"convert --in-place (dry run): {plural(len(plans), 'partition')}, {len(needing)} to convert{tail}; "
               f"{verdict}")
        if needing:
            msg += "; run again with --execute to apply"
    sys.stderr.write(msg + "\n")
    if any(p.refused_kind not in _DATA_REFUSALS for p in plans if p.refused) or refused_at_apply:
        sys.exit(ExitCode.USAGE)
    if refused or (not execute and needing):
        sys.exit(ExitCode.FINDINGS)
    sys.exit(ExitCode.OK)


def _again(options) -> str:
    """The command line (after ``kafkatool``, before ``--execute``) that completes an interrupted
    ``--in-place`` run: the same target, and every option that changes what is written (the
    batching, what is dropped, how damage is met)."""
    from kafkatool.render.convert import CODEC_NAMES

    words = ["convert", "--in-place", "--to-magic", str(options.magic)]
    if options.codec is not None:
        words += ["--compression", CODEC_NAMES[options.codec]]
    if options.level is not None:
        words += ["--level", str(options.level)]
    if options.max_batch_bytes != DEFAULT_MAX_BATCH_BYTES:
        words += ["--max-batch-bytes", str(options.max_batch_bytes)]
    if options.drop_aborted:
        words.append("--drop-aborted")
    if options.salvage:
        words.append("--salvage")
    elif options.skip_damaged:
        words.append("--skip-damaged")
    if options.strict:
        words.append("--strict")
    return " ".join(words)


def _partition(plan) -> str:
    """What one in-place plan and its report are keyed by."""
    return plan.partition_dir
