"""Rendering ``kafkatool stats`` results (:class:`~kafkatool.stats.PartitionStats`): a text block
per partition, JSON Lines (one object per partition and a final summary), a Rich table, and
the summary for standard error.

Pure functions of the result model; only :func:`render_table` imports Rich, when called.
JSON names follow ``dump``'s and ``verify``'s (camelCase, Kafka's field names where Kafka has
one: ``producerId``, ``producerEpoch``, ``lastSequence``); the schema is in kafkatool-stats(1).
"""

from __future__ import annotations

import json
from typing import Iterable

from kafkatool.render.times import iso_time
from kafkatool.stats import CheckpointComparison, CheckpointState, PartitionStats, Problem

__all__ = [
    "problem_fields",
    "CHECKPOINT_KEYS",
    "dumps",
    "partition_object",
    "summary_object",
    "partition_text",
    "summary_line",
    "render_table",
]

#: The JSON key of each checkpoint's comparison.
CHECKPOINT_KEYS = {
    "recovery-point-offset-checkpoint": "recoveryPoint",
    "replication-offset-checkpoint": "replication",
    "log-start-offset-checkpoint": "logStart",
}
_SHORT = {"recovery-point-offset-checkpoint": "recovery point", "replication-offset-checkpoint": "replication",
          "log-start-offset-checkpoint": "log start"}

dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
"""Compact JSON, as dump's and verify's lines."""


def problem_fields(p: Problem) -> dict:
    """A located problem's JSON fields (``stats``, ``groups`` and ``transactions`` print the same)."""
    return {"file": p.file, "position": p.position, "kind": p.kind, "message": p.message}


def _iso(ms: int | None) -> str:
    return "" if ms is None else iso_time(ms)


# ----------------------------------------------------------------------------- JSON Lines


def _checkpoint_object(c: CheckpointComparison) -> dict:
    return {"offset": c.offset, "logEnd": c.state.value}


def partition_object(s: PartitionStats) -> dict:
    """One ``"type": "partition"`` object (``"type": "segment"`` for a ``.log`` named alone)."""
    obj: dict = {"type": "segment", "file": s.path} if s.is_file else {"type": "partition", "partitionDir": s.path}
    obj.update({
        "topic": s.topic,
        "partition": s.partition,
        "state": s.state,
        "segments": s.segments,
        "bytes": s.bytes,
        "batchBytes": s.batch_bytes,
        "trailingBytes": s.trailing_bytes,
        "batches": s.batches,
        "records": s.records,
        "unopenedWrappers": s.unopened_wrappers,
        "firstOffset": s.first_offset,
        "lastOffset": s.last_offset,
        "logEndOffset": s.log_end,
        "minTimestamp": s.min_timestamp,
        "maxTimestamp": s.max_timestamp,
        "magics": {str(m): n for m, n in s.magics.items()},
        "codecs": s.codecs,
        "timestampTypes": s.timestamp_types,
        "transactionalBatches": s.transactional_batches,
        "controlBatches": s.control_batches,
        "controlTypes": s.control_types,
        "crcMismatches": s.crc_mismatches,
        "idempotentBatches": s.idempotent_batches,
        "producers": {
            "count": s.producer_count,
            "countExact": s.producer_count_exact,
            "listed": [
                {"producerId": p.producer_id, "producerEpoch": p.producer_epoch, "lastSequence": p.last_sequence,
                 "lastOffset": p.last_offset, "batches": p.batches, "records": p.records}
                for p in s.producers
            ],
            "notListed": s.producers_not_listed,
        },
        "checkpoints": {CHECKPOINT_KEYS[c.name]: _checkpoint_object(c) for c in s.checkpoints},
        "problems": [problem_fields(p) for p in s.problems],
        "problemsNotListed": s.problems_not_listed,
    })
    return obj


def summary_object(stats: list[PartitionStats], seconds: float) -> dict:
    """The final ``"type": "summary"`` object."""
    return {
        "type": "summary",
        "partitions": sum(1 for s in stats if not s.is_file),
        "files": sum(1 for s in stats if s.is_file),
        "segments": sum(s.segments for s in stats),
        "bytes": sum(s.bytes for s in stats),
        "batches": sum(s.batches for s in stats),
        "records": sum(s.records for s in stats),
        "withProblems": sum(1 for s in stats if s.problems),
        "problems": sum(len(s.problems) + s.problems_not_listed for s in stats),
        "seconds": round(seconds, 3),
    }


# ----------------------------------------------------------------------------- text


def _plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else (words or word + 's')}"


def _counts(counts: dict, prefix: str = "") -> str:
    return ", ".join(f"{prefix}{k} {n}" for k, n in counts.items()) or "-"


def _offsets(s: PartitionStats) -> str:
    if s.first_offset is None:
        return "no batches" + ("" if s.log_end is None else f", log end {s.log_end}")
    return f"{s.first_offset}..{s.last_offset}, log end {s.log_end}"


def _time_range(s: PartitionStats) -> str:
    if s.min_timestamp is None and s.max_timestamp is None:
        return "-"
    low = "?" if s.min_timestamp is None else f"{iso_time(s.min_timestamp) or s.min_timestamp}"
    high = "?" if s.max_timestamp is None else f"{iso_time(s.max_timestamp) or s.max_timestamp}"
    return f"{low} .. {high}"


def _records(s: PartitionStats) -> str:
    text = f"{s.records}"
    if s.unopened_wrappers:
        text += f" (+ the records of {_plural(s.unopened_wrappers, 'compressed legacy wrapper')}, not opened: --deep counts them)"
    return text


def _producers(s: PartitionStats) -> list[str]:
    if not s.producer_count:
        return ["-"]
    head = f"{s.producer_count}" if s.producer_count_exact else f"more than {s.producer_count}"
    lines = [f"{head} ({_plural(s.idempotent_batches, 'batch', 'batches')} with a producer id)"]
    for p in s.producers:
        lines.append(f"id {p.producer_id} epoch {p.producer_epoch} last sequence {p.last_sequence} "
                     f"last offset {p.last_offset} ({_plural(p.batches, 'batch', 'batches')}, {_plural(p.records, 'record')})")
    if s.producers_not_listed:
        lines.append(f"and {s.producers_not_listed}{'' if s.producer_count_exact else '+'} more (--producers N lists more)")
    return lines


def _transactions(s: PartitionStats) -> str:
    text = f"{_plural(s.transactional_batches, 'transactional batch', 'transactional batches')}, " \
           f"{_plural(s.control_batches, 'control batch', 'control batches')}"
    if s.control_types:
        text += " (" + _counts(s.control_types) + ")"
    return text


def _more(n: int) -> list[str]:
    return [f"and {_plural(n, 'more problem')} not listed"] if n else []


def _checkpoint(c: CheckpointComparison) -> str:
    if c.state in (CheckpointState.EQUAL, CheckpointState.BEHIND, CheckpointState.AHEAD):
        return f"{c.name} {c.offset}: log end {c.state.value}"
    if c.offset is not None:
        return f"{c.name} {c.offset}: {c.state.value.replace('_', ' ')}"
    return f"{c.name}: {c.state.value.replace('_', ' ')}"


def partition_text(s: PartitionStats) -> str:
    """The text block of one partition: a header line (its path), then ``  name: value`` lines."""
    name = "segment" if s.is_file else "partition"
    head = s.path
    if s.topic is not None:
        head += f" (topic {s.topic}, partition {s.partition}" + (f", {s.state}" if s.state else "") + ")"
    rows: list[tuple[str, list[str]]] = [
        ("segments", [f"{s.segments}, {_plural(s.bytes, 'byte')}, {s.batch_bytes} in batches"
                      + (f", {s.trailing_bytes} trailing" if s.trailing_bytes else "")]),
        ("offsets", [_offsets(s)]),
        ("batches", [f"{s.batches}"]),
        ("records", [_records(s)]),
        ("time (UTC)", [_time_range(s) + (f" ({_counts(s.timestamp_types)})" if s.timestamp_types else "")]),
        ("magics", [_counts(s.magics, "v")]),
        ("codecs", [_counts(s.codecs)]),
        ("transactions", [_transactions(s)]),
        ("producers", _producers(s)),
    ]
    if not s.is_file:
        rows.append(("checkpoints", [_checkpoint(c) for c in s.checkpoints]))
    if s.crc_mismatches:
        rows.append(("crc mismatches", [f"{s.crc_mismatches}"]))
    rows.append(("problems", [str(p) for p in s.problems] + _more(s.problems_not_listed) or ["none"]))
    width = max(len(k) for k, _ in rows) + 1
    out = [f"{name} {head}"]
    for key, values in rows:
        out.append(f"  {key + ':':<{width}} {values[0]}")
        out.extend(f"  {'':<{width}} {v}" for v in values[1:])
    return "\n".join(out) + "\n"


def summary_line(stats: list[PartitionStats], seconds: float) -> str:
    """``Read 3 partitions (3 segments, 8245 batches, 1.1 MB) in 0.05 s: no problems`` (or ``: 1
    partition with problems``)."""
    o = summary_object(stats, seconds)
    parts = [_plural(o["partitions"], "partition")] if o["partitions"] or not o["files"] else []
    if o["files"]:
        parts.append(_plural(o["files"], "segment file"))
    what = " and ".join(parts)
    size = o["bytes"]
    shown = _plural(size, "byte") if size < 1000 else f"{size / 1e3:.1f} kB" if size < 1_000_000 else f"{size / 1e6:.1f} MB"
    verdict = "no problems" if not o["withProblems"] else (
        f"{_plural(o['withProblems'], 'partition')} with problems" if not o["files"] else
        f"{o['withProblems']} with problems")
    return (f"Read {what} ({_plural(o['segments'], 'segment')}, {_plural(o['batches'], 'batch', 'batches')}, {shown}) "
            f"in {seconds:.2f} s: {verdict}")


# ----------------------------------------------------------------------------- table


def _short_checkpoints(s: PartitionStats) -> str:
    marks = {CheckpointState.EQUAL: "=", CheckpointState.BEHIND: "behind", CheckpointState.AHEAD: "ahead"}
    parts = []
    for c in s.checkpoints:
        if c.state in marks:
            parts.append(f"{_SHORT[c.name]} {c.offset} ({marks[c.state]})")
        else:
            parts.append(f"{_SHORT[c.name]}: {c.state.value.replace('_', ' ')}")
    return "\n".join(parts)


def render_table(console, stats: Iterable[PartitionStats]) -> None:
    """One row per partition: offsets, counts, time range, codecs, producers, checkpoints, problems."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title="Partitions", title_justify="left")
    for col, just in (("partition dir", "left"), ("offsets", "right"), ("batches", "right"), ("records", "right"),
                      ("bytes", "right"), ("time (UTC)", "left"), ("magics / codecs", "left"),
                      ("txn / control", "left"), ("producers", "left"), ("log end vs checkpoints", "left"),
                      ("problems", "left")):
        t.add_column(col, justify=just, overflow="fold")
    for s in stats:
        name = s.path  # as verify's table names files: two log dirs may hold the same partition
        offsets = "-" if s.first_offset is None else f"{s.first_offset}..{s.last_offset}"
        if s.log_end is not None:
            offsets += f"\nend {s.log_end}"
        records = str(s.records) + (f" +{s.unopened_wrappers} wrappers" if s.unopened_wrappers else "")
        times = "" if s.min_timestamp is None and s.max_timestamp is None else \
            f"{_iso(s.min_timestamp) or '?'}\n{_iso(s.max_timestamp) or '?'}"
        kinds = _counts(s.magics, "v") + "\n" + _counts(s.codecs)
        txn = f"{s.transactional_batches} / {s.control_batches}" + (f"\n{_counts(s.control_types)}" if s.control_types else "")
        producers = "-" if not s.producer_count else (f"{s.producer_count}" if s.producer_count_exact else f">{s.producer_count}")
        checkpoints = "" if s.is_file else _short_checkpoints(s)
        behind = any(c.state is CheckpointState.BEHIND for c in s.checkpoints)
        problems = "\n".join([str(p) for p in s.problems] + _more(s.problems_not_listed))
        t.add_row(Text(name), Text(offsets), Text(str(s.batches)), Text(records), Text(str(s.bytes)), Text(times),
                  Text(kinds), Text(txn), Text(producers), Text(checkpoints, style="yellow" if behind else ""),
                  Text(problems, style="red" if problems else ""))
    console.print(t)
