#!/usr/bin/env python3
"""Run every kafkatool command in two source trees and diff what they print and write.

    python bench/compare_outputs.py OLD_TREE NEW_TREE [-j 2] [-k SUBSTRING] [--quick] [--env NAME=VALUE]

Each tree runs its own package: ``python -m kafkatool`` with the tree as the working directory
and ``PYTHONPATH`` (its compiled extension too, when it was built in place). The inputs are the
sample log dir (``/work/main/fixtures/logdir``, or ``--sample``), every real fixture under
``/work/shared/fixtures-real`` (each fixture dir, its log dirs, its partition dirs, its files
named one by one, and files that sit outside any partition dir) and a damaged copy of the sample
log dir made here (a flipped byte, a garbage tail, a zero-filled tail, a torn batch, a garbage
``.index``, missing indexes) so that truncate, reindex and verify have something to find, and
an edge tree for discovery (dirs of log dirs, symbolic links, FIFOs, a non-UTF-8 name,
transitional, nested and non-Kafka dirs: ``-k edge``).

A read-only case (dump, verify, dry runs of reindex and truncate, ``--help``, usage errors) runs
both trees on the same paths and compares standard output, standard error and the exit status
byte for byte. A writing scenario (reindex/truncate ``--execute``, then restore's plan and
``--execute`` on the backup the run made) runs each tree in turn on its own fresh copy of the
input, at the same path, and after every step also compares the resulting file tree: every
name, mode and byte, the backup dir included. What legitimately differs between two runs is
normalized first: the scratch root, UTC timestamps (backup dir names, run ids, manifest
times), process ids and elapsed seconds. Dry runs are made on copies too, and the copies are
checked unchanged at the end.

One line per case (``same`` or ``DIFF``, then a unified diff of the first difference), a
summary, exit status 1 when anything differs (2 on bad usage). Comparing a tree with itself
(``compare_outputs.py T T``) must print no DIFF: that is how the normalization is checked.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import difflib
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REAL = Path("/work/shared/fixtures-real")
SAMPLE = Path("/work/main/fixtures/logdir")  # --sample; NEW_TREE/fixtures/logdir when this is absent
TIMEOUT = 120  # seconds per command: a hang is a difference, not a stuck run

#: Suffixes that make a file something kafkatool reads (the others are listed but not dumped alone).
KAFKA_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".checkpoint", ".deleted", ".cleaned", ".swap")


# ----------------------------------------------------------------------------- normalization
def normalizer(work: Path):
    """A function that rewrites the parts of an output that differ between any two runs."""
    rules = [
        (re.compile(re.escape(str(work)).encode()), b"<WORK>"),
        # run ids and backup dir names: 20261125T172336059715Z[-PID-N]
        (re.compile(rb"\d{8}T\d{6}\d*Z-\d+-"), b"<STAMP>-<PID>-"),
        (re.compile(rb"\d{8}T\d{6}\d*Z"), b"<STAMP>"),
        (re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"), b"<TIME>"),
        (re.compile(rb'"pid": ?\d+'), b'"pid":<PID>'),
        (re.compile(rb'"seconds": ?[0-9.e-]+'), b'"seconds":<SECONDS>'),
        (re.compile(rb"\bin \d+(?:\.\d+)? ?(?:s|ms)\b"), b"in <SECONDS>"),
    ]

    def normalize(data: bytes) -> bytes:
        for pattern, repl in rules:
            data = pattern.sub(repl, data)
        return data

    return normalize


# ----------------------------------------------------------------------------- running a tree
@dataclass
class Result:
    rc: int
    stdout: bytes
    stderr: bytes
    tree: bytes = b""  # the file tree after a writing step, as text


def tree_env(tree: Path, work: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKATOOL", "PYTHON", "COLUMNS", "LINES"))}
    env.update(
        PYTHONPATH=str(tree),
        # keep the old tree untouched: bytecode goes to the scratch dir, one cache per tree
        PYTHONPYCACHEPREFIX=str(work / "pycache" / hashlib.sha1(str(tree).encode()).hexdigest()[:12]),
        COLUMNS="100",
        LINES="50",
        TERM="dumb",
        TZ="UTC",
        LC_ALL="C.UTF-8",
        PYTHONHASHSEED="0",
        NO_COLOR="1",
    )
    env.update(extra)
    return env


def run(tree: Path, args: list[str], env: dict[str, str]) -> Result:
    try:
        p = subprocess.run(
            [sys.executable, "-m", "kafkatool", *args],
            cwd=tree, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT,
        )
        return Result(p.returncode, p.stdout, p.stderr)
    except subprocess.TimeoutExpired as e:
        return Result(-999, e.stdout or b"", (e.stderr or b"") + b"\n<TIMEOUT>\n")


def snapshot(root: Path, normalize) -> bytes:
    """Every entry under ``root``: name, type and mode, size and sha256; the text of the
    backup dir's manifest, script and journal files (normalized), so a diff shows the line."""
    lines: list[bytes] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames) + sorted(filenames):
            p = Path(dirpath, name)
            rel = normalize(os.fsencode(p.relative_to(root)))
            st = p.lstat()
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISDIR(st.st_mode):
                lines.append(b"%s/ dir %o" % (rel, mode))
            elif stat.S_ISLNK(st.st_mode):
                lines.append(b"%s link %o -> %s" % (rel, mode, normalize(os.fsencode(os.readlink(p)))))
            elif stat.S_ISREG(st.st_mode):
                data = p.read_bytes()
                textual = name.endswith((".json", ".txt", ".journal", "SHA256SUMS")) or "journal" in name
                if textual:
                    data = normalize(data)
                lines.append(b"%s file %o %d sha256=%s" % (rel, mode, len(data), hashlib.sha256(data).hexdigest().encode()))
                if textual:
                    lines.extend(b"  | " + line for line in data.splitlines())
            else:
                lines.append(b"%s other %o" % (rel, st.st_mode))
    return b"\n".join(lines) + b"\n"


# ----------------------------------------------------------------------------- cases
@dataclass
class Case:
    """A read-only command run by both trees on the same paths."""

    name: str
    args: list[str]


@dataclass
class Scenario:
    """Writing steps run in order on a fresh copy of ``source`` (copied to ``work/scn/<name>/<dest>``).
    In ``steps``, ``{root}`` is the copy's parent dir, ``{backup}`` the one backup dir it holds."""

    name: str
    source: Path
    dest: str
    steps: list[list[str]] = field(default_factory=list)


def kafka_files(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.is_file())


def is_partition_dir(d: Path) -> bool:
    return d.is_dir() and any(p.suffix in (".log", ".index", ".timeindex", ".snapshot") for p in d.iterdir() if p.is_file())


def layout(top: Path) -> tuple[list[Path], list[Path], list[Path]]:
    """Log dirs, partition dirs and loose Kafka-looking files under ``top``."""
    partitions, loose = [], []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        d = Path(dirpath)
        if is_partition_dir(d):
            partitions.append(d)
            dirnames[:] = []
            continue
        loose += [d / f for f in sorted(filenames) if f.endswith(KAFKA_SUFFIXES + (".hex",))]
    log_dirs = sorted({p.parent for p in partitions})
    return log_dirs, partitions, loose


def damage(logdir: Path) -> None:
    """Make the sample log dir copy at ``logdir`` something truncate/reindex/verify work on."""

    def flip(path: Path, pos: int) -> None:
        b = bytearray(path.read_bytes())
        b[pos] ^= 0xFF
        path.write_bytes(bytes(b))

    seg = "00000000000000000000"
    flip(logdir / "v2-none-0" / f"{seg}.log", 1000)  # CRC mismatch in batch 2: later batches intact
    with open(logdir / "v1-none-0" / f"{seg}.log", "ab") as f:
        f.write(b"\xab" * 30)  # garbage tail
    with open(logdir / "v2-gzip-0" / f"{seg}.log", "ab") as f:
        f.write(b"\0" * 4096)  # preallocated zero tail
    torn = logdir / "txn-0" / "00000000000000000100.log"
    torn.write_bytes(torn.read_bytes()[:-10])  # a torn last batch
    (logdir / "v0-none-0" / f"{seg}.index").write_bytes(bytes(range(7, 31)))  # a garbage index
    (logdir / "v2-snappy-0" / f"{seg}.index").unlink()  # missing indexes
    (logdir / "v2-snappy-0" / f"{seg}.timeindex").unlink()
    flip(logdir / "v1-gzip-0" / f"{seg}.log", 200)  # a bad wrapper CRC
    (logdir / "v2-zstd-0" / f"{seg}.timeindex").write_bytes(b"\0" * 36)  # preallocated timeindex tail


def damage_real(logdir: Path) -> None:
    log = logdir / "__consumer_offsets-28" / "00000000000000000000.log"
    b = bytearray(log.read_bytes())
    b[len(b) // 2] ^= 0xFF
    log.write_bytes(bytes(b))
    with open(logdir / "debug_topic-0" / "00000000000000000000.log", "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x10")  # a short tail


def make_edge_tree(root: Path, sample: Path) -> None:
    """Directories the discovery of every command must treat as before: a directory of log dirs
    named like partitions, symbolic links (to a partition dir, dangling),
    FIFOs named like segments, a non-UTF-8 partition name, transitional and nested dirs, loose
    files, a backup dir, and dirs with nothing Kafka in them."""
    seg = sample / "v2-none-0"

    def put(rel: str | bytes, src: Path | None = None) -> None:
        p = os.path.join(os.fsencode(root), os.fsencode(rel))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(src.read_bytes() if src else b"")

    z = "00000000000000000000"
    for ld in ("kafka/data-1", "kafka/data-2"):
        put(f"{ld}/meta.properties", sample / "meta.properties")
        put(f"{ld}/recovery-point-offset-checkpoint", sample / "recovery-point-offset-checkpoint")
        for t in ("a-0", "b-1"):
            for suffix in (".log", ".index", ".timeindex"):
                put(f"{ld}/{t}/{z}{suffix}", seg / f"{z}{suffix}")
            put(f"{ld}/{t}/leader-epoch-checkpoint", seg / "leader-epoch-checkpoint")
            put(f"{ld}/{t}/junk.txt")
        os.makedirs(root / ld / "remote-log-index-cache", exist_ok=True)
    put(f"kafka/data-2/notapartition/x-0/{z}.log", seg / f"{z}.log")
    put(f"elsewhere/c-0/{z}.log", seg / f"{z}.log")
    os.symlink(root / "elsewhere" / "c-0", root / "kafka" / "data-1" / "c-0")
    # (no symbolic link to a directory above: before issue 10 dump followed one until the path
    # grew too long, repeating every file below it; it is no longer followed, see test_dump_hardening)
    put(b"kafka/data-1/t\xff-0/" + f"{z}.log".encode(), seg / f"{z}.log")
    os.mkfifo(root / "kafka" / "data-1" / "a-0" / "00000000000000000090.log")
    os.symlink("/nonexistent", root / "kafka" / "data-1" / "a-0" / "00000000000000000095.log")
    os.symlink("/nonexistent", root / "kafka" / "data-2" / "a-0" / "00000000000000000099.index")
    os.mkfifo(root / "kafka" / "data-2" / "b-1" / "00000000000000000077.log")
    put("kafka/data-2/a-0/abc.log")
    put("kafka/data-2/a-0/5.log", seg / f"{z}.log")
    os.makedirs(root / "kafka" / "data-2" / "a-0.6b66746c000000000000000000000000-delete")
    put(f"kafka/data-2/b-1.0123456789abcdef0123456789abcdef-future/{z}.log", seg / f"{z}.log")
    put("etc/dbus-1/system.conf")
    put("etc/passwd")
    os.makedirs(root / "empty")
    put(f"nest/p-0/{z}.log", seg / f"{z}.log")
    put(f"nest/p-0/q-1/{z}.log", seg / f"{z}.log")
    put("loose/00000000000000000003.log", seg / f"{z}.log")
    put("loose/00000000000000000003.index")
    put("loose/foo.log", seg / f"{z}.log")
    put("bk/MANIFEST.json")
    put("bk/RESTORE.txt")
    put(f"bk/t-0/{z}.log", seg / f"{z}.log")


def build_cases(inputs: Path, sample: Path, damaged: Path, real: Path | None, *, quick: bool = False) -> tuple[list[Case], list[Scenario]]:
    cases: list[Case] = []
    scenarios: list[Scenario] = []

    def add(name: str, *args: str | Path) -> None:
        cases.append(Case(name, [str(a) for a in args]))

    # --- help and usage errors
    add("help", "--help")
    add("help -h", "-h")
    add("no command", )
    add("--version", "--version")
    add("unknown command", "frobnicate")
    for cmd in ("dump", "verify", "reindex", "truncate", "restore"):
        add(f"{cmd} --help", cmd, "--help")
        add(f"{cmd} -h", cmd, "-h")
        add(f"{cmd} missing path", cmd, "/nonexistent/kafkatool-compare")
        add(f"{cmd} bad option", cmd, "--no-such-option", sample)
    add("verify no path", "verify")
    add("reindex no path", "reindex")
    add("truncate no path", "truncate")
    add("restore no arg", "restore")
    add("restore not a backup", "restore", sample)
    add("dump empty dir", "dump", inputs / "empty")
    add("verify empty dir", "verify", inputs / "empty")
    add("dump bad format", "dump", "--format", "xml", sample)
    add("dump bad max-message-size", "dump", "--max-message-size", "0", sample)
    add("dump empty offset range", "dump", "--start-offset", "10", "--end-offset", "5", sample)
    add("dump bad start-time", "dump", "--start-time", "yesterday", sample)
    add("dump decoder class", "dump", "--key-decoder-class", "kafka.serializer.DefaultDecoder", sample)
    add("verify bad kind", "verify", "--fail-on", "no_such_kind", sample)
    add("verify bad jobs", "verify", "--jobs", "0", sample)
    add("reindex bad interval", "reindex", "--index-interval-bytes", "-1", sample)
    add("truncate bad format", "truncate", "--format", "table", sample)

    # --- discovery edge cases (make_edge_tree)
    edge = inputs / "edge"
    for rel in ("", "kafka", "kafka/data-1", "kafka/data-2", "kafka/data-1/a-0", "kafka/data-1/c-0", "nest", "loose",
                "etc", "bk", "kafka/data-2/notapartition", "kafka/data-2/b-1/00000000000000000077.log"):
        t = edge / rel
        add(f"dump edge:{rel}", "dump", t)
        add(f"verify edge:{rel}", "verify", t)
        add(f"verify --format jsonl --jobs 2 edge:{rel}", "verify", "--format", "jsonl", "--jobs", "2", t)
        add(f"reindex edge:{rel}", "reindex", "--format", "jsonl", t)
        add(f"truncate edge:{rel}", "truncate", "--format", "jsonl", t)
    add("dump edge: files and dirs named", "dump", edge / "loose" / "foo.log", str(edge / "kafka/data-2/a-0") + "//",
        edge / "loose" / "00000000000000000003.index", edge / "kafka/data-1/")

    # --- the targets
    real_tops = sorted(p for p in real.iterdir() if p.is_dir()) if real else []
    log_dirs, partitions, loose = [sample, damaged], [], []
    for top in [sample, damaged] + real_tops:
        l, p, f = layout(top)
        partitions += p
        loose += f
        log_dirs += [d for d in l if d not in log_dirs]
    real_log_dirs = [d for d in log_dirs if real in d.parents]

    dump_logdir_variants = [
        [], ["--deep-iteration"], ["--print-data-log"], ["--format", "jsonl"], ["--format", "table"],
        ["--index-sanity-check"], ["--verify-index-only"], ["--max-bytes", "1000"], ["-q"],
        ["--print-data-log", "--format", "jsonl"], ["--deep-iteration", "--format", "table"],
        ["--skip-record-metadata", "--print-data-log"],
    ]
    for d in log_dirs:
        for v in dump_logdir_variants:
            add(f"dump {' '.join(v)} {d}", "dump", *v, d)
        for v in ([], ["--format", "jsonl"], ["--format", "table"], ["--deep"], ["--jobs", "2"],
                  ["--deep", "--format", "jsonl"], ["--fail-on", "batch_crc", "--ignore", "trailing_zeros"]):
            add(f"verify {' '.join(v)} {d}", "verify", *v, d)
    for d in [sample, damaged, *real_log_dirs[:2]]:
        for v in (["--start-offset", "15"], ["--start-offset", "12", "--end-offset", "25", "--deep-iteration"],
                  ["--start-time", "1700000000200"], ["--end-time", "2023-11-14T22:13:20.300Z", "--deep-iteration"],
                  ["--key-decoder", "hex", "--value-decoder", "json"], ["--value-decoder", "base64", "--format", "table"],
                  ["--max-message-size", "100"]):
            add(f"dump {' '.join(v)} {d}", "dump", *v, d)
    for top in [*([real] if real else []), sample.parent, *real_tops]:
        add(f"dump {top}", "dump", top)
        add(f"verify {top}", "verify", top)
    # (--quick: every partition dir and loose file left out but two)
    for p in partitions[:2] if quick else partitions:
        add(f"dump {p}", "dump", p)
        add(f"verify {p}", "verify", p)
        files = kafka_files(p)
        add(f"dump each file of {p}", "dump", *files)
        add(f"verify each file of {p}", "verify", *files)
        name = p.name
        decoder = ("--offsets-decoder" if name.startswith("__consumer_offsets") else
                   "--transaction-log-decoder" if name.startswith(("__transaction_state", "txn-")) else
                   "--cluster-metadata-decoder" if name.startswith("__cluster_metadata") else None)
        if decoder:
            add(f"dump {decoder} {p}", "dump", decoder, p)
            add(f"dump --print-data-log {p}", "dump", "--print-data-log", p)
    for f in loose[:2] if quick else loose:
        add(f"dump {f}", "dump", f)
        add(f"dump --deep-iteration --format jsonl {f}", "dump", "--deep-iteration", "--format", "jsonl", f)
        add(f"verify {f}", "verify", f)
    add("dump --files", "dump", "--files", ",".join(str(f) for f in kafka_files(sample / "v2-none-0")))
    add("dump several partitions", "dump", sample / "v2-none-0", sample / "txn-0", damaged / "v1-none-0")
    add("verify several partitions --jobs 2", "verify", "--jobs", "2", sample / "v2-none-0", damaged / "v1-none-0", damaged / "v2-none-0")

    # --- dry runs of the writing commands, on copies (checked unchanged at the end)
    copies = [(sample, inputs / "dry" / "sample" / "logdir"), (damaged, inputs / "dry" / "damaged" / "logdir"),
              *((d, inputs / "dry" / "real" / d.relative_to(real)) for d in real_log_dirs)]
    for src, d in copies:
        for v in ([], ["--all"], ["--format", "jsonl"], ["--all", "--index-interval-bytes", "100"]):
            add(f"reindex {' '.join(v)} {d}", "reindex", *v, d)
        for v in ([], ["--keep-valid-after"], ["--format", "jsonl"], ["--keep-valid-after", "--format", "jsonl"]):
            add(f"truncate {' '.join(v)} {d}", "truncate", *v, d)
        if src in (sample, damaged) and not quick:  # the real log dirs' partitions: in the writing scenarios
            for p in sorted(x for x in src.iterdir() if is_partition_dir(x)):
                q = d / p.name
                add(f"reindex {q}", "reindex", q)
                add(f"truncate {q}", "truncate", q)
                add(f"truncate --keep-valid-after each file of {q}", "truncate", "--keep-valid-after",
                    *(q / f.name for f in kafka_files(p)))

    # --- writing scenarios: each step on the same fresh copy, then restore what it backed up
    undo = [["restore", "{backup}"], ["restore", "--format", "jsonl", "{backup}"], ["restore", "--execute", "{backup}"],
            ["restore", "--execute", "{backup}"]]
    L = "{root}/logdir"
    scenarios += [
        Scenario("reindex-sample", sample, "logdir", [["reindex", "--execute", "--backup-dir", "{root}/bk", L], *undo]),
        Scenario("reindex-all-sample", sample, "logdir",
                 [["reindex", "--all", "--execute", L], ["reindex", "--all", "--execute", L], *undo]),
        Scenario("reindex-damaged", damaged, "logdir",
                 [["reindex", "--execute", "--format", "jsonl", L], *undo]),
        Scenario("reindex-all-damaged-partition", damaged, "logdir",
                 [["reindex", "--all", "--execute", "--backup-dir", "{root}/bk", "{root}/logdir/v0-none-0"], *undo]),
        Scenario("truncate-damaged", damaged, "logdir",
                 [["truncate", "--execute", L], ["truncate", "--execute", L], ["verify", L], *undo, ["verify", L]]),
        Scenario("truncate-keep-valid-damaged", damaged, "logdir",
                 [["truncate", "--keep-valid-after", "--execute", "--format", "jsonl", "--backup-dir", "{root}/bk", L],
                  ["dump", "--deep-iteration", L], *undo]),
        Scenario("truncate-then-reindex-damaged", damaged, "logdir",
                 [["truncate", "--execute", "--backup-dir", "{root}/bk", L],
                  ["reindex", "--all", "--execute", "--backup-dir", "{root}/bk", L], *undo]),
        Scenario("truncate-clean-sample", sample, "logdir", [["truncate", "--execute", L], ["truncate", "--keep-valid-after", "--execute", L]]),
        # convert: into new directories (every target magic, the loss report in both formats), then in place
        Scenario("convert-dest-sample", sample, "logdir", [
            ["convert", "--to-magic", "2", "--compression", "zstd", L, "{root}/v2-zstd"],
            ["convert", "--to-magic", "1", "--compression", "gzip", "--format", "jsonl", L, "{root}/v1-gzip"],
            ["convert", "--to-magic", "0", "--compression", "lz4", L, "{root}/v0-lz4"],
            ["convert", "--to-magic", "1", "--drop-aborted", "{root}/logdir/txn-0", "{root}/txn-v1"],
            ["convert", "--to-magic", "1", "--strict", "{root}/logdir/txn-0", "{root}/strict"],
            ["convert", "--to-magic", "2", "{root}/v0-lz4", "{root}/v0-lz4"],
        ]),
        Scenario("convert-damaged", damaged, "logdir", [
            ["convert", "--to-magic", "2", L, "{root}/plain"],
            ["convert", "--to-magic", "2", "--skip-damaged", "--format", "jsonl", L, "{root}/skip"],
            ["convert", "--to-magic", "1", "--compression", "snappy", "--salvage", L, "{root}/salvage"],
        ]),
        Scenario("convert-in-place-sample", sample, "logdir", [
            ["convert", "--in-place", "--to-magic", "2", L],
            ["convert", "--in-place", "--execute", "--to-magic", "2", "--compression", "gzip", L],
            ["convert", "--in-place", "--to-magic", "2", "--compression", "gzip", "--format", "jsonl", L],
            *undo,
        ]),
    ]
    for d in real_log_dirs:
        tag = str(d.relative_to(real)).replace("/", "_")
        scenarios.append(Scenario(f"reindex-all-{tag}", d, "logdir", [["reindex", "--all", "--execute", L], *undo]))
        scenarios.append(Scenario(f"truncate-{tag}", d, "logdir", [["truncate", "--execute", "--backup-dir", "{root}/bk", L], *undo]))
        scenarios.append(Scenario(f"convert-{tag}", d, "logdir", [["convert", "--to-magic", "2", "--compression", "zstd", L, "{root}/v2"],
                                                                  ["convert", "--to-magic", "1", "--skip-damaged", L, "{root}/v1"]]))
    if real:
        scenarios.append(Scenario("truncate-keep-valid-real-damaged", inputs / "real-damaged", "logdir",
                                  [["truncate", "--keep-valid-after", "--execute", L], *undo]))
        scenarios.append(Scenario("truncate-real-damaged", inputs / "real-damaged", "logdir",
                                  [["truncate", "--execute", "--format", "jsonl", L], *undo]))
    return cases, scenarios


# ----------------------------------------------------------------------------- comparing
SHOW = False  # --show: print what the old tree printed for every case


def first_difference(old: Result, new: Result, normalize) -> str | None:
    if SHOW:
        print(f"  exit {old.rc}\n  stdout: {normalize(old.stdout)[:3000]!r}\n  stderr: {normalize(old.stderr)[:3000]!r}\n"
              f"  files: {old.tree.decode('utf-8', 'replace')[:3000]}")
    for what, a, b in (
        ("exit status", b"%d\n" % old.rc, b"%d\n" % new.rc),
        ("stdout", normalize(old.stdout), normalize(new.stdout)),
        ("stderr", normalize(old.stderr), normalize(new.stderr)),
        ("files", old.tree, new.tree),
    ):
        if a != b:
            diff = difflib.unified_diff(
                a.decode("utf-8", "backslashreplace").splitlines(), b.decode("utf-8", "backslashreplace").splitlines(),
                f"old {what}", f"new {what}", lineterm="", n=2,
            )
            lines = list(diff)
            if not lines[2:]:  # same lines, different bytes (a final newline)
                lines = [f"--- old {what}", f"+++ new {what}", f"  {a[-60:]!r}", f"  {b[-60:]!r}"]
            return "\n".join(lines[:60] + (["    ... (diff cut at 60 lines)"] if len(lines) > 60 else []))
    return None


def run_case(case: Case, old: Path, new: Path, envs, normalize) -> list[tuple[str, str | None]]:
    a, b = run(old, case.args, envs[0]), run(new, case.args, envs[1])
    return [(case.name, first_difference(a, b, normalize))]


def run_scenario(scn: Scenario, old: Path, new: Path, envs, normalize, work: Path) -> list[tuple[str, str | None]]:
    root = work / "scn" / scn.name
    outcomes: list[list[Result]] = []
    for tree, env in ((old, envs[0]), (new, envs[1])):
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        shutil.copytree(scn.source, root / scn.dest, symlinks=True)
        results = []
        for step in scn.steps:
            backups = sorted(p for p in root.iterdir() if p.name.startswith("kafkatool-backup-") or p.name == "bk")
            args = [s.replace("{root}", str(root)).replace("{backup}", str(backups[0]) if backups else str(root / "no-backup"))
                    for s in step]
            r = run(tree, args, env)
            r.tree = snapshot(root, normalize)
            results.append(r)
        outcomes.append(results)
    shutil.rmtree(root)
    return [
        (f"{scn.name} #{i + 1}: {' '.join(step)}", first_difference(a, b, normalize))
        for i, (step, a, b) in enumerate(zip(scn.steps, *outcomes))
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path, help="the reference tree (e.g. /tmp/base10)")
    ap.add_argument("new", type=Path, help="the tree under test (e.g. /work/main)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="cases run at once (default 2)")
    ap.add_argument("-k", "--only", action="append", default=[], help="only cases whose name contains this (repeatable)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="set in both trees' environment (e.g. KAFKATOOL_PURE_PYTHON=1)")
    ap.add_argument("--real", type=Path, default=REAL, help=f"the real broker fixtures (default {REAL})")
    ap.add_argument("--sample", type=Path, help=f"the sample log dir (default {SAMPLE})")
    ap.add_argument("--quick", action="store_true",
                    help="leave out the cases per partition dir and per file (about half the run; log dirs, scenarios, edge tree kept)")
    ap.add_argument("--show", action="store_true", help="print what the old tree printed for each case (to check the cases)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch dir")
    ns = ap.parse_args(argv)
    old, new = ns.old.resolve(), ns.new.resolve()
    for t in (old, new):
        if not (t / "kafkatool" / "__main__.py").is_file():
            ap.error(f"{t}: not a kafkatool tree (no kafkatool/__main__.py)")
    extra = dict(e.split("=", 1) for e in ns.env)
    global SHOW
    SHOW = ns.show
    real = ns.real.resolve()
    if not real.is_dir():
        print(f"compare_outputs: {real} is missing: the real broker fixtures are left out", file=sys.stderr)
        real = None

    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="kt-compare-"))
    try:
        inputs = work / "in"
        sample = ns.sample.resolve() if ns.sample else SAMPLE if SAMPLE.is_dir() else new / "fixtures" / "logdir"
        damaged = inputs / "damaged" / "logdir"
        shutil.copytree(sample, damaged)
        damage(damaged)
        (inputs / "empty").mkdir()
        make_edge_tree(inputs / "edge", sample)
        shutil.copytree(sample, inputs / "dry" / "sample" / "logdir")
        shutil.copytree(damaged, inputs / "dry" / "damaged" / "logdir")
        if real:
            shutil.copytree(real / "William0423__kafka" / "kafka-logs", inputs / "real-damaged" / "logdir")
            damage_real(inputs / "real-damaged" / "logdir")
            shutil.copytree(real, inputs / "dry" / "real")
        before = snapshot(inputs, lambda b: b)

        normalize = normalizer(work)
        envs = (tree_env(old, work, extra), tree_env(new, work, extra))
        cases, scenarios = build_cases(inputs, sample, damaged, real, quick=ns.quick)
        if ns.only:
            cases = [c for c in cases if any(k in c.name for k in ns.only)]
            scenarios = [s for s in scenarios if any(k in s.name for k in ns.only)]

        differ = same = 0
        with concurrent.futures.ThreadPoolExecutor(max(1, ns.jobs)) as pool:
            futures = [pool.submit(run_scenario, s, old, new, envs, normalize, work) for s in scenarios]
            futures += [pool.submit(run_case, c, old, new, envs, normalize) for c in cases]
            for fut in futures:  # in submission order: the report reads the same on every run
                for name, diff in fut.result():
                    name = normalize(name.encode()).decode()
                    if diff is None:
                        same += 1
                        print(f"same  {name}")
                    else:
                        differ += 1
                        print(f"DIFF  {name}\n{diff}")
                    sys.stdout.flush()
        if snapshot(inputs, lambda b: b) != before:
            differ += 1
            print("DIFF  inputs: a dry run or a read-only command changed its input")
        took = time.monotonic() - started
        print(f"\n{same + differ} cases ({len(cases)} read-only commands, {len(scenarios)} writing scenarios) in {took:.0f} s: "
              f"{same} same, {differ} differ  [{old} vs {new}]")
        return 1 if differ else 0
    finally:
        if ns.keep:
            print(f"scratch dir kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
