"""Benchmark ``kafkatool stats`` against ``kafkatool verify`` (shallow) on the same segments.

Usage::

    python bench/bench_stats.py --quick      # 64 MiB segments, 1 run: a smoke check (~10 s)
    python bench/bench_stats.py              # 256 MiB of 16 KiB batches and of 1-record batches, best of 3

The issue asks for stats "at verify's shallow speed": both read every batch header and
nothing more (stats also decodes a control batch's first record, and these segments hold
none). Every measurement is a whole process (start-up, imports, the walk, the summary on
standard error), timed as ``bench_dump.py`` times it (``run_process``: wall time around
spawn and reap, peak RSS from GNU time), on the page-cached segments of ``gen_segment.py``,
the two commands interleaved run by run, best of ``--runs`` kept. kafkatool runs from a
snapshot of the working tree taken at the start (``--live``: the tree itself).

Before timing (skip with ``--no-check``), ``stats --format jsonl`` must report the batch and
record counts that ``gen_segment.py`` wrote in ``bench-meta.json`` and no problem, and
``verify`` no finding.

The table gives seconds, GB/s, peak RSS and the ratio ``stats seconds / verify seconds``
(1.0: the same speed). It is printed and written as JSON to ``bench/out/stats-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_dump as bd  # noqa: E402
import gen_segment as gen  # noqa: E402

VARIANTS = ("none-16k", "none-1rec")
FULL_MIB = {"none-16k": 256, "none-1rec": 256}
COMMANDS = {"verify": ["verify", "-q"], "stats": ["stats", "-q"]}


@dataclass
class Result:
    variant: str
    command: str
    file_bytes: int
    batches: int
    seconds: float
    max_rss_mib: float
    runs: list[float]

    @property
    def gbps(self) -> float:
        return self.file_bytes / self.seconds / 1e9


def command(name: str, path: str, *extra: str) -> list[str]:
    return [*bd.kafkatool_exe(), *COMMANDS[name], *extra, path]


def check(seg: gen.Segment) -> list[str]:
    """What is wrong with the two commands' answers on ``seg`` (nothing: an empty list)."""
    problems = []
    code, out, err = _captured(command("stats", seg.path, "--format", "jsonl"))
    lines = [json.loads(line) for line in out.splitlines()]
    part = next((o for o in lines if o.get("type") == "segment"), None)
    if code != 0 or part is None:
        problems.append(f"stats exited {code}: {err.strip()[-300:]}")
    elif (part["batches"], part["records"], part["bytes"], part["problems"]) != (seg.batches, seg.records, seg.file_bytes, []):
        problems.append(f"stats counted {part['batches']} batches, {part['records']} records, {part['bytes']} bytes "
                        f"({len(part['problems'])} problems); gen_segment wrote {seg.batches}, {seg.records}, {seg.file_bytes}")
    code, out, err = _captured(command("verify", seg.path, "--format", "jsonl"))
    if code != 0:
        problems.append(f"verify exited {code}: {err.strip()[-300:]}")
    return problems


def _captured(cmd: list[str]) -> tuple[int, str, str]:
    import subprocess

    p = subprocess.run(cmd, capture_output=True, text=True, check=False, env=bd.CHILD_ENV, cwd=bd.CHILD_CWD)
    return p.returncode, p.stdout, p.stderr


def measure(seg: gen.Segment, runs: int) -> list[Result]:
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    rss: dict[str, float] = {name: 0.0 for name in COMMANDS}
    bd.warm_cache(seg.path)
    for _ in range(runs):
        for name in COMMANDS:  # interleaved: both see the same machine state
            run, _lines, _digest = bd.run_process(command(name, seg.path))
            if run.exit_code != 0:
                raise SystemExit(f"{name} on {seg.path} exited {run.exit_code}: {run.stderr}")
            times[name].append(run.seconds)
            rss[name] = max(rss[name], run.max_rss_mib)
    return [Result(seg.variant, name, seg.file_bytes, seg.batches, min(times[name]), rss[name], times[name]) for name in COMMANDS]


def table(results: list[Result]) -> str:
    rows = ["variant     command  seconds    GB/s  peak RSS MiB  stats/verify"]
    by_variant: dict[str, dict[str, Result]] = {}
    for r in results:
        by_variant.setdefault(r.variant, {})[r.command] = r
    for variant, rs in by_variant.items():
        ratio = rs["stats"].seconds / rs["verify"].seconds
        for name, r in rs.items():
            mark = f"{ratio:12.2f}" if name == "stats" else ""
            rows.append(f"{variant:<11} {name:<7} {r.seconds:8.3f} {r.gbps:7.2f} {r.max_rss_mib:13.1f} {mark}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=gen.DEFAULT_ROOT, help=f"where the segments live (default {gen.DEFAULT_ROOT})")
    ap.add_argument("--quick", action="store_true", help=f"{gen.QUICK_MIB} MiB segments and 1 run: a smoke check")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma separated subset of: {', '.join(gen.VARIANTS)}")
    ap.add_argument("--runs", type=int, help="timed runs per command, best kept (default 3; 1 with --quick)")
    ap.add_argument("--no-check", action="store_true", help="skip the untimed check of both commands' answers")
    ap.add_argument("--live", action="store_true", help="run the working tree's kafkatool, not a snapshot taken at the start")
    ap.add_argument("--out", default=os.path.join(HERE, "out"), help="directory for the JSON report")
    ap.add_argument("--seed", type=int, default=gen.DEFAULT_SEED)
    args = ap.parse_args(argv)
    runs = args.runs or (1 if args.quick else 3)

    snapshot = None if args.live else bd.snapshot_kafkatool(args.root)
    bd.set_child_env(args.root, snapshot)
    variants = gen.select_variants(args.variants)
    segments = [gen.ensure_segment(args.root, v, gen.QUICK_MIB if args.quick else FULL_MIB.get(v.name, v.full_mib), args.seed)
                for v in variants]
    if not args.no_check:
        for seg in segments:
            wrong = check(seg)
            if wrong:
                print("\n".join(f"CHECK FAILED {seg.variant}: {w}" for w in wrong))
                return 1
        print(f"checked: stats counts what gen_segment wrote, verify finds nothing ({len(segments)} segments)")
    results = [r for seg in segments for r in measure(seg, runs)]
    text = table(results)
    print(text)
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, time.strftime("stats-%Y%m%d-%H%M%S.json"))
    with open(out, "w") as f:
        json.dump({"runs": runs, "quick": args.quick, "kafkatool": snapshot or "working tree",
                   "results": [{**asdict(r), "gbps": r.gbps} for r in results],
                   "ratios": {v: next(r.seconds for r in results if r.variant == v and r.command == "stats")
                              / next(r.seconds for r in results if r.variant == v and r.command == "verify")
                              for v in dict.fromkeys(r.variant for r in results)}}, f, indent=2)
        f.write("\n")
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
