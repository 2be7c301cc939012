"""Plans and reports of the commands that write (reindex, truncate, restore), as text lines and
JSON Lines objects: pure functions of the plan and report objects of :mod:`kafkatool.reindex`,
:mod:`kafkatool.truncate` and :mod:`kafkatool.restore`. The CLI writes what these return.

Text: one line per item of a plan, never wrapped, an action word in a 9-character column
(``  rewrite   00000000000000000000.index: ...``). JSON Lines: one object per segment (reindex),
partition (truncate) or file (restore), with the report's fields added after ``--execute``.
"""

from __future__ import annotations

import os
from hashlib import sha256

__all__ = [
    "plural",
    "method_phrase",
    "done_line",
    "reindex_file_line",
    "reindex_plan_lines",
    "reindex_plan_object",
    "truncate_plan_lines",
    "truncate_plan_object",
    "restore_step_line",
    "restore_file_lines",
    "restore_file_object",
    "problem_line",
    "problem_object",
    "report_fields",
]


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 segment``, ``2 segments`` (``words`` when the plural is not ``word + "s"``)."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def method_phrase(method: str) -> str:
    """A report's ``method`` (``exchange``, ``journal (why)``) as a phrase for the ``done`` line."""
    if method == "exchange":
        return "the partition dir switched at once"
    return "renamed one by one under a journal: " + method.removeprefix("journal (").removesuffix(")")


def done_line(what: str, method: str | None, backup_dir: str | None, kept: str) -> str:
    """The ``done`` line after a plan applied: ``what`` was done, how (``method``), and where
    the backup keeps ``kept``."""
    return (f"  done      {what}" + (f" ({method_phrase(method)})" if method else "")
            + (f"; {kept} in {backup_dir}" if backup_dir else ""))


def problem_line(problem) -> str:
    """A target problem (a stray name, an unreadable dir, a skipped dir) as one line of text."""
    return f"{problem.path}: {'skipped: ' if problem.kind == 'skipped' else ''}{problem.message}"


def problem_object(command: str, problem) -> dict:
    """A target problem as a JSON Lines object of ``command`` (type ``<command>_problem``)."""
    return {"type": f"{command}_problem", "path": problem.path, "kind": problem.kind, "message": problem.message}


def report_fields(report) -> dict:
    """What ``--execute`` did to a plan, as the JSON fields every command adds to the plan's
    object, in this order: ``written``, ``moved`` (a report that moves files), ``removed``,
    ``backupDir``, ``completedInterruptedRun`` (a report that can complete a journal),
    ``method``, ``verified``."""
    out: dict = {"written": list(report.written)}
    if hasattr(report, "moved"):
        out["moved"] = list(report.moved)
    out["removed"] = list(report.removed_leftovers)
    out["backupDir"] = report.backup_dir
    if hasattr(report, "completed_journal"):
        out["completedInterruptedRun"] = report.completed_journal
    out["method"] = report.method
    out["verified"] = report.verified
    return out


def _name(path: str) -> str:
    return os.path.basename(path)


# ----------------------------------------------------------------------------- reindex


def reindex_file_line(c) -> str:
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


def reindex_plan_lines(plan) -> list[str]:
    """The text form of one segment's plan (pure)."""
    if plan.refused_kind in ("unreadable", "not_regular", "pending_truncate") and not plan.changes:
        return [f"{plan.log_path}: refused: {plan.refused}"]
    offsets = "no batches" if plan.first_offset is None else f"offsets {plan.first_offset}-{plan.last_offset}"
    lines = [f"{plan.log_path}: {plural(plan.batches, 'batch', 'batches')}, {offsets}, "
             f"{plan.valid_bytes} valid bytes of {plan.log_size}"]
    lines += [reindex_file_line(c) for c in plan.changes]
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


def reindex_plan_object(plan, report=None, refused: tuple[str, str] | None = None) -> dict:
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
                "newSha256": sha256(c.data).hexdigest(),
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
        obj.update(report_fields(report))
    return obj


# ----------------------------------------------------------------------------- truncate


def _offsets(first: int, last: int) -> str:
    return f"offset {first}" if first == last else f"offsets {first}-{last}"


def truncate_plan_lines(plan) -> list[str]:
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


def truncate_plan_object(plan, report=None, refused: str | None = None) -> dict:
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
        obj.update(report_fields(report))
    return obj


# ----------------------------------------------------------------------------- restore

_WHAT = {
    "splice": "{n} back into the .log ({result} -> {original} bytes)",
    "copy": "the original back ({original} bytes) from {backup}",
    "remove": "the file {tool} created",
}


def restore_step_line(step) -> str:
    """One step of a file's restore, as text (pure)."""
    e = step.entry
    text = _WHAT[step.action].format(
        n=plural(len(e.pieces), "removed byte range"),
        result=None if e.result is None else e.result.size,
        original=None if e.original is None else e.original.size,
        backup=step.backup_files[0] if step.backup_files else "",
        tool=e.tool or "kafkatool",
    )
    return f"  {step.action:<9} {text} (undoes {e.tool or 'kafkatool'} {e.action}, entry {e.seq})"


def restore_file_lines(f) -> list[str]:
    """The text form of one file that needs restoring (pure)."""
    return [f"{f.target}:"] + [restore_step_line(s) for s in f.steps]


def restore_file_object(f, restored: bool | None = None) -> dict:
    """The JSON Lines form of one file of the backup (pure)."""
    obj = {
        "type": "restore_file",
        "path": f.target,
        "logDir": f.log_dir,
        "relativePath": f.path,
        "needsChanges": f.needs_changes,
        "steps": [
            {"action": s.action, "entry": s.entry.seq, "run": s.entry.run, "tool": s.entry.tool,
             "undoes": s.entry.action, "backupFiles": list(s.backup_files)}
            for s in f.steps
        ],
        "original": None if f.final is None else f.final.to_json(),
    }
    if restored is not None:
        obj["restored"] = restored
    return obj
