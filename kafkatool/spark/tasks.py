"""What one Spark task of the ``kafka_segments`` source runs: Arrow record batches for its slice of the input.

No pyspark here (pyarrow only), so everything is testable without a JVM:

* :func:`read` dispatches on the kind; ``records``/``batches`` go to :func:`kafkatool.spark.rows.read`
  one slice at a time (:func:`read_rows`);
* :func:`read_findings`: kafkatool verify's findings and per-file summaries of a task's verify
  groups, one row each (``type`` ``finding``/``summary``), in verify's order (``task``, ``seq``);
  :func:`finding_of_row` turns a row back into the :class:`~kafkatool.verify.Finding` or
  :class:`~kafkatool.verify.FileSummary` it came from, for the driver to render;
* :func:`read_stats`: one row per segment, its :func:`kafkatool.stats.segment_stats` pickled; the
  driver combines a partition's rows with :func:`kafkatool.stats.combine_stats` (:func:`stats_of_row`).

A damaged segment never fails the job: rows.read and verify report damage as rows. What
escapes them anyway is guarded per slice (per verify group, per segment): a located
:class:`~kafkatool.errors.KafkaToolError` or an :class:`OSError` (a segment deleted by retention
after planning, a permission) becomes one error row saying where reading stopped, and the task
goes on with its next slice. Anything else is a bug and fails the task loudly; so does a missing
codec library (:class:`~kafkatool.errors.MissingDependencyError`): that is the executor's
environment, not the data, and error rows would hide it in every compressed batch.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
from typing import Any, Iterator

import pyarrow as pa

from kafkatool.errors import KafkaToolError, MissingDependencyError

__all__ = [
    "FLUSH_ROWS",
    "STATS_FLUSH_ROWS",
    "read",
    "read_rows",
    "read_findings",
    "read_stats",
    "stats_options",
    "finding_of_row",
    "text",
    "stats_of_row",
]

#: Findings rows per Arrow batch (a finding is small; a damaged fleet can have millions).
FLUSH_ROWS = 4096
#: Stats rows per Arrow batch (a segment's pickled stats list up to 100,000 producers).
STATS_FLUSH_ROWS = 64


def read(task: Any, opts: Any, index: int = 0) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of one task of kind ``opts.kind`` (``index``: the task's number, for findings' order)."""
    kind = opts.kind
    if kind == "findings":
        return read_findings(task, opts, index=index)
    if kind == "stats":
        return read_stats(task, opts)
    return read_rows(task, opts)


def text(path: str | None) -> str | None:
    """``path`` as a valid Arrow string: a name that is not UTF-8 (held by Python as surrogate
    escapes) gets U+FFFD for each bad byte, as the records kind's ``error`` text does."""
    from kafkatool.spark.rows import display_path  # (rows imports numpy: only when a task runs)

    return None if path is None else display_path(path)


# ----------------------------------------------------------------------------- records, batches


def read_rows(task: Any, opts: Any) -> Iterator[pa.RecordBatch]:
    """:func:`kafkatool.spark.rows.read` over each slice of ``task`` in turn, guarded per slice."""
    from kafkatool.spark import rows

    for s in task.slices:
        try:
            yield from rows.read(dataclasses.replace(task, slices=(s,)), opts)
        except MissingDependencyError:
            raise
        except (KafkaToolError, OSError) as e:
            yield _error_batch(opts.kind, s, e)


def _where_in(path: str, e: BaseException) -> tuple[str, int | None, str, str]:
    """(file, position, kind, message) of an error met reading ``path`` (the error's own file first)."""
    if isinstance(e, KafkaToolError):
        return e.path or path, e.position if e.path else None, e.kind or "unreadable", e.message
    reason = getattr(e, "strerror", None) or str(e)
    return getattr(e, "filename", None) or path, None, "unreadable", f"cannot read the file: {reason}"


def _error_batch(kind: str, s: Any, e: BaseException) -> pa.RecordBatch:
    """One row saying that reading ``s`` stopped at ``e``: the rows given before it stand; the rest of
    the slice (what came after, and what rows.read had gathered but not yet given) is missing."""
    from kafkatool.spark.schema import arrow_schema

    schema = arrow_schema(kind)
    file, position, error_kind, message = _where_in(s.log_path, e)
    where = file if position is None else f"{file}:{position}"
    end = "its end" if s.end is None else f"byte {s.end}"
    message_text = (f"{where}: {error_kind}: {message} (reading stopped: the rows of bytes {s.start} "
                    f"to {end} of {s.log_path} not given before this one are missing)")
    values = {
        "topic": text(s.topic),
        "partition": s.partition,
        "segment": text(s.log_path),
        "segmentBaseOffset": s.base_offset,
        "batchPosition": position,
        "position": position,
        "error": text(message_text),
        "errorKind": error_kind,
    }
    arrays = [pa.array([values.get(f.name)], type=f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# ----------------------------------------------------------------------------- findings


def _json(v: Any) -> str | None:
    if v is None:
        return None
    return json.dumps(list(v) if isinstance(v, tuple) else v, ensure_ascii=True, separators=(",", ":"), default=str)


def _unjson(data: str | None) -> Any:
    if data is None:
        return None
    v = json.loads(data)
    return tuple(v) if isinstance(v, list) else v


class _Rows:
    """Findings rows gathered column-wise and flushed as Arrow batches."""

    def __init__(self, kind: str) -> None:
        from kafkatool.spark.schema import arrow_schema

        self.schema = arrow_schema(kind)
        self.names = self.schema.names
        self.columns: dict[str, list] = {n: [] for n in self.names}
        self.n = 0

    def add(self, row: dict[str, Any]) -> None:
        for name in self.names:
            self.columns[name].append(row.get(name))
        self.n += 1

    def flush(self) -> Iterator[pa.RecordBatch]:
        if self.n:
            batch = pa.RecordBatch.from_arrays(
                [pa.array(self.columns[f.name], type=f.type) for f in self.schema], schema=self.schema)
            self.columns = {n: [] for n in self.names}
            self.n = 0
            yield batch


def _finding_row(item: Any) -> dict[str, Any]:
    from kafkatool.verify import Finding

    if isinstance(item, Finding):
        return {
            "type": "finding", "file": text(item.file), "position": item.position, "length": item.length,
            "kind": str(item.kind), "message": text(item.message), "batchIndex": item.batch_index,
            "firstOffset": item.first_offset, "lastOffset": item.last_offset,
            "expected": _json(item.expected), "found": _json(item.found), "batchesAfter": item.batches_after,
        }
    return {
        "type": "summary", "file": text(item.file), "fileKind": str(item.kind), "bytes": item.bytes,
        "batches": item.batches, "findings": item.findings, "state": item.state,
    }


def verify_options(opts: Any) -> Any:
    """The :class:`~kafkatool.verify.VerifyOptions` of a findings read (``deep`` from the options)."""
    from kafkatool.verify import VerifyOptions

    return VerifyOptions(deep=opts.deep)


def task_groups(task: Any) -> list[list[Any]]:
    """The verify groups (:func:`kafkatool.verify.expand_targets`) a findings task checks."""
    groups = getattr(task, "groups", None)
    if groups:  # found by the driver (plan_findings)
        return [list(g) for g in groups]
    from kafkatool.verify import expand_targets

    return expand_targets(list(task.paths))


def read_findings(task: Any, opts: Any, *, index: int = 0) -> Iterator[pa.RecordBatch]:
    """The findings and file summaries of ``task``'s verify groups, as rows in verify's order.

    Each row carries ``task`` (``index``) and ``seq`` (its place in this task): sorted by both,
    the rows of all tasks are what ``kafkatool verify`` yields on the same paths, when the tasks
    are numbered in plan order."""
    from kafkatool.verify import FileSummary, Finding, FindingKind, verify_group

    vopts = verify_options(opts)
    out = _Rows("findings")
    seq = 0
    for group in task_groups(task):
        try:
            for item in verify_group(group, vopts):
                row = _finding_row(item)
                row["task"], row["seq"] = index, seq
                seq += 1
                out.add(row)
                if out.n >= FLUSH_ROWS:
                    yield from out.flush()
        except MissingDependencyError:
            raise
        except (KafkaToolError, OSError) as e:
            # verify reports what it cannot read as findings; this escaped it anyway: the rest of
            # the group is not checked, and that is said as a finding of the file concerned
            file, position, _kind, message = _where_in(group[0].path if group else "", e)
            for item in (Finding(file, position, None, FindingKind.UNREADABLE, f"verify stopped here: {message}"),
                         FileSummary(file, FindingKind.UNREADABLE, 0, 0, 1, None)):
                row = _finding_row(item)
                row["task"], row["seq"] = index, seq
                seq += 1
                out.add(row)
    yield from out.flush()


def finding_of_row(row: Any) -> Any:
    """The :class:`~kafkatool.verify.Finding` or :class:`~kafkatool.verify.FileSummary` of a findings
    row (a ``pyspark.sql.Row``, a dict, anything with ``row["file"]``)."""
    from kafkatool.verify import FileSummary, Finding, FindingKind

    if row["type"] == "finding":
        return Finding(row["file"], row["position"], row["length"], FindingKind(row["kind"]), row["message"],
                       row["batchIndex"], row["firstOffset"], row["lastOffset"], _unjson(row["expected"]),
                       _unjson(row["found"]), row["batchesAfter"])
    kind = row["fileKind"]
    try:
        kind = FindingKind(kind)
    except ValueError:  # a file kind (log, index, ...), not a finding kind
        pass
    return FileSummary(row["file"], kind, row["bytes"], row["batches"], row["findings"], row["state"])


# ----------------------------------------------------------------------------- stats


def stats_options(opts: Any) -> Any:
    """The :class:`~kafkatool.stats.StatsOptions` each segment is counted with: every producer
    listed (up to the exact-count limit), so :func:`~kafkatool.stats.combine_stats` is exact."""
    from kafkatool.stats import PRODUCER_COUNT_LIMIT, StatsOptions

    return StatsOptions(deep=opts.deep, max_producers=PRODUCER_COUNT_LIMIT)


def _failed_stats(log_path: str, e: BaseException) -> Any:
    """A segment's stats when counting it failed: nothing counted, one located problem."""
    from kafkatool.stats import CHECKPOINTS, CheckpointComparison, CheckpointState, PartitionStats, Problem

    if isinstance(e, KafkaToolError):
        problem = Problem(e.path or log_path, e.position if e.path else None, e.message, e.kind or "error")
    else:
        problem = Problem(getattr(e, "filename", None) or log_path, None,
                          getattr(e, "strerror", None) or str(e), "unreadable")
    return PartitionStats(
        path=log_path, topic=None, partition=None, state=None, is_file=True, segments=1, bytes=0, batch_bytes=0,
        batches=0, records=0, unopened_wrappers=0, first_offset=None, last_offset=None, log_end=None,
        min_timestamp=None, max_timestamp=None, magics={}, codecs={}, timestamp_types={}, transactional_batches=0,
        control_batches=0, control_types={}, crc_mismatches=0, producers=(), producer_count=0,
        producer_count_exact=True, idempotent_batches=0,
        checkpoints=tuple(CheckpointComparison(n, None, CheckpointState.NOT_COMPARED) for n in CHECKPOINTS),
        trailing_bytes=0, problems=(problem,),
    )


def read_stats(task: Any, opts: Any) -> Iterator[pa.RecordBatch]:
    """One row per segment of ``task``: topic, partition, partitionPath, segment, and ``stats``,
    the pickle of :func:`kafkatool.stats.segment_stats` (which reports bad input as problems)."""
    from kafkatool.segment.logdir import Segment
    from kafkatool.stats import segment_stats

    sopts = stats_options(opts)
    out = _Rows("stats")
    for s in task.slices:
        try:
            st = segment_stats(Segment.at(s.log_path, base_offset=s.base_offset), sopts)
        except MissingDependencyError:
            raise
        except (KafkaToolError, OSError) as e:
            st = _failed_stats(s.log_path, e)
        out.add({"topic": text(s.topic), "partition": s.partition, "partitionPath": text(s.partition_path),
                 "segment": text(s.log_path), "stats": pickle.dumps(st, protocol=pickle.HIGHEST_PROTOCOL)})
        if out.n >= STATS_FLUSH_ROWS:
            yield from out.flush()
    yield from out.flush()


def stats_of_row(row: Any) -> Any:
    """The :class:`~kafkatool.stats.PartitionStats` of one stats row (its segment's)."""
    return pickle.loads(row["stats"])
