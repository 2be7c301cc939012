"""Options and run-time helpers shared by the commands that write (reindex, truncate): defined
once, as pip-tools does.

* :func:`repair_options`: the options both commands take;
* :func:`byte_progress`: a progress bar on a terminal, nothing otherwise;
* :func:`exit_on_error`: a refusal or an I/O error ends the command in one line, exit status 2;
* :class:`ApplyStates` and :func:`interruptible`: on Ctrl-C (or a failure) during ``--execute``,
  say in which state each partition dir was left, and exit 130;
* :func:`execute_plans`: ``--execute`` itself, the same for both (the lock, the backup dir, the
  callbacks above, what was done printed before a refusal ends the run);
* :func:`safe_text_stream`, :func:`json_lines_stream`: small output helpers.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Sequence

import click

from kafkatool.record.layout import INT32_MAX


def repair_options(unit: str, index_help: str, backup_help: str) -> Callable:
    """--execute, --index-interval-bytes, --backup-dir, --force, --allow-transitional, --format, --quiet.

    ``unit`` names what one plan block / JSON object covers ("segment", "partition").
    """
    options = [
        click.option("--execute", is_flag=True, help="Write the changes. Without it, print the plan and change nothing (exit status 1 when changes are needed)."),
        click.option("--index-interval-bytes", type=click.IntRange(0, INT32_MAX), default=4096, show_default=True, metavar="N", help=index_help),
        click.option("--backup-dir", type=click.Path(file_okay=False, path_type=str), metavar="DIR", help=backup_help),
        click.option("--force", is_flag=True, help="Skip the .lock check. Only for a copy you know no broker is using."),
        click.option("--allow-transitional", is_flag=True, help="Also repair partition dirs named *-delete, *-future or *-stray."),
        click.option("--format", "fmt", type=click.Choice(["text", "jsonl"]), default="text", show_default=True, help=f"text: the plan, one block per {unit} that needs changes; jsonl: one JSON object per {unit} and a final summary."),
        click.option("--quiet", "-q", is_flag=True, help="No summary and no progress bar on stderr."),
    ]

    def decorate(f: Callable) -> Callable:
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


@contextmanager
def byte_progress(label: str, unit: str, total: int, quiet: bool) -> Iterator[Callable[[int], None]]:
    """A Rich progress bar over bytes (and a count of ``unit``) on stderr while it is a terminal.

    Yields ``advance(nbytes)``, to call once per item done; a no-op when there is no bar.
    """
    if quiet or not sys.stderr.isatty():
        yield lambda nbytes: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    progress = Progress(
        TextColumn(label), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
        TextColumn("{task.fields[n]} " + unit), console=Console(stderr=True, highlight=False, markup=False),
        transient=True,
    )
    task = progress.add_task(label, total=total, n=0)
    done = [0]

    def advance(nbytes: int) -> None:
        done[0] += 1
        progress.update(task, advance=nbytes, n=done[0])

    progress.start()
    try:
        yield advance
    finally:
        progress.stop()


@contextmanager
def exit_on_error(out, on_refusal: Callable[[], None] | None = None, states: "ApplyStates | None" = None) -> Iterator[None]:
    """A KafkaToolError or OSError in the block ends the command: standard output is flushed,
    one ``kafkatool: error: ...`` line goes to standard error, and the exit status is 2 (bad
    usage, an I/O error or a refusal). ``on_refusal`` runs first (to report what was already
    done); with ``states`` (an ``--execute`` under way), the state of each partition dir follows
    the error line. An OSError without a file name (a full disk met by a flush) says so."""
    from kafkatool.cli.main import ExitCode
    from kafkatool.errors import KafkaToolError

    try:
        yield
    except KafkaToolError as e:
        if on_refusal is not None:
            on_refusal()
        _exit(out, str(e), ExitCode.USAGE, states)
    except OSError as e:
        if on_refusal is not None:
            on_refusal()
        where = f"{e.filename}: " if e.filename else ""
        _exit(out, f"{where}{e.strerror or e}", ExitCode.USAGE, states)


def _exit(out, message: str, code: int, states: "ApplyStates | None" = None) -> None:
    try:
        out.flush()
    except (OSError, ValueError):
        pass
    sys.stderr.write(f"kafkatool: error: {message}\n")
    if states is not None and states.started:
        for line in states.lines("stopped by this error"):
            sys.stderr.write(f"  {line}\n")
    sys.exit(code)


class ApplyStates:
    """Where an ``--execute`` run is: which partition dirs it started and finished.

    On Ctrl-C (:func:`interruptible`) or a failure (:func:`exit_on_error`) its :meth:`lines`
    say, for each partition dir the run meant to change, one of:

    * ``untouched``: not started; nothing of it was written;
    * ``done``: changed, re-verified, the originals in the backup;
    * ``refused``: left as it was (the reason was reported);
    * ``interrupted``: started and not finished. The write path leaves the old state or the
      new one, complete, plus at most a staging dir or a journal and its temp files, which
      ``pending(partition_dir)`` lists (``kafkatool.safety.find_pending_state``); the line names
      them and the command whose next ``--execute`` completes or removes them.

    ``command`` is the command to run again (``reindex``, ``truncate``). Use: build it from the
    partition dirs of the plans that need changes, pass :meth:`start` as ``on_start`` and call
    :meth:`finish`/:meth:`refuse` from the report and refusal callbacks of
    ``kafkatool.safety.apply_locked`` (:func:`execute_plans` does all of it).
    """

    def __init__(self, command: str, partition_dirs: Iterable[str],
                 pending: Callable[[str], Sequence[tuple[str, str]]] | None = None) -> None:
        self.command = command
        self.partitions = list(dict.fromkeys(partition_dirs))
        self.pending = pending
        self.started: list[str] = []
        self.finished: set[str] = set()
        self.refused: dict[str, str] = {}

    def start(self, partition_dir: str) -> None:
        self.started.append(partition_dir)

    def finish(self, partition_dir: str) -> None:
        self.finished.add(partition_dir)

    def refuse(self, partition_dir: str, why: str) -> None:
        self.refused[partition_dir] = why

    def state(self, partition_dir: str, how: str = "interrupted") -> str:
        """One line: the partition dir and its state (see the class doc); ``how`` names what
        stopped the partition under way."""
        if partition_dir in self.refused:
            return f"{partition_dir}: refused, left as it was"
        if partition_dir in self.finished:
            return f"{partition_dir}: done"
        if partition_dir not in self.started:
            return f"{partition_dir}: untouched"
        left: Sequence[tuple[str, str]] = ()
        if self.pending is not None:
            try:
                left = self.pending(partition_dir)
            except OSError:
                left = ()
        again = f"`kafkatool {self.command} --execute {partition_dir}`"
        if not left:
            return (f"{partition_dir}: {how}, nothing left over: it holds the old state or the new one, "
                    f"complete; run {again} again to finish or confirm")
        what = "; ".join(f"{p} ({w.split(':', 1)[0]})" for p, w in left)
        return (f"{partition_dir}: {how}, the partition's files are complete (old or new state); left over: "
                f"{what}; {again} completes or removes them")

    def lines(self, how: str = "interrupted") -> list[str]:
        return [self.state(p, how) for p in self.partitions]


@contextmanager
def interruptible(command: str, out, states: ApplyStates | None = None) -> Iterator[None]:
    """Ctrl-C (``KeyboardInterrupt``) in the block ends the command with exit status 130.

    Before ``--execute`` started writing (``states`` None, or no partition started): one line,
    nothing was changed. During ``--execute``: a line, then one line per partition dir with
    its state (:class:`ApplyStates`). Standard output is flushed first, so the lines already
    printed stay whole.
    """
    from kafkatool.cli.main import ExitCode

    try:
        yield
    except KeyboardInterrupt:
        try:
            out.flush()
        except (OSError, ValueError):
            pass
        err = sys.stderr
        lead = "\n" if err.isatty() else ""
        if states is None or not states.started:
            when = "while planning" if states is None else "before anything was written"
            err.write(f"{lead}kafkatool {command}: interrupted {when}; nothing was changed\n")
        else:
            err.write(f"{lead}kafkatool {command}: interrupted during --execute; the partition dirs are in these states:\n")
            for line in states.lines():
                err.write(f"  {line}\n")
        err.flush()
        sys.exit(ExitCode.INTERRUPTED)


def execute_plans(
    command: str,
    needing: Sequence,
    key: Callable,
    apply: Callable,
    *,
    backup_dir: str | None,
    states: ApplyStates,
    out,
    fmt: str,
    plan_object: Callable,
    **options,
) -> tuple[dict, dict]:
    """``--execute``: apply the plans that need changes (``apply``: ``kafkatool.reindex.apply_all``,
    ``kafkatool.truncate.apply_truncate_all``, called with ``on_report``, ``on_start``,
    ``on_refused`` and ``options``) into ``backup_dir`` or else the default backup dir beside each
    log dir, one timestamp for the run.

    Returns ``(reports, refused)``, both keyed by ``key(plan)``: the report of each plan applied,
    and the :class:`~kafkatool.safety.PartitionRefused` of each plan refused under the lock. On
    Ctrl-C or an error the run ends here (:func:`interruptible`, :func:`exit_on_error`, with the
    state of each partition dir); with ``fmt`` ``jsonl``, the plans applied before are printed
    first (``plan_object(plan, report)``).
    """
    import time

    from kafkatool.safety import default_backup_dir

    reports: dict = {}
    refused: dict = {}

    def record(r) -> None:
        reports[key(r.plan)] = r
        states.finish(r.plan.partition_dir)

    def refuse(partition_plans, e) -> None:
        for p in partition_plans:
            refused[key(p)] = e
        states.refuse(partition_plans[0].partition_dir, str(e))

    def report_done() -> None:  # say what was done before the refusal or failure
        if fmt == "jsonl":
            for p in needing:
                if key(p) in reports:
                    out.write(compact_json(plan_object(p, reports[key(p)])) + "\n")

    if needing:
        stamp = time.time()
        chooser = backup_dir if backup_dir else (lambda log_dir: default_backup_dir(log_dir, stamp))
        with interruptible(command, out, states), exit_on_error(out, report_done, states):
            apply(needing, chooser, on_report=record, on_start=states.start, on_refused=refuse, **options)
    return reports, refused


def find_targets(paths: Sequence[str], out, *, allow_transitional: bool, nothing_is_an_error: bool = True):
    """The segments ``paths`` name (``kafkatool.targets.scan_targets``); a directory that
    cannot be searched or a usage error ends the command (:func:`exit_on_error`,
    :func:`refuse_bad_targets`)."""
    from kafkatool.targets import scan_targets

    with exit_on_error(out):
        targets = scan_targets(paths, allow_transitional=allow_transitional)
    refuse_bad_targets(targets, paths, nothing_is_an_error=nothing_is_an_error)
    return targets


def total_size(paths: Iterable[str]) -> int:
    """The bytes of the files at ``paths`` (for a progress bar); a file that cannot be read counts 0."""
    total = 0
    for p in paths:
        try:
            total += os.path.getsize(p)
        except OSError:
            pass
    return total


def refuse_bad_targets(targets, paths: Sequence[str], *, nothing_is_an_error: bool = True) -> None:
    """End the command with exit status 2 when ``targets`` (``kafkatool.targets.scan_targets``)
    hold a usage error (a named file that is not a segment: one line each on standard error),
    or, unless ``nothing_is_an_error`` is false, when ``paths`` hold nothing Kafka at all."""
    from kafkatool.cli.main import ExitCode

    usage = targets.usage_errors
    for p in usage:
        sys.stderr.write(f"kafkatool: error: {p.path}: {p.message}\n")
    if usage:
        sys.exit(ExitCode.USAGE)
    nothing = targets.nothing_found(paths)
    if nothing is not None and nothing_is_an_error:
        sys.stderr.write(f"kafkatool: error: {nothing}\n")
        sys.exit(ExitCode.USAGE)


def warn_live_brokers(command: str, log_dirs, consequence: str) -> None:
    """A dry run reads files a live broker may be changing: for each of ``log_dirs`` whose
    ``.lock`` a process holds, one warning on standard error naming it, then ``consequence``."""
    from kafkatool.safety import describe_pid, lock_holder

    for d in log_dirs:
        try:
            pid = lock_holder(d)
        except OSError:
            continue
        if pid is not None:
            sys.stderr.write(f"kafkatool {command}: warning: {describe_pid(pid)} holds {os.path.join(d, '.lock')} "
                             f"(a live broker?): {consequence}\n")


def safe_text_stream(stream) -> None:
    """Let a text stream print file names that are not UTF-8 (Linux names are bytes, decoded with
    surrogateescape): their original bytes are written back instead of failing with
    UnicodeEncodeError. A no-op for a stream that cannot be reconfigured."""
    _set_errors(stream, "surrogateescape")


def _set_errors(stream, errors: str) -> None:
    """``stream.reconfigure(errors=errors)``; a no-op for a stream that cannot be reconfigured."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        try:
            reconfigure(errors=errors)
        except (ValueError, OSError, TypeError):
            pass


def compact_json(obj: dict) -> str:
    """One JSON Lines object of reindex, truncate and restore: compact, as Kafka's own JSON; the
    default ``ensure_ascii`` escapes a non-UTF-8 name's surrogates (``\\udcXX``)."""
    import json

    return json.dumps(obj, separators=(",", ":"))


def _json_escape(e: UnicodeEncodeError) -> tuple[str, int]:
    return "".join(f"\\u{ord(c):04x}" for c in e.object[e.start:e.end]), e.end


def json_lines_stream(stream) -> None:
    """Let a text stream carry JSON Lines whose strings hold a file name that is not UTF-8 (its
    bytes decoded with surrogateescape): such a character is written as the JSON escape
    ``\\udcXX`` (what ``ensure_ascii`` would write; ``os.fsencode(json.loads(...))`` gives the
    name's bytes back), so the line stays valid UTF-8 JSON. JSON's syntax is ASCII, so an
    unencodable character can only stand inside a string. A no-op for a stream that cannot be
    reconfigured."""
    import codecs

    try:
        codecs.lookup_error("kafkatool-json-escape")
    except LookupError:
        codecs.register_error("kafkatool-json-escape", _json_escape)
    _set_errors(stream, "kafkatool-json-escape")
