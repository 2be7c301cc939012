"""The columns of each ``kafka_segments`` kind: the Spark DDL the data source declares, and the
Arrow schema of the record batches its reader yields.

Spark checks every Arrow batch a Python data source yields against
``pyspark.sql.pandas.types.to_arrow_schema(schema, timezone="UTC")`` of the declared schema
(``pa.Schema.equals``: names, types, nullability). :func:`arrow_schema` builds that schema
here with pyarrow alone (no pyspark import, no JVM): a Spark ``int`` is ``int32``, ``bigint``
``int64``, ``timestamp`` ``timestamp[us, tz=UTC]``, an ``array`` a list whose item is named
``element``, and every field is nullable. ``tests/test_spark_rows.py`` holds the two equal.

Kinds:

* ``records``: Spark's own Kafka source columns first (``key, value, topic, partition,
  offset, timestamp, timestampType, headers``), then where each record lies and its batch's
  fields, then ``error`` (set on the one row that stands for a bad region or a batch whose
  records do not decode; see :mod:`kafkatool.spark.rows`);
* ``batches``: one row per batch (or bad region): its header fields, the stored and computed
  CRC, ``crcValid``, and ``error``/``errorKind`` (verify's finding kind);
* ``findings``: ``kafkatool verify``'s findings and per-file summaries (``type`` says which),
  with ``task``/``seq`` to put them back in verify's order (:mod:`kafkatool.spark.tasks`);
* ``stats``: one row per segment, its :func:`kafkatool.stats.segment_stats` pickled.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "KINDS",
    "RECORDS_DDL",
    "BATCHES_DDL",
    "FINDINGS_DDL",
    "STATS_DDL",
    "HEADERS_TYPE",
    "TIMESTAMP_TYPE",
    "ddl",
    "arrow_schema",
    "column_names",
]

#: The Arrow type of a Spark ``timestamp`` column as Spark's Arrow conversion expects it.
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

#: ``array<struct<key:string,value:binary>>``: Spark's Kafka source's ``headers`` column.
HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])))

# (name, Spark type, Arrow type), in column order, per kind
_SPARK_TO_ARROW = {
    "binary": pa.binary(),
    "string": pa.string(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "boolean": pa.bool_(),
    "timestamp": TIMESTAMP_TYPE,
    "array<struct<key:string,value:binary>>": HEADERS_TYPE,
}

_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "records": (
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"),
        ("segment", "string"),
        ("segmentBaseOffset", "bigint"),
        ("batchPosition", "bigint"),
        ("batchBaseOffset", "bigint"),
        ("magic", "int"),
        ("codec", "string"),
        ("leaderEpoch", "int"),
        ("producerId", "bigint"),
        ("producerEpoch", "int"),
        ("sequence", "int"),
        ("isTransactional", "boolean"),
        ("isControl", "boolean"),
        ("crcValid", "boolean"),
        ("error", "string"),
    ),
    "batches": (
        ("topic", "string"),
        ("partition", "int"),
        ("segment", "string"),
        ("segmentBaseOffset", "bigint"),
        ("position", "bigint"),
        ("size", "bigint"),
        ("baseOffset", "bigint"),
        ("lastOffset", "bigint"),
        ("magic", "int"),
        ("codec", "string"),
        ("attributes", "int"),
        ("timestampType", "int"),
        ("baseTimestamp", "timestamp"),
        ("maxTimestamp", "timestamp"),
        ("leaderEpoch", "int"),
        ("producerId", "bigint"),
        ("producerEpoch", "int"),
        ("baseSequence", "int"),
        ("lastSequence", "int"),
        ("recordCount", "int"),
        ("isTransactional", "boolean"),
        ("isControl", "boolean"),
        ("storedCrc", "bigint"),
        ("computedCrc", "bigint"),
        ("crcValid", "boolean"),
        ("error", "string"),
        ("errorKind", "string"),
    ),
    "findings": (
        ("type", "string"),
        ("file", "string"),
        ("position", "bigint"),
        ("length", "bigint"),
        ("kind", "string"),
        ("message", "string"),
        ("batchIndex", "int"),
        ("firstOffset", "bigint"),
        ("lastOffset", "bigint"),
        ("expected", "string"),
        ("found", "string"),
        ("batchesAfter", "int"),
        ("fileKind", "string"),
        ("bytes", "bigint"),
        ("batches", "bigint"),
        ("findings", "bigint"),
        ("state", "string"),
        ("task", "int"),
        ("seq", "int"),
    ),
    "stats": (
        ("topic", "string"),
        ("partition", "int"),
        ("partitionPath", "string"),
        ("segment", "string"),
        ("stats", "binary"),
    ),
}

#: The kinds, in the order ``kafkatool.spark.plan.KINDS`` names them.
KINDS = tuple(_COLUMNS)


def ddl(kind: str) -> str:
    """The Spark DDL of ``kind`` (every name quoted: ``offset``, ``partition`` and
    ``timestamp`` are SQL words)."""
    return ", ".join(f"`{name}` {type_}" for name, type_ in _columns(kind))


def column_names(kind: str) -> tuple[str, ...]:
    """The column names of ``kind``, in order."""
    return tuple(name for name, _type in _columns(kind))


def _columns(kind: str) -> tuple[tuple[str, str], ...]:
    try:
        return _COLUMNS[kind]
    except KeyError:
        raise ValueError(f"kafka_segments: unknown kind {kind!r} (one of {', '.join(KINDS)})") from None


_SCHEMAS: dict[str, pa.Schema] = {
    kind: pa.schema([pa.field(name, _SPARK_TO_ARROW[type_]) for name, type_ in cols]) for kind, cols in _COLUMNS.items()
}


def arrow_schema(kind: str) -> pa.Schema:
    """The Arrow schema of ``kind``'s record batches: what Spark's Arrow conversion derives
    from :func:`ddl` (every field nullable, timestamps in microseconds, UTC)."""
    _columns(kind)
    return _SCHEMAS[kind]


RECORDS_DDL = ddl("records")
BATCHES_DDL = ddl("batches")
FINDINGS_DDL = ddl("findings")
STATS_DDL = ddl("stats")
