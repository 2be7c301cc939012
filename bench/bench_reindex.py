"""Benchmark ``kafkatool reindex`` (issue #4): whole process, page-cached, flat memory.

Usage::

    python bench/bench_reindex.py --quick       # 64 MiB segments, 1 run: a smoke check (~10 s)
    python bench/bench_reindex.py               # 1 GiB (16 KiB batches) + 256 MiB (1-record batches), best of 3
    python bench/bench_reindex.py --runs 5 --variants none-16k

Each segment of ``gen_segment.py`` (``none-16k``, ``none-1rec``) is hard-linked (copied when
the file system refuses) into a scratch partition dir ``ROOT/reindex/<variant>-0/`` of the
scratch log dir ``ROOT/reindex/`` (no ``.lock``; ``--force`` skips the lock check anyway).
reindex never writes the ``.log``, so the link is safe. Two commands are timed, each a whole
process (interpreter start, imports, planning, writing, exit), run and measured exactly as
``bench_dump.py`` does (its ``run_process``: wall time around spawn and reap, peak RSS from
GNU time's ``%M``; the interpreter's own ``kafkatool`` script, not a pyenv shim; a snapshot
of ``kafkatool/`` taken at the start unless ``--live``):

* ``execute``  ``kafkatool reindex -q --execute --force --backup-dir TMP PARTITION``, with the
  ``.index``/``.timeindex`` deleted (and ``TMP`` emptied) before every run, so that every run
  walks the segment, builds both indexes, writes them crash-safely (temp file, fsync, journal,
  rename, directory fsync) and re-verifies them (which re-reads them and plans again);
* ``dry-run``  ``kafkatool reindex -q PARTITION`` when the indexes on disk already match: the
  plan-only cost (walk, CRC of every batch, build, compare), exit 0.

The segment is read again right before every run (page cache); the two commands are
interleaved run by run; best of ``--runs`` is kept, RSS is the largest seen. The fixed cost
(both commands on an empty segment) is measured too and printed.

Before timing (skip with ``--no-check``), the rebuilt ``.index`` is compared with one derived
here independently (a header-only walk of the ``.log`` applying ``LogSegment.recover``'s rule:
an entry ``(lastOffset, position)`` whenever more than ``index.interval.bytes`` have passed
since the last one), and the ``.timeindex`` is checked for strictly increasing timestamps and
offsets ending at the segment's largest timestamp; the dry run must then report nothing to
change (exit 0).

There is no peer: the broker's own recovery (``LogSegment.recover``) is the only other
implementation, and it cannot be run on its own as a process.

``--compare DIR`` also runs the kafkatool package of another checkout (``DIR/kafkatool``, its
extension built, e.g. the code before a change), snapshotted like the working tree's, as the
tool ``kafkatool-base``: both commands, interleaved with the working tree's run by run in the
same run, checked the same way (and its ``.index``/``.timeindex`` must be byte-identical to
kafkatool's); each kafkatool row then gets ``base seconds / kafkatool seconds``.

The table gives seconds, GB/s (10^9 bytes of ``.log`` per second), peak RSS, and the issue's
targets (>= 3 GB/s on the page-cached 1 GiB 16 KiB-batch segment, peak RSS < 100 MiB) with
pass/fail. JSON goes to ``bench/out/reindex-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import mmap
import os
import shutil
import struct
import subprocess
import sys
from dataclasses import asdict, dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_dump as bd  # noqa: E402  (process running, snapshot, cache warming, machine info)
import gen_segment as gen  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MiB = 1 << 20
GB = 1e9

DEFAULT_VARIANTS = "none-16k,none-1rec"
COMMANDS = ("execute", "dry-run")
INDEX_INTERVAL_BYTES = 4096  # kafkatool's and Kafka's default index.interval.bytes

# The targets.
TARGET_GBPS = 3.0
TARGET_GBPS_VARIANT = "none-16k"
TARGET_RSS_MIB = 100.0

INDEX_NAME = gen.SEGMENT_NAME[: -len(".log")] + ".index"
TIMEINDEX_NAME = gen.SEGMENT_NAME[: -len(".log")] + ".timeindex"


#: The kafkatools run: the one under test, and ``bd.BEFORE`` (``--compare DIR``) after it.
TOOLS = ["kafkatool"]


def command(kind: str, partition: str, backup_dir: str, *, jsonl: bool = False, tool: str = "kafkatool") -> list[str]:
    fmt = ["--format", "jsonl"] if jsonl else []
    # --compare: DIR's snapshot first on the children's path (bd.BEFORE_PATH, set in main)
    exe = ["env", f"PYTHONPATH={bd.BEFORE_PATH[0]}", *bd.kafkatool_exe()] if tool == bd.BEFORE else bd.kafkatool_exe()
    if kind == "execute":
        return [*exe, "reindex", "-q", *fmt, "--execute", "--force", "--backup-dir", backup_dir, partition]
    return [*exe, "reindex", "-q", *fmt, partition]


# --------------------------------------------------------------------------- scratch partitions


def make_partition(root: str, label: str, seg_path: str) -> tuple[str, str]:
    """``ROOT/reindex/<label>-0/`` holding a hard link to the segment; returns (partition dir, link mode)."""
    part = os.path.join(root, "reindex", f"{label}-0")
    shutil.rmtree(part, ignore_errors=True)
    os.makedirs(part)
    dest = os.path.join(part, gen.SEGMENT_NAME)
    try:
        os.link(seg_path, dest)
        how = "hard link"
    except OSError:
        shutil.copyfile(seg_path, dest)
        how = "copy"
    return part, how


def reset(part: str, backup_dir: str) -> None:
    """Delete the index files (so that the next ``execute`` rebuilds them) and the backup dir."""
    for name in os.listdir(part):
        if name != gen.SEGMENT_NAME:
            os.unlink(os.path.join(part, name))
    shutil.rmtree(backup_dir, ignore_errors=True)


# --------------------------------------------------------------------------- independent check

_HDR = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA_AT = 23
_MAX_TS_AT = 35


def expected_offset_index(log_path: str, interval: int = INDEX_INTERVAL_BYTES) -> tuple[bytes, int, int]:
    """The ``.index`` ``LogSegment.recover`` builds for a clean v2 segment, the batch count, the max timestamp."""
    out = bytearray()
    entry = struct.Struct(">ii")
    i32 = struct.Struct(">i").unpack_from
    i64 = struct.Struct(">q").unpack_from
    with open(log_path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        size = len(m)
        base = None
        pos = last_entry = batches = 0
        max_ts = -1
        while pos + 12 <= size:
            base_offset, length = _HDR.unpack_from(m, pos)
            if base is None:
                base = int(os.path.basename(log_path).split(".")[0])
            last_offset = base_offset + i32(m, pos + _LAST_DELTA_AT)[0]
            max_ts = max(max_ts, i64(m, pos + _MAX_TS_AT)[0])
            if pos - last_entry > interval:
                out += entry.pack(last_offset - base, pos)
                last_entry = pos
            pos += 12 + length
            batches += 1
    return bytes(out), batches, max_ts


def check_indexes(part: str, seg: gen.Segment) -> dict:
    idx_path = os.path.join(part, INDEX_NAME)
    tix_path = os.path.join(part, TIMEINDEX_NAME)
    expected, batches, max_ts = expected_offset_index(seg.path)
    with open(idx_path, "rb") as f:
        idx = f.read()
    with open(tix_path, "rb") as f:
        tix = f.read()
    times = list(struct.iter_unpack(">qi", tix))
    increasing = all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(times, times[1:]))
    ok = (
        batches == seg.batches
        and idx == expected
        and len(tix) % 12 == 0
        and bool(times)
        and increasing
        and times[-1][0] == max_ts
    )
    return {
        "ok": ok,
        "index_sha256": hashlib.sha256(idx).hexdigest(),
        "timeindex_sha256": hashlib.sha256(tix).hexdigest(),
        "batches_walked": batches,
        "index_entries": len(idx) // 8,
        "expected_index_entries": len(expected) // 8,
        "index_identical": idx == expected,
        "timeindex_entries": len(times),
        "timeindex_increasing": increasing,
        "timeindex_last_is_max_timestamp": bool(times) and times[-1][0] == max_ts,
    }


def run_json(cmd: list[str]) -> tuple[int, list[dict], str]:
    p = subprocess.run(cmd, capture_output=True, text=True, check=False, env=bd.CHILD_ENV, cwd=bd.CHILD_CWD)
    objs = []
    for line in p.stdout.splitlines():
        try:
            objs.append(json.loads(line))
        except ValueError:
            pass
    return p.returncode, objs, p.stderr


def check_variant(label: str, part: str, seg: gen.Segment, backup_dir: str, log, tool: str = "kafkatool") -> dict:
    """execute on a partition without indexes, compare with the independent index, then a clean dry run."""
    reset(part, backup_dir)
    code, objs, err = run_json(command("execute", part, backup_dir, jsonl=True, tool=tool))
    seg_obj = next((o for o in objs if o.get("type") == "reindex_segment"), {})
    result: dict = {"variant": label, "tool": tool, "execute_exit": code, "execute_written": len(seg_obj.get("written", [])),
                    "execute_verified": seg_obj.get("verified"), "stderr": err.strip()[-300:]}
    try:
        result.update(check_indexes(part, seg))
    except OSError as e:
        result.update({"ok": False, "error": str(e)})
    code2, objs2, err2 = run_json(command("dry-run", part, backup_dir, jsonl=True, tool=tool))
    summary = next((o for o in objs2 if o.get("type") == "reindex_summary"), {})
    result["dry_run_exit"] = code2
    result["dry_run_needing_changes"] = summary.get("needingChanges", summary.get("needing_changes"))
    result["ok"] = bool(
        result.get("ok") and code == 0 and result["execute_written"] == 2 and result["execute_verified"]
        and code2 == 0 and result["dry_run_needing_changes"] == 0
    )
    log(f"  {label:<16} {tool:<14} {'ok' if result['ok'] else 'FAILED'}: {result.get('index_entries')} index entries"
        f" (independent: {result.get('expected_index_entries')}, identical: {result.get('index_identical')}),"
        f" {result.get('timeindex_entries')} time entries; dry run exit {code2}"
        + ("" if result["ok"] else f"; {err.strip()[-200:]} {err2.strip()[-200:]}"))
    return result


# --------------------------------------------------------------------------- results


@dataclass
class Result:
    variant: str
    command: str
    tool: str
    argv: list[str]
    seconds: float
    max_rss_mib: float
    file_bytes: int
    batches: int
    gb_per_s: float = 0.0
    net_gb_per_s: float | None = None
    ratio_vs_base: float | None = None
    """``--compare``, on kafkatool rows: kafkatool-base seconds / these seconds (> 1: the working tree faster)."""
    runs: list[dict] = field(default_factory=list)


def evaluate_targets(results: list[Result]) -> list[dict]:
    out = []
    results = [r for r in results if r.tool == "kafkatool"]  # the targets are the working tree's
    for r in results:
        if r.variant.startswith(TARGET_GBPS_VARIANT + "-") and not r.variant.endswith(f"-{gen.QUICK_MIB}m"):
            ok = r.gb_per_s >= TARGET_GBPS
            out.append({"target": f">= {TARGET_GBPS:g} GB/s, {r.command}", "variant": r.variant,
                        "measured": f"{r.gb_per_s:.2f} GB/s ({r.seconds:.3f} s)", "status": "pass" if ok else "FAIL",
                        "note": "" if r.command == "execute" else "the plan-only cost, for reference"})
    for r in results:
        ok = r.max_rss_mib < TARGET_RSS_MIB
        out.append({"target": f"peak RSS < {TARGET_RSS_MIB:g} MiB, {r.command}", "variant": r.variant,
                    "measured": f"{r.max_rss_mib:.1f} MiB", "status": "pass" if ok else "FAIL", "note": ""})
    if results and all(r.variant.endswith(f"-{gen.QUICK_MIB}m") for r in results):
        for t in out:
            t["note"] = (t["note"] + "; " if t["note"] else "") + "--quick: 64 MiB segments, not the issue's 1 GiB"
    return out


def fmt_table(results: list[Result], fixed: dict[str, float]) -> str:
    compare = any(r.tool != "kafkatool" for r in results)
    tool_head = f" {'tool':<14}" if compare else ""
    head = (f"{'variant':<16} {'command':<8}{tool_head} {'seconds':>8} {'GB/s':>6} {'net GB/s':>8} {'peak RSS MiB':>12} {'batches':>8}"
            + (f"  {'x base':>6}" if compare else ""))
    rows = [head, "-" * len(head)]
    for r in results:
        net = f"{r.net_gb_per_s:8.2f}" if r.net_gb_per_s is not None else f"{'-':>8}"
        tool = f" {r.tool:<14}" if compare else ""
        xb = f"  {'x%.2f' % r.ratio_vs_base if r.ratio_vs_base is not None else '':>6}" if compare else ""
        rows.append(f"{r.variant:<16} {r.command:<8}{tool} {r.seconds:8.3f} {r.gb_per_s:6.2f} {net} {r.max_rss_mib:12.1f} {r.batches:8d}{xb}")
    return "\n".join(rows)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=gen.DEFAULT_ROOT, help=f"where the segments live (default {gen.DEFAULT_ROOT})")
    ap.add_argument("--quick", action="store_true", help=f"{gen.QUICK_MIB} MiB segments and 1 run: a smoke check")
    ap.add_argument("--variants", default=DEFAULT_VARIANTS, help=f"comma separated subset of: {DEFAULT_VARIANTS} (uncompressed only)")
    ap.add_argument("--runs", type=int, help="timed runs per command, best kept (default 3; 1 with --quick)")
    ap.add_argument("--commands", default=",".join(COMMANDS), help=f"comma separated subset of: {', '.join(COMMANDS)}")
    ap.add_argument("--no-check", action="store_true", help="skip the untimed correctness checks")
    ap.add_argument("--clean-start", action="store_true", help=bd.CLEAN_START_HELP)
    ap.add_argument("--live", action="store_true", help="run the working tree's kafkatool, not a snapshot taken at the start")
    ap.add_argument("--compare", metavar="DIR", help=f"also run the kafkatool of another checkout (DIR/kafkatool, its extension built) as the tool {bd.BEFORE}, interleaved with the working tree's: before/after measured side by side")
    ap.add_argument("--out", default=os.path.join(HERE, "out"), help="directory for the JSON report")
    ap.add_argument("--seed", type=int, default=gen.DEFAULT_SEED)
    args = ap.parse_args(argv)

    runs = args.runs if args.runs is not None else (1 if args.quick else 3)
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    if bad := [c for c in commands if c not in COMMANDS]:
        ap.error(f"unknown command: {', '.join(bad)}")
    root = os.path.abspath(args.root)
    started = _dt.datetime.now()
    log = lambda *a: print(*a, flush=True)  # noqa: E731

    started_versions = bd.versions()
    tools = list(TOOLS)
    if args.compare:
        other = os.path.abspath(args.compare)
        if not os.path.isfile(os.path.join(other, "kafkatool", "__init__.py")):
            ap.error(f"{other} holds no kafkatool package")
        other_snapshot = bd.snapshot_kafkatool(root, other)
        started_versions["compare"] = {"tree": other, "snapshot": other_snapshot}
        tools.append(bd.BEFORE)
    snapshot = None if args.live else bd.snapshot_kafkatool(root)
    bd.set_child_env(root, snapshot, args.clean_start)
    if args.compare:
        # the children's PYTHONPATH with the other snapshot in place of the one under test
        rest = [p for p in (bd.CHILD_ENV or {}).get("PYTHONPATH", "").split(os.pathsep) if p and p not in (snapshot, bd.REPO)]
        bd.BEFORE_PATH[:] = [os.pathsep.join([other_snapshot, *rest])]
        log(f"{bd.BEFORE}: the kafkatool of {other} (snapshot {other_snapshot})")
    kt_info = bd.child_kafkatool_info()
    kt_location = kt_info["location"]
    load = bd.announce_under_test(log, kt_location, started_versions, snapshot, f"; command {bd.kafkatool_exe()[0]}")
    if load is None:
        return 2
    variants = gen.select_variants(args.variants)
    if bad := [v.name for v in variants if v.codec != 0]:
        ap.error(f"reindex does not decompress: only uncompressed variants make sense here, not {', '.join(bad)}")
    log(f"segments under {root}:")
    segments = gen.ensure_segments(root, variants, args.quick, args.seed, log)
    label = {s.path: gen.VARIANTS[s.variant].dir_name(s.target_mib) for s in segments}

    scratch = os.path.join(root, "reindex")
    parts: dict[str, str] = {}
    backups: dict[str, str] = {}
    for s in segments:
        part, how = make_partition(root, label[s.path], s.path)
        parts[s.path] = part
        backups[s.path] = os.path.join(root, "reindex-backup", label[s.path])
        log(f"  {label[s.path]:<16} -> {part} ({how})")

    checks: list[dict] = []
    if not args.no_check:
        log("checks (execute, independent .index, clean dry run):")
        for s in segments:
            mine = [check_variant(label[s.path], parts[s.path], s, backups[s.path], log, tool) for tool in tools]
            for c in mine[1:]:  # kafkatool-base: the same bytes as kafkatool's, .timeindex included
                c["identical_to_kafkatool"] = (c.get("index_sha256"), c.get("timeindex_sha256")) == (
                    mine[0].get("index_sha256"), mine[0].get("timeindex_sha256"))
                if not c["identical_to_kafkatool"]:
                    c["ok"] = False
                    log(f"  {c['variant']:<16} {c['tool']:<14} FAILED: its .index/.timeindex differ from kafkatool's")
            checks += mine
    checks_ok = all(c["ok"] for c in checks)

    # Fixed cost: both commands on an empty segment (start-up, imports, lock-free plan, exit).
    empty_seg = os.path.join(root, "empty", gen.SEGMENT_NAME)
    os.makedirs(os.path.dirname(empty_seg), exist_ok=True)
    open(empty_seg, "wb").close()
    empty_part, _ = make_partition(root, "empty", empty_seg)
    empty_backup = os.path.join(root, "reindex-backup", "empty")
    fixed: dict[str, float] = {}
    fixed_key = lambda kind, tool: kind if tool == "kafkatool" else f"{kind} {tool}"  # noqa: E731
    for _ in range(max(runs, 3) + 1):  # the first, untimed, fills the bytecode cache
        for kind in commands:
            for tool in tools:
                reset(empty_part, empty_backup)
                if kind == "dry-run":
                    bd.run_process(command("execute", empty_part, empty_backup, tool=tool))
                run, _l, _h = bd.run_process(command(kind, empty_part, empty_backup, tool=tool))
                if _ > 0:
                    key = fixed_key(kind, tool)
                    fixed[key] = min(fixed.get(key, float("inf")), run.seconds)
    log("fixed cost (empty segment, best): " + ", ".join(f"{k} {v:.3f} s" for k, v in fixed.items()))

    results: list[Result] = []
    for s in segments:
        part, backup = parts[s.path], backups[s.path]
        best: dict[tuple[str, str], Result] = {}
        for _ in range(runs):
            for kind in commands:  # interleaved
                for tool in tools:
                    if kind == "execute":
                        reset(part, backup)
                    elif not os.path.exists(os.path.join(part, INDEX_NAME)):
                        reset(part, backup)  # dry run wants matching indexes: build them, untimed
                        bd.run_process(command("execute", part, backup))
                    bd.warm_cache(s.path)
                    argv_ = command(kind, part, backup, tool=tool)
                    run, _l, _h = bd.run_process(argv_)
                    if run.exit_code != 0:
                        log(f"  {tool} {kind} exited {run.exit_code} on {part}: {run.stderr.strip()[-300:]}")
                    r = best.get((kind, tool))
                    if r is None:
                        r = best[(kind, tool)] = Result(label[s.path], kind, tool, argv_, run.seconds, run.max_rss_mib,
                                                        s.file_bytes, s.batches)
                    r.runs.append(asdict(run))
                    r.seconds = min(r.seconds, run.seconds)
                    r.max_rss_mib = max(r.max_rss_mib, run.max_rss_mib)
        for kind in commands:
            for tool in tools:
                r = best[(kind, tool)]
                r.gb_per_s = s.file_bytes / GB / r.seconds
                net = r.seconds - fixed.get(fixed_key(kind, tool), 0.0)
                r.net_gb_per_s = s.file_bytes / GB / net if net > 0 else None
                if tool != bd.BEFORE and (kind, bd.BEFORE) in best:
                    r.ratio_vs_base = best[(kind, bd.BEFORE)].seconds / r.seconds
                results.append(r)
                log(f"  {r.variant:<16} {kind:<8} {tool:<14} {r.seconds:8.3f} s  {r.gb_per_s:6.2f} GB/s  {r.max_rss_mib:8.1f} MiB"
                    + (f"  x{r.ratio_vs_base:.2f} vs {bd.BEFORE}" if r.ratio_vs_base is not None else ""))
        reset(part, backup)
    shutil.rmtree(os.path.join(root, "reindex-backup"), ignore_errors=True)

    targets = evaluate_targets(results)
    print()
    print(f"kafkatool reindex — whole process, best of {runs}, page-cached .log (hard-linked into {scratch})")
    print("execute: indexes deleted before every run, rebuilt, written (fsync) and re-verified; dry-run: indexes already match")
    print("GB/s = 10^9 bytes of .log per second; net GB/s subtracts the fixed cost (empty segment)")
    print("no peer: the broker's own LogSegment.recover is the only other implementation (not runnable on its own)")
    if args.compare:
        print(f"{bd.BEFORE} = the kafkatool of {started_versions['compare']['tree']}, interleaved in the same run;"
              f" x base = {bd.BEFORE} seconds / these seconds (> 1: the working tree faster)")
    print()
    print(fmt_table(results, fixed))
    print()
    print("fixed cost (empty segment): " + ", ".join(f"{k} {v:.3f} s" for k, v in fixed.items()))
    print()
    bd.print_targets(targets)
    print()
    if args.no_check:
        print("checks: skipped (--no-check)")
    else:
        print(f"checks: {'all passed' if checks_ok else 'FAILED'} — rebuilt .index identical to the independent"
              f" derivation in {sum(1 for c in checks if c.get('index_identical'))}/{len(checks)}"
              + (f"; {bd.BEFORE}'s .index and .timeindex byte-identical to kafkatool's in"
                 f" {sum(1 for c in checks if c.get('identical_to_kafkatool'))}/{len(checks) // len(tools)}" if args.compare else ""))

    end_source = bd.note_source_change(started_versions, snapshot)
    os.makedirs(args.out, exist_ok=True)
    out_path = os.path.join(args.out, f"reindex-{started.strftime('%Y%m%d-%H%M%S')}.json")
    report = {
        "benchmark": "kafkatool reindex",
        "started": started.isoformat(timespec="seconds"),
        "clean_start": args.clean_start,
        "elapsed_s": round((_dt.datetime.now() - started).total_seconds(), 1),
        "quick": args.quick,
        "runs": runs,
        "commands": {fixed_key(k, t): command(k, "PARTITION", "BACKUP_DIR", tool=t) for k in commands for t in tools},
        "peer": None,
        "peer_note": "no peer: the broker's LogSegment.recover is the only other implementation",
        "rss_method": bd.rss_method(),
        "machine": bd.machine_info(),
        "load_average_at_start": load,
        "versions": started_versions,
        "kafkatool_under_test": kt_location,
        "kafkatool_source_at_end": end_source,
        "segments": [asdict(s) for s in segments],
        "fixed_cost_s": fixed,
        "results": [asdict(r) for r in results],
        "targets": targets,
        "checks": {"ok": checks_ok, "variants": checks},
    }
    with open(out_path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"\nJSON report: {os.path.relpath(out_path)}")
    return 0 if checks_ok else 1


if __name__ == "__main__":
    sys.exit(main())
