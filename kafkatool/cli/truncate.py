"""``kafkatool truncate``: the broker's recovery cut, offline, with every removed byte kept (plan, then apply)."""

from __future__ import annotations

import json
import os
import sys
import time

import click

from kafkatool.cli.main import ExitCode
from kafkatool.cli.options import byte_progress, exit_on_error, method_phrase, repair_options


def _name(path: str) -> str:
    return os.path.basename(path)


def plan_lines(plan) -> list[str]:
    """The text form of one partition's plan (pure)."""
    lines = [f"{plan.partition_dir}: {plan.segments_checked} segments checked"
             + ("" if not plan.keep_valid_after else ", keeping the valid batches after bad regions")]
    for c in plan.cuts:
        offsets = "no batches kept" if c.first_offset is None else f"offsets {c.first_offset}-{c.last_offset} kept"
        lines.append(f"  cut       {_name(c.log_path)}: {c.old_size} -> {c.new_size} bytes, "
                     f"{c.batches_kept} batches ({offsets}), new next offset {c.next_offset}")
        for r in c.removed:
            lines.append(f"  remove    {_name(c.log_path)} bytes [{r.start}, {r.end}) ({r.size} bytes): {r.reason}")
        if c.batches_dropped:
            first, last = c.dropped_offsets or (None, None)
            lines.append(f"  discard   {c.batches_dropped} intact batches (offsets {first}-{last}) after the cut, as the "
                         "broker's recovery would; --keep-valid-after keeps them")
        for a, b in c.gaps:
            missing = f"{a + 1}" if b - 1 == a + 1 else f"{a + 1}-{b - 1}"
            lines.append(f"  gap       offsets {missing} are missing between kept offsets {a} and {b}"
                         if b - 1 > a else f"  gap       a region was removed between offsets {a} and {b} (no offsets missing)")
    for r in plan.rewrites:
        old = "missing" if r.old_size is None else f"{r.old_size} bytes"
        lines.append(f"  rewrite   {_name(r.path)}: {old} -> {r.new_size} bytes; {r.detail}")
    for m in plan.moves:
        lines.append(f"  move      {_name(m.path)} ({m.size} bytes) to the backup: {m.reason}")
    if plan.new_log_end is not None:
        lines.append(f"  log end   the partition's log end offset becomes {plan.new_log_end}")
    for p in plan.leftovers:
        lines.append(f"  remove    {_name(p)}: left by an interrupted kafkatool run")
    for p in plan.staging_leftovers:
        lines.append(f"  remove    {p}: the staging directory of an interrupted kafkatool run "
                     "(named like a partition being deleted; the partition dir itself is complete)")
    for n in plan.notes:
        lines.append(f"  note      {n}")
    return lines


def plan_object(plan, report=None) -> dict:
    """The JSON Lines form of one partition's plan and, after --execute, what was done (pure)."""
    obj = {
        "type": "truncate_partition",
        "partition_dir": plan.partition_dir,
        "keep_valid_after": plan.keep_valid_after,
        "segments_checked": plan.segments_checked,
        "segments": [
            {
                "segment": c.log_path,
                "base_offset": c.base_offset,
                "old_size": c.old_size,
                "new_size": c.new_size,
                "batches_kept": c.batches_kept,
                "first_offset": c.first_offset,
                "last_offset": c.last_offset,
                "next_offset": c.next_offset,
                "removed": [{"start": r.start, "end": r.end, "bytes": r.size, "reason": r.reason} for r in c.removed],
                "kept": [list(k) for k in c.kept],
                "batches_discarded": c.batches_dropped,
                "discarded_offsets": None if c.dropped_offsets is None else list(c.dropped_offsets),
                "offset_gaps": [{"after": a, "before": b} for a, b in c.gaps],
            }
            for c in plan.cuts
        ],
        "rewrites": [
            {"path": r.path, "kind": r.kind, "old_size": r.old_size, "new_size": r.new_size, "detail": r.detail}
            for r in plan.rewrites
        ],
        "moves": [{"path": m.path, "bytes": m.size, "reason": m.reason} for m in plan.moves],
        "new_log_end": plan.new_log_end,
        "notes": list(plan.notes),
        "leftovers": list(plan.leftovers),
        "interrupted_journal": plan.interrupted_journal,
        "staging_leftovers": list(plan.staging_leftovers),
        "needs_changes": plan.needs_changes,
    }
    if report is not None:
        obj["written"] = list(report.written)
        obj["moved"] = list(report.moved)
        obj["removed"] = list(report.removed_leftovers)
        obj["backup_dir"] = report.backup_dir
        obj["completed_interrupted_run"] = report.completed_journal
        obj["method"] = report.method
        obj["verified"] = report.verified
    return obj


@click.command(context_settings={"max_content_width": 100}, short_help="Cut invalid tails as the broker's recovery does, keeping every removed byte (dry run unless --execute).")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=str))
@click.option("--keep-valid-after", is_flag=True, help="Remove only the bad regions and keep every intact batch after them, at its own offsets (the gap is reported); later segments stay. No broker does this.")
@repair_options(
    "partition",
    index_help="The topic's index.interval.bytes, for the rebuilt .index and .timeindex of a cut segment.",
    backup_help="Where removed bytes and files go (default: kafkatool-backup-<log dir name>-<UTC time> beside each log dir).",
)
def truncate(paths, execute, keep_valid_after, index_interval_bytes, backup_dir, force, allow_transitional, fmt, quiet) -> None:
    """Cut segments at the first batch that fails the walk or its CRC, as the broker's recovery
    after an unclean shutdown does, and trim what depends on the log end: the cut segment's
    .index and .timeindex are rebuilt, later segments and producer snapshots above the new log
    end are moved to the backup, and leader-epoch-checkpoint and .txnindex entries at or above
    it are dropped. With --keep-valid-after only the bad byte ranges are removed.

    Without --execute this is a dry run: it prints the byte ranges, batches and offsets that
    would be removed and changes nothing. With --execute every removed byte range is first written
    to a backup directory with its original position; the new partition directory is built beside
    the old one (a staging directory named like a partition being deleted) and the two are switched
    with one atomic exchange, so a crash leaves the old state or the new one, never a mix (where
    the exchange is impossible, files are renamed into place under a journal the next run
    completes); the result is re-verified. Exit status: 0 nothing to change or changes applied,
    1 a dry run found changes, 2 bad usage, an I/O error, or a refusal (a live broker holds the
    log dir, a transitional dir).
    """
    from kafkatool.repair import check_partition_dir, default_backup_dir, find_segments
    from kafkatool.truncate import apply_truncate_all, plan_truncate_paths

    out = sys.stdout
    started = time.time()

    with exit_on_error(out):
        segments = find_segments(paths)
        total = sum(os.path.getsize(s) for s in segments)
        with byte_progress("truncate: planning", "partitions", total, quiet) as advance:
            plans = plan_truncate_paths(
                paths, keep_valid_after, index_interval_bytes, on_plan=lambda _p, n: advance(n), segments=segments
            )
        for p in plans:
            check_partition_dir(p.partition_dir, allow_transitional)

    needing = [p for p in plans if p.needs_changes]
    reports = {}

    def report_done() -> None:  # say what was done before the refusal or failure
        for p in needing:
            if p.partition_dir in reports and fmt == "jsonl":
                out.write(json.dumps(plan_object(p, reports[p.partition_dir])) + "\n")

    if execute and needing:
        stamp = time.time()
        chooser = backup_dir if backup_dir else (lambda log_dir: default_backup_dir(log_dir, stamp))
        with exit_on_error(out, report_done):
            for r in apply_truncate_all(needing, chooser, force=force, allow_transitional=allow_transitional,
                                        index_interval_bytes=index_interval_bytes):
                reports[r.plan.partition_dir] = r
    backup_roots = sorted({r.backup_dir for r in reports.values() if r.backup_dir})
    if fmt == "jsonl":
        for p in plans:
            out.write(json.dumps(plan_object(p, reports.get(p.partition_dir))) + "\n")
        out.write(json.dumps({
            "type": "truncate_summary",
            "execute": execute,
            "partitions": len(plans),
            "needing_changes": len(needing),
            "bytes_removed": sum(p.removed_bytes for p in needing),
            "backup_dirs": backup_roots,
            "seconds": round(time.time() - started, 3),
        }) + "\n")
    else:
        for p in needing:
            out.write("\n".join(plan_lines(p)) + "\n")
            r = reports.get(p.partition_dir)
            if r is not None:
                out.write(f"  done      {len(r.written)} files written, {len(r.moved)} moved, re-verified"
                          + (f" ({method_phrase(r.method)})" if r.method else "")
                          + (f"; removed bytes and originals in {r.backup_dir}" if r.backup_dir else "") + "\n")
    out.flush()
    if not quiet:
        removed = sum(p.removed_bytes for p in needing)
        if execute:
            msg = f"truncate: {len(plans)} partitions, {len(needing)} changed, {removed} bytes removed and re-verified"
            if backup_roots:
                msg += "; removed bytes, originals and RESTORE.txt in " + ", ".join(backup_roots)
        else:
            msg = f"truncate (dry run): {len(plans)} partitions, {len(needing)} need changes ({removed} bytes to remove)"
            if needing:
                msg += "; run again with --execute to apply"
        sys.stderr.write(msg + "\n")
    if not execute and needing:
        sys.exit(ExitCode.FINDINGS)
    sys.exit(ExitCode.OK)
