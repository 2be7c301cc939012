"""The dump loop shared by the kafka-python and aiokafka drivers (``peer_*.py``).

The peers can only read a segment one way: the whole file into memory as one ``bytes``
object, handed to their ``MemoryRecords``. From there this loop does what
``kafkatool dump`` does for a v2 segment, with the same output, line for line:

* the two file header lines (``Dumping PATH`` / ``Log starting offset: N``);
* per batch, kafka-dump-log's batch line, every field included, with ``isvalid`` from
  the library's own ``validate_crc()`` (called for every batch, in both modes, before
  the records are read — kafka-python requires that order);
* with ``deep``, one ``| offset: ...`` line per record (offset, timestamp, key size,
  value size, sequence, header keys, key and payload decoded as UTF-8 with replacement);
* one ``write`` per batch of the lines joined, like kafkatool (PERF.md lesson 4).

Only what the library does not expose is computed here: the file position (a running
sum of batch sizes) and, for aiokafka, the size, partition leader epoch and record
count, which the ``batch_meta`` callback unpacks from the header bytes. Control batches
and legacy (v0/v1) entries are not handled: the benchmark segments hold neither.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Callable

_CODEC = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_BOOL = {True: "true", False: "false"}
_MAX_INT = 2147483647


def _increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence`` (wraps past Int.MAX to 0)."""
    if sequence > _MAX_INT - increment:
        return increment - (_MAX_INT - sequence) - 1
    return sequence + increment


def parse_args(argv: list[str], prog: str) -> tuple[bool, str]:
    """``[--deep-iteration] [--print-data-log] FILE`` -> (deep, path). Either flag means deep."""
    deep = False
    paths = []
    for a in argv:
        if a in ("--deep-iteration", "--print-data-log"):
            deep = True
        elif a.startswith("-"):
            raise SystemExit(f"{prog}: unknown option {a}")
        else:
            paths.append(a)
    if len(paths) != 1:
        raise SystemExit(f"usage: {prog} [--deep-iteration --print-data-log] FILE.log")
    return deep, paths[0]


def dump(
    path: str,
    deep: bool,
    memory_records: Callable[[bytes], object],
    batch_meta: Callable[[object, bytes, int], tuple[int, int, int]],
) -> int:
    """Dump ``path`` to stdout through the library's ``MemoryRecords``; return the exit code.

    ``batch_meta(batch, data, position) -> (size, partition_leader_epoch, records_count)``.
    """
    with open(path, "rb") as f:
        data = f.read()  # the only way in: MemoryRecords takes one bytes object
    out = sys.stdout
    if (getattr(out, "encoding", "") or "").lower().replace("-", "") != "utf8":
        out = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", errors="replace")
    write = out.write
    name = os.path.basename(path)
    write(f"Dumping {path}\nLog starting offset: {int(name.split('.', 1)[0])}\n")
    records = memory_records(data)
    position = 0
    while records.has_next():
        batch = records.next_batch()
        if batch.magic < 2:
            raise SystemExit(f"{path}:{position}: legacy (v0/v1) entries are not handled by this driver")
        size, ple, count = batch_meta(batch, data, position)
        attrs = batch.attributes
        base = batch.base_offset
        bseq = batch.base_sequence
        lod = batch.last_offset_delta
        valid = batch.validate_crc()
        dh = f"OptionalLong[{batch.first_timestamp}]" if attrs & 0x40 else "OptionalLong.empty"
        tst = "LogAppendTime" if attrs & 0x08 else "CreateTime"
        lines = [
            f"baseOffset: {base} lastOffset: {base + lod} count: {count}"
            f" baseSequence: {bseq} lastSequence: {-1 if bseq == -1 else _increment_sequence(bseq, lod)}"
            f" producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch}"
            f" partitionLeaderEpoch: {ple} isTransactional: {_BOOL[bool(attrs & 0x10)]}"
            f" isControl: {_BOOL[bool(attrs & 0x20)]} deleteHorizonMs: {dh} position: {position}"
            f" {tst}: {batch.max_timestamp} size: {size} magic: {batch.magic}"
            f" compresscodec: {_CODEC[attrs & 0x07]} crc: {batch.crc} isvalid: {_BOOL[valid]}"
        ]
        if deep:
            append = lines.append
            for r in batch:
                key = r.key
                value = r.value
                headers = r.headers
                hk = ",".join(k for k, _v in headers) if headers else ""
                offset = r.offset
                seq = -1 if bseq == -1 else _increment_sequence(bseq, offset - base)
                line = (
                    f"| offset: {offset} {tst}: {r.timestamp} keySize: {-1 if key is None else len(key)}"
                    f" valueSize: {-1 if value is None else len(value)} sequence: {seq} headerKeys: [{hk}]"
                )
                if key is not None:
                    line += f" key: {key.decode('utf-8', 'replace')}"
                if value is not None:
                    line += f" payload: {value.decode('utf-8', 'replace')}"
                append(line)
        lines.append("")
        write("\n".join(lines))
        position += size
    out.flush()
    return 0
