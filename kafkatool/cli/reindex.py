"""``kafkatool reindex``: rebuild ``.index``/``.timeindex``/``.txnindex`` as the broker's recovery does (plan, then apply)."""

from __future__ import annotations

import os
import sys
import time

import click

from kafkatool.cli.main import ExitCode
from kafkatool.cli.options import ApplyStates, byte_progress, compact_json, execute_plans, exit_on_error, find_targets
from kafkatool.cli.options import interruptible, repair_options, safe_text_stream, total_size, warn_live_brokers
from kafkatool.render.plans import done_line, plural, problem_line, problem_object
from kafkatool.render.plans import reindex_plan_lines as plan_lines
from kafkatool.render.plans import reindex_plan_object as plan_object


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
    from kafkatool.reindex import apply_all, plan_reindex_all
    from kafkatool.safety import check_partition_dir, find_pending_state, log_dir_of

    out = sys.stdout
    safe_text_stream(out)
    safe_text_stream(sys.stderr)
    started = time.time()

    with interruptible("reindex", out):
        targets = find_targets(paths, out, allow_transitional=allow_transitional)
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
            with byte_progress("reindex", "segments", total_size(segments), quiet or not segments) as advance:
                plans = plan_reindex_all(segments, index_interval_bytes, on_plan=lambda p: advance(p.log_size),
                                         rebuild_all=rebuild_all)

    needing = [p for p in plans if p.needs_changes]
    states = ApplyStates("reindex", [p.partition_dir for p in needing], find_pending_state)
    problems = targets.problems
    reports: dict = {}
    refused_at_apply: dict[str, tuple[str, str]] = {}
    if execute:
        reports, late = execute_plans("reindex", needing, _segment, apply_all, backup_dir=backup_dir, states=states,
                                      out=out, fmt=fmt, plan_object=plan_object, force=force,
                                      allow_transitional=allow_transitional)
        refused_at_apply = {k: (e.kind, str(e)) for k, e in late.items()}
    backup_roots = {r.backup_dir for r in reports.values() if r.backup_dir}

    refused = [p for p in plans if p.refused or p.log_path in refused_at_apply]
    findings = [p for p in problems if p.is_finding]
    written = sum(len(r.written) for r in reports.values())
    if fmt == "jsonl":
        for p in problems:
            out.write(compact_json(problem_object("reindex", p)) + "\n")
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
            out.write(problem_line(p) + "\n")
        for p in plans:
            late = refused_at_apply.get(p.log_path)
            if p.needs_changes or p.bad_tail or p.refused or late:
                out.write("\n".join(plan_lines(p)) + "\n")
                r = reports.get(p.log_path)
                if late is not None:
                    out.write(f"  refused   nothing written: {late[1]}\n")
                elif r is not None:
                    out.write(done_line(f"{plural(len(r.written), 'file')} written and re-verified", r.method,
                                        r.backup_dir, "originals") + "\n")
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


def _segment(plan) -> str:
    """What one reindex plan and its report are keyed by."""
    return plan.log_path
