"""The ``kafka_segments`` Python data source (``pyspark.sql.datasource``, Spark >= 4.1).

``spark.read.format("kafka_segments").option("kind", KIND).load(PATH)``: the driver lists the
log dirs and plans input partitions (:mod:`kafkatool.spark.plan`: small segments bin-packed,
large ones split at proven batch starts); each executor task reads its slices and yields Arrow
record batches (:mod:`kafkatool.spark.rows` for ``records``/``batches``,
:mod:`kafkatool.spark.tasks` for ``findings``/``stats``).

PATH is a log dir, a partition dir or a ``.log``; several comma-separated or as a glob; or the
options ``path``/``paths`` (``.load([a, b])`` passes a JSON list).

Filters Spark pushes down (``spark.sql.python.filterPushdown.enabled``, set by
:func:`kafkatool.spark.register`) on ``topic``, ``partition``, ``offset`` and ``timestamp``
narrow the read (:meth:`ReadOptions.restrict`): fewer segments planned, seeks through the
indexes. A filter is reported as handled only where the restricted read returns exactly the
rows the filter keeps: ``topic``/``partition`` (never null, from the directory name).
Offset and time bounds are pushed *and* handed back to Spark, which evaluates them again on
what the read returns: a row a bound cannot place (an error row has no offset or time) is then
left to Spark's own semantics, so the pushed read never changes a result, only its cost.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from kafkatool.spark import NAME

__all__ = ["KafkaSegmentsDataSource", "KafkaSegmentsReader", "SegmentsPartition", "Bounds", "read_options"]

#: Options that name the input, not how to read it (``load(PATH)`` sets ``path``, ``load([..])`` ``paths``).
PATH_OPTIONS = ("path", "paths")


def read_options(options: Any) -> tuple[tuple[str, ...], Any]:
    """The paths and :class:`~kafkatool.spark.plan.ReadOptions` of a data source's options."""
    from kafkatool.spark.plan import ReadOptions

    opts = {str(k).lower(): v for k, v in dict(options).items()}
    paths: list[str] = []
    if opts.get("path"):
        paths.append(opts["path"])
    if opts.get("paths"):
        raw = opts["paths"]
        try:
            listed = json.loads(raw)
        except ValueError:
            listed = raw
        if isinstance(listed, str):
            listed = [listed]
        if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
            raise ValueError(f"{NAME}: option paths={raw!r}: expected a JSON list of paths")
        paths.extend(listed)
    if not paths:
        raise ValueError(f"{NAME}: no path: give one to load(PATH), or the option path or paths")
    rest = {k: v for k, v in opts.items() if k not in PATH_OPTIONS}
    return tuple(paths), ReadOptions.from_options(rest)


def ddl(kind: str) -> str:
    """The Spark DDL of ``kind``'s rows (:mod:`kafkatool.spark.schema`)."""
    from kafkatool.spark import schema

    return {"records": schema.RECORDS_DDL, "batches": schema.BATCHES_DDL,
            "findings": schema.FINDINGS_DDL, "stats": schema.STATS_DDL}[kind]


class KafkaSegmentsDataSource(DataSource):
    """Kafka log segments read offline: ``kind`` records (default), batches, findings or stats."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        _, opts = read_options(self.options)
        return ddl(opts.kind)

    def reader(self, schema: Any) -> "KafkaSegmentsReader":
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType

        from kafkatool.spark.schema import arrow_schema

        paths, opts = read_options(self.options)
        if isinstance(schema, StructType) and not to_arrow_schema(schema, timezone="UTC").equals(arrow_schema(opts.kind)):
            # The Arrow batches are built for our columns only: a user schema would fail
            # on the first batch with a schema mismatch far from its cause.
            raise ValueError(
                f"{NAME}: a user-specified schema is not supported for kind {opts.kind!r}: "
                f"leave .schema(...) out (the columns are {ddl(opts.kind)})"
            )
        return KafkaSegmentsReader(paths, opts)


class SegmentsPartition(InputPartition):
    """One Spark task: a :class:`~kafkatool.spark.plan.ReadTask` (or ``FindingsTask``), small and picklable."""

    def __init__(self, task: Any, index: int) -> None:
        super().__init__(task)
        self.index = index
        """The task's place in plan order (findings rows are ordered by it)."""


# ----------------------------------------------------------------------------- pushdown


_US = 1
_MS = 1000
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _micros(value: Any) -> int | None:
    """A timestamp literal as microseconds since the epoch; None for what we do not place
    exactly (a naive datetime has no zone; a date is not a timestamp literal)."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return (value - _EPOCH) // datetime.timedelta(microseconds=1)
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class Bounds:
    """The pushed-down bounds of one read, intersected as filters come (an AND of them)."""

    topics: set[str] | None = None
    partitions: set[int] | None = None
    offset_lo: int | None = None  # inclusive
    offset_hi: int | None = None  # exclusive
    time_lo: int | None = None  # ms, inclusive
    time_hi: int | None = None  # ms, exclusive
    empty: bool = False
    """No row can match (``timestamp = X`` with X between two milliseconds, ``offset > 5 AND offset < 3``)."""
    pushed: list[Filter] = field(default_factory=list)

    def only(self, name: str, values: set) -> None:
        now = getattr(self, name)
        setattr(self, name, values if now is None else now & values)

    def offsets(self, lo: int | None, hi: int | None) -> None:
        if lo is not None:
            self.offset_lo = lo if self.offset_lo is None else max(self.offset_lo, lo)
        if hi is not None:
            self.offset_hi = hi if self.offset_hi is None else min(self.offset_hi, hi)

    def times(self, lo: int | None, hi: int | None) -> None:
        if lo is not None:
            self.time_lo = lo if self.time_lo is None else max(self.time_lo, lo)
        if hi is not None:
            self.time_hi = hi if self.time_hi is None else min(self.time_hi, hi)

    def is_empty(self) -> bool:
        return (
            self.empty
            or self.topics is not None and not self.topics
            or self.partitions is not None and not self.partitions
            or self.offset_lo is not None and self.offset_hi is not None and self.offset_lo >= self.offset_hi
            or self.time_lo is not None and self.time_hi is not None and self.time_lo >= self.time_hi
        )

    def apply(self, opts: Any) -> Any:
        """``opts`` restricted to these bounds (call only when not :meth:`is_empty`)."""
        kw: dict[str, Any] = {}
        if self.topics is not None:
            kw["topics"] = frozenset(self.topics)
        if self.partitions is not None:
            kw["partitions"] = frozenset(self.partitions)
        if self.offset_lo is not None or self.offset_hi is not None:
            kw["offsets"] = (self.offset_lo, self.offset_hi)
        if self.time_lo is not None or self.time_hi is not None:
            kw["times"] = (self.time_lo, self.time_hi)
        return opts.restrict(**kw) if kw else opts


def _range(f: Filter, v: int, step: int = 1) -> tuple[int | None, int | None] | None:
    """The integer range [lo, hi) a comparison with ``v`` keeps, for a column whose values are
    multiples of ``step`` compared as such (``step`` 1000: milliseconds against a microsecond
    literal). None for a filter that is not a comparison."""
    floor = v // step  # the largest value (in column units) <= v
    ceil = -(-v // step)  # the smallest >= v
    if isinstance(f, (EqualTo, EqualNullSafe)):
        return (floor, floor + 1) if v % step == 0 else (0, 0)
    if isinstance(f, GreaterThan):
        return (floor + 1, None)
    if isinstance(f, GreaterThanOrEqual):
        return (ceil, None)
    if isinstance(f, LessThan):
        return (None, ceil)
    if isinstance(f, LessThanOrEqual):
        return (None, floor + 1)
    return None


#: Per kind: column -> (what it bounds, whether the restricted read is exact for it).
_COLUMNS: dict[str, dict[str, tuple[str, bool]]] = {
    "records": {"topic": ("topics", True), "partition": ("partitions", True),
                "offset": ("offset", False), "timestamp": ("time", False)},
    "batches": {"topic": ("topics", True), "partition": ("partitions", True)},
    "stats": {"topic": ("topics", True), "partition": ("partitions", True)},
    "findings": {},
}


def push(kind: str, filters: Sequence[Filter], bounds: Bounds) -> list[Filter]:
    """Add what ``filters`` (an AND) allow to ``bounds``; return those Spark must still evaluate."""
    columns = _COLUMNS.get(kind, {})
    back: list[Filter] = []
    for f in filters:
        attr = getattr(f, "attribute", None)
        target = columns.get(attr[0]) if isinstance(attr, tuple) and len(attr) == 1 else None
        if target is None or not _push_one(f, target[0], bounds):
            back.append(f)
            continue
        bounds.pushed.append(f)
        if not target[1]:
            back.append(f)
    return back


def _push_one(f: Filter, what: str, bounds: Bounds) -> bool:
    """Narrow ``bounds`` by ``f`` on a column that bounds ``what``; False when it does not apply."""
    value = getattr(f, "value", None)
    if what in ("topics", "partitions"):
        ok = (lambda x: isinstance(x, str)) if what == "topics" else (lambda x: _int(x) is not None)
        if isinstance(f, (EqualTo, EqualNullSafe)) and ok(value):
            bounds.only(what, {value})
            return True
        if isinstance(f, In) and isinstance(value, (list, tuple)):
            # `x IN (a, NULL)` keeps the rows equal to a (NULL matches nothing); a non-null
            # value of another type (a cast Spark did not make) is not ours to place
            values = [x for x in value if x is not None]
            if not all(ok(x) for x in values):
                return False
            bounds.only(what, set(values))
            return True
        return False
    if what == "offset":
        if isinstance(f, In) and isinstance(value, (list, tuple)):
            values = [x for x in value if x is not None]
            if not values or not all(_int(x) is not None for x in values):
                return False
            bounds.offsets(min(values), max(values) + 1)  # a superset: Spark keeps the filter
            return True
        v = _int(value)
        span = None if v is None else _range(f, v)
        if span is None:
            return False
        bounds.offsets(*span)
        return True
    if what == "time":
        if isinstance(f, In):
            return False
        us = _micros(value)
        span = None if us is None else _range(f, us, _MS)
        if span is None:
            return False
        bounds.times(*span)
        return True
    return False


# ----------------------------------------------------------------------------- the reader


class KafkaSegmentsReader(DataSourceReader):
    """Plans the input partitions on the driver and reads one per task on the executors."""

    def __init__(self, paths: tuple[str, ...], opts: Any) -> None:
        self.paths = paths
        self.opts = opts
        self.empty = False

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:  # noqa: N802 - Spark's name
        bounds = Bounds()
        back = push(self.opts.kind, filters, bounds)
        if bounds.is_empty():
            self.empty = True
        else:
            self.opts = bounds.apply(self.opts)
        return back

    def partitions(self) -> list[InputPartition]:
        from kafkatool.spark import plan

        if self.empty:
            return []
        kind = self.opts.kind
        if kind == "findings":
            tasks: Sequence[Any] = plan.plan_findings(list(self.paths), self.opts)
        elif kind == "stats":
            tasks = plan.plan_stats(list(self.paths), self.opts)
        else:
            tasks = plan.plan(list(self.paths), self.opts)
        return [SegmentsPartition(t, i) for i, t in enumerate(tasks)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from kafkatool.spark import tasks

        task = getattr(partition, "value", None)
        if task is None:  # Spark's stand-in when partitions() planned nothing
            return iter(())
        return tasks.read(task, self.opts, getattr(partition, "index", 0))
