"""The CRC check shared by the kafka-python and aiokafka verify drivers (``peer_verify_*.py``).

What ``kafkatool verify`` does first for every batch, done through each library:

* read the segment the only way the libraries can take it: the whole file as one
  ``bytes`` object (so memory grows with the segment), handed to ``MemoryRecords``;
* walk every batch (``has_next()`` / ``next_batch()``);
* call the library's own ``validate_crc()`` on each (CRC-32C over the batch from its
  attributes to the end: kafka-python through the ``crc32c`` package, aiokafka in its
  C extension), and count the batches that fail.

It prints ``batches: N invalid: M`` and, for each invalid batch (at most 20), its index
and baseOffset, so a benchmark can check that exactly the damaged batch is reported.
Exit status: 0 when every batch is valid, 1 otherwise (like ``kafkatool verify``).

Nothing else is checked (no framing, offsets or timestamps, no record decoding): the
peers have no such checks, so this is the floor of what a library-based verify costs.
Legacy (v0/v1) entries are walked and checked too; the benchmark segments hold none.
"""

from __future__ import annotations

import sys
from typing import Callable

MAX_LISTED = 20


def parse_args(argv: list[str], prog: str) -> str:
    if len(argv) != 1 or argv[0].startswith("-"):
        raise SystemExit(f"usage: {prog} FILE.log")
    return argv[0]


def verify(path: str, memory_records: Callable[[bytes], object]) -> int:
    """Check every batch's CRC in ``path`` with the library's ``MemoryRecords``; return the exit code."""
    with open(path, "rb") as f:
        data = f.read()  # the only way in: MemoryRecords takes one bytes object
    records = memory_records(data)
    has_next = records.has_next
    next_batch = records.next_batch
    batches = 0
    invalid: list[tuple[int, int]] = []
    while has_next():
        batch = next_batch()
        if not batch.validate_crc():
            invalid.append((batches, batch.base_offset))
        batches += 1
    out = [f"batches: {batches} invalid: {len(invalid)}"]
    out += [f"invalid batch: index {i} baseOffset {o}" for i, o in invalid[:MAX_LISTED]]
    sys.stdout.write("\n".join(out) + "\n")
    sys.stdout.flush()
    return 1 if invalid else 0
