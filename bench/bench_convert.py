"""Benchmark ``kafkatool convert`` (issue 11) against the same conversion driven by kafka-python's builders.

Usage::

    python bench/bench_convert.py --quick       # 64 MiB sources, 1 run: a smoke check (~1 minute)
    python bench/bench_convert.py               # 1 GiB v2 source (twice) + 256 MiB v1 gzip source, 1 run (~3 minutes)
    python bench/bench_convert.py --runs 3 --conversions v2-none-to-v2-zstd

Three conversions, each a whole process (interpreter start, imports, planning, reading, encoding,
compressing, writing + fsync, the new ``.index``/``.timeindex`` for kafkatool, exit), run and
measured as ``bench_dump.py`` runs its tools (its ``run_process``: wall time around spawn and reap,
peak RSS from GNU time's ``%M``, user and system CPU; the interpreter's own ``kafkatool`` script;
a snapshot of ``kafkatool/`` taken at the start unless ``--live``):

* ``v2-none-to-v2-zstd``  the ``none-16k`` segment of ``gen_segment.py`` (1 GiB, 16 KiB v2 batches,
  ~330-byte records with headers) to v2 zstd (level 3 on both sides: Kafka's default, and
  python-zstandard's, which kafka-python's builder uses);
* ``v2-none-to-v1-gzip``  the same segment to v1 gzip, one wrapper per source batch, level 6 on
  both sides (Kafka's default; kafka-python's own gzip default is 9, so the peer's level is set);
* ``v1-gzip-to-v2-lz4``   a v1 gzip segment (generated here: 256 MiB of inner messages before
  compression, ~16 KiB wrappers of the same records without headers) to v2 lz4 (``lz4.frame``
  level 0 on both sides: kafkatool's default and kafka-python's).

``kafkatool convert --to-magic M --compression C [--level 6] --no-progress SRC.log DEST`` against
``peer_convert_kafka_python.py`` (kafka-python's ``MemoryRecords`` over a fixed window, its record
iterators, its ``DefaultRecordBatchBuilder``/``LegacyRecordBatchBuilder``; see there). The source
is read again before every run (page cache); the tools are interleaved run by run; best of
``--runs`` (default 1: the 1 GiB conversions take the machine for a while) is kept, RSS is the
largest seen.

Checks (after the timed runs, untimed; ``--no-check`` skips them): every output is read back with
aiokafka (its C readers, an independent implementation) and must hold the source's records, same
offsets, timestamps, keys and values (headers too when the target is v2), at the target magic and
codec, kafkatool's and kafka-python's alike.

The table gives seconds, records/s (source records per second), peak RSS, CPU seconds, output
size, and on kafkatool's rows the ratio ``kafka-python seconds / kafkatool seconds``. Targets (the
issue): ratio >= 3 for each conversion, and flat memory (kafkatool's peak RSS < 100 MiB whatever
the segment size). JSON goes to ``bench/out/convert-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import random
import shutil
import struct
import sys
import time
from dataclasses import asdict, dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_dump as bd  # noqa: E402  (process running, snapshot, cache warming, machine info)
import gen_segment as gen  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20
PEER = "kafka-python"
TOOLS = ("kafkatool", PEER)
TARGET_RATIO = 3.0
TARGET_RSS_MIB = 100.0

V1_GZIP = "v1-gzip-16k"
V1_GZIP_FULL_MIB = 256
V1_GZIP_LEVEL = 6


@dataclass(frozen=True)
class Conversion:
    name: str
    source: str  # a gen_segment variant, or V1_GZIP
    magic: int
    codec: str
    level: int | None  # passed to both tools when set
    levels_note: str

    def args(self) -> list[str]:
        out = ["--to-magic", str(self.magic), "--compression", self.codec]
        return out + (["--level", str(self.level)] if self.level is not None else [])


CONVERSIONS = {
    c.name: c
    for c in (
        Conversion("v2-none-to-v2-zstd", "none-16k", 2, "zstd", None, "zstd level 3 both (kafkatool's default = Kafka's; python-zstandard's default in kafka-python)"),
        Conversion("v2-none-to-v1-gzip", "none-16k", 1, "gzip", 6, "gzip level 6 both (Kafka's default; kafka-python's own default 9 is overridden)"),
        Conversion("v1-gzip-to-v2-lz4", V1_GZIP, 2, "lz4", None, "lz4.frame level 0 both (kafkatool's default and kafka-python's)"),
    )
}


# --------------------------------------------------------------------------- the v1 gzip source


def ensure_v1_gzip(root: str, mib: int, seed: int, log) -> gen.Segment:
    """A v1 segment of gzip wrappers (~16 KiB of inner messages each), ``mib`` MiB of inner
    messages before compression; kept when already there with the planned size and metadata.

    The records are gen_segment's (same seeded templates) without headers, timestamps
    ``BASE_TIMESTAMP + delta``. Each template wrapper is encoded once with kafkatool's
    ``encode_legacy`` (level 6; wrapper timestamp = the largest inner one); a copy only gets a
    new wrapper offset (the last inner offset: outside the CRC, and v1 inner offsets are
    relative), so inner timestamps repeat with the template cycle.
    """
    from kafkatool.record.compression import Codec
    from kafkatool.record.legacy import encode_legacy
    from kafkatool.record.v2 import RecordSpec

    rng = random.Random(seed)
    templates = []
    for _ in range(gen.N_TEMPLATES):
        specs = [RecordSpec(r.offset, gen.BASE_TIMESTAMP + r.timestamp, r.key, r.value) for r in gen._template_records(rng)]
        data = encode_legacy(specs, magic=1, codec=Codec.GZIP, level=V1_GZIP_LEVEL)
        templates.append((data, len(specs), len(encode_legacy(specs, magic=1))))
    batches = records = file_bytes = raw = 0
    while True:
        data, count, plain = templates[batches % len(templates)]
        if raw + plain > mib * MiB:
            break
        batches += 1
        records += count
        file_bytes += len(data)
        raw += plain
    path = os.path.join(root, f"{V1_GZIP}-{mib}m", gen.SEGMENT_NAME)
    seg = gen.Segment(variant=V1_GZIP, path=path, codec="gzip", target_mib=mib, batches=batches, records=records,
                      file_bytes=file_bytes, uncompressed_bytes=raw, seed=seed)
    meta_path = os.path.join(os.path.dirname(path), gen.META_NAME)
    try:
        with open(meta_path) as f:
            same = json.load(f) == asdict(seg)
    except (OSError, ValueError):
        same = False
    if same and os.path.isfile(path) and os.path.getsize(path) == file_bytes:
        log(f"  kept      {path} ({file_bytes / MiB:.1f} MiB, {records:,} records, {batches:,} wrappers)")
        return seg
    os.makedirs(os.path.dirname(path), exist_ok=True)
    t0 = time.perf_counter()
    tmp = path + ".tmp"
    offset = 0
    with open(tmp, "wb") as f:
        out = bytearray()
        for i in range(batches):
            data, count, _plain = templates[i % len(templates)]
            at = len(out)
            out += data
            struct.pack_into(">q", out, at, offset + count - 1)
            offset += count
            if len(out) >= 8 * MiB:
                f.write(out)
                out.clear()
        f.write(out)
    if os.path.getsize(tmp) != file_bytes:
        raise RuntimeError(f"{tmp}: wrote {os.path.getsize(tmp)} bytes, planned {file_bytes}")
    os.replace(tmp, path)
    with open(meta_path, "w") as f:
        json.dump(asdict(seg), f, indent=2)
        f.write("\n")
    log(f"  generated {path} ({file_bytes / MiB:.1f} MiB, {records:,} records, {batches:,} wrappers)"
        f" in {time.perf_counter() - t0:.1f} s")
    return seg


# --------------------------------------------------------------------------- checks (aiokafka)


def _windows(path: str, window: int = 8 * MiB):
    with open(path, "rb") as f:
        buf = b""
        while chunk := f.read(window):
            buf += chunk
            end = 0
            while end + 12 <= len(buf):
                size = struct.unpack_from(">i", buf, end + 8)[0] + 12
                if end + size > len(buf):
                    break
                end += size
            if end:
                yield buf[:end]
            buf = buf[end:]


def read_back(path: str, headers: bool) -> dict:
    """aiokafka's view of a segment: record count, a digest of (offset, timestamp, key, value
    [, headers]) in order, and the (magic, codec) pairs of its batches."""
    from aiokafka.record.memory_records import MemoryRecords

    h = hashlib.sha256()
    pack = struct.Struct(">qqii").pack
    n = 0
    kinds: dict[str, int] = {}
    for window in _windows(path):
        mr = MemoryRecords(window)
        while (batch := mr.next_batch()) is not None:
            for r in batch:
                k, v = r.key, r.value
                h.update(pack(r.offset, r.timestamp if r.timestamp is not None else -1,
                              -1 if k is None else len(k), -1 if v is None else len(v)))
                if k:
                    h.update(k)
                if v:
                    h.update(v)
                if headers:
                    for hk, hv in r.headers:
                        h.update(hk.encode() + b"\0" + (b"\xff" if hv is None else b"\1" + hv))
                n += 1
    with open(path, "rb") as f:  # magic and codec of every entry, from the headers
        pos = 0
        size = os.fstat(f.fileno()).st_size
        while pos + 22 <= size:
            f.seek(pos)
            head = f.read(23)
            length = struct.unpack_from(">i", head, 8)[0]
            magic = head[16]
            codec = (head[22] if magic >= 2 else head[17]) & 7
            key = f"v{magic}/{['none', 'gzip', 'snappy', 'lz4', 'zstd'][codec] if codec < 5 else codec}"
            kinds[key] = kinds.get(key, 0) + 1
            pos += 12 + length
    return {"records": n, "sha256": h.hexdigest(), "batches": kinds}


# --------------------------------------------------------------------------- running


def command(tool: str, conv: Conversion, src: str, out: str) -> list[str]:
    if tool == "kafkatool":
        return [*bd.kafkatool_exe(), "convert", *conv.args(), "--no-progress", src, out]
    return [*bd.python_cmd(), os.path.join(HERE, "peer_convert_kafka_python.py"), *conv.args(), src, out]


def output_path(scratch: str, tool: str) -> str:
    """kafkatool's DEST dir (the .log inside it), or the peer's output file."""
    return os.path.join(scratch, "kafkatool-dest") if tool == "kafkatool" else os.path.join(scratch, "kafka-python.log")


def out_log(scratch: str, tool: str) -> str:
    p = output_path(scratch, tool)
    return os.path.join(p, gen.SEGMENT_NAME) if tool == "kafkatool" else p


def clean(scratch: str, tools: tuple[str, ...] = TOOLS) -> None:
    """Remove the outputs of ``tools`` (kafkatool's DEST must not exist when it starts)."""
    for tool in tools:
        p = output_path(scratch, tool)
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.unlink(p)


@dataclass
class Result:
    conversion: str
    source: str
    tool: str
    argv: list[str]
    seconds: float
    max_rss_mib: float
    cpu_s: float
    records: int
    source_bytes: int
    output_bytes: int = 0
    records_per_s: float = 0.0
    ratio_vs_peer: float | None = None
    """On kafkatool's rows: kafka-python seconds / kafkatool seconds (> 1: kafkatool faster)."""
    exit_code: int = 0
    runs: list[dict] = field(default_factory=list)


def fmt_table(results: list[Result]) -> str:
    head = (f"{'conversion':<20} {'tool':<12} {'seconds':>8} {'Mrec/s':>7} {'peak RSS MiB':>12} {'CPU s':>7}"
            f" {'out MiB':>8} {'x kafka-python':>14}")
    rows = [head, "-" * len(head)]
    for r in results:
        ratio = f"x{r.ratio_vs_peer:.2f}" if r.ratio_vs_peer is not None else ""
        rows.append(f"{r.conversion:<20} {r.tool:<12} {r.seconds:8.3f} {r.records_per_s / 1e6:7.3f} {r.max_rss_mib:12.1f}"
                    f" {r.cpu_s:7.2f} {r.output_bytes / MiB:8.1f} {ratio:>14}")
    return "\n".join(rows)


def evaluate_targets(results: list[Result], quick: bool) -> list[dict]:
    out = []
    for r in results:
        if r.tool != "kafkatool":
            continue
        if r.ratio_vs_peer is not None:
            out.append({"target": f">= {TARGET_RATIO:g}x kafka-python", "variant": r.conversion,
                        "measured": f"x{r.ratio_vs_peer:.2f} ({r.seconds:.2f} s vs {r.seconds * r.ratio_vs_peer:.2f} s)",
                        "status": "pass" if r.ratio_vs_peer >= TARGET_RATIO else "FAIL", "note": ""})
        out.append({"target": f"flat memory: peak RSS < {TARGET_RSS_MIB:g} MiB", "variant": r.conversion,
                    "measured": f"{r.max_rss_mib:.1f} MiB", "status": "pass" if r.max_rss_mib < TARGET_RSS_MIB else "FAIL",
                    "note": ""})
    if quick:
        for t in out:
            t["note"] = "--quick: 64 MiB sources, not the issue's sizes"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=gen.DEFAULT_ROOT, help=f"where the segments live (default {gen.DEFAULT_ROOT})")
    ap.add_argument("--quick", action="store_true", help=f"{gen.QUICK_MIB} MiB sources: a smoke check")
    ap.add_argument("--conversions", default=",".join(CONVERSIONS), help=f"comma separated subset of: {', '.join(CONVERSIONS)}")
    ap.add_argument("--runs", type=int, default=1, help="timed runs per tool, best kept (default 1)")
    ap.add_argument("--no-check", action="store_true", help="skip reading the outputs back with aiokafka")
    ap.add_argument("--keep", action="store_true", help="keep the outputs (default: removed at the end)")
    ap.add_argument("--clean-start", action="store_true", help=bd.CLEAN_START_HELP)
    ap.add_argument("--live", action="store_true", help="run the working tree's kafkatool, not a snapshot taken at the start")
    ap.add_argument("--out", default=os.path.join(HERE, "out"), help="directory for the JSON report")
    ap.add_argument("--seed", type=int, default=gen.DEFAULT_SEED)
    args = ap.parse_args(argv)

    names = [c.strip() for c in args.conversions.split(",") if c.strip()]
    if bad := [c for c in names if c not in CONVERSIONS]:
        ap.error(f"unknown conversion: {', '.join(bad)}")
    convs = [CONVERSIONS[n] for n in names]
    root = os.path.abspath(args.root)
    started = _dt.datetime.now()
    log = lambda *a: print(*a, flush=True)  # noqa: E731

    started_versions = bd.versions()
    snapshot = None if args.live else bd.snapshot_kafkatool(root)
    bd.set_child_env(root, snapshot, args.clean_start)
    kt_location = bd.child_kafkatool_info()["location"]
    load = bd.announce_under_test(log, kt_location, started_versions, snapshot, f"; command {bd.kafkatool_exe()[0]}")
    if load is None:
        return 2

    log(f"segments under {root}:")
    sources: dict[str, gen.Segment] = {}
    for conv in convs:
        if conv.source in sources:
            continue
        if conv.source == V1_GZIP:
            sources[conv.source] = ensure_v1_gzip(root, gen.QUICK_MIB if args.quick else V1_GZIP_FULL_MIB, args.seed, log)
        else:
            (sources[conv.source],) = gen.ensure_segments(root, gen.select_variants(conv.source), args.quick, args.seed, log)

    results: list[Result] = []
    checks: list[dict] = []
    for conv in convs:
        seg = sources[conv.source]
        label = f"{conv.name}-{seg.target_mib}m"
        scratch = os.path.join(root, "convert", label)
        os.makedirs(scratch, exist_ok=True)
        best: dict[str, Result] = {}
        for _ in range(args.runs):
            for tool in TOOLS:  # interleaved
                clean(scratch, (tool,))
                bd.warm_cache(seg.path)
                argv_ = command(tool, conv, seg.path, output_path(scratch, tool))
                run, _l, _h = bd.run_process(argv_)
                if run.exit_code != 0:
                    log(f"  {tool} exited {run.exit_code} on {conv.name}: {run.stderr.strip()[-400:]}")
                r = best.get(tool)
                if r is None:
                    r = best[tool] = Result(conv.name, label, tool, argv_, run.seconds, run.max_rss_mib, run.user_s + run.sys_s,
                                            seg.records, seg.file_bytes, exit_code=run.exit_code)
                r.runs.append(asdict(run))
                if run.seconds < r.seconds:
                    r.seconds, r.cpu_s = run.seconds, run.user_s + run.sys_s
                r.max_rss_mib = max(r.max_rss_mib, run.max_rss_mib)
                r.exit_code = r.exit_code or run.exit_code
                try:
                    r.output_bytes = os.path.getsize(out_log(scratch, tool))
                except OSError:
                    r.output_bytes = 0
        for tool in TOOLS:
            r = best[tool]
            r.records_per_s = seg.records / r.seconds
        best["kafkatool"].ratio_vs_peer = best[PEER].seconds / best["kafkatool"].seconds
        for tool in TOOLS:
            r = best[tool]
            results.append(r)
            log(f"  {conv.name:<20} {tool:<12} {r.seconds:8.3f} s  {r.records_per_s / 1e6:6.3f} M rec/s  {r.max_rss_mib:7.1f} MiB"
                + (f"  x{r.ratio_vs_peer:.2f} vs kafka-python" if r.ratio_vs_peer is not None else ""))
        if not args.no_check:  # the outputs of the last runs
            headers = conv.magic >= 2 and conv.source != V1_GZIP
            t0 = time.perf_counter()
            expected = read_back(seg.path, headers)
            want = f"v{conv.magic}/{conv.codec}"
            check = {"conversion": conv.name, "source": expected}
            ok = True
            for tool in TOOLS:
                try:
                    got = read_back(out_log(scratch, tool), headers)
                except Exception as e:  # noqa: BLE001 - reported as a failed check
                    got = {"error": f"{type(e).__name__}: {e}"}
                good = (got.get("records") == seg.records and got.get("sha256") == expected["sha256"]
                        and set(got.get("batches", {})) == {want} and best[tool].exit_code == 0)
                check[tool] = {**got, "ok": good}
                ok = ok and good
            check["ok"] = ok
            checks.append(check)
            log(f"  {conv.name:<20} check: {'ok' if ok else 'FAILED'} (aiokafka reads {seg.records:,} records, same digest,"
                f" all {want}, in both outputs; {time.perf_counter() - t0:.1f} s)"
                + ("" if ok else f" {json.dumps({t: check[t] for t in TOOLS})[:600]}"))
        if not args.keep:
            clean(scratch)
    checks_ok = all(c["ok"] for c in checks)

    targets = evaluate_targets(results, args.quick)
    print()
    print(f"kafkatool convert vs kafka-python's builders — whole process, best of {args.runs}, page-cached source")
    for conv in convs:
        seg = sources[conv.source]
        print(f"  {conv.name}: {os.path.relpath(seg.path, root)} ({seg.file_bytes / MiB:.0f} MiB, {seg.records:,} records,"
              f" {seg.batches:,} batches); {conv.levels_note}")
    print("Mrec/s = source records per second of the whole process; x kafka-python = its seconds / kafkatool's")
    print()
    print(fmt_table(results))
    print()
    bd.print_targets(targets)
    print()
    print("checks: skipped (--no-check)" if args.no_check else
          f"checks: {'all passed' if checks_ok else 'FAILED'} — both outputs read back with aiokafka: every source record,"
          " same offsets, timestamps, keys, values (and headers to v2), at the target magic and codec")

    end_source = bd.note_source_change(started_versions, snapshot)
    os.makedirs(args.out, exist_ok=True)
    out_path = os.path.join(args.out, f"convert-{started.strftime('%Y%m%d-%H%M%S')}.json")
    report = {
        "benchmark": "kafkatool convert",
        "started": started.isoformat(timespec="seconds"),
        "elapsed_s": round((_dt.datetime.now() - started).total_seconds(), 1),
        "quick": args.quick,
        "runs": args.runs,
        "clean_start": args.clean_start,
        "conversions": {c.name: {"source": c.source, "args": c.args(), "levels": c.levels_note,
                                 "commands": {t: command(t, c, "SRC", "DEST") for t in TOOLS}} for c in convs},
        "rss_method": bd.rss_method(),
        "machine": bd.machine_info(),
        "load_average_at_start": load,
        "versions": started_versions,
        "kafkatool_under_test": kt_location,
        "kafkatool_source_at_end": end_source,
        "segments": {k: asdict(v) for k, v in sources.items()},
        "results": [asdict(r) for r in results],
        "targets": targets,
        "checks": {"ok": checks_ok, "conversions": checks},
    }
    with open(out_path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"\nJSON report: {os.path.relpath(out_path)}")
    return 0 if checks_ok and all(r.exit_code == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
