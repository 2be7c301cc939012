"""Generate the benchmark segments for ``bench_dump.py`` (outside the repository).

Each variant is one ``00000000000000000000.log`` in its own directory under the root
(default ``/tmp/kafkatool-bench``, or ``$KAFKATOOL_BENCH_DIR``, or ``--root``)::

    none-16k-1024m/    ~1 GiB of ~16 KiB v2 batches, uncompressed (~3.2 M records)
    none-1rec-256m/    the same records, one record per batch, 256 MiB
    gzip-16k-256m/     ~16 KiB (uncompressed) batches, 256 MiB of records before compression
    snappy-16k-256m/   ... likewise for snappy (xerial framing), lz4 (Kafka's frame) and zstd
    lz4-16k-256m/
    zstd-16k-256m/

``--quick`` makes 64 MiB versions of each (``*-64m``). A ``bench-meta.json`` beside each
segment records what it holds (records, batches, bytes before compression).

How: a seeded generator builds a set of template batches once with kafkatool's own
encoder (``kafkatool.record.v2.encode_batch``). Records carry offset and timestamp
*deltas*, so a template's record bytes (and its compressed payload) never change; each
output batch is a template copy whose header gets a new baseOffset, baseTimestamp,
maxTimestamp and baseSequence, and a recomputed CRC-32C (the CRC covers the header from
the attributes on, so it must be redone for every batch). The file is written through
a fixed 8 MiB buffer, never held whole in memory, to a temporary name renamed into
place at the end. A file that already exists with the size and metadata the plan
predicts is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import struct
import sys
import time
from dataclasses import asdict, dataclass

from kafkatool.record.compression import Codec
from kafkatool.record.crc import crc32c
from kafkatool.record.v2 import HEADER, RecordSpec, encode_batch, encode_record

GENERATOR_VERSION = 1
DEFAULT_ROOT = os.environ.get("KAFKATOOL_BENCH_DIR", "/tmp/kafkatool-bench")
SEGMENT_NAME = "00000000000000000000.log"
META_NAME = "bench-meta.json"
MiB = 1 << 20

DEFAULT_SEED = 20240131
N_TEMPLATES = 64  # distinct 16 KiB batches (~3 000 distinct records) cycled over the file
BATCH_BYTES = 16 * 1024  # target size of one uncompressed batch, header included
BASE_TIMESTAMP = 1_706_700_000_000  # 2024-01-31T11:20:00Z
PRODUCER_ID = 4001
PRODUCER_EPOCH = 3
PARTITION_LEADER_EPOCH = 12

# Offsets of the header fields a copy changes (spec §4.1; see kafkatool.record.v2.HEADER).
_BASE_OFFSET_AT = 0
_CRC_AT = 17
_CRC_START = 21
_TIMESTAMPS_AT = 27  # baseTimestamp, maxTimestamp
_BASE_SEQUENCE_AT = 53
_Q = struct.Struct(">q")
_QQ = struct.Struct(">qq")
_I = struct.Struct(">i")
_U = struct.Struct(">I")


@dataclass(frozen=True)
class Variant:
    """One benchmark segment: its codec, batching and size in MiB of (uncompressed) batches."""

    name: str
    codec: int
    one_record_per_batch: bool
    full_mib: int

    def dir_name(self, mib: int) -> str:
        return f"{self.name}-{mib}m"


VARIANTS: dict[str, Variant] = {
    "none-16k": Variant("none-16k", Codec.NONE, False, 1024),
    "none-1rec": Variant("none-1rec", Codec.NONE, True, 256),
    "gzip-16k": Variant("gzip-16k", Codec.GZIP, False, 256),
    "snappy-16k": Variant("snappy-16k", Codec.SNAPPY, False, 256),
    "lz4-16k": Variant("lz4-16k", Codec.LZ4, False, 256),
    "zstd-16k": Variant("zstd-16k", Codec.ZSTD, False, 256),
}
QUICK_MIB = 64


@dataclass(frozen=True)
class Segment:
    """A generated (or planned) segment and what it holds."""

    variant: str
    path: str
    codec: str
    target_mib: int
    batches: int
    records: int
    file_bytes: int
    uncompressed_bytes: int
    """Sum of the batch sizes had they not been compressed (equals file_bytes for none)."""
    seed: int
    generator_version: int = GENERATOR_VERSION


# --------------------------------------------------------------------------- records

_EVENT_TYPES = ("order_created", "order_paid", "order_shipped", "cart_updated", "page_view", "refund_issued")
_REGIONS = ("eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-southeast-1")
_CHANNELS = ("web", "ios", "android", "pos", "partner-api")
_CURRENCIES = ("EUR", "USD", "GBP", "SEK", "JPY")
_WORDS = (
    "express", "gift", "fragile", "priority", "standard", "pickup", "locker", "weekend", "evening",
    "reorder", "promo", "loyalty", "bundle", "backorder", "split", "insured", "eco", "signature",
)


def _record(rng: random.Random) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    """One realistic record: a customer key, a JSON event of ~250 bytes, a few headers (~330 bytes in all)."""
    customer = f"customer-{rng.randrange(10_000_000):07d}"
    key = None if rng.random() < 0.02 else customer.encode()
    items = ",".join(
        f'{{"sku":"SKU-{rng.randrange(100_000):05d}","qty":{rng.randint(1, 5)},"price":{rng.randint(100, 99_999) / 100}}}'
        for _ in range(rng.choice((1, 1, 1, 2, 2, 3)))
    )
    note = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(0, 2)))
    value = (
        f'{{"event_id":"{rng.getrandbits(128):032x}","type":"{rng.choice(_EVENT_TYPES)}",'
        f'"customer":"{customer}","region":"{rng.choice(_REGIONS)}","channel":"{rng.choice(_CHANNELS)}",'
        f'"currency":"{rng.choice(_CURRENCIES)}","items":[{items}],"note":"{note}"}}'
    ).encode()
    headers: list[tuple[str, bytes]] = []
    if rng.random() < 0.6:
        headers.append(("traceparent", f"00-{rng.getrandbits(128):032x}-{rng.getrandbits(64):016x}-01".encode()))
    if rng.random() < 0.4:
        headers.append(("content-type", b"application/json"))
    if rng.random() < 0.05:
        headers.append(("retry-count", str(rng.randint(1, 3)).encode()))
    return key, value, headers


def _template_records(rng: random.Random) -> list[RecordSpec]:
    """Records (offsets and timestamps relative to 0) filling one ~16 KiB batch."""
    specs: list[RecordSpec] = []
    size = HEADER.size
    ts = 0
    while True:
        key, value, headers = _record(rng)
        n = len(encode_record(len(specs), ts, key, value, headers))
        if specs and size + n > BATCH_BYTES:
            return specs
        specs.append(RecordSpec(len(specs), ts, key, value, headers))
        size += n
        ts += rng.randint(0, 3)


def _templates(variant: Variant, seed: int) -> list[tuple[bytes, int, int, int]]:
    """``(batch bytes, records, max timestamp delta, uncompressed size)`` per template batch.

    Templates have baseOffset 0 and baseTimestamp 0; every copy is patched.
    """
    rng = random.Random(seed)
    groups = [_template_records(rng) for _ in range(N_TEMPLATES)]
    if variant.one_record_per_batch:
        groups = [[r._replace(offset=0, timestamp=0)] for g in groups for r in g]
    out = []
    for specs in groups:
        common = dict(
            base_offset=0,
            producer_id=PRODUCER_ID,
            producer_epoch=PRODUCER_EPOCH,
            base_sequence=0,
            partition_leader_epoch=PARTITION_LEADER_EPOCH,
        )
        plain = encode_batch(specs, **common)
        data = plain if variant.codec == Codec.NONE else encode_batch(specs, codec=variant.codec, **common)
        out.append((data, len(specs), specs[-1].timestamp, len(plain)))
    return out


# --------------------------------------------------------------------------- plan and write


def _plan(templates: list[tuple[bytes, int, int, int]], target_bytes: int) -> tuple[int, int, int, int]:
    """Cycle the templates while the uncompressed total stays within ``target_bytes``.

    Returns ``(batches, records, file_bytes, uncompressed_bytes)``.
    """
    batches = records = file_bytes = raw = 0
    n = len(templates)
    while True:
        data, count, _span, plain = templates[batches % n]
        if raw + plain > target_bytes:
            return batches, records, file_bytes, raw
        batches += 1
        records += count
        file_bytes += len(data)
        raw += plain


def segment_path(root: str, variant: Variant, mib: int) -> str:
    return os.path.join(root, variant.dir_name(mib), SEGMENT_NAME)


def _meta_matches(meta_path: str, planned: Segment) -> bool:
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return False
    return meta == asdict(planned)


def ensure_segment(root: str, variant: Variant, mib: int, seed: int = DEFAULT_SEED, log=print) -> Segment:
    """Generate ``variant`` at ``mib`` MiB under ``root`` unless it is already there; return it."""
    templates = _templates(variant, seed)
    batches, records, file_bytes, raw = _plan(templates, mib * MiB)
    path = segment_path(root, variant, mib)
    seg = Segment(
        variant=variant.name,
        path=path,
        codec=Codec(variant.codec).name.lower(),
        target_mib=mib,
        batches=batches,
        records=records,
        file_bytes=file_bytes,
        uncompressed_bytes=raw,
        seed=seed,
    )
    meta_path = os.path.join(os.path.dirname(path), META_NAME)
    if os.path.isfile(path) and os.path.getsize(path) == file_bytes and _meta_matches(meta_path, seg):
        log(f"  kept      {path} ({file_bytes / MiB:.1f} MiB, {records:,} records, {batches:,} batches)")
        return seg
    os.makedirs(os.path.dirname(path), exist_ok=True)
    t0 = time.perf_counter()
    _write(path, templates, batches, file_bytes)
    with open(meta_path, "w") as f:
        json.dump(asdict(seg), f, indent=2)
        f.write("\n")
    log(
        f"  generated {path} ({file_bytes / MiB:.1f} MiB, {records:,} records, {batches:,} batches)"
        f" in {time.perf_counter() - t0:.1f} s"
    )
    return seg


def _write(path: str, templates: list[tuple[bytes, int, int, int]], batches: int, expected_size: int) -> None:
    """Write ``batches`` patched template copies through a fixed buffer, then rename into place."""
    chunk_limit = 8 * MiB
    largest = max(len(t[0]) for t in templates)
    buf = bytearray(chunk_limit + largest)
    mv = memoryview(buf)
    n = len(templates)
    tmp = path + ".tmp"
    offset = 0
    sequence = 0
    ts = BASE_TIMESTAMP
    written = 0
    with open(tmp, "wb") as f:
        p = 0
        for i in range(batches):
            data, count, span, _plain = templates[i % n]
            size = len(data)
            mv[p : p + size] = data
            _Q.pack_into(buf, p + _BASE_OFFSET_AT, offset)
            _QQ.pack_into(buf, p + _TIMESTAMPS_AT, ts, ts + span)
            _I.pack_into(buf, p + _BASE_SEQUENCE_AT, sequence)
            _U.pack_into(buf, p + _CRC_AT, crc32c(mv[p + _CRC_START : p + size]))
            p += size
            offset += count
            sequence = (sequence + count) & 0x7FFFFFFF  # Kafka wraps sequences past Int.MAX to 0
            ts += span + 1
            if p >= chunk_limit:
                f.write(mv[:p])
                written += p
                p = 0
        f.write(mv[:p])
        written += p
    if written != expected_size:
        raise RuntimeError(f"{tmp}: wrote {written} bytes, planned {expected_size}")
    os.replace(tmp, path)


def select_variants(spec: str | None) -> list[Variant]:
    """``"none-16k,gzip-16k"`` (or None for all) as variants, in the canonical order."""
    if not spec:
        return list(VARIANTS.values())
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in names if s not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    return [v for v in VARIANTS.values() if v.name in names]


def ensure_segments(
    root: str, variants: list[Variant], quick: bool, seed: int = DEFAULT_SEED, log=print, full_mib: dict[str, int] | None = None
) -> list[Segment]:
    """The segments of ``variants``: ``QUICK_MIB`` each with ``quick``, else each variant's full
    size, or the size ``full_mib`` gives for its name (a benchmark that wants another size)."""
    sizes = full_mib or {}
    return [ensure_segment(root, v, QUICK_MIB if quick else sizes.get(v.name, v.full_mib), seed, log) for v in variants]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=DEFAULT_ROOT, help=f"directory for the segments (default {DEFAULT_ROOT})")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_MIB} MiB of each variant instead of the full sizes")
    ap.add_argument("--variants", help=f"comma separated subset of: {', '.join(VARIANTS)}")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = ap.parse_args(argv)
    root = os.path.abspath(args.root)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.commonpath([root, repo]) == repo:
        raise SystemExit(f"{root} is inside the repository; pick a --root outside {repo}")
    print(f"segments under {root}:")
    ensure_segments(root, select_variants(args.variants), args.quick, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
