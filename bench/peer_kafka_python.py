"""kafka-python driving the work of ``kafkatool dump [--deep-iteration --print-data-log] FILE``.

Usage: ``python bench/peer_kafka_python.py [--deep-iteration --print-data-log] FILE.log``.
The whole segment is read into memory and walked with ``kafka.record.MemoryRecords``;
``peer_common.dump`` prints kafka-dump-log's lines (see there for what is computed).
kafka-python's ``DefaultRecordBatch`` exposes every header field the batch line needs.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kafka.record.memory_records import MemoryRecords  # noqa: E402

from peer_common import dump, parse_args  # noqa: E402


def batch_meta(batch, data: bytes, position: int) -> tuple[int, int, int]:
    return batch.size_in_bytes, batch.leader_epoch, batch.records_count


if __name__ == "__main__":
    deep, path = parse_args(sys.argv[1:], "peer_kafka_python.py")
    sys.exit(dump(path, deep, MemoryRecords, batch_meta))
