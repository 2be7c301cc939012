"""What ``kafkatool convert`` reports, as text lines and JSON Lines objects: pure functions of the
results of :mod:`kafkatool.convert` (``SegmentResult``, ``PartitionResult``, ``ConvertReport``,
the in-place plans and reports) and of its :class:`~kafkatool.convert.options.Loss`.

Text (standard error): a block per partition (its header line, one line per nonzero loss as
:meth:`Loss.lines` words it, the damaged ranges and salvaged batches with their file and byte
positions, one line per side-file decision), then a one-line summary. JSON Lines (standard
output): one ``convert_segment`` object per segment, one ``convert_partition`` object per
partition (after its segments), a final ``convert_summary``; compact, camelCase keys as the other
commands write them; the loss counters under ``loss`` with the same names in camelCase
(``headers_dropped`` -> ``headersDropped``). The schema is in kafkatool-convert(1).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from kafkatool.render.plans import plural, report_fields
from kafkatool.render.text import CODEC_NAMES  # codec names by id (attributes bits 0-2), as --compression takes them

__all__ = [
    "CODEC_NAMES",
    "camel",
    "loss_object",
    "side_file_lines",
    "side_file_object",
    "segment_object",
    "partition_object",
    "summary_object",
    "partition_lines",
    "run_line",
    "summary_line",
    "strict_message",
    "in_place_plan_lines",
    "in_place_plan_object",
    "in_place_summary_object",
]

def camel(name: str) -> str:
    """``headers_dropped`` -> ``headersDropped`` (the JSON key of a snake_case name)."""
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _camel_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {camel(k): _camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel_keys(v) for v in value]
    return value


def loss_object(loss) -> dict:
    """A :class:`~kafkatool.convert.options.Loss` as JSON: :meth:`Loss.as_dict`'s keys in its
    order, camelCase (``damaged`` entries: ``path``, ``start``, ``end``, ``reason``; ``salvaged``
    entries: ``path``, ``position``, ``offset``, ``storedCrc``, ``computedCrc``), plus ``lossless``
    (nothing lost: what ``--strict`` requires)."""
    obj = _camel_keys(loss.as_dict())
    obj["lossless"] = not loss.any()
    return obj


def _codec(codec: int | None) -> str | None:
    return None if codec is None else CODEC_NAMES[codec] if 0 <= codec < len(CODEC_NAMES) else str(codec)


def _options_object(options) -> dict:
    return {
        "toMagic": options.magic,
        "compression": _codec(options.codec),
        "level": options.level,
        "maxBatchBytes": options.max_batch_bytes,
        "dropAborted": options.drop_aborted,
        "skipDamaged": options.skips_damaged,
        "salvage": options.salvage,
        "strict": options.strict,
    }


# ----------------------------------------------------------------------------- side files


def side_file_object(f) -> dict:
    """One side-file decision (``SideFile``) as JSON: ``name``, ``action``, ``reason``."""
    return {"name": f.name, "action": f.action, "reason": f.reason}


def side_file_lines(files: Iterable, seen: dict | None = None) -> list[str]:
    """Side-file decisions as text, an action word in a 9-character column as in
    :mod:`kafkatool.render.plans`: ``rebuilt``, ``copied`` and ``not copied`` files with the same
    reason share a line (every segment's ``.index`` is rebuilt); a ``dropped`` file gets a line of
    its own, with its reason. With ``seen`` (the ``(action, reason)`` pairs already printed in
    this report, each with the first file it was printed for; updated here), a reason is printed
    once: a later shared line leaves it out, a later dropped line says ``as for <that file>
    above``."""
    seen = {} if seen is None else seen
    lines: list[str] = []
    grouped: dict[tuple[str, str], list[str]] = {}
    for f in files:
        if f.action in ("rebuilt", "copied", "not copied"):
            grouped.setdefault((f.action, f.reason), []).append(f.name)
        else:
            first = seen.setdefault((f.action, f.reason), f.name)
            reason = "" if not f.reason else f": {f.reason}" if first == f.name else f": as for {first} above"
            lines.append(f"  {f.action:<9} {f.name}{reason}")
    head = []
    for (action, reason), names in grouped.items():
        shown = "" if not reason or (action, reason) in seen else f" ({reason})"
        seen.setdefault((action, reason), names[0])
        head.append(f"  {action:<9} {', '.join(names)}{shown}")
    return head + lines


# ----------------------------------------------------------------------------- to DEST


def segment_object(r) -> dict:
    """One segment's result (``SegmentResult``) as a ``convert_segment`` object."""
    return {
        "type": "convert_segment",
        "segment": r.log_path,
        "output": r.out_path,
        "baseOffset": r.base_offset,
        "bytesIn": r.bytes_in,
        "bytesOut": r.bytes_out,
        "batchesOut": r.batches_out,
        "sideFiles": [side_file_object(f) for f in r.side_files],
        "loss": loss_object(r.loss),
    }


def partition_object(p) -> dict:
    """One partition's result (``PartitionResult``) as a ``convert_partition`` object: its own
    side files (snapshots, checkpoints, files not copied) and the loss of its segments merged."""
    return {
        "type": "convert_partition",
        "partitionDir": p.src,
        "dest": p.dest,
        "topic": p.topic,
        "partition": p.partition,
        "segments": len(p.segments),
        "bytesIn": sum(s.bytes_in for s in p.segments),
        "bytesOut": sum(s.bytes_out for s in p.segments),
        "sideFiles": [side_file_object(f) for f in p.side_files],
        "loss": loss_object(p.loss),
    }


def summary_object(plan, loss, partitions: Sequence, *, written: bool, seconds: float,
                   strict_failed: bool = False, side_files: Iterable = ()) -> dict:
    """The final ``convert_summary`` object of a conversion to DEST (or of its ``--strict``
    analysis that found a loss: ``written`` false, ``strictFailed`` true); ``side_files``: the
    log dir's own (checkpoints, ``meta.properties``, what was not copied)."""
    segments = [s for p in partitions for s in p.segments]
    obj = {
        "type": "convert_summary",
        "src": plan.src,
        "dest": plan.dest,
        "kind": plan.kind,
        "inPlace": False,
        "execute": written,
        **_options_object(plan.options),
        "partitions": len(plan.partitions) if not partitions else len(partitions),
        "segments": len(plan.segments) if not segments else len(segments),
        "bytesIn": plan.total_bytes if not segments else sum(s.bytes_in for s in segments),
        "bytesOut": sum(s.bytes_out for s in segments),
        "written": written,
        "strictFailed": strict_failed,
        "sideFiles": [side_file_object(f) for f in side_files],
        "loss": loss_object(loss),
        "seconds": round(seconds, 3),
    }
    return obj


def _magics(loss) -> str:
    return (f"{plural(loss.batches_in, 'batch', 'batches')} -> {loss.batches_out}, "
            f"{plural(loss.records_in, 'record')} -> {loss.records_out}")


def partition_lines(p, seen: dict | None = None) -> list[str]:
    """One partition's block of the text report: a header line (where it went, batches and
    records in and out, bytes), its losses (:meth:`Loss.lines`, indented) and side files
    (``seen``: see :func:`side_file_lines`)."""
    bytes_in = sum(s.bytes_in for s in p.segments)
    bytes_out = sum(s.bytes_out for s in p.segments)
    dest = f" -> {p.dest}" if p.dest else ""
    lines = [f"{p.src}{dest}: {plural(len(p.segments), 'segment')}, {_magics(p.loss)}, "
             f"{bytes_in} -> {plural(bytes_out, 'byte')}"]
    lines += _lost_lines(p.loss)
    files = [f for s in p.segments for f in s.side_files] + list(p.side_files)
    lines += side_file_lines(files, seen)
    return lines


def run_line(plan) -> str:
    """The first line of the text report: what is converted, into what, and how."""
    o = plan.options
    codec = "each batch's own codec" if o.codec is None else _codec(o.codec)
    level = "" if o.level is None else f" level {o.level}"
    where = f" -> {plan.dest}" if plan.dest else ""
    return f"convert: {plan.src}{where} ({plan.kind}; to magic {o.magic}, {codec}{level})"


def summary_line(loss, partitions: Sequence, *, dest: str | None, seconds: float) -> str:
    """The last line on standard error: counts, bytes, where it went, and lossless or not."""
    segments = [s for p in partitions for s in p.segments]
    bytes_in = sum(s.bytes_in for s in segments)
    bytes_out = sum(s.bytes_out for s in segments)
    kinds = len([line for line in loss.lines() if not line.startswith("  ")])
    verdict = "nothing lost" if not loss.any() else f"{plural(kinds, 'kind')} of loss (listed above)"
    where = f", written to {dest}" if dest else ""
    return (f"convert: {plural(len(partitions), 'partition')}, {plural(len(segments), 'segment')}, "
            f"{_magics(loss)}, {bytes_in} -> {plural(bytes_out, 'byte')}{where} in {seconds:.1f} s; {verdict}")


def strict_message(loss) -> str:
    """The ``--strict`` error: every loss the conversion would cause, in one message."""
    items = [line for line in loss.lines() if not line.startswith("  ")]
    return "--strict: the conversion would lose data: " + "; ".join(items) + "; nothing was written"


# ----------------------------------------------------------------------------- in place


def _lost_lines(loss) -> list[str]:
    """:meth:`Loss.lines` in a plan or report block: ``lost`` in the action column, the listed
    ranges and batches under it."""
    return [f"  lost      {line}" if not line.startswith("  ") else f"            {line.strip()}"
            for line in loss.lines()]


def in_place_plan_lines(plan) -> list[str]:
    """One partition's ``--in-place`` plan (``InPlacePlan``) as text: a header line, then what
    happens to it: ``refused`` (why), ``unchanged`` (at the target already), or ``convert`` with
    the losses it would cause and the files the new state replaces (their originals go to the
    backup)."""
    head = f"{plan.partition_dir}: {plural(plan.segments, 'segment')}, {plural(plan.bytes_in, 'byte')}"
    if plan.loss is not None:
        head += f", {_magics(plan.loss)}"
    lines = [head]
    o = plan.options
    codec = "each batch's own codec" if o.codec is None else _codec(o.codec)
    if plan.refused:
        lines.append(f"  refused   nothing written: {plan.refused}")
        if plan.loss is not None:
            lines += _lost_lines(plan.loss)
        return lines
    if plan.already:
        lines.append(f"  unchanged every batch is at magic {o.magic} and {codec} already")
    else:
        lines.append(f"  convert   to magic {o.magic}, {codec}" + ("" if o.level is None else f" level {o.level}"))
        if plan.loss is not None:
            lines += _lost_lines(plan.loss)
        lines.append(f"  replace   {plural(len(plan.files), 'file')} (every file of the partition dir; "
                     "the originals go to the backup)")
    for p in plan.staging_leftovers:
        lines.append(f"  remove    {p}: the staging directory of an interrupted kafkatool run "
                     "(named like a partition being deleted; the partition dir itself is complete)")
    return lines


def in_place_plan_object(plan, report=None, refused: str | None = None) -> dict:
    """One partition's ``--in-place`` plan (and, after ``--execute``, what was done) as a
    ``convert_partition`` object with ``inPlace`` true. ``refused``: why apply refused it under
    the lock (nothing of it was written)."""
    why = None
    if plan.refused:
        why = {"kind": plan.refused_kind, "reason": plan.refused}
    elif refused is not None:
        why = {"kind": "changed", "reason": refused}
    obj = {
        "type": "convert_partition",
        "partitionDir": plan.partition_dir,
        "src": plan.src,
        "dest": None,
        "inPlace": True,
        "segments": plan.segments,
        "bytesIn": plan.bytes_in,
        "files": [f.name for f in plan.files],
        "already": plan.already,
        "loss": None if plan.loss is None else loss_object(plan.loss),
        "stagingLeftovers": list(plan.staging_leftovers),
        "refused": why,
        "needsChanges": bool(plan.needs_changes) and why is None,
    }
    if report is not None:
        obj.update(report_fields(report))
    return obj


def in_place_summary_object(plans: Sequence, options, loss, *, execute: bool, changed: int, refused: int,
                            backup_dirs: Sequence[str], seconds: float) -> dict:
    """The final ``convert_summary`` object of an ``--in-place`` run."""
    return {
        "type": "convert_summary",
        "src": None,
        "dest": None,
        "kind": "in_place",
        "inPlace": True,
        "execute": execute,
        **_options_object(options),
        "partitions": len(plans),
        "needingChanges": len([p for p in plans if p.needs_changes]),
        "changed": changed,
        "refused": refused,
        "backupDirs": list(backup_dirs),
        "strictFailed": any(p.refused_kind == "strict" for p in plans),
        "loss": loss_object(loss),
        "seconds": round(seconds, 3),
    }
