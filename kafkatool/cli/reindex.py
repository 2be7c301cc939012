"""``kafkatool reindex``: rebuild ``.index``/``.timeindex``/``.txnindex`` as the broker's recovery does (plan, then apply)."""

from __future__ import annotations

import hashlib
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


def file_line(c) -> str:
    """One index file of a plan, as text (pure): what happens to it and why."""
    entries = plural(c.new_entries, "entry", "entries")
    if c.action == "unchanged":
        return f"  unchanged {_name(c.path)}: {plural(c.new_size, 'byte')}, {entries}"
    if c.action == "keep":
        return (f"  keep      {_name(c.path)}: {plural(c.old_size, 'byte')}, {plural(c.old_entries, 'entry', 'entries')}; "
                f"passes verify's index checks (a recovery rebuild would hold {entries}: --all rewrites it)")
    if c.action == "create":
        line = f"  create    {_name(c.path)}: {plural(c.new_size, 'byte')}, {entries}"
    else:
        line = (f"  rewrite   {_name(c.path)}: {c.old_size} -> {plural(c.new_size, 'byte')}, "
                f"{c.old_entries} -> {entries}")
    return line + (f" ({c.why})" if c.why else "")


def plan_lines(plan) -> list[str]:
    """The text form of one segment's plan (pure)."""
    if plan.refused_kind in ("unreadable", "not_regular", "pending_truncate") and not plan.changes:
        return [f"{plan.log_path}: refused: {plan.refused}"]
    offsets = "no batches" if plan.first_offset is None else f"offsets {plan.first_offset}-{plan.last_offset}"
    lines = [f"{plan.log_path}: {plural(plan.batches, 'batch', 'batches')}, {offsets}, "
             f"{plan.valid_bytes} valid bytes of {plan.log_size}"]
    lines += [file_line(c) for c in plan.changes]
    if plan.refused:
        lines.append(f"  refused   nothing written: {plan.refused}")
    for p in plan.leftovers:
        lines.append(f"  remove    {_name(p)}: left by an interrupted kafkatool run")
    for p in plan.staging_leftovers:
        lines.append(f"  remove    {p}: the staging directory of an interrupted kafkatool run "
                     "(named like a partition being deleted; the partition dir itself is complete)")
    if plan.interrupted_backup:
        lines.append(f"  note      the interrupted run kept its originals in {plan.interrupted_backup}")
    if plan.txn_unavailable:
        txn = plan.txnindex or plan.log_path[: -len(".log")] + ".txnindex"
        lines.append(f"  leave     {_name(txn)}: not rebuilt: the producer state at the segment's base is unknown ({plan.txn_unavailable})")
    if plan.bad_tail:
        lines.append(
            f"  bad tail  bytes [{plan.valid_bytes}, {plan.log_size}) ({plan.bad_tail_bytes} bytes) are not indexed, "
            f"as the broker's recovery would not index them: {plan.bad_tail}; "
            "`kafkatool truncate` removes them (reindex never changes the .log)"
        )
    return lines


def plan_object(plan, report=None, refused: tuple[str, str] | None = None) -> dict:
    """The JSON Lines form of one segment's plan and, after --execute, what was done (pure).
    ``refused`` is ``(kind, reason)`` when apply refused the partition under the lock."""
    if refused is None and plan.refused:
        refused = (plan.refused_kind, plan.refused)
    obj = {
        "type": "reindex_segment",
        "segment": plan.log_path,
        "partitionDir": plan.partition_dir,
        "baseOffset": plan.base_offset,
        "indexIntervalBytes": plan.index_interval_bytes,
        "batches": plan.batches,
        "firstOffset": plan.first_offset,
        "lastOffset": plan.last_offset,
        "logSize": plan.log_size,
        "validBytes": plan.valid_bytes,
        "badTail": None
        if not plan.bad_tail
        else {"start": plan.valid_bytes, "end": plan.log_size, "bytes": plan.bad_tail_bytes, "reason": plan.bad_tail},
        "files": [
            {
                "path": c.path,
                "kind": c.kind,
                "action": c.action,
                "why": c.why,
                "oldSize": c.old_size,
                "newSize": c.new_size,
                "oldEntries": c.old_entries,
                "newEntries": c.new_entries,
                "oldSha256": c.old_sha256,
                "newSha256": hashlib.sha256(c.data).hexdigest(),
            }
            for c in plan.changes
        ],
        "txnindexNotRebuilt": plan.txn_unavailable,
        "leftovers": list(plan.leftovers),
        "stagingLeftovers": list(plan.staging_leftovers),
        "refused": None if refused is None else {"kind": refused[0], "reason": refused[1]},
        "needsChanges": plan.needs_changes and refused is None,
    }
    if report is not None:
        obj["written"] = list(report.written)
        obj["removed"] = list(report.removed_leftovers)
        obj["backupDir"] = report.backup_dir
        obj["method"] = report.method
        obj["verified"] = report.verified
    return obj


def problem_object(problem) -> dict:
    """The JSON Lines form of a target problem (a stray name, an unreadable dir, a skipped dir)."""
    return {"type": "reindex_problem", "path": problem.path, "kind": problem.kind, "message": problem.message}



@click.command(context_settings={"max_content_width": 100}, short_help="Rebuild wrong or missing .index, .timeindex and .txnindex files as the broker's recovery does (dry run unless --execute).")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=str))
@click.option("--all", "rebuild_all", is_flag=True,
              help="Rewrite every index file that differs from a recovery rebuild, even one that passes verify's "
                   "index checks (a live broker indexes once per append, recovery once per batch: their entries "
                   "are spaced differently and both are right). Without it only wrong, missing or non-covering "
                   "index files are rewritten.")
@repair_options(
    "segment",
    index_help="The topic's index.interval.bytes: an entry is added when more than N bytes have passed since the last one.",
    backup_help="Where the replaced files go (default: kafkatool-backup-<log dir name>-<UTC time> beside each log dir).",
)
def reindex(paths, rebuild_all, execute, index_interval_bytes, backup_dir, force, allow_transitional, fmt, quiet) -> None:
    """Rebuild the offset index (.index), time index (.timeindex) and transaction index
    (.txnindex) of segments, partition directories or whole log dirs exactly as the broker's
    recovery does: an entry whenever more than --index-interval-bytes have passed since the last
    one, the final time-index entry, trimmed files of exact length; the .txnindex from the ABORT
    markers when the producer state at the segment's base is known (its own .snapshot, or a replay
    of the earlier segments). The .log is never changed.

    By default only the index files that need it are rewritten: a missing .index or .timeindex,
    and a file that `kafkatool verify` finds wrong (corrupt, inconsistent with the log) or, for
    the .index, one that does not cover the log. A broker's own indexes (one entry per append)
    differ from a rebuild (one per batch) and are kept; --all rewrites them too. A segment whose
    rebuild would cover less of the log than the file it replaces (a bad batch in the middle:
    run `kafkatool truncate` first), or whose partition has an interrupted truncate pending, is
    refused and the others go on.

    Without --execute this is a dry run: it prints what would be created or rewritten and changes
    nothing (and warns when a live broker holds the log dir). With --execute every replaced file
    is first copied to a backup directory; the new partition directory is built beside the old
    one (a staging directory named like a partition being deleted: new files fsynced, unchanged
    .log files hard-linked) and the two are switched with one atomic exchange, so a crash leaves
    the old state or the new one, never a mix (where the exchange is impossible, files are
    renamed into place under a journal the next run completes); what was written is re-verified.
    Exit status: 0 nothing to change or changes applied; 1 a dry run found changes, or a segment
    was refused, or a file could not be read or has a name Kafka cannot load; 2 bad usage, no
    segment found, an I/O error, or a refusal of the whole run (a live broker holds the log dir,
    a transitional dir); 130 interrupted (the state of each partition dir is printed).
    """
    from kafkatool.repair import (
        apply_all,
        check_partition_dir,
        default_backup_dir,
        find_pending_state,
        log_dir_of,
        plan_reindex_all,
        scan_targets,
    )

    out = sys.stdout
    safe_text_stream(out)
    safe_text_stream(sys.stderr)
    started = time.time()

    with interruptible("reindex", out):
        with exit_on_error(out):
            targets = scan_targets(paths, allow_transitional=allow_transitional)
        refuse_bad_targets(targets, paths)
        segments = targets.segments
        with exit_on_error(out):
            for d in dict.fromkeys(os.path.dirname(s) for s in segments):
                check_partition_dir(d, allow_transitional)
        if not execute:
            warn_live_brokers(
                "reindex", dict.fromkeys(log_dir_of(os.path.dirname(s)) for s in segments),
                "its active segments' indexes change under this plan, and --execute refuses to run until it stops")
        plans = []
        with exit_on_error(out):
            total = 0
            for s in segments:
                try:
                    total += os.path.getsize(s)
                except OSError:
                    pass
            with byte_progress("reindex", "segments", total, quiet or not segments) as advance:
                plans = plan_reindex_all(segments, index_interval_bytes, on_plan=lambda p: advance(p.log_size),
                                         rebuild_all=rebuild_all)

    needing = [p for p in plans if p.needs_changes]
    reports: dict = {}
    refused_at_apply: dict[str, tuple[str, str]] = {}
    backup_roots: set[str] = set()
    states = ApplyStates("reindex", [p.partition_dir for p in needing], find_pending_state)
    problems = targets.problems

    def record(r) -> None:
        reports[r.plan.log_path] = r
        states.finish(r.plan.partition_dir)
        if r.backup_dir:
            backup_roots.add(r.backup_dir)

    def refuse(partition_plans, e) -> None:
        for p in partition_plans:
            refused_at_apply[p.log_path] = (e.kind, str(e))
        states.refuse(partition_plans[0].partition_dir, str(e))

    def report_done() -> None:  # say what was done before the refusal or failure
        if fmt == "jsonl":
            for p in needing:
                if p.log_path in reports:
                    out.write(compact_json(plan_object(p, reports[p.log_path])) + "\n")

    if execute and needing:
        stamp = time.time()
        chooser = backup_dir if backup_dir else (lambda log_dir: default_backup_dir(log_dir, stamp))
        with interruptible("reindex", out, states), exit_on_error(out, report_done, states):
            apply_all(needing, chooser, force=force, allow_transitional=allow_transitional,
                      on_segment=record, on_start=states.start, on_refused=refuse)

    refused = [p for p in plans if p.refused or p.log_path in refused_at_apply]
    findings = [p for p in problems if p.is_finding]
    written = sum(len(r.written) for r in reports.values())
    if fmt == "jsonl":
        for p in problems:
            out.write(compact_json(problem_object(p)) + "\n")
        for p in plans:
            out.write(compact_json(plan_object(p, reports.get(p.log_path), refused_at_apply.get(p.log_path))) + "\n")
        out.write(compact_json({
            "type": "reindex_summary",
            "execute": execute,
            "all": rebuild_all,
            "segments": len(plans),
            "needingChanges": len(needing) - len([p for p in needing if p.log_path in refused_at_apply]),
            "refused": len(refused),
            "problems": len(findings),
            "filesWritten": written,
            "backupDirs": sorted(backup_roots),
            "seconds": round(time.time() - started, 3),
        }) + "\n")
    else:
        for p in problems:
            out.write(f"{p.path}: {'skipped: ' if p.kind == 'skipped' else ''}{p.message}\n")
        for p in plans:
            late = refused_at_apply.get(p.log_path)
            if p.needs_changes or p.bad_tail or p.refused or late:
                out.write("\n".join(plan_lines(p)) + "\n")
                r = reports.get(p.log_path)
                if late is not None:
                    out.write(f"  refused   nothing written: {late[1]}\n")
                elif r is not None:
                    out.write(f"  done      {plural(len(r.written), 'file')} written and re-verified"
                              + (f" ({method_phrase(r.method)})" if r.method else "")
                              + (f"; originals in {r.backup_dir}" if r.backup_dir else "") + "\n")
    out.flush()
    if not quiet:
        tail = ""
        if refused:
            tail += f", {len(refused)} refused"
        if findings:
            tail += f", {plural(len(findings), 'problem')} found"
        if execute:
            changed = len(needing) - len([p for p in needing if p.log_path in refused_at_apply])
            msg = (f"reindex: {plural(len(plans), 'segment')}, {changed} changed{tail}, "
                   f"{plural(written, 'file')} written and re-verified")
            if backup_roots:
                msg += "; originals and RESTORE.txt in " + ", ".join(sorted(backup_roots))
        else:
            files = sum(1 for p in needing for c in p.changes if c.writes)
            msg = (f"reindex (dry run): {plural(len(plans), 'segment')}, {len(needing)} need changes "
                   f"({plural(files, 'file')}){tail}")
            if needing:
                msg += "; run again with --execute to apply"
        sys.stderr.write(msg + "\n")
    if refused or findings or (not execute and needing):
        sys.exit(ExitCode.FINDINGS)
    sys.exit(ExitCode.OK)
