"""kafka-python driving the work of ``kafkatool convert --to-magic M --compression C [--level N] SRC.log DEST.log``.

Usage::

    python bench/peer_convert_kafka_python.py --to-magic 2 --compression zstd [--level N] SRC.log DEST.log

The segment is read through a fixed window (8 MiB, grown only for a larger entry): the complete
entries of the window are handed to ``kafka.record.MemoryRecords`` (kafka-python reads only from
one ``bytes`` object), and each batch's records are read through kafka-python's record iterators
and written again with its builders, one output batch per source batch (spec §13, as kafkatool):

* to v2: ``DefaultRecordBatchBuilder`` at the target codec, offsets appended relative to the
  batch's first one, producer id/epoch, base sequence and the transactional flag kept; then the
  two header fields the builder leaves to the broker are patched in place: baseOffset and the
  partition leader epoch (neither is covered by the CRC). A legacy source wrapper gives one batch
  (producer fields -1, leader epoch -1, as Kafka's up-conversion).
* to v0/v1: ``LegacyRecordBatchBuilder`` (headers dropped), one wrapper per source batch with
  inner offsets relative to the first record (v1) or absolute (v0); then the wrapper's offset
  (the last record's, outside the CRC) and, for v1, its timestamp (the largest inner one; the
  builder writes 0) are set and the wrapper's CRC-32 recomputed with ``kafka.record.util``'s.
* control batches: copied unchanged to v2, dropped to v0/v1 (kafkatool's rule).

Compression level: kafka-python's builders take none. Its gzip encoder defaults to level 9 where
Kafka's default is 6 (``Deflater.DEFAULT_COMPRESSION``), so ``--level`` (default 6 for gzip) is
bound into the builders' own ``gzip_encode`` (kafka-python's function, only its level fixed);
zstd is level 3 on both sides (python-zstandard's default = Kafka's), lz4 ``lz4.frame``'s
default level 0 on both sides (kafkatool's default). The output file is written as batches are
built (one ``write`` per batch) and fsynced at the end, as kafkatool does. What this driver does not
handle (the benchmark segments hold none of it): LogAppendTime batches, compacted empty batches,
damaged entries, aborted transactions.
"""

from __future__ import annotations

import argparse
import functools
import os
import struct
import sys

import kafka.codec
import kafka.record.default_records as kdr
import kafka.record.legacy_records as klr
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
WINDOW = 8 << 20
BIG = 1 << 62  # batch_size: never refuse a record (one output batch per source batch)
_ENTRY = struct.Struct(">qi")  # offset, size
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_U = struct.Struct(">I")


def set_levels(level: int | None) -> int:
    """Bind the gzip level into kafka-python's builders (its own ``gzip_encode``); the level used."""
    gz = 6 if level is None else level
    enc = functools.partial(kafka.codec.gzip_encode, compresslevel=gz)
    kdr.gzip_encode = enc
    klr.gzip_encode = enc
    return gz


def windows(path: str):
    """``bytes`` holding whole entries, read through a fixed window; a truncated tail is left out."""
    with open(path, "rb") as f:
        buf = b""
        while True:
            chunk = f.read(max(WINDOW, 0))
            if not chunk:
                return
            buf += chunk
            end = 0
            n = len(buf)
            while end + 12 <= n:
                size = _ENTRY.unpack_from(buf, end)[1] + 12
                if end + size > n:
                    break
                end += size
            if end:
                yield buf[:end]
            buf = buf[end:]


def to_v2(batch, codec: int) -> bytes | None:
    if batch.magic >= 2 and batch.is_control_batch:
        return None  # copied by the caller
    records = list(batch)
    if not records:
        return None
    if batch.magic >= 2:
        b = DefaultRecordBatchBuilder(2, codec, batch.is_transactional, batch.producer_id, batch.producer_epoch,
                                      batch.base_sequence, BIG)
        leader_epoch = batch.leader_epoch
    else:
        b = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, BIG)
        leader_epoch = -1
    base = records[0].offset
    for r in records:
        b.append(r.offset - base, r.timestamp, r.key, r.value, getattr(r, "headers", None) or [])
    out = b.build()
    _Q.pack_into(out, 0, base)
    _I.pack_into(out, 12, leader_epoch)
    return out


def to_legacy(batch, magic: int, codec: int) -> bytes | None:
    if batch.magic >= 2 and batch.is_control_batch:
        return None
    records = list(batch)
    if not records:
        return None
    b = LegacyRecordBatchBuilder(magic, codec, BIG)
    first = records[0].offset
    max_ts = -1
    for r in records:
        ts = r.timestamp if magic == 1 else None
        if magic == 1 and ts > max_ts:
            max_ts = ts
        b.append(r.offset - first if (magic == 1 and codec) else r.offset, ts, r.key, r.value)
    out = b.build()
    if codec:  # one wrapper: its offset is the last record's, its timestamp the largest (v1)
        _Q.pack_into(out, 0, records[-1].offset)
        if magic == 1:
            _Q.pack_into(out, 18, max_ts)
            _U.pack_into(out, 12, calc_crc32(memoryview(out)[16:]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--to-magic", type=int, required=True, choices=(0, 1, 2))
    ap.add_argument("--compression", required=True, choices=sorted(CODECS))
    ap.add_argument("--level", type=int)
    ap.add_argument("src")
    ap.add_argument("dest")
    args = ap.parse_args(argv)
    set_levels(args.level)
    codec = CODECS[args.compression]
    magic = args.to_magic
    batches = 0
    fd = os.open(args.dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for window in windows(args.src):
            mr = MemoryRecords(window)
            while True:
                batch = mr.next_batch()
                if batch is None:
                    break
                out = to_v2(batch, codec) if magic == 2 else to_legacy(batch, magic, codec)
                if out is None:
                    if magic == 2 and batch.magic >= 2 and batch.is_control_batch:
                        out = batch._buffer  # unchanged
                    else:
                        continue
                os.write(fd, out)
                batches += 1
        os.fsync(fd)
    finally:
        os.close(fd)
    print(f"{batches} batches written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
