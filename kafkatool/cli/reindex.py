"""``kafkatool reindex``: rebuild ``.index``/``.timeindex`` as the broker's recovery does (plan, then apply)."""

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
    """The text form of one segment's plan (pure)."""
    lines = []
    offsets = "no batches" if plan.first_offset is None else f"offsets {plan.first_offset}-{plan.last_offset}"
    lines.append(
        f"{plan.log_path}: {plan.batches} batches, {offsets}, {plan.valid_bytes} valid bytes of {plan.log_size}"
    )
    for c in plan.changes:
        if c.action == "unchanged":
            lines.append(f"  unchanged {_name(c.path)}: {c.new_size} bytes, {c.new_entries} entries")
        elif c.action == "create":
            lines.append(f"  create    {_name(c.path)}: {c.new_size} bytes, {c.new_entries} entries")
        else:
            lines.append(
                f"  rewrite   {_name(c.path)}: bytes [0, {c.old_size}) replaced by {c.new_size} bytes, "
                f"{c.old_entries} -> {c.new_entries} entries"
            )
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


def plan_object(plan, report=None, error: str | None = None) -> dict:
    """The JSON Lines form of one segment's plan and, after --execute, what was done (pure)."""
    import hashlib

    obj = {
        "type": "reindex_segment",
        "segment": plan.log_path,
        "base_offset": plan.base_offset,
        "index_interval_bytes": plan.index_interval_bytes,
        "batches": plan.batches,
        "first_offset": plan.first_offset,
        "last_offset": plan.last_offset,
        "log_size": plan.log_size,
        "valid_bytes": plan.valid_bytes,
        "bad_tail": None
        if not plan.bad_tail
        else {"start": plan.valid_bytes, "end": plan.log_size, "bytes": plan.bad_tail_bytes, "reason": plan.bad_tail},
        "files": [
            {
                "path": c.path,
                "kind": c.kind,
                "action": c.action,
                "old_size": c.old_size,
                "new_size": c.new_size,
                "old_entries": c.old_entries,
                "new_entries": c.new_entries,
                "old_sha256": c.old_sha256,
                "new_sha256": hashlib.sha256(c.data).hexdigest(),
            }
            for c in plan.changes
        ],
        "txnindex_not_rebuilt": plan.txn_unavailable,
        "leftovers": list(plan.leftovers),
        "staging_leftovers": list(plan.staging_leftovers),
        "needs_changes": plan.needs_changes,
    }
    if report is not None:
        obj["written"] = list(report.written)
        obj["removed"] = list(report.removed_leftovers)
        obj["backup_dir"] = report.backup_dir
        obj["method"] = report.method
        obj["verified"] = report.verified
    return obj


@click.command(context_settings={"max_content_width": 100}, short_help="Rebuild .index and .timeindex as the broker's recovery does (dry run unless --execute).")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=str))
@repair_options(
    "segment",
    index_help="The topic's index.interval.bytes: an entry is added when more than N bytes have passed since the last one.",
    backup_help="Where the replaced files go (default: kafkatool-backup-<log dir name>-<UTC time> beside each log dir).",
)
def reindex(paths, execute, index_interval_bytes, backup_dir, force, allow_transitional, fmt, quiet) -> None:
    """Rebuild the offset index (.index) and time index (.timeindex) of segments, partition
    directories or whole log dirs exactly as the broker's recovery does: an entry whenever more
    than --index-interval-bytes have passed since the last one, the final time-index entry, and
    trimmed files of exact length; and the .txnindex from the ABORT markers when the producer state
    at the segment's base is known (its own .snapshot, or a replay of the earlier segments). The .log
    is never changed.

    Without --execute this is a dry run: it prints what would be created or rewritten and changes
    nothing. With --execute every replaced file is first copied to a backup directory; the new
    partition directory is built beside the old one (a staging directory named like a partition
    being deleted: new files fsynced, unchanged .log files hard-linked) and the two are switched
    with one atomic exchange, so a crash leaves the old state or the new one, never a mix (where
    the exchange is impossible, files are renamed into place under a journal the next run
    completes); what was written is re-verified. Exit status: 0 nothing to change or changes
    applied, 1 a dry run found changes, 2 bad usage, an I/O error, or a refusal (a live broker
    holds the log dir, a transitional dir).
    """
    from kafkatool.repair import (
        apply_all,
        check_partition_dir,
        default_backup_dir,
        find_segments,
        plan_reindex_all,
    )

    out = sys.stdout
    started = time.time()

    with exit_on_error(out):
        segments = find_segments(paths)
        for d in dict.fromkeys(os.path.dirname(s) for s in segments):
            check_partition_dir(d, allow_transitional)

    plans = []
    with exit_on_error(out):
        total = sum(os.path.getsize(s) for s in segments)
        with byte_progress("reindex", "segments", total, quiet or not segments) as advance:
            plans = plan_reindex_all(segments, index_interval_bytes, on_plan=lambda p: advance(p.log_size))

    needing = [p for p in plans if p.needs_changes]
    reports = {}
    backup_roots: set[str] = set()

    def report_done() -> None:  # say what was done before the refusal or failure
        for p in needing:
            if p.log_path in reports and fmt == "jsonl":
                out.write(json.dumps(plan_object(p, reports[p.log_path])) + "\n")

    if execute and needing:
        stamp = time.time()
        chooser = backup_dir if backup_dir else (lambda log_dir: default_backup_dir(log_dir, stamp))
        with exit_on_error(out, report_done):
            for r in apply_all(needing, chooser, force=force, allow_transitional=allow_transitional):
                reports[r.plan.log_path] = r
                if r.backup_dir:
                    backup_roots.add(r.backup_dir)

    written = sum(len(r.written) for r in reports.values())
    if fmt == "jsonl":
        for p in plans:
            out.write(json.dumps(plan_object(p, reports.get(p.log_path))) + "\n")
        out.write(json.dumps({
            "type": "reindex_summary",
            "execute": execute,
            "segments": len(plans),
            "needing_changes": len(needing),
            "files_written": written,
            "backup_dirs": sorted(backup_roots),
            "seconds": round(time.time() - started, 3),
        }) + "\n")
    else:
        for p in plans:
            if p.needs_changes or p.bad_tail:
                out.write("\n".join(plan_lines(p)) + "\n")
                r = reports.get(p.log_path)
                if r is not None:
                    out.write(f"  done      {len(r.written)} files written and re-verified"
                              + (f" ({method_phrase(r.method)})" if r.method else "")
                              + (f"; originals in {r.backup_dir}" if r.backup_dir else "") + "\n")
    out.flush()
    if not quiet:
        err = sys.stderr
        if execute:
            msg = f"reindex: {len(plans)} segments, {len(needing)} changed, {written} files written and re-verified"
            if backup_roots:
                msg += "; originals and RESTORE.txt in " + ", ".join(sorted(backup_roots))
        else:
            files = sum(1 for p in needing for c in p.changes if c.action != "unchanged")
            msg = f"reindex (dry run): {len(plans)} segments, {len(needing)} need changes ({files} files)"
            if needing:
                msg += "; run again with --execute to apply"
        err.write(msg + "\n")
    if not execute and needing:
        sys.exit(ExitCode.FINDINGS)
    sys.exit(ExitCode.OK)
