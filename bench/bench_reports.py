"""Benchmark the offline reports ``kafkatool groups``, ``transactions`` and ``metadata``
against the floor of reading the same bytes, at two sizes (memory must stay flat).

Usage::

    python bench/bench_reports.py --quick      # small log dirs, 1 run: a smoke check (~1 min)
    python bench/bench_reports.py              # full sizes, best of 3 (~5 min, + ~40 s to generate the data once)
    python bench/bench_reports.py --reports groups,metadata --runs 5 --sizes large

No other tool makes these reports, so each is measured against kafkatool's own readers of
the same log dir in the same run (see ``bench/README-reports.md``):

- ``kafkatool stats -q``: the shallow floor (every batch header, a control batch's marker);
- ``kafkatool dump --offsets-decoder`` / ``--cluster-metadata-decoder``: the deep floor for
  ``groups``/``metadata`` (every record read and decoded by the same internal-topic decoder,
  printed as kafka-dump-log's text to /dev/null). ``transactions`` reads only batch headers
  and markers of data partitions (and decodes ``__transaction_state``), so ``stats`` is its floor.

Each report runs with ``--format table`` and ``--format jsonl``; ``groups`` also with ``--group`` (one
group of 300).

The log dirs are generated once with kafkatool's encoders (``tests/topicdata.py``'s builders of
coordinator records, ``kafkatool.record.v2.encode_batch``, ``kafkatool.record.control``; the
KRaft framing as in ``tests/test_metadata_report.py``) under ``ROOT/reports/<report>-<size>``
(ROOT ``/tmp/kafkatool-bench`` or ``KAFKATOOL_BENCH_DIR``), seeded, with a ``bench-meta.json``
holding the counts and known answers. The two sizes of a report differ in record count only:
the state a report holds (groups, committed partitions, transactional ids, topics) is the
same, so peak RSS should not grow with the size.

Every measurement is a whole process timed by ``bench_dump.run_process`` (wall time around
spawn and reap, peak RSS from GNU time, stdout to /dev/null, stderr captured), commands
interleaved run by run on page-cached files, best of ``--runs`` kept; kafkatool runs from a
snapshot of ``kafkatool/`` taken at the start (``--live``: the working tree). Before timing
(skip with ``--no-check``) each report's jsonl is checked against the generator's known
answers. The table and the JSON report (``bench/out/reports-<timestamp>.json``) give seconds,
records/s, peak RSS and the ratio report seconds / floor seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))

import bench_dump as bd  # noqa: E402
import topicdata as td  # noqa: E402

from kafkatool.record import message  # noqa: E402
from kafkatool.record.control import (  # noqa: E402
    ControlType,
    encode_control_key,
    encode_end_txn_marker,
    encode_leader_change,
    encode_snapshot_footer,
    encode_snapshot_header,
)
from kafkatool.record.schemas import MESSAGES  # noqa: E402
from kafkatool.record.v2 import RecordSpec, encode_batch  # noqa: E402
from kafkatool.record.varint import encode_uvarint  # noqa: E402

MiB = 1 << 20
DEFAULT_ROOT = os.path.join(os.environ.get("KAFKATOOL_BENCH_DIR", "/tmp/kafkatool-bench"), "reports")
GENERATOR_VERSION = 2
DEFAULT_SEED = 20261126
BASE_TS = 1_764_000_000_000  # 2025-11-24
SEGMENT_BYTES = 64 * MiB
REPORTS = ("groups", "transactions", "metadata")
#: per report: (small, large) in records (groups, metadata) or MiB of data batches (transactions)
FULL = {"groups": (500_000, 2_000_000), "transactions": (64, 256), "metadata": (250_000, 1_000_000)}
QUICK = {"groups": (100_000, 400_000), "transactions": (16, 64), "metadata": (50_000, 200_000)}


# --------------------------------------------------------------------------- writing segments


class SegmentWriter:
    """Batches of one partition streamed into ``<20 digits>.log`` files, rolled at ~``SEGMENT_BYTES``."""

    def __init__(self, directory: str, base: int = 0) -> None:
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.next_offset = base
        self.bytes = 0
        self.batches = 0
        self._f = None
        self._open(base)

    def _open(self, base: int) -> None:
        if self._f:
            self._f.close()
        self._f = open(os.path.join(self.directory, f"{base:020d}.log"), "wb")
        self._seg_bytes = 0

    def batch(self, records: list[tuple[bytes | None, bytes | None]], ts: int, **kw) -> int:
        """Append one v2 batch; returns its first offset."""
        if self._seg_bytes >= SEGMENT_BYTES:
            self._open(self.next_offset)
        first = self.next_offset
        blob = encode_batch([RecordSpec(first + i, ts, k, v) for i, (k, v) in enumerate(records)], **kw)
        self._f.write(blob)
        self._seg_bytes += len(blob)
        self.bytes += len(blob)
        self.batches += 1
        self.next_offset += len(records)
        return first

    def marker(self, pid: int, epoch: int, commit: bool, ts: int) -> int:
        key = encode_control_key(ControlType.COMMIT if commit else ControlType.ABORT)
        return self.batch([(key, encode_end_txn_marker(5))], ts, producer_id=pid, producer_epoch=epoch,
                          is_transactional=True, is_control=True)

    def close(self) -> None:
        if self._f:
            self._f.close()
            self._f = None


def _dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


# --------------------------------------------------------------------------- (1) __consumer_offsets

N_GROUPS = 300
GROUP_TOPICS = 2
PARTS_PER_TOPIC = 8


def gen_groups(root: str, records: int, seed: int) -> dict:
    """A __consumer_offsets-0 of ~``records`` records: OffsetCommit v3 in batches of 10 (one group's
    partitions), a GroupMetadata v3 (3 consumer members, subscription + assignment) every 50 batches,
    an offset tombstone every 200 batches, a group tombstone (group expired, recommits later) every
    5000 batches. 300 groups x 16 partitions whatever the size."""
    rnd = random.Random(seed)
    w = SegmentWriter(os.path.join(root, "__consumer_offsets-0"))
    groups = [f"group-{g:04d}" for g in range(N_GROUPS)]
    topics = {g: [f"topic-{(gi * 7 + t) % 40:02d}" for t in range(GROUP_TOPICS)] for gi, g in enumerate(groups)}
    tps = {g: [(t, p) for t in topics[g] for p in range(PARTS_PER_TOPIC)] for g in groups}
    keys = {(g, t, p): td.offset_commit_key(g, t, p) for g in groups for t, p in tps[g]}
    gkeys = {g: td.group_metadata_key(g) for g in groups}
    committed: dict[tuple[str, str, int], int] = {}
    generation = {g: 0 for g in groups}
    alive: set[str] = set()
    n = 0
    b = 0
    ts = BASE_TS
    while n < records:
        b += 1
        ts += 7
        g = groups[rnd.randrange(N_GROUPS)]
        if b % 50 == 0:
            generation[g] += 1
            members = []
            for m in range(3):
                mine = tps[g][m::3]
                assignment: dict[str, list[int]] = {}
                for t, p in mine:
                    assignment.setdefault(t, []).append(p)
                members.append(td.classic_member(f"consumer-{m}-{g}-{generation[g]}", client_id=f"consumer-{m}",
                                                 subscription=td.consumer_subscription(topics[g]),
                                                 assignment=td.consumer_assignment(assignment)))
            value = td.group_metadata_value(generation=generation[g], leader=members[0]["memberId"],
                                            members=members, current_state_timestamp=ts)
            w.batch([(gkeys[g], value)], ts)
            alive.add(g)
            n += 1
            continue
        if b % 5000 == 0 and g in alive:  # the group expires: its offsets and metadata deleted
            recs = [(keys[(g, t, p)], None) for t, p in tps[g] if (g, t, p) in committed]
            recs.append((gkeys[g], None))
            w.batch(recs, ts)
            for t, p in tps[g]:
                committed.pop((g, t, p), None)
            alive.discard(g)
            n += len(recs)
            continue
        if b % 200 == 0:  # one expired offset
            t, p = tps[g][rnd.randrange(len(tps[g]))]
            if (g, t, p) in committed:
                w.batch([(keys[(g, t, p)], None)], ts)
                del committed[(g, t, p)]
                n += 1
                continue
        start = rnd.randrange(len(tps[g]))
        recs = []
        for i in range(10):
            t, p = tps[g][(start + i) % len(tps[g])]
            off = committed.get((g, t, p), 0) + rnd.randrange(1, 500)
            committed[(g, t, p)] = off
            recs.append((keys[(g, t, p)], td.offset_commit_value(off, ts, leader_epoch=3)))
        w.batch(recs, ts)
        n += len(recs)
    w.close()
    with_offsets = {g for g, _t, _p in committed}
    sample = sorted(committed)[:: max(1, len(committed) // 20)]
    return {"records": n, "batches": w.batches, "bytes": _dir_bytes(root),
            "groups": len(with_offsets | alive), "offsets": len(committed),
            "sample": [[g, t, p, committed[(g, t, p)]] for g, t, p in sample]}


# --------------------------------------------------------------------------- (2) transactions

N_PRODUCERS = 40
DATA_PARTITIONS = 6
OPEN_LEFT = 3
RECORD_VALUE = 1000
RECORDS_PER_BATCH = 16


def gen_transactions(root: str, mib: int, seed: int) -> dict:
    """``mib`` MiB of transactional data batches (16 records of 1000 B: ~16 KiB) over 6 partitions
    of ``orders``: each transaction writes one batch to 3 partitions, then a COMMIT (1 in 10 an
    ABORT) marker in each; ``__transaction_state-0`` holds Ongoing / Prepare* / Complete* of each
    (40 transactional ids). The last 3 transactions stay open (data, Ongoing, no marker)."""
    rnd = random.Random(seed)
    value = bytes(rnd.randrange(256) for _ in range(RECORD_VALUE))
    parts = [SegmentWriter(os.path.join(root, f"orders-{p}")) for p in range(DATA_PARTITIONS)]
    state = SegmentWriter(os.path.join(root, "__transaction_state-0"))
    keys = {i: td.txn_log_key(f"txn-{i:03d}") for i in range(N_PRODUCERS)}
    epochs = {i: 0 for i in range(N_PRODUCERS)}
    target = mib * MiB
    ts = BASE_TS
    txns = committed = aborted = 0
    open_pids: list[int] = []
    i = 0
    while True:
        data_bytes = sum(p.bytes for p in parts)
        last = data_bytes >= target
        if last and len(open_pids) >= OPEN_LEFT:
            break
        pi = i % N_PRODUCERS
        i += 1
        pid, epoch = 10_000 + pi, epochs[pi]
        chosen = rnd.sample(range(DATA_PARTITIONS), 3)
        tp = {"orders": sorted(chosen)}
        ts += 20
        state.batch([(keys[pi], td.txn_log_value(pid, epoch, 1, partitions=tp, last_update=ts, start=ts))], ts)
        for c in chosen:
            parts[c].batch([(None, value)] * RECORDS_PER_BATCH, ts, producer_id=pid, producer_epoch=epoch,
                           is_transactional=True, base_sequence=0)
        txns += 1
        if last:
            open_pids.append(pid)
            continue
        commit = rnd.random() >= 0.1
        ts += 5
        state.batch([(keys[pi], td.txn_log_value(pid, epoch, 2 if commit else 3, partitions=tp, last_update=ts,
                                                 start=ts - 5))], ts)
        for c in chosen:
            parts[c].marker(pid, epoch, commit, ts)
        state.batch([(keys[pi], td.txn_log_value(pid, epoch, 4 if commit else 5, partitions={}, last_update=ts,
                                                 start=ts - 5))], ts)
        committed += commit
        aborted += not commit
    for w in (*parts, state):
        w.close()
    data_records = sum(p.next_offset for p in parts)
    return {"records": data_records + state.next_offset, "batches": sum(p.batches for p in parts) + state.batches,
            "bytes": _dir_bytes(root), "data_bytes": sum(p.bytes for p in parts), "transactions": txns,
            "committed": committed, "aborted": aborted, "open_pids": sorted(open_pids),
            "transactional_ids": N_PRODUCERS, "state_records": state.next_offset, "now": ts + 1000}


# --------------------------------------------------------------------------- (3) __cluster_metadata

API = {name: m["apiKey"] for name, m in MESSAGES.items() if m["category"] == "metadata"}
N_BROKERS = 6
BASE_TOPICS = 200
BASE_PARTS = 10
EPOCH = 7


def frame(name: str, data: dict, version: int = 0) -> bytes:
    """A metadata record value (spec §14.3): uvarint frame version 1, apiKey, version, then the body
    (as tests/test_metadata_report.py frames it)."""
    return encode_uvarint(1) + encode_uvarint(API[name]) + encode_uvarint(version) + message.encode(name, data, version)


def _uuid(kind: str, n: int) -> str:
    import base64

    raw = f"{kind}-{n:010d}".encode().ljust(16, b"\0")[:16]
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _broker(bid: int, epoch: int) -> bytes:
    return frame("RegisterBrokerRecord", {
        "BrokerId": bid, "IncarnationId": _uuid("inc", bid * 1000 + epoch), "BrokerEpoch": epoch,
        "EndPoints": [{"Name": "PLAINTEXT", "Host": f"broker-{bid}", "Port": 9092, "SecurityProtocol": 0}],
        "Features": [{"Name": "metadata.version", "MinSupportedVersion": 1, "MaxSupportedVersion": 19}],
        "Rack": f"r{bid % 3}", "Fenced": False}, 1)


def _partition(tid: str, p: int, replicas: list[int]) -> bytes:
    return frame("PartitionRecord", {"PartitionId": p, "TopicId": tid, "Replicas": replicas, "Isr": replicas,
                                     "RemovingReplicas": [], "AddingReplicas": [], "Leader": replicas[0],
                                     "LeaderEpoch": 0, "PartitionEpoch": 0})


def _topic(name: str, tid: str, parts: int) -> list[bytes]:
    out = [frame("TopicRecord", {"Name": name, "TopicId": tid})]
    out += [_partition(tid, p, [1 + (p + k) % N_BROKERS for k in range(3)]) for p in range(parts)]
    out.append(frame("ConfigRecord", {"ResourceType": 2, "ResourceName": name, "Name": "retention.ms",
                                      "Value": "604800000"}))
    return out


def gen_metadata(root: str, records: int, seed: int) -> dict:
    """A snapshot ``<S>-<epoch>.checkpoint`` (features, 6 brokers, 200 topics x 10 partitions, a
    config each) and a log from S of ~``records`` records in batches of 1-100: mostly
    PartitionChangeRecords (leader/ISR moves), a new topic (TopicRecord, 10 PartitionRecords, a
    ConfigRecord) every 200 batches and its RemoveTopicRecord 50 batches later, ConfigRecord
    changes, broker fence/unfence and re-registrations, NoOpRecords. The number of live topics
    stays ~200 whatever the size."""
    rnd = random.Random(seed)
    part = os.path.join(root, "__cluster_metadata-0")
    os.makedirs(part, exist_ok=True)
    with open(os.path.join(root, "meta.properties"), "w") as f:
        f.write("node.id=3000\nversion=1\ncluster.id=QmVuY2hDbHVzdGVyLUlkMQ\n")
    base = [frame("FeatureLevelRecord", {"Name": "metadata.version", "FeatureLevel": 19})]
    base += [_broker(b, 100 + b) for b in range(1, N_BROKERS + 1)]
    topics: dict[str, tuple[str, int]] = {}
    for t in range(BASE_TOPICS):
        tid = _uuid("topic", t)
        topics[tid] = (f"base-{t:04d}", BASE_PARTS)
        base += _topic(f"base-{t:04d}", tid, BASE_PARTS)
    snap_end = len(base) + 2  # header + records + footer take offsets 0..n+1; the log starts after
    # the snapshot: header, data batches of 500, footer
    snap = encode_batch([RecordSpec(0, BASE_TS, encode_control_key(ControlType.SNAPSHOT_HEADER),
                                    encode_snapshot_header(BASE_TS))], is_control=True, partition_leader_epoch=EPOCH)
    for i in range(0, len(base), 500):
        chunk = base[i:i + 500]
        snap += encode_batch([RecordSpec(1 + i + j, BASE_TS, None, v) for j, v in enumerate(chunk)],
                             partition_leader_epoch=EPOCH)
    snap += encode_batch([RecordSpec(len(base) + 1, BASE_TS, encode_control_key(ControlType.SNAPSHOT_FOOTER),
                                     encode_snapshot_footer())], is_control=True, partition_leader_epoch=EPOCH)
    with open(os.path.join(part, f"{snap_end:020d}-{EPOCH:010d}.checkpoint"), "wb") as f:
        f.write(snap)

    w = SegmentWriter(part, base=snap_end)
    ts = BASE_TS + 1000
    w.batch([(encode_control_key(ControlType.LEADER_CHANGE), encode_leader_change(3000, [3000]))], ts,
            is_control=True, partition_leader_epoch=EPOCH)
    tids = list(topics)
    leaders: dict[tuple[str, int], int] = {}
    broker_epoch = {b: 100 + b for b in range(1, N_BROKERS + 1)}
    created: list[tuple[int, str]] = []
    b = 0
    n_created = n_removed = 0
    while w.next_offset - snap_end < records:
        b += 1
        ts += 3
        recs: list[bytes] = []
        if b % 200 == 0:
            tid = _uuid("new", b)
            name = f"new-{b:08d}"
            recs = _topic(name, tid, BASE_PARTS)
            topics[tid] = (name, BASE_PARTS)
            created.append((b + 50, tid))
            n_created += 1
        elif created and created[0][0] <= b:
            _, tid = created.pop(0)
            recs = [frame("RemoveTopicRecord", {"TopicId": tid})]
            del topics[tid]
            for p in range(BASE_PARTS):
                leaders.pop((tid, p), None)
            n_removed += 1
        elif b % 97 == 0:
            bid = 1 + rnd.randrange(N_BROKERS)
            broker_epoch[bid] += 1000
            recs = [_broker(bid, broker_epoch[bid])]
        elif b % 53 == 0:
            bid = 1 + rnd.randrange(N_BROKERS)
            name = "FenceBrokerRecord" if b % 2 else "UnfenceBrokerRecord"
            recs = [frame(name, {"Id": bid, "Epoch": broker_epoch[bid]})]
        elif b % 31 == 0:
            t = topics[tids[rnd.randrange(len(tids))]][0]
            recs = [frame("ConfigRecord", {"ResourceType": 2, "ResourceName": t, "Name": "retention.ms",
                                           "Value": str(rnd.randrange(1, 10**9))}) for _ in range(5)]
        elif b % 101 == 0:
            recs = [frame("NoOpRecord", {})]
        else:
            for _ in range(rnd.randrange(1, 101)):
                tid = tids[rnd.randrange(len(tids))]
                p = rnd.randrange(BASE_PARTS)
                leader = 1 + rnd.randrange(N_BROKERS)
                leaders[(tid, p)] = leader
                isr = sorted({leader, 1 + (leader % N_BROKERS)})
                recs.append(frame("PartitionChangeRecord", {"PartitionId": p, "TopicId": tid, "Leader": leader,
                                                            "Isr": isr}))
        w.batch([(None, v) for v in recs], ts, partition_leader_epoch=EPOCH)
    w.close()
    sample = sorted(leaders)[:: max(1, len(leaders) // 20)]
    return {"records": w.next_offset - snap_end + len(base), "log_records": w.next_offset - snap_end,
            "snapshot_records": len(base), "batches": w.batches, "bytes": _dir_bytes(root),
            "topics": len(topics), "partitions": sum(n for _, n in topics.values()), "created": n_created,
            "removed": n_removed, "sample": [[topics[t][0], p, leaders[(t, p)]] for t, p in sample]}


GENERATORS = {"groups": gen_groups, "transactions": gen_transactions, "metadata": gen_metadata}


def ensure(root: str, report: str, size: int, seed: int) -> tuple[str, dict]:
    """The log dir of ``report`` at ``size`` (generated once; reused while its meta matches)."""
    path = os.path.join(root, f"{report}-{size}-logdir")  # not "<name>-<digits>": a partition dir
    meta_path = os.path.join(path, "bench-meta.json")
    want = {"generator": GENERATOR_VERSION, "seed": seed, "size": size}
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        if all(meta.get(k) == v for k, v in want.items()):
            return path, meta
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    tmp = path + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    t0 = time.perf_counter()
    meta = {**want, **GENERATORS[report](tmp, size, seed)}
    meta["generate_seconds"] = round(time.perf_counter() - t0, 1)
    with open(os.path.join(tmp, "bench-meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    os.replace(tmp, path)
    print(f"generated {path}: {meta['records']:,} records, {meta['bytes'] / MiB:.0f} MiB in {meta['generate_seconds']} s",
          flush=True)
    return path, meta


# --------------------------------------------------------------------------- commands and checks


def commands(report: str, meta: dict) -> dict[str, list[str]]:
    """The timed commands on one log dir: the report (table, jsonl) and its floors."""
    if report == "groups":
        return {"groups table": ["groups", "-q"], "groups jsonl": ["groups", "-q", "--format", "jsonl"],
                "groups --group (1 of 300)": ["groups", "-q", "--format", "jsonl", "--group", "group-0001"],
                "stats": ["stats", "-q"], "dump --offsets-decoder": ["dump", "--offsets-decoder"]}
    if report == "transactions":
        now = ["--now", str(meta["now"])]
        return {"transactions table": ["transactions", "-q", *now],
                "transactions jsonl": ["transactions", "-q", "--format", "jsonl", *now],
                "stats": ["stats", "-q"]}
    return {"metadata table": ["metadata", "-q"], "metadata jsonl": ["metadata", "-q", "--format", "jsonl"],
            "stats": ["stats", "-q"], "dump --cluster-metadata-decoder": ["dump", "--cluster-metadata-decoder"]}


#: exit statuses that are the right answer (transactions exits 1 when it finds an open transaction)
OK_EXIT = {"transactions table": {1}, "transactions jsonl": {1}}


def full_command(args: list[str], path: str) -> list[str]:
    return [*bd.kafkatool_exe(), *args, path]


def _jsonl(args: list[str], path: str) -> tuple[int, list[dict], str]:
    p = subprocess.run(full_command(args, path), capture_output=True, text=True, check=False, env=bd.CHILD_ENV,
                       cwd=bd.CHILD_CWD)
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines() if line.strip()], p.stderr


def check(report: str, path: str, meta: dict) -> list[str]:
    """What the report's jsonl says that differs from the generator's known answers."""
    wrong: list[str] = []
    if report == "groups":
        code, objs, err = _jsonl(["groups", "-q", "--format", "jsonl"], path)
        groups = [o for o in objs if o.get("type") == "group"]
        if code != 0:
            wrong.append(f"groups exited {code}: {err.strip()[-300:]}")
        if len(groups) != meta["groups"]:
            wrong.append(f"{len(groups)} groups reported, {meta['groups']} written")
        offsets = {}
        for g in groups:
            for o in g.get("offsets") or []:
                offsets[(g.get("groupId"), o.get("topic"), o.get("partition"))] = o.get("offset")
        if len(offsets) != meta["offsets"]:
            wrong.append(f"{len(offsets)} committed offsets reported, {meta['offsets']} written")
        for g, t, p, off in meta["sample"]:
            if offsets.get((g, t, p)) != off:
                wrong.append(f"{g} {t}-{p}: offset {offsets.get((g, t, p))}, written {off}")
    elif report == "transactions":
        code, objs, err = _jsonl(["transactions", "-q", "--format", "jsonl", "--now", str(meta["now"])], path)
        if code != 1:
            wrong.append(f"transactions exited {code} (1 expected: open transactions): {err.strip()[-300:]}")
        ids = [o for o in objs if o.get("type") == "transactionalId"]
        opens = [o for o in objs if o.get("type") == "openTransaction"]
        if len(ids) != meta["transactional_ids"]:
            wrong.append(f"{len(ids)} transactional ids reported, {meta['transactional_ids']} written")
        pids = sorted({o.get("producerId") for o in opens})
        if pids != meta["open_pids"]:
            wrong.append(f"open transactions of producer ids {pids}, left open: {meta['open_pids']}")
        data = [o for o in objs if o.get("type") == "partition" and o.get("topic") == "orders"]
        markers = (sum(o.get("committed", 0) for o in data), sum(o.get("aborted", 0) for o in data))
        if markers != (3 * meta["committed"], 3 * meta["aborted"]):
            wrong.append(f"COMMIT/ABORT markers counted {markers}, written {3 * meta['committed'], 3 * meta['aborted']}")
    else:
        code, objs, err = _jsonl(["metadata", "-q", "--format", "jsonl"], path)
        if code != 0:
            wrong.append(f"metadata exited {code}: {err.strip()[-300:]}")
        topics = [o for o in objs if o.get("type") == "topic"]
        parts = {(o.get("topic"), o.get("partition")): o for o in objs if o.get("type") == "partition"}
        if len(topics) != meta["topics"] or len(parts) != meta["partitions"]:
            wrong.append(f"{len(topics)} topics, {len(parts)} partitions reported; "
                         f"{meta['topics']}, {meta['partitions']} written")
        for t, p, leader in meta["sample"]:
            got = (parts.get((t, p)) or {}).get("leader")
            if got != leader:
                wrong.append(f"{t}-{p}: leader {got}, written {leader}")
    return wrong


# --------------------------------------------------------------------------- measuring


@dataclass
class Result:
    report: str
    size: str
    command: str
    records: int
    bytes: int
    seconds: float
    user_s: float
    max_rss_mib: float
    runs: list[float]

    @property
    def krec_per_s(self) -> float:
        return self.records / self.seconds / 1e3


def warm(path: str) -> None:
    for d, _, fs in os.walk(path):
        for f in fs:
            bd.warm_cache(os.path.join(d, f))


def measure(report: str, size: str, path: str, meta: dict, runs: int) -> list[Result]:
    cmds = commands(report, meta)
    times: dict[str, list[float]] = {c: [] for c in cmds}
    best: dict[str, bd.Run] = {}
    rss = {c: 0.0 for c in cmds}
    warm(path)
    for _ in range(runs):
        for name, args in cmds.items():  # interleaved: every command sees the same machine state
            run, _l, _d = bd.run_process(full_command(args, path))
            if run.exit_code not in OK_EXIT.get(name, {0}):
                raise SystemExit(f"{name} on {path} exited {run.exit_code}: {run.stderr}")
            times[name].append(run.seconds)
            rss[name] = max(rss[name], run.max_rss_mib)
            if name not in best or run.seconds < best[name].seconds:
                best[name] = run
    return [Result(report, size, c, meta["records"], meta["bytes"], best[c].seconds, best[c].user_s, rss[c], times[c])
            for c in cmds]


def table(results: list[Result]) -> str:
    rows = [f"{'report':<12} {'size':<6} {'records':>9} {'MiB':>5}  {'command':<32} {'seconds':>8} {'krec/s':>8} "
            f"{'RSS MiB':>8} {'/stats':>7} {'/dump':>6}"]
    for (rep, size) in dict.fromkeys((r.report, r.size) for r in results):
        rs = {r.command: r for r in results if r.report == rep and r.size == size}
        stats = rs["stats"].seconds
        dump = next((r.seconds for c, r in rs.items() if c.startswith("dump")), None)
        for c, r in rs.items():
            rows.append(f"{rep:<12} {size:<6} {r.records:>9,} {r.bytes / MiB:>5.0f}  {c:<32} {r.seconds:>8.3f} "
                        f"{r.krec_per_s:>8.0f} {r.max_rss_mib:>8.1f} {r.seconds / stats:>7.2f} "
                        f"{(f'{r.seconds / dump:6.2f}' if dump else '     -')}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=DEFAULT_ROOT, help=f"where the log dirs live (default {DEFAULT_ROOT})")
    ap.add_argument("--quick", action="store_true", help="small log dirs and 1 run: a smoke check")
    ap.add_argument("--reports", default=",".join(REPORTS), help=f"comma separated subset of: {', '.join(REPORTS)}")
    ap.add_argument("--sizes", default="small,large", help="comma separated subset of: small, large")
    ap.add_argument("--runs", type=int, help="timed runs per command, best kept (default 3; 1 with --quick)")
    ap.add_argument("--no-check", action="store_true", help="skip the untimed check of the reports' answers")
    ap.add_argument("--live", action="store_true", help="run the working tree's kafkatool, not a snapshot taken at the start")
    ap.add_argument("--out", default=os.path.join(HERE, "out"), help="directory for the JSON report")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = ap.parse_args(argv)
    runs = args.runs or (1 if args.quick else 3)
    reports = [r for r in args.reports.split(",") if r]
    sizes = [s for s in args.sizes.split(",") if s]
    for r in reports:
        if r not in REPORTS:
            ap.error(f"unknown report {r!r}")
    for s in sizes:
        if s not in ("small", "large"):
            ap.error(f"unknown size {s!r}")

    bench_root = os.path.dirname(args.root.rstrip("/")) or args.root
    snapshot = None if args.live else bd.snapshot_kafkatool(bench_root)
    bd.set_child_env(bench_root, snapshot)
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    spec = QUICK if args.quick else FULL
    data = []
    for r in reports:
        for s in sizes:
            path, meta = ensure(args.root, r, spec[r][0 if s == "small" else 1], args.seed)
            data.append((r, s, path, meta))
    if not args.no_check:
        for r, s, path, meta in data:
            wrong = check(r, path, meta)
            if wrong:
                print("\n".join(f"CHECK FAILED {r} {s}: {w}" for w in wrong[:20]))
                return 1
        print(f"checked: every report's jsonl matches the generator's known answers ({len(data)} log dirs)", flush=True)
    results = []
    for r, s, path, meta in data:
        results += measure(r, s, path, meta, runs)
        print(table([x for x in results if (x.report, x.size) == (r, s)]).split("\n", 1)[1], flush=True)
    text = table(results)
    load_end = os.getloadavg()
    print(text)
    print(f"load average at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, time.strftime("reports-%Y%m%d-%H%M%S.json"))
    with open(out, "w") as f:
        json.dump({"runs": runs, "quick": args.quick, "kafkatool": snapshot or "working tree",
                   "load_start": load, "load_end": load_end,
                   "data": {f"{r}-{s}": meta for r, s, _p, meta in data},
                   "results": [{**asdict(x), "krec_per_s": x.krec_per_s} for x in results]}, f, indent=1)
        f.write("\n")
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
