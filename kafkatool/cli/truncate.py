"""``kafkatool truncate``: the broker's recovery cut, offline, with every removed byte kept (plan, then apply)."""

from __future__ import annotations

import os
import sys
import time

import click

from kafkatool.cli.main import ExitCode
from kafkatool.cli.options import (
    ApplyStates,
    byte_progress,
    compact_json,
    exit_on_error,
    interruptible,
    method_phrase,
    plural,
    refuse_bad_targets,
    repair_options,
    safe_text_stream,
    warn_live_brokers,
)


def _name(path: str) -> str:
    return os.path.basename(path)


def _offsets(first: int, last: int) -> str:
    return f"offset {first}" if first == last else f"offsets {first}-{last}"


def plan_lines(plan) -> list[str]:
    """The text form of one partition's plan (pure). One line per item, never wrapped."""
    lines = [f"{plan.partition_dir}: {plural(plan.segments_checked, 'segment')} checked"
             + ("" if not plan.keep_valid_after else ", keeping the valid batches after bad regions")]
    for f in plan.refusals:
        lines.append(f"  refused   {f}")
    for c in plan.cuts:
        offsets = "no batches kept" if c.first_offset is None else f"{_offsets(c.first_offset, c.last_offset)} kept"
        lines.append(f"  cut       {_name(c.log_path)}: {c.old_size} -> {plural(c.new_size, 'byte')}, "
                     f"{plural(c.batches_kept, 'batch', 'batches')} ({offsets}), new next offset {c.next_offset}")
        for r in c.removed:
            lines.append(f"  remove    {_name(c.log_path)} bytes [{r.start}, {r.end}) ({plural(r.size, 'byte')}): {r.reason}")
        for j in c.rejected:
            lines.append(f"  reject    {_name(c.log_path)} bytes [{j.start}, {j.end}): "
                         f"{plural(j.batches, 'CRC-valid batch', 'CRC-valid batches')} "
                         f"({_offsets(j.first_offset, j.last_offset)}) not kept: {j.reason}")
        if c.batches_dropped:
            first, last = c.dropped_offsets or (0, 0)
            lines.append(f"  discard   {plural(c.batches_dropped, 'intact batch', 'intact batches')} "
                         f"({_offsets(first, last)}) after the cut, as the broker's recovery would; "
                         "--keep-valid-after keeps them")
        for a, b in c.gaps:
            if b - 1 > a:
                missing = f"offset {a + 1} is" if b - 1 == a + 1 else f"offsets {a + 1}-{b - 1} are"
                lines.append(f"  gap       {missing} missing between kept offsets {a} and {b}")
            else:
                lines.append(f"  gap       a region was removed between offsets {a} and {b} (no offset missing)")
    for r in plan.rewrites:
        if r.old_size is None:
            lines.append(f"  create    {_name(r.path)} ({plural(r.new_size, 'byte')}); {r.detail}")
        else:
            lines.append(f"  rewrite   {_name(r.path)}: {r.old_size} -> {plural(r.new_size, 'byte')}; {r.detail}")
    for m in plan.moves:
        lines.append(f"  move      {_name(m.path)} ({plural(m.size, 'byte')}) to the backup: {m.reason}")
    if plan.new_log_end is not None:
        lines.append(f"  log end   the partition's log end offset becomes {plan.new_log_end}")
    for p in () if plan.refusals else plan.leftovers:
        lines.append(f"  remove    {_name(p)}: left by an interrupted kafkatool run")
    for p in plan.staging_leftovers:
        lines.append(f"  remove    {p}: the staging directory of an interrupted kafkatool run "
                     "(named like a partition being deleted; the partition dir itself is complete)")
    for n in plan.notes:
        lines.append(f"  note      {n}")
    return lines


def plan_object(plan, report=None, refused: str | None = None) -> dict:
    """The JSON Lines form of one partition's plan and, after --execute, what was done (pure).
    ``refused``: why apply refused the partition under the lock (nothing of it was written)."""
    refusals = [{"path": f.path, "position": f.position, "reason": f.reason} for f in plan.refusals]
    if refused is not None:
        refusals.append({"path": plan.partition_dir, "position": None, "reason": refused})
    obj = {
        "type": "truncate_partition",
        "partitionDir": plan.partition_dir,
        "keepValidAfter": plan.keep_valid_after,
        "segmentsChecked": plan.segments_checked,
        "segments": [
            {
                "segment": c.log_path,
                "baseOffset": c.base_offset,
                "oldSize": c.old_size,
                "newSize": c.new_size,
                "batchesKept": c.batches_kept,
                "firstOffset": c.first_offset,
                "lastOffset": c.last_offset,
                "nextOffset": c.next_offset,
                "removed": [{"start": r.start, "end": r.end, "bytes": r.size, "reason": r.reason} for r in c.removed],
                "kept": [list(k) for k in c.kept],
                "rejected": [{"start": j.start, "end": j.end, "batches": j.batches, "firstOffset": j.first_offset,
                              "lastOffset": j.last_offset, "reason": j.reason} for j in c.rejected],
                "batchesDiscarded": c.batches_dropped,
                "discardedOffsets": None if c.dropped_offsets is None else list(c.dropped_offsets),
                "offsetGaps": [{"after": a, "before": b} for a, b in c.gaps],
            }
            for c in plan.cuts
        ],
        "rewrites": [
            {"path": r.path, "kind": r.kind, "action": "create" if r.old_size is None else "rewrite",
             "oldSize": r.old_size, "newSize": r.new_size, "detail": r.detail}
            for r in plan.rewrites
        ],
        "moves": [{"path": m.path, "bytes": m.size, "reason": m.reason} for m in plan.moves],
        "newLogEnd": plan.new_log_end,
        "notes": list(plan.notes),
        "leftovers": list(plan.leftovers),
        "interruptedJournal": plan.interrupted_journal,
        "stagingLeftovers": list(plan.staging_leftovers),
        "refusals": refusals,
        "needsChanges": plan.needs_changes and refused is None,
    }
    if report is not None:
        obj["written"] = list(report.written)
        obj["moved"] = list(report.moved)
        obj["removed"] = list(report.removed_leftovers)
        obj["backupDir"] = report.backup_dir
        obj["completedInterruptedRun"] = report.completed_journal
        obj["method"] = report.method
        obj["verified"] = report.verified
    return obj


def problem_object(problem) -> dict:
    """The JSON Lines form of a target problem (an unreadable dir, a stray name, a skipped dir)."""
    return {"type": "truncate_problem", "path": problem.path, "kind": problem.kind, "message": problem.message}


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
    from kafkatool.repair import check_partition_dir, default_backup_dir, log_dir_of, scan_targets
    from kafkatool.truncate import apply_truncate_all, plan_truncate_paths

    out = sys.stdout
    safe_text_stream(out)
    safe_text_stream(sys.stderr)
    started = time.time()
    unreadable: list[tuple[str, str]] = []  # (path, message): targets that could not be read

    with interruptible("truncate", out):
        with exit_on_error(out):
            targets = scan_targets(paths, allow_transitional=allow_transitional)
        # a partition dir holding only an interrupted run's journal is still something to do
        refuse_bad_targets(targets, paths, nothing_is_an_error=not any(_has_pending(p) for p in paths))
        problems = [p for p in targets.problems if p.kind != "usage"]
        for p in problems:
            if p.kind in ("unreadable", "not_regular"):
                unreadable.append((p.path, p.message))
        segments = targets.segments
        total = 0
        for s in segments:
            try:
                total += os.path.getsize(s)
            except OSError:
                pass

        def cannot_read(partition_dir: str, e: Exception) -> None:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            where = getattr(e, "filename", None) or partition_dir
            unreadable.append((str(where), f"cannot read: {why}; this partition dir is not planned"))

        with exit_on_error(out):
            with byte_progress("truncate: planning", "partitions", total, quiet or not segments) as advance:
                plans = plan_truncate_paths(paths, keep_valid_after, index_interval_bytes,
                                            on_plan=lambda _p, n: advance(n), segments=segments, on_error=cannot_read)
            for p in plans:
                check_partition_dir(p.partition_dir, allow_transitional)
        if not execute:
            warn_live_brokers(
                "truncate", dict.fromkeys(log_dir_of(p.partition_dir) for p in plans),
                'this plan reads files it may be writing, and --execute refuses to run until it stops')

    needing = [p for p in plans if p.needs_changes]
    reports: dict = {}
    refused_at_apply: dict[str, str] = {}
    states = _States(needing)

    def record(r) -> None:
        reports[r.plan.partition_dir] = r
        states.finish(r.plan.partition_dir)

    def refuse(partition_plans, e) -> None:
        refused_at_apply[partition_plans[0].partition_dir] = str(e)
        states.refuse(partition_plans[0].partition_dir, str(e))

    def report_done() -> None:  # say what was done before the refusal or failure
        if fmt == "jsonl":
            for p in needing:
                if p.partition_dir in reports:
                    out.write(compact_json(plan_object(p, reports[p.partition_dir])) + "\n")

    if execute and needing:
        stamp = time.time()
        chooser = backup_dir if backup_dir else (lambda log_dir: default_backup_dir(log_dir, stamp))
        with interruptible("truncate", out, states), exit_on_error(out, report_done, states):
            apply_truncate_all(needing, chooser, force=force, allow_transitional=allow_transitional,
                               index_interval_bytes=index_interval_bytes, on_partition=record,
                               on_start=states.start, on_refused=refuse)
    backup_roots = sorted({r.backup_dir for r in reports.values() if r.backup_dir})
    refused = [p for p in plans if p.refused or p.partition_dir in refused_at_apply]
    changed = [p for p in needing if p.partition_dir in reports]
    removed = sum(p.removed_bytes for p in (changed if execute else needing))
    if fmt == "jsonl":
        for p in problems:
            out.write(compact_json(problem_object(p)) + "\n")
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
                out.write(f"{p.path}: {'skipped: ' if p.kind == 'skipped' else ''}{p.message}\n")
        for p in plans:
            late = refused_at_apply.get(p.partition_dir)
            if not (p.needs_changes or p.refused or late):
                continue
            out.write("\n".join(plan_lines(p)) + "\n")
            r = reports.get(p.partition_dir)
            if late is not None:
                out.write(f"  refused   nothing written: {late}\n")
            elif r is not None:
                out.write(f"  done      {plural(len(r.written), 'file')} written, {len(r.moved)} moved, re-verified"
                          + (f" ({method_phrase(r.method)})" if r.method else "")
                          + (f"; removed bytes and originals in {r.backup_dir}" if r.backup_dir else "") + "\n")
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
    from kafkatool.repair import find_staging_dirs
    from kafkatool.truncate import TRUNCATE_JOURNAL

    p = os.path.realpath(path)
    return os.path.isdir(p) and (os.path.lexists(os.path.join(p, TRUNCATE_JOURNAL)) or bool(find_staging_dirs(p)))
