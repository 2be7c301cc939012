"""The baseline of ``bench_spark.py``: Kafka segments to rows with ``binaryFile`` + ``mapInArrow``.

What a user with kafkatool's parser but without its data source would write::

    df = (spark.read.format("binaryFile")
          .option("pathGlobFilter", "*.log").option("recursiveFileLookup", "true")
          .load(dirs))
    rows = df.select("path", "content").mapInArrow(parse_files, RECORDS_DDL)

Spark reads each ``.log`` file whole (``binaryFile`` is not splittable: one file is one row,
its bytes one value), ships the rows to a Python worker as Arrow batches, and
:func:`parse_files` turns each file's bytes into record rows of the source's ``records``
schema (``kafkatool.spark.schema.RECORDS_DDL``) with kafkatool's own parser, so that the
parse costs what it costs inside the data source:

* the batch walk over the file's bytes in memory (``kafkatool.segment.walk.SegmentWalker``
  over a memoryview: ``kafkatool.record.framing.frame_entry`` + ``batch_from_header``, which
  computes every batch's CRC-32C as the source does with ``verifyCrc`` on);
* decompression with ``kafkatool.record.compression.decompress``;
* the records into Arrow-layout columns with ``kafkatool.record.columns.RecordColumns.add_v2``
  (the compiled decoder; legacy entries through ``add_records``), flushed as a
  ``pyarrow.RecordBatch`` every ~8 MiB of keys and values or 64 Ki rows, as the source does.

Topic and partition come from the parent directory's name (split at the last ``-``); the
segment's base offset from the file name. The file's bytes come from Arrow without a copy
(``BinaryScalar.as_buffer``, viewed as unsigned bytes: a pyarrow buffer's memoryview has the
signed format ``'b'``, whose items kafkatool's decompressors would read as negative numbers). Damage is out of scope: the benchmark's segments are clean, and
a walk that stops on a bad entry raises (the data source would emit an error row and go on).
"""

from __future__ import annotations

import os
from typing import Iterator

import numpy as np
import pyarrow as pa

from kafkatool.record.compression import codec_name, decompress
from kafkatool.record.layout import CODEC_MASK, TIMESTAMP_TYPE_BIT, V2_HEADER_SIZE
from kafkatool.record.records import decode_batch_records
from kafkatool.segment.files import parse_base_offset
from kafkatool.segment.walk import SegmentWalker

FLUSH_BYTES = 8 << 20  # key + value bytes per output batch (the source's flush rule)
FLUSH_ROWS = 64 * 1024

#: The ``records`` schema (COMMON.md's contract), used only when kafkatool.spark.schema is absent.
FALLBACK_RECORDS_DDL = (
    "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
    "timestampType int, headers array<struct<key:string,value:binary>>, segment string, "
    "segmentBaseOffset bigint, batchPosition bigint, batchBaseOffset bigint, magic int, codec string, "
    "leaderEpoch int, producerId bigint, producerEpoch int, sequence int, isTransactional boolean, "
    "isControl boolean, crcValid boolean, error string"
)


def records_ddl() -> str:
    try:
        from kafkatool.spark.schema import RECORDS_DDL
    except ImportError:
        return FALLBACK_RECORDS_DDL
    return RECORDS_DDL


def records_arrow_schema() -> pa.Schema:
    try:
        from kafkatool.spark.schema import arrow_schema
    except ImportError:
        return _fallback_arrow_schema()
    return arrow_schema("records")


def _fallback_arrow_schema() -> pa.Schema:
    header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    ts = pa.timestamp("us", tz="UTC")
    return pa.schema([
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
        ("offset", pa.int64()), ("timestamp", ts), ("timestampType", pa.int32()), ("headers", pa.list_(header)),
        ("segment", pa.string()), ("segmentBaseOffset", pa.int64()), ("batchPosition", pa.int64()),
        ("batchBaseOffset", pa.int64()), ("magic", pa.int32()), ("codec", pa.string()), ("leaderEpoch", pa.int32()),
        ("producerId", pa.int64()), ("producerEpoch", pa.int32()), ("sequence", pa.int32()),
        ("isTransactional", pa.bool_()), ("isControl", pa.bool_()), ("crcValid", pa.bool_()), ("error", pa.string()),
    ])


def topic_partition(path: str) -> tuple[str, int]:
    """``<topic>-<partition>`` of the file's parent directory, split at the last ``-``."""
    name = os.path.basename(os.path.dirname(path))
    topic, _, part = name.rpartition("-")
    return topic, int(part)


def _binary(col, typ: pa.DataType) -> pa.Array:
    """A BinaryColumn (Arrow layout: validity bitmap, int32 offsets, data) as an Arrow array."""
    n = len(col.offsets) // 4 - 1
    validity = pa.py_buffer(col.validity) if col.null_count else None
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(col.offsets), pa.py_buffer(col.data)], col.null_count)


def _repeat_str(value: str, n: int) -> pa.Array:
    raw = value.encode()
    offsets = np.arange(0, (n + 1) * len(raw), len(raw) or 1, dtype=np.int32)[: n + 1] if raw else np.zeros(n + 1, np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


class _Out:
    """Rows of one file being built: the record columns plus per-batch metadata (repeated per row)."""

    def __init__(self, schema: pa.Schema, path: str, topic: str, partition: int, base_offset: int) -> None:
        from kafkatool.record.columns import RecordColumns

        self.schema = schema
        self.path, self.topic, self.partition, self.base_offset = path, topic, partition, base_offset
        self.cols = RecordColumns(include_headers=True)
        self.batches: list[tuple] = []  # (rows, position, base offset, magic, codec id, leader epoch, pid, pepoch, ts type, txn, ctrl, crc ok)
        header_type = schema.field("headers").type
        self.header_struct = header_type.value_type

    def full(self) -> bool:
        c = self.cols
        return len(c.keys.data) + len(c.values.data) >= FLUSH_BYTES or c.n >= FLUSH_ROWS

    def flush(self) -> pa.RecordBatch | None:
        c = self.cols
        n = c.n
        if not n:
            self.batches.clear()
            return None
        meta = self.batches
        counts = np.fromiter((b[0] for b in meta), np.int64, len(meta))

        def rep(i: int, dtype) -> np.ndarray:
            return np.repeat(np.fromiter((b[i] for b in meta), dtype, len(meta)), counts)

        codec_ids = rep(4, np.int32)
        names = pa.array([codec_name(i) for i in range(5)], pa.string())
        hk = _binary(c.header_keys, pa.string())
        hv = _binary(c.header_values, pa.binary())
        hstruct = pa.StructArray.from_arrays([hk, hv], fields=list(self.header_struct))
        hvalid = pa.py_buffer(c.header_validity) if c.header_null_count else None
        headers = pa.Array.from_buffers(self.schema.field("headers").type, n, [hvalid, pa.py_buffer(c.header_offsets)],
                                        c.header_null_count, children=[hstruct])
        ts = np.frombuffer(c.timestamps, np.int64) * 1000
        arrays = {
            "key": _binary(c.keys, pa.binary()),
            "value": _binary(c.values, pa.binary()),
            "topic": _repeat_str(self.topic, n),
            "partition": pa.array(np.full(n, self.partition, np.int32)),
            "offset": pa.array(np.frombuffer(c.offsets, np.int64)),
            "timestamp": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array(rep(8, np.int32)),
            "headers": headers,
            "segment": _repeat_str(self.path, n),
            "segmentBaseOffset": pa.array(np.full(n, self.base_offset, np.int64)),
            "batchPosition": pa.array(rep(1, np.int64)),
            "batchBaseOffset": pa.array(rep(2, np.int64)),
            "magic": pa.array(rep(3, np.int32)),
            "codec": names.take(pa.array(codec_ids)),
            "leaderEpoch": pa.array(rep(5, np.int32)),
            "producerId": pa.array(rep(6, np.int64)),
            "producerEpoch": pa.array(rep(7, np.int32)),
            "sequence": pa.array(np.frombuffer(c.sequences, np.int32)),
            "isTransactional": pa.array(rep(9, np.bool_)),
            "isControl": pa.array(rep(10, np.bool_)),
            "crcValid": pa.array(rep(11, np.bool_)),
            "error": pa.nulls(n, pa.string()),
        }
        rb = pa.RecordBatch.from_arrays([arrays[f.name].cast(f.type) if arrays[f.name].type != f.type else arrays[f.name]
                                         for f in self.schema], schema=self.schema)
        c.clear()
        meta.clear()
        return rb


def parse_segment(content, path: str, schema: pa.Schema | None = None) -> Iterator[pa.RecordBatch]:
    """The record rows of one ``.log`` file whose bytes are ``content`` (a buffer)."""
    schema = schema or records_arrow_schema()
    topic, partition = topic_partition(path)
    out = _Out(schema, path, topic, partition, parse_base_offset(os.path.basename(path)))
    cols = out.cols
    walker = SegmentWalker(memoryview(content), path=path)
    for batch, data in walker:
        before = cols.n
        attrs = batch.attributes
        if batch.magic >= 2:
            codec = attrs & CODEC_MASK
            section = data[V2_HEADER_SIZE:]
            if codec:
                section = decompress(codec, section, magic=2)
            lat = batch.max_timestamp if attrs & TIMESTAMP_TYPE_BIT else None
            cols.add_v2(section, batch.count, batch.offset, batch.base_timestamp, batch.base_sequence, lat)
        else:
            cols.add_records(decode_batch_records(batch, data))
        out.batches.append((cols.n - before, batch.position, batch.offset, batch.magic, batch.codec,
                            batch.partition_leader_epoch, batch.producer_id, batch.producer_epoch, batch.timestamp_type,
                            batch.is_transactional, batch.is_control, batch.crc == batch.computed_crc))
        if out.full():
            rb = out.flush()
            if rb is not None:
                yield rb
    if walker.error is not None:
        raise walker.error
    rb = out.flush()
    if rb is not None:
        yield rb


def parse_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: rows ``(path, content)`` of binaryFile in, record rows out."""
    schema = records_arrow_schema()
    for rb in batches:
        paths = rb.column("path")
        contents = rb.column("content")
        for i in range(rb.num_rows):
            path = paths[i].as_py()
            if path.startswith("file:"):
                path = path[len("file:"):]
            # a pyarrow Buffer's memoryview has format 'b' (signed bytes): as unsigned, as files read
            yield from parse_segment(memoryview(contents[i].as_buffer()).cast("B"), path, schema)


def load(spark, dirs: list[str]):
    """The baseline DataFrame of record rows over the log dirs ``dirs``."""
    df = (spark.read.format("binaryFile")
          .option("pathGlobFilter", "*.log")
          .option("recursiveFileLookup", "true")
          .load(dirs))
    return df.select("path", "content").mapInArrow(parse_files, records_ddl())
