"""Benchmark ``kafkatool dump`` against the same work driven by kafka-python and aiokafka.

Usage::

    python bench/bench_dump.py                  # full sizes (1 GiB + 5 x 256 MiB), best of 3
    python bench/bench_dump.py --quick          # 64 MiB segments, 1 run: a smoke check
    python bench/bench_dump.py --variants none-16k,zstd-16k --runs 5 --modes deep
    python bench/bench_dump.py --variants none-1rec,none-16k --mib 256 --modes deep --tools kafkatool,aiokafka
                                                # issue 13's deep-dump target (>= 1.2x aiokafka)

Every measurement is a whole process (interpreter start, imports, reading, output to
``/dev/null``): wall time from ``perf_counter`` around spawn and reap, peak RSS from GNU
time (see :func:`run_process` for why not ``getrusage``). Each command runs ``--runs``
times, interleaved tool by tool so that drift hits every tool alike; the best time is
kept, and the largest peak RSS seen. The segments come from ``gen_segment.py`` and are
read again before every run, so that every tool works on page-cached files. kafkatool
runs from a snapshot of the working tree taken at the start (``--live``: the tree itself).

Before timing, each command also runs once with its output piped back here (not timed):
its lines are counted and hashed, and must match the count the segment's metadata
predicts and kafkatool's output. A corrupted copy of a small segment checks that every
tool really verifies CRCs (exactly the damaged batch must say ``isvalid: false``).

``--compare DIR`` also runs the kafkatool package of another checkout (``DIR/kafkatool``, its
extension built, e.g. the code before a change), snapshotted like the working tree's, as the
tool ``kafkatool-base``: interleaved with the others in the same run, through this script, so
before and after are measured side by side (its output must be byte-identical to kafkatool's).

The table gives, per variant, mode and tool: seconds, peak RSS, throughput, for the peers
the ratio ``peer seconds / kafkatool seconds`` (above 1: kafkatool is faster), and on each
kafkatool row (``kafkatool-base`` included) ``faster peer seconds / its seconds``. It is
printed and written as JSON to ``bench/out/dump-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass, field

import gen_segment as gen

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MiB = 1 << 20
GiB = 1 << 30

MODES = {
    "batch": [],  # kafka-dump-log's default: one line per batch
    "deep": ["--deep-iteration", "--print-data-log"],  # plus one line per record, key and payload
}
TOOLS = ("kafkatool", "kafka-python", "aiokafka")
PEERS = ("kafka-python", "aiokafka")
#: ``--compare DIR``: the tool that runs DIR's kafkatool, interleaved with the others in the same
#: run, and the ``PYTHONPATH`` that makes its children import DIR's snapshot instead.
BEFORE = "kafkatool-base"
BEFORE_PATH: list[str] = []

# The targets.
TARGET_BATCH_SECONDS = 0.5  # batch-line dump of a 1 GiB segment
TARGET_BATCH_RSS_MIB = 100.0
# Issue 13: >= 1.2x aiokafka on the uncompressed segments (1-record batches and ~16 KiB batches; headroom
# for the internal-topic decoders on the same path); the compressed variants keep issue 5's 1.0.
TARGET_DEEP_RATIO_VS_AIOKAFKA = 1.2
TARGET_DEEP_RATIO_COMPRESSED = 1.0
TARGET_VARIANT = "none-16k"


#: ``--clean-start``: every child (kafkatool and the peers alike) starts as ``python -S`` with
#: the kafkatool under test and site-packages on ``PYTHONPATH`` (see :func:`set_child_env`).
CLEAN_START = False
CLEAN_START_HELP = (
    "start every child, kafkatool and the peers alike, as `python -S` with site-packages on PYTHONPATH: "
    "no .pth start-up hooks (on this machine a sandbox CA injector and the editable install's finder, "
    "~25 ms per process that belongs to no tool under test)"
)


def python_cmd() -> list[str]:
    """How every Python child starts: this interpreter, with ``-S`` under ``--clean-start``."""
    return [sys.executable, "-S"] if CLEAN_START else [sys.executable]


def kafkatool_exe() -> list[str]:
    """The installed ``kafkatool`` console script of this interpreter.

    Taken from the interpreter's own scripts directory, not from ``PATH``: a version
    manager's shim (pyenv's is a bash script) would add ~0.1 s to every kafkatool run
    that the peers, started as ``sys.executable SCRIPT``, do not pay. Under
    ``--clean-start``: ``python -S -m kafkatool``.
    """
    if CLEAN_START:
        return [*python_cmd(), "-m", "kafkatool"]
    exe = os.path.join(sysconfig.get_path("scripts"), "kafkatool")
    if os.access(exe, os.X_OK):
        return [exe]
    return [sys.executable, "-m", "kafkatool"]


def tool_command(tool: str, mode: str, path: str) -> list[str]:
    flags = MODES[mode]
    if tool == "kafkatool":
        return [*kafkatool_exe(), "dump", *flags, path]
    if tool == BEFORE:
        return ["env", f"PYTHONPATH={BEFORE_PATH[0]}", *kafkatool_exe(), "dump", *flags, path]
    script = {"kafka-python": "peer_kafka_python.py", "aiokafka": "peer_aiokafka.py"}[tool]
    return [*python_cmd(), os.path.join(HERE, script), *flags, path]


# --------------------------------------------------------------------------- running one process


@dataclass
class Run:
    seconds: float
    max_rss_mib: float
    user_s: float
    sys_s: float
    exit_code: int
    stderr: str = ""


#: The children's environment, set up by :func:`set_child_env`.
CHILD_ENV: dict[str, str] | None = None
#: The children's working directory: not the repository, whose ``kafkatool/`` would shadow
#: the snapshot for ``python -c``/``-m`` (they put the working directory first on sys.path).
CHILD_CWD: str | None = None


def set_child_env(root: str, kafkatool_path: str | None, clean_start: bool = False) -> None:
    """The children's environment: cached bytecode, and the kafkatool snapshot first on the path.

    With ``PYTHONDONTWRITEBYTECODE`` set (as in some sandboxes) and no ``__pycache__``
    beside a module, every run would compile that module again, charging compile time to
    whichever tool happens to lack caches. The children instead write and read their
    bytecode under ``ROOT/pycache`` (``PYTHONPYCACHEPREFIX``): nothing is written into the
    repository or site-packages, every tool is treated alike, and the untimed runs made
    before timing fill the cache.

    ``clean_start`` (``--clean-start``): the children run ``python -S`` (no ``site``, so no
    ``.pth`` hooks), with the kafkatool under test (snapshot, or the repository with
    ``--live``) and then this interpreter's site-packages on ``PYTHONPATH``.
    """
    global CHILD_ENV, CHILD_CWD, CLEAN_START
    CLEAN_START = clean_start
    os.makedirs(root, exist_ok=True)
    CHILD_CWD = root
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(root, "pycache")
    if clean_start:
        import site

        paths = [kafkatool_path or REPO, *site.getsitepackages()]
        env["PYTHONPATH"] = os.pathsep.join(p for p in (*paths, env.get("PYTHONPATH")) if p)
    elif kafkatool_path:
        # PYTHONPATH is searched before the editable install's finder (appended to sys.meta_path).
        env["PYTHONPATH"] = os.pathsep.join(p for p in (kafkatool_path, env.get("PYTHONPATH")) if p)
    CHILD_ENV = env


def source_fingerprint(package_dir: str) -> str:
    """SHA-256 (16 hex digits) over the package's files, bytecode caches excluded."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(package_dir):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".pyc"):
                continue
            full = os.path.join(dirpath, name)
            h.update(os.path.relpath(full, package_dir).encode() + b"\0")
            with open(full, "rb") as f:
                h.update(f.read())
            h.update(b"\0")
    return h.hexdigest()[:16]


def snapshot_kafkatool(root: str, repo: str | None = None) -> str:
    """Copy the working tree's ``kafkatool/`` (built extension included) to ``ROOT/snapshot/HASH``.

    ``repo``: another checkout's instead (``--compare``); default :data:`REPO`.

    kafkatool is installed editable and others commit while a full run takes ~15 minutes:
    without a snapshot the first variants and the last could measure different code. The
    children import the copy (see :func:`set_child_env`); ``--live`` skips this.
    """
    src = os.path.join(repo or REPO, "kafkatool")
    dest = os.path.join(root, "snapshot", source_fingerprint(src))
    if not os.path.isdir(os.path.join(dest, "kafkatool")):
        tmp = dest + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src, os.path.join(tmp, "kafkatool"), ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        os.replace(tmp, dest)
    return dest


_CHILD_INFO = """
import json, os, kafkatool
try:
    from kafkatool.record import v2
    speedups = getattr(v2, "_fast_decode_records", None) is not None
except Exception:
    speedups = None
try:
    from kafkatool.record.speedups import functions
    dump_text = functions("format_v2_text")[0] is not None
except Exception:
    dump_text = None
print(json.dumps({"location": os.path.dirname(kafkatool.__file__), "speedups": speedups, "dump_text": dump_text}))
"""


def child_kafkatool_info() -> dict:
    """Where the children import kafkatool from, and whether its compiled decoder loads there."""
    out = subprocess.run(
        [*python_cmd(), "-c", _CHILD_INFO], capture_output=True, text=True, check=True, env=CHILD_ENV, cwd=CHILD_CWD
    )
    return json.loads(out.stdout)


GNU_TIME = "/usr/bin/time"
_TIME_FORMAT = "%M %U %S"  # peak RSS KiB, user s, system s


def rss_method() -> str:
    return "gnu-time" if os.access(GNU_TIME, os.X_OK) else "wait4"


def run_process(cmd: list[str], *, capture: bool = False) -> tuple[Run, int, str]:
    """Run ``cmd`` once; stdout to /dev/null, or (``capture``) counted and hashed here.

    Returns the run and, when capturing, the output's line count and SHA-256.

    Wall time is ``perf_counter`` around spawn and reap. Peak RSS comes from GNU time
    (``/usr/bin/time -f %M``) when present: a child spawned straight from this process
    would report *this* process's RSS as its own floor, because Linux carries the
    pre-exec address space's high-water mark across ``exec`` (and Python spawns with
    vfork, sharing it); GNU time is a small C program whose fork starts near zero. Its
    extra exec costs every tool the same ~1 ms. Without it, ``os.wait4``'s rusage of the
    child is used, an upper bound.
    """
    lines = 0
    digest = hashlib.sha256()
    use_time = rss_method() == "gnu-time"
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile(
        "r", prefix="bench-time-"
    ) as tout, open(os.devnull, "wb") as devnull:
        argv = [GNU_TIME, "-o", tout.name, "-f", _TIME_FORMAT, *cmd] if use_time else cmd
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if capture else devnull, stderr=err, env=CHILD_ENV, cwd=CHILD_CWD
        )
        if capture:
            assert proc.stdout is not None
            read = proc.stdout.read
            while True:
                chunk = read(1 << 20)
                if not chunk:
                    break
                lines += chunk.count(b"\n")
                digest.update(chunk)
            proc.stdout.close()
        _pid, status, ru = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
        rss_kib, user_s, sys_s = ru.ru_maxrss, ru.ru_utime, ru.ru_stime
        if use_time:
            # GNU time writes "Command exited with non-zero status N" first when it did.
            last = tout.read().strip().splitlines()[-1:]
            try:
                k, u, sy = last[0].split()
                rss_kib, user_s, sys_s = int(k), float(u), float(sy)
            except (IndexError, ValueError):
                stderr += f"\n[bench] could not read GNU time's output: {last!r}"
    run = Run(seconds, rss_kib / 1024, user_s, sys_s, proc.returncode, stderr[-2000:])
    return run, lines, digest.hexdigest()


def warm_cache(path: str) -> float:
    """Read ``path`` once (into a reused buffer) so every tool then works from the page cache."""
    buf = bytearray(4 * MiB)
    mv = memoryview(buf)
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(mv):
            pass
    return time.perf_counter() - t0


# --------------------------------------------------------------------------- checks


@dataclass
class Check:
    variant: str
    mode: str
    tool: str
    lines: int
    expected_lines: int
    sha256: str
    same_as_kafkatool: bool | None
    exit_code: int
    ok: bool
    note: str = ""


def check_outputs(seg: gen.Segment, variant_label: str, mode: str, tools: list[str]) -> list[Check]:
    """Run each tool once with its output captured: line counts and content must agree."""
    expected = 2 + seg.batches + (seg.records if mode == "deep" else 0)
    out: list[Check] = []
    ref: str | None = None
    for tool in tools:
        run, lines, sha = run_process(tool_command(tool, mode, seg.path), capture=True)
        if tool == "kafkatool":
            ref = sha
        same = None if ref is None or tool == "kafkatool" else sha == ref
        ok = run.exit_code == 0 and lines == expected and same is not False
        note = ""
        if run.exit_code != 0:
            note = f"exit {run.exit_code}: {run.stderr.strip()[-300:]}"
        elif lines != expected:
            note = f"{lines} lines, expected {expected}"
        elif same is False:
            note = "same line count, different bytes from kafkatool"
        out.append(Check(variant_label, mode, tool, lines, expected, sha, same, run.exit_code, ok, note))
    return out


def crc_self_check(root: str, tools: list[str], log) -> dict:
    """Damage one byte of one batch's records in a small segment: every tool must flag exactly it."""
    variant = gen.VARIANTS["none-16k"]
    seg = gen.ensure_segment(os.path.join(root, "selfcheck-src"), variant, 1, log=lambda *_: None)
    with open(seg.path, "rb") as f:
        data = bytearray(f.read())
    # Walk to the 4th batch and flip one byte of a record payload (a hex digit of an event id:
    # the bytes stay valid UTF-8 and the records still decode, only the CRC no longer matches).
    pos = 0
    for _ in range(3):
        pos += int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
    damaged_batch_position = pos
    at = data.index(b'"event_id":"', pos + 61) + len(b'"event_id":"') + 5
    data[at] = ord("0") if data[at] != ord("0") else ord("1")
    path = os.path.join(root, "selfcheck", gen.SEGMENT_NAME)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    result = {"path": path, "damaged_batch_position": damaged_batch_position, "damaged_byte": at, "tools": {}}
    ok_all = True
    for tool in tools:
        with tempfile.TemporaryFile() as outf:
            proc = subprocess.run(
            tool_command(tool, "batch", path), stdout=outf, stderr=subprocess.PIPE, check=False, env=CHILD_ENV, cwd=CHILD_CWD
        )
            outf.seek(0)
            text = outf.read().decode()
        invalid = [ln for ln in text.splitlines() if ln.endswith("isvalid: false")]
        ok = proc.returncode == 0 and len(invalid) == 1 and f" position: {damaged_batch_position} " in invalid[0]
        ok_all &= ok
        result["tools"][tool] = {"ok": ok, "invalid_lines": len(invalid), "exit_code": proc.returncode}
        log(f"  {tool:<13} {'ok' if ok else 'FAILED'}: {len(invalid)} batch(es) reported isvalid: false")
    result["ok"] = ok_all
    return result


# --------------------------------------------------------------------------- results


@dataclass
class Result:
    variant: str
    mode: str
    tool: str
    seconds: float
    max_rss_mib: float
    file_bytes: int
    records: int
    batches: int
    gib_per_s: float
    mrec_per_s: float
    runs: list[dict] = field(default_factory=list)
    speedup_vs_peer: float | None = None
    """For a peer: peer seconds / kafkatool seconds (> 1 means kafkatool is faster)."""
    ratio_vs: dict[str, float] = field(default_factory=dict)
    """On kafkatool rows (``kafkatool-base`` too): peer seconds / these seconds, per peer and ``faster-peer``."""


def machine_info() -> dict:
    info: dict = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_total_gib"] = round(int(f.readline().split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return info


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out: dict = {}
    for pkg in ("kafkatool", "kafka-python", "aiokafka", "crc32c", "lz4", "python-snappy", "zstandard", "cramjam"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    out["kafkatool_source"] = source_fingerprint(os.path.join(REPO, "kafkatool"))
    try:
        from aiokafka.util import NO_EXTENSIONS

        out["aiokafka_c_extensions"] = not NO_EXTENSIONS
    except ImportError:
        pass
    try:
        from kafka.record import util as kutil

        out["kafka_python_crc32c"] = getattr(kutil._crc32c, "__module__", None) or repr(kutil._crc32c)
    except ImportError:
        pass
    try:
        out["kafkatool_commit"] = subprocess.run(
            ["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", REPO, "status", "--porcelain", "--", "kafkatool"], capture_output=True, text=True, check=True
        ).stdout
        out["kafkatool_dirty"] = bool(dirty.strip())
    except (OSError, subprocess.CalledProcessError):
        pass
    return out


def _fmt_table(results: list[Result]) -> str:
    head = (f"{'variant':<16} {'mode':<6} {'tool':<14} {'seconds':>8} {'peak RSS MiB':>12} {'GiB/s':>7} {'Mrec/s':>7}  {'ratio':>6}"
            f"  {'x faster peer':>13}")
    rows = [head, "-" * len(head)]
    last = None
    for r in results:
        key = (r.variant, r.mode)
        if last is not None and key != last:
            rows.append("")
        show_key = key != last
        last = key
        ratio = f"x{r.speedup_vs_peer:.2f}" if r.speedup_vs_peer is not None else ""
        fp = f"x{r.ratio_vs['faster-peer']:.2f}" if "faster-peer" in r.ratio_vs else ""
        rows.append(
            f"{r.variant if show_key else '':<16} {r.mode if show_key else '':<6} {r.tool:<14} {r.seconds:>8.3f}"
            f" {r.max_rss_mib:>12.1f} {r.gib_per_s:>7.2f} {r.mrec_per_s:>7.2f}  {ratio:>6}  {fp:>13}"
        )
    return "\n".join(rows)


def fmt_compare(results: list[Result], key=lambda r: (r.variant, r.mode)) -> str:
    """Before/after (``--compare``): each kafkatool's ratio against the faster peer, side by side."""
    by: dict = {}
    for r in results:
        by.setdefault(key(r), {})[r.tool] = r
    rows = []
    for k, tools in by.items():
        new, old = tools.get("kafkatool"), tools.get(BEFORE)
        if new is None or old is None:
            continue
        fp = lambda r: f"x{r.ratio_vs['faster-peer']:.2f}" if "faster-peer" in r.ratio_vs else "-"  # noqa: E731
        rows.append(f"  {' '.join(k):<23} kafkatool {fp(new):>6}  {BEFORE} {fp(old):>6}  vs the faster peer;"
                    f" seconds {new.seconds:.3f} / {old.seconds:.3f} = {new.seconds / old.seconds - 1:+.1%}")
    return "\n".join(rows)


def evaluate_targets(results: list[Result]) -> list[dict]:
    """The issue's targets, each with the measured value and pass / FAIL / n/a."""
    out: list[dict] = []
    by = {(r.variant, r.mode, r.tool): r for r in results}
    batch = next((r for r in results if r.variant.startswith(TARGET_VARIANT + "-") and r.mode == "batch" and r.tool == "kafkatool"), None)
    if batch is not None:
        full = batch.file_bytes >= 0.9 * GiB
        out.append({
            "target": f"batch-line dump of 1 GiB in < {TARGET_BATCH_SECONDS} s",
            "variant": batch.variant,
            "measured": round(batch.seconds, 3),
            "status": ("pass" if batch.seconds < TARGET_BATCH_SECONDS else "FAIL") if full else "n/a",
            "note": "" if full else f"file is {batch.file_bytes / MiB:.0f} MiB, not 1 GiB: run the full benchmark for this target",
        })
        out.append({
            "target": f"batch-line dump with flat memory: peak RSS < {TARGET_BATCH_RSS_MIB:.0f} MiB",
            "variant": batch.variant,
            "measured": round(batch.max_rss_mib, 1),
            "status": ("pass" if batch.max_rss_mib < TARGET_BATCH_RSS_MIB else "FAIL") if full else "n/a",
            "note": "" if full else "measured on the small file; flat memory shows only at full size",
        })
    for r in results:
        if r.mode != "deep" or r.tool != "aiokafka" or r.speedup_vs_peer is None:
            continue
        goal = TARGET_DEEP_RATIO_VS_AIOKAFKA if r.variant.startswith("none-") else TARGET_DEEP_RATIO_COMPRESSED
        out.append({
            "target": f"deep dump at least {goal}x aiokafka's speed (ratio >= {goal})",
            "variant": r.variant,
            "measured": round(r.speedup_vs_peer, 2),
            "status": "pass" if r.speedup_vs_peer >= goal else "FAIL",
            "note": f"kafkatool {by[(r.variant, 'deep', 'kafkatool')].seconds:.2f} s, aiokafka {r.seconds:.2f} s",
        })
    return out


# --------------------------------------------------------------------------- main



def announce_under_test(log, kt_location: str, started_versions: dict, snapshot: str | None, extra: str = "") -> tuple | None:
    """Log which kafkatool the children import and warn about a busy machine; return the load
    average at the start, or None when the children would not import the snapshot (the run
    must stop). Shared by every bench script."""
    log(f"kafkatool under test: {kt_location} (commit {started_versions.get('kafkatool_commit')}"
        f"{', uncommitted changes' if started_versions.get('kafkatool_dirty') else ''},"
        f" source {started_versions['kafkatool_source']}){extra}")
    log("children start as `python -S` (--clean-start: no .pth start-up hooks, for every tool)" if CLEAN_START
        else "children start as plain `python` (this machine's .pth start-up hooks included, for every tool)")
    if snapshot is not None and not kt_location.startswith(snapshot):
        log(f"error: the children import kafkatool from {kt_location}, not from the snapshot {snapshot}")
        return None
    load = os.getloadavg()
    if load[0] > 0.5:
        log(f"warning: load average {load[0]:.2f} before starting: other work shares the {os.cpu_count()} CPUs; expect noise")
    return load


def print_targets(targets: list[dict]) -> None:
    print("targets (from the issue):")
    for t in targets:
        note = f"  ({t['note']})" if t["note"] else ""
        print(f"  [{t['status']:>4}] {t['target']}: {t['variant']} -> {t['measured']}{note}")


def note_source_change(started_versions: dict, snapshot: str | None) -> str:
    """Say so when kafkatool's working tree changed while the benchmark ran; return its fingerprint now."""
    end_source = source_fingerprint(os.path.join(REPO, "kafkatool"))
    if end_source != started_versions["kafkatool_source"]:
        print(
            f"note: kafkatool's working tree changed during the run ({started_versions['kafkatool_source']} -> {end_source});"
            + (" the snapshot taken at the start was measured throughout" if snapshot else " results mix code versions (--live)")
        )
    return end_source

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=gen.DEFAULT_ROOT, help=f"where the segments live (default {gen.DEFAULT_ROOT})")
    ap.add_argument("--quick", action="store_true", help=f"{gen.QUICK_MIB} MiB segments and 1 run: a smoke check")
    ap.add_argument("--variants", help=f"comma separated subset of: {', '.join(gen.VARIANTS)}")
    ap.add_argument("--mib", type=int, metavar="N", help="size of every selected segment in MiB instead of each variant's full size (e.g. 256 for issue 13's none-16k-256m); ignored with --quick")
    ap.add_argument("--runs", type=int, help="timed runs per command, best kept (default 3; 1 with --quick)")
    ap.add_argument("--modes", default="batch,deep", help="comma separated subset of: batch, deep")
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"comma separated subset of: {', '.join(TOOLS)}")
    ap.add_argument("--no-check", action="store_true", help="skip the untimed output and CRC checks")
    ap.add_argument("--clean-start", action="store_true", help=CLEAN_START_HELP)
    ap.add_argument("--live", action="store_true", help="run the working tree's kafkatool, not a snapshot taken at the start")
    ap.add_argument("--compare", metavar="DIR", help=f"also run the kafkatool of another checkout (DIR/kafkatool, its extension built) as the tool {BEFORE}, interleaved with the others: before/after ratios measured side by side")
    ap.add_argument("--out", default=os.path.join(HERE, "out"), help="directory for the JSON report")
    ap.add_argument("--seed", type=int, default=gen.DEFAULT_SEED)
    args = ap.parse_args(argv)

    runs = args.runs if args.runs is not None else (1 if args.quick else 3)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if bad := [m for m in modes if m not in MODES] + [t for t in tools if t not in TOOLS]:
        ap.error(f"unknown mode/tool: {', '.join(bad)}")
    if "kafkatool" not in tools:
        ap.error("kafkatool must be among --tools: the ratios are against it")
    tools = ["kafkatool"] + [t for t in tools if t != "kafkatool"]
    root = os.path.abspath(args.root)
    started = _dt.datetime.now()
    log = lambda *a: print(*a, flush=True)  # noqa: E731

    started_versions = versions()
    if args.compare:
        other = os.path.abspath(args.compare)
        if not os.path.isfile(os.path.join(other, "kafkatool", "__init__.py")):
            ap.error(f"{other} holds no kafkatool package")
        other_snapshot = snapshot_kafkatool(root, other)
        started_versions["compare"] = {"tree": other, "snapshot": other_snapshot}
        tools.insert(1, BEFORE)  # right after kafkatool: its output is checked against kafkatool's
    snapshot = None if args.live else snapshot_kafkatool(root)
    set_child_env(root, snapshot, args.clean_start)
    if args.compare:
        # the children's PYTHONPATH with the other snapshot in place of the one under test
        rest = [p for p in (CHILD_ENV or {}).get("PYTHONPATH", "").split(os.pathsep) if p and p not in (snapshot, REPO)]
        BEFORE_PATH[:] = [os.pathsep.join([other_snapshot, *rest])]
        log(f"{BEFORE}: the kafkatool of {other} (snapshot {other_snapshot})")
    kt_info = child_kafkatool_info()
    kt_location = kt_info["location"]
    started_versions["kafkatool_speedups"] = kt_info["speedups"]
    started_versions["kafkatool_dump_text"] = kt_info.get("dump_text")
    load = announce_under_test(log, kt_location, started_versions, snapshot)
    if load is None:
        return 2
    log(f"segments under {root}:")
    chosen = gen.select_variants(args.variants)
    sizes = {v.name: args.mib for v in chosen} if args.mib else None
    segments = gen.ensure_segments(root, chosen, args.quick, args.seed, log, full_mib=sizes)
    label = {s.path: gen.VARIANTS[s.variant].dir_name(s.target_mib) for s in segments}

    checks: list[Check] = []
    selfcheck = None
    if not args.no_check:
        log("CRC self-check (one damaged batch):")
        selfcheck = crc_self_check(root, tools, log)

    log("warming the page cache:")
    for s in segments:
        t = warm_cache(s.path)
        log(f"  {label[s.path]:<16} {s.file_bytes / MiB:8.1f} MiB read in {t:.2f} s")

    # Fixed cost: interpreter start and imports, on an empty segment.
    empty = os.path.join(root, "empty", gen.SEGMENT_NAME)
    os.makedirs(os.path.dirname(empty), exist_ok=True)
    open(empty, "wb").close()
    fixed: dict[str, float] = {}
    for tool in tools:  # untimed: fills the bytecode cache
        run_process(tool_command(tool, "deep", empty))
    for _ in range(max(runs, 3)):
        for tool in tools:
            run, _l, _h = run_process(tool_command(tool, "batch", empty))
            fixed[tool] = min(fixed.get(tool, float("inf")), run.seconds)
    log("fixed cost (dump of an empty segment, best): " + ", ".join(f"{t} {s:.3f} s" for t, s in fixed.items()))

    results: list[Result] = []
    for s in segments:
        for mode in modes:
            if not args.no_check:
                cs = check_outputs(s, label[s.path], mode, tools)
                checks += cs
                for c in cs:
                    if not c.ok:
                        log(f"  CHECK FAILED {c.variant} {c.mode} {c.tool}: {c.note}")
            best: dict[str, Result] = {}
            for _ in range(runs):
                for tool in tools:  # interleaved: drift hits every tool alike
                    # Re-read first: this machine may reclaim idle page cache (DAMON) within minutes.
                    warm_cache(s.path)
                    run, _l, _h = run_process(tool_command(tool, mode, s.path))
                    if run.exit_code != 0:
                        log(f"  {tool} exited {run.exit_code} on {s.path}: {run.stderr.strip()[-300:]}")
                    r = best.get(tool)
                    if r is None:
                        r = best[tool] = Result(
                            label[s.path], mode, tool, run.seconds, run.max_rss_mib, s.file_bytes, s.records, s.batches, 0, 0
                        )
                    r.runs.append(asdict(run))
                    r.seconds = min(r.seconds, run.seconds)
                    r.max_rss_mib = max(r.max_rss_mib, run.max_rss_mib)
            kt = best["kafkatool"].seconds
            peers_here = [t for t in tools if t in PEERS]
            for tool in tools:
                r = best[tool]
                r.gib_per_s = s.file_bytes / GiB / r.seconds
                r.mrec_per_s = s.records / 1e6 / r.seconds
                if tool in PEERS:
                    r.speedup_vs_peer = r.seconds / kt
                elif peers_here:
                    for p in peers_here:
                        r.ratio_vs[p] = best[p].seconds / r.seconds
                    r.ratio_vs["faster-peer"] = min(best[p].seconds for p in peers_here) / r.seconds
                results.append(r)
                log(
                    f"  {label[s.path]:<16} {mode:<6} {tool:<14} {r.seconds:8.3f} s  {r.max_rss_mib:8.1f} MiB"
                    + (f"  x{r.speedup_vs_peer:.2f}" if r.speedup_vs_peer is not None else "")
                    + (f"  x{r.ratio_vs['faster-peer']:.2f} vs the faster peer" if "faster-peer" in r.ratio_vs else "")
                )

    targets = evaluate_targets(results)
    checks_ok = all(c.ok for c in checks) and (selfcheck is None or selfcheck["ok"])

    print()
    print(f"kafkatool dump vs kafka-python and aiokafka — whole process, best of {runs}, page-cached, output to /dev/null")
    print("ratio = peer seconds / kafkatool seconds (> 1: kafkatool faster); GiB/s of file bytes; Mrec/s of records in the file")
    print("x faster peer (kafkatool rows) = the faster peer's seconds / that kafkatool's seconds")
    print()
    print(_fmt_table(results))
    print()
    if args.compare:
        print(f"before/after ({BEFORE} = {started_versions['compare']['tree']}, measured in the same run, interleaved):")
        print(fmt_compare(results))
        print()
    print("fixed cost (empty segment): " + ", ".join(f"{t} {s:.3f} s" for t, s in fixed.items()))
    print()
    print_targets(targets)
    print()
    if args.no_check:
        print("checks: skipped (--no-check)")
    else:
        n_same = sum(1 for c in checks if c.same_as_kafkatool)
        n_peer = sum(1 for c in checks if c.tool != "kafkatool")  # kafkatool-base included
        print(
            f"checks: {'all passed' if checks_ok else 'FAILED'} — line counts as predicted for {sum(c.lines == c.expected_lines for c in checks)}"
            f"/{len(checks)} outputs; {'peer and ' + BEFORE if args.compare else 'peer'} output byte-identical to kafkatool's in {n_same}/{n_peer};"
            f" CRC self-check {'ok' if selfcheck and selfcheck['ok'] else 'FAILED'}"
        )
        for c in checks:
            if not c.ok:
                print(f"  FAILED {c.variant} {c.mode} {c.tool}: {c.note}")

    end_source = note_source_change(started_versions, snapshot)
    os.makedirs(args.out, exist_ok=True)
    out_path = os.path.join(args.out, f"dump-{started.strftime('%Y%m%d-%H%M%S')}.json")
    report = {
        "benchmark": "kafkatool dump",
        "started": started.isoformat(timespec="seconds"),
        "clean_start": args.clean_start,
        "elapsed_s": round((_dt.datetime.now() - started).total_seconds(), 1),
        "quick": args.quick,
        "runs": runs,
        "modes": {m: MODES[m] for m in modes},
        "commands": {t: tool_command(t, "deep", "FILE") for t in tools},
        "rss_method": rss_method(),
        "machine": machine_info(),
        "load_average_at_start": load,
        "versions": started_versions,
        "kafkatool_under_test": kt_location,
        "kafkatool_source_at_end": end_source,
        "segments": [asdict(s) for s in segments],
        "fixed_cost_s": fixed,
        "results": [asdict(r) for r in results],
        "targets": targets,
        "checks": {"ok": checks_ok, "crc_self_check": selfcheck, "outputs": [asdict(c) for c in checks]},
    }
    with open(out_path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"\nJSON report: {os.path.relpath(out_path)}")
    return 0 if checks_ok else 1


if __name__ == "__main__":
    sys.exit(main())
