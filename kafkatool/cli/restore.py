"""``kafkatool restore``: put back what reindex/truncate changed, from their backup dir (plan, then apply)."""

from __future__ import annotations

import sys
import time

import click

from kafkatool.cli.main import ExitCode
from kafkatool.cli.options import compact_json, exit_on_error, interruptible, safe_text_stream, warn_live_brokers
from kafkatool.render.plans import plural
from kafkatool.render.plans import restore_file_lines as file_lines
from kafkatool.render.plans import restore_file_object as file_object


@click.command(context_settings={"max_content_width": 100},
               short_help="Put back what reindex or truncate changed, from their backup dir (dry run unless --execute).")
@click.argument("backup_dir", type=click.Path(exists=True, file_okay=False, path_type=str))
@click.option("--execute", is_flag=True, help="Put the originals back. Without it, print the plan and change nothing (exit status 1 when files need restoring).")
@click.option("--log-dir", "log_dirs", multiple=True, metavar="[OLD=]NEW",
              help="Restore into NEW instead of the log dir recorded in the backup (the mount moved). OLD=NEW when the backup covers several log dirs.")
@click.option("--force", is_flag=True, help="Skip the .lock check. Only for a copy you know no broker is using.")
@click.option("--format", "fmt", type=click.Choice(["text", "jsonl"]), default="text", show_default=True,
              help="text: one block per file that needs restoring; jsonl: one JSON object per file of the backup and a final summary.")
@click.option("--quiet", "-q", is_flag=True, help="No summary on stderr.")
def restore(backup_dir, execute, log_dirs, force, fmt, quiet) -> None:
    """Put back every file that `kafkatool reindex --execute` or `kafkatool truncate --execute`
    changed, from the backup dir it wrote (its MANIFEST.json): removed byte ranges are spliced back
    into their .log at their original positions, rewritten and moved files are copied back, files
    the command created are removed, with the original owner, mode and modification time.

    Without --execute this is a dry run: it checks the backup and the files and prints what would
    be put back. Every file is compared with the manifest's sha256 first: a file that is neither
    the original nor what kafkatool left (a broker wrote to it since) is refused, and so is a
    backup file that does not match its sha256; then nothing is written. With --execute, under
    the log dir's lock, each file is rebuilt beside the target, checked against the original's
    sha256, fsynced and renamed into place; afterwards every restored file is hashed again. When
    several runs shared the backup dir, their changes are undone newest first. Running it twice is
    harmless. RESTORE.txt in the backup dir does the same without kafkatool (sh -e RESTORE.txt).
    """
    from kafkatool.restore import apply_restore, log_dirs_to_lock, map_log_dirs, plan_restore
    from kafkatool.safety import LogDirLock, read_manifest

    out = sys.stdout
    safe_text_stream(out)
    safe_text_stream(sys.stderr)
    started = time.time()
    report = None
    with interruptible("restore", out), exit_on_error(out):
        mapping = map_log_dirs(read_manifest(backup_dir), log_dirs)
        plan = plan_restore(backup_dir, mapping)
        locks = []
        if execute and plan.needs_changes and not plan.problems:
            locks = [LogDirLock(d, force=force) for d in log_dirs_to_lock(plan)]
        try:
            for lock in locks:
                lock.acquire()
            if locks:
                plan = plan_restore(backup_dir, mapping)  # again under the lock: nothing may move in between
            for problem in plan.problems:
                sys.stderr.write(f"kafkatool: error: {problem}\n")
            if plan.problems:
                out.flush()
                sys.stderr.write(f"kafkatool restore: refused, nothing was written ({plural(len(plan.problems), 'problem')})\n")
                sys.exit(ExitCode.USAGE)
            if execute and plan.needs_changes:
                try:
                    report = apply_restore(plan)
                except KeyboardInterrupt:
                    out.flush()
                    sys.stderr.write(("\n" if sys.stderr.isatty() else "")
                                     + "kafkatool restore: interrupted during --execute; each file is either what it "
                                       "was or restored (every file is replaced atomically): run the same command "
                                       "again to finish\n")
                    sys.exit(ExitCode.INTERRUPTED)
        finally:
            for lock in locks:
                lock.release()
    if not execute and plan.needs_changes:
        warn_live_brokers(
            "restore", log_dirs_to_lock(plan),
            'stop it first; --execute refuses to run until it stops')
    needing = [f for f in plan.files if f.needs_changes]
    done = set(report.restored) if report is not None else set()
    if fmt == "jsonl":
        for f in plan.files:
            out.write(compact_json(file_object(f, (f.target in done) if execute else None)) + "\n")
        out.write(compact_json({
            "type": "restore_summary",
            "backupDir": plan.backup_dir,
            "execute": execute,
            "files": len(plan.files),
            "needingChanges": len(needing),
            "restored": len(done),
            "logDirs": dict(plan.log_dirs),
            "leftovers": list(plan.leftovers),
            "notes": list(plan.notes),
            "seconds": round(time.time() - started, 3),
        }) + "\n")
    else:
        for f in needing:
            out.write("\n".join(file_lines(f)) + "\n")
            if f.target in done:
                out.write("  done      the original is back (sha256 verified)\n")
        for p in plan.leftovers:
            out.write(f"{p}:\n  remove    left by an interrupted kafkatool run before its commit point\n")
        for n in plan.notes:
            out.write(f"note: {n}\n")
    out.flush()
    if not quiet:
        already = len(plan.files) - len(needing)
        if execute:
            msg = (f"restore: {plural(len(plan.files), 'file')} in {plan.backup_dir}: {len(done)} put back and verified "
                   f"(sha256), {already} already the original")
            if report is not None and not report.ownership_kept:
                msg += f"; {plural(len(report.skipped_owner), 'file')} could not be given the recorded owner (not root)"
        else:
            msg = (f"restore (dry run): {plural(len(plan.files), 'file')} in {plan.backup_dir}: {len(needing)} to put back, "
                   f"{already} already the original")
            if plan.leftovers:
                msg += f", {plural(len(plan.leftovers), 'leftover')} of interrupted runs to remove"
            if plan.needs_changes:
                msg += "; stop the broker, then run again with --execute"
        sys.stderr.write(msg + "\n")
    if not execute and plan.needs_changes:
        sys.exit(ExitCode.FINDINGS)
    sys.exit(ExitCode.OK)
