"""Benchmark the ``kafka_segments`` Spark data source (issue 12) against a ``binaryFile`` + ``mapInArrow`` job.

Usage::

    python bench/bench_spark.py --quick      # ~128 MiB of segments, memory check at 16 vs 128 MiB (~3 minutes)
    python bench/bench_spark.py              # ~1 GiB (150 small partitions + 2 x 256 MiB), 64 vs 512 MiB
    python bench/bench_spark.py --jobs source-parquet,binaryfile-parquet --runs 2

The data (generated once, deterministic, outside the repository under ``ROOT/spark``;
``ROOT`` is ``/tmp/kafkatool-bench``, ``$KAFKATOOL_BENCH_DIR`` or ``--root``):

* ``mixed-*``: two log dirs. ``small/``: 5 topics x 30 partitions, one or two segments each
  of 1-5 MiB (uncompressed batch bytes), one codec per topic (none, lz4, zstd, snappy, gzip).
  ``large/``: the topic ``firehose``, partition 0 one 256 MiB segment uncompressed,
  partition 1 one 256 MiB (before compression) lz4 segment. ~1 GiB of batches in all.
  ``--quick``: 5 x 8 partitions of 1-2 MiB and 2 x 32 MiB.
* ``single-64m`` / ``single-512m`` (``--quick``: 16 / 128 MiB): one partition, one
  uncompressed segment each: executor memory must not grow with the segment size.

Every segment has its ``.index`` and ``.timeindex`` (kafkatool's ``IndexBuilder``, as Kafka's
recovery builds them). The batches are ``gen_segment.py``'s templates (realistic ~16 KiB v2
batches of ~330-byte JSON records with headers), copied with a new baseOffset, timestamps,
producerId (one per partition) and baseSequence and a recomputed CRC-32C.

The jobs, each run as a fresh process (``python bench_spark.py --job ...``: interpreter,
SparkSession on ``local[2]`` with the JVM start, the job, stop), all with the same session
settings:

* ``source-parquet``: ``spark.read.format("kafka_segments").option("parallelism", sc.defaultParallelism)
  .load(DIRS).write.options(**W).partitionBy("topic", "partition").parquet(OUT)``, with the read
  option and the Parquet writer options ``W`` of ``kafkatool spark export``
  (``kafkatool.spark.session.writer_options("parquet")``; ``--plain-parquet``: Spark's defaults);
* ``binaryfile-parquet``: the baseline (``peer_spark_binaryfile.py``): ``binaryFile`` (``*.log``,
  recursive) + ``mapInArrow`` parsing each file's bytes with kafkatool's own parser into the
  same schema, written the same way with the same writer options;
* ``source-noop`` / ``binaryfile-noop``: the same reads into ``format("noop")``;
* ``cli-export``: ``kafkatool spark export DIRS --to OUT --format parquet`` as a user runs it.

Reported per job: whole-process seconds (spawn to reap), the job's own seconds (the action
alone, measured in the child), session start seconds, and peak RSS of the JVM, of the driver's
Python, and of the Python workers (the processes under the JVM: ``pyspark.daemon`` and the
workers it forks), sampled from ``/proc`` every 50 ms by this process (``VmHWM`` of each,
and the largest sum over the workers at one sample). Targets (the issue): the source's export
faster than the baseline's; the export within 2x of the noop read; Python worker memory flat in
the segment size. After the timed runs, a check job reads the Parquet outputs back: row counts
equal to the generated record count and the same digest over every column for source and
baseline. JSON goes to ``bench/out/spark-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

MiB = 1 << 20
CLK_TCK = os.sysconf("SC_CLK_TCK")
GENERATOR_VERSION = 1
MASTER = "local[2]"
#: The same for every job (source and baseline). binaryFile holds a whole segment as one JVM
#: byte[] and an Arrow copy of it: 256-512 MiB segments need more than the default 1g.
SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.memory": "4g",
}
#: Parquet writer options of the source-parquet and binaryfile-parquet jobs: None = what ``kafkatool spark
#: export`` passes (so that the bench's export is the CLI's), {} with ``--plain-parquet`` (Spark's defaults);
#: ``--parquet-option`` adds to either.
PARQUET_OPTIONS: dict[str, str] | None = None
EXTRA_PARQUET_OPTIONS: dict[str, str] = {}
#: ``--conf`` settings: in every job's session, the CLI's included (``kafkatool spark export --conf``).
EXTRA_CONF: dict[str, str] = {}
JOBS = ("source-parquet", "binaryfile-parquet", "source-noop", "binaryfile-noop", "cli-export")
MEMORY_JOBS = ("source-noop", "binaryfile-noop")
TARGET_VS_BASELINE = 1.0  # baseline seconds / source seconds must exceed this
TARGET_VS_NOOP = 2.0  # source export seconds / source noop seconds must not exceed this
TARGET_FLAT = 1.25  # worker peak at the large single segment / at the small one


# =========================================================================== data

SMALL_TOPICS = (("orders", "NONE"), ("clicks", "LZ4"), ("payments", "ZSTD"), ("inventory", "SNAPPY"), ("audit", "GZIP"))
BASE_PRODUCER_ID = 5000


@dataclass
class SegmentPlan:
    log_dir: str  # relative to the dataset root
    topic: str
    partition: int
    codec: str
    base_offset: int
    first_template: int
    batches: int
    records: int
    file_bytes: int
    uncompressed_bytes: int
    first_timestamp: int
    producer_id: int

    @property
    def rel_path(self) -> str:
        return os.path.join(self.log_dir, f"{self.topic}-{self.partition}", f"{self.base_offset:020d}.log")


@dataclass
class DatasetPlan:
    name: str
    log_dirs: list[str]
    segments: list[SegmentPlan]
    seed: int
    generator_version: int = GENERATOR_VERSION

    @property
    def records(self) -> int:
        return sum(s.records for s in self.segments)

    @property
    def file_bytes(self) -> int:
        return sum(s.file_bytes for s in self.segments)

    @property
    def uncompressed_bytes(self) -> int:
        return sum(s.uncompressed_bytes for s in self.segments)

    def describe(self) -> str:
        parts = {(s.log_dir, s.topic, s.partition) for s in self.segments}
        return (f"{self.name}: {len(parts)} partitions, {len(self.segments)} segments, {self.file_bytes / MiB:.0f} MiB on disk"
                f" ({self.uncompressed_bytes / MiB:.0f} MiB of batches before compression), {self.records:,} records")


_TEMPLATES: dict[str, list] = {}


def templates(codec: str, seed: int) -> list[tuple[bytes, int, int, int]]:
    """gen_segment's 64 template batches for ``codec``: (bytes, records, max ts delta, uncompressed size)."""
    import gen_segment as gen
    from kafkatool.record.compression import Codec

    if codec not in _TEMPLATES:
        _TEMPLATES[codec] = gen._templates(gen.Variant(f"spark-{codec}", Codec[codec], False, 0), seed)
    return _TEMPLATES[codec]


def _plan_segment(log_dir, topic, partition, codec, base_offset, first, target_bytes, ts, pid, seed) -> SegmentPlan:
    tpl = templates(codec, seed)
    n = len(tpl)
    batches = records = file_bytes = raw = 0
    while True:
        data, count, _span, plain = tpl[(first + batches) % n]
        if batches and raw + plain > target_bytes:
            break
        batches += 1
        records += count
        file_bytes += len(data)
        raw += plain
    return SegmentPlan(log_dir, topic, partition, codec, base_offset, first, batches, records, file_bytes, raw, ts, pid)


def plan_dataset(name: str, seed: int) -> DatasetPlan:
    """``mixed-<MiB>m`` or ``single-<MiB>m`` (see the module docstring)."""
    import gen_segment as gen

    rng = random.Random(f"{seed}-{name}")
    kind, size = name.rsplit("-", 1)
    mib = int(size.rstrip("m"))
    segs: list[SegmentPlan] = []
    pid = BASE_PRODUCER_ID

    def partition(log_dir, topic, p, codec, sizes):
        nonlocal pid
        offset, ts = 0, gen.BASE_TIMESTAMP + rng.randrange(3_600_000)
        for size_bytes in sizes:
            s = _plan_segment(log_dir, topic, p, codec, offset, rng.randrange(gen.N_TEMPLATES), size_bytes, ts, pid, seed)
            segs.append(s)
            offset += s.records
            ts += s.batches * 40  # ~ what the template spans add; only monotonicity matters
        pid += 1

    if kind == "single":
        partition("logs", "single", 0, "NONE", [mib * MiB])
        return DatasetPlan(name, ["logs"], segs, seed)
    if kind != "mixed":
        raise ValueError(f"unknown dataset {name}")
    quick = mib < 512
    per_topic, lo, hi, large = (8, 1.0, 2.0, 32) if quick else (30, 1.0, 5.0, 256)
    for topic, codec in SMALL_TOPICS:
        for p in range(per_topic):
            count = 1 if quick or rng.random() < 0.8 else 2
            partition("small", topic, p, codec, [int(rng.uniform(lo, hi) * MiB) for _ in range(count)])
    partition("large", "firehose", 0, "NONE", [large * MiB])
    partition("large", "firehose", 1, "LZ4", [large * MiB])
    return DatasetPlan(name, ["small", "large"], segs, seed)


def _write_segment(path: str, seg: SegmentPlan, seed: int) -> None:
    """The segment's ``.log`` through a fixed buffer, its ``.index``/``.timeindex`` as Kafka's recovery builds them."""
    from kafkatool.record.crc import crc32c
    from kafkatool.segment.index import IndexBuilder

    tpl = templates(seg.codec, seed)
    n = len(tpl)
    q, qq, i32, u32 = struct.Struct(">q"), struct.Struct(">qq"), struct.Struct(">i"), struct.Struct(">I")
    limit = 8 * MiB
    buf = bytearray(limit + max(len(t[0]) for t in tpl))
    mv = memoryview(buf)
    index = IndexBuilder(seg.base_offset, path=path)
    offset, ts, seq, position = seg.base_offset, seg.first_timestamp, 0, 0
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        p = 0
        for b in range(seg.batches):
            data, count, span, _plain = tpl[(seg.first_template + b) % n]
            size = len(data)
            mv[p:p + size] = data
            q.pack_into(buf, p, offset)
            qq.pack_into(buf, p + 27, ts, ts + span)
            q.pack_into(buf, p + 43, seg.producer_id)
            i32.pack_into(buf, p + 53, seq)
            u32.pack_into(buf, p + 17, crc32c(mv[p + 21:p + size]))
            index.add_batch(position, size, offset + count - 1, ts + span)
            p += size
            position += size
            offset += count
            seq = (seq + count) & 0x7FFFFFFF
            ts += span + 1
            if p >= limit:
                f.write(mv[:p])
                p = 0
        f.write(mv[:p])
    if os.path.getsize(tmp) != seg.file_bytes:
        raise RuntimeError(f"{tmp}: wrote {os.path.getsize(tmp)} bytes, planned {seg.file_bytes}")
    idx, tidx = index.finish()
    stem = path[: -len(".log")]
    with open(stem + ".index", "wb") as f:
        f.write(idx)
    with open(stem + ".timeindex", "wb") as f:
        f.write(tidx)
    os.replace(tmp, path)


def ensure_dataset(root: str, name: str, seed: int, log) -> tuple[str, DatasetPlan]:
    """Generate dataset ``name`` under ``ROOT/spark/<name>`` unless it is there as planned; return (dir, plan)."""
    plan = plan_dataset(name, seed)
    base = os.path.join(root, "spark", name)
    meta_path = os.path.join(base, "bench-meta.json")
    want = asdict(plan)
    try:
        with open(meta_path) as f:
            same = json.load(f) == want
    except (OSError, ValueError):
        same = False
    if same and all(os.path.isfile(os.path.join(base, s.rel_path)) and os.path.getsize(os.path.join(base, s.rel_path)) == s.file_bytes
                    for s in plan.segments):
        log(f"  kept      {base}: {plan.describe()}")
        return base, plan
    t0 = time.perf_counter()
    if os.path.isdir(base):
        shutil.rmtree(base)
    for s in plan.segments:
        path = os.path.join(base, s.rel_path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _write_segment(path, s, seed)
    with open(meta_path, "w") as f:
        json.dump(want, f, indent=1)
        f.write("\n")
    log(f"  generated {base} in {time.perf_counter() - t0:.1f} s: {plan.describe()}")
    return base, plan


def warm(base: str) -> None:
    buf = bytearray(4 * MiB)
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            with open(os.path.join(dirpath, name), "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass


# =========================================================================== the job (child process)


def spark_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def export_parquet_options() -> dict[str, str]:
    """The Parquet writer options ``kafkatool spark export`` uses (``kafkatool.spark.session.writer_options``),
    of the kafkatool under test; {} for a kafkatool without that function."""
    try:
        from kafkatool.spark.session import writer_options
    except ImportError:
        return {}
    return dict(writer_options("parquet"))


def job_main(spec: dict) -> int:
    """Run one job in this (fresh) process and print its timings as one JSON line on stdout."""
    t0 = time.perf_counter()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(spec["master"]).appName(f"bench-spark-{spec['job']}")
    for k, v in spec["conf"].items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    t_session = time.perf_counter()
    job, paths, out = spec["job"], spec["paths"], spec.get("out")
    if job.startswith("source"):
        import kafkatool.spark

        kafkatool.spark.register(spark)
        reader = spark.read.format("kafka_segments")
        # as kafkatool spark export reads (kafkatool.spark.session.read): the session's default parallelism
        reader = reader.option("parallelism", str(spark.sparkContext.defaultParallelism))
        for k, v in spec.get("options", {}).items():
            reader = reader.option(k, v)
        df = reader.load(",".join(paths))
    else:
        import peer_spark_binaryfile as peer

        df = peer.load(spark, paths)
    t_plan = time.perf_counter()
    writer_options = export_parquet_options() if spec.get("parquet_options") is None else spec["parquet_options"]
    writer_options.update(spec.get("extra_parquet_options", {}))
    if job.endswith("noop"):
        writer_options = {}
        df.write.format("noop").mode("overwrite").save()
    else:
        df.write.mode("overwrite").options(**writer_options).partitionBy("topic", "partition").parquet(out)
    t_job = time.perf_counter()
    spark.stop()
    t_end = time.perf_counter()
    print("BENCH-JOB " + json.dumps({"session_s": t_session - t0, "plan_s": t_plan - t_session, "job_s": t_job - t_plan,
                                     "stop_s": t_end - t_job, "parquet_options": writer_options}), flush=True)
    return 0


CHECK_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
                 "segmentBaseOffset", "batchPosition", "batchBaseOffset", "magic", "codec", "leaderEpoch",
                 "producerId", "producerEpoch", "sequence", "isTransactional", "isControl", "crcValid", "error")


def check_main(spec: dict) -> int:
    """Read each Parquet output back: rows, a digest over every column but ``segment``, and one over ``segment``."""
    from pyspark.sql import SparkSession, functions as F

    builder = SparkSession.builder.master(spec["master"]).appName("bench-spark-check")
    for k, v in spec["conf"].items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    result = {}
    for name, path in spec["outputs"].items():
        df = spark.read.parquet(path)
        cols = [c for c in CHECK_COLUMNS if c in df.columns]
        missing = [c for c in CHECK_COLUMNS if c not in df.columns]
        row = df.agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum(F.xxhash64(*cols).cast("decimal(38,0)")).cast("string").alias("digest"),
            F.sum(F.xxhash64(F.regexp_replace("segment", "^file:", "")).cast("decimal(38,0)")).cast("string").alias("segments"),
            F.countDistinct("topic", "partition").alias("partitions"),
        ).first()
        result[name] = {**row.asDict(), "missing_columns": missing}
    spark.stop()
    print("BENCH-CHECK " + json.dumps(result), flush=True)
    return 0


# =========================================================================== measuring (this process)


class TreeSampler(threading.Thread):
    """Peak RSS of every process under ``root_pid``, by role, polled from /proc every ``interval`` s.

    Roles: ``jvm`` (comm ``java``), ``driver`` (the first Python process), ``worker`` (a Python
    process below the JVM: pyspark.daemon and the workers it forks). Per process the kernel's
    ``VmHWM`` (the exact peak, not only what a sample saw) is kept; for the workers also the
    largest sum of their ``VmRSS`` at one sample (forked workers share the daemon's pages, so
    the sum counts shared pages more than once: an upper bound).
    """

    def __init__(self, root_pid: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.root = root_pid
        self.interval = interval
        self.stop_event = threading.Event()
        self.ppid: dict[int, int] = {}
        self.role: dict[int, str] = {}
        self.hwm: dict[int, int] = {}  # KiB
        self.cmd: dict[int, str] = {}
        self.below: dict[int, bool] = {root_pid: True}
        self.cpu: dict[int, float] = {}  # user + system seconds, as last seen
        self.jvm_xmx: str | None = None
        self.args: dict[int, list[str]] = {}
        self.worker_sum_peak = 0
        self.samples = 0

    @staticmethod
    def _stat(pid: int) -> tuple[str, int, float] | None:
        """(comm, ppid, user + system CPU seconds) of ``pid``."""
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                s = f.read().decode("utf-8", "replace")
        except OSError:
            return None
        r = s.rfind(")")
        fields = s[r + 2:].split()
        return s[s.find("(") + 1:r], int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK_TCK

    @staticmethod
    def _mem(pid: int) -> tuple[int, int] | None:
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                hwm = rss = 0
                for line in f:
                    if line.startswith(b"VmHWM:"):
                        hwm = int(line.split()[1])
                    elif line.startswith(b"VmRSS:"):
                        rss = int(line.split()[1])
                        break
                return hwm, rss
        except (OSError, ValueError):
            return None

    def _below(self, pid: int) -> bool:
        """Whether ``pid`` is the job's process or one of its descendants (cached)."""
        if pid in self.below:
            return self.below[pid]
        chain, p, ans = [], pid, False
        while p in self.ppid:
            if p == self.root or self.below.get(p):
                ans = True
                break
            if p in self.below or p in (0, 1):
                break
            chain.append(p)
            p = self.ppid[p]
        for c in chain:
            self.below[c] = ans
        return ans

    def _role(self, pid: int, comm: str) -> str:
        if comm == "java":
            return "jvm"
        if not comm.startswith("python"):
            return "other"
        p = self.ppid.get(pid)
        while p is not None and p != self.root:
            if self.role.get(p) == "jvm":
                return "worker"
            p = self.ppid.get(p)
        return "driver"

    def poll(self) -> None:
        pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
        for pid in pids:
            if pid not in self.ppid:
                st = self._stat(pid)
                if st is not None:
                    self.ppid[pid] = st[1]
        total = 0
        for pid in sorted(pids):  # parents before children (pids grow; fine for a sampler)
            if pid not in self.ppid or not self._below(pid):
                continue
            st = self._stat(pid)  # comm changes at exec (bash -> java): read it every time
            m = self._mem(pid)
            if st is None or m is None:
                continue
            role = self.role[pid] = self._role(pid, st[0])
            if pid not in self.args and role in ("jvm", "worker"):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        self.args[pid] = f.read().decode("utf-8", "replace").split("\0")
                except OSError:
                    self.args[pid] = []
                args = self.args[pid]
                # the SparkSubmit JVM's heap (spark-class first runs a launcher JVM with -Xmx128m)
                if role == "jvm" and "org.apache.spark.launcher.Main" not in args and "org.apache.spark.deploy.SparkSubmit" in args:
                    self.jvm_xmx = next((a[4:] for a in args if a.startswith("-Xmx")), "default")
            self.cmd[pid] = st[0]
            self.cpu[pid] = max(self.cpu.get(pid, 0.0), st[2])
            self.hwm[pid] = max(self.hwm.get(pid, 0), m[0])
            if role == "worker":
                total += m[1]
        self.worker_sum_peak = max(self.worker_sum_peak, total)
        self.samples += 1

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.poll()
            self.stop_event.wait(self.interval)

    def summary(self) -> dict:
        def peak(role):
            v = [self.hwm[p] for p, r in self.role.items() if r == role and p in self.hwm]
            return round(max(v) / 1024, 1) if v else None

        def cpu(role):
            return round(sum(c for p, c in self.cpu.items() if self.role.get(p) == role), 2)

        workers = [p for p, r in self.role.items() if r == "worker" and p in self.hwm]
        kinds: dict[str, int] = {}  # Python processes by what they run: "pyspark.daemon pyspark.worker" etc.
        kind_peaks: dict[str, float] = {}  # the largest VmHWM (MiB) of each kind
        for p in workers:
            a = [x for x in self.args.get(p, []) if x and not x.startswith("-") and "/" not in x]
            kind = " ".join(a) or self.cmd.get(p, "?")
            kinds[kind] = kinds.get(kind, 0) + 1
            kind_peaks[kind] = max(kind_peaks.get(kind, 0.0), round(self.hwm[p] / 1024, 1))
        return {
            "worker_kinds": kinds,
            "worker_kind_peak_mib": kind_peaks,
            "jvm_xmx": self.jvm_xmx,
            "jvm_cpu_s": cpu("jvm"),
            "driver_cpu_s": cpu("driver"),
            "workers_cpu_s": cpu("worker"),
            "jvm_peak_mib": peak("jvm"),
            "driver_peak_mib": peak("driver"),
            "worker_peak_mib": peak("worker"),
            "workers_sum_peak_mib": round(self.worker_sum_peak / 1024, 1),
            "worker_processes": len(workers),
            "samples": self.samples,
        }


@dataclass
class Result:
    dataset: str
    job: str
    argv: list[str]
    whole_s: float
    job_s: float | None
    session_s: float | None
    exit_code: int
    memory: dict
    records: int
    file_bytes: int
    uncompressed_bytes: int
    user_s: float = 0.0  # wait4's rusage of the job's own process (the JVM is not in it: see memory[*_cpu_s])
    sys_s: float = 0.0
    stderr_tail: str = ""
    runs: list[dict] = field(default_factory=list)


def job_argv(job: str, paths: list[str], out: str, options: dict[str, str]) -> list[str]:
    if job == "cli-export":
        import bench_dump as bd

        extra = [a for k, v in EXTRA_CONF.items() for a in ("--conf", f"{k}={v}")]
        return [*bd.kafkatool_exe(), "spark", "export", *paths, "--to", out, "--format", "parquet", "--master", MASTER, *extra]
    spec = {"job": job, "paths": paths, "out": out, "master": MASTER, "conf": SESSION_CONF, "options": options,
            "parquet_options": PARQUET_OPTIONS, "extra_parquet_options": EXTRA_PARQUET_OPTIONS}
    return [sys.executable, os.path.abspath(__file__), "--job", json.dumps(spec)]


def run_measured(argv: list[str], env: dict, cwd: str) -> tuple[dict, str, str]:
    """Run ``argv``; wall time around spawn and reap, CPU from wait4, memory from a TreeSampler."""
    with open(os.devnull, "rb") as devnull:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=devnull, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        out_chunks: list[bytes] = []
        err_chunks: list[bytes] = []
        t_err = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True)
        t_err.start()
        out_chunks.append(proc.stdout.read())
        _pid, status, ru = os.wait4(proc.pid, 0)
        whole = time.perf_counter() - t0
        sampler.stop_event.set()
        sampler.join()
        t_err.join()
    rc = os.waitstatus_to_exitcode(status)
    return ({"whole_s": whole, "exit_code": rc, "user_s": ru.ru_utime, "sys_s": ru.ru_stime, "memory": sampler.summary()},
            b"".join(out_chunks).decode("utf-8", "replace"), b"".join(err_chunks).decode("utf-8", "replace"))


def parse_tagged(stdout: str, tag: str) -> dict | None:
    for line in stdout.splitlines():
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1:])
    return None


def fmt_table(results: list[Result]) -> str:
    head = (f"{'dataset':<12} {'job':<19} {'whole s':>8} {'job s':>7} {'start s':>7} {'Mrec/s':>7} {'JVM MiB':>8}"
            f" {'worker MiB':>10} {'workers sum':>11} {'driver MiB':>10} {'JVM CPU s':>9} {'workers CPU s':>13}")
    rows = [head, "-" * len(head)]
    last = None
    for r in results:
        if last is not None and r.dataset != last:
            rows.append("")
        m = r.memory
        f = lambda v, w, p=1: f"{v:{w}.{p}f}" if isinstance(v, (int, float)) else f"{'-':>{w}}"  # noqa: E731
        rate = r.records / r.job_s / 1e6 if r.job_s else None
        rows.append(f"{r.dataset if r.dataset != last else '':<12} {r.job + ('' if r.exit_code == 0 else ' (FAILED)'):<19}"
                    f" {f(r.whole_s, 8, 2)} {f(r.job_s, 7, 2)} {f(r.session_s, 7, 2)} {f(rate, 7, 2)}"
                    f" {f(m.get('jvm_peak_mib'), 8, 0)} {f(m.get('worker_peak_mib'), 10, 0)}"
                    f" {f(m.get('workers_sum_peak_mib'), 11, 0)} {f(m.get('driver_peak_mib'), 10, 0)}"
                    f" {f(m.get('jvm_cpu_s'), 9, 1)} {f(m.get('workers_cpu_s'), 13, 1)}")
        last = r.dataset
    return "\n".join(rows)


def ratios(results: list[Result], mixed: str) -> dict:
    by = {(r.dataset, r.job): r for r in results if r.exit_code == 0}
    out: dict = {}

    def value(r: Result, key: str):
        if key == "cpu_s":  # CPU seconds of the whole process tree: steadier than wall time on a shared machine
            m = r.memory
            parts = [m.get("jvm_cpu_s"), m.get("workers_cpu_s"), m.get("driver_cpu_s")]
            return sum(parts) if all(p is not None for p in parts) else None
        return getattr(r, key)

    def ratio(a, b, key):
        ra, rb = by.get((mixed, a)), by.get((mixed, b))
        if ra is None or rb is None or value(ra, key) is None or value(rb, key) is None:
            return None
        return round(value(ra, key) / value(rb, key), 3)

    for key in ("job_s", "whole_s", "cpu_s"):
        out[f"baseline_parquet_over_source_parquet_{key}"] = ratio("binaryfile-parquet", "source-parquet", key)
        out[f"source_parquet_over_source_noop_{key}"] = ratio("source-parquet", "source-noop", key)
        out[f"baseline_noop_over_source_noop_{key}"] = ratio("binaryfile-noop", "source-noop", key)
        out[f"cli_export_over_source_parquet_{key}"] = ratio("cli-export", "source-parquet", key)
    return out


def evaluate(results: list[Result], rat: dict, mixed: str, singles: tuple[str, str], quick: bool) -> list[dict]:
    t: list[dict] = []
    note = "--quick: ~128 MiB, not the issue's ~1 GiB" if quick else ""
    v = rat.get("baseline_parquet_over_source_parquet_job_s")
    t.append({"target": "export faster than binaryFile + mapInArrow (baseline s / source s > 1)", "dataset": mixed,
              "measured": v, "status": "n/a" if v is None else ("pass" if v > TARGET_VS_BASELINE else "FAIL"), "note": note})
    v = rat.get("source_parquet_over_source_noop_job_s")
    t.append({"target": f"export within {TARGET_VS_NOOP:g}x of the noop read (export s / noop s <= {TARGET_VS_NOOP:g})",
              "dataset": mixed, "measured": v,
              "status": "n/a" if v is None else ("pass" if v <= TARGET_VS_NOOP else "FAIL"), "note": note})
    by = {(r.dataset, r.job): r for r in results if r.exit_code == 0}
    small, large = (by.get((singles[0], "source-noop")), by.get((singles[1], "source-noop")))
    if small and large and small.memory.get("worker_peak_mib") and large.memory.get("worker_peak_mib"):
        a, b = small.memory["worker_peak_mib"], large.memory["worker_peak_mib"]
        t.append({"target": f"Python worker memory flat in the segment size (peak at {singles[1]} <= {TARGET_FLAT}x at {singles[0]})",
                  "dataset": f"{singles[0]} vs {singles[1]}", "measured": f"{a:.0f} MiB vs {b:.0f} MiB (x{b / a:.2f})",
                  "status": "pass" if b <= TARGET_FLAT * a else "FAIL", "note": ""})
    else:
        t.append({"target": "Python worker memory flat in the segment size", "dataset": f"{singles[0]} vs {singles[1]}",
                  "measured": None, "status": "n/a", "note": "source-noop did not run on both"})
    return t


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--job"]:
        return job_main(json.loads(argv[1]))
    if argv[:1] == ["--check-job"]:
        return check_main(json.loads(argv[1]))
    import bench_dump as bd
    import gen_segment as gen

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=gen.DEFAULT_ROOT, help=f"where the data lives (default {gen.DEFAULT_ROOT})")
    ap.add_argument("--quick", action="store_true", help="~128 MiB of segments, 16 vs 128 MiB for the memory check")
    ap.add_argument("--jobs", default=",".join(JOBS), help=f"comma separated subset of: {', '.join(JOBS)}")
    ap.add_argument("--memory-jobs", default=",".join(MEMORY_JOBS),
                    help="jobs run on the two single-segment datasets (empty: none)")
    ap.add_argument("--runs", type=int, default=1, help="timed runs per job, best kept (default 1), interleaved")
    ap.add_argument("--option", action="append", default=[], metavar="K=V", help="a kafka_segments option for the source jobs")
    ap.add_argument("--conf", action="append", default=[], metavar="K=V",
                    help="an extra Spark setting for every job's session (source and baseline alike)")
    ap.add_argument("--parquet-option", action="append", default=[], metavar="K=V",
                    help="a Parquet writer option for source-parquet and binaryfile-parquet alike, added to the export's")
    ap.add_argument("--plain-parquet", action="store_true",
                    help="Spark's default Parquet writer options instead of kafkatool spark export's (key/value dictionary off)")
    ap.add_argument("--no-check", action="store_true", help="skip reading the Parquet outputs back")
    ap.add_argument("--keep", action="store_true", help="keep the outputs under ROOT/spark/out")
    ap.add_argument("--live", action="store_true", help="run the working tree's kafkatool, not a snapshot taken at the start")
    ap.add_argument("--out", default=os.path.join(HERE, "out"), help="directory for the JSON report")
    ap.add_argument("--seed", type=int, default=gen.DEFAULT_SEED)
    args = ap.parse_args(argv)
    jobs = [j.strip() for j in args.jobs.split(",") if j.strip()]
    mem_jobs = [j.strip() for j in args.memory_jobs.split(",") if j.strip()]
    if bad := [j for j in jobs + mem_jobs if j not in JOBS]:
        ap.error(f"unknown job: {', '.join(bad)}")
    options = dict(o.split("=", 1) for o in args.option)
    EXTRA_CONF.update(dict(c.split("=", 1) for c in args.conf))
    global PARQUET_OPTIONS
    PARQUET_OPTIONS = {} if args.plain_parquet else None
    EXTRA_PARQUET_OPTIONS.update(dict(c.split("=", 1) for c in args.parquet_option))
    SESSION_CONF.update(EXTRA_CONF)
    root = os.path.abspath(args.root)
    started = _dt.datetime.now(_dt.timezone.utc)
    log = lambda *a: print(*a, flush=True)  # noqa: E731

    started_versions = bd.versions()
    snapshot = None if args.live else bd.snapshot_kafkatool(root)
    bd.set_child_env(root, snapshot)
    env = spark_env()
    env.update({k: v for k, v in bd.CHILD_ENV.items() if k in ("PYTHONPATH", "PYTHONPYCACHEPREFIX")})
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), HERE) if p)
    kt_location = bd.child_kafkatool_info()["location"]
    load = bd.announce_under_test(log, kt_location, started_versions, snapshot)
    if load is None:
        return 2

    mixed_name = "mixed-128m" if args.quick else "mixed-1024m"
    singles = ("single-16m", "single-128m") if args.quick else ("single-64m", "single-512m")
    log(f"data under {os.path.join(root, 'spark')}:")
    datasets = {}
    for name in (mixed_name, *(singles if mem_jobs else ())):
        datasets[name] = ensure_dataset(root, name, args.seed, log)

    plan_jobs = [(mixed_name, j) for j in jobs] + [(s, j) for s in (singles if mem_jobs else ()) for j in mem_jobs]
    out_root = os.path.join(root, "spark", "out")
    best: dict[tuple[str, str], Result] = {}
    for run in range(args.runs):
        for ds, job in plan_jobs:
            base, plan = datasets[ds]
            paths = [os.path.join(base, d) for d in plan.log_dirs]
            out = os.path.join(out_root, f"{ds}-{job}")
            shutil.rmtree(out, ignore_errors=True)
            warm(base)
            argv_ = job_argv(job, paths, out, options)
            m, stdout, stderr = run_measured(argv_, env, root)
            info = parse_tagged(stdout, "BENCH-JOB") or {}
            r = Result(ds, job, argv_ if job == "cli-export" else argv_[:3] + ["<spec>"], m["whole_s"], info.get("job_s"),
                       info.get("session_s"), m["exit_code"], dict(m["memory"]), plan.records, plan.file_bytes,
                       plan.uncompressed_bytes, m["user_s"], m["sys_s"], "" if m["exit_code"] == 0 else stderr[-3000:])
            r.runs.append({**m, **info})
            log(f"  run {run + 1} {ds:<12} {job:<19} whole {m['whole_s']:7.2f} s  job {info.get('job_s') or float('nan'):7.2f} s"
                f"  JVM {m['memory']['jvm_peak_mib']} MiB  worker {m['memory']['worker_peak_mib']} MiB"
                f" (sum {m['memory']['workers_sum_peak_mib']})" + ("" if m["exit_code"] == 0 else f"  EXIT {m['exit_code']}: {stderr.strip()[-600:]}"))
            prev = best.get((ds, job))
            if prev is None:
                best[(ds, job)] = r
            else:
                prev.runs.append(r.runs[0])
                key = lambda x: x.job_s if x.job_s is not None else x.whole_s  # noqa: E731
                if r.exit_code == 0 and (prev.exit_code != 0 or key(r) < key(prev)):
                    r.runs = prev.runs
                    best[(ds, job)] = r
                for k in ("jvm_peak_mib", "worker_peak_mib", "workers_sum_peak_mib", "driver_peak_mib"):
                    vals = [x["memory"].get(k) for x in best[(ds, job)].runs if x["memory"].get(k) is not None]
                    best[(ds, job)].memory[k] = max(vals) if vals else None
    results = [best[k] for k in plan_jobs if k in best]

    checks: dict = {"skipped": True}
    if not args.no_check:
        outputs = {j: os.path.join(out_root, f"{mixed_name}-{j}") for j in jobs if j.endswith("parquet") or j == "cli-export"}
        ok_jobs = {r.job for r in results if r.dataset == mixed_name and r.exit_code == 0}
        outputs = {j: p for j, p in outputs.items() if os.path.isdir(p) and j in ok_jobs}
        if outputs:
            t0 = time.perf_counter()
            spec = {"master": MASTER, "conf": SESSION_CONF, "outputs": outputs}
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--check-job", json.dumps(spec)], env=env, cwd=root,
                                  capture_output=True, text=True)
            got = parse_tagged(proc.stdout, "BENCH-CHECK")
            want = datasets[mixed_name][1].records
            if got is None:
                checks = {"ok": False, "error": proc.stderr[-2000:]}
            else:
                digests = {v["digest"] for v in got.values()}
                ok = all(v["rows"] == want and not v["missing_columns"] for v in got.values()) and len(digests) == 1
                checks = {"ok": ok, "expected_rows": want, "outputs": got, "same_digest": len(digests) == 1,
                          "same_segment_digest": len({v["segments"] for v in got.values()}) == 1}
            log(f"  check: {'ok' if checks.get('ok') else 'FAILED'} in {time.perf_counter() - t0:.1f} s: {json.dumps(checks)[:800]}")
    if not args.keep:
        shutil.rmtree(out_root, ignore_errors=True)

    rat = ratios(results, mixed_name)
    targets = evaluate(results, rat, mixed_name, singles, args.quick)
    print()
    print(f"kafka_segments vs binaryFile + mapInArrow on {MASTER}: fresh process per job, best of {args.runs}")
    for name, (_b, plan) in datasets.items():
        print(f"  {plan.describe()}")
    print("whole s = spawn to reap (JVM start included); job s = the write action alone; start s = SparkSession start;")
    print("Mrec/s over job s; memory = peak RSS (VmHWM) of the JVM, the largest Python worker, the largest sum over workers at one")
    print("sample (shared pages counted in each), and the driver's Python")
    print()
    print(fmt_table(results))
    print()
    print("ratios (same run):")
    for k, v in rat.items():
        if v is not None:
            print(f"  {k:<48} x{v:.2f}")
    print()
    print("targets (from the issue):")
    for t in targets:
        print(f"  [{t['status']:>4}] {t['target']}: {t['dataset']} -> {t['measured']}" + (f"  ({t['note']})" if t["note"] else ""))
    if not args.no_check:
        print(f"check: {'passed' if checks.get('ok') else 'FAILED'} (Parquet outputs read back: rows = generated records,"
              " one digest over every column for all outputs)")
    end_source = bd.note_source_change(started_versions, snapshot)

    os.makedirs(args.out, exist_ok=True)
    out_path = os.path.join(args.out, f"spark-{started.strftime('%Y%m%d-%H%M%S')}.json")
    report = {
        "benchmark": "kafkatool spark (kafka_segments) vs binaryFile + mapInArrow",
        "started_utc": started.isoformat(timespec="seconds"),
        "elapsed_s": round((_dt.datetime.now(_dt.timezone.utc) - started).total_seconds(), 1),
        "quick": args.quick,
        "runs": args.runs,
        "master": MASTER,
        "session_conf": SESSION_CONF,
        "parquet_options": "Spark's defaults" if PARQUET_OPTIONS == {} else "kafkatool spark export's (see results[].runs[].parquet_options)",
        "extra_parquet_options": EXTRA_PARQUET_OPTIONS,
        "source_options": options,
        "machine": bd.machine_info(),
        "load_average_at_start": load,
        "versions": {**started_versions, **_spark_versions()},
        "kafkatool_under_test": kt_location,
        "kafkatool_source_at_end": end_source,
        "datasets": {n: {"dir": b, "log_dirs": p.log_dirs, "partitions": len({(s.log_dir, s.topic, s.partition) for s in p.segments}),
                         "segments": len(p.segments), "records": p.records, "file_bytes": p.file_bytes,
                         "uncompressed_bytes": p.uncompressed_bytes} for n, (b, p) in datasets.items()},
        "results": [asdict(r) for r in results],
        "ratios": rat,
        "targets": targets,
        "checks": checks,
    }
    with open(out_path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"\nJSON report: {os.path.relpath(out_path)}")
    ok = all(r.exit_code == 0 for r in results) and (args.no_check or checks.get("ok", False))
    return 0 if ok else 1


def _spark_versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("pyspark", "pyarrow", "pandas", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    try:
        out["java"] = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    except (OSError, IndexError):
        out["java"] = None
    return out


if __name__ == "__main__":
    sys.exit(main())
