"""``kafkatool truncate``: the broker's recovery cut, offline, with every removed byte kept (plan, then apply)."""

from __future__ import annotations

import os
import sys
import time

import click

from kafkatool.cli.main import ExitCode
from kafkatool.cli.options import ApplyStates, byte_progress, compact_json, execute_plans, exit_on_error, find_targets
from kafkatool.cli.options import interruptible, repair_options, safe_text_stream, total_size, warn_live_brokers
from kafkatool.render.plans import done_line, plural, problem_line, problem_object
from kafkatool.render.plans import truncate_plan_lines as plan_lines
from kafkatool.render.plans import truncate_plan_object as plan_object


class _States(ApplyStates):
    """:class:`~kafkatool.cli.options.ApplyStates` with truncate's own reading of an interrupted
    partition dir: old, new, or a committed journal the next run completes (a mix of old and new
    files until then), and what is left over."""

    def __init__(self, plans) -> None:
        super().__init__("truncate", [p.partition_dir for p in plans])
        self.plans = {p.partition_dir: p for p in plans}

    def state(self, partition_dir: str, how: str = "interrupted") -> str:
        from kafkatool.truncate import describe_state

        if partition_dir in self.refused or partition_dir in self.finished or partition_dir not in self.started:
            return super().state(partition_dir, how)
        return f"{partition_dir}: {how}: {describe_state(self.plans[partition_dir])}"



@click.command(context_settings={"max_content_width": 100}, short_help="Cut invalid tails as the broker's recovery does, keeping every removed byte (dry run unless --execute).")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=str))
@click.option("--keep-valid-after", is_flag=True, help="Remove only what recovery refuses (bad regions, a batch with a malformed transaction marker or offsets going backwards) and keep every intact batch after it, at its own offsets, when its offsets fit between the batches around it (the gap is reported); later segments stay. No broker does this.")
@repair_options(
    "partition",
    index_help="The topic's index.interval.bytes, for the rebuilt .index and .timeindex of a cut segment.",
    backup_help="Where removed bytes and files go (default: kafkatool-backup-<log dir name>-<UTC time> beside each log dir).",
)
def truncate(paths, execute, keep_valid_after, index_interval_bytes, backup_dir, force, allow_transitional, fmt, quiet) -> None:
    """Cut segments where the broker's recovery after an unclean shutdown would: at the first
    batch that fails the walk or its CRC; right after a transaction marker that cannot be read;
    and, where an offset index entry would go backwards, at the segment's base offset (recovery
    empties it). What depends on the log end is trimmed: the cut segment's .index and .timeindex
    are rebuilt, later segments and producer snapshots above the new log end are moved to the
    backup, and leader-epoch-checkpoint and .txnindex entries at or above it are dropped. A
    segment recovery would not cut but split or fail to load (an offset it cannot hold, a control
    record that is not a transaction marker) is refused, with the reason. With
    --keep-valid-after only the bad regions are removed. Zero-filled preallocated tails are
    skipped at memory speed.

    Without --execute this is a dry run: it prints the byte ranges, batches and offsets that
    would be removed and changes nothing (and warns when a live broker holds the log dir). With
    --execute every removed byte range is first written to a backup directory with its original
    position; the new partition directory is built beside the old one (a staging directory named
    like a partition being deleted) and the two are switched with one atomic exchange, so a crash
    leaves the old state or the new one, never a mix. Where the exchange is impossible (a
    subdirectory in the partition dir, a file system without it), files are renamed into place
    under a journal that records each file's size, mtime and inode; the next run completes it,
    or refuses when a file changed since (a broker ran on the partition) and says how to start
    over. The result is re-verified. An unreadable partition dir is reported and the others go
    on. Exit status: 0 nothing to change or changes applied; 1 a dry run found changes; 2 bad
    usage, nothing Kafka in the paths, a partition dir or file that could not be read, or a
    refusal (a live broker holds the log dir, a transitional dir, a segment recovery would not
    cut, a stale journal); 130 interrupted (the state of each partition dir is printed).
    """
    from kafkatool.safety import check_partition_dir, log_dir_of
    from kafkatool.truncate import apply_truncate_all, plan_truncate_paths

    out = sys.stdout
    safe_text_stream(out)
    safe_text_stream(sys.stderr)
    started = time.time()
    unreadable: list[tuple[str, str]] = []  # (path, message): targets that could not be read

    with interruptible("truncate", out):
        # a partition dir holding only an interrupted run's journal is still something to do
        targets = find_targets(paths, out, allow_transitional=allow_transitional,
                               nothing_is_an_error=not any(_has_pending(p) for p in paths))
        problems = [p for p in targets.problems if p.kind != "usage"]
        for p in problems:
            if p.kind in ("unreadable", "not_regular"):
                unreadable.append((p.path, p.message))
        segments = targets.segments

        def cannot_read(partition_dir: str, e: Exception) -> None:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            where = getattr(e, "filename", None) or partition_dir
            unreadable.append((str(where), f"cannot read: {why}; this partition dir is not planned"))

        with exit_on_error(out):
            with byte_progress("truncate: planning", "partitions", total_size(segments), quiet or not segments) as advance:
                plans = plan_truncate_paths(paths, keep_valid_after, index_interval_bytes,
                                            on_plan=lambda _p, n: advance(n), segments=segments, on_error=cannot_read)
            for p in plans:
                check_partition_dir(p.partition_dir, allow_transitional)
        if not execute:
            warn_live_brokers(
                "truncate", dict.fromkeys(log_dir_of(p.partition_dir) for p in plans),
                'this plan reads files it may be writing, and --execute refuses to run until it stops')

    needing = [p for p in plans if p.needs_changes]
    states = _States(needing)
    reports: dict = {}
    refused_at_apply: dict[str, str] = {}
    if execute:
        reports, late = execute_plans("truncate", needing, _partition, apply_truncate_all, backup_dir=backup_dir,
                                      states=states, out=out, fmt=fmt, plan_object=plan_object, force=force,
                                      allow_transitional=allow_transitional, index_interval_bytes=index_interval_bytes)
        refused_at_apply = {k: str(e) for k, e in late.items()}
    backup_roots = sorted({r.backup_dir for r in reports.values() if r.backup_dir})
    refused = [p for p in plans if p.refused or p.partition_dir in refused_at_apply]
    changed = [p for p in needing if p.partition_dir in reports]
    removed = sum(p.removed_bytes for p in (changed if execute else needing))
    if fmt == "jsonl":
        for p in problems:
            out.write(compact_json(problem_object("truncate", p)) + "\n")
        for path, message in unreadable:
            if not any(p.path == path for p in problems):
                out.write(compact_json({"type": "truncate_problem", "path": path, "kind": "unreadable", "message": message}) + "\n")
        for p in plans:
            out.write(compact_json(plan_object(p, reports.get(p.partition_dir), refused_at_apply.get(p.partition_dir))) + "\n")
        out.write(compact_json({
            "type": "truncate_summary",
            "execute": execute,
            "partitions": len(plans),
            "needingChanges": len(needing) - len([p for p in needing if p.partition_dir in refused_at_apply]),
            "changed": len(changed),
            "refused": len(refused),
            "unreadable": len(unreadable),
            "bytesRemoved": removed,
            "backupDirs": backup_roots,
            "seconds": round(time.time() - started, 3),
        }) + "\n")
    else:
        for p in problems:
            if p.kind not in ("unreadable", "not_regular"):
                out.write(problem_line(p) + "\n")
        for p in plans:
            late = refused_at_apply.get(p.partition_dir)
            if not (p.needs_changes or p.refused or late):
                continue
            out.write("\n".join(plan_lines(p)) + "\n")
            r = reports.get(p.partition_dir)
            if late is not None:
                out.write(f"  refused   nothing written: {late}\n")
            elif r is not None:
                out.write(done_line(f"{plural(len(r.written), 'file')} written, {len(r.moved)} moved, re-verified",
                                    r.method, r.backup_dir, "removed bytes and originals") + "\n")
    out.flush()
    # the errors last, where a reader of the run's end sees them
    for p in plans:
        for f in p.refusals:
            sys.stderr.write(f"kafkatool: error: refused: {f}\n")
        if p.partition_dir in refused_at_apply:
            sys.stderr.write(f"kafkatool: error: refused: {refused_at_apply[p.partition_dir]}\n")
    for path, message in unreadable:
        sys.stderr.write(f"kafkatool: error: {path}: {message}\n")
    if not quiet:
        tail = ""
        if refused:
            tail += f", {len(refused)} refused"
        if unreadable:
            tail += f", {plural(len(unreadable), 'path')} could not be read"
        if execute:
            msg = (f"truncate: {plural(len(plans), 'partition')}, {len(changed)} changed{tail}, "
                   f"{plural(removed, 'byte')} removed and re-verified")
            if backup_roots:
                msg += "; removed bytes, originals and RESTORE.txt in " + ", ".join(backup_roots)
        else:
            msg = (f"truncate (dry run): {plural(len(plans), 'partition')}, {len(needing)} need changes "
                   f"({plural(removed, 'byte')} to remove){tail}")
            if needing:
                msg += "; run again with --execute to apply"
        sys.stderr.write(msg + "\n")
    if refused or unreadable:
        sys.exit(ExitCode.USAGE)
    if not execute and needing:
        sys.exit(ExitCode.FINDINGS)
    sys.exit(ExitCode.OK)


def _has_pending(path: str) -> bool:
    """A partition dir holding only what an interrupted run left (a journal, a staging dir beside it)."""
    from kafkatool.safety import TRUNCATE_JOURNAL, find_staging_dirs

    p = os.path.realpath(path)
    return os.path.isdir(p) and (os.path.lexists(os.path.join(p, TRUNCATE_JOURNAL)) or bool(find_staging_dirs(p)))


def _partition(plan) -> str:
    """What one truncate plan and its report are keyed by."""
    return plan.partition_dir
