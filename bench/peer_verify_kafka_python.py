"""kafka-python doing the CRC checks of ``kafkatool verify FILE``.

Usage: ``python bench/peer_verify_kafka_python.py FILE.log``. The whole segment is read into
memory, walked with ``kafka.record.MemoryRecords``, and every batch checked with
``DefaultRecordBatch.validate_crc()`` (CRC-32C from the ``crc32c`` package on a memoryview).
Prints ``batches: N invalid: M`` (see ``peer_verify_common``); exit 1 if any batch is invalid.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kafka.record.memory_records import MemoryRecords  # noqa: E402

from peer_verify_common import parse_args, verify  # noqa: E402

if __name__ == "__main__":
    sys.exit(verify(parse_args(sys.argv[1:], "peer_verify_kafka_python.py"), MemoryRecords))
