"""aiokafka doing the CRC checks of ``kafkatool verify FILE``.

Usage: ``python bench/peer_verify_aiokafka.py FILE.log``. The whole segment is read into
memory, walked with aiokafka's ``MemoryRecords`` (its C extensions when built, as in a
normal install; ``AIOKAFKA_NO_EXTENSIONS=1`` selects the pure-Python classes), and every
batch checked with ``validate_crc()``. Prints ``batches: N invalid: M`` (see
``peer_verify_common``); exit 1 if any batch is invalid.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from aiokafka.record.memory_records import MemoryRecords  # noqa: E402

from peer_verify_common import parse_args, verify  # noqa: E402

if __name__ == "__main__":
    sys.exit(verify(parse_args(sys.argv[1:], "peer_verify_aiokafka.py"), MemoryRecords))
