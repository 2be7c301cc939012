"""``kafkatool groups``: consumer groups and their committed offsets, replayed from
``__consumer_offsets`` segments. Parses the options, calls :mod:`kafkatool.groups`, renders."""

from __future__ import annotations

import os
import sys
import time

import click

from kafkatool.cli.main import ExitCode


@click.command(context_settings={"max_content_width": 100},
               short_help="Consumer groups, members and committed offsets, replayed from __consumer_offsets.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=str))
@click.option("--group", "-g", "group", metavar="GROUP",
              help="Only this group (exit status 1 with a message when no partition holds it).")
@click.option("--topic", "-t", "topic", metavar="TOPIC",
              help="Only the offsets committed for this topic, and only the groups holding one.")
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True,
              help="table: tables of the groups, their members and their committed offsets; jsonl: a "
                   "'partition' object per __consumer_offsets partition replayed, a 'group' object per "
                   "group, and a final summary.")
@click.option("--lag", is_flag=True,
              help="Also read the log end offset of each topic-partition with a committed offset, from its partition "
                   "dirs under PATHS (the highest of its copies), and show the lag: log end minus committed offset.")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Replay the __consumer_offsets partitions in this many processes (the same output, in the same order).")
@click.option("--quiet", "-q", is_flag=True, help="No summary and no notes on stderr (errors are still printed).")
def groups(paths, group, topic, fmt, lag, jobs, quiet) -> None:
    """Per consumer group: its type (classic, consumer, share), state, protocol type and
    protocol, generation or epoch, leader and members (member id, group instance id, client
    id, host, session and rebalance timeouts, subscribed topics, assigned partitions decoded
    from the consumer protocol), and the latest committed offset of each topic-partition with
    its commit time, leader epoch, metadata and (v1 values) expire time: what the group
    coordinator holds after it loads __consumer_offsets, rebuilt from the segment files of a
    stopped or dead cluster. PATHS are log dirs, __consumer_offsets-N partition dirs or
    directories of log dirs.

    The records are replayed in offset order as the coordinator loads them: the latest value
    of each key wins, a tombstone deletes it (an offset, a group, a member), and offsets
    committed inside a transaction count only once their producer's COMMIT marker follows
    (discarded on ABORT; shown as pending while no marker exists). When several log dirs hold
    the same __consumer_offsets-N (replicas), the copy with the highest log end offset is
    replayed and the others are named on stderr.

    Read-only. A damaged region or batch is reported (file, byte position, in verify's words)
    and reading goes on after it; a record that cannot be decoded is reported with its file,
    offset and Kafka's wording. Exit status: 0 everything was read; 1 a damaged region, a
    record that could not be decoded, or --group naming a group that was not found; 2 bad
    usage, or a path with no __consumer_offsets partition under it.
    """
    from kafkatool.cli.options import json_lines_stream, safe_text_stream
    from kafkatool.groups import (
        DEFAULT_OFFSETS_PARTITIONS,
        GroupsOptions,
        add_log_ends,
        data_partitions,
        find_offsets_partitions,
        groups_of,
        offsets_partition_of,
    )
    from kafkatool.render import groups as render

    started = time.monotonic()
    run = find_offsets_partitions(paths, other_topics=lag)
    for message in run.unreadable:
        sys.stderr.write(f"kafkatool: error: {message}\n")
    if run.nothing or not run.partitions:
        for p in run.nothing or paths:
            sys.stderr.write(f"kafkatool: error: {p}: no __consumer_offsets partition found here (groups reads log "
                             "dirs and __consumer_offsets-N partition dirs)\n")
        sys.exit(ExitCode.USAGE)
    out = sys.stdout
    if fmt == "jsonl":
        json_lines_stream(out)
    else:
        safe_text_stream(out)
    options = GroupsOptions(group=group, topic=topic)
    data = data_partitions(paths) if lag else None
    log_ends: dict = {}
    reads = []
    for r in groups_of(run, options, jobs=jobs):
        if data is not None:
            add_log_ends(r, data, log_ends)
        reads.append(r)
        if not quiet:
            for line in render.notes(r):
                sys.stderr.write(line + "\n")
        for line in render.error_lines(r):
            sys.stderr.write(line + "\n")
        if fmt == "jsonl":
            out.write(render.dumps(render.partition_object(r)) + "\n")
            for g in r.groups:
                out.write(render.dumps(render.group_object(g)) + "\n")
            out.flush()
    seconds = time.monotonic() - started
    found = any(r.groups for r in reads)
    if fmt == "jsonl":
        out.write(render.dumps(render.summary_object(reads, seconds)) + "\n")
    elif found:
        from kafkatool.render.terminal import is_terminal, terminal_width

        tty = is_terminal(out)
        for line in render.table_lines(reads, width=terminal_width() if tty else None,
                                       color=tty and not os.environ.get("NO_COLOR")):
            out.write(line + "\n")
    out.flush()
    if not quiet:
        sys.stderr.write(render.summary_line(reads, seconds) + "\n")
    if group is not None and not found:
        where = f" with offsets of topic {topic}" if topic is not None else ""
        numbers = sorted(r.partition for r in reads if r.partition is not None)
        home = offsets_partition_of(group)
        sys.stderr.write(f"kafkatool: error: group {group}{where} not found in the {len(reads)} __consumer_offsets "
                         f"partition(s) read ({_numbers(numbers)}); with the default {DEFAULT_OFFSETS_PARTITIONS} "
                         f"partitions (offsets.topic.num.partitions) its records are in __consumer_offsets-{home}\n")
        sys.exit(ExitCode.FINDINGS)
    sys.exit(ExitCode.FINDINGS if run.unreadable or any(r.failed for r in reads) else ExitCode.OK)


def _numbers(numbers: list[int]) -> str:
    """``partitions 3, 14, 36`` (the first ten, then a count)."""
    if not numbers:
        return "no partition number"
    shown = ", ".join(map(str, numbers[:10])) + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")
    return ("partition " if len(numbers) == 1 else "partitions ") + shown
