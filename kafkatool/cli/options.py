"""Options shared by the commands that write (reindex, truncate): defined once, as pip-tools does."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator

import click


def repair_options(unit: str, index_help: str, backup_help: str) -> Callable:
    """--execute, --index-interval-bytes, --backup-dir, --force, --allow-transitional, --format, --quiet.

    ``unit`` names what one plan block / JSON object covers ("segment", "partition").
    """
    options = [
        click.option("--execute", is_flag=True, help="Write the changes. Without it, print the plan and change nothing (exit status 1 when changes are needed)."),
        click.option("--index-interval-bytes", type=click.IntRange(0, 2147483647), default=4096, show_default=True, metavar="N", help=index_help),
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
def exit_on_error(out, on_refusal: Callable[[], None] | None = None) -> Iterator[None]:
    """A KafkaToolError or OSError in the block ends the command: standard output is flushed,
    one ``kafkatool: error: ...`` line goes to standard error, and the exit status is 2 (bad
    usage, an I/O error or a refusal). ``on_refusal`` runs first for a KafkaToolError (to
    report what was already done)."""
    from kafkatool.cli.main import ExitCode
    from kafkatool.errors import KafkaToolError

    try:
        yield
    except KafkaToolError as e:
        if on_refusal is not None:
            on_refusal()
        _exit(out, str(e), ExitCode.USAGE)
    except OSError as e:
        _exit(out, f"{e.filename or ''}: {e.strerror or e}", ExitCode.USAGE)


def _exit(out, message: str, code: int) -> None:
    out.flush()
    sys.stderr.write(f"kafkatool: error: {message}\n")
    sys.exit(code)


def method_phrase(method: str) -> str:
    """A report's ``method`` (``exchange``, ``journal (why)``) as a phrase for the ``done`` line."""
    if method == "exchange":
        return "the partition dir switched at once"
    return "renamed one by one under a journal: " + method.removeprefix("journal (").removesuffix(")")
