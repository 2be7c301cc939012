"""``kafkatool transactions``: transactional ids from ``__transaction_state`` and the open (hanging)
transactions of the data partitions. Parses the options, calls
:func:`kafkatool.transactions.transactions_report`, renders."""

from __future__ import annotations

import sys
from contextlib import contextmanager

import click

from kafkatool.cli.main import ExitCode


def _now(ctx, param, value):
    if value is None:
        return None
    from kafkatool.transactions import parse_time

    try:
        return parse_time(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


@click.command(context_settings={"max_content_width": 100},
               short_help="Transactional ids and open (hanging) transactions: what blocks read_committed consumers.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=str))
@click.option("--transactional-id", "transactional_id", metavar="ID",
              help="Only this transactional id: its state and the open transactions of its producer ids.")
@click.option("--open", "open_only", is_flag=True,
              help="Only open transactions, and the transactional ids whose state is active (Ongoing, Prepare*) "
                   "or that own an open transaction.")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC",
              help="Search only this topic's partitions for open transactions (__transaction_state "
                   "is always read).")
@click.option("--now", "now_ms", metavar="TIME", callback=_now,
              help="Measure ages to this time: epoch milliseconds or ISO 8601 (2024-05-01T12:00:00Z). "
                   "[default: the current time]")
@click.option("--transaction-state-partitions", "state_partitions", type=click.IntRange(1, 100_000), default=50,
              show_default=True, metavar="N",
              help="How many partitions __transaction_state has (the brokers' transaction.state.log.num.partitions). "
                   "An open transaction whose producer id no transactional id names is called hanging only "
                   "when all of them were read; otherwise its verdict is unknown.")
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True,
              help="table: Rich tables and the abort commands; jsonl: one JSON object per transactional id, "
                   "open transaction, partition and problem, and a final summary.")
@click.option("--quiet", "-q", is_flag=True, help="No summary and no replica notes on stderr (problems are still printed).")
def transactions(paths, transactional_id, open_only, topics, now_ms, state_partitions, fmt, quiet) -> None:
    """Every transactional id's latest state from __transaction_state, and the open transactions
    of the data partitions: per partition, a producer id with transactional data after its last
    COMMIT/ABORT marker, with the first offset of that transaction (where the last stable offset
    is stuck: read_committed consumers cannot read past it), its times and age, and its other
    partitions. Each open transaction is joined by producer id with the coordinator's state to
    say whether a marker can still come (ongoing, completing, timed-out) or not (hanging).
    PATHS are log dirs, directories of log dirs or partition dirs, of a running or a dead cluster.

    Read-only; only batch headers are read, and a control batch's marker, and the records of
    __transaction_state. A damaged region is reported with its file and byte position on
    stderr, and the rest is read. When several log dirs hold the same partition, the copy
    with the highest log end offset is read. Exit status: 0 no open transaction and no
    problem; 1 an open transaction was found (after the filters), or a problem; 2 bad usage.
    """
    from kafkatool.cli.options import json_lines_stream, safe_text_stream
    from kafkatool.render import transactions as render
    from kafkatool.transactions import TransactionsOptions, find_partitions, transactions_report

    found = find_partitions(paths)
    if found.files or found.nothing:
        for p in found.files:
            sys.stderr.write(f"kafkatool: error: {p}: not a directory (transactions reads log dirs and partition dirs)\n")
        for p in found.nothing:
            sys.stderr.write(f"kafkatool: error: {p}: nothing Kafka found here (no partition directory)\n")
        sys.exit(ExitCode.USAGE)
    options = TransactionsOptions(transactional_id=transactional_id, open_only=open_only,
                                  topics=frozenset(topics) if topics else None, now_ms=now_ms,
                                  transaction_state_partitions=state_partitions)
    with _progress(fmt == "table" and not quiet and sys.stderr.isatty()) as advance:
        report = transactions_report(found.partitions, options, on_partition=advance, problems=found.problems)
    out = sys.stdout
    if fmt == "jsonl":
        json_lines_stream(out)
        for line in render.json_lines(report):
            out.write(line + "\n")
    else:
        safe_text_stream(out)
        from rich.console import Console

        render.render_tables(Console(file=out, highlight=False, markup=False, width=None if out.isatty() else 200),
                             report)
    out.flush()
    for line in render.problem_lines(report):
        sys.stderr.write(f"kafkatool: error: {line}\n")
    if not quiet:
        for line in render.replica_lines(report):
            sys.stderr.write(f"kafkatool: note: {line}\n")
        sys.stderr.write(render.summary_line(report) + "\n")
    sys.exit(ExitCode.FINDINGS if report.open or report.problems else ExitCode.OK)


@contextmanager
def _progress(shown: bool):
    """Partitions read so far, on standard error while the tables are being gathered at a terminal.
    Yields ``advance(partition)``."""
    if not shown:
        yield lambda partition: None
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn

    progress = Progress(SpinnerColumn(), TextColumn("transactions: {task.fields[n]} partitions, reading {task.fields[name]}"),
                        console=Console(stderr=True, highlight=False, markup=False), transient=True)
    task = progress.add_task("transactions", total=None, n=0, name="")
    done = [0]

    def advance(partition) -> None:
        done[0] += 1
        progress.update(task, n=done[0], name=partition.name)

    progress.start()
    try:
        yield advance
    finally:
        progress.stop()
