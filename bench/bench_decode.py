"""Micro-benchmark: v2 record decoding, C extension vs pure Python (records/s).

Run from the repository root:  python bench/bench_decode.py [--seconds 0.5] [--batches 64]

Decodes ~330-byte records packed into 16 KiB uncompressed batches with
``kafkatool.record.v2.decode_records`` (pure Python) and
``kafkatool.record._speedups.decode_records`` (C), and prints records/s for each
and the ratio. When aiokafka's C extension is installed, its batch iteration over
the same batches is timed too, as a yardstick (it builds record objects with
absolute offsets/timestamps, so it does a little more work per record).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kafkatool.record import v2  # noqa: E402
from kafkatool.record.batch import V2_HEADER_SIZE  # noqa: E402
from kafkatool.record.v2 import RecordSpec, encode_batch  # noqa: E402

try:
    from kafkatool.record._speedups import decode_records as c_decode  # noqa: E402
except ImportError:
    c_decode = None

BATCH_BYTES = 16 * 1024
RECORD_BYTES = 330


def make_batches(n_batches: int, seed: int = 1) -> list[tuple[bytes, int]]:
    """``n_batches`` encoded v2 batches of ~16 KiB, with their record counts."""
    rnd = random.Random(seed)
    batches = []
    offset = 0
    ts = 1_700_000_000_000
    for _ in range(n_batches):
        specs = []
        size = V2_HEADER_SIZE
        while True:
            key = b"user-%010d" % rnd.randrange(10**10)  # 15 bytes
            headers = [("trace", rnd.randbytes(8))] if rnd.random() < 0.25 else []
            # ~330 bytes per record in total: ~10 bytes of framing, key, headers, value
            value_len = RECORD_BYTES - 10 - len(key) - sum(6 + len(v) for _, v in headers)
            value = rnd.randbytes(value_len)
            if size + RECORD_BYTES > BATCH_BYTES:
                break
            specs.append(RecordSpec(offset, ts + rnd.randrange(50), key, value, headers))
            offset += 1
            size += RECORD_BYTES
        batches.append((encode_batch(specs), len(specs)))
    return batches


def rate(fn, batches, seconds: float) -> float:
    """Best records/s over several timed rounds of decoding every batch."""
    total = sum(n for _, n in batches)
    best = 0.0
    deadline = time.perf_counter() + seconds
    rounds = 0
    while rounds < 3 or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        for data, n in batches:
            fn(data, n)
        dt = time.perf_counter() - t0
        best = max(best, total / dt)
        rounds += 1
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.0, help="time spent per decoder (default 1)")
    ap.add_argument("--batches", type=int, default=64, help="16 KiB batches per round (default 64)")
    args = ap.parse_args()

    batches = make_batches(args.batches)
    n_records = sum(n for _, n in batches)
    avg = sum(len(d) - V2_HEADER_SIZE for d, _ in batches) / n_records
    print(f"{len(batches)} batches of ~{BATCH_BYTES // 1024} KiB, {n_records} records, {avg:.0f} bytes/record")

    def py(data, n):
        return v2.decode_records(data, V2_HEADER_SIZE, len(data), n)

    results = {}
    results["python"] = rate(py, batches, args.seconds)
    print(f"  pure Python    : {results['python'] / 1e6:7.3f} M records/s")
    if c_decode is None:
        print("  C extension    : not built (pip install -e . with a C compiler)")
        return

    def c(data, n):
        return c_decode(data, V2_HEADER_SIZE, len(data), n)

    assert c(*batches[0]) == py(*batches[0])
    results["c"] = rate(c, batches, args.seconds)
    print(f"  C extension    : {results['c'] / 1e6:7.3f} M records/s")

    try:
        from aiokafka.record._crecords import DefaultRecordBatch as CBatch  # the compiled one
    except ImportError:
        CBatch = None
    if CBatch is not None:
        def aio(data, n):
            return list(CBatch(data))

        results["aiokafka"] = rate(aio, batches, args.seconds)
        print(f"  aiokafka (C)   : {results['aiokafka'] / 1e6:7.3f} M records/s")

    print(f"C / Python ratio : {results['c'] / results['python']:.1f}x")
    if "aiokafka" in results:
        print(f"C / aiokafka     : {results['c'] / results['aiokafka']:.2f}x")


if __name__ == "__main__":
    main()
