"""The ``kafka_segments`` Python data source (``pyspark.sql.datasource``, Spark >= 4.1).

``spark.read.format("kafka_segments").option("kind", KIND).load(PATH)``: the driver lists the
log dirs and plans input partitions (:mod:`kafkatool.spark.plan`: small segments bin-packed,
large ones split at proven batch starts); each executor task reads its slices and yields Arrow
record batches (:mod:`kafkatool.spark.rows` for ``records``/``batches``,
:mod:`kafkatool.spark.tasks` for ``findings``/``stats``).

PATH is a log dir, a partition dir or a ``.log``; several comma-separated or as a glob; or the
options ``path``/``paths`` (``.load([a, b])`` passes a JSON list). Options besides those of
:meth:`ReadOptions.from_options <kafkatool.spark.plan.ReadOptions.from_options>`: ``pushFilters``
(below) and ``parallelism`` (Spark's default parallelism: tasks are then sized as Spark sizes
file splits, so that a small read still uses every core).

Filters: Spark hands the reader the filters of each query (``pushFilters``; it needs
``spark.sql.python.filterPushdown.enabled``, which :func:`kafkatool.spark.register` sets). With
the option ``pushFilters=true`` they narrow the read (:meth:`ReadOptions.restrict`: fewer
partitions and segments planned, seeks through the indexes): comparisons and ``IN`` on
``topic``, ``partition``, ``offset``, ``timestamp`` (records), on ``topic``, ``partition``,
``baseOffset``, ``lastOffset``, ``maxTimestamp`` (batches), on ``topic``, ``partition``
(stats). A filter is reported as handled only when the restricted read returns exactly the rows
it keeps (:data:`_COLUMNS` says when); one that only narrows the read (``offset IN (3, 9)``
reads ``[3, 10)``) is handed back, and Spark evaluates it again on what the read returns.

Why only on request: Spark 4.1-4.3 keeps ONE pushed-down reader per DataFrame
(``PythonDataSourceV2.readInfo``, set by the last query's pushdown, reused as is by a later
query that has no filter to push, and by both sides of a self-union or self-join). A DataFrame
read once and queried twice (``df.where("topic = 'a'").count()``, then ``df.count()``) would
silently return the first query's rows. By default the reader therefore takes no filters
(:class:`KafkaSegmentsReader` has no ``pushFilters``; Spark filters what it reads, and the read
then works whether ``spark.sql.python.filterPushdown.enabled`` is on or not); the options
``topics``, ``partitions``, ``startOffset``/``endOffset``, ``startTime``/``endTime`` give the
same narrowing and seeks safely (they belong to the read, not to a query). With
``pushFilters=true``, use each DataFrame for one query.
"""

from __future__ import annotations

import datetime
import json
from typing import Any, Iterator, NamedTuple, Sequence

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

__all__ = [
    "KafkaSegmentsDataSource", "KafkaSegmentsReader", "KafkaSegmentsFilteringReader", "SegmentsPartition",
    "SourceOptions", "read_options", "push",
]

#: Options that name the input, not how to read it (``load(PATH)`` sets ``path``, ``load([..])`` ``paths``).
PATH_OPTIONS = ("path", "paths")
#: The option that lets pushed-down filters narrow the read (see the module docstring).
PUSH_OPTION = "pushFilters"
#: The option giving Spark's default parallelism (``sc.defaultParallelism``): with it, tasks are
#: sized as Spark sizes file splits, ``min(maxPartitionBytes, max(4 MiB, total / parallelism))``,
#: so a small read still keeps every core busy (:func:`kafkatool.spark.plan.plan`).
PARALLELISM_OPTION = "parallelism"


class SourceOptions(NamedTuple):
    """What a read's options say: the input, the read options, and how to plan it."""

    paths: tuple[str, ...]
    opts: Any
    """The :class:`~kafkatool.spark.plan.ReadOptions`."""
    push_filters: bool = False
    parallelism: int | None = None


def read_options(options: Any) -> SourceOptions:
    """The :class:`SourceOptions` of a data source's (case-insensitive) options."""
    from kafkatool.spark.plan import ReadOptions

    opts = {str(k).lower(): v for k, v in dict(options).items()}
    push_filters = False
    raw_push = opts.pop(PUSH_OPTION.lower(), None)
    if raw_push is not None:
        flag = str(raw_push).strip().lower()
        if flag not in ("true", "false"):
            raise ValueError(f"{NAME}: option {PUSH_OPTION}={raw_push!r}: not a boolean (true or false)")
        push_filters = flag == "true"
    parallelism = None
    raw_par = opts.pop(PARALLELISM_OPTION, None)
    if raw_par is not None:
        text = str(raw_par).strip()
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"{NAME}: option {PARALLELISM_OPTION}={raw_par!r}: not a positive integer")
        parallelism = int(text)
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
    return SourceOptions(tuple(paths), ReadOptions.from_options(rest), push_filters, parallelism)


def ddl(kind: str) -> str:
    """The Spark DDL of ``kind``'s rows (:mod:`kafkatool.spark.schema`)."""
    from kafkatool.spark import schema

    return schema.ddl(kind)


class KafkaSegmentsDataSource(DataSource):
    """Kafka log segments read offline: ``kind`` records (default), batches, findings or stats."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return ddl(read_options(self.options).opts.kind)

    def reader(self, schema: Any) -> "KafkaSegmentsReader":
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType

        from kafkatool.spark.schema import arrow_schema

        source = read_options(self.options)
        opts = source.opts
        if isinstance(schema, StructType) and not to_arrow_schema(schema, timezone="UTC").equals(arrow_schema(opts.kind)):
            # The Arrow batches are built for our columns only: a user schema would fail
            # on the first batch with a schema mismatch far from its cause.
            raise ValueError(
                f"{NAME}: a user-specified schema is not supported for kind {opts.kind!r}: "
                f"leave .schema(...) out (the columns are {ddl(opts.kind)})"
            )
        cls = KafkaSegmentsFilteringReader if source.push_filters else KafkaSegmentsReader
        return cls(source.paths, opts, source.push_filters, source.parallelism)


class SegmentsPartition(InputPartition):
    """One Spark task: a :class:`~kafkatool.spark.plan.ReadTask` (or ``FindingsTask``), small and picklable."""

    def __init__(self, task: Any, index: int) -> None:
        super().__init__(task)
        self.index = index
        """The task's place in plan order (findings rows are ordered by it)."""


# ----------------------------------------------------------------------------- pushdown


_MS = 1000  # microseconds (Spark's timestamp unit) per millisecond (Kafka's)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _micros(value: Any) -> int | None:
    """A timestamp literal as microseconds since the epoch; None for what we do not place
    exactly (a naive datetime has no zone; a date is not a timestamp literal)."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return (value - _EPOCH) // datetime.timedelta(microseconds=1)
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _range(f: Filter, v: int, step: int = 1) -> tuple[int, int | None] | tuple[int | None, int] | None:
    """The half-open range ``[lo, hi)`` of column values a comparison with ``v`` keeps, for a
    column holding whole multiples of ``step`` (``step`` 1000: a millisecond column, shown as
    microseconds, compared with a microsecond literal). None for a filter that is no comparison."""
    floor = v // step  # the largest column value whose microseconds are <= v
    ceil = -(-v // step)  # the smallest whose microseconds are >= v
    if isinstance(f, (EqualTo, EqualNullSafe)):
        return (floor, floor + 1) if v % step == 0 else (floor, floor)  # between two ms: nothing
    if isinstance(f, GreaterThan):
        return (floor + 1, None)
    if isinstance(f, GreaterThanOrEqual):
        return (ceil, None)
    if isinstance(f, LessThan):
        return (None, ceil)
    if isinstance(f, LessThanOrEqual):
        return (None, floor + 1)
    return None


# What a column's filters bound, per kind, and when the restricted read is exact for them:
#   "set"   topic/partition: a read restricted to a set of them returns exactly the rows whose
#           value is in the set (from the directory name; never null on a row of a selected dir);
#   "point" offset: rows.read keeps exactly the rows whose offset lies in [lo, hi), a row with a
#           null offset (a bad region) under any bound, as SQL does;
#   "time"  timestamp/maxTimestamp: rows.read bounds the milliseconds Kafka stored, the column
#           shows them as microseconds, null past the microsecond range (|ms| > 2^63 / 1000, a
#           hostile value) where the bound still compares the milliseconds: pushed, and handed
#           back so that Spark's null semantics have the last word;
#   "last"  batches' lastOffset: the read keeps a batch when lastOffset >= lo and baseOffset < hi,
#           exact for a lower bound alone; an upper bound on lastOffset is pushed as a bound
#           on baseOffset (lastOffset < hi implies baseOffset < hi) and handed back;
#   "base"  batches' baseOffset: exact for an upper bound alone; a lower bound is pushed as a
#           bound on lastOffset (implied) and handed back.
# The restricted read seeks as Kafka does (segments chosen by base offset, the .index and
# .timeindex trusted as the broker trusts them): on a log whose offsets are out of order or
# whose time index lies (what verify reports) it can miss rows a full read shows.
_COLUMNS: dict[str, dict[str, tuple[str, str]]] = {
    "records": {"topic": ("topics", "set"), "partition": ("partitions", "set"),
                "offset": ("offsets", "point"), "timestamp": ("times", "time")},
    "batches": {"topic": ("topics", "set"), "partition": ("partitions", "set"),
                "baseOffset": ("offsets", "base"), "lastOffset": ("offsets", "last"),
                "maxTimestamp": ("times", "time")},
    "stats": {"topic": ("topics", "set"), "partition": ("partitions", "set")},
    "findings": {},
}


def push(opts: Any, filters: Sequence[Filter]) -> tuple[Any, list[Filter]]:
    """``opts`` restricted by what ``filters`` (an AND) allow, and the filters Spark must still
    evaluate: every one not applied exactly, in the order given."""
    columns = _COLUMNS.get(opts.kind, {})
    back: list[Filter] = []
    for f in filters:
        attr = getattr(f, "attribute", None)
        target = columns.get(attr[0]) if isinstance(attr, tuple) and len(attr) == 1 else None
        pushed = None if target is None else _translate(f, *target)
        if pushed is None:
            back.append(f)
            continue
        restriction, exact = pushed
        narrowed = opts.restrict(**restriction)
        if target[1] in ("base", "last") and _crossed(narrowed):
            # lo bounds lastOffset, hi baseOffset: lo >= hi still holds a batch spanning them
            # (baseOffset = 12 AND lastOffset = 14), but would read as an empty range
            back.append(f)
            continue
        opts = narrowed
        if not exact:
            back.append(f)
    return opts, back


def _crossed(opts: Any) -> bool:
    return opts.start_offset is not None and opts.end_offset is not None and opts.start_offset >= opts.end_offset


def _translate(f: Filter, what: str, role: str) -> tuple[dict[str, Any], bool] | None:
    """``(restrict keyword arguments, exact)`` of filter ``f`` on a column bounding ``what``; None
    when it does not apply."""
    value = getattr(f, "value", None)
    if role == "set":
        # a topic with U+FFFD may be a directory name that is not UTF-8, shown replaced in the
        # column while the plan compares the name itself: left to Spark
        ok = (lambda x: isinstance(x, str) and "\ufffd" not in x) if what == "topics" else (lambda x: _int(x) is not None)
        if isinstance(f, (EqualTo, EqualNullSafe)) and ok(value):
            return {what: {value}}, True
        if isinstance(f, In) and isinstance(value, (list, tuple)):
            # `x IN (a, NULL)` keeps the rows equal to a (NULL equals nothing); a value of
            # another type would be a cast Spark did not make: not ours to place
            values = [x for x in value if x is not None]
            if not all(ok(x) for x in values):
                return None
            return {what: set(values)}, True
        return None
    if isinstance(f, In):
        if what != "offsets" or not isinstance(value, (list, tuple)):
            return None
        values = [x for x in value if x is not None]
        if not values or not all(_int(x) is not None for x in values):
            return None
        return {what: (min(values), max(values) + 1)}, False  # a range holding them: Spark keeps the filter
    if what == "times":
        us = _micros(value)
        span = None if us is None else _range(f, us, _MS)
    else:
        v = _int(value)
        span = None if v is None else _range(f, v)
    if span is None:
        return None
    lo, hi = span
    exact = role == "point" or (role == "last" and hi is None) or (role == "base" and lo is None)
    return {what: (lo, hi)}, exact


# ----------------------------------------------------------------------------- the reader


class KafkaSegmentsReader(DataSourceReader):
    """Plans the input partitions on the driver and reads one per task on the executors."""

    def __init__(self, paths: tuple[str, ...], opts: Any, push_filters: bool = False,
                 parallelism: int | None = None) -> None:
        self.paths = paths
        self.opts = opts
        self.push_filters = push_filters
        self.parallelism = parallelism

    def partitions(self) -> list[InputPartition]:
        from kafkatool.spark import plan

        if self.opts.empty:  # e.g. `offset > 5 AND offset < 3`
            return []
        kind, paths, par = self.opts.kind, list(self.paths), self.parallelism
        if kind == "findings":
            tasks: Sequence[Any] = plan.plan_findings(paths, self.opts, parallelism=par)
        elif kind == "stats":
            tasks = plan.plan_stats(paths, self.opts, parallelism=par)
        else:
            tasks = plan.plan(paths, self.opts, parallelism=par)
        return [SegmentsPartition(t, i) for i, t in enumerate(tasks)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from kafkatool.spark import tasks

        task = getattr(partition, "value", None)
        if task is None:  # Spark's stand-in when partitions() planned nothing
            return iter(())
        return tasks.read(task, self.opts, getattr(partition, "index", 0))


class KafkaSegmentsFilteringReader(KafkaSegmentsReader):
    """The reader of ``pushFilters=true``: filters narrow the read (module docstring). A separate
    class because Spark refuses every read of a reader that implements ``pushFilters`` while
    ``spark.sql.python.filterPushdown.enabled`` is off: the default reader works either way."""

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:  # noqa: N802 - Spark's name
        self.opts, back = push(self.opts, filters)
        return back
