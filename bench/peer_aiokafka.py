"""aiokafka driving the work of ``kafkatool dump [--deep-iteration --print-data-log] FILE``.

Usage: ``python bench/peer_aiokafka.py [--deep-iteration --print-data-log] FILE.log``.
The whole segment is read into memory and walked with aiokafka's ``MemoryRecords`` (its
C extensions when built, as in a normal install; ``AIOKAFKA_NO_EXTENSIONS=1`` selects the
pure-Python classes). ``peer_common.dump`` prints kafka-dump-log's lines.

aiokafka's compiled ``DefaultRecordBatch`` does not expose the batch length, the
partition leader epoch or the record count, so ``batch_meta`` unpacks those three from
the batch header in the same buffer (one ``struct`` call per batch).
"""

from __future__ import annotations

import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from aiokafka.record.memory_records import MemoryRecords  # noqa: E402

from peer_common import dump, parse_args  # noqa: E402

# batchLength at byte 8, partitionLeaderEpoch at 12, recordsCount at 57 (spec §4.1).
_META = struct.Struct(">8xii41xi")


def batch_meta(batch, data: bytes, position: int) -> tuple[int, int, int]:
    length, ple, count = _META.unpack_from(data, position)
    return length + 12, ple, count


if __name__ == "__main__":
    deep, path = parse_args(sys.argv[1:], "peer_aiokafka.py")
    sys.exit(dump(path, deep, MemoryRecords, batch_meta))
