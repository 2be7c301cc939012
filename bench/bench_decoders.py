"""Benchmark kafkatool's internal-topic decoders: ``kafkatool dump --offsets-decoder`` and
``--cluster-metadata-decoder`` over a 256 MiB segment of each topic.

Usage::

    python bench/bench_decoders.py              # 256 MiB segments, best of 3, whole process
    python bench/bench_decoders.py --quick      # 32 MiB segments, 1 run: a smoke check
    python bench/bench_decoders.py --mib 64 --runs 5 --topics offsets

The segments (outside the repository, default ``/tmp/kafkatool-bench/decoders``):

- ``__consumer_offsets-0``: what a group coordinator writes for a busy cluster: one batch per
  OffsetCommit request (1-30 partitions of a group's topics, OffsetCommitKey v1 + OffsetCommitValue
  v3, some v1 with an expire timestamp, an empty or short metadata string), GroupMetadata records
  (GroupMetadataKey + GroupMetadataValue v3, protocolType ``consumer``, 1-24 members whose
  subscription and assignment are ConsumerProtocolSubscription v1-v3 / ConsumerProtocolAssignment
  v0-v3 payloads of 1-6 topics) after rebalances, and tombstones of expired offsets and groups;
- ``__cluster_metadata-0``: a KRaft controller's log: batches of 1-20 records, null keys, values
  framed as spec §14.3 (uvarint frame version 1, apiKey, version, then the record), a mix of
  PartitionChangeRecord, PartitionRecord, TopicRecord, ConfigRecord, RegisterBrokerRecord,
  BrokerRegistrationChangeRecord, Fence/UnfenceBrokerRecord, ProducerIdsRecord,
  FeatureLevelRecord and NoOpRecord.

Both are written with kafkatool's encoders (``kafkatool.record.message.encode`` for the
messages, ``kafkatool.record.v2.encode_batch`` for the batches): a seeded generator builds
template batches once, and the file cycles them with a new baseOffset, timestamps and CRC-32C
per copy (as ``gen_segment.py`` does), so a 256 MiB file takes seconds.

Measured, whole process (start-up, imports, reading, output to ``/dev/null``), interleaved
run by run, page cache re-read before each run, best of ``--runs``:

- ``kafkatool dump --offsets-decoder FILE`` / ``--cluster-metadata-decoder FILE``;
- ``kafkatool dump --print-data-log FILE``: the plain deep dump of the same file;
- ``peer_aiokafka.py --deep-iteration --print-data-log FILE``: aiokafka's plain dump (no decoding
  exists there; for context).

It reports records/s and the ratios decoder / plain and decoder / aiokafka (seconds over
seconds: above 1 the decoder dump is slower). Before timing, each decoder dump runs once with
its output read back: the line count must be 2 + batches + records, the exit status 0 and no
record line may say ``Error``/``Unknown``. An in-process figure (``Segment.records()`` and
``kafkatool.record.topics.decoder(name)`` per record, no text written) shows the decoder's own
share. When ``kafkatool dump`` has no decoder flags yet, only the in-process figures are taken.
The JSON report goes to ``bench/out/decoders-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import base64
import datetime as _dt
import hashlib
import json
import os
import random
import struct
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

import bench_dump as bd

from kafkatool.record import message
from kafkatool.record.crc import crc32c
from kafkatool.record.schemas import MESSAGES
from kafkatool.record.v2 import RecordSpec, encode_batch
from kafkatool.record.varint import encode_uvarint

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MiB = 1 << 20
DEFAULT_ROOT = os.path.join(os.environ.get("KAFKATOOL_BENCH_DIR", "/tmp/kafkatool-bench"), "decoders")
SEGMENT_NAME = "00000000000000000000.log"
GENERATOR_VERSION = 1
DEFAULT_SEED = 20261126
N_TEMPLATES = 512
BASE_TIMESTAMP = 1_764_000_000_000  # 2025-11-24
FULL_MIB = 256
QUICK_MIB = 32

TOPICS = {
    "offsets": ("__consumer_offsets-0", "--offsets-decoder"),
    "cluster-metadata": ("__cluster_metadata-0", "--cluster-metadata-decoder"),
}

# Header fields a copy changes (spec §4.1).
_BASE_OFFSET_AT = 0
_CRC_AT = 17
_CRC_START = 21
_TIMESTAMPS_AT = 27
_Q = struct.Struct(">q")
_QQ = struct.Struct(">qq")
_U = struct.Struct(">I")
_H = struct.Struct(">h")


# --------------------------------------------------------------------------- __consumer_offsets


def _uuid(rng: random.Random) -> str:
    """A Kafka Uuid as the codec takes it: base64url, no padding."""
    return base64.urlsafe_b64encode(rng.getrandbits(128).to_bytes(16, "big")).rstrip(b"=").decode()


_SERVICES = ("billing", "checkout", "search", "fraud", "shipping", "ledger", "notify", "recs", "audit", "etl")
_DOMAINS = ("orders", "payments", "clicks", "inventory", "users", "sessions", "invoices", "alerts")


def _offsets_world(rng: random.Random) -> list[dict]:
    """Consumer groups, each with its topics and partition counts."""
    topics = [(f"{rng.choice(_DOMAINS)}.{rng.choice(('events', 'changes', 'commands'))}.v{rng.randint(1, 4)}-{i}",
               rng.choice((6, 12, 24, 32, 48, 64))) for i in range(300)]
    groups = []
    for i in range(240):
        svc = rng.choice(_SERVICES)
        groups.append({
            "group": f"{svc}-consumer-{i:03d}",
            "topics": rng.sample(topics, rng.choice((1, 1, 2, 3, 4, 6))),
            "members": rng.choice((1, 2, 3, 4, 6, 8, 12, 16, 24)),
            "svc": svc,
        })
    return groups


def _subscription(rng: random.Random, group: dict, member: int) -> bytes:
    version = rng.choice((1, 2, 3, 3))
    topics = [t for t, _n in group["topics"]]
    owned = [{"Topic": t, "Partitions": [p for p in range(n) if p % group["members"] == member]} for t, n in group["topics"]]
    value = {"Topics": topics, "UserData": None, "OwnedPartitions": owned, "GenerationId": rng.randint(1, 500),
             "RackId": rng.choice((None, "eu-west-1a", "eu-west-1b"))}
    return _H.pack(version) + message.encode("ConsumerProtocolSubscription", value, version)


def _assignment(rng: random.Random, group: dict, member: int) -> bytes:
    version = rng.choice((0, 1, 3))
    parts = [{"Topic": t, "Partitions": [p for p in range(n) if p % group["members"] == member]} for t, n in group["topics"]]
    return _H.pack(version) + message.encode("ConsumerProtocolAssignment", {"AssignedPartitions": parts, "UserData": None}, version)


def _group_metadata(rng: random.Random, group: dict, ts: int) -> tuple[bytes, bytes | None]:
    key = _H.pack(2) + message.encode("GroupMetadataKey", {"group": group["group"]}, 2)
    if rng.random() < 0.02:
        return key, None  # the group expired: tombstone
    members = []
    for m in range(group["members"]):
        mid = f"consumer-{group['svc']}-{m}-{_uuid(rng)}"
        members.append({
            "memberId": mid, "groupInstanceId": None, "clientId": f"consumer-{group['svc']}-{m}",
            "clientHost": f"/10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
            "rebalanceTimeout": 300000, "sessionTimeout": 45000,
            "subscription": _subscription(rng, group, m), "assignment": _assignment(rng, group, m),
        })
    value = {"protocolType": "consumer", "generation": rng.randint(1, 900),
             "protocol": rng.choice(("range", "cooperative-sticky", "roundrobin")),
             "leader": members[0]["memberId"], "currentStateTimestamp": ts, "members": members}
    return key, _H.pack(3) + message.encode("GroupMetadataValue", value, 3)


def _offset_commit(rng: random.Random, group: dict, topic: str, partition: int, ts: int) -> tuple[bytes, bytes | None]:
    key = _H.pack(1) + message.encode("OffsetCommitKey", {"group": group["group"], "topic": topic, "partition": partition}, 1)
    if rng.random() < 0.005:
        return key, None  # an expired offset: tombstone
    version = 3 if rng.random() < 0.9 else 1
    value = {"offset": rng.randint(0, 1 << 34), "leaderEpoch": rng.randint(0, 40), "metadata": rng.choice(("", "", "", "ok")),
             "commitTimestamp": ts, "expireTimestamp": ts + 604_800_000}
    return key, _H.pack(version) + message.encode("OffsetCommitValue", value, version)


def offsets_templates(seed: int) -> list[tuple[bytes, int, int]]:
    """``(batch bytes, records, max timestamp delta)`` per template (baseOffset 0, baseTimestamp 0)."""
    rng = random.Random(seed)
    world = _offsets_world(rng)
    out = []
    for _ in range(N_TEMPLATES):
        group = rng.choice(world)
        recs: list[tuple[bytes, bytes | None]] = []
        ts = 0
        if rng.random() < 0.08:
            recs.append(_group_metadata(rng, group, BASE_TIMESTAMP))
        else:
            pairs = [(t, p) for t, n in group["topics"] for p in range(n)]
            for t, p in rng.sample(pairs, min(len(pairs), rng.choice((1, 2, 4, 8, 12, 16, 24, 30)))):
                recs.append(_offset_commit(rng, group, t, p, BASE_TIMESTAMP))
        specs = [RecordSpec(i, ts, k, v) for i, (k, v) in enumerate(recs)]
        out.append((encode_batch(specs, base_offset=0), len(specs), 0))
    return out


# --------------------------------------------------------------------------- __cluster_metadata


def _frame(name: str, value: dict, version: int) -> bytes:
    """Spec §14.3: uvarint frame version (1), apiKey, version, then the message."""
    head = bytes([1]) + encode_uvarint(MESSAGES[name]["apiKey"]) + encode_uvarint(version)
    return head + message.encode(name, value, version)


def _metadata_record(rng: random.Random, topics: list[tuple[str, str, int]], brokers: int) -> bytes:
    kind = rng.random()
    name, tid, nparts = rng.choice(topics)
    replicas = rng.sample(range(1, brokers + 1), 3)
    if kind < 0.34:
        isr = replicas[: rng.randint(1, 3)]
        value = {"PartitionId": rng.randrange(nparts), "TopicId": tid, "Isr": isr, "Leader": isr[0]}
        if rng.random() < 0.3:
            value["LeaderRecoveryState"] = 0
        return _frame("PartitionChangeRecord", value, rng.choice((0, 1)))
    if kind < 0.56:
        version = rng.choice((0, 1))
        value = {"PartitionId": rng.randrange(nparts), "TopicId": tid, "Replicas": replicas, "Isr": replicas,
                 "RemovingReplicas": [], "AddingReplicas": [], "Leader": replicas[0], "LeaderRecoveryState": 0,
                 "LeaderEpoch": rng.randint(0, 30), "PartitionEpoch": rng.randint(0, 60)}
        if version >= 1:
            value["Directories"] = [_uuid(rng) for _ in replicas]
        return _frame("PartitionRecord", value, version)
    if kind < 0.62:
        return _frame("TopicRecord", {"Name": name, "TopicId": tid}, 0)
    if kind < 0.72:
        cfg = rng.choice((("retention.ms", str(rng.choice((86400000, 604800000, -1)))), ("cleanup.policy", "compact"),
                          ("min.insync.replicas", "2"), ("segment.bytes", "1073741824"), ("compression.type", "lz4")))
        return _frame("ConfigRecord", {"ResourceType": 2, "ResourceName": name, "Name": cfg[0], "Value": cfg[1]}, 0)
    if kind < 0.76:
        b = rng.randint(1, brokers)
        value = {
            "BrokerId": b, "IncarnationId": _uuid(rng), "BrokerEpoch": rng.randint(1, 1 << 20),
            "EndPoints": [{"Name": "PLAINTEXT", "Host": f"kafka-{b}.kafka.svc", "Port": 9092, "SecurityProtocol": 0},
                          {"Name": "SSL", "Host": f"kafka-{b}.kafka.svc", "Port": 9093, "SecurityProtocol": 1}],
            "Features": [{"Name": "metadata.version", "MinSupportedVersion": 1, "MaxSupportedVersion": 21},
                         {"Name": "kraft.version", "MinSupportedVersion": 0, "MaxSupportedVersion": 1}],
            "Rack": rng.choice((None, "eu-west-1a")), "Fenced": True,
        }
        return _frame("RegisterBrokerRecord", value, rng.choice((1, 2, 3)))
    if kind < 0.81:
        return _frame("BrokerRegistrationChangeRecord", {"BrokerId": rng.randint(1, brokers), "BrokerEpoch": rng.randint(1, 1 << 20),
                                                         "Fenced": rng.choice((0, 1)), "InControlledShutdown": 0}, 1)
    if kind < 0.86:
        which = rng.choice(("FenceBrokerRecord", "UnfenceBrokerRecord"))
        return _frame(which, {"Id": rng.randint(1, brokers), "Epoch": rng.randint(1, 1 << 20)}, 0)
    if kind < 0.89:
        return _frame("ProducerIdsRecord", {"BrokerId": rng.randint(1, brokers), "BrokerEpoch": rng.randint(1, 1 << 20),
                                            "NextProducerId": rng.randint(0, 1 << 30)}, 0)
    if kind < 0.90:
        return _frame("FeatureLevelRecord", {"Name": "metadata.version", "FeatureLevel": rng.randint(7, 21)}, 0)
    return _frame("NoOpRecord", {}, 0)


def metadata_templates(seed: int) -> list[tuple[bytes, int, int]]:
    rng = random.Random(seed)
    brokers = 12
    topics = [(f"{rng.choice(_DOMAINS)}.{rng.choice(('events', 'changes'))}-{i}", _uuid(rng), rng.choice((3, 6, 12, 24, 48)))
              for i in range(400)]
    out = []
    for _ in range(N_TEMPLATES):
        n = rng.choice((1, 1, 1, 2, 3, 5, 8, 12, 20))
        specs = [RecordSpec(i, i, None, _metadata_record(rng, topics, brokers)) for i in range(n)]
        out.append((encode_batch(specs, base_offset=0, partition_leader_epoch=rng.randint(1, 9)), n, n - 1))
    return out


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class Segment:
    topic: str
    path: str
    target_mib: int
    batches: int
    records: int
    file_bytes: int
    seed: int
    generator_version: int = GENERATOR_VERSION


def ensure_segment(root: str, topic: str, mib: int, seed: int, log) -> Segment:
    make = offsets_templates if topic == "offsets" else metadata_templates
    templates = make(seed)
    batches = records = size = 0
    while size + len(templates[batches % len(templates)][0]) <= mib * MiB:
        data, count, _span = templates[batches % len(templates)]
        size += len(data)
        records += count
        batches += 1
    path = os.path.join(root, f"{TOPICS[topic][0]}-{mib}m", TOPICS[topic][0], SEGMENT_NAME)
    seg = Segment(topic, path, mib, batches, records, size, seed)
    meta = os.path.join(os.path.dirname(os.path.dirname(path)), "bench-meta.json")
    try:
        with open(meta) as f:
            same = json.load(f) == asdict(seg)
    except (OSError, ValueError):
        same = False
    if same and os.path.isfile(path) and os.path.getsize(path) == size:
        log(f"  kept      {path} ({size / MiB:.1f} MiB, {records:,} records, {batches:,} batches)")
        return seg
    os.makedirs(os.path.dirname(path), exist_ok=True)
    t0 = time.perf_counter()
    tmp = path + ".tmp"
    buf = bytearray()
    offset, ts, written = 0, BASE_TIMESTAMP, 0
    with open(tmp, "wb") as f:
        for i in range(batches):
            data, count, span = templates[i % len(templates)]
            p = len(buf)
            buf += data
            _Q.pack_into(buf, p + _BASE_OFFSET_AT, offset)
            _QQ.pack_into(buf, p + _TIMESTAMPS_AT, ts, ts + span)
            _U.pack_into(buf, p + _CRC_AT, crc32c(memoryview(buf)[p + _CRC_START:]))
            offset += count
            ts += span + 1
            if len(buf) >= 8 * MiB:
                f.write(buf)
                written += len(buf)
                buf = bytearray()
        f.write(buf)
        written += len(buf)
    if written != size:
        raise RuntimeError(f"{tmp}: wrote {written} bytes, planned {size}")
    os.replace(tmp, path)
    with open(meta, "w") as f:
        json.dump(asdict(seg), f, indent=2)
        f.write("\n")
    log(f"  generated {path} ({size / MiB:.1f} MiB, {records:,} records, {batches:,} batches) in {time.perf_counter() - t0:.1f} s")
    return seg


# --------------------------------------------------------------------------- measuring


def has_decoder_flags() -> bool:
    r = subprocess.run([*bd.kafkatool_exe(), "dump", "--help"], capture_output=True, text=True, env=bd.CHILD_ENV, cwd=bd.CHILD_CWD)
    return "--offsets-decoder" in r.stdout and "--cluster-metadata-decoder" in r.stdout


def commands(seg: Segment) -> dict[str, list[str]]:
    flag = TOPICS[seg.topic][1]
    return {
        "kafkatool-decoder": [*bd.kafkatool_exe(), "dump", flag, seg.path],
        "kafkatool-plain": [*bd.kafkatool_exe(), "dump", "--print-data-log", seg.path],
        "aiokafka-plain": [*bd.python_cmd(), os.path.join(HERE, "peer_aiokafka.py"), "--deep-iteration", "--print-data-log", seg.path],
    }


_IN_PROCESS = """
import json, sys, time
from kafkatool.segment.logdir import Segment
from kafkatool.record import topics
name, path = sys.argv[1], sys.argv[2]
dec = topics.decoder(name)
best = None
for _ in range(int(sys.argv[3])):
    t0 = time.perf_counter()
    n = errors = 0
    for r in Segment.at(path).records():
        d = dec(r.key, r.value, r.offset)
        n += 1
        errors += d.error is not None
    t = time.perf_counter() - t0
    best = t if best is None else min(best, t)
t0 = time.perf_counter()
m = sum(1 for _ in Segment.at(path).records())
walk = time.perf_counter() - t0
print(json.dumps({"records": n, "errors": errors, "seconds": best, "walk_seconds": walk}))
"""


def in_process(seg: Segment, runs: int) -> dict:
    out = subprocess.run([*bd.python_cmd(), "-c", _IN_PROCESS, seg.topic, seg.path, str(runs)], capture_output=True, text=True,
                         env=bd.CHILD_ENV, cwd=bd.CHILD_CWD)
    if out.returncode != 0:
        return {"error": out.stderr.strip()[-500:]}
    return json.loads(out.stdout)


def check_decoder_output(seg: Segment, cmd: list[str]) -> dict:
    """Run once with the output read back: line count, exit status, no error lines."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=bd.CHILD_ENV, cwd=bd.CHILD_CWD)
    lines = bad = 0
    digest = hashlib.sha256()
    sample = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines += 1
        digest.update(line)
        if line.startswith(b"| offset:") and (b"Error" in line or b"Unknown" in line or b" error: " in line):
            bad += 1
        if len(sample) < 3 and line.startswith(b"| offset:"):
            sample.append(line.decode("utf-8", "replace")[:300])
    err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    code = proc.wait()
    expected = 2 + seg.batches + seg.records
    ok = code == 0 and lines == expected and bad == 0
    return {"ok": ok, "exit_code": code, "lines": lines, "expected_lines": expected, "error_lines": bad,
            "sha256": digest.hexdigest(), "stderr": err[-500:], "sample": sample}


@dataclass
class Row:
    topic: str
    tool: str
    seconds: float
    max_rss_mib: float
    records_per_s: float
    runs: list[dict] = field(default_factory=list)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=DEFAULT_ROOT, help=f"where the segments live (default {DEFAULT_ROOT})")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_MIB} MiB segments and 1 run")
    ap.add_argument("--mib", type=int, help=f"segment size in MiB (default {FULL_MIB})")
    ap.add_argument("--runs", type=int, help="timed runs per command, best kept (default 3; 1 with --quick)")
    ap.add_argument("--topics", default=",".join(TOPICS), help=f"comma separated subset of: {', '.join(TOPICS)}")
    ap.add_argument("--live", action="store_true", help="run the working tree's kafkatool, not a snapshot taken at the start")
    ap.add_argument("--out", default=os.path.join(HERE, "out"), help="directory for the JSON report")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = ap.parse_args(argv)
    runs = args.runs if args.runs is not None else (1 if args.quick else 3)
    mib = args.mib or (QUICK_MIB if args.quick else FULL_MIB)
    chosen = [t.strip() for t in args.topics.split(",") if t.strip()]
    if bad := [t for t in chosen if t not in TOPICS]:
        ap.error(f"unknown topic(s): {', '.join(bad)}")
    root = os.path.abspath(args.root)
    bench_root = os.path.dirname(root)
    log = lambda *a: print(*a, flush=True)  # noqa: E731
    started = _dt.datetime.now()

    started_versions = bd.versions()
    snapshot = None if args.live else bd.snapshot_kafkatool(bench_root)
    bd.set_child_env(bench_root, snapshot)
    kt_info = bd.child_kafkatool_info()
    load = bd.announce_under_test(log, kt_info["location"], started_versions, snapshot)
    if load is None:
        return 2
    whole = has_decoder_flags()
    if not whole:
        log("note: this kafkatool's dump has no --offsets-decoder/--cluster-metadata-decoder yet: in-process figures only")

    log(f"segments under {root}:")
    segments = [ensure_segment(root, t, mib, args.seed, log) for t in chosen]

    checks: dict = {}
    rows: list[Row] = []
    inproc: dict = {}
    for seg in segments:
        bd.warm_cache(seg.path)
        inproc[seg.topic] = in_process(seg, runs)
        ip = inproc[seg.topic]
        if "error" in ip:
            log(f"  {seg.topic}: in-process run failed: {ip['error']}")
        else:
            log(f"  {seg.topic:<17} in-process: decode {ip['records'] / ip['seconds']:,.0f} records/s"
                f" ({ip['seconds']:.2f} s for {ip['records']:,}, {ip['errors']} errors; the walk alone {ip['walk_seconds']:.2f} s)")
        if not whole:
            continue
        cmds = commands(seg)
        checks[seg.topic] = check_decoder_output(seg, cmds["kafkatool-decoder"])
        c = checks[seg.topic]
        log(f"  {seg.topic:<17} check: {'ok' if c['ok'] else 'FAILED'} ({c['lines']:,} lines, expected {c['expected_lines']:,},"
            f" {c['error_lines']} error lines, exit {c['exit_code']})")
        for tool, cmd in cmds.items():  # untimed: bytecode caches
            bd.run_process(cmd)
        best: dict[str, Row] = {}
        for _ in range(runs):
            for tool, cmd in cmds.items():
                bd.warm_cache(seg.path)
                run, _l, _h = bd.run_process(cmd)
                if run.exit_code != 0:
                    log(f"  {tool} exited {run.exit_code}: {run.stderr.strip()[-300:]}")
                r = best.setdefault(tool, Row(seg.topic, tool, run.seconds, run.max_rss_mib, 0.0))
                r.runs.append(asdict(run))
                r.seconds = min(r.seconds, run.seconds)
                r.max_rss_mib = max(r.max_rss_mib, run.max_rss_mib)
        for tool, r in best.items():
            r.records_per_s = seg.records / r.seconds
            rows.append(r)
            log(f"  {seg.topic:<17} {tool:<18} {r.seconds:8.3f} s {r.max_rss_mib:8.1f} MiB {r.records_per_s:12,.0f} records/s")

    print()
    print(f"internal-topic decoders — {mib} MiB segments, whole process, best of {runs}, page-cached, output to /dev/null")
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} CPUs")
    ratios: dict = {}
    for seg in segments:
        ip = inproc.get(seg.topic, {})
        print(f"\n{TOPICS[seg.topic][0]} ({seg.file_bytes / MiB:.0f} MiB, {seg.records:,} records, {seg.batches:,} batches)")
        if "seconds" in ip:
            print(f"  in process, decode only: {ip['records'] / ip['seconds']:12,.0f} records/s  ({ip['seconds']:.2f} s)")
        by = {r.tool: r for r in rows if r.topic == seg.topic}
        for tool in ("kafkatool-decoder", "kafkatool-plain", "aiokafka-plain"):
            if tool in by:
                r = by[tool]
                print(f"  {tool:<18} {r.seconds:8.3f} s {r.max_rss_mib:8.1f} MiB {r.records_per_s:12,.0f} records/s")
        if "kafkatool-decoder" in by:
            dec = by["kafkatool-decoder"].seconds
            ratios[seg.topic] = {
                "decoder_over_plain": dec / by["kafkatool-plain"].seconds,
                "decoder_over_aiokafka_plain": dec / by["aiokafka-plain"].seconds,
            }
            print(f"  decoder dump / plain --print-data-log: x{ratios[seg.topic]['decoder_over_plain']:.2f} the time;"
                  f" / aiokafka's plain dump: x{ratios[seg.topic]['decoder_over_aiokafka_plain']:.2f}")
    checks_ok = all(c["ok"] for c in checks.values())
    if checks:
        print(f"\nchecks: {'all passed' if checks_ok else 'FAILED'} (line counts, exit status, no error lines)")

    os.makedirs(args.out, exist_ok=True)
    out_path = os.path.join(args.out, f"decoders-{started.strftime('%Y%m%d-%H%M%S')}.json")
    report = {
        "benchmark": "kafkatool dump internal-topic decoders",
        "started": started.isoformat(timespec="seconds"),
        "elapsed_s": round((_dt.datetime.now() - started).total_seconds(), 1),
        "runs": runs,
        "whole_process": whole,
        "machine": bd.machine_info(),
        "load_average_at_start": load,
        "versions": started_versions,
        "kafkatool_under_test": kt_info["location"],
        "segments": [asdict(s) for s in segments],
        "in_process": inproc,
        "results": [asdict(r) for r in rows],
        "ratios": ratios,
        "checks": checks,
    }
    with open(out_path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"\nJSON report: {os.path.relpath(out_path)}")
    return 0 if checks_ok else 1


if __name__ == "__main__":
    sys.exit(main())
